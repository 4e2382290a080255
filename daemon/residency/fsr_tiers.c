/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_tiers.c: what the tiers share: their reserved sizes, their slot lists
 * and the order in which slots leave them.
 *
 * Reserved sizes.  A card's slots less its spare ones are shared out over
 * the layers it serves (r->serves, fsr_place.c: with one tier the layers
 * homed on it; without, every layer it runs); each layer's share reserves
 * recency and predicted slots for that layer, and what is left of all the
 * shares is the static tier's, one size for the card: the hottest experts
 * by decayed use wherever they are, since layers differ in how
 * concentrated their routing is (on the qwen route trace a card-wide
 * ranking misses ~6 % less than a per-layer one).  A tier never holds
 * more than its reserved size and no tier takes another's slots, so a
 * burst of predictions cannot push the profile out and a bad profile
 * cannot starve the recency ring.  The spare slots belong to no tier: they
 * keep a few slots FREE so that a copy wanted mid-window can start before
 * the window's epoch is released.
 *
 * Leaving a tier (the eviction order across tiers):
 *  - predicted: an expert that is used (a hit) moves to the recency tier;
 *    one that is not is the first to go, oldest first;
 *  - recency: least recently used first;
 *  - static: a hotter expert displaces the coldest of the card by decayed
 *    use, which moves down to its layer's recency tier when it is hotter
 *    than the recency slot it would replace there, else leaves;
 *  - an expert of the recency or predicted tier that becomes hotter than
 *    the static tier's coldest is promoted into the static tier without a
 *    copy (and the coldest moves down or leaves, as above).
 * Recency and predicted victims used in their client's current window are
 * passed over while others are left (they may be needed again soon).
 */
#include <errno.h>
#include <stdlib.h>

#include "fsr_internal.h"

int fsr_tiers_init(struct fsr *r, uint32_t card)
{
	struct fsr_card *cd = &r->card[card];
	size_t n = (size_t)r->layers * FSR_NTIERS;
	cd->tl = malloc(n * sizeof(*cd->tl));
	cd->quota = calloc(n, sizeof(*cd->quota));
	cd->cand = calloc((size_t)r->layers * r->cand_per_layer, sizeof(*cd->cand));
	cd->ncand = calloc(r->layers, sizeof(*cd->ncand));
	cd->cold = malloc(r->layers * sizeof(*cd->cold));
	cd->cold_ok = calloc(r->layers, 1);
	if (!cd->tl || !cd->quota || !cd->cand || !cd->ncand || !cd->cold || !cd->cold_ok)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		cd->tl[i] = (struct fsr_tlist){FSR_NONE, FSR_NONE, 0};
	fsr_tiers_quotas(r, card);
	return 0;
}

/* A layer's recency and predicted sizes from its share (fsr_core.c says
 * why the FSR_AUTO values are what they are). */
static void split_share(const struct fsr *r, uint32_t share, uint32_t *rec, uint32_t *pred)
{
	uint32_t sixteenth = share / 16 ? share / 16 : 1;
	uint32_t p = r->cfg_predicted == FSR_AUTO ? (sixteenth < 4 ? sixteenth : 4) : r->cfg_predicted;
	uint32_t k = r->cfg_recency == FSR_AUTO ? sixteenth : r->cfg_recency;
	if (share == 0)
		p = k = 0;
	if (r->cfg_recency == FSR_ALL) {
		p = p < share ? p : share;
		k = share - p;
	} else {
		k = k < share ? k : share;
		p = p < share - k ? p : share - k;
	}
	*rec = k;
	*pred = p;
}

/* Reserved sizes of one card, from the layers it serves now.  A layer
 * moving between cards can leave a tier above its new size; the scheduler
 * then trims it (fsr_sched.c) before it copies anything. */
void fsr_tiers_quotas(struct fsr *r, uint32_t card)
{
	struct fsr_card *cd = &r->card[card];
	uint32_t nl = 0;
	int up = fsr_is_up(r, card); /* a card that is down reserves nothing (fsr_card.c) */
	for (uint32_t l = 0; l < r->layers; l++)
		nl += up && fsr_serves(r, card, l);
	uint32_t spare = r->cfg_spare;
	if (spare == FSR_AUTO) /* one per layer, at most 1 % of the card (fsr_core.c) */
		spare = nl < cd->nslots / 128 ? nl : cd->nslots / 128;
	uint32_t avail = spare < cd->nslots ? cd->nslots - spare : 0;
	uint32_t base = nl ? avail / nl : 0, extra = nl ? avail % nl : 0, i = 0;
	cd->quota_total = nl ? avail : 0;
	cd->static_quota = cd->quota_total;
	for (uint32_t l = 0; l < r->layers; l++) {
		uint32_t *q = &cd->quota[l * FSR_NTIERS];
		q[FSR_TIER_POOL] = q[FSR_TIER_STATIC] = q[FSR_TIER_RECENCY] = q[FSR_TIER_PREDICTED] = 0;
		if (!up || !fsr_serves(r, card, l))
			continue;
		uint32_t share = base + (i++ < extra), k, p;
		split_share(r, share, &k, &p);
		q[FSR_TIER_RECENCY] = k;
		q[FSR_TIER_PREDICTED] = p;
		cd->static_quota -= k + p;
	}
}

