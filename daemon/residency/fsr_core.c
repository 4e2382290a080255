/* SPDX-License-Identifier: Apache-2.0 */
/* fsr_core.c: configuration, create/destroy, introspection. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsr_internal.h"

/*
 * Defaults of the fields where 0 means nothing useful, and why:
 *  - cand_per_layer 16: a layer gets ~1-3 misses and a few predictions
 *    per window; 16 holds two windows of them.
 *  - freq_decay 0.95 per token (the decay clock counts the tokens of the
 *    windows that ended, WIN_BEGIN's value; 1 when unknown): a use weighs
 *    half after ~14 tokens, so the static tier follows a topic change
 *    within a few dozen tokens yet keeps experts used every few windows.
 *    Per token, because a window's length varies with speculative
 *    decoding; 0.95 is 0.9 per window of the discussion's ~2 tokens.  The
 *    replay's sensitivity rows show 0.9 and 0.98 (docs/results/replay.md).
 *  - bus_share_pct 80: the scheduler plans with 4/5 of the link and leaves
 *    the rest to the engine's own demand copies; the discussion measured
 *    that an engine pushing more of its misses over PCIe got slower.
 *  - layer_ns 270833: the discussion's zero-miss window, 13.0 ms over 48
 *    layers; replaced by measurement once usage records arrive.
 */
void fsr_config_defaults(struct fsr_config *cfg)
{
	if (cfg->max_inflight == 0)
		cfg->max_inflight = 32;
	if (cfg->want_max_age == 0)
		cfg->want_max_age = 2;
	if (cfg->cand_per_layer == 0)
		cfg->cand_per_layer = 16;
	if (cfg->freq_decay == 0.0f)
		cfg->freq_decay = 0.95f;
	if (cfg->bus_share_pct == 0)
		cfg->bus_share_pct = 80;
	if (cfg->layer_ns == 0)
		cfg->layer_ns = 270833;
	if (cfg->learn_decay == 0.0f)
		cfg->learn_decay = 0.9995f;
	if (cfg->learn_post == 0)
		cfg->learn_post = 8;
}

