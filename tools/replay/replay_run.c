/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_run.c: one policy over one trace, on a virtual clock, through the
 * daemon's residency core (fs_residency).  The replay plays both sides:
 *
 * The engine, per window of T tokens: at the window's start it takes the
 * newest epoch (a copy of the table, its d_res); per layer, at the time the
 * layer's routing is known, it looks up each distinct expert the window
 * routes there (a hit: the held epoch, or the newest table, maps it and
 * the slot's ready word carries that generation, as fs_lookup_live does),
 * posts USAGE records, and, with predictions, posts the oracle-noised
 * candidates of the next 1-3 layers; a layer takes intercept/L plus
 * miss_ms/L per distinct miss (the discussion's linear cost).  At the
 * window's end it posts WIN_END and releases the epoch.
 *
 * The daemon, between the engine's steps: lands the copies the virtual bus
 * finished, asks the core for copies and puts them on the bus, publishes
 * an epoch when the table changed, reads the holds and reclaims: the same
 * calls foresightd's hot thread makes, in the same order.  Slots are reused
 * only after the grace period, exactly as live.
 *
 * Nothing here allocates per record; every array is sized at the start.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fs_counters.h"
#include "replay.h"
#include "replay_bus.h"
#include "replay_predict.h"

#define TAKE_BATCH 64u
#define BUS_QUEUE 4096u

struct run {
	const struct fs_trace *t;
	const struct replay_model *m;
	struct fsr *r;
	struct replay_bus bus;
	struct replay_predictor pred;
	int predicts;
	uint64_t *held; /* [layers * experts]: the epoch the engine holds */
	uint64_t hold[FS_MAX_HOLDS];
	uint64_t now;     /* virtual ns */
	double layer_ms;  /* intercept / layers */
	double miss_ms_l; /* miss_ms / layers: one distinct miss */
	uint16_t *cand_e;
	float *cand_s;
	uint32_t *layer_profile; /* static-layer: replay_layer.c */
	/* counters the core writes */
	uint64_t c_daemon[FS_N_DAEMON];
	uint64_t c_card[FS_N_CARD];
	uint64_t *c_layer;
	uint64_t c_client[FS_N_CLIENT];
	/* what the engine saw */
	uint64_t uses, hits, predictions;
};

static void post(struct run *x, uint8_t type, uint8_t aux, uint32_t layer, uint32_t expert, uint32_t window,
		 uint32_t value)
{
	struct fs_rec rec = {
		.type = type,
		.aux = aux,
		.layer = (uint16_t)layer,
		.expert = (uint16_t)expert,
		.card = 0,
		.window = window,
		.value = value,
	};
	fsr_record(x->r, 0, &rec, x->now);
}

/* The daemon's turn: land, copy, publish, read holds, reclaim.  The core
 * may hand out more copies as earlier ones land (an unlimited bus lands
 * them at once), so loop while that makes progress. */
static void daemon_step(struct run *x, uint32_t window)
{
	struct fsr_copy cp[TAKE_BATCH];
	replay_bus_land(&x->bus, x->r, x->now, window);
	for (;;) {
		unsigned n = fsr_take_copies(x->r, 0, cp, TAKE_BATCH, x->now);
		for (unsigned i = 0; i < n; i++)
			if (replay_bus_submit(&x->bus, &cp[i], x->now) != 0)
				abort(); /* the core keeps max_inflight far below BUS_QUEUE */
		if (n == 0 || replay_bus_land(&x->bus, x->r, x->now, window) == 0)
			break;
	}
	if (fsr_dirty(x->r)) {
		fsr_publish(x->r); /* the engine reads the newest table through fsr_lookup below */
		fsr_client_holds(x->r, 0, x->hold);
		fsr_reclaim(x->r);
	}
}

/* Window start: the engine released its epoch at the last window's end;
 * the daemon publishes, reads the holds, reclaims; the engine acquires. */
static void window_begin(struct run *x, uint32_t window, uint32_t tokens)
{
	replay_bus_window(&x->bus, window);
	daemon_step(x, window);
	memset(x->hold, 0, sizeof(x->hold));
	fsr_fill(x->r, x->held);
	x->hold[0] = fsr_publish(x->r);
	uint64_t none[FS_MAX_HOLDS] = {0};
	fsr_client_holds(x->r, 0, none);
	fsr_reclaim(x->r);
	post(x, FS_REC_WIN_BEGIN, 0, 0, 0, window, tokens);
}

/* fs_lookup_live: the held epoch, else the newest table, and the ready word. */
static int engine_hit(struct run *x, uint32_t layer, uint32_t expert)
{
	uint64_t e = x->held[(size_t)layer * x->t->experts + expert];
	if (e != FS_ENTRY_NONE && replay_bus_ready(&x->bus, FS_ENTRY_SLOT(e), FS_ENTRY_GEN(e)))
		return 1;
	uint32_t s = fsr_lookup(x->r, 0, layer, expert);
	return s != FSR_NONE && replay_bus_ready(&x->bus, s, x->bus.issued[s]);
}

static void predict_ahead(struct run *x, const struct fs_trace_iter *it, uint32_t window, uint32_t layer)
{
	for (unsigned h = 1; h <= 3 && layer + h < x->t->layers; h++) {
		uint32_t n = replay_predict(&x->pred, it->window, it->first_token, it->n_tokens, layer + h, h,
					    x->cand_e, x->cand_s);
		for (uint32_t i = 0; i < n; i++) {
			uint32_t v;
			memcpy(&v, &x->cand_s[i], sizeof(v));
			post(x, FS_REC_PREDICT, FS_PRED_AUX(h, FS_SRC_ROUTER_AHEAD), layer + h, x->cand_e[i],
			     window, v);
		}
		x->predictions += n;
	}
}

static void one_window(struct run *x, const struct fs_trace_iter *it, uint32_t window)
{
	window_begin(x, window, it->n_tokens);
	for (uint32_t l = 0; l < x->t->layers; l++) {
		daemon_step(x, window);
		const uint16_t *ex;
		uint32_t n = fs_trace_iter_experts(it, l, &ex), misses = 0;
		for (uint32_t k = 0; k < n; k++) {
			int hit = engine_hit(x, l, ex[k]);
			misses += !hit;
			post(x, FS_REC_USAGE, hit ? FS_USE_HIT : FS_USE_MISS, l, ex[k], window, 0);
		}
		x->uses += n;
		x->hits += n - misses;
		if (x->predicts)
			predict_ahead(x, it, window, l);
		daemon_step(x, window);
		x->now += (uint64_t)llround((x->layer_ms + x->miss_ms_l * misses) * 1e6);
	}
	post(x, FS_REC_WIN_END, 0, 0, 0, window, 0);
	memset(x->hold, 0, sizeof(x->hold));
}

/* The profile's copies land before decode starts (prefill time): the
 * engine starts decode with them resident, as a calibrated engine does. */
static void preload(struct run *x)
{
	struct fsr_copy cp[TAKE_BATCH];
	for (;;) {
		unsigned n = fsr_take_copies(x->r, 0, cp, TAKE_BATCH, x->now);
		if (n == 0)
			break;
		for (unsigned i = 0; i < n; i++)
			if (replay_bus_submit(&x->bus, &cp[i], x->now) != 0)
				abort();
		x->now = x->bus.free_at;
		replay_bus_land(&x->bus, x->r, x->now, 0);
	}
}

static int run_init(struct run *x, const struct replay_input *in, const struct replay_model *m,
		    enum replay_policy_id p, char *err, size_t errlen)
{
	const struct fs_trace *t = in->trace;
	x->t = t;
	x->m = m;
	struct fsr_config cfg;
	if (replay_policy_config(p, m, t, &cfg) != 0)
		return -EINVAL;
	size_t le = (size_t)t->layers * t->experts;
	const uint32_t *profile = in->profile;
	if (p == RP_STATIC_LAYER) { /* replay_layer.c: as many slots as experts chosen */
		if (!(x->layer_profile = malloc(le * sizeof(uint32_t))))
			return -ENOMEM;
		int n = replay_layer_profile(t, in->profile, m->warmup, m->tokens_per_window,
					     replay_slots(m, t) / t->layers, x->layer_profile);
		if (n < 0)
			return n;
		cfg.slots[0] = n > 0 ? (uint32_t)n : 1;
		profile = x->layer_profile;
	}
	uint64_t *bytes = malloc(le * sizeof(*bytes));
	x->c_layer = calloc((size_t)t->layers * FS_N_LAYER, sizeof(uint64_t));
	x->held = malloc(le * sizeof(*x->held));
	x->cand_e = malloc(t->experts * sizeof(*x->cand_e));
	x->cand_s = malloc(t->experts * sizeof(*x->cand_s));
	if (!bytes || !x->c_layer || !x->held || !x->cand_e || !x->cand_s) {
		free(bytes);
		return -ENOMEM;
	}
	for (size_t i = 0; i < le; i++) {
		uint64_t b = t->expert_bytes ? t->expert_bytes[i / t->experts] : 0;
		bytes[i] = b ? b : m->expert_bytes;
	}
	cfg.expert_bytes = bytes;
	cfg.counters = (struct fsr_counters){x->c_daemon, x->c_card, x->c_layer, x->c_client};
	x->r = fsr_create(&cfg);
	free(bytes);
	if (!x->r) {
		snprintf(err, errlen, "residency core: invalid configuration for %s", replay_policy_name(p));
		return -EINVAL;
	}
	fsr_client_add(x->r, 0);
	double link = cfg.bus_gbps > 0.0 ? m->bus_gbps : 0.0; /* lru: unlimited, as its definition says */
	int rc = replay_bus_init(&x->bus, cfg.slots[0], BUS_QUEUE, link,
				 p == RP_LRU || p == RP_LRU_WARM ? 1 : m->delay);
	if (rc)
		return rc;
	x->predicts = replay_policy_predicts(p);
	if (x->predicts && (rc = replay_predictor_init(&x->pred, t, m)) != 0)
		return rc;
	x->layer_ms = m->intercept_ms / t->layers;
	x->miss_ms_l = m->miss_ms / t->layers;
	if (replay_policy_uses_profile(p) && (rc = fsr_profile_load(x->r, profile)) != 0)
		return rc;
	return 0;
}

static void run_free(struct run *x)
{
	fsr_destroy(x->r);
	replay_bus_free(&x->bus);
	replay_predictor_free(&x->pred);
	free(x->c_layer);
	free(x->held);
	free(x->cand_e);
	free(x->cand_s);
	free(x->layer_profile);
}

int replay_run(const struct replay_input *in, const struct replay_model *m, enum replay_policy_id p,
	       struct replay_result *out, char *err, size_t errlen)
{
	struct run x = {0};
	memset(out, 0, sizeof(*out));
	int rc = run_init(&x, in, m, p, err, errlen);
	struct fs_trace_iter it;
	if (rc == 0)
		rc = fs_trace_iter_init(&it, in->trace, m->tokens_per_window);
	if (rc != 0) {
		if (!err[0])
			snprintf(err, errlen, "%s: %s", replay_policy_name(p), strerror(-rc));
		run_free(&x);
		return rc;
	}
	preload(&x);
	/* Only decode counts: the profile's fill happened during prefill. */
	uint64_t card0[FS_N_CARD];
	memcpy(card0, x.c_card, sizeof(card0));
	uint64_t t0 = x.now;
	uint32_t scored = 0;
	for (uint32_t w = m->warmup; fs_trace_iter_seek(&it, w); w++, scored++)
		one_window(&x, &it, w + 1); /* the engine numbers windows from 1 */
	fs_trace_iter_free(&it);

	snprintf(out->policy, sizeof(out->policy), "%s", replay_policy_name(p));
	out->windows = scored;
	out->layers = in->trace->layers;
	out->slots = replay_slots(m, in->trace);
	out->uses = x.uses;
	out->hits = x.hits;
	out->misses = x.uses - x.hits;
	out->copies = x.c_card[FS_CC_copied] - card0[FS_CC_copied];
	out->bytes = x.c_card[FS_CC_copied_bytes] - card0[FS_CC_copied_bytes];
	out->landed_late = x.c_card[FS_CC_landed_late] - card0[FS_CC_landed_late];
	out->late_uses = x.c_card[FS_CC_late] - card0[FS_CC_late];
	out->too_late = x.c_card[FS_CC_too_late] - card0[FS_CC_too_late];
	out->promoted = x.c_card[FS_CC_promoted] - card0[FS_CC_promoted];
	out->predictions = x.predictions;
	out->hit_rate = x.uses ? (double)x.hits / (double)x.uses : 0.0;
	double lw = (double)scored * in->trace->layers;
	out->misses_per_lw = lw > 0 ? (double)out->misses / lw : 0.0;
	out->ms_per_window = scored ? (double)(x.now - t0) / 1e6 / scored : 0.0;
	out->tokens_per_s = out->ms_per_window > 0 ? 1000.0 * m->tokens_per_window / out->ms_per_window : 0.0;
	run_free(&x);
	return 0;
}
