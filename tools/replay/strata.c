/* SPDX-License-Identifier: Apache-2.0 */
/* strata.c: the strata-adapt peer's rules (strata.h). */
#include "strata.h"

#include <stdlib.h>

void strata_seed(float *score, const uint32_t *profile, size_t n, uint32_t every, uint32_t tokens_per_window,
		 uint32_t topk, uint32_t layers, double decay)
{
	double mass = 0;
	for (size_t i = 0; i < n; i++)
		mass += profile[i];
	double want = (double)every * tokens_per_window * topk * layers / (1.0 - decay);
	double k = mass > 0 ? want / mass : 0;
	for (size_t i = 0; i < n; i++)
		score[i] = (float)(profile[i] * k);
}

void strata_decay(float *score, float *uses, size_t n, double decay)
{
	for (size_t i = 0; i < n; i++) {
		score[i] = (float)(decay * score[i] + uses[i]);
		uses[i] = 0;
	}
}

static int by_score_desc(const void *a, const void *b)
{
	const struct strata_ranked *x = a, *y = b;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

int strata_swaps(const float *score, size_t n, enum strata_state (*state)(void *ctx, size_t i),
		 int (*swap)(void *ctx, uint32_t in, uint32_t out), void *ctx, uint32_t max_swaps,
		 struct strata_ranked *cand, struct strata_ranked *vict)
{
	uint32_t nc = 0, nv = 0;
	for (size_t i = 0; i < n; i++) {
		enum strata_state st = state(ctx, i);
		if (st == STRATA_OUT) {
			if (score[i] >= 1.0f)
				cand[nc++] = (struct strata_ranked){score[i], (uint32_t)i};
		} else if (st == STRATA_IN) {
			vict[nv++] = (struct strata_ranked){score[i], (uint32_t)i};
		}
	}
	qsort(cand, nc, sizeof(*cand), by_score_desc);
	qsort(vict, nv, sizeof(*vict), by_score_desc); /* worst at the end */
	uint32_t swaps = 0;
	for (uint32_t i = 0; i < nc && i < nv && swaps < max_swaps; i++) {
		const struct strata_ranked *v = &vict[nv - 1 - i];
		if (cand[i].score <= v->score)
			break;
		int r = swap(ctx, cand[i].idx, v->idx);
		if (r < 0)
			return r;
		swaps += r == 0;
	}
	return (int)swaps;
}
