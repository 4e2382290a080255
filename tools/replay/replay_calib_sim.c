/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_calib_sim.c: the discussion's measurements as small simulators,
 * written from its definitions (foresight-discussion.md, section 2), not
 * through the residency core: the calibration targets are what their
 * simulator measured, so the model is checked against the same
 * definitions.  Every count is over distinct (window, layer, expert) uses.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "replay_calib.h"

int calib_windows_init(struct calib_windows *w, uint32_t from, uint32_t to, double tpw)
{
	memset(w, 0, sizeof(*w));
	if (!(tpw >= 1.0 && tpw <= 8.0) || to <= from)
		return -EINVAL;
	uint32_t cap = (uint32_t)((to - from) / tpw) + 2;
	w->first = malloc(cap * sizeof(*w->first));
	w->ntok = malloc(cap);
	if (!w->first || !w->ntok) {
		calib_windows_free(w);
		return -ENOMEM;
	}
	uint32_t tok = from;
	for (uint32_t i = 0; i < cap; i++) {
		uint32_t n = (uint32_t)(floor((i + 1) * tpw) - floor(i * tpw));
		if (tok + n > to)
			break;
		w->first[w->n] = tok;
		w->ntok[w->n++] = (uint8_t)n;
		tok += n;
	}
	return 0;
}

void calib_windows_free(struct calib_windows *w)
{
	free(w->first);
	free(w->ntok);
	memset(w, 0, sizeof(*w));
}

/* ---- the static profile ---------------------------------------------- */

struct ranked {
	uint32_t count;
	uint32_t key; /* expert * layers + layer: ties spread over the layers */
	uint32_t idx; /* layer * experts + expert */
};

static int by_count(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return x->key < y->key ? -1 : x->key > y->key;
}

void calib_static_set(const struct fs_trace *t, uint32_t profile_tokens, uint32_t slots, uint8_t *resident)
{
	size_t le = (size_t)t->layers * t->experts;
	struct ranked *r = calloc(le, sizeof(*r));
	memset(resident, 0, le);
	if (!r)
		return;
	for (size_t i = 0; i < le; i++) {
		r[i].idx = (uint32_t)i;
		r[i].key = (uint32_t)(i % t->experts) * t->layers + (uint32_t)(i / t->experts);
	}
	for (uint32_t tok = 0; tok < profile_tokens && tok < t->tokens; tok++)
		for (uint32_t l = 0; l < t->layers; l++) {
			const uint16_t *e = fs_trace_token(t, tok, l);
			for (uint32_t k = 0; k < t->topk; k++)
				r[(size_t)l * t->experts + e[k]].count++;
		}
	qsort(r, le, sizeof(*r), by_count);
	for (size_t i = 0; i < slots && i < le; i++)
		resident[r[i].idx] = 1;
	free(r);
}

/* The distinct experts window w routes at layer l, into out (stamp marks
 * what is already listed; it must be zeroed and is left zeroed). */
static uint32_t window_experts(const struct fs_trace *t, const struct calib_windows *w, uint32_t win,
			       uint32_t l, uint8_t *stamp, uint16_t *out)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < w->ntok[win]; i++) {
		const uint16_t *e = fs_trace_token(t, w->first[win] + i, l);
		for (uint32_t k = 0; k < t->topk; k++)
			if (!stamp[e[k]]) {
				stamp[e[k]] = 1;
				out[n++] = e[k];
			}
	}
	for (uint32_t i = 0; i < n; i++)
		stamp[out[i]] = 0;
	return n;
}

static void finish(struct calib_result *out, const struct fs_trace *t, const struct calib_windows *w)
{
	out->hit = out->uses ? 100.0 * (double)(out->uses - out->misses) / (double)out->uses : 0.0;
	double lw = (double)w->n * t->layers;
	out->misses_per_lw = lw > 0 ? (double)out->misses / lw : 0.0;
}

