/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_learn.c: predictions from routing alone.  The core learns, from the
 * usage records engines post anyway, which experts follow which, and
 * predicts the next layers' experts itself: an engine that posts only its
 * routing (llama.cpp through the device ring) gets predicted copies with no
 * predictor of its own.  No oracle, no hidden states: what a layer chose
 * says what the next ones will choose.
 *
 * What it learns, per model (shared by every client: they run the same
 * model, and its routing statistics are the model's), decayed per token
 * (learn_decay, lazily, like the static tier's scores):
 *  - per (horizon h = 1..3, layer L, expert a): how often a was used at L
 *    in a window, and which experts b were used at L+h in the same window,
 *    with their counts (a row of at most `m` successors, 32, kept in about
 *    decreasing count, a new one replacing the last: bounded memory,
 *    FSR_LEARN_MAX_ENTRIES in all; 16 cost recall at k one layer ahead
 *    0.601 -> 0.570 on qwen, docs/results/replay.md).  L+h past
 *    the last layer is the next window's layer L+h-layers: the first layers
 *    of the next token from the last token's routing;
 *  - per (layer, expert): how often it was used in a window (the base
 *    rate), and how often a window's use came back in the next window (the
 *    per-layer repetition).
 *
 * When: a usage record only appends its expert to the client's set of the
 * (window, layer); the first record of a later layer completes the one
 * before.  The work is done in steps by fsr_learn_flush, which the host
 * calls once per pass after the pass's copies and epoch went out (so it
 * never delays them; fse_pass.c): a step learns from a completed layer,
 * or scores one of the three layers after the client's newest one (the
 * nearest first) and posts its predictions; a pass that did a step is
 * followed by another at once, which copies what it predicted and drains
 * whatever came meanwhile.  A record waits one step at most.
 *
 * How it predicts: a candidate b of
 * target layer M gets naive-Bayes log-odds: its base rate's, plus, for
 * each known layer j of M-3..M-1 and each expert a used there, the log of
 * P(b | a) over b's base rate (P smoothed toward the base rate with
 * `alpha` observations); the experts of one layer (one token's worth:
 * weighted 1/tokens) vote as independent evidence, and the known layers
 * are averaged (successive layers' routing says much the same about a
 * token, so they are not counted twice); the previous window's use of b
 * at M adds its repetition's log-ratio.  On qwen and gemma this ranks 0.60
 * and 0.58 of the routed experts into the first k one layer ahead, against
 * 0.56 and 0.54 for the mean of P(b | a) over the layer's experts (the
 * issue's sketch).
 *
 * Calibration: the raw log-odds are overconfident (the evidence is not
 * independent), so each horizon keeps bins of them with how often a
 * candidate scored there was used; a candidate's probability is its bin's
 * frequency (shrunk to the raw one while the bin has few outcomes).  The
 * scheduler and the predicted tier compare these as they compare any
 * prediction's score, so a copy's claim on the bus and on a slot is its
 * measured chance of use.
 *
 * What it posts: per (target, horizon) the best `post` candidates not
 * resident whose probability is at least `min_p`, as predictions of the
 * client (fsr_predicted_want, the path of a posted PREDICT).  With
 * FSR_LEARN_AUTO, only for clients that post no prediction of their own
 * (it keeps learning from their usage); nothing where no layer has
 * predicted slots.  A client's windows are forgotten when it goes; the
 * model is never reset (a daemon that served the model before starts
 * warm).
 *
 * Cost: a step learning a layer updates, per horizon and per expert used
 * at the source layer, one row (its m entries); a step scoring a target
 * reads the source rows' entries (3 layers x experts used x m) and keeps
 * the best in bounded insertions.  Fixed arrays, written through at
 * create, nothing allocated after (bench/residency, fs-bench-learn,
 * measures it against the core without it).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsr_internal.h"

#define LEARN_PRIOR 4.0f /* pseudo-outcomes of a calibration bin: its raw probability's */

static inline struct fsr_learn *lrn(const struct fsr *r)
{
	return r->learn;
}

/* v, stored at tick `then`, aged to the learner's clock. */
static float decay_f(const struct fsr_learn *L, uint32_t age)
{
	/* decay^age: two table lookups below 65536 tokens */
	if (age < FSR_LEARN_POW_LO * FSR_LEARN_POW_HI)
		return L->pow_lo[age % FSR_LEARN_POW_LO] * L->pow_hi[age / FSR_LEARN_POW_LO];
	return powf(L->decay, (float)age);
}

static float aged(const struct fsr_learn *L, float v, uint32_t then)
{
	uint32_t age = L->tick - then;
	return age == 0 || v == 0.0f ? v : v * decay_f(L, age);
}

