/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_tlist.c: the tier lists.  Each (card, layer, tier) keeps its LOADING
 * and RESIDENT slots in a list, least recently used at `old`; a slot joins
 * when it is loaded, leaves when it is evicted, moves to the young end when
 * it is used, and moves between tiers without a copy (retag).  The card's
 * tier gauges follow.  Below the slot life cycle (fsr_slots.c calls in);
 * calls nothing in the core but through the tier table (a tier's
 * `changed`).
 */
#include "fsr_internal.h"

void fsr_tier_gauges(struct fsr *r, uint32_t card)
{
	struct fsr_card *cd = &r->card[card];
	for (unsigned t = 0; t < FSR_NTIERS; t++)
		if (fsr_tier_ops(t)->gauge >= 0)
			fsr_ctr_set(&cd->ctr[fsr_tier_ops(t)->gauge], cd->ntier[t]);
}

static void link_at(struct fsr_card *cd, uint32_t s, int young)
{
	struct fsr_slot *sl = &cd->slot[s];
	struct fsr_tlist *t = fsr_tl(cd, sl->layer, sl->tier);
	if (young) {
		sl->tprev = t->young;
		sl->tnext = FSR_NONE;
		if (t->young != FSR_NONE)
			cd->slot[t->young].tnext = s;
		else
			t->old = s;
		t->young = s;
	} else {
		sl->tnext = t->old;
		sl->tprev = FSR_NONE;
		if (t->old != FSR_NONE)
			cd->slot[t->old].tprev = s;
		else
			t->young = s;
		t->old = s;
	}
	t->n++;
	cd->ntier[sl->tier]++;
}

static void unlink_from(struct fsr_card *cd, uint32_t s)
{
	struct fsr_slot *sl = &cd->slot[s];
	struct fsr_tlist *t = fsr_tl(cd, sl->layer, sl->tier);
	if (sl->tprev != FSR_NONE)
		cd->slot[sl->tprev].tnext = sl->tnext;
	else
		t->old = sl->tnext;
	if (sl->tnext != FSR_NONE)
		cd->slot[sl->tnext].tprev = sl->tprev;
	else
		t->young = sl->tprev;
	sl->tprev = sl->tnext = FSR_NONE;
	t->n--;
	cd->ntier[sl->tier]--;
}

/* A tier's membership at a layer changes: what it caches about it too. */
static void tier_changed(struct fsr_card *cd, uint32_t s)
{
	const struct fsr_tier_ops *op = fsr_tier_ops(cd->slot[s].tier);
	if (op->changed)
		op->changed(cd, cd->slot[s].layer);
}

/* A slot just loaded (LOADING) joins its tier, youngest. */
void fsr_tier_link(struct fsr *r, uint32_t card, uint32_t s)
{
	link_at(&r->card[card], s, 1);
	tier_changed(&r->card[card], s);
	fsr_tier_gauges(r, card);
}

/* A slot leaving the table (evicted) leaves its tier. */
void fsr_tier_unlink(struct fsr *r, uint32_t card, uint32_t s)
{
	tier_changed(&r->card[card], s);
	unlink_from(&r->card[card], s);
	fsr_tier_gauges(r, card);
}

void fsr_tier_touch(struct fsr_card *cd, uint32_t s)
{
	if (fsr_tl(cd, cd->slot[s].layer, cd->slot[s].tier)->young == s)
		return;
	unlink_from(cd, s);
	link_at(cd, s, 1);
}

/* Move a slot to another tier without a copy: its bytes stay, only the
 * bookkeeping of which reserved size it counts against changes. */
void fsr_tier_retag(struct fsr *r, uint32_t card, uint32_t s, unsigned tier, int young)
{
	struct fsr_card *cd = &r->card[card];
	tier_changed(cd, s);
	unlink_from(cd, s);
	cd->slot[s].tier = (uint8_t)tier;
	link_at(cd, s, young);
	tier_changed(cd, s);
	fsr_tier_gauges(r, card);
}
