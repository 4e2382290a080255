/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_run.c: one policy over one trace, on a virtual clock, through
 * foresightd's own hot engine (daemon/engine/fse.h, fs_engine) and
 * residency core (fs_residency).  The replay plays both sides:
 *
 * The engines (--clients M, default 1), each with a client region and a
 * ring in memory as foresightd lays them out: per window of T tokens, at
 * the window's start an engine acquires the current epoch (the protocol of
 * fs_acquire: load `current`, store the hold); per layer, at the time the
 * layer's routing is known, it looks up each distinct expert the window
 * routes there (a hit: the held epoch, or the newest published table, maps
 * it on a card and that card's ready word carries the generation, as
 * fs_lookup_live does), posts USAGE records on its ring, and, with
 * predictions, the oracle-noised candidates of the next 1-3 layers; a
 * layer takes intercept/L plus miss_ms/L per distinct miss (the
 * discussion's linear cost).  At the window's end it posts WIN_END and
 * releases its hold.  Engine c runs on card c mod N and replays its own
 * contiguous slice of the scored windows (docs/results/replay.md says
 * why); engines step in virtual-time order (ties: lower index first).
 *
 * The daemon runs when foresightd's hot thread would have something to do:
 * after an engine's step has posted its records (a post wakes it), at
 * every copy's landing on a card's virtual bus (--cards N, default 1;
 * replay_bus.c, the backend: the host backend's copy thread flips the
 * ready word and wakes it then), and when a table held back by publish_us
 * may go out (fse_publish_in).  Each time, the hot engine's passes at that
 * virtual time until one finds nothing to do (foresightd's hot thread
 * loops the same way while there is work): records in, copies landed,
 * copies issued, an epoch published when the table changed (at most one
 * per publish_us), holds read, slots reclaimed.  Slots are reused only
 * after the grace period, exactly as live.  Not before an engine's
 * lookups: an engine releases its epoch, acquires the next and looks up
 * its first layer within microseconds, and a layer's lookups come before
 * its posts, so no pass of foresightd's falls between them.  (Until
 * session 7 the replay ran passes there, at a window's start between the
 * release and the acquire and at each layer's start, and took copies in
 * only at engine steps: docs/results/replay.md, "The daemon's order", has
 * what that changed.)
 *
 * Nothing here allocates per record; every array is sized at the start.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fs_counters.h"
#include "fse.h"
#include "replay.h"
#include "replay_bus.h"
#include "replay_predict.h"
#include "replay_why.h"

#define BUS_QUEUE 4096u
#define RING_MIN 1024u
#define PASSES_MAX 4096u /* passes at one virtual time before giving up (never reached) */

struct engine {
	void *region; /* client header, ring, device ring */
	struct fs_client_hdr *hdr;
	struct fs_ring_cons cons, dev_cons; /* as formatted: handed to the hot engine */
	struct fs_ring_prod prod;
	struct fs_trace_iter it;
	uint32_t w, w_end;   /* trace windows still to replay: [w, w_end) */
	uint32_t num;        /* the window number it posts (the engine numbers its own) */
	uint32_t layer;      /* the next layer */
	uint32_t card;       /* the card it runs on */
	uint64_t t, t0;      /* next step; decode start */
	uint64_t held_epoch; /* 0: none */
	uint32_t held_buf;
	uint64_t uses, hits;
	uint32_t windows;
	int done;
};

struct run {
	const struct fs_trace *t;
	const struct replay_model *m;
	struct fsr *r;
	struct fse *e;
	uint32_t cards, nclients;
	struct replay_bus bus[FS_MAX_CARDS];
	struct replay_predictor pred;
	int predicts;     /* the engine posts the oracle's predictions */
	int why_predicts; /* someone predicts (the oracle, or the core's learner) */
	int learns;       /* the core's learner posts for the engines (policy learned) */
	struct engine *cl;
	struct fs_daemon_hdr *dh;
	uint32_t publish_us, liveness_ms, hold_timeout_ms, hold_pressure_ms, dev_poll_us;
	uint64_t now;     /* virtual ns */
	uint32_t window;  /* the window of the engine stepping now (the bus's landing delay) */
	double layer_ms;  /* intercept / layers */
	double miss_ms_l; /* miss_ms / layers: one distinct miss */
	uint16_t *cand_e;
	float *cand_s;
	uint32_t *layer_profile; /* static-layer: replay_layer.c */
	/* counters the core and the engine write */
	uint64_t c_daemon[FS_N_DAEMON];
	uint64_t *c_card;
	uint64_t *c_layer;
	uint64_t *c_client;
	uint64_t predictions;
	struct replay_why why; /* where the misses come from (replay_why.h) */
	int failed;            /* a backend queue overflowed: a bug, reported */
};

