/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_predict.c: an oracle-noised router-ahead predictor.  The real
 * traces hold no hidden states, so a router-ahead predictor cannot run on
 * them; this one peeks at the routing and degrades it to the recall the
 * discussion measured (replay_recall_default):
 *
 *   for each token of the window, each expert it routes to at the target
 *   layer is placed, with the table's probabilities, within the first
 *   c1 / c2 / c3 ranks of a candidate list (c = 10 / 24 / 48 for top-10,
 *   scaled to the trace's top-k), or left out; the other ranks get decoys.
 *
 * Decoys are drawn from the layer's popularity over the trace (a router's
 * near misses are plausible experts, mostly hot ones), or uniformly
 * (--decoys uniform: a harsher predictor whose wrong guesses are mostly
 * cold experts), or not at all (--decoys none: the same recall, no wrong
 * guess; a bound on what precision is worth, not a predictor).  Each candidate is scored with the chance that a
 * candidate at its rank is routed: k x (recall gained in its band) / (band
 * width).  The token lists of a window are merged (best score per
 * expert).  The noise of (window, layer, horizon) comes from its own
 * seeded stream, so every policy sees the same predictions.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fs_rng.h"
#include "replay_predict.h"

static const uint32_t base_cut[3] = {10, 24, 48};

void replay_recall_default(struct replay_recall *rc)
{
	static const double t[3][3] = {{0.61, 0.82, 0.90}, {0.52, 0.72, 0.83}, {0.46, 0.66, 0.78}};
	memcpy(rc->at, t, sizeof(t));
}

int replay_predictor_init(struct replay_predictor *p, const struct fs_trace *t, const struct replay_model *m)
{
	memset(p, 0, sizeof(*p));
	p->t = t;
	p->seed = m->seed;
	p->decoys = m->decoys;
	uint32_t prev = 0;
	for (int b = 0; b < 3; b++) {
		uint32_t c = (uint32_t)lround((double)base_cut[b] * t->topk / 10.0);
		if (c <= prev)
			c = prev + 1;
		if (c > t->experts)
			c = t->experts;
		p->cut[b] = c;
		prev = c;
	}
	for (int h = 0; h < 3; h++) {
		double lo = 0.0;
		uint32_t from = 0;
		for (int b = 0; b < 3; b++) {
			double gain = m->recall.at[h][b] - lo,
			       width = p->cut[b] > from ? p->cut[b] - from : 1;
			double prec = gain > 0 ? t->topk * gain / width : 0.0;
			p->prec[h][b] = (float)(prec < 1.0 ? prec : 1.0);
			p->recall[h][b] = m->recall.at[h][b];
			lo = m->recall.at[h][b];
			from = p->cut[b];
		}
	}
	size_t le = (size_t)t->layers * t->experts;
	p->cdf = calloc(le, sizeof(*p->cdf));
	p->list = malloc(p->cut[2] * sizeof(*p->list));
	p->band = malloc(p->cut[2]);
	p->used = calloc(t->experts, 1);
	p->best = calloc(t->experts, sizeof(*p->best));
	p->touched = malloc(t->experts * sizeof(*p->touched));
	if (!p->cdf || !p->list || !p->band || !p->used || !p->best || !p->touched) {
		replay_predictor_free(p);
		return -ENOMEM;
	}
	/* Popularity per layer over the decode tokens, +1 so every expert
	 * can be a decoy. */
	for (uint32_t tok = 0; tok < t->tokens; tok++)
		for (uint32_t l = 0; l < t->layers; l++) {
			const uint16_t *e = fs_trace_token(t, tok, l);
			for (uint32_t k = 0; k < t->topk; k++)
				p->cdf[(size_t)l * t->experts + e[k]] += 1.0;
		}
	for (uint32_t l = 0; l < t->layers; l++) {
		double *c = p->cdf + (size_t)l * t->experts, sum = 0.0;
		for (uint32_t e = 0; e < t->experts; e++) {
			sum += c[e] + 1.0;
			c[e] = sum;
		}
		for (uint32_t e = 0; e < t->experts; e++)
			c[e] /= sum;
	}
	return 0;
}

void replay_predictor_free(struct replay_predictor *p)
{
	free(p->cdf);
	free(p->list);
	free(p->band);
	free(p->used);
	free(p->best);
	free(p->touched);
	memset(p, 0, sizeof(*p));
}