/*
 * The tiers' sizes default to FSR_ALL (recency) and FSR_AUTO (the others),
 * worked out per layer from its share of the card's slots (fsr_tiers.c):
 *  - recency: FSR_AUTO, a 16th of the share (rounded down) beside a
 *    card-wide static tier (the discussion reserved 16 of a 266-slot
 *    share).  Session 5 made it FSR_AUTO_PRED (the layer's whole share as
 *    one LRU once an engine predicts) from a replay whose engine posted
 *    every candidate of its predictor, resident ones included: a
 *    prediction of a resident expert refreshes it in the LRU, which made
 *    that LRU keep popular experts by accident.  Engines post only the
 *    best few candidates they do not hold (fs-engine-bench: 8 per target
 *    layer and horizon; the router-ahead kernel skips what the epoch
 *    holds), and then the whole-share LRU thrashes on the routing's long
 *    tail: on the GPU (1 x H200, 26 %, one repetition) `both` fell below
 *    the static peer (-3.5 %) while recency and predict alone gained
 *    5-6 %.  fs-replay --pred-max 8 (the engine's posting) reproduces that
 *    ranking, and there the split beats the whole share everywhere
 *    (calibrated model 26 %: 2.421 against 2.957 distinct misses per
 *    layer-window, static 2.918; 52 %: 0.432 against 0.571; qwen 25 %:
 *    0.904 against 0.970; docs/results/replay.md, "GPU and replay").
 *    FSR_AUTO_PRED and FSR_ALL stay options.
 *  - predicted: a 16th of the share (rounded down), at most what the
 *    planned bus lands per layer time (1..4; pred_auto_max).  A x8 link
 *    moves one or two experts per layer time and predictions look 1-3
 *    layers ahead, so a layer seldom gets more than that many predicted
 *    copies per window.
 *  - a share under 16 slots (a few experts per layer: the real traces at
 *    10 % slots, 12-13 of 128 per layer) gets neither per-layer tier; the
 *    card-wide static tier keeps those slots and, with adapt, copies in a
 *    miss hotter than its coldest.  Rounding the 16th up to one slot made
 *    tiers of one slot per layer: each copy into one (a miss, a
 *    prediction, a used prediction moving to recency) replaces the last
 *    within about a window, while demand alone asks for 2-3 times what the
 *    bus lands (qwen 10 %: 2.8 distinct misses per layer-window against
 *    ~1 copy per layer time).  fs-replay, distinct misses, 10 % slots:
 *    qwen 17349 -> 16635 (lru 17151), gemma 10430 -> 10273 (lru 10799);
 *    each one-slot tier alone also lost there (qwen: recency 16869,
 *    predicted 17092 against neither 16635).  Larger shares are as
 *    before (docs/results/replay.md, "Tiers at a few experts per layer").
 *  - spare: one slot per layer of the card, at most 1 % of its slots.  A
 *    slot evicted mid-window is free again only once the window's epoch
 *    is released (the grace period); spare slots let copies wanted
 *    mid-window start at once.  Each costs a slot of capacity, which on a
 *    small card is worth more than an early start (the replay: 48 spare
 *    slots of 960 cost gemma 2 % more misses at 25 %).
 *  - adapt: on.  A profile from a short prefill or warm-up is noisy; the
 *    static tier then follows decayed use (promotions without copies,
 *    copies for experts that became hotter than its coldest member).
 *  - admit_value: on.  While demand copies use more than half of the
 *    planned bus, a copy into the static tier needs a decayed use of 2 and
 *    1 more than the slot it displaces, and a copy into a full recency
 *    tier must score above the slot it displaces (fsr_tier_static.c,
 *    fsr_tier_recency.c).  Issue 18's lever table (docs/results/replay.md):
 *    -10 % misses on the calibrated model at 26 % slots, -4 / -3 % on the
 *    real traces at 25 %, the same at 50 %; with a bus that has room it
 *    changes nothing.
 *  - tier_adapt: off.  Sizing recency against static per layer from ghost
 *    hits (fsr_tiers.c) measured no better than the fixed shares alone
 *    and worse with recency alone; it stays an option.
 *  - demand_late: off.  A copy for a missed expert, its slot evicted
 *    ahead, waits until its deadline (the layer's next run) nears while
 *    its engine keeps its pace, so predictions that come meanwhile find
 *    the bus free (fsr_sched.c).  Alone, 5 draws: -1.6 .. -3.1 % misses
 *    on the calibrated model at 26 % and on the real traces at 25 and
 *    50 %, +0.4 % (+0.0..+1.0) on the model at 52 %
 *    (docs/results/replay.md, "Session 8: demand_late").  On the GPU, side
 *    by side with the defaults (docs/results/engine.md, "Issue 18 at
 *    session 9"): no tok/s effect at 26 %, 0.3-4.5 % more misses at 52 %
 *    in each of 5 pairs.
 *  - cross_window: off.  Predicting a window's first layers from the last
 *    window's routing there changed nothing measurable: the recency tier
 *    already copies the last window's misses for the next window.
 *  - learn: off, here and in foresightd (its `learn` option, 0).  For an
 *    engine that posts only usage the learned predictor (fsr_learn.c)
 *    removes 10-11 % of the default tiers' misses on the real traces at
 *    25 % slots in fs-replay, 3-7 % at 50 %, 1-3 % on the calibrated
 *    model; but the one real engine that posts only usage, llama.cpp,
 *    decodes 4 % slower with it at 26 % (1 x H100, qwen: its copies, used
 *    one time in six, take the bus from the misses; at 52 % even), and on
 *    the host backend at llama.cpp's pace it costs 5 % misses at 26 % on
 *    both traces (docs/results/llama.md, "What limits it";
 *    docs/results/replay.md, "Issue 32").  learn_decay 0.9995 per token
 *    (half-life ~1400 tokens: the model's routing statistics, not a
 *    session's), learn_post 8 (the engine bench's posting), learn_min_p
 *    0 here, 0.01 in foresightd.
 *  - pred_value: off.  With the learner's calibrated scores it moved the
 *    real traces by under 1 %.
 *  - pred_adapt: off.  Sizing the auto predicted tier by its copies' use
 *    rate against the static tier's took back half the learner's loss on
 *    cold decode at llama.cpp's pace (host_policy.sh, 26 %), but left it
 *    worse than the tiers alone there, and cost gemma's decode rows 1.9 %
 *    in fs-replay where its 2 predicted slots a layer beat 1: a copy's use
 *    rate does not say what a slot is worth (docs/results/replay.md, "Why
 *    it loses on cold decode").
 *  - (pred_gate, removed: holding a prediction behind pending demand
 *    copies unless its score beat their tier's measured use rate moved
 *    fs-replay by under 1 %; docs/results/replay.md, "Why it loses on
 *    cold decode".)
 */
