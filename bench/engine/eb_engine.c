/* SPDX-License-Identifier: Apache-2.0 */
/*
 * eb_engine.c: one engine process running one mode (fs-engine-bench
 * engine ...; the driver starts it).
 *
 * Per decode window of T tokens, per MoE layer (layer l runs on card
 * l * cards / layers, the residency core's default home: a layer split;
 * or, with --placement dp, every layer on card engine % cards: data
 * parallel, one engine per card):
 *   1. the dense part on the layer's card (a kernel of calibrated length);
 *   2. mode predict/both: router-ahead predictions for layers l+1..l+3
 *      (the trace-oracle predictor of tools/replay at the discussion's
 *      recall table), the best `pred_max` not-yet-resident candidates per
 *      target layer and horizon, posted through the ring;
 *   3. the layer's distinct experts from the routing: each one resident
 *      (own pool, or the daemon's slot through the held epoch, including
 *      copies that landed since: fs_lookup_live) is computed on the device
 *      from its slot; every other one on the CPU threads from the arena,
 *      at the same time; a use is posted with hit/miss;
 *   4. the layer's output: the dense words plus every routed expert's
 *      contribution, on the host.
 * A window's checksum is the FNV-1a 64 of its tokens' final hidden words;
 * it depends only on the routing and the expert bytes, never on where an
 * expert was computed, so it must be equal in every mode.
 *
 * Late landings: an expert the held epoch maps to a slot whose ready word
 * does not carry the mapped generation yet (its copy is in flight).  The
 * engine then waits up to --late-wait-us for the word (0: not at all) and
 * otherwise computes it on the CPU; both outcomes are counted.  The
 * daemon's own count of uses that missed while a copy was in flight
 * (counter `late`, which also sees copies published after the window's
 * epoch) is read by the driver.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <foresight/foresight.h>

#include <foresight/router_ahead.h>

#include "eb.h"
#include "strata.h"
#include "fs_opt.h"
#include "fs_regions.h"
#include "replay_predict.h"

struct eng_opts {
	const char *socket, *checksums;
	int mode;
	enum eb_device device;
	uint32_t cards, engine, engines;
	uint64_t budget; /* slots, all cards and engines (own-pool baseline) */
	struct eb_route_opts ro;
	uint32_t warm, dense_iters, cpu_threads, pred_max, late_wait_us, max_windows;
	double cpu_gbps;
	int load_profile, sync, predictor_kernel, pred_charged;
	uint32_t ra_dim, ra_top; /* --predictor kernel: hidden size, top-M per token */
	int dp;                  /* --placement dp: every layer on card engine % cards */
	int peer;                /* --peer: read experts other cards hold (fs_lookup_from) */
	int64_t fault_window;    /* tests: corrupt this window's checksum (-1: none) */
	uint64_t pred_seed;
	struct replay_recall recall; /* the oracle's recall table (--pred-recall) */
	int64_t down_window;         /* --card-down C@W: take card C down before window W */
	double bus_gbps;             /* the peers' copies: the daemon's bus budget per card */
	uint32_t adapt_every, max_swaps, lru_inserts;
	float decay;
	uint32_t down_card;
};

struct eng {
	struct eng_opts o;
	fs_client *c;
	struct fs_model_info m;
	struct eb_route r;
	struct eb_dev *dev;
	struct eb_cpu *cpu;
	struct replay_predictor pred;
	int have_pred;
	/* --predictor kernel: the router-ahead kernel's inputs (eb_ra.c) on
	 * every card this engine runs a layer on, and the residency bitmap
	 * it skips by ([layer][E / 32], filled per window from the epoch). */
	struct eb_ra *ra;
	void *ra_desc;                /* the device ring (CUDA) */
	uint32_t ra_words;            /* bitmap words per layer */
	uint32_t reach[FS_MAX_CARDS]; /* cards an engine on card i reads (bit j) */
	uint32_t *ra_bits;            /* host copy */
	uint8_t *ra_routers[FS_MAX_CARDS], *ra_hidden[FS_MAX_CARDS];
	uint32_t *ra_dbits[FS_MAX_CARDS];
	void *ra_scratch[FS_MAX_CARDS];
	uint32_t ra_out_ex[FS_RA_MAX_HORIZONS * FS_RA_MAX_OUT], ra_out_n[FS_RA_MAX_HORIZONS];
	float ra_out_sc[FS_RA_MAX_HORIZONS * FS_RA_MAX_OUT];
	uint64_t ra_launches;
	/* cards seen down (fs_card_info.down) at a window's start, and experts
	 * read from such a card afterwards: must stay 0 */
	uint32_t down_seen;
	uint64_t down_reads;
	/* The predictor's candidates, best first, for every (window, layer,
	 * horizon), computed before the run: a router-ahead kernel runs on the
	 * GPU beside the layer, so its cost is not the engine thread's
	 * (--pred-cost charged computes them in the loop instead). */
	uint32_t *ptab_off; /* [(nwin * L + layer) * 3 + h - 1], then the end */
	uint16_t *ptab_ex, *tmp_ex;
	float *ptab_sc, *tmp_sc;
	/* own pool (baseline, zero-miss) */
	struct eb_pool *pool;
	uint32_t *card_tab; /* [layer]: card_of, for the pool */
	/* scratch */
	struct eb_use *uses;
	struct eb_job *gjobs, *cjobs;
	uint16_t *pex;
	float *psc;
	uint32_t *porder;
	/* counts over the measured windows */
	/* misses in layers 0..2, which no router-ahead within the window
	 * reaches early (layer 0 not at all) */
	uint64_t misses_first3;
	uint64_t uses_n, hits, peer_hits, misses, late_seen, late_waited, late_cpu, predictions, cpu_bytes,
		dev_bytes;
	uint64_t windows, tokens, layer_windows;
	uint64_t cpu_ns, dense_ns, wait_ns;
	FILE *ck;
	uint64_t run_ck;
};