static size_t row_of(const struct fsr_learn *L, unsigned h, uint32_t layer, uint32_t expert)
{
	return ((size_t)(h - 1) * L->layers + layer) * L->experts + expert;
}

/* log(x), x > 0, within about 1e-5: log(m 2^e) = e log 2 + 2 atanh(z), z =
 * (m - 1) / (m + 1) in [0, 1/3).  The calibration absorbs the rest. */
static inline float fast_log(float x)
{
	union {
		float f;
		uint32_t i;
	} u = {x};
	int e = (int)((u.i >> 23) & 0xffu) - 127;
	u.i = (u.i & 0x007fffffu) | 0x3f800000u;
	float z = (u.f - 1.0f) / (u.f + 1.0f), z2 = z * z;
	return (float)e * 0.69314718f +
	       2.0f * z * (1.0f + z2 * (0.33333333f + z2 * (0.2f + z2 * 0.14285714f)));
}

/*
 * A row's counts decay without being rewritten: they are stored divided by
 * the row's scale, and aging a row multiplies its scale (and its n).  A
 * count adds 1 / scale; a scale that has fallen below FSR_LEARN_RESCALE is
 * folded back into the counts.  The row keeps its successors roughly in
 * decreasing count: a counted one moves up past weaker ones, so the last
 * is (about) the weakest, the one a new successor replaces.
 */
static void row_age(struct fsr_learn *L, size_t row)
{
	uint32_t age = L->tick - L->row_tick[row];
	if (age == 0)
		return;
	float f = decay_f(L, age);
	L->row_n[row] *= f;
	L->row_sc[row] *= f;
	L->row_tick[row] = L->tick;
	if (L->row_sc[row] < FSR_LEARN_RESCALE) {
		float *c = L->ent_c + row * L->m;
		for (uint32_t k = 0; k < L->m; k++)
			c[k] *= L->row_sc[row];
		L->row_sc[row] = 1.0f;
	}
}

static unsigned bin_of(float s)
{
	float b = (s - FSR_LEARN_S0) / FSR_LEARN_BIN_W;
	return b < 0.0f ? 0u : b >= (float)(FSR_LEARN_BINS - 1) ? FSR_LEARN_BINS - 1 : (unsigned)b;
}

/* The calibrated probability of a raw score s at horizon h. */
static float calibrated(const struct fsr_learn *L, unsigned h, float s)
{
	unsigned b = bin_of(s);
	return (L->cal_hit[h - 1][b] + LEARN_PRIOR * L->bin_raw[b]) / (L->cal_n[h - 1][b] + LEARN_PRIOR);
}

/* ---- create, destroy, clients -------------------------------------------- */

