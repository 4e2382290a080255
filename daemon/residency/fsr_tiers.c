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
#include <string.h>

#include "fsr_internal.h"

/* The untiered pool: no tier, no gauge, one LRU per card (fsr_policy.c). */
static const struct fsr_tier_ops pool_ops = {.name = "pool", .gauge = -1};

/* Indexed by enum fsr_tier: the pool, then one row per proto/fs_tiers.h row. */
#define TIER_TABLE_ROW(A, NAME, name, ...) [FSR_TIER_##NAME] = &fsr_tier_##name##_ops,
const struct fsr_tier_ops *const fsr_tier_table[FSR_NTIERS] = {[FSR_TIER_POOL] = &pool_ops,
							       FS_TIERS(TIER_TABLE_ROW, ~)};
#undef TIER_TABLE_ROW

/* Each tier's size and ghost gauges (fs_counters.h), from its row. */
#define SIZE_GAUGE_ROW(A, NAME, name, ...) [FSR_TIER_##NAME] = FS_CC_size_##name,
#define GHOST_GAUGE_ROW(A, NAME, name, ...) [FSR_TIER_##NAME] = FS_CC_ghost_##name,
static const int size_gauge[FSR_NTIERS] = {[FSR_TIER_POOL] = -1, FS_TIERS(SIZE_GAUGE_ROW, ~)};
static const int ghost_gauge[FSR_NTIERS] = {[FSR_TIER_POOL] = -1, FS_TIERS(GHOST_GAUGE_ROW, ~)};
#undef SIZE_GAUGE_ROW
#undef GHOST_GAUGE_ROW

/* The tier whose size follows its ghost hits (tier_adapt: ops->adapts) and
 * the card-wide tier it trades slots with; FSR_TIER_POOL when none. */
static unsigned adaptive_tier(void)
{
	for (unsigned t = FSR_TIER_POOL + 1; t < FSR_NTIERS; t++)
		if (fsr_tier_ops(t)->adapts)
			return t;
	return FSR_TIER_POOL;
}

static unsigned card_wide_tier(void)
{
	for (unsigned t = FSR_TIER_POOL + 1; t < FSR_NTIERS; t++)
		if (fsr_tier_ops(t)->card_wide)
			return t;
	return FSR_TIER_POOL;
}

const char *fsr_tier_name(enum fsr_tier t)
{
	return (unsigned)t < FSR_NTIERS ? fsr_tier_ops(t)->name : "?";
}

int fsr_tier_speculative(unsigned tier)
{
	return tier < FSR_NTIERS && fsr_tier_ops(tier)->speculative;
}

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
	/* The ghost lists are kept whether or not they size the tiers: their
	 * hits are what `fsctl stats` shows an operator beside each tier's
	 * size (ghost_<tier>: how many misses a larger tier would have served). */
	cd->ghost = malloc(n * FSR_GHOST * sizeof(*cd->ghost));
	cd->ghost_head = calloc(n, 1);
	if (!cd->ghost || !cd->ghost_head)
		return -ENOMEM;
	memset(cd->ghost, 0xff, n * FSR_GHOST * sizeof(*cd->ghost)); /* FSR_GHOST_EMPTY */
	if (r->tier_adapt) {
		cd->rec_size = malloc(r->layers * sizeof(*cd->rec_size));
		if (!cd->rec_size)
			return -ENOMEM;
		for (uint32_t l = 0; l < r->layers; l++)
			cd->rec_size[l] = FSR_NONE;
	}
	for (size_t i = 0; i < n; i++)
		cd->tl[i] = (struct fsr_tlist){FSR_NONE, FSR_NONE, 0};
	for (unsigned t = 0; t < FSR_NTIERS; t++)
		cd->use_rate[t] = FSR_USE_RATE0;
	cd->pred_cut = 0;
	cd->pred_outcomes = 0;
	fsr_tiers_quotas(r, card);
	return 0;
}

/* A layer's per-layer tiers' sizes from its share, each from its own size
 * op (fsr_tier_<name>.c: its option and auto rule; fsr_core.c says why the
 * FSR_AUTO values are what they are): the fixed sizes first, in row order,
 * each at most what is left, then the tier that takes the rest (recency's
 * FSR_ALL), if any. */
static void split_share(const struct fsr *r, uint32_t share, uint32_t q[FSR_NTIERS])
{
	uint32_t left = share;
	int rest = -1;
	for (unsigned t = 0; t < FSR_NTIERS; t++) {
		const struct fsr_tier_ops *op = fsr_tier_ops(t);
		q[t] = 0;
		if (op->card_wide || !op->size)
			continue;
		uint32_t want = share ? op->size(r, share) : 0;
		if (want == FSR_SIZE_REST) {
			rest = (int)t;
			continue;
		}
		q[t] = want < left ? want : left;
		left -= q[t];
	}
	if (rest >= 0)
		q[rest] = left;
}

