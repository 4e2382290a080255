/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_tier_static.c: the static tier, the hot experts by measured use.
 *
 * Every use of (layer, expert) adds 1 to its score, and scores decay by
 * freq_decay per token of the windows that end (lazily: a score is stored
 * with the token count it was last brought up to date at).  A profile (fsr_profile_load: a saved
 * one, a warm-up, an engine's prefill) seeds the scores and fills the
 * tiers before decode.  With `adapt`, the tier then follows the scores:
 *  - an expert of the recency or predicted tier that is used and scores
 *    above the static tier's coldest joins the static tier (no copy), and
 *    the coldest moves down or leaves (below);
 *  - an expert that misses and scores above the coldest is copied into the
 *    static tier, displacing the coldest.
 * Without `adapt` the profile stays as loaded: the `static` baseline.
 *
 * The tier is one per card, so "the coldest" is the card's: each layer
 * keeps its own coldest slot cached (a uniform decay keeps the order, so
 * the cache stays right until a static slot of the layer is added,
 * removed, lands or is used), and the card's is the coldest of those.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsr_internal.h"

/* An old score keeps its weight relative to other old ones (it does not
 * round to 0 at some age): among experts nobody used lately, the ones used
 * more and more recently stay ahead, which the replay found matters. */
float fsr_score(const struct fsr *r, uint32_t idx)
{
	uint32_t age = r->tick - r->score_tick[idx];
	if (age < FSR_DECAY_STEPS)
		return r->score[idx] * r->decay_pow[age];
	return r->score[idx] * powf(r->decay, (float)age);
}

void fsr_score_bump(struct fsr *r, uint32_t idx)
{
	r->score[idx] = fsr_score(r, idx) + 1.0f;
	r->score_tick[idx] = r->tick;
}

void fsr_static_changed(struct fsr_card *cd, uint32_t layer)
{
	cd->cold_ok[layer] = 0;
}

/* A layer's RESIDENT static slot with the lowest score (slots still
 * loading cannot leave). */
static uint32_t layer_coldest(const struct fsr *r, const struct fsr_card *cd, uint32_t layer)
{
	uint32_t best = FSR_NONE;
	float bs = INFINITY;
	for (uint32_t s = cd->tl[layer * FSR_NTIERS + FSR_TIER_STATIC].old; s != FSR_NONE;
	     s = cd->slot[s].tnext) {
		const struct fsr_slot *sl = &cd->slot[s];
		if (sl->state != FSR_RESIDENT)
			continue;
		float sc = fsr_score(r, fsr_idx(r, layer, sl->expert));
		if (sc < bs) {
			bs = sc;
			best = s;
		}
	}
	return best;
}

/* The card's coldest RESIDENT static slot and its score. */
uint32_t fsr_static_coldest(struct fsr *r, uint32_t card, float *score)
{
	struct fsr_card *cd = &r->card[card];
	uint32_t best = FSR_NONE;
	float bs = INFINITY;
	for (uint32_t l = 0; l < r->layers; l++) {
		if (cd->tl[l * FSR_NTIERS + FSR_TIER_STATIC].n == 0)
			continue;
		if (!cd->cold_ok[l]) {
			cd->cold[l] = layer_coldest(r, cd, l);
			cd->cold_ok[l] = 1;
		}
		if (cd->cold[l] == FSR_NONE)
			continue;
		float sc = fsr_score(r, fsr_idx(r, l, cd->slot[cd->cold[l]].expert));
		if (sc < bs) {
			bs = sc;
			best = cd->cold[l];
		}
	}
	*score = bs;
	return best;
}

/* Is an expert scored `sc` worth a copy into the static tier in place of
 * the coldest, scored `cold`?  Without admit_value: hotter is enough.
 * With it, the copy must pay for its bus time and the slot's churn: a
 * decayed use of at least FSR_ADMIT_MIN and FSR_ADMIT_MARGIN more than
 * the resident it displaces (the discussion's adapt rule: a swap needs a
 * decayed use of 2 and 1 more than the resident it replaces; without it
 * every miss hotter than a cold resident is copied, and on the calibrated
 * model at 26 % slots that fills the bus with ~2.7 copies per
 * layer-window, most of them used once). */
int fsr_static_beats(const struct fsr *r, uint32_t card, float sc, float cold)
{
	if (!r->admit_value || !r->card[card].bus_tight)
		return sc > cold;
	return sc >= FSR_ADMIT_MIN && sc >= cold + FSR_ADMIT_MARGIN;
}

/* A slot of the recency or predicted tier was used: promote it when the
 * static tier has room or it is hotter than the static tier's coldest. */
void fsr_static_used(struct fsr *r, uint32_t card, uint32_t s)
{
	struct fsr_card *cd = &r->card[card];
	struct fsr_slot *sl = &cd->slot[s];
	if (!r->adapt || cd->card_quota[FSR_TIER_STATIC] == 0)
		return;
	if (!fsr_tier_has_room(cd, sl->layer, FSR_TIER_STATIC)) {
		float cold;
		uint32_t z = fsr_static_coldest(r, card, &cold);
		if (z == FSR_NONE || !(fsr_score(r, fsr_idx(r, sl->layer, sl->expert)) > cold))
			return;
		fsr_tier_retag(r, card, s, FSR_TIER_STATIC, 1);
		fsr_static_displace(r, card, z);
	} else {
		fsr_tier_retag(r, card, s, FSR_TIER_STATIC, 1);
	}
	fsr_ctr_add(&cd->ctr[FS_CC_promoted], 1);
}

/* A missed expert belongs in the static tier: it has room, or the expert
 * is hotter than its coldest. */
int fsr_static_wants(struct fsr *r, uint32_t card, uint32_t idx)
{
	struct fsr_card *cd = &r->card[card];
	if (!r->adapt || cd->card_quota[FSR_TIER_STATIC] == 0)
		return 0;
	if (fsr_tier_has_room(cd, idx / r->experts, FSR_TIER_STATIC))
		return 1;
	float cold;
	uint32_t z = fsr_static_coldest(r, card, &cold);
	return z != FSR_NONE && fsr_static_beats(r, card, fsr_score(r, idx), cold);
}

/* ---- profiles ------------------------------------------------------------ */

struct ranked {
	uint32_t count;
	uint16_t layer, expert;
};

/* Hottest first; ties (a short profile has many) by expert, then layer,
 * so that unused slots are spread evenly over the layers. */
static int by_count_desc(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	if (x->expert != y->expert)
		return x->expert < y->expert ? -1 : 1;
	return x->layer < y->layer ? -1 : x->layer > y->layer;
}

/* Queue (layer, expert) for a tier of `card`, a card that serves the
 * layer, unless it is there or queued; 1 when queued. */
static int fill_one(struct fsr *r, uint32_t card, const struct ranked *rk, unsigned tier, uint32_t *room)
{
	struct fsr_card *cd = &r->card[card];
	uint32_t idx = fsr_idx(r, rk->layer, rk->expert);
	if (cd->slot_of[idx] != FSR_NONE || cd->wanted[idx] || room[card] == 0 ||
	    fsr_held_elsewhere(r, card, idx))
		return 0;
	struct fsr_want w = {.idx = idx, .client = FSR_NONE, .tier = (uint8_t)tier};
	fsr_want_push(r, card, &w);
	room[card]--;
	return 1;
}

/* Queue each card's hottest experts of the layers it serves (with one
 * tier, a layer's home; without, every card that runs it: each fills the
 * layer's share of its own tier): the static tier's size of them
 * card-wide, then per layer its recency and predicted sizes of the next
 * hottest of that layer. */
static unsigned fill(struct fsr *r, struct ranked *rk, size_t n)
{
	unsigned queued = 0;
	uint32_t room[FS_MAX_CARDS];
	for (uint32_t c = 0; c < r->cards; c++) {
		struct fsr_card *cd = &r->card[c];
		room[c] = cd->card_quota[FSR_TIER_STATIC] > cd->ntier[FSR_TIER_STATIC] ?
				  cd->card_quota[FSR_TIER_STATIC] - cd->ntier[FSR_TIER_STATIC] :
				  0;
	}
	size_t i = 0;
	for (; i < n; i++) {
		int left = 0;
		for (uint32_t c = 0; c < r->cards; c++)
			left |= room[c] > 0;
		if (!left)
			break;
		for (uint32_t c = 0; c < r->cards; c++)
			if (fsr_serves(r, c, rk[i].layer))
				queued += (unsigned)fill_one(r, c, &rk[i], FSR_TIER_STATIC, room);
	}
	static const unsigned per_layer[] = {FSR_TIER_RECENCY, FSR_TIER_PREDICTED};
	for (unsigned t = 0; t < 2; t++) {
		for (uint32_t l = 0; l < r->layers; l++) {
			for (uint32_t c = 0; c < r->cards; c++) {
				if (!fsr_serves(r, c, l))
					continue;
				struct fsr_card *cd = &r->card[c];
				uint32_t q = fsr_quota(cd, l, per_layer[t]),
					 have = fsr_used(cd, l, per_layer[t]);
				uint32_t lroom[FS_MAX_CARDS] = {0};
				lroom[c] = q > have ? q - have : 0;
				for (size_t j = i; j < n && lroom[c] > 0; j++)
					if (rk[j].layer == l)
						queued += (unsigned)fill_one(r, c, &rk[j], per_layer[t],
									     lroom);
			}
		}
	}
	return queued;
}

/* Every expert fits (fsr_fill_all): per layer, in rank order, the first
 * ones to the static tier and the last to the layer's recency and predicted
 * sizes, so no tier is asked for more than it holds (fill()'s card-wide
 * static pass may give a layer one too few, its other tiers one too many). */
static unsigned fill_every(struct fsr *r, const struct ranked *rk, size_t n)
{
	unsigned queued = 0;
	uint32_t *seen = calloc(r->layers, sizeof(*seen));
	if (seen == NULL)
		return 0;
	for (uint32_t c = 0; c < r->cards; c++) {
		struct fsr_card *cd = &r->card[c];
		memset(seen, 0, r->layers * sizeof(*seen));
		for (size_t i = 0; i < n; i++) {
			uint32_t l = rk[i].layer, k = seen[l]++;
			if (!fsr_serves(r, c, l))
				continue;
			uint32_t rec = fsr_quota(cd, l, FSR_TIER_RECENCY),
				 pred = fsr_quota(cd, l, FSR_TIER_PREDICTED);
			unsigned tier = k + rec + pred < r->experts ? FSR_TIER_STATIC :
					k + pred < r->experts       ? FSR_TIER_RECENCY :
								      FSR_TIER_PREDICTED;
			uint32_t room[FS_MAX_CARDS] = {0};
			room[c] = 1;
			queued += (unsigned)fill_one(r, c, &rk[i], tier, room);
		}
	}
	free(seen);
	return queued;
}

/* Queue the fill of every card's tiers by the scores now (rounded):
 * hottest first, ties by lower expert id; `every`: fill_every.  Returns
 * how many were queued. */
static int fill_by_score(struct fsr *r, int every)
{
	size_t n = (size_t)r->layers * r->experts;
	struct ranked *rk = malloc(n * sizeof(*rk));
	if (rk == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		rk[i] = (struct ranked){(uint32_t)lroundf(fsr_score(r, (uint32_t)i)),
					(uint16_t)(i / r->experts), (uint16_t)(i % r->experts)};
	qsort(rk, n, sizeof(*rk), by_count_desc);
	unsigned queued = every ? fill_every(r, rk, n) : fill(r, rk, n);
	free(rk);
	return (int)queued;
}

int fsr_fill_all(struct fsr *r)
{
	if (!r->tiers)
		return -EINVAL;
	for (uint32_t c = 0; c < r->cards; c++)
		if (!fsr_card_fits(r, c))
			return 0;
	return fill_by_score(r, 1);
}

int fsr_profile_load(struct fsr *r, const uint32_t *counts)
{
	if (!r->tiers || counts == NULL)
		return -EINVAL;
	size_t n = (size_t)r->layers * r->experts;
	for (size_t i = 0; i < n; i++) {
		r->score[i] = (float)counts[i];
		r->score_tick[i] = r->tick;
	}
	for (uint32_t c = 0; c < r->cards; c++)
		memset(r->card[c].cold_ok, 0, r->layers);
	int q = fill_by_score(r, 0);
	return q < 0 ? q : 0;
}

void fsr_profile_save(const struct fsr *r, uint32_t *counts)
{
	size_t n = (size_t)r->layers * r->experts;
	for (size_t i = 0; i < n; i++)
		counts[i] = r->tiers ? (uint32_t)lroundf(fsr_score(r, (uint32_t)i)) : 0;
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

/* A static want whose expert is no longer hotter than the tier's coldest
 * becomes a recency want (or goes, without recency slots). */
static int static_admit(struct fsr *r, uint32_t card, uint32_t layer, struct fsr_cand *c)
{
	struct fsr_card *cd = &r->card[card];
	if (fsr_tier_has_room(cd, layer, FSR_TIER_STATIC))
		return 1;
	float cold;
	uint32_t z = fsr_static_coldest(r, card, &cold);
	if (z != FSR_NONE && fsr_static_beats(r, card, fsr_score(r, fsr_idx(r, layer, c->expert)), cold))
		return 1;
	if (fsr_quota(cd, layer, FSR_TIER_RECENCY) > 0) {
		c->tier = FSR_TIER_RECENCY;
		return 0;
	}
	return -1;
}

/* A static slot was used: its score rose, so it may no longer be its
 * layer's coldest. */
static void static_on_use(struct fsr *r, uint32_t card, uint32_t s)
{
	struct fsr_card *cd = &r->card[card];
	uint32_t layer = cd->slot[s].layer;
	if (cd->cold[layer] == s)
		fsr_static_changed(cd, layer);
}

static uint32_t static_victim(struct fsr *r, uint32_t card, uint32_t layer)
{
	(void)layer; /* the card's coldest, whatever the layer */
	float sc;
	return fsr_static_coldest(r, card, &sc);
}

const struct fsr_tier_ops fsr_tier_static_ops = {
	.name = "static",
	.gauge = FS_CC_tier_static,
	.card_wide = 1,
	.admit = static_admit,
	.on_use = static_on_use,
	.changed = fsr_static_changed,
	.victim = static_victim,
	.leave = fsr_static_displace,
};