int fsr_learn_create(struct fsr *r, const struct fsr_config *cfg)
{
	if (cfg->learn == FSR_LEARN_OFF || !r->tiers)
		return 0;
	size_t rows = (size_t)FSR_HORIZONS * r->layers * r->experts;
	size_t m = FSR_LEARN_MAX_ENTRIES / rows;
	if (m > FSR_LEARN_ROW_MAX)
		m = FSR_LEARN_ROW_MAX;
	if (m > r->experts)
		m = r->experts;
	if (m < FSR_LEARN_ROW_MIN)
		return 0; /* too big a model for the bound: no learner (fsr_learn_stats says so) */
	struct fsr_learn *L = calloc(1, sizeof(*L));
	if (!L)
		return -ENOMEM;
	r->learn = L;
	L->layers = r->layers;
	L->experts = r->experts;
	L->m = (uint32_t)m;
	L->mode = (int)cfg->learn;
	L->post = cfg->learn_post ? cfg->learn_post : 8;
	L->decay = cfg->learn_decay;
	L->alpha = 1.0f;
	L->min_p = cfg->learn_min_p;
	for (uint32_t i = 0; i < FSR_LEARN_POW_LO; i++)
		L->pow_lo[i] = powf(L->decay, (float)i);
	for (uint32_t i = 0; i < FSR_LEARN_POW_HI; i++)
		L->pow_hi[i] = powf(L->decay, (float)(i * FSR_LEARN_POW_LO));
	for (uint32_t b = 0; b < FSR_LEARN_BINS; b++)
		L->bin_raw[b] = 1.0f / (1.0f + expf(-(FSR_LEARN_S0 + ((float)b + 0.5f) * FSR_LEARN_BIN_W)));
	size_t le = (size_t)r->layers * r->experts;
	L->row_n = calloc(rows, sizeof(*L->row_n));
	L->row_tick = calloc(rows, sizeof(*L->row_tick));
	L->ent_e = malloc(rows * m * sizeof(*L->ent_e));
	L->ent_c = calloc(rows * m, sizeof(*L->ent_c));
	L->row_sc = malloc(rows * sizeof(*L->row_sc));
	/* Written through now, so the hot thread never faults a page in. */
	if (L->row_n && L->row_tick && L->ent_c) {
		memset(L->row_n, 0, rows * sizeof(*L->row_n));
		memset(L->row_tick, 0, rows * sizeof(*L->row_tick));
		memset(L->ent_c, 0, rows * m * sizeof(*L->ent_c));
	}
	L->use_c = calloc(le, sizeof(*L->use_c));
	L->use_tick = calloc(le, sizeof(*L->use_tick));
	L->rep_n = calloc(le, sizeof(*L->rep_n));
	L->rep_hit = calloc(le, sizeof(*L->rep_hit));
	L->rep_tick = calloc(le, sizeof(*L->rep_tick));
	L->win_n = calloc(r->layers, sizeof(*L->win_n));
	L->set_n = calloc(r->layers, sizeof(*L->set_n));
	L->win_tick = calloc(r->layers, sizeof(*L->win_tick));
	L->acc = calloc(r->experts, sizeof(*L->acc));
	L->base = calloc(r->experts, sizeof(*L->base));
	L->rep = calloc(r->experts, sizeof(*L->rep));
	L->touched = malloc(r->experts * sizeof(*L->touched));
	L->mark = calloc(r->experts, 1);
	L->cl = calloc(r->max_clients, sizeof(*L->cl));
	if (!L->row_n || !L->row_tick || !L->ent_e || !L->ent_c || !L->row_sc || !L->use_c || !L->use_tick ||
	    !L->rep_n || !L->rep_hit || !L->rep_tick || !L->win_n || !L->set_n || !L->win_tick || !L->acc ||
	    !L->base || !L->rep || !L->touched || !L->mark || !L->cl)
		return -ENOMEM;
	for (size_t i = 0; i < rows * m; i++)
		L->ent_e[i] = FSR_LEARN_NOEXP;
	for (size_t i = 0; i < rows; i++)
		L->row_sc[i] = 1.0f;
	for (uint32_t c = 0; c < r->max_clients; c++) {
		struct fsr_learn_client *cl = &L->cl[c];
		cl->cur = malloc((size_t)r->layers * FSR_LEARN_SET * sizeof(*cl->cur));
		cl->prev = malloc((size_t)r->layers * FSR_LEARN_SET * sizeof(*cl->prev));
		cl->ncur = calloc(r->layers, 1);
		cl->nprev = calloc(r->layers, 1);
		if (!cl->cur || !cl->prev || !cl->ncur || !cl->nprev)
			return -ENOMEM;
		cl->layer = cl->pend = FSR_NONE;
	}
	L->st.on = 1;
	L->st.row_entries = L->m;
	L->st.bytes = rows * (sizeof(float) + sizeof(uint32_t) + m * (sizeof(uint16_t) + sizeof(float))) +
		      le * 5 * sizeof(float) +
		      (size_t)r->max_clients * 2 * r->layers * (FSR_LEARN_SET * 2 + 1);
	return 0;
}

void fsr_learn_destroy(struct fsr *r)
{
	struct fsr_learn *L = lrn(r);
	if (!L)
		return;
	for (uint32_t c = 0; L->cl && c < r->max_clients; c++) {
		free(L->cl[c].cur);
		free(L->cl[c].prev);
		free(L->cl[c].ncur);
		free(L->cl[c].nprev);
	}
	free(L->cl);
	free(L->row_n);
	free(L->row_tick);
	free(L->ent_e);
	free(L->ent_c);
	free(L->row_sc);
	free(L->use_c);
	free(L->use_tick);
	free(L->rep_n);
	free(L->rep_hit);
	free(L->rep_tick);
	free(L->win_n);
	free(L->set_n);
	free(L->win_tick);
	free(L->acc);
	free(L->base);
	free(L->rep);
	free(L->touched);
	free(L->mark);
	free(L);
	r->learn = NULL;
}

/* A client came or went: what the learner knew of its windows goes (the
 * model stays: it is the model's routing, not the client's). */
void fsr_learn_client_reset(struct fsr *r, uint32_t client)
{
	struct fsr_learn *L = lrn(r);
	if (!L || client >= r->max_clients)
		return;
	struct fsr_learn_client *cl = &L->cl[client];
	cl->valid = cl->prev_valid = cl->self_pred = cl->dirty = cl->todo = 0;
	cl->layer = cl->pend = FSR_NONE;
	cl->tokens = cl->prev_tokens = cl->tok_win_n = 0;
	memset(cl->ncur, 0, r->layers);
	memset(cl->nprev, 0, r->layers);
	memset(cl->tgt, 0, sizeof(cl->tgt));
}

/* ---- learning: a layer's set of a window is complete ---------------------- */

static void mark_set(struct fsr_learn *L, const uint16_t *set, uint32_t n, uint8_t v)
{
	for (uint32_t i = 0; i < n; i++)
		L->mark[set[i]] = v;
}