int fsr_card_fits(const struct fsr *r, uint32_t card)
{
	uint64_t need = 0;
	for (uint32_t l = 0; l < r->layers && fsr_is_up(r, card); l++)
		need += fsr_serves(r, card, l) ? r->experts : 0;
	return need <= r->card[card].nslots;
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
	/* Every expert it serves has a slot: nothing need ever leave, so no
	 * spare slots and no auto-sized recency or predicted tier (their slots
	 * churn: a predicted copy leaves at its window's end, a promotion
	 * demotes); every slot is the static tier's (fsr_fill_all fills it). */
	int fits = nl > 0 && fsr_card_fits(r, card);
	uint32_t spare = r->cfg_spare;
	if (spare == FSR_AUTO) /* one per layer, at most 1 % of the card (fsr_core.c); none if it fits */
		spare = fits ? 0 : nl < cd->nslots / 128 ? nl : cd->nslots / 128;
	uint32_t avail = spare < cd->nslots ? cd->nslots - spare : 0;
	uint32_t base = nl ? avail / nl : 0, extra = nl ? avail % nl : 0, i = 0;
	/* A live card that serves no layer keeps its static tier whole: with
	 * one tier its slots stay and are read from there (fsr.h, "Placement
	 * across cards"); without, the trim empties what it no longer serves. */
	cd->quota_total = up ? avail : 0;
	/* What the layers' shares leave is the static tier's, the card's. */
	uint32_t left = cd->quota_total, cut_max = 0;
	for (uint32_t l = 0; l < r->layers; l++) {
		uint32_t *q = &cd->quota[l * FSR_NTIERS];
		for (unsigned t = 0; t < FSR_NTIERS; t++)
			q[t] = 0;
		if (!up || !fsr_serves(r, card, l))
			continue;
		uint32_t share = base + (i++ < extra), sz[FSR_NTIERS];
		split_share(r, share, sz);
		if (r->pred_adapt) {
			/* pred_adapt: pred_cut slots fewer, for the static tier
			 * (what the layers leave), but at least 1 where the auto
			 * size has any: with none there would be no predicted
			 * copies whose use says when to grow back. */
			uint32_t a = sz[FSR_TIER_PREDICTED];
			if (a > 1 && a - 1 > cut_max)
				cut_max = a - 1;
			sz[FSR_TIER_PREDICTED] = a > cd->pred_cut ? a - cd->pred_cut : (a ? 1 : 0);
		}
		for (unsigned t = 0; t < FSR_NTIERS && cd->rec_size; t++) {
			if (!fsr_tier_ops(t)->adapts)
				continue;
			/* tier_adapt: the size ghost hits moved it to, within
			 * 1 .. what the other tiers leave of the share. */
			uint32_t others = 0;
			for (unsigned o = 0; o < FSR_NTIERS; o++)
				others += o == t ? 0 : sz[o];
			if (cd->rec_size[l] == FSR_NONE)
				cd->rec_size[l] = sz[t];
			uint32_t most = share - others;
			sz[t] = cd->rec_size[l] < most ? cd->rec_size[l] : most;
			if (sz[t] == 0 && most > 0)
				sz[t] = 1;
		}
		for (unsigned t = 0; t < FSR_NTIERS && fits; t++)
			if (!fsr_tier_ops(t)->card_wide && r->cfg_slots[t] == FSR_AUTO)
				sz[t] = 0;
		for (unsigned t = 0; t < FSR_NTIERS; t++) {
			q[t] = sz[t];
			left -= sz[t];
		}
	}
	/* What the layers' tiers leave is the card-wide tier's. */
	for (unsigned t = 0; t < FSR_NTIERS; t++)
		cd->card_quota[t] = fsr_tier_ops(t)->card_wide ? left : 0;
	cd->pred_cut_max = cut_max;
	if (cd->pred_cut > cut_max) /* fewer or smaller shares now (placement) */
		cd->pred_cut = cut_max;
	/* The size gauges (fs_tiers.h rows, in tier order). */
	for (unsigned t = FSR_TIER_POOL + 1; t < FSR_NTIERS; t++) {
		uint64_t sum = cd->card_quota[t];
		for (uint32_t l = 0; l < r->layers && !fsr_tier_ops(t)->card_wide; l++)
			sum += cd->quota[l * FSR_NTIERS + t];
		fsr_ctr_set(&cd->ctr[size_gauge[t]], sum);
	}
}

/* The slot the tier gives up first: its own order where it has one (the
 * static tier's: the card's coldest by decayed use), else at the layer the
 * least recently used RESIDENT one not in use this window, else the least
 * recently used RESIDENT one (a speculative tier's: the lowest score).
 * FSR_NONE when every slot of it is still loading. */
