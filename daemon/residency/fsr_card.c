/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_card.c: a card that goes down (lost, reset, or drained by an
 * operator) leaves the tier for good.  The daemon calls fsr_card_down()
 * when its backend reports the card broken (a failed copy, a sticky CUDA
 * error) or an admin asks (`fsctl card down N`).  After it:
 *
 *  - the card's LOADING and RESIDENT slots are out of the working table at
 *    once, so the next published epoch maps nothing to it and every
 *    engine's lookup answers "not here" (the CPU path, or another card);
 *    a copy in flight never completes: its slot left the table while
 *    LOADING (counted `abandoned`) and a completion reported later is
 *    ignored (counted `done_after_down`, fsr_copy_done);
 *  - the card's want queue and copy candidates are dropped (`dropped`), it
 *    never gets a copy again (fsr_take_copies answers 0), and no card reads
 *    it for placement (fsr_reaches masks it: it is nobody's holder and no
 *    record goes to it);
 *  - a record naming it acts on a live card it read (with one tier: the
 *    layer's home if it read that, else the lowest live card it read), else
 *    it is dropped and counted `dropped` on the card that is down
 *    (fsr_live_card, fsr_policy.c);
 *  - it serves no layer any more (fsr_tiers_quotas: it reserves nothing);
 *    a layer homed on it goes to a live card that serves it already (each
 *    card its own tier: data parallel engines), else the layers homed on
 *    it are dealt out over the live cards in turn, in layer order (as the
 *    first split deals layers over cards): no single card takes all of a
 *    lost card's reserved sizes; from there a layer's home follows its use
 *    as always (fsr_layer_used).  The live cards' reserved sizes are
 *    worked out again; a tier above its new size is trimmed before the
 *    card copies anything (retrim).
 *
 * Its slots leave the table exactly as evicted ones do (RETIRING, then FREE
 * after the grace period), so readers that hold an older epoch keep their
 * window: the core never reuses them (no copy goes to a card that is down),
 * and the daemon neither reuses nor frees the card's memory.  With a real
 * loss or reset that memory may already be gone: an engine that holds an
 * epoch from before the loss and reads a slot of the card then sees its
 * own CUDA call fail, in its own context.  That is the engine's to handle
 * (its kernel on a lost card fails anyway; it recomputes from the arena),
 * the core cannot make those reads safe, only stop handing out new ones.
 *
 * Every card may go down: the tier is then empty, every record is dropped
 * and every lookup misses; engines run every expert on the CPU path, as
 * when the daemon is gone.  A card never comes back: only a restart of the
 * daemon (a new core) brings it up again.
 */
#include <errno.h>

#include "fsr_internal.h"

/* Drop the card's queued wants and copy candidates: nothing goes to it. */
static void drop_wants(struct fsr *r, uint32_t card)
{
	struct fsr_card *cd = &r->card[card];
	struct fsr_want w;
	while (fsr_want_pop(cd, &w)) {
		cd->wanted[w.idx] &= (uint8_t)~FSR_W_QUEUED;
		fsr_ctr_add(&cd->ctr[FS_CC_dropped], 1);
	}
	if (!r->tiers)
		return;
	for (uint32_t l = 0; l < r->layers; l++)
		while (cd->ncand[l] > 0) {
			fsr_cand_del(r, card, l, cd->ncand[l] - 1);
			fsr_ctr_add(&cd->ctr[FS_CC_dropped], 1);
		}
}

/* It serves no layer any more; the layers homed on it go to a live card
 * that serves them already (no one tier: the lowest), else to the live
 * cards in turn; their reserved sizes follow. */
static void move_homes(struct fsr *r, uint32_t card)
{
	uint32_t live[FS_MAX_CARDS], nlive = 0, k = 0, got = 0;
	for (uint32_t c = 0; c < r->cards; c++)
		if (fsr_is_up(r, c))
			live[nlive++] = c;
	for (uint32_t l = 0; l < r->layers; l++)
		r->serves[l] = (uint16_t)(r->serves[l] & ~(1u << card));
	fsr_serves_changed(r, 1u << card); /* a card that is down reserves nothing */
	if (nlive == 0)
		return; /* every card down: the homes stay where they were */
	for (uint32_t l = 0; l < r->layers; l++) {
		if (r->home[l] != card)
			continue;
		uint32_t to = 0;
		while (to < r->cards && !fsr_serves(r, to, l))
			to++;
		if (to == r->cards)
			to = live[k++ % nlive];
		r->home[l] = (uint16_t)to;
		r->home_seen[l] = r->wins; /* the new home's idle clock starts now */
		if (!fsr_serves(r, to, l)) {
			r->serves[l] = (uint16_t)(r->serves[l] | 1u << to);
			r->serve_seen[to * r->layers + l] = r->card_wins[to];
			got |= 1u << to;
		}
	}
	fsr_serves_changed(r, got);
}

int fsr_card_down(struct fsr *r, uint32_t card)
{
	if (r == NULL || card >= r->cards)
		return -EINVAL;
	if (!fsr_is_up(r, card))
		return -EALREADY;
	struct fsr_card *cd = &r->card[card];
	r->down |= 1u << card;
	fsr_ctr_set(&cd->ctr[FS_CC_up], 0);
	for (uint32_t s = 0; s < cd->nslots; s++) {
		uint8_t st = cd->slot[s].state;
		if (st == FSR_LOADING)
			fsr_ctr_add(&cd->ctr[FS_CC_abandoned], 1);
		if (st == FSR_LOADING || st == FSR_RESIDENT)
			fsr_slot_evict(r, card, s);
	}
	drop_wants(r, card);
	move_homes(r, card);
	cd->bus_free = 0;
	/* Publish even when it held nothing: the daemon marks the card down
	 * for engines once an epoch after this is out. */
	r->dirty = 1;
	return 0;
}

int fsr_card_is_down(const struct fsr *r, uint32_t card)
{
	return card < r->cards && !fsr_is_up(r, card);
}

uint32_t fsr_cards_down(const struct fsr *r)
{
	return r->down;
}