void fsr_config_tiers(struct fsr_config *cfg)
{
	cfg->tiers = 1;
	cfg->admit_value = 1;
#define AUTO_CARD(name)
#define AUTO_LAYER(name) cfg->name##_slots = FSR_AUTO;
#define AUTO_ROW(A, NAME, name, what, SCOPE, ...) AUTO_##SCOPE(name)
	FS_TIERS(AUTO_ROW, ~) /* every per-layer tier's size: its own auto rule */
#undef AUTO_ROW
#undef AUTO_LAYER
#undef AUTO_CARD
	cfg->spare_slots = FSR_AUTO;
	cfg->adapt = 1;
	fsr_config_defaults(cfg);
}

static int tiers_valid(const struct fsr_config *cfg)
{
	if (!cfg->tiers)
		return 1;
	if (cfg->cand_per_layer < 1 || cfg->cand_per_layer > 255)
		return 0;
	if (!(cfg->freq_decay > 0.0f && cfg->freq_decay <= 1.0f))
		return 0;
	if (cfg->bus_share_pct < 1 || cfg->bus_share_pct > 100)
		return 0;
	if (!(cfg->bus_gbps >= 0.0 && cfg->bus_gbps < 1e6)) /* also NaN */
		return 0;
	if (!(cfg->pred_min_score >= 0.0f && isfinite(cfg->pred_min_score)))
		return 0;
	if (cfg->cross_window > FSR_CROSS_MAX || cfg->tier_adapt > 1 || cfg->admit_value > 1 ||
	    cfg->demand_late > 1 || cfg->pred_value > 1 || cfg->pred_adapt > 1 || cfg->learn > FSR_LEARN_ON)
		return 0;
	if (!(cfg->learn_decay > 0.0f && cfg->learn_decay <= 1.0f) ||
	    !(cfg->learn_min_p >= 0.0f && cfg->learn_min_p <= 1.0f) || cfg->learn_post > FSR_LEARN_POST_MAX)
		return 0;
	/* Candidates name their client in a byte. */
	return cfg->max_clients < FSR_CAND_NOCLIENT && cfg->layer_ns > 0;
}

static int config_valid(const struct fsr_config *cfg)
{
	if (cfg == NULL)
		return 0;
	if (cfg->cards < 1 || cfg->cards > FS_MAX_CARDS)
		return 0;
	if (cfg->layers < 1 || cfg->layers > FS_MAX_LAYERS)
		return 0;
	if (cfg->experts < 1 || cfg->experts > FS_MAX_EXPERTS)
		return 0;
	if (cfg->max_clients < 1 || cfg->max_clients > FSR_MAX_CLIENTS)
		return 0;
	/* A slot index must stay below FSR_NONE; a want queue of 2 * slots
	 * must fit a uint32_t. */
	for (uint32_t c = 0; c < cfg->cards; c++)
		if (cfg->slots[c] < 1 || cfg->slots[c] > (UINT32_MAX >> 2))
			return 0;
	if (cfg->max_inflight < 1)
		return 0;
	/* Window ages are compared as signed 32-bit differences. */
	if (cfg->want_max_age > (uint32_t)INT32_MAX)
		return 0;
	return tiers_valid(cfg);
}