/* One row learns that `set` (marked 1) followed its expert. */
static void row_learn(struct fsr_learn *L, size_t row, const uint16_t *set, uint32_t n)
{
	row_age(L, row);
	L->row_n[row] += 1.0f;
	uint16_t *e = L->ent_e + row * L->m;
	float *c = L->ent_c + row * L->m, one = 1.0f / L->row_sc[row];
	uint32_t k = 0;
	for (; k < L->m && e[k] != FSR_LEARN_NOEXP; k++) {
		if (L->mark[e[k]] != 1)
			continue;
		c[k] += one;
		L->mark[e[k]] = 2; /* found */
		for (uint32_t j = k; j > 0 && c[j] > c[j - 1]; j--) {
			float tc = c[j];
			uint16_t te = e[j];
			c[j] = c[j - 1], e[j] = e[j - 1];
			c[j - 1] = tc, e[j - 1] = te;
		}
	}
	/* New successors: the empty entries, then the last's place. */
	for (uint32_t i = 0; i < n; i++) {
		uint16_t b = set[i];
		if (L->mark[b] == 2) {
			L->mark[b] = 1;
			continue;
		}
		uint32_t w = k < L->m ? k++ : L->m - 1;
		e[w] = b;
		c[w] = one;
	}
}

/* The set of (window, layer) if the client still has it, else NULL. */
static const uint16_t *set_at(const struct fsr_learn_client *cl, uint32_t win, uint32_t layer, uint32_t *n,
			      uint32_t *tokens)
{
	const uint16_t *s = NULL;
	uint8_t k = 0;
	if (cl->valid && win == cl->win && cl->layer != FSR_NONE && layer <= cl->layer) {
		s = cl->cur + (size_t)layer * FSR_LEARN_SET;
		k = cl->ncur[layer];
		*tokens = cl->tokens;
	} else if (cl->prev_valid && win == cl->prev_win) {
		s = cl->prev + (size_t)layer * FSR_LEARN_SET;
		k = cl->nprev[layer];
		*tokens = cl->prev_tokens;
	}
	if (!s || k == 0 || k == FSR_LEARN_OVER)
		return NULL;
	*n = k;
	return s;
}

static struct fsr_learn_target *target(struct fsr_learn_client *cl, uint32_t layers, uint32_t win,
				       uint32_t layer, int make)
{
	uint64_t g = (uint64_t)win * layers + layer;
	struct fsr_learn_target *t = &cl->tgt[g % FSR_LEARN_TARGETS];
	if (t->live && t->win == win && t->layer == layer)
		return t;
	if (!make)
		return NULL;
	memset(t, 0, sizeof(*t));
	t->live = 1;
	t->win = win;
	t->layer = layer;
	return t;
}

/* What was predicted for this (window, layer) against what it used. */
static void outcomes(struct fsr *r, struct fsr_learn_client *cl, uint32_t layer, uint32_t nset)
{
	struct fsr_learn *L = lrn(r);
	struct fsr_learn_target *t = target(cl, r->layers, cl->win, layer, 0);
	if (!t)
		return;
	for (unsigned h = 1; h <= FSR_HORIZONS; h++) {
		const struct fsr_learn_guess *g = &t->h[h - 1];
		if (g->n == 0)
			continue;
		struct fsr_learn_hstats *hs = &L->st.h[h - 1];
		hs->targets++;
		hs->used += nset;
		for (uint32_t i = 0; i < g->n; i++) {
			int hit = L->mark[g->e[i]] != 0;
			hs->at_k += hit && g->rank[i] < nset;
			hs->at_2k += hit && g->rank[i] < 2 * nset;
			if (g->posted[i]) {
				hs->posted++;
				hs->posted_used += (uint64_t)hit;
			}
			L->cal_n[h - 1][g->bin[i]] += 1.0f;
			L->cal_hit[h - 1][g->bin[i]] += (float)hit;
			unsigned d = g->p8[i] * FSR_LEARN_REL / 256u;
			L->st.rel_n[d]++;
			L->st.rel_p[d] += (double)g->p8[i] / 255.0;
			L->st.rel_hit[d] += (uint64_t)hit;
		}
		if (L->cal_n[h - 1][g->bin[0]] > 1e6f) /* bounded: old outcomes weigh less */
			for (unsigned b = 0; b < FSR_LEARN_BINS; b++) {
				L->cal_n[h - 1][b] *= 0.5f;
				L->cal_hit[h - 1][b] *= 0.5f;
			}
	}
	t->live = 0;
}

/* The target layer's base-rate terms, the same for every candidate. */
struct base_terms {
	float n1;    /* windows that ran the layer, + 1 */
	float prior; /* the prior's uses: its usual set spread over its experts */
};