static uint32_t card_of(const struct eng *e, uint32_t layer)
{
	if (e->o.dp)
		return e->o.engine % e->o.cards;
	return (uint32_t)((uint64_t)layer * e->o.cards / e->m.layers);
}

/* Engines whose layers use `card` (they share its VRAM). */
static uint32_t engines_on(const struct eng *e, uint32_t card)
{
	if (!e->o.dp)
		return e->o.engines;
	uint32_t n = 0;
	for (uint32_t i = 0; i < e->o.engines; i++)
		n += i % e->o.cards == card;
	return n;
}

/* ---- the own pool (eb_pool.c): the peers and zero-miss ------------------- */

static int own_pool(struct eng *e, char *err, size_t errlen)
{
	uint32_t L = e->m.layers;
	e->card_tab = calloc(L, sizeof(*e->card_tab));
	if (!e->card_tab) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	struct eb_pool_opts po = {
		.policy = e->o.mode == EB_ZERO   ? EB_POOL_ZERO :
			  e->o.mode == EB_STRATA ? EB_POOL_STRATA :
			  e->o.mode == EB_LRU    ? EB_POOL_LRU :
						   EB_POOL_STATIC,
		.client = e->c,
		.layers = L,
		.experts = e->m.experts,
		.topk = e->r.t.topk,
		.cards = e->o.cards,
		.card_of = e->card_tab,
		.slot_bytes = e->m.max_expert_bytes,
		.profile = e->r.profile,
		.tpw = e->o.ro.tpw,
		.bus_gbps = e->o.bus_gbps,
		.adapt_every = e->o.adapt_every,
		.decay = e->o.decay,
		.max_swaps = e->o.max_swaps,
		.lru_inserts = e->o.lru_inserts,
	};
	for (uint32_t l = 0; l < L; l++)
		e->card_tab[l] = card_of(e, l);
	for (uint32_t card = 0; card < e->o.cards; card++) {
		uint64_t here = 0;
		for (uint32_t l = 0; l < L; l++)
			here += card_of(e, l) == card;
		if (here == 0)
			po.slots_card[card] = 0; /* this engine runs nothing on that card */
		else if (e->o.mode == EB_ZERO)
			po.slots_card[card] = here * e->m.experts;
		else
			po.slots_card[card] = e->o.budget / e->o.cards / engines_on(e, card);
	}
	return eb_pool_create(&e->pool, e->dev, &po, err, errlen);
}

/* ---- the daemon's slots ----------------------------------------------- */

/* The held epoch maps (card, layer, expert) to a slot whose copy has not
 * landed yet: *slot and *gen set.  Reads the view's table by the layout of
 * proto/fs_regions.h (the client API answers only "landed or not"). */
static int in_flight(const struct eng *e, const struct fs_view *v, uint32_t card, uint32_t layer,
		     uint32_t expert, uint32_t *slot, uint32_t *gen)
{
	if (!v->tab_ || v->epoch == 0)
		return 0;
	uint64_t ent = __atomic_load_n(
		&v->tab_[((uint64_t)card * e->m.layers + layer) * e->m.experts + expert], __ATOMIC_RELAXED);
	if (ent == FS_ENTRY_NONE || FS_ENTRY_GEN(ent) == FS_GEN_NONE)
		return 0;
	const uint32_t *ready = fs_card_ready_words(e->c, card);
	struct fs_card_info ci;
	if (!ready || fs_client_card(e->c, card, &ci) != 0 || FS_ENTRY_SLOT(ent) >= ci.slots)
		return 0;
	*slot = FS_ENTRY_SLOT(ent);
	*gen = FS_ENTRY_GEN(ent);
	return __atomic_load_n(&ready[*slot], __ATOMIC_ACQUIRE) != *gen;
}

/* Does the held epoch (or a copy landed since) put (layer, x) where an
 * engine on `card` reads it: on the card, or, with --peer, on a card it
 * reads? */
static int held(const struct eng *e, const struct fs_view *v, uint32_t card, uint32_t layer, uint32_t x)
{
	if (fs_lookup_live(e->c, v, card, layer, x, NULL))
		return 1;
	return e->o.peer && fs_lookup_from(e->c, v, card, layer, x, NULL) == FS_PLACE_PEER;
}

/* Where expert (layer, x) is, for the device: its pointer, or NULL (CPU). */
static const void *resident(struct eng *e, const struct fs_view *v, uint32_t w, uint32_t layer, uint32_t x,
			    uint32_t card, int measured)
{
	if (!eb_mode_daemon(e->o.mode))
		return eb_pool_lookup(e->pool, layer, x);
	struct fs_slot s;
	int hit = fs_lookup_live(e->c, v, card, layer, x, &s);
	if (!hit && e->o.peer) {
		/* held by a card this one reads: read it there, in place */
		struct fs_place pl;
		if (fs_lookup_from(e->c, v, card, layer, x, &pl) == FS_PLACE_PEER) {
			if (measured)
				e->peer_hits++;
			e->down_reads += e->down_seen >> pl.card & 1u;
			fs_post_usage(e->c, w, layer, x, card, 1);
			return e->o.device == EB_DEV_CUDA ? pl.device : pl.host;
		}
	}
	uint32_t slot, gen;
	if (!hit && in_flight(e, v, card, layer, x, &slot, &gen)) {
		if (measured)
			e->late_seen++;
		if (e->o.late_wait_us) {
			const uint32_t *ready = fs_card_ready_words(e->c, card);
			uint64_t until = eb_now_ns() + (uint64_t)e->o.late_wait_us * 1000u;
			while (__atomic_load_n(&ready[slot], __ATOMIC_ACQUIRE) != gen && eb_now_ns() < until)
				;
			hit = fs_lookup(e->c, v, card, layer, x, &s);
		}
		if (measured)
			*(hit ? &e->late_waited : &e->late_cpu) += 1;
	}
	fs_post_usage(e->c, w, layer, x, card, hit);
	if (!hit)
		return NULL;
	e->down_reads += e->down_seen >> card & 1u;
	return e->o.device == EB_DEV_CUDA ? s.device : s.host;
}

/* ---- predictions --------------------------------------------------------- */

