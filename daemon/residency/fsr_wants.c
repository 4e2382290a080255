/* SPDX-License-Identifier: Apache-2.0 */
/* fsr_wants.c: per card, a bounded FIFO of experts to copy in.  When full,
 * the oldest want is dropped: a newer prediction is the better one. */
#include "fsr_internal.h"

/* The caller checked that w->idx is neither mapped nor wanted. */
void fsr_want_push(struct fsr *r, uint32_t card, const struct fsr_want *w)
{
	struct fsr_card *cd = &r->card[card];
	if (cd->wq_len == cd->wq_cap) {
		struct fsr_want old = {0};
		fsr_want_pop(cd, &old);
		cd->wanted[old.idx] &= (uint8_t)~FSR_W_QUEUED;
		fsr_ctr_add(&cd->ctr[FS_CC_dropped], 1);
	}
	uint32_t at = cd->wq_head + cd->wq_len;
	if (at >= cd->wq_cap)
		at -= cd->wq_cap;
	cd->wq[at] = *w;
	cd->wq_len++;
	cd->wanted[w->idx] |= FSR_W_QUEUED;
}

/* Oldest want; the caller clears or keeps its `wanted` byte. */
int fsr_want_pop(struct fsr_card *cd, struct fsr_want *w)
{
	if (cd->wq_len == 0)
		return 0;
	*w = cd->wq[cd->wq_head];
	if (++cd->wq_head == cd->wq_cap)
		cd->wq_head = 0;
	cd->wq_len--;
	return 1;
}

/* Put a popped want back at the head (its `wanted` byte still set). */
void fsr_want_unpop(struct fsr_card *cd, const struct fsr_want *w)
{
	cd->wq_head = cd->wq_head == 0 ? cd->wq_cap - 1 : cd->wq_head - 1;
	cd->wq[cd->wq_head] = *w;
	cd->wq_len++;
}

/* Older than want_max_age windows behind its client's newest window. */
int fsr_want_stale(const struct fsr *r, const struct fsr_want *w)
{
	if (w->client >= r->max_clients)
		return 0;
	const struct fsr_client *cl = &r->client[w->client];
	if (!cl->window_seen)
		return 0;
	int32_t age = (int32_t)(cl->newest_window - w->window);
	return age > (int32_t)r->want_max_age;
}
