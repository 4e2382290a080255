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

const struct fsr_tier_ops fsr_tier_recency_ops = {
	.name = "recency",
	.gauge = FS_CC_tier_recency,
	.admit = recency_admit,
	.on_use = fsr_recency_hit,
};