/* The predictor's candidates for (dw, target, h), best first (ties by
 * expert id) into ex/sc; returns how many. */
static uint32_t candidates(struct eng *e, uint32_t dw, uint32_t target, unsigned h, uint16_t *ex, float *sc)
{
	uint32_t n = replay_predict(&e->pred, dw, e->r.first[dw], e->r.ntok[dw], target, h, e->pex, e->psc);
	/* insertion sort of indices */
	for (uint32_t i = 0; i < n; i++) {
		uint32_t j = i;
		while (j > 0 && e->psc[e->porder[j - 1]] < e->psc[i])
			j--;
		memmove(&e->porder[j + 1], &e->porder[j], (i - j) * sizeof(*e->porder));
		e->porder[j] = i;
	}
	for (uint32_t i = 0; i < n; i++) {
		ex[i] = e->pex[e->porder[i]];
		sc[i] = e->psc[e->porder[i]];
	}
	return n;
}

/* Candidates kept per (window, layer, horizon) in the table: the loop posts
 * at most pred_max of them, skipping resident ones. */
#define PTAB_KEEP(e) ((e)->o.pred_max * 4u)

static int ptab_build(struct eng *e)
{
	uint32_t L = e->m.layers, nw = e->r.nwin, keep = PTAB_KEEP(e);
	size_t cells = (size_t)nw * L * 3;
	e->ptab_off = calloc(cells + 1, sizeof(*e->ptab_off));
	e->ptab_ex = calloc(cells * keep, sizeof(*e->ptab_ex));
	e->ptab_sc = calloc(cells * keep, sizeof(*e->ptab_sc));
	uint16_t *ex = calloc(e->m.experts, sizeof(*ex));
	float *sc = calloc(e->m.experts, sizeof(*sc));
	if (!e->ptab_off || !e->ptab_ex || !e->ptab_sc || !ex || !sc) {
		free(ex), free(sc);
		return -1;
	}
	uint32_t at = 0;
	for (uint32_t dw = 0; dw < nw; dw++)
		for (uint32_t l = 0; l < L; l++)
			for (unsigned h = 1; h <= 3; h++) {
				size_t cell = ((size_t)dw * L + l) * 3 + h - 1;
				e->ptab_off[cell] = at;
				if (l + h >= L)
					continue;
				uint32_t n = candidates(e, dw, l + h, h, ex, sc);
				n = n < keep ? n : keep;
				memcpy(&e->ptab_ex[at], ex, n * sizeof(*ex));
				memcpy(&e->ptab_sc[at], sc, n * sizeof(*sc));
				at += n;
			}
	e->ptab_off[cells] = at;
	free(ex), free(sc);
	return 0;
}

static void predict(struct eng *e, const struct fs_view *v, uint32_t w, uint32_t dw, uint32_t layer)
{
	for (unsigned h = 1; h <= 3; h++) {
		uint32_t target = layer + h;
		if (target >= e->m.layers)
			break;
		const uint16_t *ex;
		const float *sc;
		uint32_t n;
		if (e->ptab_off) {
			size_t cell = ((size_t)dw * e->m.layers + layer) * 3 + h - 1;
			ex = &e->ptab_ex[e->ptab_off[cell]];
			sc = &e->ptab_sc[e->ptab_off[cell]];
			n = e->ptab_off[cell + 1] - e->ptab_off[cell];
		} else { /* --pred-cost charged: the predictor runs here */
			n = candidates(e, dw, target, h, e->tmp_ex, e->tmp_sc);
			ex = e->tmp_ex, sc = e->tmp_sc;
		}
		uint32_t card = card_of(e, target), posted = 0;
		for (uint32_t i = 0; i < n && posted < e->o.pred_max; i++) {
			if (held(e, v, card, target, ex[i]))
				continue;
			if (fs_post_predict(e->c, w, target, ex[i], card, sc[i], h, FS_SOURCE_ROUTER_AHEAD) ==
			    0)
				posted++;
		}
		e->predictions += posted;
	}
}

/* ---- the router-ahead kernel (--predictor kernel) ------------------------ */

#ifdef EB_HAVE_CUDA
static int uses_card(const struct eng *e, uint32_t card)
{
	for (uint32_t l = 0; l < e->m.layers; l++)
		if (card_of(e, l) == card)
			return 1;
	return 0;
}
#endif

static int ra_setup(struct eng *e, char *err, size_t errlen)
{
	uint32_t L = e->m.layers, E = e->m.experts;
	if (eb_ra_create(&e->ra, &e->r, e->o.ra_dim, e->o.pred_seed, err, errlen) != 0)
		return -1;
	e->ra_words = (E + 31) / 32;
	e->ra_bits = calloc((size_t)L * e->ra_words, sizeof(*e->ra_bits));
	if (!e->ra_bits) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (e->o.device != EB_DEV_CUDA)
		return 0; /* the CPU reference ranks, the ring takes the posts */
#ifndef EB_HAVE_CUDA
	snprintf(err, errlen, "--predictor kernel on --device cuda: built without CUDA");
	return -1;
#else
	int rc = fs_dev_ring_enable(e->c, &e->ra_desc);
	if (rc < 0) {
		snprintf(err, errlen, "fs_dev_ring_enable: %s", fs_strerror(rc));
		return -1;
	}
	uint64_t rb, hb;
	const uint16_t *routers = eb_ra_routers(e->ra, &rb), *hidden = eb_ra_hidden_all(e->ra, &hb);
	struct fs_ra_params sp = {.tokens = EB_MAX_T, .experts = E, .horizons = 3};
	uint64_t scb = fs_ra_scratch_bytes(&sp);
	void *zeros = calloc(1, scb);
	uint64_t bb = (uint64_t)L * e->ra_words * sizeof(uint32_t);
	for (uint32_t card = 0; card < e->o.cards && zeros; card++) {
		if (!uses_card(e, card))
			continue;
		e->ra_routers[card] = eb_dev_alloc(e->dev, card, rb);
		e->ra_hidden[card] = eb_dev_alloc(e->dev, card, hb);
		e->ra_dbits[card] = eb_dev_alloc(e->dev, card, bb);
		e->ra_scratch[card] = eb_dev_alloc(e->dev, card, scb);
		if (!e->ra_routers[card] || !e->ra_hidden[card] || !e->ra_dbits[card] ||
		    !e->ra_scratch[card] || eb_dev_put(e->dev, card, e->ra_routers[card], routers, rb) != 0 ||
		    eb_dev_put(e->dev, card, e->ra_hidden[card], hidden, hb) != 0 ||
		    eb_dev_put(e->dev, card, e->ra_scratch[card], zeros, scb) != 0) {
			free(zeros);
			snprintf(err, errlen,
				 "router-ahead inputs on card %u: device allocation or copy failed", card);
			return -1;
		}
	}
	free(zeros);
	return 0;
#endif
}

