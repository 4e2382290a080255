/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_trace_gen.c: synthetic routing traces with two knobs that matter to a
 * cache: how concentrated each layer's popularity is (Zipf skew) and how
 * often a token re-uses the previous token's experts (temporal locality).
 * Real traces have both; the generator lets tests and benchmarks dial them.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_rng.h"
#include "fs_trace.h"
#include "fs_trace_int.h"

/* Above this many (token, layer, rank) entries a "synthetic" trace is a
 * mistake in the knobs, not a workload (4 GiB of experts). */
#define GEN_MAX_ENTRIES (1ull << 31)

/* Draws that may hit already chosen experts before falling back to a
 * uniform pick among the free ones (only heavy skew with topk close to
 * experts ever gets there). */
#define GEN_MAX_RETRIES 64

void fs_trace_gen_defaults(struct fs_trace_gen *g)
{
	*g = (struct fs_trace_gen){
		.layers = 48,
		.experts = 128,
		.topk = 8,
		.tokens_per_window = 1,
		.windows = 200,
		.skew = 1.0,
		.locality = 0.3,
		.seed = 1,
	};
}

static int check_knobs(const struct fs_trace_gen *g, char *err, size_t errlen)
{
	const char *msg;
	if (fs_trace_check_dims(g->layers, g->experts, g->topk, &msg))
		return fs_trace_fail(err, errlen, -EINVAL,
				     "synthetic trace: %u layers x %u experts, top-%u: %s", g->layers,
				     g->experts, g->topk, msg);
	if (!g->tokens_per_window || !g->windows)
		return fs_trace_fail(err, errlen, -EINVAL,
				     "synthetic trace: tokens per window and windows must be >= 1");
	uint64_t tokens = (uint64_t)g->windows * g->tokens_per_window;
	if (tokens > UINT32_MAX || tokens * g->layers * g->topk > GEN_MAX_ENTRIES)
		return fs_trace_fail(err, errlen, -EINVAL,
				     "synthetic trace: %llu tokens x %u layers x top-%u is too large",
				     (unsigned long long)tokens, g->layers, g->topk);
	if (!(g->skew >= 0.0 && g->skew <= 16.0)) /* also rejects NaN */
		return fs_trace_fail(err, errlen, -EINVAL, "synthetic trace: skew %g must be in 0..16",
				     g->skew);
	if (!(g->locality >= 0.0 && g->locality <= 1.0))
		return fs_trace_fail(err, errlen, -EINVAL, "synthetic trace: locality %g must be in 0..1",
				     g->locality);
	return 0;
}

/* Cumulative Zipf weights over popularity ranks, normalised to end at 1. */
static void zipf_cdf(double *cdf, uint32_t n, double s)
{
	double sum = 0.0;
	for (uint32_t r = 0; r < n; r++) {
		sum += pow((double)(r + 1), -s);
		cdf[r] = sum;
	}
	for (uint32_t r = 0; r < n; r++)
		cdf[r] /= sum;
	cdf[n - 1] = 1.0;
}

/* First rank whose cumulative weight exceeds u. */
static uint32_t zipf_rank(const double *cdf, uint32_t n, double u)
{
	uint32_t lo = 0, hi = n - 1;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (cdf[mid] > u)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

struct gen {
	const struct fs_trace_gen *g;
	struct fs_rng rng;
	double *cdf;         /* [experts] */
	uint16_t *perm;      /* [layers][experts]: popularity rank -> expert */
	unsigned char *used; /* [experts]: chosen for the current cell */
};

static uint16_t draw(struct gen *s, uint32_t layer)
{
	uint32_t n = s->g->experts;
	const uint16_t *perm = s->perm + (size_t)layer * n;
	for (int i = 0; i < GEN_MAX_RETRIES; i++) {
		uint16_t e = perm[zipf_rank(s->cdf, n, fs_rng_double(&s->rng))];
		if (!s->used[e])
			return e;
	}
	uint32_t start = fs_rng_below(&s->rng, n);
	for (uint32_t i = 0;; i++) { /* terminates: fewer than topk <= n are used */
		uint16_t e = (uint16_t)((start + i) % n);
		if (!s->used[e])
			return e;
	}
}

/* One token at one layer: keep some of the previous token's experts, draw
 * the rest from the layer's popularity law. */
static void gen_cell(struct gen *s, uint16_t *out, const uint16_t *prev, uint32_t layer)
{
	uint32_t k = s->g->topk, n = 0;
	if (prev)
		for (uint32_t i = 0; i < k; i++)
			if (fs_rng_double(&s->rng) < s->g->locality) {
				out[n++] = prev[i];
				s->used[prev[i]] = 1;
			}
	while (n < k) {
		uint16_t e = draw(s, layer);
		out[n++] = e;
		s->used[e] = 1;
	}
	for (uint32_t i = 0; i < k; i++)
		s->used[out[i]] = 0;
}

int fs_trace_generate(struct fs_trace *t, const struct fs_trace_gen *g, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	int rc = check_knobs(g, err, errlen);
	if (rc)
		return rc;
	uint32_t tokens = g->windows * g->tokens_per_window;
	struct gen s = {.g = g};
	fs_rng_seed(&s.rng, g->seed);
	s.cdf = malloc(g->experts * sizeof(double));
	s.perm = malloc((size_t)g->layers * g->experts * sizeof(uint16_t));
	s.used = calloc(g->experts, 1);
	rc = (s.cdf && s.perm && s.used) ? fs_trace_alloc(t, g->layers, g->experts, g->topk, tokens, 0) :
					   -ENOMEM;
	if (rc) {
		rc = fs_trace_fail(err, errlen, rc, "synthetic trace: out of memory");
		goto out;
	}
	t->seed = g->seed;
	snprintf(t->model, sizeof(t->model), "synthetic");
	snprintf(t->arch, sizeof(t->arch), "synthetic");
	for (uint32_t l = 0; l < g->layers; l++)
		t->expert_bytes[l] = g->expert_bytes;

	zipf_cdf(s.cdf, g->experts, g->skew);
	/* Each layer's own hot set: Fisher-Yates over the experts. */
	for (uint32_t l = 0; l < g->layers; l++) {
		uint16_t *p = s.perm + (size_t)l * g->experts;
		for (uint32_t i = 0; i < g->experts; i++)
			p[i] = (uint16_t)i;
		for (uint32_t i = g->experts - 1; i > 0; i--) {
			uint32_t j = fs_rng_below(&s.rng, i + 1);
			uint16_t x = p[i];
			p[i] = p[j];
			p[j] = x;
		}
	}
	for (uint32_t tok = 0; tok < tokens; tok++)
		for (uint32_t l = 0; l < g->layers; l++) {
			uint16_t *out = t->decode + ((size_t)tok * g->layers + l) * g->topk;
			gen_cell(&s, out, tok ? fs_trace_token(t, tok - 1, l) : NULL, l);
		}
out:
	free(s.cdf);
	free(s.perm);
	free(s.used);
	return rc;
}
