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
	r->reclaim_more = 1;
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
	uint64_t lo = 0, hi = 0;
	for (unsigned k = 0; k < FS_MAX_HOLDS; k++) {
		uint64_t h = holds[k];
		if (h > r->published) {
			bad++;
			h = 0;
		}
		held += h != 0;
		if (h && (lo == 0 || h < lo))
			lo = h;
		if (h > hi)
			hi = h;
		if (cl->holds[k] != h)
			r->reclaim_more = 1;
		cl->holds[k] = h;
	}
	if (cl->holds_seen != r->published)
		r->reclaim_more = 1;
	cl->holds_seen = r->published;
	cl->hold_min = lo;
	cl->hold_max = hi;
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

void fsr_client_reach(struct fsr *r, uint32_t client, uint64_t reach)
{
	if (client >= r->max_clients || !r->client[client].live)
		return;
	if (reach > r->published) /* no newer table exists to be read */
		reach = r->published ? r->published : 1;
	if (r->client[client].reach != reach)
		r->reclaim_more = 1;
	r->client[client].reach = reach;
}

/*
 * What a client's holds keep from reuse (issue 33).  A slot is in the
 * tables pub..retire-1.  A client reads the tables of the epochs it holds
 * (fs_lookup) and, through fs_lookup_live, newer ones up to its declared
 * reach (fs_regions.h); so its holds pin a RETIRING slot when the slot is
 * in one of the tables hold_min..max(hold_max, reach): retire > hold_min
 * and pub <= that.  A client that declared no reach (0: a library that
 * does not say) may read every newer table, and pins every slot retired
 * after its oldest hold, as every hold did before.  Without this an
 * engine holding one epoch for 20 ms kept every slot evicted meanwhile,
 * though 87 % of them were loaded after its epoch and were in no table it
 * could read (fs-demo-engine beside a 20 ms one: 69 % -> 53 % hits).
 */
static int client_pins(const struct fsr_client *cl, const struct fsr_slot *sl)
{
	if (!cl->live || cl->hold_min == 0 || sl->retire <= cl->hold_min)
		return 0;
	if (cl->reach == 0)
		return 1;
	uint64_t vis = cl->reach > cl->hold_max ? cl->reach : cl->hold_max;
	return sl->pub <= vis;
}

static int pinned_by_any(const struct fsr *r, const struct fsr_slot *sl)
{
	for (uint32_t c = 0; c < r->max_clients; c++)
		if (client_pins(&r->client[c], sl))
			return 1;
	return 0;
}

/* Free the RETIRING slots of `card` with retire <= upto that no live
 * client pins, wherever they are in the list. */
static unsigned reclaim_unpinned(struct fsr *r, uint32_t card, uint64_t upto)
{
	struct fsr_card *cd = &r->card[card];
	unsigned n = 0;
	uint32_t prev = FSR_NONE;
	for (uint32_t s = cd->ret_head; s != FSR_NONE && cd->slot[s].retire <= upto;) {
		uint32_t next = cd->slot[s].next;
		if (pinned_by_any(r, &cd->slot[s])) {
			prev = s;
		} else {
			fsr_retiring_free(cd, prev, s);
			n++;
		}
		s = next;
	}
	fsr_ctr_add(&cd->ctr[FS_CC_freed_past_holds], n);
	return n;
}

static int one_of(uint32_t row, const uint32_t *clients, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (clients[i] == row)
			return 1;
	return 0;
}

unsigned fsr_pinned(const struct fsr *r, uint32_t card, const uint32_t *clients, unsigned n, int others)
{
	if (card >= r->cards)
		return 0;
	const struct fsr_card *cd = &r->card[card];
	unsigned pinned = 0;
	/* Only published retirements: a slot evicted since waits for the
	 * publish, not for anyone's holds. */
	for (uint32_t s = cd->ret_head; s != FSR_NONE && cd->slot[s].retire <= r->published;
	     s = cd->slot[s].next) {
		const struct fsr_slot *sl = &cd->slot[s];
		if (others && (sl->evict_for == FSR_NONE || one_of(sl->evict_for, clients, n)))
			continue;
		for (unsigned i = 0; i < n; i++) {
			if (clients[i] < r->max_clients && client_pins(&r->client[clients[i]], sl)) {
				pinned++;
				break;
			}
		}
	}
	return pinned;
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
	uint64_t seen = min_holds_seen(r);
	uint64_t limit = seen < r->published ? seen : r->published;
	uint64_t upto = fsr_min_hold(r);
	if (limit < upto)
		upto = limit;
	unsigned freed = 0;
	/* Every slot retired up to the oldest hold, from the list's head. */
	for (uint32_t c = 0; c < r->cards; c++)
		freed += fsr_slots_reclaim(r, c, upto);
	/* Then, when something changed, those behind it that no hold pins. */
	if (r->reclaim_more) {
		r->reclaim_more = 0;
		for (uint32_t c = 0; c < r->cards; c++)
			freed += reclaim_unpinned(r, c, limit);
	}
	return freed;
}
