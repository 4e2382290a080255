/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_tier_recency.c: the recency tier, K reserved slots per layer for the
 * experts that just missed.
 *
 * The discussion measured that experts that missed come back soon (-24 %
 * distinct misses from 16 slots per layer when the copy lands by the next
 * window), that the gain fades fast with landing delay, and that a more
 * eager profile does not replace it.  So every miss the static tier does
 * not take becomes a copy candidate for the recency tier of its layer,
 * needed when the layer next runs (the next window); the tier is refreshed
 * every window by those misses, least recently used out first.  A miss
 * on a layer whose recency size is 0 (the `static` baseline) copies
 * nothing: the engine computes it on the CPU.
 */
#include "fsr_internal.h"

void fsr_recency_missed(struct fsr *r, uint32_t card, uint32_t client, const struct fs_rec *rec)
{
	struct fsr_card *cd = &r->card[card];
	uint32_t idx = fsr_idx(r, rec->layer, rec->expert);
	uint32_t s = cd->slot_of[idx];
	if (s != FSR_NONE) {
		/* In flight (a late use, counted by the caller), or landed after
		 * the engine took its epoch: keep it. */
		if (cd->slot[s].state == FSR_RESIDENT) {
			fsr_lru_touch(cd, s);
			fsr_tier_touch(cd, s);
			fsr_slot_protect(r, &cd->slot[s], client);
		}
		return;
	}
	unsigned tier;
	if (fsr_static_wants(r, card, idx))
		tier = FSR_TIER_STATIC;
	else if (fsr_quota(cd, rec->layer, FSR_TIER_RECENCY) > 0)
		tier = FSR_TIER_RECENCY;
	else
		return;
	struct fsr_cand c = {
		.score = fsr_score(r, idx),
		.window = rec->window,
		.expert = rec->expert,
		.tier = (uint8_t)tier,
		.client = client < r->max_clients ? (uint8_t)client : FSR_CAND_NOCLIENT,
	};
	fsr_cand_put(r, card, rec->layer, &c);
}

/* A recency slot was used again: it stays (touched by the caller) and may
 * have become hot enough for the static tier. */
void fsr_recency_hit(struct fsr *r, uint32_t card, uint32_t s)
{
	fsr_static_used(r, card, s);
}

/*
 * admit_value: while demand copies use most of the bus (fsr_sched.c), a
 * full recency tier takes a copy only when the expert is worth more than
 * the slot it displaces.  Worth is the chance of a use
 * before the slot is evicted again; with uses arriving at a rate the
 * decayed score estimates (score ~ rate / (1 - decay)), that chance grows
 * with the score, the same horizon for both, so the comparison is of
 * scores: the admission filter of TinyLFU (Einziger, Friedman and Manes,
 * "TinyLFU: A Highly Efficient Cache Admission Policy", ACM ToS 2017).
 * Bytes weigh too: every copy takes bus time another copy could use, so an
 * expert that loses to the victim is dropped rather than kept waiting.
 */
static int recency_admit(struct fsr *r, uint32_t card, uint32_t layer, struct fsr_cand *c)
{
	struct fsr_card *cd = &r->card[card];
	if (!r->admit_value || !cd->bus_tight || fsr_tier_has_room(cd, layer, FSR_TIER_RECENCY))
		return 1;
	uint32_t v = fsr_tier_victim(r, card, layer, FSR_TIER_RECENCY);
	if (v == FSR_NONE)
		return 1;
	float sv = fsr_score(r, fsr_idx(r, layer, cd->slot[v].expert));
	return fsr_score(r, fsr_idx(r, layer, c->expert)) > sv ? 1 : -1;
}

/* FSR_AUTO_PRED: the first prediction turns each layer's recency size into
 * its whole share.  The static tier's slots join their layer's recency
 * tier where they are (no copy; least recently used first, so what the
 * profile or use put there stays until something newer needs the slot);
 * what a layer holds beyond its new size leaves (trim).  Once: a daemon
 * that served predictions keeps that split. */
static void recency_predictions_seen(struct fsr *r)
{
	if (r->pred_seen || r->cfg_slots[FSR_TIER_RECENCY] != FSR_AUTO_PRED)
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

/* Its size at a layer (recency_slots): FSR_AUTO a 16th of the share,
 * rounded down (below 16 slots a layer gets none: a tier of one slot is
 * refilled by each copy headed for it, so it holds nothing long enough to
 * be used again; fsr_core.c gives the figures); FSR_ALL the whole share
 * less the other tiers' (a per-layer LRU); FSR_AUTO_PRED the one, then,
 * once a prediction arrives, the other. */
static uint32_t recency_size(const struct fsr *r, uint32_t share)
{
	uint32_t cfg = r->cfg_slots[FSR_TIER_RECENCY];
	if (cfg == FSR_AUTO_PRED)
		cfg = r->pred_seen ? FSR_ALL : FSR_AUTO;
	if (cfg == FSR_ALL)
		return FSR_SIZE_REST;
	return cfg == FSR_AUTO ? share / 16 : cfg;
}

const struct fsr_tier_ops fsr_tier_recency_ops = {
	.name = "recency",
	.gauge = FS_CC_tier_recency,
	.admit = recency_admit,
	.on_use = fsr_recency_hit,
	.size = recency_size,
	.adapts = 1,
	.predictions_seen = recency_predictions_seen,
};
