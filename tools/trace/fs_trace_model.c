/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_trace_model.c: the calibrated routing model (fs_trace_model.h says
 * what each source means).  Per (token, layer) it fills topk slots, each
 * from one source: short-term reuse, the token's topic, or the layer's
 * global popularity.  Draws are O(1) or O(log E) each, so a few thousand
 * tokens of the 48 x 512 box take a fraction of a second.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_rng.h"
#include "fs_trace_int.h"
#include "fs_trace_model.h"

/* Above this many (token, layer, rank) entries the request is a mistake. */
#define MODEL_MAX_ENTRIES (1ull << 31)
/* Redraws of a repeated expert before a uniform pick among the free ones. */
#define MODEL_RETRIES 32
#define MODEL_MAX_TOPICS 64u
#define MODEL_MAX_PATHS 4096u

void fs_trace_model_defaults(struct fs_trace_model *m)
{
	*m = (struct fs_trace_model){
		.layers = 48,
		.experts = 512,
		.topk = 10,
		.tokens = 2000,
		.session_tokens = 500,
		.seed = 1,
		.sigma = 1.8,
		.layer_spread = 0.15,
		.reuse = 0.25,
		.reuse_decay = 0.525,
		.topic = 0.165,
		.topics = 4,
		.topic_size = 2.0,
		.topic_temper = 0.95,
		.topic_drift = 0.0075,
		.topic_stay = 0.93,
	};
}

static int in01(double v)
{
	return v >= 0.0 && v <= 1.0; /* false for NaN */
}

static int check(const struct fs_trace_model *m, char *err, size_t errlen)
{
	const char *msg;
	if (fs_trace_check_dims(m->layers, m->experts, m->topk, &msg))
		return fs_trace_fail(err, errlen, -EINVAL,
				     "routing model: %u layers x %u experts, top-%u: %s", m->layers,
				     m->experts, m->topk, msg);
	if (!m->tokens || (uint64_t)m->tokens * m->layers * m->topk > MODEL_MAX_ENTRIES)
		return fs_trace_fail(err, errlen, -EINVAL, "routing model: %u tokens is out of range",
				     m->tokens);
	if (!(m->sigma >= 0.0 && m->sigma <= 8.0) || !(m->layer_spread >= 0.0 && m->layer_spread <= 2.0))
		return fs_trace_fail(err, errlen, -EINVAL,
				     "routing model: sigma must be in 0..8, spread in 0..2");
	if (!in01(m->reuse) || !in01(m->reuse_decay) || !in01(m->topic) || !in01(m->topic_drift) ||
	    !in01(m->topic_stay) || !in01(m->path) || m->reuse + m->topic + m->path > 1.0)
		return fs_trace_fail(
			err, errlen, -EINVAL,
			"routing model: shares and chances must be in 0..1, reuse + topic + path <= 1");
	if (m->path > 0.0 &&
	    (!m->paths || m->paths > MODEL_MAX_PATHS || !(m->path_size > 0.0 && m->path_size <= 64.0) ||
	     !(m->path_temper >= 0.0 && m->path_temper <= 2.0) || !in01(m->path_stay) ||
	     !(m->path_skew >= 0.0 && m->path_skew <= 4.0)))
		return fs_trace_fail(err, errlen, -EINVAL, "routing model: paths 1..%u, path size in (0, 64]",
				     MODEL_MAX_PATHS);
	if (!m->topics || m->topics > MODEL_MAX_TOPICS || !(m->topic_size > 0.0 && m->topic_size <= 64.0) ||
	    !(m->topic_temper >= 0.0 && m->topic_temper <= 2.0))
		return fs_trace_fail(err, errlen, -EINVAL,
				     "routing model: topics 1..%u, topic size in (0, 64], temper in 0..2",
				     MODEL_MAX_TOPICS);
	return 0;
}

struct model {
	const struct fs_trace_model *m;
	struct fs_trace *t;
	struct fs_rng rng;
	uint32_t L, E, K;
	uint32_t tsize; /* experts per topic and layer */
	double *cdf;    /* [L][E]: global popularity */
	double *tcdf;   /* [L][E]: popularity^temper, for topic members */
	double *pcdf;   /* [L][E]: popularity^path_temper, for path members */
	double lag_cdf[FS_TRACE_MODEL_HISTORY];
	uint16_t *topic_set; /* [topics][L][tsize] */
	uint32_t psize;      /* experts per path and layer */
	uint16_t *path_set;  /* [paths][L][psize], NULL without paths */
	double *path_cdf;    /* [paths]: how often each path is drawn */
	double *w;           /* [E]: scratch */
	unsigned char *used; /* [E] */
};