uint32_t fsr_tier_victim(struct fsr *r, uint32_t card, uint32_t layer, unsigned tier)
{
	const struct fsr_tier_ops *op = fsr_tier_ops(tier);
	if (op->victim)
		return op->victim(r, card, layer);
	const struct fsr_card *cd = &r->card[card];
	uint32_t first = FSR_NONE, scanned = 0;
	for (uint32_t s = cd->tl[layer * FSR_NTIERS + tier].old; s != FSR_NONE; s = cd->slot[s].tnext) {
		const struct fsr_slot *sl = &cd->slot[s];
		if (sl->state != FSR_RESIDENT)
			continue;
		if (!fsr_slot_protected(r, sl))
			return s;
		/* All protected: the oldest, or for predictions the lowest score. */
		if (first == FSR_NONE || (op->speculative && sl->score < cd->slot[first].score))
			first = s;
		if (++scanned >= FSR_VICTIM_SCAN)
			break;
	}
	return first;
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
		const struct fsr_tier_ops *op = fsr_tier_ops(tier);
		if (op->leave)
			op->leave(r, card, v);
		else
			fsr_slot_evict(r, card, v);
	}
	return 1;
}

/*
 * Sizes that follow ghost hits (tier_adapt), per layer and online, as ARC
 * sizes its two lists: a miss on an expert the layer's recency tier evicted
 * lately says the recency tier there is too small, one on an expert the
 * static tier evicted at that layer says the static tier is.  Each moves
 * one slot of the layer's share between them: recency grows by one (the
 * static tier, the card's, shrinks by one: its coldest goes) or shrinks by
 * one (back to the static tier).  ARC's step is 1 scaled by the ratio of
 * the ghost lists' lengths; ours is 1, since the ghost lists here are
 * counted over a fixed length.  Bounds: at least 1 recency slot (so it
 * still evicts and can show it is too small), at most the share less the
 * predicted size.  Ghost lists count the newest entries up to the tier's
 * size at the layer (the static tier's: its slots of that layer), at least
 * 4: a tier of 2 slots would otherwise never see a ghost hit.
 */
static uint32_t ghost_len(const struct fsr_card *cd, uint32_t layer)
{
	unsigned ta = adaptive_tier();
	uint32_t n = ta == FSR_TIER_POOL ? 0 : fsr_quota(cd, layer, ta);
	return n < 4 ? 4 : n;
}

void fsr_tiers_ghost_miss(struct fsr *r, uint32_t card, uint32_t layer, uint32_t expert)
{
	struct fsr_card *cd = &r->card[card];
	int hit[FSR_NTIERS] = {0};
	for (unsigned t = FSR_TIER_POOL + 1; t < FSR_NTIERS; t++) {
		hit[t] = fsr_ghost_take(cd, layer, t, expert, ghost_len(cd, layer));
		if (hit[t])
			fsr_ctr_add(&cd->ctr[ghost_gauge[t]], 1);
	}
	if (!r->tier_adapt || cd->rec_size == NULL || cd->rec_size[layer] == FSR_NONE)
		return; /* counted for the operator; the sizes stay */
	unsigned ta = adaptive_tier(), tw = card_wide_tier();
	int rec = hit[ta], sta = hit[tw];
	if (rec == sta)
		return; /* neither, or both: no tier is the one short */
	uint32_t k = fsr_quota(cd, layer, ta);
	if (rec)
		cd->rec_size[layer] = k + 1;
	else if (k > 1)
		cd->rec_size[layer] = k - 1;
	else
		return;
	fsr_tiers_quotas(r, card);
	cd->retrim = 1;
}

/*
 * pred_adapt: a slot belongs to the tier whose copies get used.  The
 * predicted tier's slots are taken from the static tier's; where its
 * copies are used far less often than the static tier's (the learner's on
 * cold decode: 1 in 6 against 1 in 2, docs/results/replay.md, "Why it
 * loses on cold decode"), each slot it reserves costs static hits it does
 * not repay.  Each FSR_USE_N of its outcomes on the card (fsr_use_outcome;
 * here, at the scheduler's take, not per record), it gives a slot per
 * layer back to the static tier (down to 1 a layer) or takes one back (up
 * to its FSR_AUTO size), by the two rates (FSR_PRED_SHRINK, _GROW); the
 * trim then evicts what a tier holds beyond its new size.
 */
void fsr_tiers_pred_adapt(struct fsr *r, uint32_t card)
{
	struct fsr_card *cd = &r->card[card];
	if (cd->pred_outcomes < (uint32_t)FSR_USE_N)
		return;
	cd->pred_outcomes = 0;
	float p = cd->use_rate[FSR_TIER_PREDICTED], s = cd->use_rate[FSR_TIER_STATIC];
	if (p < s * FSR_PRED_SHRINK && cd->pred_cut < cd->pred_cut_max)
		cd->pred_cut++;
	else if (p >= s * FSR_PRED_GROW && cd->pred_cut > 0)
		cd->pred_cut--;
	else
		return;
	fsr_tiers_quotas(r, card);
	cd->retrim = 1;
}

/* The first prediction the core sees: each tier that cares (recency's
 * FSR_AUTO_PRED, fsr_tier_recency.c) acts on it. */
void fsr_tiers_predictions_seen(struct fsr *r)
{
	for (unsigned t = 0; t < FSR_NTIERS; t++)
		if (fsr_tier_ops(t)->predictions_seen)
			fsr_tier_ops(t)->predictions_seen(r);
}
