/* SPDX-License-Identifier: Apache-2.0 */
/*
 * eb_ra.c: what `--predictor kernel` feeds the router-ahead kernel
 * (kernels/router_ahead.cu): a router per layer and, per window and layer,
 * the tokens' hidden rows, made so that applying layer l+h's router to
 * layer l's rows recovers the trace's routing of layer l+h about as well as
 * the discussion measured on a real model.
 *
 * The benchmark has no model: its experts are integer blobs and its
 * routing comes from a trace.  A router-ahead kernel still needs a real
 * matrix-vector product of the real size to cost what it costs, and its
 * recall is what decides how much prefetch can hide.  So:
 *  - router_l[e] has N(0, 1/d) entries (d = --ra-dim, 2048 by default:
 *    Qwen3-Next's hidden size), so rows have norm ~1 and two rows are
 *    nearly orthogonal;
 *  - hidden_l[t] = sum over h = 1..3 of a_h * (sum of router_{l+h}[e] over
 *    the experts token t routes to at layer l+h) + N(0, 1) entries.
 *    Then router_{l+h}[e] . hidden_l[t] is about a_h for a routed expert
 *    and 0 for the others, with unit noise: a per-token ranking whose
 *    recall falls with a_h.  a_h = 2.7, 2.45, 2.3 give, by a Gaussian
 *    model of that ranking, 61/79/89 %, 52/72/83 % and 47/67/79 % of the
 *    routed experts within 10/24/48 candidates one, two and three layers
 *    ahead: the discussion's table (61/82/90, 52/72/83, 46/66/78).
 *    (a_1 is 2.85, a little above the model's 2.7: the other horizons' rows
 *    add noise the model leaves out; measured 58 % at 2.7.)
 * eb_ra_recall() measures the recall actually obtained on a sample (the
 * engine prints it), so a run reports what its predictor did, not what
 * was aimed for.
 * Everything is built before the run (the hidden rows stand for what the
 * model's layer computes anyway); only the kernel runs in the loop.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eb.h"

struct eb_ra {
	uint32_t L, E, K, dim;
	uint16_t *router; /* bf16 [L][E][dim] */
	uint16_t *hidden; /* bf16 rows, [hoff[dw * L + l] ...] */
	uint64_t *hoff;   /* [nwin * L]: first row */
	uint64_t rows;
	double recall[3][3];
};