void calib_static(const struct fs_trace *t, const struct calib_windows *w, const uint8_t *resident,
		  struct calib_result *out)
{
	memset(out, 0, sizeof(*out));
	uint8_t stamp[FS_TRACE_MAX_EXPERTS + 1] = {0};
	uint16_t ex[8 * FS_TRACE_MAX_TOPK];
	for (uint32_t win = 0; win < w->n; win++)
		for (uint32_t l = 0; l < t->layers; l++) {
			uint32_t n = window_experts(t, w, win, l, stamp, ex);
			out->uses += n;
			for (uint32_t i = 0; i < n; i++)
				out->misses += !resident[(size_t)l * t->experts + ex[i]];
		}
	finish(out, t, w);
}

/* ---- the recency ring ------------------------------------------------- */

struct pending {
	uint32_t at; /* window from which it is usable */
	uint32_t idx;
};

int calib_ring(const struct fs_trace *t, const struct calib_windows *w, uint32_t profile_tokens,
	       uint32_t slots, uint32_t ring, uint32_t delay, struct calib_result *out)
{
	memset(out, 0, sizeof(*out));
	size_t le = (size_t)t->layers * t->experts;
	uint32_t taken = ring * t->layers;
	uint8_t *res = malloc(le);
	uint32_t *ring_e = malloc((size_t)t->layers * (ring ? ring : 1) * sizeof(uint32_t));
	uint32_t *ring_at = calloc((size_t)t->layers * (ring ? ring : 1),
				   sizeof(uint32_t)); /* last use + 1 */
	/* pending copies come from the last `delay` windows only */
	uint32_t pcap = (delay + 1) * t->layers * 8 * t->topk + 1;
	struct pending *q = malloc((size_t)pcap * sizeof(*q));
	if (!res || !ring_e || !ring_at || !q) {
		free(res), free(ring_e), free(ring_at), free(q);
		return -ENOMEM;
	}
	calib_static_set(t, profile_tokens, slots > taken ? slots - taken : 0, res);
	uint32_t qh = 0, qt = 0;
	uint8_t stamp[FS_TRACE_MAX_EXPERTS + 1] = {0};
	uint16_t ex[8 * FS_TRACE_MAX_TOPK];
	for (uint32_t win = 0; win < w->n; win++) {
		/* copies that land by this window join their layer's ring (LRU) */
		for (; qh != qt && q[qh % pcap].at <= win; qh++) {
			uint32_t idx = q[qh % pcap].idx, l = idx / t->experts, e = idx % t->experts;
			uint32_t *re = ring_e + (size_t)l * ring, *ra = ring_at + (size_t)l * ring, v = 0;
			for (uint32_t i = 0; i < ring; i++) {
				if (ra[i] && re[i] == e) {
					v = i;
					break;
				}
				if (ra[i] < ra[v])
					v = i;
			}
			re[v] = e;
			ra[v] = win + 1;
		}
		for (uint32_t l = 0; l < t->layers; l++) {
			uint32_t n = window_experts(t, w, win, l, stamp, ex);
			uint32_t *re = ring_e + (size_t)l * ring, *ra = ring_at + (size_t)l * ring;
			out->uses += n;
			for (uint32_t i = 0; i < n; i++) {
				size_t idx = (size_t)l * t->experts + ex[i];
				if (res[idx])
					continue;
				int hit = 0;
				for (uint32_t j = 0; j < ring && !hit; j++)
					if (ra[j] && re[j] == ex[i]) {
						ra[j] = win + 1;
						hit = 1;
					}
				if (hit)
					continue;
				out->misses++;
				if (ring && qt - qh < pcap)
					q[qt++ % pcap] = (struct pending){win + delay, (uint32_t)idx};
			}
		}
	}
	finish(out, t, w);
	free(res), free(ring_e), free(ring_at), free(q);
	return 0;
}

/* ---- Strata's adapt rules --------------------------------------------- */

/* A non-resident needs this decayed usage to be swapped in, and this much
 * more than the resident it replaces: the discussion's "more aggressive"
 * setting was usage >= 1 and a gain of 0-1, so the defaults are above. */
#define ADAPT_MIN_USE 2.0
#define ADAPT_MIN_GAIN 1.0

struct cand {
	float use;
	uint32_t idx;
};