static int card_init(struct fsr *r, uint32_t c, uint32_t nslots)
{
	struct fsr_card *cd = &r->card[c];
	size_t n = (size_t)r->layers * r->experts;

	cd->nslots = nslots;
	cd->slot = calloc(nslots, sizeof(*cd->slot));
	cd->slot_of = malloc(n * sizeof(*cd->slot_of));
	cd->wanted = calloc(n, 1);
	cd->wq_cap = nslots * 2 > FSR_WANTS_MIN ? nslots * 2 : FSR_WANTS_MIN;
	cd->wq = calloc(cd->wq_cap, sizeof(*cd->wq));
	if (!cd->slot || !cd->slot_of || !cd->wanted || !cd->wq)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		cd->slot_of[i] = FSR_NONE;
	for (uint32_t s = 0; s < nslots; s++) {
		struct fsr_slot *sl = &cd->slot[s];
		sl->state = FSR_FREE;
		sl->gen = FS_GEN_NONE;
		sl->prev = FSR_NONE;
		sl->next = s + 1 < nslots ? s + 1 : FSR_NONE;
		sl->prot_client = FSR_NONE;
	}
	cd->free_head = 0;
	cd->nfree = nslots;
	cd->lru_old = cd->lru_new = FSR_NONE;
	cd->ret_head = cd->ret_tail = FSR_NONE;
	cd->ctr = r->c_card + (uint64_t)c * FS_N_CARD;
	fsr_ctr_set(&cd->ctr[FS_CC_up], 1); /* until fsr_card_down() */
	fsr_gauges(cd);
	return r->tiers ? fsr_tiers_init(r, c) : 0;
}

/* The FSR_AUTO predicted size's cap: the copies the planned bus lands in
 * one layer time, rounded up (the configured guess; at most 4), 4 with no
 * bus limit.  A layer's predicted copies for a window are wanted within
 * the few layer times before it runs, and every layer's predictions share
 * the one link, so slots beyond what it lands per layer time hold
 * nothing useful; they are taken from the static tier all the same.  The
 * discussion's box (13.5 GB/s, 80 % planned, 1.8 MiB experts, 271 us per
 * layer): 1.65, so 2 where the 16th of the share gave 4 (fs-replay
 * --pred-max 8, the calibrated model at 26 %: 2.419 -> 2.372 distinct
 * misses per layer-window; docs/results/replay.md, "Levers"). */
static uint32_t pred_auto_max(const struct fsr *r, const struct fsr_config *cfg)
{
	size_t n = (size_t)r->layers * r->experts;
	double bytes = (double)r->uniform_bytes;
	if (r->expert_bytes) {
		double sum = 0.0;
		for (size_t i = 0; i < n; i++)
			sum += (double)r->expert_bytes[i];
		bytes = n ? sum / (double)n : 0.0;
	}
	double per_layer = cfg->bus_gbps * cfg->bus_share_pct / 100.0 * (double)cfg->layer_ns;
	if (!(cfg->bus_gbps > 0.0) || !(bytes > 0.0))
		return 4;
	double k = ceil(per_layer / bytes);
	return k < 1.0 ? 1u : k > 4.0 ? 4u : (uint32_t)k;
}