void fsr_tier_gauges(struct fsr *r, uint32_t card)
{
	struct fsr_card *cd = &r->card[card];
	fsr_ctr_set(&cd->ctr[FS_CC_tier_static], cd->ntier[FSR_TIER_STATIC]);
	fsr_ctr_set(&cd->ctr[FS_CC_tier_recency], cd->ntier[FSR_TIER_RECENCY]);
	fsr_ctr_set(&cd->ctr[FS_CC_tier_predicted], cd->ntier[FSR_TIER_PREDICTED]);
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

/* The static tier's membership at a layer changes: its cached coldest too. */
static void static_touched(struct fsr_card *cd, uint32_t s)
{
	if (cd->slot[s].tier == FSR_TIER_STATIC)
		fsr_static_changed(cd, cd->slot[s].layer);
}

/* A slot just loaded (LOADING) joins its tier, youngest. */
void fsr_tier_link(struct fsr *r, uint32_t card, uint32_t s)
{
	link_at(&r->card[card], s, 1);
	static_touched(&r->card[card], s);
	fsr_tier_gauges(r, card);
}

/* A slot leaving the table (evicted) leaves its tier. */
void fsr_tier_unlink(struct fsr *r, uint32_t card, uint32_t s)
{
	static_touched(&r->card[card], s);
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
	static_touched(cd, s);
	unlink_from(cd, s);
	cd->slot[s].tier = (uint8_t)tier;
	link_at(cd, s, young);
	static_touched(cd, s);
	fsr_tier_gauges(r, card);
}

/* The slot the tier gives up first: at the layer, the least recently used
 * RESIDENT one not in use this window, else the least recently used
 * RESIDENT one; the static tier's coldest of the card by decayed use.
 * FSR_NONE when every slot of it is still loading. */
uint32_t fsr_tier_victim(struct fsr *r, uint32_t card, uint32_t layer, unsigned tier)
{
	if (tier == FSR_TIER_STATIC) {
		float sc;
		return fsr_static_coldest(r, card, &sc);
	}
	const struct fsr_card *cd = &r->card[card];
	uint32_t first = FSR_NONE, scanned = 0;
	for (uint32_t s = cd->tl[layer * FSR_NTIERS + tier].old; s != FSR_NONE; s = cd->slot[s].tnext) {
		const struct fsr_slot *sl = &cd->slot[s];
		if (sl->state != FSR_RESIDENT)
			continue;
		if (!fsr_slot_protected(r, sl))
			return s;
		/* All protected: the oldest, or for predictions the lowest score. */
		if (first == FSR_NONE || (tier == FSR_TIER_PREDICTED && sl->score < cd->slot[first].score))
			first = s;
		if (++scanned >= FSR_VICTIM_SCAN)
			break;
	}
	return first;
}

/* A static slot displaced by a hotter expert moves down to its layer's
 * recency tier when that has room or a colder slot (which then leaves
 * instead).  0: it should leave. */
static int demote(struct fsr *r, uint32_t card, uint32_t v)
{
	struct fsr_card *cd = &r->card[card];
	uint32_t layer = cd->slot[v].layer;
	if (fsr_quota(cd, layer, FSR_TIER_RECENCY) == 0)
		return 0;
	if (!fsr_tier_has_room(cd, layer, FSR_TIER_RECENCY)) {
		uint32_t y = fsr_tier_victim(r, card, layer, FSR_TIER_RECENCY);
		float sv = fsr_score(r, fsr_idx(r, layer, cd->slot[v].expert));
		if (y == FSR_NONE || !(fsr_score(r, fsr_idx(r, layer, cd->slot[y].expert)) < sv))
			return 0;
		fsr_slot_evict(r, card, y);
	}
	fsr_tier_retag(r, card, v, FSR_TIER_RECENCY, 1);
	return 1;
}

/* The static tier's coldest leaves it: down to recency, or out. */
void fsr_static_displace(struct fsr *r, uint32_t card, uint32_t z)
{
	if (!demote(r, card, z))
		fsr_slot_evict(r, card, z);
}

/* Make the tier `need` slots short of its reserved size (one per copy
 * headed for it): its victims leave (their slots come free after the
 * grace period).  0 when no victim can leave yet. */
int fsr_tier_room(struct fsr *r, uint32_t card, uint32_t layer, unsigned tier, uint32_t need)
{
	struct fsr_card *cd = &r->card[card];
	uint32_t q = fsr_quota(cd, layer, tier);
	if (q == 0)
		return 0;
	if (need > q)
		need = q;
	while (fsr_used(cd, layer, tier) + need > q) {
		uint32_t v = fsr_tier_victim(r, card, layer, tier);
		if (v == FSR_NONE)
			return 0;
		if (tier == FSR_TIER_STATIC)
			fsr_static_displace(r, card, v);
		else
			fsr_slot_evict(r, card, v);
	}
	return 1;
}