static struct base_terms base_terms(const struct fsr_learn *L, uint32_t layer)
{
	float n = aged(L, L->win_n[layer], L->win_tick[layer]);
	float set = n > 0.0f ? aged(L, L->set_n[layer], L->win_tick[layer]) / n : 1.0f;
	return (struct base_terms){n + 1.0f, set / (float)L->experts};
}

static float base_of(const struct fsr_learn *L, uint32_t layer, const struct base_terms *bt, uint16_t e)
{
	size_t i = (size_t)layer * L->experts + e;
	float p = (aged(L, L->use_c[i], L->use_tick[i]) + bt->prior) / bt->n1;
	return p < 1e-4f ? 1e-4f : p > 0.999f ? 0.999f : p;
}

/* Layer `layer` of the client's window is complete: learn from it. */
static void close_layer(struct fsr *r, uint32_t client, uint32_t layer)
{
	struct fsr_learn *L = lrn(r);
	struct fsr_learn_client *cl = &L->cl[client];
	uint32_t n = cl->ncur[layer];
	if (n == 0 || n == FSR_LEARN_OVER) {
		struct fsr_learn_target *t = target(cl, r->layers, cl->win, layer, 0);
		if (t)
			t->live = 0; /* a prefill batch: no outcome to judge by */
		return;
	}
	const uint16_t *set = cl->cur + (size_t)layer * FSR_LEARN_SET;
	mark_set(L, set, n, 1);
	outcomes(r, cl, layer, n);
	/* What followed what: the rows of the sources 1..3 layers before. */
	for (unsigned h = 1; h <= FSR_HORIZONS; h++) {
		uint32_t sw = cl->win, sl = layer;
		if (sl >= h) {
			sl -= h;
		} else {
			sl = sl + r->layers - h;
			sw = cl->win - 1;
		}
		uint32_t ns, tok;
		const uint16_t *src = set_at(cl, sw, sl, &ns, &tok);
		for (uint32_t i = 0; src && i < ns; i++)
			row_learn(L, row_of(L, h, sl, src[i]), set, n);
	}
	/* Repetition: the previous window's use of each expert here. */
	uint32_t np, tokp;
	const uint16_t *pset = set_at(cl, cl->win - 1, layer, &np, &tokp);
	for (uint32_t i = 0; pset && i < np; i++) {
		size_t k = (size_t)layer * r->experts + pset[i];
		L->rep_n[k] = aged(L, L->rep_n[k], L->rep_tick[k]) + 1.0f;
		L->rep_hit[k] = aged(L, L->rep_hit[k], L->rep_tick[k]) + (float)(L->mark[pset[i]] != 0);
		L->rep_tick[k] = L->tick;
	}
	/* Base rates. */
	L->win_n[layer] = aged(L, L->win_n[layer], L->win_tick[layer]) + 1.0f;
	L->set_n[layer] = aged(L, L->set_n[layer], L->win_tick[layer]) + (float)n;
	L->win_tick[layer] = L->tick;
	for (uint32_t i = 0; i < n; i++) {
		size_t k = (size_t)layer * r->experts + set[i];
		L->use_c[k] = aged(L, L->use_c[k], L->use_tick[k]) + 1.0f;
		L->use_tick[k] = L->tick;
	}
	mark_set(L, set, n, 0);
}

/* ---- records ---------------------------------------------------------- */

/* The client's usage moved to window `win`: the last one's sets become the
 * previous window's, and the decay clock counts its tokens. */
static void roll(struct fsr *r, uint32_t client, uint32_t win)
{
	struct fsr_learn *L = lrn(r);
	struct fsr_learn_client *cl = &L->cl[client];
	if (cl->valid) {
		/* Once a window: what is still open is learned from now. */
		if (cl->pend != FSR_NONE)
			close_layer(r, client, cl->pend);
		if (cl->layer != FSR_NONE)
			close_layer(r, client, cl->layer);
		uint16_t *t = cl->prev;
		cl->prev = cl->cur;
		cl->cur = t;
		uint8_t *tn = cl->nprev;
		cl->nprev = cl->ncur;
		cl->ncur = tn;
		cl->prev_win = cl->win;
		cl->prev_tokens = cl->tokens;
		cl->prev_valid = 1;
		L->tick += cl->tokens ? cl->tokens : 1u;
		L->st.windows++;
	}
	memset(cl->ncur, 0, r->layers);
	cl->valid = 1;
	cl->win = win;
	cl->layer = cl->pend = FSR_NONE;
	cl->tokens = cl->tok_win_n && cl->tok_win == win ? cl->tok_win_n : 0;
}

