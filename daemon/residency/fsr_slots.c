/* SPDX-License-Identifier: Apache-2.0 */
/* fsr_slots.c: the slot life cycle (FREE -> LOADING -> RESIDENT -> RETIRING
 * -> FREE) and the LRU list of RESIDENT slots. */
#include "fsr_internal.h"

void fsr_gauges(struct fsr_card *cd)
{
	fsr_ctr_set(&cd->ctr[FS_CC_resident], cd->nresident);
	fsr_ctr_set(&cd->ctr[FS_CC_loading], cd->nloading);
}

static void lru_unlink(struct fsr_card *cd, uint32_t s)
{
	struct fsr_slot *sl = &cd->slot[s];
	if (sl->prev != FSR_NONE)
		cd->slot[sl->prev].next = sl->next;
	else
		cd->lru_old = sl->next;
	if (sl->next != FSR_NONE)
		cd->slot[sl->next].prev = sl->prev;
	else
		cd->lru_new = sl->prev;
	sl->prev = sl->next = FSR_NONE;
}

static void lru_push_new(struct fsr_card *cd, uint32_t s)
{
	struct fsr_slot *sl = &cd->slot[s];
	sl->prev = cd->lru_new;
	sl->next = FSR_NONE;
	if (cd->lru_new != FSR_NONE)
		cd->slot[cd->lru_new].next = s;
	else
		cd->lru_old = s;
	cd->lru_new = s;
}

void fsr_lru_touch(struct fsr_card *cd, uint32_t s)
{
	if (cd->lru_new == s)
		return;
	lru_unlink(cd, s);
	lru_push_new(cd, s);
}

void fsr_slot_protect(struct fsr *r, struct fsr_slot *sl, uint32_t client)
{
	if (client < r->max_clients && r->client[client].window_seen) {
		sl->prot_client = client;
		sl->prot_window = r->client[client].newest_window;
	} else {
		sl->prot_client = FSR_NONE;
	}
}

/* Loaded or touched during its client's current window. */
int fsr_slot_protected(const struct fsr *r, const struct fsr_slot *sl)
{
	if (sl->prot_client == FSR_NONE)
		return 0;
	const struct fsr_client *cl = &r->client[sl->prot_client];
	return cl->live && cl->window_seen && cl->newest_window == sl->prot_window;
}

uint32_t fsr_slot_load(struct fsr *r, uint32_t card, uint32_t idx, uint32_t client, unsigned tier)
{
	struct fsr_card *cd = &r->card[card];
	uint32_t s = cd->free_head;
	if (s == FSR_NONE)
		return FSR_NONE;
	struct fsr_slot *sl = &cd->slot[s];
	cd->free_head = sl->next;
	cd->nfree--;
	sl->next = sl->prev = FSR_NONE;
	sl->state = FSR_LOADING;
	if (++sl->gen == FS_GEN_NONE)
		sl->gen = 1;
	sl->layer = idx / r->experts;
	sl->expert = idx % r->experts;
	sl->retire = 0;
	sl->pub = r->published + 1; /* the next publish is the first to map it */
	sl->deadline = UINT64_MAX;
	sl->score = 0.0f; /* the scheduler sets a prediction's */
	sl->tier = (uint8_t)tier;
	sl->load_tier = (uint8_t)tier;
	sl->outcome_due = 0; /* the scheduler's copies only (fsr_sched.c: issue) */
	fsr_slot_protect(r, sl, client);
	cd->slot_of[idx] = s;
	cd->nloading++;
	r->dirty = 1;
	fsr_gauges(cd);
	if (r->tiers)
		fsr_tier_link(r, card, s);
	return s;
}

/* A copy landed: LOADING -> RESIDENT.  Returns the slot, or NULL when the
 * completion is for nothing (a card that is down, a stale generation). */