/* The window's residency bitmap, where the kernel skips what the held
 * epoch maps (landed or on its way) to a card the layer's card reads.  Read
 * from the epoch's table by the layout of proto/fs_regions.h, as
 * in_flight() does: L x E loads per card read, no call per expert (the
 * oracle path asks held() per candidate instead). */
static int ra_window(struct eng *e, const struct fs_view *v)
{
	uint32_t L = e->m.layers, E = e->m.experts;
	memset(e->ra_bits, 0, (size_t)L * e->ra_words * sizeof(*e->ra_bits));
	for (uint32_t l = 1; l < L && v->tab_ && v->epoch; l++) {
		uint32_t mask = e->reach[card_of(e, l)];
		for (uint32_t c = 0; c < e->o.cards; c++) {
			if (!(mask >> c & 1u))
				continue;
			const uint64_t *row = &v->tab_[((uint64_t)c * L + l) * E];
			for (uint32_t x = 0; x < E; x++)
				if (__atomic_load_n(&row[x], __ATOMIC_RELAXED) != FS_ENTRY_NONE)
					e->ra_bits[l * e->ra_words + x / 32] |= 1u << (x % 32);
		}
	}
	if (e->o.device != EB_DEV_CUDA)
		return 0;
	if (eb_dev_ra_sync(e->dev) != 0) /* the last window's launches read the old bitmap */
		return -1;
	for (uint32_t card = 0; card < e->o.cards; card++)
		if (e->ra_dbits[card] && eb_dev_put(e->dev, card, e->ra_dbits[card], e->ra_bits,
						    (uint64_t)L * e->ra_words * sizeof(uint32_t)) != 0)
			return -1;
	return 0;
}

/* After layer l: rank layers l+1..l+3's experts from layer l's hidden rows
 * and post the best pred_max not held per horizon.  CUDA: one launch on
 * the card's side stream, the kernel posts into the device ring itself.
 * Host: the CPU reference, posted through the ring from here. */
static int ra_predict(struct eng *e, uint32_t w, uint32_t dw, uint32_t l)
{
	uint32_t L = e->m.layers, E = e->m.experts, dim = e->o.ra_dim;
	uint32_t hz = L - 1 - l < 3 ? L - 1 - l : 3;
	if (hz == 0)
		return 0;
	int cuda = e->o.device == EB_DEV_CUDA;
	uint32_t card = card_of(e, l);
	uint64_t bytes;
	const uint16_t *hidden = eb_ra_hidden_all(e->ra, &bytes), *routers = eb_ra_routers(e->ra, &bytes);
	uint64_t row = eb_ra_row(e->ra, dw, l);
	struct fs_ra_params p = {
		.hidden_type = FS_RA_BF16,
		.tokens = e->r.ntok[dw],
		.dim = dim,
		.router_type = FS_RA_BF16,
		.experts = E,
		.horizons = hz,
		.top_m = e->o.ra_top < E ? e->o.ra_top : E,
		.max_out = e->o.pred_max,
		.layer = l,
		.card = e->o.dp ? card : 0xffffu,
		.window = w,
	};
	const uint8_t *hb = cuda ? e->ra_hidden[card] : (const uint8_t *)hidden;
	const uint8_t *rb = cuda ? e->ra_routers[card] : (const uint8_t *)routers;
	const uint32_t *bits = cuda ? e->ra_dbits[card] : e->ra_bits;
	p.hidden = hb + row * dim * 2;
	for (uint32_t k = 0; k < hz; k++) {
		p.router[k] = rb + (uint64_t)(l + 1 + k) * E * dim * 2;
		p.resident[k] = bits + (size_t)(l + 1 + k) * e->ra_words;
	}
	e->ra_launches++;
	if (cuda) {
		p.desc = e->ra_desc;
		p.scratch = e->ra_scratch[card];
		return eb_dev_ra(e->dev, card, &p);
	}
	p.out_expert = e->ra_out_ex, p.out_score = e->ra_out_sc, p.out_count = e->ra_out_n;
	if (fs_ra_reference(&p) != 0)
		return -1;
	for (uint32_t k = 0; k < hz; k++)
		for (uint32_t i = 0; i < e->ra_out_n[k]; i++)
			if (fs_post_predict(e->c, w, l + 1 + k, e->ra_out_ex[k * p.max_out + i], p.card,
					    e->ra_out_sc[k * p.max_out + i], k + 1, FS_SOURCE_KERNEL) == 0)
				e->predictions++;
	return 0;
}

/* ---- one window ------------------------------------------------------------ */

/* --card-down: engine 0 takes the card down before its window W (the
 * verb an admin's `fsctl card down` sends; on hardware that must not be
 * reset it stands in for a lost card).  Every engine notes, before it
 * acquires a window's epoch, which cards are down: from then on no expert
 * may be read there (resident() counts any that is). */
