/* SPDX-License-Identifier: Apache-2.0 */
/* fsr_clients.c: client rows and the epochs they hold. */
#include <errno.h>
#include <string.h>

#include "fsr_internal.h"

int fsr_client_add(struct fsr *r, uint32_t client)
{
	if (client >= r->max_clients)
		return -EINVAL;
	struct fsr_client *cl = &r->client[client];
	if (cl->live)
		return -EEXIST;
	/* Its holds are unknown until passed in (the engine may have acquired
	 * an epoch before the daemon got to add it): holds_seen = 0 keeps
	 * every RETIRING slot until they are.  A reclaim that ran before the
	 * add cannot be undone, so the daemon must add a client before its
	 * engine may acquire. */
	memset(cl, 0, sizeof(*cl));
	cl->live = 1;
	fsr_learn_client_reset(r, client);
	fsr_ctr_set(&fsr_client_ctr(r, client)[FS_CCL_holds], 0);
	return 0;
}

void fsr_client_remove(struct fsr *r, uint32_t client)
{
	if (client >= r->max_clients || !r->client[client].live)
		return;
	memset(&r->client[client], 0, sizeof(r->client[client]));
	fsr_learn_client_reset(r, client);
	fsr_ctr_set(&fsr_client_ctr(r, client)[FS_CCL_holds], 0);
}

unsigned fsr_client_holds(struct fsr *r, uint32_t client, const uint64_t holds[FS_MAX_HOLDS])
{
	if (client >= r->max_clients || !r->client[client].live || holds == NULL)
		return 0;
	struct fsr_client *cl = &r->client[client];
	unsigned bad = 0, held = 0;
	for (unsigned k = 0; k < FS_MAX_HOLDS; k++) {
		uint64_t h = holds[k];
		if (h > r->published) {
			bad++;
			h = 0;
		}
		held += h != 0;
		cl->holds[k] = h;
	}
	cl->holds_seen = r->published;
	if (bad)
		fsr_ctr_add(&r->c_daemon[FS_C_bad_holds], bad);
	fsr_ctr_set(&fsr_client_ctr(r, client)[FS_CCL_holds], held);
	return bad;
}

int fsr_epoch_held(const struct fsr *r, uint64_t epoch)
{
	if (epoch == 0)
		return 0;
	for (uint32_t c = 0; c < r->max_clients; c++) {
		const struct fsr_client *cl = &r->client[c];
		if (!cl->live)
			continue;
		for (unsigned k = 0; k < FS_MAX_HOLDS; k++)
			if (cl->holds[k] == epoch)
				return 1;
	}
	return 0;
}

uint64_t fsr_min_hold(const struct fsr *r)
{
	uint64_t m = UINT64_MAX;
	for (uint32_t c = 0; c < r->max_clients; c++) {
		const struct fsr_client *cl = &r->client[c];
		if (!cl->live)
			continue;
		for (unsigned k = 0; k < FS_MAX_HOLDS; k++)
			if (cl->holds[k] != 0 && cl->holds[k] < m)
				m = cl->holds[k];
	}
	return m;
}

/* Oldest publish after which some live client's holds were read.  A slot
 * retired in epoch U is safe only when every live client's holds were read
 * after U was published (fs_regions.h: the daemon reads holds only after
 * its store of `current`), so a stale read never frees a slot. */
static uint64_t min_holds_seen(const struct fsr *r)
{
	uint64_t m = UINT64_MAX;
	for (uint32_t c = 0; c < r->max_clients; c++)
		if (r->client[c].live && r->client[c].holds_seen < m)
			m = r->client[c].holds_seen;
	return m;
}

unsigned fsr_reclaim(struct fsr *r)
{
	uint64_t upto = fsr_min_hold(r);
	uint64_t seen = min_holds_seen(r);
	if (seen < upto)
		upto = seen;
	if (r->published < upto)
		upto = r->published;
	unsigned freed = 0;
	for (uint32_t c = 0; c < r->cards; c++)
		freed += fsr_slots_reclaim(r, c, upto);
	return freed;
}