/* ---- the backend: one virtual bus per card ----------------------------- */

static void bus_submit(void *ctx, const struct fse_copy *cp)
{
	struct run *x = ctx;
	if (cp->card >= x->cards || replay_bus_submit(&x->bus[cp->card], cp, x->now) != 0)
		x->failed = 1; /* the core keeps max_inflight far below BUS_QUEUE */
	else
		replay_why_copy(&x->why, cp->card, cp->slot, cp->gen, cp->core.layer, cp->core.expert,
				cp->core.tier);
}

static unsigned bus_poll(void *ctx, struct fse_done *out, unsigned max)
{
	struct run *x = ctx;
	unsigned n = 0;
	for (uint32_t c = 0; c < x->cards && n < max; c++)
		n += replay_bus_land(&x->bus[c], x->now, x->window, out + n, max - n);
	return n;
}

static void bus_card_down(void *ctx, uint32_t card)
{
	struct run *x = ctx;
	replay_bus_drop(&x->bus[card]);
}

/* What the core's learned predictor did with a candidate (replay_why.c:
 * its postings are the engine's, for the decomposition). */
static void on_learned(void *ctx, uint32_t client, uint32_t window, uint32_t layer, uint32_t expert,
		       unsigned how)
{
	struct replay_why *w = &((struct run *)ctx)->why;
	if (how == FSR_LEARNED_RANKED)
		replay_why_ranked(w, client, window, layer, expert);
	else
		replay_why_posted(w, client, window, layer, expert, how == FSR_LEARNED_HELD);
}

/* The core's reason a prediction left without a copy (replay_why.c). */
static void on_unserved(void *ctx, uint32_t card, uint32_t layer, uint32_t expert, unsigned why)
{
	(void)card;
	replay_why_unserved(&((struct run *)ctx)->why, layer, expert, why);
}

static uint64_t virtual_clock(void *host)
{
	return ((const struct run *)host)->now;
}

/* ---- the daemon's side -------------------------------------------------- */

/* The hot engine at `now`: passes until one finds nothing to do. */
static void daemon_step(struct run *x)
{
	for (uint32_t i = 0; i < x->nclients; i++)
		if (!x->cl[i].done)
			fs_store_relaxed(&x->cl[i].hdr->heartbeat_ns, x->now);
	for (unsigned i = 0; i < PASSES_MAX && fse_pass(x->e, x->now); i++)
		;
}

/* The next time foresightd's hot thread would wake with no engine posting:
 * a copy's landing (the host backend's copy thread wakes it), or a table
 * that publish_us held back.  UINT64_MAX: none after now. */
static uint64_t daemon_next(const struct run *x)
{
	uint64_t next = UINT64_MAX;
	for (uint32_t c = 0; c < x->cards; c++) {
		const struct replay_bus *b = &x->bus[c];
		if (b->n > 0 && b->q[b->head].done > x->now && b->q[b->head].done < next)
			next = b->q[b->head].done;
	}
	uint64_t in = fse_publish_in(x->e, x->now);
	if (in != UINT64_MAX && in > 0 && x->now + in < next)
		next = x->now + in;
	return next;
}

static int bus_busy(const struct run *x, uint64_t *free_at)
{
	int busy = 0;
	*free_at = 0;
	for (uint32_t c = 0; c < x->cards; c++)
		if (x->bus[c].n > 0) {
			busy = 1;
			if (x->bus[c].free_at > *free_at)
				*free_at = x->bus[c].free_at;
		}
	return busy;
}

/* The profile's copies land before decode starts (prefill time): the
 * engines start decode with them resident, as a calibrated engine does. */
