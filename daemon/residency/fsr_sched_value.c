/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_sched_value.c: which predictions the bus should carry (pred_value,
 * an option of the copy scheduler, fsr_sched.c).
 *
 * The scheduler hands out copies earliest deadline first; for predictions
 * that spends the bus on whatever is due soonest, so a long shot for the
 * next layer goes before a likely candidate for the layer after, which
 * then cannot land in time.  With pred_value, before a take the card's
 * prediction candidates are chosen by their score: the likeliest first,
 * each kept only while every one kept can still land by its deadline when
 * the kept ones go earliest deadline first from when the bus is free.
 * For copies of one size that is the scheduling matroid's greedy: it
 * keeps the set of predictions with the largest summed score the bus can
 * land in time, and when the scores are calibrated chances of use (the
 * learned predictor's, fsr_learn.c), the most predicted uses.  The ones
 * not kept wait this take out (FSR_UNS_VALUE when they expire); the kept
 * ones then go in deadline order as before, demand copies first as before.
 */
#include <math.h>
#include <stdlib.h>

#include "fsr_internal.h"

#define VALUE_MAX 256u /* predictions weighed per take at most (the rest wait) */

struct vcand {
	uint64_t deadline, dur;
	float score;
	uint32_t layer, i;
};

static int by_score(const void *a, const void *b)
{
	const struct vcand *x = a, *y = b;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return x->deadline < y->deadline ? -1 : x->deadline > y->deadline;
}

/* Can the kept ones (in deadline order) plus c all land by their deadlines
 * from `start`?  If so, c is inserted in order. */
static int fits(struct vcand **kept, uint32_t *n, struct vcand *c, uint64_t start)
{
	uint32_t at = *n;
	while (at > 0 && kept[at - 1]->deadline > c->deadline)
		at--;
	uint64_t t = start;
	for (uint32_t j = 0; j < at; j++)
		t += kept[j]->dur;
	t += c->dur;
	if (t > c->deadline)
		return 0;
	for (uint32_t j = at; j < *n; j++) {
		t += kept[j]->dur;
		if (t > kept[j]->deadline)
			return 0;
	}
	for (uint32_t j = *n; j > at; j--)
		kept[j] = kept[j - 1];
	kept[at] = c;
	(*n)++;
	return 1;
}

void fsr_sched_value(struct fsr *r, uint32_t card, uint64_t now)
{
	struct fsr_card *cd = &r->card[card];
	if (r->bus_bytes_per_ns <= 0.0)
		return; /* no bus limit: every prediction can go */
	struct vcand v[VALUE_MAX], *kept[VALUE_MAX];
	uint32_t n = 0, nk = 0;
	for (uint32_t l = 0; l < r->layers && n < VALUE_MAX; l++) {
		struct fsr_cand *cv = fsr_cands(r, cd, l);
		for (uint32_t i = 0; i < cd->ncand[l] && n < VALUE_MAX; i++) {
			const struct fsr_cand *c = &cv[i];
			if (!fsr_tier_ops(c->tier)->speculative || c->mark == r->take_serial)
				continue;
			uint32_t client = c->client == FSR_CAND_NOCLIENT ? FSR_NONE : c->client;
			uint64_t bytes = fsr_bytes(r, fsr_idx(r, l, c->expert));
			v[n++] = (struct vcand){
				.deadline = fsr_clock_deadline(r, client, l, now),
				.dur = (uint64_t)ceil((double)bytes / r->bus_bytes_per_ns),
				.score = c->score,
				.layer = l,
				.i = i,
			};
		}
	}
	if (n < 2)
		return;
	qsort(v, n, sizeof(v[0]), by_score);
	uint64_t start = cd->bus_free > now ? cd->bus_free : now;
	for (uint32_t k = 0; k < n; k++) {
		if (fits(kept, &nk, &v[k], start))
			continue;
		struct fsr_cand *c = &fsr_cands(r, cd, v[k].layer)[v[k].i];
		c->mark = r->take_serial; /* passed over this take */
		c->why = FSR_UNS_VALUE;
	}
}