static void usage(struct fsr *r, uint32_t client, const struct fs_rec *rec)
{
	struct fsr_learn *L = lrn(r);
	struct fsr_learn_client *cl = &L->cl[client];
	if (!cl->valid || rec->window != cl->win) {
		if (cl->valid && (int32_t)(rec->window - cl->win) < 0)
			return; /* a straggler of an older window */
		roll(r, client, rec->window);
	}
	uint32_t l = rec->layer;
	if (cl->layer == FSR_NONE || l > cl->layer) {
		/* The layer before is complete: it is learned from at the next
		 * flush, after the pass's copies went out (two layers within
		 * one pass: the older one now). */
		if (cl->pend != FSR_NONE)
			close_layer(r, client, cl->pend);
		cl->pend = cl->layer;
		cl->layer = l;
	} else if (l < cl->layer) {
		return; /* out of order within the window: that layer is closed */
	}
	uint8_t n = cl->ncur[l];
	if (n == FSR_LEARN_OVER)
		return;
	uint16_t *set = cl->cur + (size_t)l * FSR_LEARN_SET;
	for (uint32_t i = 0; i < n; i++)
		if (set[i] == rec->expert)
			return; /* the other ring, or a repeat */
	if (n == FSR_LEARN_SET) {
		cl->ncur[l] = FSR_LEARN_OVER;
		return;
	}
	set[n] = rec->expert;
	cl->ncur[l] = (uint8_t)(n + 1);
	cl->dirty = 1;
	L->st.records++;
}

void fsr_learn_record(struct fsr *r, uint32_t client, const struct fs_rec *rec)
{
	struct fsr_learn *L = lrn(r);
	if (!L || client >= r->max_clients)
		return;
	struct fsr_learn_client *cl = &L->cl[client];
	switch (rec->type) {
	case FS_REC_USAGE:
		usage(r, client, rec);
		break;
	case FS_REC_PREDICT:
		cl->self_pred = 1;
		break;
	case FS_REC_WIN_BEGIN:
		/* Not a roll: the device ring's usage of the last window may
		 * still be on its way (the host ring is drained first). */
		cl->tok_win = rec->window;
		cl->tok_win_n = rec->value <= 4096 ? rec->value : 4096;
		if (cl->valid && cl->win == rec->window)
			cl->tokens = cl->tok_win_n;
		break;
	default:
		break;
	}
}

/* ---- predicting --------------------------------------------------------- */

static void touch(struct fsr_learn *L, uint32_t layer, const struct base_terms *bt, uint16_t e)
{
	if (L->mark[e])
		return;
	L->mark[e] = 1;
	L->acc[e] = 0.0f;
	L->rep[e] = 0.0f;
	L->base[e] = base_of(L, layer, bt, e);
	L->touched[L->ntouched++] = e;
}

/* Add one known source layer's evidence about target layer M (h layers
 * on) to acc[]; returns the absent-successor term every candidate gets.
 * A successor b of a row adds its lift, log(P(b | a) / P(b | a, b absent
 * from the row)) with P smoothed toward b's base rate by `alpha` windows. */
static float evidence(struct fsr_learn *L, const uint16_t *src, uint32_t ns, uint32_t tokens, unsigned h,
		      uint32_t sl, uint32_t M, const struct base_terms *bt)
{
	float wt = 1.0f / (float)(tokens ? tokens : 1u), cst = 0.0f;
	for (uint32_t i = 0; i < ns; i++) {
		size_t row = row_of(L, h, sl, src[i]);
		uint32_t age = L->tick - L->row_tick[row];
		float f = age ? decay_f(L, age) : 1.0f, n = L->row_n[row] * f, sc = L->row_sc[row] * f;
		if (n < 1e-3f)
			continue;
		cst += wt * fast_log(L->alpha / (n + L->alpha));
		const uint16_t *e = L->ent_e + row * L->m;
		const float *c = L->ent_c + row * L->m;
		for (uint32_t k = 0; k < L->m && e[k] != FSR_LEARN_NOEXP; k++) {
			touch(L, M, bt, e[k]);
			float ab = L->alpha * L->base[e[k]];
			L->acc[e[k]] += wt * fast_log((c[k] * sc + ab) / ab);
		}
	}
	return cst;
}

/* Is a ranked before b (probability, then score, then expert)? */
static int cand_before(const struct fsr_learn_cand *a, const struct fsr_learn_cand *b)
{
	if (a->p != b->p)
		return a->p > b->p;
	if (a->s != b->s)
		return a->s > b->s;
	return a->e < b->e;
}

/* Insert c into v[0..*n) (best first, at most cap). */
static void keep_best(struct fsr_learn_cand *v, uint32_t *n, uint32_t cap, const struct fsr_learn_cand *c)
{
	if (*n == cap && !cand_before(c, &v[cap - 1]))
		return;
	uint32_t j = *n < cap ? (*n)++ : cap - 1;
	while (j > 0 && cand_before(c, &v[j - 1])) {
		v[j] = v[j - 1];
		j--;
	}
	v[j] = *c;
}