static void preload(struct run *x)
{
	uint64_t free_at;
	for (;;) {
		daemon_step(x);
		if (!bus_busy(x, &free_at))
			break;
		x->now = free_at > x->now ? free_at : x->now;
	}
}

/* ---- an engine's side --------------------------------------------------- */

static void post(struct run *x, struct engine *c, uint8_t type, uint8_t aux, uint32_t layer, uint32_t expert,
		 uint32_t window, uint32_t value)
{
	struct fs_rec rec = {
		.type = type,
		.aux = aux,
		.layer = (uint16_t)layer,
		.expert = (uint16_t)expert,
		.card = (uint16_t)c->card,
		.window = window,
		.value = value,
	};
	if (fs_ring_post(&c->prod, &rec) != 0)
		x->failed = 1; /* sized for a layer's records: a bug */
}

/* fs_acquire: the current epoch, held (the daemon reads holds after each
 * publish; nothing runs between the two steps here). */
static void acquire(struct run *x, struct engine *c)
{
	uint64_t cur = fs_load_acquire(&x->dh->current);
	c->held_epoch = FS_CUR_EPOCH(cur);
	c->held_buf = FS_CUR_BUF(cur);
	fs_store_release(&c->hdr->holds[0], c->held_epoch);
}

static void release(struct engine *c)
{
	fs_store_release(&c->hdr->holds[0], 0ull);
	c->held_epoch = 0;
}

static int entry_ready(const struct run *x, uint32_t card, uint64_t ent)
{
	return ent != FS_ENTRY_NONE && replay_bus_ready(&x->bus[card], FS_ENTRY_SLOT(ent), FS_ENTRY_GEN(ent));
}

/* fs_lookup_live: the held epoch, else the newest table, on the engine's
 * own card first, and the slot's ready word. */
static int engine_hit(struct run *x, const struct engine *c, uint32_t layer, uint32_t expert)
{
	size_t per_card = (size_t)x->t->layers * x->t->experts, k = (size_t)layer * x->t->experts + expert;
	const uint64_t *held = fse_epoch_entries(x->dh, c->held_buf);
	uint64_t cur = fs_load_acquire(&x->dh->current);
	const uint64_t *newest = fse_epoch_entries(x->dh, FS_CUR_BUF(cur));
	for (uint32_t i = 0; i < x->cards; i++) {
		uint32_t card = (c->card + i) % x->cards;
		if (c->held_epoch && entry_ready(x, card, held[card * per_card + k]))
			return 1;
		/* The library's reach (fs_epoch.c, live_table): reading the
		 * newest table declares it, so the daemon keeps that table's
		 * slots for this engine and frees, past its hold, those of
		 * tables it cannot read (fsr_clients.c, client_pins).  Nothing
		 * runs between the store and the read here. */
		if (c->held_epoch && FS_CUR_EPOCH(cur) > c->hdr->reach)
			fs_store_release(&c->hdr->reach, FS_CUR_EPOCH(cur));
		if (entry_ready(x, card, newest[card * per_card + k]))
			return 1;
	}
	return 0;
}

/* --pred-max: what fs-engine-bench's engine posts (eb_engine.c predict):
 * the candidates best first (ties: lower expert), those the engine would
 * hit now skipped, the first `max` kept.  In place; returns how many. */
static uint32_t best_not_held(struct run *x, const struct engine *c, uint32_t layer, uint32_t n, uint32_t max)
{
	uint32_t kept = 0;
	for (uint32_t i = 0; i < n; i++) { /* insertion sort by score, stable in expert order */
		uint16_t e = x->cand_e[i];
		float s = x->cand_s[i];
		if (engine_hit(x, c, layer, e)) {
			replay_why_posted(&x->why, (uint32_t)(c - x->cl), c->num, layer, e, 1);
			continue;
		}
		uint32_t j = kept < max ? kept++ : max;
		while (j > 0 && x->cand_s[j - 1] < s) {
			if (j < max) {
				x->cand_e[j] = x->cand_e[j - 1];
				x->cand_s[j] = x->cand_s[j - 1];
			}
			j--;
		}
		if (j < max) {
			x->cand_e[j] = e;
			x->cand_s[j] = s;
		}
	}
	return kept;
}