static int by_use_desc(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	if (x->use != y->use)
		return x->use > y->use ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

int calib_adapt(const struct fs_trace *t, const struct calib_windows *w, uint32_t profile_tokens,
		uint32_t slots, uint32_t every, double decay, uint32_t swaps, struct calib_result *out)
{
	memset(out, 0, sizeof(*out));
	size_t le = (size_t)t->layers * t->experts;
	uint8_t *res = malloc(le);
	float *use = calloc(le, sizeof(float));
	struct cand *in = malloc(le * sizeof(*in)), *outc = malloc(le * sizeof(*outc));
	if (!res || !use || !in || !outc) {
		free(res), free(use), free(in), free(outc);
		return -ENOMEM;
	}
	calib_static_set(t, profile_tokens, slots, res);
	uint8_t stamp[FS_TRACE_MAX_EXPERTS + 1] = {0};
	uint16_t ex[8 * FS_TRACE_MAX_TOPK];
	for (uint32_t win = 0; win < w->n; win++) {
		for (uint32_t l = 0; l < t->layers; l++) {
			uint32_t n = window_experts(t, w, win, l, stamp, ex);
			out->uses += n;
			for (uint32_t i = 0; i < n; i++)
				out->misses += !res[(size_t)l * t->experts + ex[i]];
			for (uint32_t i = 0; i < w->ntok[win]; i++) {
				const uint16_t *e = fs_trace_token(t, w->first[win] + i, l);
				for (uint32_t k = 0; k < t->topk; k++)
					use[(size_t)l * t->experts + e[k]] += 1.0f;
			}
		}
		if ((win + 1) % every)
			continue;
		/* the hottest non-residents against the coldest residents */
		size_t ni = 0, no = 0;
		for (size_t i = 0; i < le; i++) {
			if (res[i])
				outc[no++] = (struct cand){-use[i], (uint32_t)i};
			else if (use[i] >= ADAPT_MIN_USE)
				in[ni++] = (struct cand){use[i], (uint32_t)i};
		}
		qsort(in, ni, sizeof(*in), by_use_desc);
		qsort(outc, no, sizeof(*outc), by_use_desc); /* -use descending: coldest first */
		for (size_t i = 0; i < swaps && i < ni && i < no; i++) {
			if (in[i].use < -outc[i].use + ADAPT_MIN_GAIN)
				break;
			res[in[i].idx] = 1; /* usable from the next window */
			res[outc[i].idx] = 0;
		}
		for (size_t i = 0; i < le; i++)
			use[i] *= (float)decay;
	}
	finish(out, t, w);
	free(res), free(use), free(in), free(outc);
	return 0;
}

/* ---- trace statistics within sessions ----------------------------------- */

double calib_reuse(const struct fs_trace *t, uint32_t session, uint32_t lag)
{
	uint8_t mark[FS_TRACE_MAX_EXPERTS + 1] = {0};
	uint64_t same = 0, all = 0;
	for (uint32_t tok = lag; tok < t->tokens; tok++) {
		if (session && tok / session != (tok - lag) / session)
			continue;
		for (uint32_t l = 0; l < t->layers; l++) {
			const uint16_t *a = fs_trace_token(t, tok - lag, l), *b = fs_trace_token(t, tok, l);
			for (uint32_t k = 0; k < t->topk; k++)
				mark[a[k]] = 1;
			for (uint32_t k = 0; k < t->topk; k++)
				same += mark[b[k]];
			for (uint32_t k = 0; k < t->topk; k++)
				mark[a[k]] = 0;
			all += t->topk;
		}
	}
	return all ? (double)same / (double)all : 0.0;
}

double calib_distinct(const struct fs_trace *t, uint32_t session, uint32_t n)
{
	uint8_t mark[FS_TRACE_MAX_EXPERTS + 1] = {0};
	uint64_t distinct = 0, spans = 0;
	uint32_t len = session ? session : t->tokens;
	for (uint32_t s0 = 0; s0 < t->tokens; s0 += len)
		for (uint32_t a = s0; a + n <= s0 + len && a + n <= t->tokens; a += n)
			for (uint32_t l = 0; l < t->layers; l++) {
				uint32_t d = 0;
				for (uint32_t tok = a; tok < a + n; tok++) {
					const uint16_t *e = fs_trace_token(t, tok, l);
					for (uint32_t k = 0; k < t->topk; k++)
						if (!mark[e[k]]) {
							mark[e[k]] = 1;
							d++;
						}
				}
				for (uint32_t tok = a; tok < a + n; tok++) {
					const uint16_t *e = fs_trace_token(t, tok, l);
					for (uint32_t k = 0; k < t->topk; k++)
						mark[e[k]] = 0;
				}
				distinct += d;
				spans++;
			}
	return spans ? (double)distinct / (double)spans : 0.0;
}

/*
 * Routing-only recall (issue 32): within each session, counts learned from
 * the session's earlier tokens only: how often expert b was used h layers
 * after expert a by the same token.  Each later token's experts at layer l
 * then rank the candidates of layer l + h by the sum over its experts a of
 * count(a -> b) / uses(a) (the mean of P(b | a): the measure); the
 * share of the token's experts at l + h ranked within the first k (its
 * top-k) and 2k, over every (token, layer) after a session's first token.
 * No oracle, nothing but earlier routing: what a predictor from routing
 * alone can know.  O(layers x experts^2) counts per horizon.
 */
int calib_route_recall(const struct fs_trace *t, uint32_t session, unsigned h, double *at_k, double *at_2k)
{
	uint32_t L = t->layers, E = t->experts, K = t->topk;
	*at_k = *at_2k = 0.0;
	if (h < 1 || h >= L || 2 * K > 64)
		return -EINVAL;
	uint16_t *cnt = calloc((size_t)L * E * E, sizeof(uint16_t));
	uint32_t *n = calloc((size_t)L * E, sizeof(uint32_t));
	double *sc = calloc(E, sizeof(double));
	uint8_t *mark = calloc(E, 1);
	if (!cnt || !n || !sc || !mark) {
		free(cnt), free(n), free(sc), free(mark);
		return -ENOMEM;
	}
	uint64_t in_k = 0, in_2k = 0, all = 0;
	uint32_t len = session ? session : t->tokens;
	for (uint32_t tok = 0; tok < t->tokens; tok++) {
		if (tok % len == 0) {
			memset(cnt, 0, (size_t)L * E * E * sizeof(uint16_t));
			memset(n, 0, (size_t)L * E * sizeof(uint32_t));
		}
		for (uint32_t l = 0; tok % len && l + h < L; l++) {
			const uint16_t *a = fs_trace_token(t, tok, l), *b = fs_trace_token(t, tok, l + h);
			memset(sc, 0, E * sizeof(double));
			for (uint32_t i = 0; i < K; i++) {
				uint32_t na = n[(size_t)l * E + a[i]];
				const uint16_t *c = cnt + ((size_t)l * E + a[i]) * E;
				for (uint32_t e = 0; na && e < E; e++)
					sc[e] += (double)c[e] / na;
			}
			/* the best 2k with a score (ties: the lower expert) */
			uint16_t best[64];
			uint32_t nb = 0;
			for (uint32_t e = 0; e < E; e++) {
				if (!(sc[e] > 0.0))
					continue;
				uint32_t j = nb < 2 * K ? nb++ : 2 * K;
				while (j > 0 && sc[best[j - 1]] < sc[e]) {
					if (j < 2 * K)
						best[j] = best[j - 1];
					j--;
				}
				if (j < 2 * K)
					best[j] = (uint16_t)e;
			}
			for (uint32_t i = 0; i < K; i++)
				mark[b[i]] = 1;
			for (uint32_t j = 0; j < nb; j++) {
				in_2k += mark[best[j]];
				in_k += j < K && mark[best[j]];
			}
			for (uint32_t i = 0; i < K; i++)
				mark[b[i]] = 0;
			all += K;
		}
		for (uint32_t l = 0; l + h < L; l++) {
			const uint16_t *a = fs_trace_token(t, tok, l), *b = fs_trace_token(t, tok, l + h);
			for (uint32_t i = 0; i < K; i++) {
				n[(size_t)l * E + a[i]]++;
				uint16_t *c = cnt + ((size_t)l * E + a[i]) * E;
				for (uint32_t j = 0; j < K; j++)
					if (c[b[j]] < UINT16_MAX)
						c[b[j]]++;
			}
		}
	}
	free(cnt), free(n), free(sc), free(mark);
	*at_k = all ? (double)in_k / (double)all : 0.0;
	*at_2k = all ? (double)in_2k / (double)all : 0.0;
	return 0;
}