/* Where a prediction of (layer, expert) for this client goes: the card
 * that holds it, else where the layer runs (fsr_predicted_cross's rule). */
static uint32_t post_card(const struct fsr *r, uint32_t client, uint32_t layer, uint32_t idx, int *held)
{
	const struct fsr_client *c = &r->client[client];
	uint32_t card = c->on_card ? c->card : r->home[layer];
	uint32_t h = fsr_holder(r, card, idx);
	*held = h != FSR_NONE;
	return h != FSR_NONE ? h : fsr_live_card(r, card, layer);
}

/*
 * Score target (tw, M) for the client whose newest usage is at cl->layer
 * of cl->win, hn layers on.  Keeps the best FSR_LEARN_RANKED candidates
 * (L->cand) and, apart, the best `post` that are not resident and likely
 * enough (L->post_c, with their cards).  Returns how many ranked; *np
 * how many to post.
 */
static uint32_t score(struct fsr *r, uint32_t client, uint32_t tw, uint32_t M, unsigned hn, uint32_t *np)
{
	struct fsr_learn *L = lrn(r);
	struct fsr_learn_client *cl = &L->cl[client];
	struct base_terms bt = base_terms(L, M);
	L->ntouched = 0;
	float cst = 0.0f;
	uint32_t nev = 0;
	for (unsigned h = hn; h <= FSR_HORIZONS; h++) {
		uint32_t sw = tw, sl = M;
		if (sl >= h) {
			sl -= h;
		} else {
			sl = sl + r->layers - h;
			sw = tw - 1;
		}
		uint32_t ns, tok;
		const uint16_t *src = set_at(cl, sw, sl, &ns, &tok);
		if (!src)
			continue;
		cst += evidence(L, src, ns, tok, h, sl, M, &bt);
		nev++;
	}
	/* Repetition: b used at M in the window before the target's. */
	uint32_t npv, tokp;
	const uint16_t *pset = set_at(cl, tw - 1, M, &npv, &tokp);
	for (uint32_t i = 0; pset && i < npv; i++) {
		uint16_t b = pset[i];
		size_t k = (size_t)M * r->experts + b;
		touch(L, M, &bt, b);
		float base = L->base[b];
		float p = (aged(L, L->rep_hit[k], L->rep_tick[k]) + base) /
			  (aged(L, L->rep_n[k], L->rep_tick[k]) + 1.0f);
		L->rep[b] = fast_log((p < 0.999f ? p : 0.999f) / base);
	}
	uint32_t n = 0;
	*np = 0;
	for (uint32_t i = 0; i < L->ntouched; i++) {
		uint16_t b = L->touched[i];
		L->mark[b] = 0;
		float base = L->base[b];
		float s = fast_log(base / (1.0f - base)) + L->rep[b];
		if (nev)
			s += (cst + L->acc[b]) / (float)nev;
		struct fsr_learn_cand c = {s, calibrated(L, hn, s), b, 0};
		keep_best(L->cand, &n, FSR_LEARN_RANKED, &c);
		if (c.p < L->min_p || (*np == L->post && !cand_before(&c, &L->post_c[L->post - 1])))
			continue;
		int held;
		uint32_t card = post_card(r, client, M, fsr_idx(r, M, b), &held);
		if (held || card == FSR_NONE)
			continue;
		c.card = (uint16_t)card;
		keep_best(L->post_c, np, L->post, &c);
	}
	return n;
}

static void post(struct fsr *r, uint32_t client, uint32_t tw, uint32_t M, unsigned h,
		 const struct fsr_learn_cand *c)
{
	struct fs_rec rec = {
		.type = FS_REC_PREDICT,
		.aux = FS_PRED_AUX(h, FS_SRC_HOST),
		.layer = (uint16_t)M,
		.expert = c->e,
		.card = c->card,
		.window = tw,
	};
	memcpy(&rec.value, &c->p, sizeof(rec.value));
	fsr_tiers_predictions_seen(r);
	fsr_ctr_add(&r->card[c->card].ctr[FS_CC_learned], 1);
	fsr_predicted_want(r, c->card, client, &rec);
}

static void remember(struct fsr_learn_guess *g, const struct fsr_learn_cand *c, uint32_t rank, int posted)
{
	uint32_t k = g->n++;
	g->e[k] = c->e;
	g->bin[k] = (uint8_t)bin_of(c->s);
	g->p8[k] = (uint8_t)lroundf(c->p * 255.0f);
	g->rank[k] = (uint8_t)(rank < 255 ? rank : 255);
	g->posted[k] = (uint8_t)posted;
}

/* Score target (tw, M) h layers on, post its best candidates that are not
 * resident, and remember the ranking (the best FSR_LEARN_RANKED, and the
 * posted ones below them) to judge it when the layer has run. */