static int tiers_create(struct fsr *r, const struct fsr_config *cfg)
{
	size_t n = (size_t)r->layers * r->experts;
	r->tiers = 1;
	r->adapt = cfg->adapt != 0;
#define CFG_CARD(NAME, name)
#define CFG_LAYER(NAME, name) r->cfg_slots[FSR_TIER_##NAME] = cfg->name##_slots;
#define CFG_ROW(A, NAME, name, what, SCOPE, ...) CFG_##SCOPE(NAME, name)
	FS_TIERS(CFG_ROW, ~) /* as configured, FSR_AUTO etc. kept: each tier's size op reads its own */
#undef CFG_ROW
#undef CFG_LAYER
#undef CFG_CARD
	r->cfg_spare = cfg->spare_slots;
	r->cand_per_layer = cfg->cand_per_layer;
	r->pred_min_score = cfg->pred_min_score;
	/* Sizing by ghost hits needs both tiers it trades between: a static
	 * tier that adapts and a recency tier of some size (not the baselines'
	 * fixed ones, not the per-layer LRU). */
	r->tier_adapt = cfg->tier_adapt && cfg->adapt && cfg->recency_slots != 0 &&
			cfg->recency_slots != FSR_ALL && cfg->recency_slots != FSR_AUTO_PRED;
	r->admit_value = cfg->admit_value && cfg->adapt; /* not the fixed baselines */
	r->cross_window = cfg->predicted_slots == 0 ? 0 : cfg->cross_window;
	r->demand_late = cfg->demand_late != 0; /* the baselines copy without a bus model */
	r->pred_value = cfg->pred_value != 0;
	/* Only the auto size moves: an explicit predicted_slots is the
	 * operator's and stays. */
	r->pred_adapt = cfg->pred_adapt != 0 && cfg->adapt && cfg->predicted_slots == FSR_AUTO;
	/* Nothing else reads the use rates: without pred_adapt the hit and
	 * eviction paths leave them alone. */
	r->use_measure = r->pred_adapt;
	for (uint32_t c = 0; c < FSR_MAX_CLIENTS; c++)
		for (uint32_t l = 0; l < FSR_CROSS_MAX; l++)
			r->client[c].xw_reuse[l] = FSR_XW_REUSE0;
	r->bus_bytes_per_ns = cfg->bus_gbps * cfg->bus_share_pct / 100.0;
	r->layer_ns = cfg->layer_ns;
	r->pred_auto_max = pred_auto_max(r, cfg);
	r->decay = cfg->freq_decay;
	for (uint32_t i = 0; i < FSR_DECAY_STEPS; i++)
		r->decay_pow[i] = powf(cfg->freq_decay, (float)i);
	r->score = calloc(n, sizeof(*r->score));
	r->score_tick = calloc(n, sizeof(*r->score_tick));
	return r->score && r->score_tick ? 0 : -ENOMEM;
}

