/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_cands.c: copy candidates, the scheduler's queue.  Per (card, layer) a
 * small array of experts to copy in, each for a tier and with a score.
 * Deadlines are not stored: they depend on where the engine runs when the
 * scheduler looks (fsr_clock.c).  A (layer, expert) is a candidate at most
 * once per card (the FSR_W_CAND bit of `wanted`); a new want for it merges.
 * When a layer's array is full, the weakest goes: the oldest window first,
 * then the lowest score.  Fixed arrays: no allocation per record.
 */
#include "fsr_internal.h"

/* Is a weaker than b as a candidate to keep? */
static int weaker(const struct fsr_cand *a, const struct fsr_cand *b)
{
	if (a->window != b->window)
		return (int32_t)(a->window - b->window) < 0;
	return a->score < b->score;
}

static void merge(struct fsr_cand *old, const struct fsr_cand *c)
{
	int spec = fsr_tier_ops(c->tier)->speculative, old_spec = fsr_tier_ops(old->tier)->speculative;
	if (spec) {
		/* A prediction for this window overrides a cross-window want:
		 * it has a nearer deadline and the same expert. */
		if (old_spec && old->window == c->window && old->score > c->score)
			return;
		/* The same window's prediction re-posted (a nearer horizon)
		 * keeps what held it back so far (fsr_config.unserved). */
		unsigned why = old_spec && old->window == c->window ? old->why : c->why;
		*old = *c;
		old->why = why;
		return;
	}
	/* A prediction for a later window (a cross-window one, an engine
	 * that pipelines) still stands: it has the nearer deadline.  One for
	 * this window does not: a use of the layer in that window means the
	 * layer has run, so the prediction expires unserved; the miss's want
	 * (its next run) takes its place.  Keeping the prediction lost the
	 * recency copy of every predicted expert that missed anyway, which on
	 * a busy bus is most of them (fsr_loading_test found it). */
	if (old_spec && (int32_t)(c->window - old->window) < 0)
		return;
	*old = *c;
}

void fsr_cand_put(struct fsr *r, uint32_t card, uint32_t layer, const struct fsr_cand *c)
{
	struct fsr_card *cd = &r->card[card];
	struct fsr_cand *v = fsr_cands(r, cd, layer);
	uint32_t n = cd->ncand[layer];
	uint32_t idx = fsr_idx(r, layer, c->expert);
	if (cd->wanted[idx] & FSR_W_CAND) {
		for (uint32_t i = 0; i < n; i++)
			if (v[i].expert == c->expert) {
				struct fsr_cand was = v[i];
				merge(&v[i], c);
				if (fsr_tier_ops(was.tier)->speculative &&
				    !fsr_tier_ops(v[i].tier)->speculative)
					fsr_unserved(r, card, layer, was.expert,
						     was.why); /* used: its layer ran */
				return;
			}
	}
	if (n < r->cand_per_layer) {
		v[n] = *c;
		cd->ncand[layer]++;
		cd->cands++;
		cd->wanted[idx] |= FSR_W_CAND;
		return;
	}
	uint32_t w = 0;
	for (uint32_t i = 1; i < n; i++)
		if (weaker(&v[i], &v[w]))
			w = i;
	fsr_ctr_add(&cd->ctr[FS_CC_dropped], 1);
	if (!weaker(&v[w], c)) {
		if (fsr_tier_ops(c->tier)->speculative)
			fsr_unserved(r, card, layer, c->expert, FSR_UNS_CAND_FULL);
		return; /* the new one is the weakest */
	}
	if (fsr_tier_ops(v[w].tier)->speculative)
		fsr_unserved(r, card, layer, v[w].expert, FSR_UNS_CAND_FULL);
	cd->wanted[fsr_idx(r, layer, v[w].expert)] &= (uint8_t)~FSR_W_CAND;
	v[w] = *c;
	cd->wanted[idx] |= FSR_W_CAND;
}

void fsr_cand_del(struct fsr *r, uint32_t card, uint32_t layer, uint32_t i)
{
	struct fsr_card *cd = &r->card[card];
	struct fsr_cand *v = fsr_cands(r, cd, layer);
	uint32_t n = cd->ncand[layer];
	cd->wanted[fsr_idx(r, layer, v[i].expert)] &= (uint8_t)~FSR_W_CAND;
	v[i] = v[n - 1];
	cd->ncand[layer]--;
	cd->cands--;
}