static uint16_t draw_decoy(struct replay_predictor *p, struct fs_rng *rng, uint32_t layer)
{
	uint32_t n = p->t->experts;
	if (p->decoys == DECOYS_UNIFORM)
		return (uint16_t)fs_rng_below(rng, n);
	const double *c = p->cdf + (size_t)layer * n;
	double u = fs_rng_double(rng);
	uint32_t lo = 0, hi = n - 1;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (c[mid] > u)
			hi = mid;
		else
			lo = mid + 1;
	}
	return (uint16_t)lo;
}

/* Put a routed expert at a free rank of band b (or the next band with one
 * free); 0 when every rank from band b on is taken. */
static int place(struct replay_predictor *p, struct fs_rng *rng, int b, uint16_t e)
{
	for (; b < 3; b++) {
		uint32_t lo = b ? p->cut[b - 1] : 0, w = p->cut[b] - lo;
		uint32_t at = lo + fs_rng_below(rng, w);
		for (uint32_t i = 0; i < w; i++) {
			uint32_t pos = lo + (at - lo + i) % w;
			if (p->list[pos] == FS_TRACE_NONE) {
				p->list[pos] = e;
				return 1;
			}
		}
	}
	return 0;
}

static int band_of(const struct replay_predictor *p, uint32_t pos)
{
	return pos < p->cut[0] ? 0 : pos < p->cut[1] ? 1 : 2;
}

/* One token's ranked list, merged into best[] (the window's). */
static void token_list(struct replay_predictor *p, struct fs_rng *rng, const uint16_t *routed, uint32_t layer,
		       unsigned h)
{
	const struct fs_trace *t = p->t;
	uint32_t len = p->cut[2];
	for (uint32_t i = 0; i < len; i++)
		p->list[i] = FS_TRACE_NONE;
	for (uint32_t k = 0; k < t->topk; k++) {
		p->used[routed[k]] = 1;
		double u = fs_rng_double(rng);
		int b = u < p->recall[h][0] ? 0 : u < p->recall[h][1] ? 1 : u < p->recall[h][2] ? 2 : 3;
		if (b < 3)
			place(p, rng, b, routed[k]);
	}
	for (uint32_t pos = 0; pos < len && p->decoys != DECOYS_NONE; pos++) {
		if (p->list[pos] != FS_TRACE_NONE)
			continue;
		uint16_t e = FS_TRACE_NONE;
		for (int tries = 0; tries < 16 && e == FS_TRACE_NONE; tries++) {
			uint16_t d = draw_decoy(p, rng, layer);
			if (!p->used[d])
				e = d;
		}
		if (e == FS_TRACE_NONE)
			continue; /* nearly every expert is routed or listed: leave the rank empty */
		p->list[pos] = e;
		p->used[e] = 1;
	}
	for (uint32_t pos = 0; pos < len; pos++) {
		uint16_t e = p->list[pos];
		if (e == FS_TRACE_NONE)
			continue;
		p->used[e] = 0;
		float sc = p->prec[h][band_of(p, pos)];
		if (!(sc > 0.0f))
			continue; /* a band that adds no recall predicts nothing */
		if (p->best[e] == 0.0f)
			p->touched[p->ntouched++] = e;
		if (sc > p->best[e])
			p->best[e] = sc;
	}
	for (uint32_t k = 0; k < t->topk; k++)
		p->used[routed[k]] = 0;
}

uint32_t replay_predict(struct replay_predictor *p, uint32_t window, uint32_t first_token, uint32_t n_tokens,
			uint32_t layer, unsigned horizon, uint16_t *experts, float *scores)
{
	struct fs_rng rng;
	uint64_t key = p->seed ^ ((uint64_t)window << 24) ^ ((uint64_t)layer << 4) ^ horizon;
	fs_rng_seed(&rng, key * 0x9e3779b97f4a7c15ull + 0x70726564ull);
	p->ntouched = 0;
	for (uint32_t i = 0; i < n_tokens; i++)
		token_list(p, &rng, fs_trace_token(p->t, first_token + i, layer), layer, horizon - 1);
	/* Emit in expert order: independent of the draw order. */
	uint32_t n = 0;
	for (uint32_t e = 0; e < p->t->experts && n < p->ntouched; e++) {
		if (p->best[e] == 0.0f)
			continue;
		experts[n] = (uint16_t)e;
		scores[n] = p->best[e];
		p->best[e] = 0.0f;
		n++;
	}
	return n;
}