static void predict(struct fsr *r, uint32_t client, uint32_t tw, uint32_t M, unsigned h)
{
	struct fsr_learn *L = lrn(r);
	struct fsr_learn_client *cl = &L->cl[client];
	uint32_t np, n = score(r, client, tw, M, h, &np);
	struct fsr_learn_target *t = target(cl, r->layers, tw, M, 1);
	struct fsr_learn_guess *g = &t->h[h - 1];
	g->n = 0;
	for (uint32_t i = 0; i < np; i++)
		post(r, client, tw, M, h, &L->post_c[i]);
	/* The ranking, the posted ones marked; those posted below it after. */
	uint32_t found = 0;
	for (uint32_t i = 0; i < n; i++) {
		int posted = 0;
		for (uint32_t j = 0; j < np && !posted; j++)
			posted = L->post_c[j].e == L->cand[i].e;
		found += (uint32_t)posted;
		remember(g, &L->cand[i], i, posted);
		if (r->learned) {
			int held = 0;
			if (!posted && L->cand[i].p >= L->min_p)
				(void)post_card(r, client, M, fsr_idx(r, M, L->cand[i].e), &held);
			r->learned(r->learned_ctx, client, tw, M, L->cand[i].e,
				   posted ? FSR_LEARNED_POSTED :
				   held   ? FSR_LEARNED_HELD :
					    FSR_LEARNED_RANKED);
		}
	}
	for (uint32_t j = 0; j < np && found < np; j++) {
		int ranked = 0;
		for (uint32_t i = 0; i < n && !ranked; i++)
			ranked = L->cand[i].e == L->post_c[j].e;
		if (ranked)
			continue;
		found++;
		remember(g, &L->post_c[j], 255, 1);
		if (r->learned)
			r->learned(r->learned_ctx, client, tw, M, L->post_c[j].e, FSR_LEARNED_POSTED);
	}
	L->st.predictions += np;
}

/* One step of a client's work: a complete layer to learn from, else the
 * next of its targets to predict.  0 when it has none. */
static int step(struct fsr *r, uint32_t c)
{
	struct fsr_learn *L = lrn(r);
	struct fsr_learn_client *cl = &L->cl[c];
	if (cl->pend != FSR_NONE) {
		close_layer(r, c, cl->pend);
		cl->pend = FSR_NONE;
		return 1;
	}
	if (cl->dirty) {
		/* New usage: its targets anew, nearest first. */
		cl->dirty = 0;
		cl->todo = 0;
		if (!r->client[c].live || cl->layer == FSR_NONE || cl->ncur[cl->layer] == FSR_LEARN_OVER)
			return 0;
		/* Silent for this client (auto, it predicts itself), or nowhere
		 * to copy a prediction to: learning is all. */
		if ((L->mode != FSR_LEARN_ON && cl->self_pred) || !fsr_predicted_configured(r))
			return 0;
		cl->todo = FSR_HORIZONS;
	}
	if (!cl->todo)
		return 0;
	unsigned h = FSR_HORIZONS - --cl->todo;
	uint32_t M = cl->layer + h, tw = cl->win;
	if (M >= r->layers) {
		M -= r->layers;
		tw++;
	}
	predict(r, c, tw, M, h);
	return 1;
}

/* One step of work per call, the clients in turn: a call is a few
 * microseconds, so a record that comes meanwhile waits no longer than that
 * (the host's next pass drains it before the learner's next step). */
unsigned fsr_learn_flush(struct fsr *r)
{
	struct fsr_learn *L = lrn(r);
	if (!L)
		return 0;
	for (uint32_t k = 0; k < r->max_clients; k++) {
		uint32_t c = (L->next + k) % r->max_clients;
		if (step(r, c)) {
			L->next = c; /* the same client until it has nothing left */
			return 1;
		}
	}
	return 0;
}

void fsr_learn_observe(struct fsr *r, uint32_t client, const struct fs_rec *rec)
{
	if (r == NULL || rec == NULL || rec->type != FS_REC_USAGE || rec->layer >= r->layers ||
	    rec->expert >= r->experts) {
		if (r && rec && rec->type == FS_REC_WIN_BEGIN)
			fsr_learn_record(r, client, rec);
		return;
	}
	fsr_learn_record(r, client, rec);
	if (lrn(r) && client < r->max_clients)
		lrn(r)->cl[client].dirty = 0; /* nothing to predict for the past */
}

int fsr_learn_stats(const struct fsr *r, struct fsr_learn_stats *out)
{
	if (r == NULL || out == NULL)
		return -EINVAL;
	if (!lrn(r)) {
		memset(out, 0, sizeof(*out));
		return 0;
	}
	*out = lrn(r)->st;
	return 0;
}