static void predict_ahead(struct run *x, struct engine *c, uint32_t layer)
{
	const struct fs_trace_iter *it = &c->it;
	for (unsigned h = 1; h <= 3 && layer + h < x->t->layers; h++) {
		uint32_t n = replay_predict(&x->pred, it->window, it->first_token, it->n_tokens, layer + h, h,
					    x->cand_e, x->cand_s);
		uint32_t ci = (uint32_t)(c - x->cl);
		for (uint32_t i = 0; i < n; i++)
			replay_why_ranked(&x->why, ci, c->num, layer + h, x->cand_e[i]);
		if (x->m->pred_max)
			n = best_not_held(x, c, layer + h, n, x->m->pred_max);
		for (uint32_t i = 0; i < n; i++) {
			/* held: every candidate is posted without --pred-max, held or not */
			int held = !x->m->pred_max && engine_hit(x, c, layer + h, x->cand_e[i]);
			replay_why_posted(&x->why, ci, c->num, layer + h, x->cand_e[i], held);
			uint32_t v;
			memcpy(&v, &x->cand_s[i], sizeof(v));
			post(x, c, FS_REC_PREDICT, FS_PRED_AUX(h, FS_SRC_ROUTER_AHEAD), layer + h,
			     x->cand_e[i], c->num, v);
		}
		x->predictions += n;
	}
}

/* One step of engine c at x->now: a window's start with its first layer,
 * or a layer; a window's end after its last. */
static void engine_step(struct run *x, struct engine *c)
{
	x->window = c->num;
	if (c->layer == 0) {
		/* The window's start follows the last one's end at once (the
		 * engine releases, acquires and posts WIN_BEGIN back to back):
		 * no daemon pass between them, as none fits in foresightd's. */
		for (uint32_t k = 0; k < x->cards; k++)
			replay_bus_window(&x->bus[k], c->num);
		acquire(x, c);
		post(x, c, FS_REC_WIN_BEGIN, 0, 0, 0, c->num, c->it.n_tokens);
	}
	uint32_t l = c->layer;
	const uint16_t *ex;
	uint32_t n = fs_trace_iter_experts(&c->it, l, &ex), misses = 0;
	for (uint32_t k = 0; k < n; k++) {
		int hit = engine_hit(x, c, l, ex[k]);
		misses += !hit;
		replay_why_use(&x->why, (uint32_t)(c - x->cl), c->num, l, ex[k], hit);
		if (!hit)
			replay_why_miss(&x->why, (uint32_t)(c - x->cl), c->num, l, ex[k], x->why_predicts);
		post(x, c, FS_REC_USAGE, hit ? FS_USE_HIT : FS_USE_MISS, l, ex[k], c->num, 0);
	}
	c->uses += n;
	c->hits += n - misses;
	if (x->predicts)
		predict_ahead(x, c, l);
	daemon_step(x);
	c->t += (uint64_t)llround((x->layer_ms + x->miss_ms_l * misses) * 1e6);
	if (++c->layer < x->t->layers)
		return;
	/* The window's end, when its last layer is done. */
	x->now = c->t;
	post(x, c, FS_REC_WIN_END, 0, 0, 0, c->num, 0);
	release(c);
	c->windows++;
	c->layer = 0;
	c->num++;
	if (++c->w >= c->w_end || !fs_trace_iter_seek(&c->it, c->w))
		c->done = 1;
}

/* ---- set-up ------------------------------------------------------------- */