struct fsr *fsr_create(const struct fsr_config *cfg)
{
	if (!config_valid(cfg)) {
		errno = EINVAL;
		return NULL;
	}
	struct fsr *r = calloc(1, sizeof(*r));
	if (r)
		r->evict_for = FSR_NONE;
	if (r == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	r->cards = cfg->cards;
	r->layers = cfg->layers;
	r->experts = cfg->experts;
	r->max_clients = cfg->max_clients;
	r->max_inflight = cfg->max_inflight;
	r->want_max_age = cfg->want_max_age;
	r->uniform_bytes = cfg->uniform_bytes;

	size_t n = (size_t)r->layers * r->experts;
	size_t priv = 0;
	if (cfg->counters.daemon == NULL)
		priv += FS_N_DAEMON;
	if (cfg->counters.card == NULL)
		priv += (size_t)r->cards * FS_N_CARD;
	if (cfg->counters.layer == NULL)
		priv += (size_t)r->layers * FS_N_LAYER;
	if (cfg->counters.client == NULL)
		priv += (size_t)r->max_clients * FS_N_CLIENT;
	r->c_priv = calloc(priv ? priv : 1, sizeof(uint64_t));
	r->home = malloc(r->layers * sizeof(*r->home));
	r->home_seen = calloc(r->layers, sizeof(*r->home_seen));
	r->serves = malloc(r->layers * sizeof(*r->serves));
	r->serve_seen = calloc((size_t)r->cards * r->layers, sizeof(*r->serve_seen));
	if (cfg->expert_bytes != NULL)
		r->expert_bytes = malloc(n * sizeof(*r->expert_bytes));
	if (r->c_priv == NULL || r->home == NULL || r->home_seen == NULL || r->serves == NULL ||
	    r->serve_seen == NULL || (cfg->expert_bytes != NULL && r->expert_bytes == NULL))
		goto nomem;
	if (cfg->expert_bytes != NULL)
		memcpy(r->expert_bytes, cfg->expert_bytes, n * sizeof(*r->expert_bytes));

	r->layer_ready = cfg->layer_ready;
	r->unserved = cfg->unserved;
	r->unserved_ctx = cfg->unserved_ctx;
	r->learned = cfg->learned;
	r->learned_ctx = cfg->learned_ctx;
	uint64_t *p = r->c_priv;
	if (cfg->counters.daemon) {
		r->c_daemon = cfg->counters.daemon;
	} else {
		r->c_daemon = p;
		p += FS_N_DAEMON;
	}
	if (cfg->counters.card) {
		r->c_card = cfg->counters.card;
	} else {
		r->c_card = p;
		p += (size_t)r->cards * FS_N_CARD;
	}
	if (cfg->counters.layer) {
		r->c_layer = cfg->counters.layer;
	} else {
		r->c_layer = p;
		p += (size_t)r->layers * FS_N_LAYER;
	}
	r->c_client = cfg->counters.client ? cfg->counters.client : p;

	for (uint32_t l = 0; l < r->layers; l++) {
		r->home[l] = (uint16_t)((uint64_t)l * r->cards / r->layers);
		r->serves[l] = (uint16_t)(1u << r->home[l]);
	}
	fsr_place_init(r, cfg->reach);
	if (cfg->tiers && (tiers_create(r, cfg) != 0 || fsr_learn_create(r, cfg) != 0))
		goto nomem;
	for (uint32_t c = 0; c < r->cards; c++)
		if (card_init(r, c, cfg->slots[c]) != 0)
			goto nomem;
	return r;
nomem:
	fsr_destroy(r);
	errno = ENOMEM;
	return NULL;
}

void fsr_destroy(struct fsr *r)
{
	if (r == NULL)
		return;
	for (uint32_t c = 0; c < FS_MAX_CARDS; c++) {
		free(r->card[c].slot);
		free(r->card[c].slot_of);
		free(r->card[c].wanted);
		free(r->card[c].wq);
		free(r->card[c].tl);
		free(r->card[c].quota);
		free(r->card[c].cand);
		free(r->card[c].ncand);
		free(r->card[c].cold);
		free(r->card[c].cold_ok);
		free(r->card[c].rec_size);
		free(r->card[c].ghost);
		free(r->card[c].ghost_head);
	}
	fsr_learn_destroy(r);
	free(r->score);
	free(r->score_tick);
	free(r->home);
	free(r->home_seen);
	free(r->serves);
	free(r->serve_seen);
	free(r->expert_bytes);
	free(r->c_priv);
	free(r);
}

uint32_t fsr_card_slots(const struct fsr *r, uint32_t card)
{
	return card < r->cards ? r->card[card].nslots : 0;
}

int fsr_slot_info(const struct fsr *r, uint32_t card, uint32_t slot, struct fsr_slot_info *out)
{
	if (card >= r->cards || slot >= r->card[card].nslots || out == NULL)
		return -EINVAL;
	const struct fsr_slot *sl = &r->card[card].slot[slot];
	/* Field by field over zeros: a compound literal may leave the padding
	 * as it was, and callers compare these structs byte for byte. */
	memset(out, 0, sizeof(*out));
	out->state = (enum fsr_slot_state)sl->state;
	out->gen = sl->gen;
	out->layer = sl->state == FSR_FREE ? 0 : sl->layer;
	out->expert = sl->state == FSR_FREE ? 0 : sl->expert;
	out->retire = sl->state == FSR_RETIRING ? sl->retire : 0;
	out->tier = (enum fsr_tier)sl->tier;
	return 0;
}

int fsr_tier_info(const struct fsr *r, uint32_t card, uint32_t layer, enum fsr_tier t,
		  struct fsr_tier_info *out)
{
	if (card >= r->cards || layer >= r->layers || (unsigned)t >= FSR_NTIERS || out == NULL)
		return -EINVAL;
	if (!r->tiers) {
		*out = (struct fsr_tier_info){0};
		return 0;
	}
	const struct fsr_card *cd = &r->card[card];
	*out = (struct fsr_tier_info){
		.quota = t == FSR_TIER_POOL ? 0 : fsr_quota(cd, layer, t),
		.used = t == FSR_TIER_POOL ? 0 : fsr_used(cd, layer, t),
	};
	return 0;
}

uint64_t fsr_layer_ns(const struct fsr *r)
{
	return r->layer_ns;
}

uint32_t fsr_lookup(const struct fsr *r, uint32_t card, uint32_t layer, uint32_t expert)
{
	if (card >= r->cards || layer >= r->layers || expert >= r->experts)
		return FSR_NONE;
	return r->card[card].slot_of[fsr_idx(r, layer, expert)];
}
