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
#define TIER_TABLE_ROW(A, NAME, name, what) [FSR_TIER_##NAME] = &fsr_tier_##name##_ops,
const struct fsr_tier_ops *const fsr_tier_table[FSR_NTIERS] = {[FSR_TIER_POOL] = &pool_ops,
							       FS_TIERS(TIER_TABLE_ROW, ~)};
#undef TIER_TABLE_ROW

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
	fsr_tiers_quotas(r, card);
	return 0;
}

/* A layer's recency and predicted sizes from its share (fsr_core.c says
 * why the FSR_AUTO values are what they are).  The 16th is rounded down:
 * below 16 slots a layer gets no recency or predicted tier of its own and
 * its slots stay with the card-wide static tier (a per-layer tier of one
 * slot is refilled by each copy headed for it, so it holds nothing long
 * enough to be used again; fsr_core.c gives the figures). */
static void split_share(const struct fsr *r, uint32_t share, uint32_t *rec, uint32_t *pred)
{
	uint32_t cfg_rec = r->cfg_recency;
	if (cfg_rec == FSR_AUTO_PRED)
		cfg_rec = r->pred_seen ? FSR_ALL : FSR_AUTO;
	uint32_t sixteenth = share / 16;
	uint32_t cap = r->pred_auto_max ? r->pred_auto_max : 4;
	uint32_t p = r->cfg_predicted == FSR_AUTO ? (sixteenth < cap ? sixteenth : cap) : r->cfg_predicted;
	uint32_t k = cfg_rec == FSR_AUTO ? sixteenth : cfg_rec;
	if (share == 0)
		p = k = 0;
	if (cfg_rec == FSR_ALL) {
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
	/* A live card that serves no layer keeps its static tier whole: with
	 * one tier its slots stay and are read from there (fsr.h, "Placement
	 * across cards"); without, the trim empties what it no longer serves. */
	cd->quota_total = up ? avail : 0;
	/* What the layers' shares leave is the static tier's, the card's. */
	uint32_t left = cd->quota_total;
	for (uint32_t l = 0; l < r->layers; l++) {
		uint32_t *q = &cd->quota[l * FSR_NTIERS];
		for (unsigned t = 0; t < FSR_NTIERS; t++)
			q[t] = 0;
		if (!up || !fsr_serves(r, card, l))
			continue;
		uint32_t share = base + (i++ < extra), k, p;
		split_share(r, share, &k, &p);
		if (cd->rec_size) {
			/* tier_adapt: the size ghost hits moved it to, within
			 * 1 .. what the predicted size leaves of the share. */
			if (cd->rec_size[l] == FSR_NONE)
				cd->rec_size[l] = k;
			uint32_t most = share - p;
			k = cd->rec_size[l] < most ? cd->rec_size[l] : most;
			if (k == 0 && most > 0)
				k = 1;
		}
		q[FSR_TIER_RECENCY] = k;
		q[FSR_TIER_PREDICTED] = p;
		left -= k + p;
	}
	for (unsigned t = 0; t < FSR_NTIERS; t++)
		cd->card_quota[t] = 0;
	cd->card_quota[FSR_TIER_STATIC] = left;
	/* The size gauges (fs_tiers.h rows, in tier order). */
	for (unsigned t = FSR_TIER_STATIC; t < FSR_NTIERS; t++) {
		uint64_t sum = cd->card_quota[t];
		for (uint32_t l = 0; l < r->layers && !fsr_tier_ops(t)->card_wide; l++)
			sum += cd->quota[l * FSR_NTIERS + t];
		fsr_ctr_set(&cd->ctr[FS_CC_size_static + (t - FSR_TIER_STATIC)], sum);
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
	uint32_t n = fsr_quota(cd, layer, FSR_TIER_RECENCY);
	return n < 4 ? 4 : n;
}

void fsr_tiers_ghost_miss(struct fsr *r, uint32_t card, uint32_t layer, uint32_t expert)
{
	struct fsr_card *cd = &r->card[card];
	int hit[FSR_NTIERS] = {0};
	for (unsigned t = FSR_TIER_STATIC; t < FSR_NTIERS; t++) {
		hit[t] = fsr_ghost_take(cd, layer, t, expert, ghost_len(cd, layer));
		if (hit[t])
			fsr_ctr_add(&cd->ctr[FS_CC_ghost_static + (t - FSR_TIER_STATIC)], 1);
	}
	if (!r->tier_adapt || cd->rec_size == NULL || cd->rec_size[layer] == FSR_NONE)
		return; /* counted for the operator; the sizes stay */
	int rec = hit[FSR_TIER_RECENCY], sta = hit[FSR_TIER_STATIC];
	if (rec == sta)
		return; /* neither, or both: no tier is the one short */
	uint32_t k = fsr_quota(cd, layer, FSR_TIER_RECENCY);
	if (rec)
		cd->rec_size[layer] = k + 1;
	else if (k > 1)
		cd->rec_size[layer] = k - 1;
	else
		return;
	fsr_tiers_quotas(r, card);
	cd->retrim = 1;
}

/* FSR_AUTO_PRED: the first prediction turns each layer's recency size into
 * its whole share.  The static tier's slots join their layer's recency
 * tier where they are (no copy; least recently used first, so what the
 * profile or use put there stays until something newer needs the slot);
 * what a layer holds beyond its new size leaves (trim).  Once: a daemon
 * that served predictions keeps that split. */
void fsr_tiers_predictions_seen(struct fsr *r)
{
	if (r->pred_seen || r->cfg_recency != FSR_AUTO_PRED)
		return;
	r->pred_seen = 1;
	for (uint32_t c = 0; c < r->cards; c++) {
		struct fsr_card *cd = &r->card[c];
		/* tier_adapt: the recency sizes ghost hits learned were sizes of
		 * the split before predictions; start again from the whole share,
		 * or the static slots moved into recency below are trimmed out. */
		for (uint32_t l = 0; cd->rec_size && l < r->layers; l++)
			cd->rec_size[l] = FSR_NONE;
		fsr_tiers_quotas(r, c);
		for (uint32_t l = 0; l < r->layers; l++) {
			uint32_t sl = fsr_tl(cd, l, FSR_TIER_STATIC)->old;
			while (sl != FSR_NONE) {
				uint32_t next = cd->slot[sl].tnext;
				fsr_tier_retag(r, c, sl, FSR_TIER_RECENCY, 0);
				sl = next;
			}
		}
		cd->retrim = 1;
	}
}