static int regions_init(struct run *x, const struct fsr_config *cfg)
{
	/* The daemon region: the header and the epoch buffers, laid out as
	 * fsd_region.c does (the ready words are the buses'; the counters are
	 * ours). */
	uint32_t nbufs = 16; /* foresightd's epoch_bufs */
	size_t bytes = fse_region_bytes(x->cards, cfg->layers, cfg->experts, nbufs);
	x->dh = aligned_alloc(FS_CACHELINE, (bytes + FS_CACHELINE - 1) / FS_CACHELINE * FS_CACHELINE);
	if (!x->dh)
		return -ENOMEM;
	memset(x->dh, 0, bytes);
	fse_region_init(x->dh, x->cards, cfg->layers, cfg->experts, nbufs);

	/* The engines' regions: a ring big enough for a layer's records
	 * (usage, and up to three horizons of candidates) between passes. */
	uint32_t want = 8u * cfg->experts + 64u, entries_ring = RING_MIN;
	while (entries_ring < want)
		entries_ring <<= 1;
	size_t ring_bytes = fs_ring_bytes(entries_ring);
	size_t off_ring = sizeof(struct fs_client_hdr);
	size_t off_dev = (off_ring + ring_bytes + 4095) / 4096 * 4096;
	size_t region_bytes = (off_dev + ring_bytes + 4095) / 4096 * 4096;
	for (uint32_t i = 0; i < x->nclients; i++) {
		struct engine *c = &x->cl[i];
		c->region = aligned_alloc(4096, region_bytes);
		if (!c->region)
			return -ENOMEM;
		memset(c->region, 0, region_bytes);
		c->hdr = c->region;
		c->hdr->magic = FS_CLIENT_MAGIC;
		c->hdr->version = FS_PROTO_VERSION;
		c->hdr->region_bytes = region_bytes;
		c->hdr->client_id = i;
		c->hdr->ring_entries = entries_ring;
		c->hdr->off_ring = off_ring;
		c->hdr->ring_bytes = ring_bytes;
		c->hdr->off_dev_ring = off_dev;
		c->hdr->dev_ring_bytes = ring_bytes;
		/* libforesight-client declares its reach at attach (fs_attach.c):
		 * none newer than what it holds, so far. */
		c->hdr->reach = 1;
		int rc = fs_ring_format(&c->cons, (char *)c->region + off_ring, ring_bytes, entries_ring);
		if (rc == 0)
			rc = fs_ring_format(&c->dev_cons, (char *)c->region + off_dev, ring_bytes,
					    entries_ring);
		if (rc == 0)
			rc = fs_ring_prod_init(&c->prod, (char *)c->region + off_ring, ring_bytes);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static int engine_init(struct run *x, const struct fsr_config *cfg)
{
	x->publish_us = x->m->publish_us;
	x->liveness_ms = 5000;      /* foresightd's defaults */
	x->hold_timeout_ms = 10000; /* (a window is tens of virtual ms) */
	x->hold_pressure_ms = 0;
	x->dev_poll_us = 50;
	struct fse_config ec = {
		.cards = x->cards,
		.layers = cfg->layers,
		.experts = cfg->experts,
		.max_clients = x->nclients,
		.epoch_bufs = x->dh->epoch_bufs,
		.heartbeat_ms = 100,
		.slot_bytes = 0, /* no pool: the virtual bus moves no bytes */
		.dh = x->dh,
		.core = x->r,
		.ctr = {x->c_daemon, x->c_card, x->c_layer, x->c_client},
		.backend = {.ctx = x, .submit = bus_submit, .poll = bus_poll, .card_down = bus_card_down},
		.host = x,
		.clock = virtual_clock,
		.live = {&x->publish_us, &x->liveness_ms, &x->hold_timeout_ms, &x->hold_pressure_ms,
			 &x->dev_poll_us},
	};
	x->e = fse_create(&ec);
	if (!x->e)
		return -errno;
	for (uint32_t i = 0; i < x->nclients; i++) {
		struct engine *c = &x->cl[i];
		struct fse_client_in in = {.hdr = c->hdr, .ring = c->cons, .dev_ring = c->dev_cons, .pid = 0};
		snprintf(in.name, sizeof(in.name), "replay-%u", i);
		int rc = fse_cmd_add(x->e, i, &in);
		if (rc != 0)
			return rc;
	}
	fse_first(x->e); /* epoch 1; the first pass takes the engines in */
	return 0;
}

static int run_init(struct run *x, const struct replay_input *in, const struct replay_model *m,
		    enum replay_policy_id p, char *err, size_t errlen)
{
	const struct fs_trace *t = in->trace;
	x->t = t;
	x->m = m;
	x->cards = m->cards ? m->cards : 1;
	x->nclients = m->clients ? m->clients : 1;
	struct fsr_config cfg;
	if (x->cards > FS_MAX_CARDS || x->nclients > FSE_MAX_CLIENTS)
		return -EINVAL;
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
		for (uint32_t c = 0; c < cfg.cards; c++)
			cfg.slots[c] = n > 0 ? (uint32_t)n : 1;
		profile = x->layer_profile;
	}
	uint64_t *bytes = malloc(le * sizeof(*bytes));
	x->c_card = calloc((size_t)x->cards * FS_N_CARD, sizeof(uint64_t));
	x->c_layer = calloc((size_t)t->layers * FS_N_LAYER, sizeof(uint64_t));
	x->c_client = calloc((size_t)x->nclients * FS_N_CLIENT, sizeof(uint64_t));
	x->cl = calloc(x->nclients, sizeof(*x->cl));
	x->cand_e = malloc(t->experts * sizeof(*x->cand_e));
	x->cand_s = malloc(t->experts * sizeof(*x->cand_s));
	if (!bytes || !x->c_card || !x->c_layer || !x->c_client || !x->cl || !x->cand_e || !x->cand_s) {
		free(bytes);
		return -ENOMEM;
	}
	for (size_t i = 0; i < le; i++) {
		uint64_t b = t->expert_bytes ? t->expert_bytes[i / t->experts] : 0;
		bytes[i] = b ? b : m->expert_bytes;
	}
	cfg.expert_bytes = bytes;
	cfg.counters = (struct fsr_counters){x->c_daemon, x->c_card, x->c_layer, x->c_client};
	cfg.unserved = on_unserved;
	cfg.unserved_ctx = x;
	cfg.learned = on_learned;
	cfg.learned_ctx = x;
	x->r = fsr_create(&cfg);
	free(bytes);
	if (!x->r) {
		snprintf(err, errlen, "residency core: invalid configuration for %s", replay_policy_name(p));
		return -EINVAL;
	}
	int rc;
	double link = cfg.bus_gbps > 0.0 ? m->bus_gbps : 0.0; /* lru: unlimited, as its definition says */
	for (uint32_t c = 0; c < x->cards; c++)
		if ((rc = replay_bus_init(&x->bus[c], cfg.slots[c], BUS_QUEUE, link,
					  p == RP_LRU || p == RP_LRU_WARM ? 1 : m->delay)) != 0)
			return rc;
	if ((rc = replay_why_init(&x->why, t->layers, t->experts, x->nclients, x->cards, x->bus)) != 0)
		return rc;
	x->predicts = replay_policy_predicts(p);
	x->learns = cfg.learn == FSR_LEARN_ON;
	x->why_predicts = x->predicts || x->learns;
	/* What the profile's tokens used: seen before the run (why_info's unseen). */
	for (size_t i = 0; i < le; i++)
		if (in->profile[i])
			replay_why_seen(&x->why, (uint32_t)(i / t->experts), (uint32_t)(i % t->experts));
	if (x->predicts && (rc = replay_predictor_init(&x->pred, t, m)) != 0)
		return rc;
	x->layer_ms = m->intercept_ms / t->layers;
	x->miss_ms_l = m->miss_ms / t->layers;
	/* foresightd's order: the reach (one tier across the cards), then the
	 * profile (a client's load, once the daemon serves). */
	if ((rc = regions_init(x, &cfg)) != 0)
		return rc;
	if ((rc = fsr_set_reach(x->r, x->dh->peer_reach)) != 0)
		return rc;
	if (replay_policy_uses_profile(p) && (rc = fsr_profile_load(x->r, profile)) != 0)
		return rc;
	return engine_init(x, &cfg);
}

static void run_free(struct run *x)
{
	fse_destroy(x->e);
	fsr_destroy(x->r);
	for (uint32_t c = 0; c < FS_MAX_CARDS; c++)
		replay_bus_free(&x->bus[c]);
	replay_predictor_free(&x->pred);
	replay_why_free(&x->why);
	for (uint32_t i = 0; x->cl && i < x->nclients; i++) {
		fs_trace_iter_free(&x->cl[i].it);
		free(x->cl[i].region);
	}
	free(x->cl);
	free(x->dh);
	free(x->c_card);
	free(x->c_layer);
	free(x->c_client);
	free(x->cand_e);
	free(x->cand_s);
	free(x->layer_profile);
}

/* The learned predictor learns from what ran before decode: the prefill's
 * tokens, one window each, and the warm-up windows (the static profile
 * counts the same), as the engine posted them, numbered to end just
 * before its first scored window. */
static void learn_past(struct run *x, const struct replay_input *in, const struct replay_model *m,
		       struct engine *c, uint32_t client)
{
	const struct fs_trace *t = in->trace;
	uint32_t T = m->tokens_per_window ? m->tokens_per_window : 1;
	uint32_t warm_win = m->warmup, pre = t->prefill_tokens;
	uint32_t w = c->num - (pre + warm_win);
	uint8_t *seen = calloc(t->experts, 1);
	if (!seen)
		return;
	for (uint32_t i = 0; i < pre + warm_win; i++, w++) {
		uint32_t first = i < pre ? i : (i - pre) * T, n = i < pre ? 1 : T;
		if (i >= pre && first + n > t->tokens)
			break;
		struct fs_rec b = {.type = FS_REC_WIN_BEGIN, .window = w, .value = n};
		fsr_learn_observe(x->r, client, &b);
		for (uint32_t l = 0; l < t->layers; l++) {
			for (uint32_t k = 0; k < n; k++) {
				const uint16_t *e = i < pre ? t->prefill + ((size_t)first * t->layers + l) *
										   t->topk :
							      fs_trace_token(t, first + k, l);
				for (uint32_t j = 0; j < t->topk; j++) {
					if (e[j] >= t->experts || seen[e[j]])
						continue;
					seen[e[j]] = 1;
					struct fs_rec u = {.type = FS_REC_USAGE,
							   .layer = (uint16_t)l,
							   .expert = e[j],
							   .card = (uint16_t)c->card,
							   .window = w};
					fsr_learn_observe(x->r, client, &u);
				}
			}
			for (uint32_t k = 0; k < n; k++) {
				const uint16_t *e = i < pre ? t->prefill + ((size_t)first * t->layers + l) *
										   t->topk :
							      fs_trace_token(t, first + k, l);
				for (uint32_t j = 0; j < t->topk; j++)
					if (e[j] < t->experts)
						seen[e[j]] = 0;
			}
		}
	}
	free(seen);
}

/* Each engine its own contiguous slice of the scored windows. */
static int engines_start(struct run *x, const struct replay_input *in, const struct replay_model *m)
{
	uint32_t all = fs_trace_windows(in->trace, m->tokens_per_window);
	uint32_t scored = all > m->warmup ? all - m->warmup : 0;
	for (uint32_t i = 0; i < x->nclients; i++) {
		struct engine *c = &x->cl[i];
		int rc = fs_trace_iter_init(&c->it, in->trace, m->tokens_per_window);
		if (rc != 0)
			return rc;
		c->w = m->warmup + (uint32_t)((uint64_t)scored * i / x->nclients);
		c->w_end = m->warmup + (uint32_t)((uint64_t)scored * (i + 1) / x->nclients);
		c->num = m->warmup + 1; /* the engine numbers windows from 1 */
		c->card = i % x->cards;
		c->t = c->t0 = x->now;
		c->done = c->w >= c->w_end || !fs_trace_iter_seek(&c->it, c->w);
		if (m->learn_past && x->learns)
			learn_past(x, in, m, c, i);
	}
	return 0;
}

int replay_run(const struct replay_input *in, const struct replay_model *m, enum replay_policy_id p,
	       struct replay_result *out, char *err, size_t errlen)
{
	if (p == RP_STRATA_ADAPT) /* a peer with its own loop (replay_strata.c) */
		return replay_strata_run(in, m, out, err, errlen);
	struct run x = {0};
	memset(out, 0, sizeof(*out));
	int rc = run_init(&x, in, m, p, err, errlen);
	if (rc != 0) {
		if (!err[0])
			snprintf(err, errlen, "%s: %s", replay_policy_name(p), strerror(-rc));
		run_free(&x);
		return rc;
	}
	preload(&x);
	/* Only decode counts: the profile's fill happened during prefill. */
	replay_why_start(&x.why);
	uint64_t copied0[REPLAY_PER_MAX] = {0};
	uint64_t *card0 = calloc(FS_N_CARD, sizeof(uint64_t));
	if (!card0 || (rc = engines_start(&x, in, m)) != 0) {
		free(card0);
		snprintf(err, errlen, "%s: %s", replay_policy_name(p), strerror(rc ? -rc : ENOMEM));
		run_free(&x);
		return rc ? rc : -ENOMEM;
	}
	for (uint32_t c = 0; c < x.cards; c++) {
		for (uint32_t k = 0; k < FS_N_CARD; k++)
			card0[k] += x.c_card[(size_t)c * FS_N_CARD + k];
		if (c < REPLAY_PER_MAX)
			copied0[c] = x.c_card[(size_t)c * FS_N_CARD + FS_CC_copied];
	}
	/* Engines step in virtual-time order. */
	for (;;) {
		struct engine *next = NULL;
		for (uint32_t i = 0; i < x.nclients; i++)
			if (!x.cl[i].done && (!next || x.cl[i].t < next->t))
				next = &x.cl[i];
		if (!next || x.failed)
			break;
		uint64_t wake = daemon_next(&x);
		if (wake <= next->t) { /* ties: the landing first (its ready word flips at done) */
			x.now = wake;
			daemon_step(&x);
			continue;
		}
		x.now = next->t;
		engine_step(&x, next);
	}
	if (x.failed) {
		free(card0);
		snprintf(err, errlen, "%s: a queue of the replay overflowed (a bug)", replay_policy_name(p));
		run_free(&x);
		return -ENOBUFS;
	}

	uint64_t sum[FS_N_CARD] = {0}, elapsed = 0;
	for (uint32_t c = 0; c < x.cards; c++) {
		for (uint32_t k = 0; k < FS_N_CARD; k++)
			sum[k] += x.c_card[(size_t)c * FS_N_CARD + k];
		if (c < REPLAY_PER_MAX) {
			out->card_fill[c] = copied0[c];
			out->card_copies[c] = x.c_card[(size_t)c * FS_N_CARD + FS_CC_copied] - copied0[c];
		}
	}
	uint64_t uses = 0, hits = 0;
	uint32_t scored = 0;
	for (uint32_t i = 0; i < x.nclients; i++) {
		if (i < REPLAY_PER_MAX) {
			out->client_uses[i] = x.cl[i].uses;
			out->client_hits[i] = x.cl[i].hits;
		}
		uses += x.cl[i].uses;
		hits += x.cl[i].hits;
		scored += x.cl[i].windows;
		elapsed += x.cl[i].t - x.cl[i].t0;
	}
	snprintf(out->policy, sizeof(out->policy), "%s", replay_policy_name(p));
	out->windows = scored;
	out->layers = in->trace->layers;
	out->slots = replay_slots(m, in->trace);
	out->uses = uses;
	out->hits = hits;
	out->misses = uses - hits;
	out->copies = sum[FS_CC_copied] - card0[FS_CC_copied];
	out->bytes = sum[FS_CC_copied_bytes] - card0[FS_CC_copied_bytes];
	out->landed_late = sum[FS_CC_landed_late] - card0[FS_CC_landed_late];
	out->late_uses = sum[FS_CC_late] - card0[FS_CC_late];
	out->too_late = sum[FS_CC_too_late] - card0[FS_CC_too_late];
	out->promoted = sum[FS_CC_promoted] - card0[FS_CC_promoted];
	fsr_learn_stats(x.r, &out->learn);
	out->predictions = x.predictions + out->learn.predictions;
	replay_why_finish(&x.why);
	out->why_counted = 1;
	memcpy(out->why, x.why.n, sizeof(out->why));
	memcpy(out->why_hist, x.why.hist, sizeof(out->why_hist));
	memcpy(out->why_info, x.why.info, sizeof(out->why_info));
	out->hit_rate = uses ? (double)hits / (double)uses : 0.0;
	double lw = (double)scored * in->trace->layers;
	out->misses_per_lw = lw > 0 ? (double)out->misses / lw : 0.0;
	/* per engine: each engine's time over its windows */
	out->ms_per_window = scored ? (double)elapsed / 1e6 / scored : 0.0;
	out->tokens_per_s = out->ms_per_window > 0 ? 1000.0 * m->tokens_per_window / out->ms_per_window : 0.0;
	free(card0);
	run_free(&x);
	return 0;
}