const struct fsr_slot *fsr_slot_landed(struct fsr *r, uint32_t card, uint32_t slot, uint32_t gen)
{
	if (card >= r->cards)
		return NULL;
	struct fsr_card *cd = &r->card[card];
	if (slot >= cd->nslots)
		return NULL;
	if (!fsr_is_up(r, card)) {
		/* The card went down with this copy in flight: its slot left the
		 * table then, and nothing lands on a card that is down. */
		fsr_ctr_add(&cd->ctr[FS_CC_done_after_down], 1);
		return NULL;
	}
	struct fsr_slot *sl = &cd->slot[slot];
	if (sl->state != FSR_LOADING || sl->gen != gen)
		return NULL;
	sl->state = FSR_RESIDENT;
	cd->nloading--;
	cd->nresident++;
	lru_push_new(cd, slot);
	uint64_t bytes = fsr_bytes(r, fsr_idx(r, sl->layer, sl->expert));
	fsr_ctr_add(&cd->ctr[FS_CC_copied], 1);
	fsr_ctr_add(&cd->ctr[FS_CC_copied_bytes], bytes);
	fsr_ctr_add(&fsr_layer_ctr(r, sl->layer)[FS_CL_copied], 1);
	fsr_gauges(cd);
	return sl;
}

/* Unmark first, copy after: the slot leaves the table now and is rewritten
 * only once the epoch that first lacks it is published and released.  A
 * RESIDENT slot, or a LOADING one when its card goes down (fsr_card.c): its
 * copy is abandoned, and the card is never copied to again. */
void fsr_slot_evict(struct fsr *r, uint32_t card, uint32_t s)
{
	struct fsr_card *cd = &r->card[card];
	struct fsr_slot *sl = &cd->slot[s];
	if (r->tiers) {
		fsr_ghost_put(cd, sl->layer, sl->tier, sl->expert);
		fsr_tier_unlink(r, card, s);
	}
	if (sl->state == FSR_LOADING) {
		cd->nloading--; /* not in the LRU list */
	} else {
		/* Landed and never used: a copy that took bus time for nothing. */
		if (sl->outcome_due)
			fsr_use_outcome(cd, sl->load_tier, 0);
		lru_unlink(cd, s);
		cd->nresident--;
	}
	cd->slot_of[fsr_idx(r, sl->layer, sl->expert)] = FSR_NONE;
	sl->state = FSR_RETIRING;
	sl->retire = r->published + 1;
	sl->evict_for = r->evict_for;
	sl->prot_client = FSR_NONE;
	sl->outcome_due = 0;
	sl->next = FSR_NONE;
	if (cd->ret_tail != FSR_NONE)
		cd->slot[cd->ret_tail].next = s;
	else
		cd->ret_head = s;
	cd->ret_tail = s;
	cd->nretiring++;
	r->dirty = 1;
	fsr_ctr_add(&cd->ctr[FS_CC_evicted], 1);
	fsr_gauges(cd);
}

/* A RETIRING slot leaves its list (prev: the one before it, FSR_NONE at
 * the head) and becomes FREE. */
void fsr_retiring_free(struct fsr_card *cd, uint32_t prev, uint32_t s)
{
	struct fsr_slot *sl = &cd->slot[s];
	if (prev == FSR_NONE)
		cd->ret_head = sl->next;
	else
		cd->slot[prev].next = sl->next;
	if (cd->ret_tail == s)
		cd->ret_tail = prev;
	cd->nretiring--;
	sl->state = FSR_FREE;
	sl->retire = 0;
	sl->next = cd->free_head;
	cd->free_head = s;
	cd->nfree++;
}

/* Free the RETIRING slots of `card` whose retire epoch is <= upto.  Retire
 * epochs never decrease along the list, so stop at the first that fails. */
unsigned fsr_slots_reclaim(struct fsr *r, uint32_t card, uint64_t upto)
{
	struct fsr_card *cd = &r->card[card];
	unsigned n = 0;
	while (cd->ret_head != FSR_NONE && cd->slot[cd->ret_head].retire <= upto) {
		fsr_retiring_free(cd, FSR_NONE, cd->ret_head);
		n++;
	}
	return n;
}