static int card_watch(struct eng *e, uint32_t k)
{
	if (e->o.engine == 0 && e->o.down_window == (int64_t)k) {
		char err[256];
		if (eb_ctl_card_down(e->o.socket, e->o.down_card, err, sizeof(err)) != 0) {
			fprintf(stderr, "fs-engine-bench engine: card down %u: %s\n", e->o.down_card, err);
			return -1;
		}
		fprintf(stderr, "fs-engine-bench engine: card %u taken down before window %u\n",
			e->o.down_card, k);
	}
	for (uint32_t c = 0; c < e->o.cards; c++) {
		struct fs_card_info ci;
		if (fs_client_card(e->c, c, &ci) == 0 && ci.down)
			e->down_seen |= 1u << c;
	}
	return 0;
}

static int window(struct eng *e, uint32_t k, uint32_t dw, int measured)
{
	uint32_t w = k + 1, ntok = e->r.ntok[dw], L = e->m.layers;
	uint32_t h[EB_MAX_T * EB_D], keys[EB_MAX_T];
	for (uint32_t t = 0; t < ntok; t++)
		for (uint32_t j = 0; j < EB_D; j++)
			h[t * EB_D + j] = eb_embed(e->r.first[dw] + t, j);
	struct fs_view v = {0};
	int daemon = eb_mode_daemon(e->o.mode);
	if (daemon && card_watch(e, k) != 0)
		return -1;
	if (daemon) {
		fs_window_begin(e->c, w, ntok);
		if (fs_acquire(e->c, &v) != 0) {
			fprintf(stderr, "fs-engine-bench: acquire failed\n");
			return -1;
		}
		if (e->ra && eb_mode_predicts(e->o.mode) && ra_window(e, &v) != 0)
			return -1;
	}
	for (uint32_t l = 0; l < L; l++) {
		uint32_t card = card_of(e, l);
		uint64_t t0 = eb_now_ns();
		if (eb_dev_dense(e->dev, card, h, ntok, l, e->o.dense_iters) != 0)
			return -1;
		uint64_t t1 = eb_now_ns();
		for (uint32_t t = 0; t < ntok; t++)
			keys[t] = eb_key(&h[t * EB_D], l);
		if (daemon && eb_mode_predicts(e->o.mode) && e->have_pred)
			predict(e, &v, w, dw, l);
		if (daemon && eb_mode_predicts(e->o.mode) && e->ra && ra_predict(e, w, dw, l) != 0)
			return -1;
		uint32_t nu = eb_route_uses(&e->r, dw, l, e->uses), ng = 0, nc = 0;
		for (uint32_t i = 0; i < nu; i++) {
			uint32_t x = e->uses[i].expert;
			struct fs_expert_blob b;
			if (fs_arena_expert(e->c, l, x, &b) != 0)
				return -1;
			if (b.bytes == 0)
				continue; /* a dense layer of a GGUF model: no routed expert */
			const void *p = resident(e, &v, w, l, x, card, measured);
			struct eb_job *j = p ? &e->gjobs[ng++] : &e->cjobs[nc++];
			*j = (struct eb_job){.ptr = p ? p : b.data,
					     .bytes = b.bytes,
					     .expert = x,
					     .mask = e->uses[i].mask};
			if (measured)
				*(p ? &e->dev_bytes : &e->cpu_bytes) += b.bytes;
		}
		if (eb_dev_experts_start(e->dev, card, e->gjobs, ng, keys, ntok) != 0)
			return -1;
		uint64_t t2 = eb_now_ns();
		eb_cpu_run(e->cpu, e->cjobs, nc, keys, ntok);
		uint64_t t3 = eb_now_ns();
		if (eb_dev_experts_wait(e->dev, card) != 0)
			return -1;
		uint64_t t4 = eb_now_ns();
		/* a peer's own bookkeeping: lru uploads, strata-adapt counts */
		if (e->pool && eb_mode_peer(e->o.mode) &&
		    eb_pool_layer_done(e->pool, k, l, e->uses, nu, measured) != 0)
			return -1;
		/* the layer's output: dense words + the routed experts' contributions */
		for (uint32_t t = 0; t < ntok; t++)
			for (uint32_t j = 0; j < EB_D; j++) {
				uint32_t a = h[t * EB_D + j];
				for (uint32_t i = 0; i < ng; i++)
					if (e->gjobs[i].mask & (1u << t))
						a += eb_contrib(e->gjobs[i].y[t], e->gjobs[i].expert, l, j);
				for (uint32_t i = 0; i < nc; i++)
					if (e->cjobs[i].mask & (1u << t))
						a += eb_contrib(e->cjobs[i].y[t], e->cjobs[i].expert, l, j);
				h[t * EB_D + j] = a;
			}
		if (measured) {
			e->uses_n += ng + nc;
			e->hits += ng;
			e->misses += nc;
			e->misses_first3 += l < 3 ? nc : 0;
			e->layer_windows += (ng + nc) > 0;
			e->dense_ns += t1 - t0;
			e->cpu_ns += t3 - t2;
			e->wait_ns += t4 - t3;
		}
	}
	if (daemon) {
		fs_window_end(e->c, w);
		fs_release(e->c, &v);
	}
	if (e->pool && eb_mode_peer(e->o.mode) && eb_pool_window_end(e->pool, measured) != 0)
		return -1;
	uint64_t ck = eb_fnv(EB_FNV_INIT, h, (size_t)ntok * EB_D * sizeof(uint32_t));
	if ((int64_t)dw == e->o.fault_window)
		ck ^= 1; /* --fault-window: proves the driver notices */
	if (e->ck)
		fprintf(e->ck, "%u %016llx\n", dw, (unsigned long long)ck);
	if (measured) {
		e->windows++;
		e->tokens += ntok;
	}
	return 0;
}

/* ---- set-up ---------------------------------------------------------------- */

static int wait_settled(const char *socket)
{
	double last = -1;
	int stable = 0;
	for (int i = 0; i < 1200 && stable < 4; i++) {
		struct eb_stats s;
		char err[256];
		if (eb_ctl_stats(socket, &s, err, sizeof(err)) != 0) {
			fprintf(stderr, "fs-engine-bench: stats: %s\n", err);
			return -1;
		}
		stable = s.loading == 0 && s.copied == last ? stable + 1 : 0;
		last = s.copied;
		usleep(50000);
	}
	return 0;
}