/* A standard normal draw (Box-Muller, one of the pair). */
static double normal(struct fs_rng *r)
{
	double u = fs_rng_double(r), v = fs_rng_double(r);
	return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

static uint32_t cdf_pick(const double *cdf, uint32_t n, double u)
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

/* Per layer: log-normal weights for the global law and their tempered
 * version for topic members, both as cumulative sums ending at 1. */
static void build_popularity(struct model *s)
{
	const struct fs_trace_model *m = s->m;
	double *w = s->w;
	for (uint32_t l = 0; l < s->L; l++) {
		double sig = m->sigma * exp(m->layer_spread * normal(&s->rng));
		for (uint32_t e = 0; e < s->E; e++)
			w[e] = sig * normal(&s->rng);
		double *c = s->cdf + (size_t)l * s->E, *tc = s->tcdf + (size_t)l * s->E;
		double sum = 0.0, tsum = 0.0;
		for (uint32_t e = 0; e < s->E; e++) {
			sum += exp(w[e]);
			tsum += exp(m->topic_temper * w[e]);
			c[e] = sum;
			tc[e] = tsum;
		}
		for (uint32_t e = 0; e < s->E; e++) {
			c[e] /= sum;
			tc[e] /= tsum;
		}
		c[s->E - 1] = tc[s->E - 1] = 1.0;
		if (s->pcdf) {
			double *pc = s->pcdf + (size_t)l * s->E, psum = 0.0;
			for (uint32_t e = 0; e < s->E; e++)
				pc[e] = (psum += exp(m->path_temper * w[e]));
			for (uint32_t e = 0; e < s->E; e++)
				pc[e] /= psum;
			pc[s->E - 1] = 1.0;
		}
	}
}

static uint16_t topic_member(struct model *s, uint32_t l)
{
	return (uint16_t)cdf_pick(s->tcdf + (size_t)l * s->E, s->E, fs_rng_double(&s->rng));
}

static void new_session(struct model *s)
{
	size_t n = (size_t)s->m->topics * s->L * s->tsize;
	for (size_t i = 0; i < n; i++)
		s->topic_set[i] = topic_member(s, (uint32_t)(i / s->tsize % s->L));
}

static void drift_topics(struct model *s)
{
	if (s->m->topic_drift <= 0.0)
		return;
	size_t n = (size_t)s->m->topics * s->L * s->tsize;
	for (size_t i = 0; i < n; i++)
		if (fs_rng_double(&s->rng) < s->m->topic_drift)
			s->topic_set[i] = topic_member(s, (uint32_t)(i / s->tsize % s->L));
}

/* One slot's candidate from its source (may repeat one already chosen). */
static uint16_t candidate(struct model *s, uint32_t tok, uint32_t since, uint32_t l, uint32_t topic,
			  uint32_t path)
{
	const struct fs_trace_model *m = s->m;
	double u = fs_rng_double(&s->rng);
	if (u < m->reuse && tok > since) {
		/* 1 <= back <= history: tok > since */
		uint32_t back = tok - since < FS_TRACE_MODEL_HISTORY ? tok - since : FS_TRACE_MODEL_HISTORY;
		double top = s->lag_cdf[back > 0 ? back - 1 : 0];
		uint32_t lag = 1 + cdf_pick(s->lag_cdf, back, fs_rng_double(&s->rng) * top);
		const uint16_t *prev = fs_trace_token(s->t, tok - lag, l);
		return prev[fs_rng_below(&s->rng, s->K)];
	}
	if (u < m->reuse + m->topic) {
		const uint16_t *set = s->topic_set + ((size_t)topic * s->L + l) * s->tsize;
		return set[fs_rng_below(&s->rng, s->tsize)];
	}
	if (u < m->reuse + m->topic + m->path) {
		const uint16_t *set = s->path_set + ((size_t)path * s->L + l) * s->psize;
		return set[fs_rng_below(&s->rng, s->psize)];
	}
	return (uint16_t)cdf_pick(s->cdf + (size_t)l * s->E, s->E, fs_rng_double(&s->rng));
}

static void gen_cell(struct model *s, uint32_t tok, uint32_t since, uint32_t l, uint32_t topic, uint32_t path)
{
	uint16_t *out = s->t->decode + ((size_t)tok * s->L + l) * s->K;
	for (uint32_t k = 0; k < s->K; k++) {
		uint16_t e = candidate(s, tok, since, l, topic, path);
		for (int i = 0; s->used[e] && i < MODEL_RETRIES; i++)
			e = candidate(s, tok, since, l, topic, path);
		if (s->used[e]) { /* only when topk is close to experts */
			uint32_t start = fs_rng_below(&s->rng, s->E);
			for (uint32_t i = 0; s->used[e]; i++)
				e = (uint16_t)((start + i) % s->E);
		}
		out[k] = e;
		s->used[e] = 1;
	}
	for (uint32_t k = 0; k < s->K; k++)
		s->used[out[k]] = 0;
}

int fs_trace_model_generate(struct fs_trace *t, const struct fs_trace_model *m, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	int rc = check(m, err, errlen);
	if (rc)
		return rc;
	struct model s = {.m = m, .t = t, .L = m->layers, .E = m->experts, .K = m->topk};
	double ts = ceil(m->topic_size * m->topk);
	s.tsize = ts < 1.0 ? 1u : ts > m->experts ? m->experts : (uint32_t)ts;
	size_t le = (size_t)s.L * s.E;
	s.cdf = malloc(le * sizeof(double));
	s.tcdf = malloc(le * sizeof(double));
	s.topic_set = malloc((size_t)m->topics * s.L * s.tsize * sizeof(uint16_t));
	s.used = calloc(s.E, 1);
	s.w = malloc(s.E * sizeof(double));
	double ps = ceil(m->path_size * m->topk);
	s.psize = ps < 1.0 ? 1u : ps > m->experts ? m->experts : (uint32_t)ps;
	if (m->path > 0.0) {
		s.path_set = malloc((size_t)m->paths * s.L * s.psize * sizeof(uint16_t));
		s.pcdf = malloc(le * sizeof(double));
		s.path_cdf = malloc(m->paths * sizeof(double));
	}
	rc = s.cdf && s.tcdf && s.topic_set && s.used && s.w &&
			     (m->path <= 0.0 || (s.path_set && s.pcdf && s.path_cdf)) ?
		     fs_trace_alloc(t, s.L, s.E, s.K, m->tokens, 0) :
		     -ENOMEM;
	if (rc) {
		rc = fs_trace_fail(err, errlen, rc, "routing model: out of memory");
		goto out;
	}
	t->seed = m->seed;
	snprintf(t->model, sizeof(t->model), "routing-model");
	snprintf(t->arch, sizeof(t->arch), "synthetic");
	for (uint32_t l = 0; l < s.L; l++)
		t->expert_bytes[l] = m->expert_bytes;
	fs_rng_seed(&s.rng, m->seed);
	double c = 0.0, w = 1.0;
	for (uint32_t j = 0; j < FS_TRACE_MODEL_HISTORY; j++, w *= m->reuse_decay)
		s.lag_cdf[j] = (c += w);
	build_popularity(&s);
	/* The model's paths, after its popularity (without paths the draws
	 * are the ones the model always made). */
	for (size_t i = 0; s.path_set && i < (size_t)m->paths * s.L * s.psize; i++)
		s.path_set[i] = (uint16_t)cdf_pick(s.pcdf + (i / s.psize % s.L) * s.E, s.E,
						   fs_rng_double(&s.rng));
	if (s.path_cdf) {
		double sum = 0.0;
		for (uint32_t i = 0; i < m->paths; i++)
			s.path_cdf[i] = (sum += pow((double)(i + 1), -m->path_skew));
		for (uint32_t i = 0; i < m->paths; i++)
			s.path_cdf[i] /= sum;
		s.path_cdf[m->paths - 1] = 1.0;
	}

	uint32_t since = 0, topic = 0, path = 0;
	for (uint32_t tok = 0; tok < m->tokens; tok++) {
		if (tok == 0 || (m->session_tokens && tok % m->session_tokens == 0)) {
			since = tok;
			new_session(&s);
			topic = fs_rng_below(&s.rng, m->topics);
		} else {
			drift_topics(&s);
			if (fs_rng_double(&s.rng) >= m->topic_stay)
				topic = fs_rng_below(&s.rng, m->topics);
		}
		if (s.path_set && (tok == 0 || fs_rng_double(&s.rng) >= m->path_stay))
			path = cdf_pick(s.path_cdf, m->paths, fs_rng_double(&s.rng));
		for (uint32_t l = 0; l < s.L; l++)
			gen_cell(&s, tok, since, l, topic, path);
	}
out:
	free(s.cdf);
	free(s.tcdf);
	free(s.topic_set);
	free(s.path_set);
	free(s.pcdf);
	free(s.path_cdf);
	free(s.used);
	free(s.w);
	if (rc)
		fs_trace_free(t);
	return rc;
}

int fs_trace_model_simple(struct fs_trace *t, uint32_t layers, uint32_t experts, uint32_t topk,
			  uint32_t tokens, uint32_t session_tokens, uint64_t seed, char *err, size_t errlen)
{
	struct fs_trace_model m;
	fs_trace_model_defaults(&m);
	m.layers = layers;
	m.experts = experts;
	m.topk = topk;
	m.tokens = tokens;
	m.session_tokens = session_tokens;
	m.seed = seed;
	return fs_trace_model_generate(t, &m, err, errlen);
}