static uint64_t mix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* One N(0, 1) draw (Box-Muller, the cosine half). */
static float gauss(uint64_t *s)
{
	double u = ((double)(mix64(s) >> 11) + 0.5) / 9007199254740992.0;
	double v = (double)(mix64(s) >> 11) / 9007199254740992.0;
	return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* f32 -> bf16, round to nearest even (no NaNs are made here). */
static uint16_t to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static const double eb_ra_strength[3] = {2.85, 2.45, 2.3};

/* The trace's experts of token `tok` at `layer` (top-K, rank order). */
static const uint16_t *routed(const struct eb_route *r, uint32_t tok, uint32_t layer)
{
	return &r->t.decode[((uint64_t)tok * r->t.layers + layer) * r->t.topk];
}

static void build_row(const struct eb_ra *ra, const struct eb_route *r, uint32_t tok, uint32_t l, float *acc,
		      uint64_t *rng)
{
	for (uint32_t i = 0; i < ra->dim; i++)
		acc[i] = gauss(rng);
	for (uint32_t h = 1; h <= 3 && l + h < ra->L; h++) {
		const uint16_t *x = routed(r, tok, l + h);
		float a = (float)eb_ra_strength[h - 1];
		for (uint32_t k = 0; k < ra->K; k++) {
			if (x[k] >= ra->E)
				continue;
			const uint16_t *w = &ra->router[((uint64_t)(l + h) * ra->E + x[k]) * ra->dim];
			for (uint32_t i = 0; i < ra->dim; i++)
				acc[i] += a * from_bf16(w[i]);
		}
	}
}

/* Per-token recall within 10/24/48 candidates, h = 1..3, on up to 64
 * (window, layer, token) rows spread over the run, in f32 on the CPU (the
 * kernel ranks the same products, aggregated over the window's tokens). */
static void measure(struct eb_ra *ra, const struct eb_route *r)
{
	static const uint32_t cut[3] = {10, 24, 48};
	uint64_t hit[3][3] = {{0}}, all[3] = {0};
	float *lg = malloc(ra->E * sizeof(*lg));
	if (!lg)
		return;
	uint32_t samples = 64;
	for (uint32_t i = 0; i < samples; i++) {
		uint32_t dw = (uint32_t)((uint64_t)i * r->nwin / samples);
		uint32_t l = (i * 7u) % (ra->L > 1 ? ra->L - 1 : 1);
		uint32_t tok = r->first[dw];
		const uint16_t *hrow = &ra->hidden[ra->hoff[(uint64_t)dw * ra->L + l] * ra->dim];
		for (uint32_t h = 1; h <= 3 && l + h < ra->L; h++) {
			for (uint32_t e = 0; e < ra->E; e++) {
				const uint16_t *w = &ra->router[((uint64_t)(l + h) * ra->E + e) * ra->dim];
				float s = 0;
				for (uint32_t j = 0; j < ra->dim; j++)
					s += from_bf16(w[j]) * from_bf16(hrow[j]);
				lg[e] = s;
			}
			const uint16_t *x = routed(r, tok, l + h);
			for (uint32_t k = 0; k < ra->K; k++) {
				uint32_t xe = x[k];
				if (xe >= ra->E)
					continue;
				uint32_t above = 0; /* rank of xe (ties: lower id first) */
				float v = lg[xe];
				for (uint32_t e = 0; e < ra->E; e++) {
					int lower_id = e < xe;
					above += lg[e] > v || (lower_id && lg[e] == v);
				}
				all[h - 1]++;
				for (int c = 0; c < 3; c++)
					hit[h - 1][c] += above < cut[c];
			}
		}
	}
	for (int h = 0; h < 3; h++)
		for (int c = 0; c < 3; c++)
			ra->recall[h][c] = all[h] ? (double)hit[h][c] / (double)all[h] : 0;
	free(lg);
}

int eb_ra_create(struct eb_ra **out, const struct eb_route *r, uint32_t dim, uint64_t seed, char *err,
		 size_t errlen)
{
	struct eb_ra *ra = calloc(1, sizeof(*ra));
	if (!ra)
		goto oom;
	*out = ra;
	ra->L = r->t.layers, ra->E = r->t.experts, ra->K = r->t.topk, ra->dim = dim;
	for (uint32_t dw = 0; dw < r->nwin; dw++)
		ra->rows += (uint64_t)r->ntok[dw] * ra->L;
	ra->router = malloc((uint64_t)ra->L * ra->E * dim * sizeof(*ra->router));
	ra->hidden = malloc(ra->rows * dim * sizeof(*ra->hidden));
	ra->hoff = malloc((uint64_t)r->nwin * ra->L * sizeof(*ra->hoff));
	float *acc = malloc(dim * sizeof(*acc));
	if (!ra->router || !ra->hidden || !ra->hoff || !acc) {
		free(acc);
		goto oom;
	}
	uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 17;
	float sd = 1.0f / sqrtf((float)dim);
	for (uint64_t i = 0; i < (uint64_t)ra->L * ra->E * dim; i++)
		ra->router[i] = to_bf16(sd * gauss(&rng));
	uint64_t row = 0;
	for (uint32_t dw = 0; dw < r->nwin; dw++)
		for (uint32_t l = 0; l < ra->L; l++) {
			ra->hoff[(uint64_t)dw * ra->L + l] = row;
			for (uint32_t t = 0; t < r->ntok[dw]; t++, row++) {
				build_row(ra, r, r->first[dw] + t, l, acc, &rng);
				for (uint32_t i = 0; i < dim; i++)
					ra->hidden[row * dim + i] = to_bf16(acc[i]);
			}
		}
	free(acc);
	measure(ra, r);
	return 0;
oom:
	snprintf(err, errlen, "router-ahead inputs: out of memory");
	return -1;
}

void eb_ra_free(struct eb_ra *ra)
{
	if (!ra)
		return;
	free(ra->router);
	free(ra->hidden);
	free(ra->hoff);
	free(ra);
}

const uint16_t *eb_ra_routers(const struct eb_ra *ra, uint64_t *bytes)
{
	*bytes = (uint64_t)ra->L * ra->E * ra->dim * sizeof(*ra->router);
	return ra->router;
}

const uint16_t *eb_ra_hidden_all(const struct eb_ra *ra, uint64_t *bytes)
{
	*bytes = ra->rows * ra->dim * sizeof(*ra->hidden);
	return ra->hidden;
}

uint64_t eb_ra_row(const struct eb_ra *ra, uint32_t dw, uint32_t layer)
{
	return ra->hoff[(uint64_t)dw * ra->L + layer];
}

void eb_ra_recall(const struct eb_ra *ra, double out[3][3])
{
	memcpy(out, ra->recall, sizeof(ra->recall));
}