static int opt_recall(void *dst, const char *val, char *err, size_t errlen)
{
	if (replay_recall_parse(val, dst) != 0) {
		snprintf(err, errlen, "give H:A,B,C (1 <= H <= 3)");
		return -1;
	}
	return 0;
}

static int opt_card_down(void *dst, const char *val, char *err, size_t errlen)
{
	struct eng_opts *o = dst;
	uint32_t c, w;
	if (eb_card_down_parse(val, &c, &w) < 0) {
		snprintf(err, errlen, "give CARD@WINDOW (CARD below %u)", FS_MAX_CARDS);
		return -1;
	}
	o->down_card = c, o->down_window = w;
	return 0;
}

static int opt_window(void *dst, const char *val, char *err, size_t errlen)
{
	uint64_t v;
	if (fs_opt_uint(val, INT64_MAX, &v) < 0) {
		snprintf(err, errlen, "give a window number");
		return -1;
	}
	*(int64_t *)dst = (int64_t)v;
	return 0;
}

static int parse(struct eng_opts *o, int argc, char **argv)
{
	static const char *const devices[] = {"host", "cuda", NULL};
	static const char *const placements[] = {"split", "dp", NULL};
	static const char *const predictors[] = {"oracle", "kernel", NULL};
	memset(o, 0, sizeof(*o));
	eb_route_defaults(&o->ro);
	o->mode = -1;
	o->cards = 1;
	o->engines = 1;
	o->warm = 40;
	o->dense_iters = 1000;
	o->cpu_threads = 4;
	o->pred_max = 8;
	o->pred_seed = 1;
	replay_recall_default(&o->recall);
	o->ra_dim = 2048;
	o->ra_top = 24;
	o->fault_window = -1;
	o->down_window = -1;
	o->adapt_every = STRATA_EVERY; /* tools/replay/strata.h: the peer's rules */
	o->max_swaps = STRATA_SWAPS;
	o->lru_inserts = 2;
	int device = 0;
	double decay = STRATA_DECAY;
	const struct fs_opt opts[] = {
		FS_OPT_STR("socket", "PATH", &o->socket, "foresightd's control socket (required)"),
		FS_OPT_FN("mode", "MODE", &o->mode, eb_opt_mode, "the mode this engine runs (required)"),
		FS_OPT_CHOICE("device", "host|cuda", &device, devices,
			      "where resident experts and the dense part run"),
		FS_OPT_U32("cards", "N", &o->cards, 1, FS_MAX_CARDS, "cards the layers are split over"),
		FS_OPT_U32("engine", "I", &o->engine, 0, UINT32_MAX, "this engine's index, below --engines"),
		FS_OPT_U32("engines", "N", &o->engines, 1, UINT32_MAX, "engine processes"),
		FS_OPT_U64("budget", "SLOTS", &o->budget, 0, UINT64_MAX,
			   "own-pool peers: slots, all cards and engines"),
		EB_ROUTE_OPTS(&o->ro),
		FS_OPT_U32("warm", "N", &o->warm, 0, UINT32_MAX, "windows before the measured ones"),
		FS_OPT_U32("dense-iters", "N", &o->dense_iters, 0, UINT32_MAX, "the dense loop's iterations"),
		FS_OPT_U32("cpu-threads", "N", &o->cpu_threads, 1, 1024, "CPU threads for misses"),
		FS_OPT_DBL("cpu-gbps", "G", &o->cpu_gbps, 0, 1e9, "the CPU's pace for misses (0: unpaced)"),
		FS_OPT_U32("pred-max", "N", &o->pred_max, 1, FS_RA_MAX_OUT,
			   "predictions per target layer and horizon"),
		FS_OPT_U64("pred-seed", "N", &o->pred_seed, 0, UINT64_MAX, "the oracle predictor's seed"),
		FS_OPT_CHOICE("predictor", "oracle|kernel", &o->predictor_kernel, predictors,
			      "the trace-oracle, or the router-ahead kernel (bench/engine/eb_ra.c)"),
		FS_OPT_U32("late-wait-us", "N", &o->late_wait_us, 0, UINT32_MAX,
			   "wait this long for a copy in flight, then CPU"),
		FS_OPT_FLAG("load-profile", 0, &o->load_profile, "send the routing's profile to foresightd"),
		FS_OPT_FLAG("sync", 0, &o->sync, "print READY, wait for a line on stdin"),
		FS_OPT_STR("checksums", "FILE", &o->checksums, "write each window's checksum there"),
		FS_OPT_FN("fault-window", "W", &o->fault_window, opt_window,
			  "tests: corrupt window W's checksum"),
		FS_OPT_FLAG("pred-charged", 0, &o->pred_charged,
			    "compute the oracle's candidates per layer on this thread"),
		FS_OPT_CHOICE("placement", "split|dp", &o->dp, placements,
			      "layers split over the cards, or all on card engine % cards"),
		FS_OPT_FLAG("peer", 0, &o->peer, "read experts held by other cards in place (fs_peer_open)"),
		FS_OPT_U32("ra-dim", "D", &o->ra_dim, 1, UINT32_MAX, "kernel predictor: hidden size"),
		FS_OPT_U32("ra-top", "M", &o->ra_top, 1, FS_RA_MAX_TOP, "kernel predictor: top-M per token"),
		FS_OPT_FN("pred-recall", "H:A,B,C", &o->recall, opt_recall,
			  "oracle: recall % within ranks 10/24/48, H layers ahead (default 1:61,82,90 "
			  "2:52,72,83 3:46,66,78)"),
		FS_OPT_FN("card-down", "C@W", o, opt_card_down, "take card C down before window W"),
		FS_OPT_DBL("bus-gbps", "G", &o->bus_gbps, 0, 1e9,
			   "the peers' copies (strata-adapt, lru): per card, as foresightd's"),
		FS_OPT_U32("adapt-every", "N", &o->adapt_every, 1, UINT32_MAX,
			   "strata-adapt: windows between adaptations"),
		FS_OPT_DBL("adapt-decay", "D", &decay, 0, 1,
			   "strata-adapt: the counts' decay per adaptation"),
		FS_OPT_U32("adapt-swaps", "N", &o->max_swaps, 0, UINT32_MAX,
			   "strata-adapt: swaps per adaptation at most"),
		FS_OPT_U32("lru-inserts", "N", &o->lru_inserts, 0, UINT32_MAX,
			   "lru: uploads per layer per window"),
	};
	const struct fs_opt_cmd cmd = {"fs-engine-bench engine",
				       "usage: fs-engine-bench engine --socket PATH --mode MODE [options]\n\n"
				       "One engine process, normally started by `fs-engine-bench run`\n"
				       "(bench/engine/README.md).\n\n",
				       NULL, opts, FS_OPT_N(opts)};
	fs_opt_parse_or_exit(&cmd, argc, argv);
	o->device = device ? EB_DEV_CUDA : EB_DEV_HOST;
	o->decay = (float)decay;
	if (!o->socket || o->mode < 0) {
		fprintf(stderr, "fs-engine-bench engine: --socket and --mode are required (try --help)\n");
		return -1;
	}
	if (o->engine >= o->engines || !(o->decay > 0 && o->decay < 1)) {
		fprintf(stderr,
			"fs-engine-bench engine: --engine %u below --engines %u, --adapt-decay %g "
			"above 0 and below 1\n",
			o->engine, o->engines, decay);
		return -1;
	}
	return 0;
}

static int setup(struct eng *e, char *err, size_t errlen)
{
	struct eng_opts *o = &e->o;
	char name[32];
	snprintf(name, sizeof(name), "eb-%s-%u", eb_mode_name(o->mode), o->engine);
	struct fs_client_opts co = {.socket_path = o->socket, .name = name, .no_reattach = 1};
	int rc = fs_client_open(&e->c, &co);
	if (rc < 0) {
		snprintf(err, errlen, "attach to %s: %s", o->socket, fs_strerror(rc));
		return -1;
	}
	fs_client_model(e->c, &e->m);
	if (eb_mode_daemon(o->mode)) {
		struct fs_card_info ci;
		if (o->cards > e->m.cards) {
			snprintf(err, errlen, "--cards %u but foresightd serves %u", o->cards, e->m.cards);
			return -1;
		}
		if (fs_client_card(e->c, 0, &ci) == 0 &&
		    (ci.kind == FS_CARD_CUDA) != (o->device == EB_DEV_CUDA)) {
			snprintf(err, errlen, "foresightd runs the %s backend but --device is %s",
				 ci.kind == FS_CARD_CUDA ? "cuda" : "host",
				 o->device == EB_DEV_CUDA ? "cuda" : "host");
			return -1;
		}
		for (uint32_t card = 0; card < o->cards; card++)
			e->reach[card] = 1u << card;
		for (uint32_t card = 0; o->peer && card < o->cards; card++) {
			int reach = fs_peer_open(e->c, card);
			if (reach < 0) {
				snprintf(err, errlen, "fs_peer_open(card %u): %s", card, fs_strerror(reach));
				return -1;
			}
			e->reach[card] = (uint32_t)reach & ((1u << o->cards) - 1u);
			if (o->cards > 1 && (uint32_t)reach == 1u << card)
				fprintf(stderr,
					"fs-engine-bench engine: --peer, but card %u reads no other card\n",
					card);
		}
	}
	uint32_t K = e->m.experts_used ? e->m.experts_used : 8;
	if (eb_route_build(&e->r, &o->ro, e->m.layers, e->m.experts, K, err, errlen) != 0)
		return -1;
	if (eb_dev_open(&e->dev, o->device, o->cards, err, errlen) != 0)
		return -1;
	if (eb_cpu_create(&e->cpu, o->cpu_threads, o->cpu_gbps) != 0) {
		snprintf(err, errlen, "cannot start %u CPU threads", o->cpu_threads);
		return -1;
	}
	uint32_t cap = EB_MAX_T * e->r.t.topk;
	e->uses = calloc(cap, sizeof(*e->uses));
	e->gjobs = calloc(cap, sizeof(*e->gjobs));
	e->cjobs = calloc(cap, sizeof(*e->cjobs));
	e->pex = calloc(e->m.experts, sizeof(*e->pex));
	e->psc = calloc(e->m.experts, sizeof(*e->psc));
	e->porder = calloc(e->m.experts, sizeof(*e->porder));
	e->tmp_ex = calloc(e->m.experts, sizeof(*e->tmp_ex));
	e->tmp_sc = calloc(e->m.experts, sizeof(*e->tmp_sc));
	if (!e->uses || !e->gjobs || !e->cjobs || !e->pex || !e->psc || !e->porder || !e->tmp_ex ||
	    !e->tmp_sc) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (o->mode == EB_PERFECT) { /* a bound: the oracle never wrong, whatever --predictor says */
		o->predictor_kernel = 0;
		for (int h = 0; h < 3; h++)
			for (int b = 0; b < 3; b++)
				o->recall.at[h][b] = 1.0;
	}
	if (eb_mode_predicts(o->mode) && o->predictor_kernel) {
		if (ra_setup(e, err, errlen) != 0)
			return -1;
	} else if (eb_mode_predicts(o->mode)) {
		struct replay_model rm;
		replay_model_defaults(&rm);
		rm.seed = o->pred_seed;
		rm.recall = o->recall;
		if (replay_predictor_init(&e->pred, &e->r.t, &rm) != 0) {
			snprintf(err, errlen, "predictor: out of memory");
			return -1;
		}
		e->have_pred = 1;
		if (!o->pred_charged && ptab_build(e) != 0) {
			snprintf(err, errlen, "predictor table: out of memory");
			return -1;
		}
	}
	if (!eb_mode_daemon(o->mode) && own_pool(e, err, errlen) != 0)
		return -1;
	if (eb_mode_daemon(o->mode) && o->load_profile) {
		if (eb_ctl_profile_load(o->socket, e->m.layers, e->m.experts, e->r.profile, err, errlen) != 0)
			return -1;
		if (wait_settled(o->socket) != 0) {
			snprintf(err, errlen, "the daemon's static tier did not settle");
			return -1;
		}
	}
	if (o->checksums) {
		e->ck = fopen(o->checksums, "w");
		if (!e->ck) {
			snprintf(err, errlen, "%s: %s", o->checksums, strerror(errno));
			return -1;
		}
	}
	return 0;
}

static void teardown(struct eng *e)
{
	if (e->ck)
		fclose(e->ck);
	if (e->have_pred)
		replay_predictor_free(&e->pred);
	eb_ra_free(e->ra);
	free(e->ra_bits);
	eb_cpu_destroy(e->cpu);
	eb_pool_free(e->pool); /* its copier threads use the device */
	eb_dev_close(e->dev);
	if (e->c)
		fs_client_close(e->c);
	eb_route_free(&e->r);
	free(e->card_tab);
	free(e->uses);
	free(e->gjobs);
	free(e->cjobs);
	free(e->pex);
	free(e->psc);
	free(e->porder);
	free(e->tmp_ex);
	free(e->tmp_sc);
	free(e->ptab_off);
	free(e->ptab_ex);
	free(e->ptab_sc);
}

/* What the tier holds at the end, in one epoch: distinct experts mapped
 * on any card, and those mapped on more than one (a tier per card holds
 * hot experts once per card; one tier across cards holds each once). */
static void tier_census(struct eng *e, uint64_t *held, uint64_t *twice)
{
	struct fs_view v = {0};
	if (fs_acquire(e->c, &v) != 0)
		return;
	for (uint32_t l = 0; l < e->m.layers; l++)
		for (uint32_t x = 0; x < e->m.experts; x++) {
			uint32_t n = 0;
			for (uint32_t c = 0; c < e->o.cards; c++)
				n += fs_lookup(e->c, &v, c, l, x, NULL) != 0;
			*held += n > 0;
			*twice += n > 1;
		}
	fs_release(e->c, &v);
}

int eb_engine_main(int argc, char **argv)
{
	struct eng e;
	memset(&e, 0, sizeof(e));
	if (parse(&e.o, argc, argv) != 0)
		return 2;
	char err[512];
	if (setup(&e, err, sizeof(err)) != 0) {
		fprintf(stderr, "fs-engine-bench engine (%s): %s\n", eb_mode_name(e.o.mode), err);
		teardown(&e);
		return 2;
	}
	if (e.o.sync) {
		printf("READY\n");
		fflush(stdout);
		char line[16];
		if (!fgets(line, sizeof(line), stdin)) {
			teardown(&e);
			return 2;
		}
	}
	uint32_t n = e.r.nwin, start = (uint32_t)((uint64_t)e.o.engine * n / e.o.engines);
	uint32_t warm = e.o.warm < n ? e.o.warm : 0;
	uint64_t t0 = 0;
	int rc = 0;
	for (uint32_t k = 0; k < n && rc == 0; k++) {
		if (k == warm)
			t0 = eb_now_ns();
		rc = window(&e, k, (start + k) % n, k >= warm);
	}
	double secs = (double)(eb_now_ns() - t0) / 1e9;
	uint64_t held = 0, twice = 0;
	if (rc == 0 && eb_mode_daemon(e.o.mode))
		tier_census(&e, &held, &twice);
	if (rc != 0) {
		fprintf(stderr, "fs-engine-bench engine (%s): a device or arena call failed\n",
			eb_mode_name(e.o.mode));
		teardown(&e);
		return 1;
	}
	uint64_t pc = 0, pb = 0, ps = 0;
	if (e.pool)
		eb_pool_counts(e.pool, &pc, &pb, &ps);
	double rec[3][3] = {{0}}, rc10[3], rc48[3];
	if (e.ra)
		eb_ra_recall(e.ra, rec);
	for (int h = 0; h < 3; h++)
		rc10[h] = rec[h][0], rc48[h] = rec[h][2];
	printf("RESULT mode=%s engine=%u windows=%llu tokens=%llu secs=%.6f uses=%llu hits=%llu misses=%llu "
	       "peer_hits=%llu layer_windows=%llu late_seen=%llu late_waited=%llu late_cpu=%llu predictions=%llu "
	       "cpu_bytes=%llu dev_bytes=%llu dense_s=%.4f cpu_s=%.4f wait_s=%.4f dropped=%llu ra_launches=%llu "
	       "ra_recall10=%.3f,%.3f,%.3f ra_recall48=%.3f,%.3f,%.3f dev_dropped=%llu down_seen=%u "
	       "down_reads=%llu held=%llu held_twice=%llu misses_first3=%llu pool_copies=%llu pool_bytes=%llu "
	       "pool_swaps=%llu\n",
	       eb_mode_name(e.o.mode), e.o.engine, (unsigned long long)e.windows,
	       (unsigned long long)e.tokens, secs, (unsigned long long)e.uses_n, (unsigned long long)e.hits,
	       (unsigned long long)e.misses, (unsigned long long)e.peer_hits,
	       (unsigned long long)e.layer_windows, (unsigned long long)e.late_seen,
	       (unsigned long long)e.late_waited, (unsigned long long)e.late_cpu,
	       (unsigned long long)e.predictions, (unsigned long long)e.cpu_bytes,
	       (unsigned long long)e.dev_bytes, (double)e.dense_ns / 1e9, (double)e.cpu_ns / 1e9,
	       (double)e.wait_ns / 1e9, (unsigned long long)fs_client_dropped(e.c),
	       (unsigned long long)e.ra_launches, rc10[0], rc10[1], rc10[2], rc48[0], rc48[1], rc48[2],
	       (unsigned long long)fs_dev_ring_dropped(e.c), e.down_seen, (unsigned long long)e.down_reads,
	       (unsigned long long)held, (unsigned long long)twice, (unsigned long long)e.misses_first3,
	       (unsigned long long)pc, (unsigned long long)pb, (unsigned long long)ps);
	fflush(stdout);
	teardown(&e);
	return 0;
}
