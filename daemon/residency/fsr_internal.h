/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_internal.h: the residency core's private data and the calls its
 * files make to one another.  Nothing outside daemon/residency/ includes it.
 *
 * Per card:
 *   slot[]     state, gen, (layer, expert), retire epoch, list links
 *   free list  FREE slots, a stack linked through slot.next
 *   LRU list   RESIDENT slots, doubly linked, oldest at lru_old
 *   retiring   RETIRING slots in eviction order, linked through slot.next;
 *              retire epochs never decrease along it (retire = published+1
 *              at eviction and `published` only grows), so reclaim pops
 *              from its head
 *   slot_of[]  (layer * experts + expert) -> slot or FSR_NONE: the working
 *              table, LOADING and RESIDENT slots only
 *   wants      bounded FIFO ring of experts to copy in, with a `wanted`
 *              byte per (layer, expert) so an expert is queued once
 *              (untiered: every want; tiers: the profile's background fill)
 *
 * With tiers, per card and layer as well:
 *   tl[]       one list per tier of its LOADING and RESIDENT slots, linked
 *              through slot.tprev/tnext, least recently used first
 *   quota[]    the tier's reserved size there
 *   cand[]     up to cand_per_layer copy candidates (recency, static,
 *              predicted), the scheduler's queue (fsr_cands.c)
 * and per core: decayed use scores per (layer, expert) (fsr_tier_static.c),
 * and per client where it runs now (fsr_clock.c).
 *
 * Per layer: its home card (where a record naming no card acts) and the
 * cards that serve it (keep its reserved sizes: fsr_tiers_quotas); per
 * (card, layer) the card's window clock at its last use of the layer
 * (fsr_place.c says when a card stops serving a layer).
 */
#ifndef FSR_INTERNAL_H
#define FSR_INTERNAL_H

#include <stdint.h>

#include "fs_atomic.h"
#include "fs_counters.h"
#include "fsr.h"
#include "fsr_learn.h"

/* Calls between the core's files: kept out of a shared library's exports. */
#define FSR_INTERNAL __attribute__((visibility("hidden")))

#define FSR_MAX_CLIENTS 64u
#define FSR_WANTS_MIN 1024u
/* take_copies looks at most this many LRU entries past the ones it needs
 * for an unprotected victim before it evicts protected ones. */
#define FSR_EVICT_SCAN_EXTRA 64u
/* Decay factors are tabulated this far; older scores take powf(). */
#define FSR_DECAY_STEPS 256u
/* A victim search passes over at most this many protected slots. */
#define FSR_VICTIM_SCAN 32u
/* Ghost list length per (card, layer, tier) (fsr_ghost.c), and its empty entry. */
#define FSR_GHOST 64u
#define FSR_GHOST_EMPTY 0xffffu
/* cross_window: distinct experts remembered per (client, layer) and window. */
#define FSR_XW 64u
/* admit_value (fsr_tier_static.c, fsr_sched.c): while demand copies use
 * more than FSR_TIGHT_UTIL of the planned bus, a static copy needs a
 * decayed use of FSR_ADMIT_MIN and FSR_ADMIT_MARGIN more than the slot it
 * displaces. */
#define FSR_TIGHT_UTIL 0.5f
#define FSR_ADMIT_MIN 2.0f
#define FSR_ADMIT_MARGIN 1.0f
/* Its reuse estimate before any window was seen: the real traces' lag-1
 * reuse is 0.36-0.38 (docs/results/replay.md). */
#define FSR_XW_REUSE0 0.35f
/* Use rates (fsr_use_outcome; pred_adapt, fsr_tiers.c): each (card,
 * tier)'s share of scheduled copies used before they leave, an average
 * over about the last FSR_USE_N outcomes (weight 1/FSR_USE_N each,
 * decaying).  It starts at FSR_USE_RATE0, the same for every tier: with
 * nothing measured, no tier looks worth more than another. */
#define FSR_USE_N 64.0f
#define FSR_USE_RATE0 0.5f
/* pred_adapt (fsr_tiers.c): the predicted tier's size is decided again
 * each FSR_USE_N outcomes of its copies on the card (the average above
 * then mostly renewed).  It shrinks by a slot per layer (back to the
 * static tier) while its copies are used less than FSR_PRED_SHRINK times
 * as often as the static tier's, and grows back while they are used at
 * least FSR_PRED_GROW times as often.  The static tier's average copy is
 * worth more than the slot it would get back (its coldest expert), hence
 * a factor below 1; the gap between the two is hysteresis: the average of
 * ~64 outcomes at p ~0.3 moves by ~0.04 (one sd) on its own. */
#define FSR_PRED_SHRINK 0.5f
#define FSR_PRED_GROW 0.75f

struct fsr_slot {
	uint64_t retire;    /* RETIRING: first epoch that does not map it */
	uint64_t pub;       /* first epoch that maps it (set at its load): it is in tables pub..retire-1 */
	uint32_t evict_for; /* RETIRING: the client whose want evicted it (fsr.evict_for), FSR_NONE */
	uint64_t deadline;  /* LOADING: when its copy is needed (tiers) */
	uint32_t gen;       /* bumped on every load, never FS_GEN_NONE */
	uint32_t layer;     /* valid unless FREE */
	uint32_t expert;
	uint32_t prev;  /* RESIDENT: LRU neighbours (FSR_NONE at the ends) */
	uint32_t next;  /* RESIDENT: LRU; FREE, RETIRING: next in its list */
	uint32_t tprev; /* LOADING, RESIDENT with tiers: its tier list */
	uint32_t tnext;
	uint32_t prot_window; /* the window of prot_client when last loaded/touched */
	uint32_t prot_client; /* FSR_NONE: not protected */
	float score;          /* predicted tier: the prediction's score, else 0 */
	uint8_t state;        /* enum fsr_slot_state */
	uint8_t tier;         /* enum fsr_tier (LOADING, RESIDENT) */
	/* The use rate's measure (fsr_use_outcome): a copy the scheduler handed
	 * out awaits its outcome (its first hit, or its eviction unused), for
	 * the tier it was copied for (`tier` may change: a used prediction
	 * moves to recency). */
	uint8_t outcome_due;
	uint8_t load_tier;
};

/* A tier's slots at one (card, layer), least recently used at `old`. */
struct fsr_tlist {
	uint32_t old, young, n;
};

/* A copy the scheduler may issue (fsr_cands.c).  Its deadline is worked
 * out when the scheduler looks, from where its client runs then. */
struct fsr_cand {
	float score;     /* predicted: the prediction's; else the decayed use score */
	uint32_t window; /* its client's window when wanted */
	uint32_t mark;   /* take_serial of the last take_copies that passed it over */
	uint16_t expert;
	/* Two 4-bit fields in one byte: a layer's array of 16 candidates
	 * stays 4 cache lines (pick() scans it for every copy issued). */
	unsigned tier : 4; /* enum fsr_tier the copy would join */
	unsigned why : 4;  /* enum fsr_unserved: what last held a prediction back */
	uint8_t client;    /* client row, FSR_CAND_NOCLIENT when none */
};
#define FSR_CAND_NOCLIENT 0xffu
_Static_assert(sizeof(struct fsr_cand) == 16, "struct fsr_cand: 16 bytes, 4 to a cache line");
_Static_assert(FSR_NTIERS <= 16 && FSR_UNS_N <= 16, "fsr_cand's tier and why are 4 bits each");

struct fsr_want {
	uint32_t idx;    /* layer * experts + expert */
	uint32_t window; /* the window of the record that wanted it */
	uint32_t client; /* its client row, FSR_NONE when none */
	uint8_t tier;    /* the tier it is for (untiered: FSR_TIER_POOL) */
};

struct fsr_card {
	struct fsr_slot *slot;
	uint32_t nslots;
	uint32_t *slot_of; /* [layers * experts] */
	uint8_t *wanted;   /* [layers * experts] */
	struct fsr_want *wq;
	uint32_t wq_cap, wq_head, wq_len;
	uint32_t free_head, nfree;
	uint32_t lru_old, lru_new, nresident;
	uint32_t ret_head, ret_tail, nretiring;
	uint32_t nloading;
	uint64_t *ctr; /* this card's row of card counters */

	/* tiers */
	struct fsr_tlist *tl; /* [layers][FSR_NTIERS] */
	uint32_t *quota;      /* [layers][FSR_NTIERS]: per-layer tiers' sizes (card-wide ones: 0) */
	uint32_t card_quota[FSR_NTIERS]; /* card-wide tiers' sizes, shared by the card's layers */
	uint32_t quota_total;            /* every reserved size: the card's slots less the spare ones */
	uint32_t *cold;                  /* [layers]: the layer's coldest static slot, cached */
	uint8_t *cold_ok;                /* [layers]: cold[] is up to date */
	uint32_t ntier[FSR_NTIERS];
	struct fsr_cand *cand; /* [layers][cand_per_layer] */
	uint8_t *ncand;        /* [layers] */
	uint32_t cands;        /* sum of ncand */
	uint64_t bus_free;     /* when the copies handed out will have landed (estimate) */
	int retrim;            /* reserved sizes shrank: trim before copying */
	int bus_tight;         /* demand copies use most of the bus (admit_value, fsr_sched.c) */
	uint64_t dem_bytes;    /* demand (not speculative) bytes handed out since dem_t0 */
	uint64_t dem_t0;
	float dem_util; /* their share of the planned bus, smoothed over windows */
	/* per tier, the share of its scheduled copies used before
	 * they left (fsr_use_outcome) */
	float use_rate[FSR_NTIERS];
	/* pred_adapt: predicted slots per layer taken off the FSR_AUTO size
	 * (at most pred_cut_max, which leaves each layer at least 1), and the
	 * predicted copies' outcomes since the size was last decided. */
	uint32_t pred_cut;
	uint32_t pred_cut_max;
	uint32_t pred_outcomes;
	/* tier_adapt (fsr_tiers.c): each layer's recency size, moved by ghost
	 * hits, NULL without tier_adapt; the ghost lists (fsr_ghost.c), kept
	 * with tiers either way (their hits are counted for fsctl stats). */
	uint32_t *rec_size;  /* [layers], FSR_NONE: the configured size */
	uint16_t *ghost;     /* [layers][FSR_NTIERS][FSR_GHOST] */
	uint8_t *ghost_head; /* [layers][FSR_NTIERS] */
};

/* wanted[] bits: an expert is in the want FIFO, or a copy candidate. */
#define FSR_W_QUEUED 1u
#define FSR_W_CAND 2u

struct fsr_client {
	uint64_t holds[FS_MAX_HOLDS]; /* accepted holds, 0 = free */
	uint64_t holds_seen;          /* published epoch when holds were last passed in */
	uint64_t hold_min, hold_max;  /* of its nonzero holds (0, 0: none) */
	uint64_t reach;               /* newest table it may read through them (fsr_client_reach);
					 0: undeclared, every newer one */
	uint32_t newest_window;       /* newest window seen (serial arithmetic) */
	uint8_t live;
	uint8_t window_seen;
	uint8_t on_card; /* `card` is known: its newest usage record named a card */
	uint16_t card;   /* the card of its newest usage record (fsr_place.c) */
	/* Where it runs (fsr_clock.c): the layer of its newest usage, in
	 * window pos_window, entered at layer_t; its window began at win_t. */
	uint8_t pos_valid;
	uint32_t win_tokens; /* tokens of its current window (WIN_BEGIN), 0 unknown */
	uint32_t pos_layer, pos_window;
	uint64_t layer_t, win_t;
	/* cross_window (fsr_tier_predicted.c): the experts it used at each of
	 * the first layers in its current and its last window, and how many
	 * of a window's came back in the next (smoothed). */
	uint16_t xw_cur[FSR_CROSS_MAX][FSR_XW], xw_prev[FSR_CROSS_MAX][FSR_XW];
	uint8_t xw_ncur[FSR_CROSS_MAX], xw_nprev[FSR_CROSS_MAX];
	float xw_reuse[FSR_CROSS_MAX];
};

struct fsr {
	uint32_t cards, layers, experts, max_clients;
	uint32_t max_inflight, want_max_age;
	uint64_t uniform_bytes;
	uint64_t *expert_bytes; /* own copy, or NULL */
	uint64_t published;     /* last published epoch, 0 = none */
	int dirty;
	int reclaim_more;   /* a hold or reach changed, or a publish, since the out-of-order reclaim */
	uint32_t evict_for; /* the client whose want a take serves now (evictions: whose they are) */
	const uint32_t *layer_ready; /* [layers] or NULL (fsr_config.layer_ready) */
	void (*unserved)(void *ctx, uint32_t card, uint32_t layer, uint32_t expert, unsigned why);
	void *unserved_ctx; /* fsr_config.unserved */
	void (*learned)(void *ctx, uint32_t client, uint32_t window, uint32_t layer, uint32_t expert,
			unsigned how);
	void *learned_ctx; /* fsr_config.learned */
	/* placement across cards (fsr_place.c) */
	uint16_t *home;                   /* [layers]: card that last reported a use (one tier: see fsr.h) */
	uint16_t *serves;                 /* [layers]: bit c: card c keeps the layer's reserved sizes */
	uint16_t reach[FS_MAX_CARDS];     /* bit j of reach[i]: card i reads card j (own bit set) */
	int one_tier;                     /* some card reads another */
	uint32_t down;                    /* bit i: card i is down for good (fsr_card.c) */
	uint32_t wins;                    /* WIN_END records seen (any client): the home clock */
	uint32_t *home_seen;              /* [layers]: `wins` at the home card's last use */
	uint32_t card_wins[FS_MAX_CARDS]; /* windows ended by engines on the card: its serve clock */
	uint32_t *serve_seen;             /* [cards * layers]: card_wins[c] at card c's last use of l */
	struct fsr_card card[FS_MAX_CARDS];
	struct fsr_client client[FSR_MAX_CLIENTS];
	uint64_t *c_daemon; /* [FS_N_DAEMON] */
	uint64_t *c_card;   /* [cards][FS_N_CARD] */
	uint64_t *c_layer;  /* [layers][FS_N_LAYER] */
	uint64_t *c_client; /* [max_clients][FS_N_CLIENT] */
	uint64_t *c_priv;   /* backing store for the rows the caller left NULL */

	/* tiers (zero when untiered) */
	int tiers;
	int adapt;
	int tier_adapt;        /* recency vs static sizes per layer from ghost hits */
	int pred_seen;         /* a prediction arrived (FSR_AUTO_PRED: recency takes the share) */
	int admit_value;       /* a copy that displaces a resident must be worth more (fsr_sched.c) */
	uint32_t cross_window; /* layers 0..N-1 of the next window predicted from the last */
	int demand_late;       /* demand copies handed out as late as their deadlines allow */
	int pred_value;        /* predictions chosen by score within the bus (fsr_sched_value.c) */
	int pred_adapt;        /* the FSR_AUTO predicted size follows its copies' use (fsr_tiers.c) */
	int use_measure;       /* the use rates are measured (fsr_use_outcome): pred_adapt reads them */
	uint32_t cfg_slots[FSR_NTIERS]; /* per-layer tiers' <name>_slots as configured, FSR_AUTO/ALL kept */
	uint32_t cfg_spare;             /* as configured, FSR_AUTO kept */
	uint32_t pred_auto_max; /* FSR_AUTO predicted size's cap: copies the bus lands per layer time */
	uint32_t cand_per_layer;
	float pred_min_score;
	float *score; /* [layers * experts]: decayed use count as of score_tick */
	uint32_t *score_tick;
	uint32_t tick;                    /* tokens of the windows ended (any client): the decay clock */
	float decay;                      /* freq_decay */
	float decay_pow[FSR_DECAY_STEPS]; /* freq_decay^n */

	/* the scheduler's clock and bus (fsr_clock.c, fsr_sched.c) */
	double bus_bytes_per_ns; /* planned rate: link x share; 0 = no limit */
	uint64_t layer_ns;       /* per-layer time (EWMA of measurements) */
	uint64_t window_ns;      /* window period (EWMA), 0 until measured */
	int layer_measured;      /* layer_ns is a measurement, not the configured guess */
	uint32_t take_serial;    /* counts fsr_take_copies() calls */
	struct fsr_learn *learn; /* the learned predictor (fsr_learn.c), NULL: off */
};

/* Counters: one writer (the core), readers anywhere, so a relaxed load and
 * store suffice and no locked instruction is needed. */
static inline void fsr_ctr_add(uint64_t *c, uint64_t v)
{
	fs_store_relaxed(c, fs_load_relaxed(c) + v);
}

static inline void fsr_ctr_set(uint64_t *c, uint64_t v)
{
	fs_store_relaxed(c, v);
}

static inline uint64_t *fsr_layer_ctr(struct fsr *r, uint32_t layer)
{
	return r->c_layer + (uint64_t)layer * FS_N_LAYER;
}

/* NULL when the record carries no usable client row. */
static inline uint64_t *fsr_client_ctr(struct fsr *r, uint32_t client)
{
	return client < r->max_clients ? r->c_client + (uint64_t)client * FS_N_CLIENT : NULL;
}

/* A prediction left without a copy (fsr_config.unserved). */
static inline void fsr_unserved(const struct fsr *r, uint32_t card, uint32_t layer, uint32_t expert,
				unsigned why)
{
	if (r->unserved)
		r->unserved(r->unserved_ctx, card, layer, expert, why);
}

static inline uint32_t fsr_idx(const struct fsr *r, uint32_t layer, uint32_t expert)
{
	return layer * r->experts + expert;
}

/* The use rates' measure: a copy of `tier` was used (1) or left unused (0). */
static inline void fsr_use_outcome(struct fsr_card *cd, unsigned tier, int used)
{
	cd->use_rate[tier] += ((float)used - cd->use_rate[tier]) * (1.0f / FSR_USE_N);
	cd->pred_outcomes += tier == FSR_TIER_PREDICTED;
}

/* fsr_slots.c: slot life cycle and the LRU list. */
FSR_INTERNAL void fsr_gauges(struct fsr_card *cd);
FSR_INTERNAL void fsr_lru_touch(struct fsr_card *cd, uint32_t s);
FSR_INTERNAL void fsr_slot_protect(struct fsr *r, struct fsr_slot *sl, uint32_t client);
FSR_INTERNAL int fsr_slot_protected(const struct fsr *r, const struct fsr_slot *sl);
FSR_INTERNAL uint32_t fsr_slot_load(struct fsr *r, uint32_t card, uint32_t idx, uint32_t client,
				    unsigned tier);
FSR_INTERNAL void fsr_slot_evict(struct fsr *r, uint32_t card, uint32_t s);
FSR_INTERNAL const struct fsr_slot *fsr_slot_landed(struct fsr *r, uint32_t card, uint32_t slot,
						    uint32_t gen);
FSR_INTERNAL unsigned fsr_slots_reclaim(struct fsr *r, uint32_t card, uint64_t upto);
/* A RETIRING slot leaves its list (prev: the one before it, FSR_NONE at
 * the head) and becomes FREE. */
FSR_INTERNAL void fsr_retiring_free(struct fsr_card *cd, uint32_t prev, uint32_t s);

static inline uint64_t fsr_bytes(const struct fsr *r, uint32_t idx)
{
	return r->expert_bytes ? r->expert_bytes[idx] : r->uniform_bytes;
}

/* What a tier is and does: one of these per row of proto/fs_tiers.h, in
 * the tier's own file (fsr_tier_<name>.c, named fsr_tier_<name>_ops), and
 * the untiered pool's in fsr_tiers.c.  The scheduler, the slot lists and
 * the checks ask the table (fsr_tier_ops) instead of naming a tier. */
struct fsr_tier_ops {
	const char *name;
	int gauge;         /* its card gauge (FS_CC_tier_<name>), -1 for none */
	uint8_t card_wide; /* one reserved size per card, shared by the layers it serves */
	/* Speculative (predictions): a copy is wanted within its window and is
	 * dropped once it cannot land in time (too_late); it goes after the
	 * demand copies; its slot keeps the prediction's score, and of the
	 * tier's protected slots the lowest score leaves first.  Otherwise a
	 * copy that misses its layer's run aims at the next one. */
	uint8_t speculative;
	/* The scheduler is about to copy a candidate of this tier: 1 go, 0 not
	 * now (it may have been moved to another tier), -1 drop it.  NULL: go. */
	int (*admit)(struct fsr *r, uint32_t card, uint32_t layer, struct fsr_cand *c);
	/* A RESIDENT slot of the tier was used (a hit; touched already).  NULL:
	 * nothing more. */
	void (*on_use)(struct fsr *r, uint32_t card, uint32_t s);
	/* Its membership at a layer changed (a slot joined or left).  NULL: nothing. */
	void (*changed)(struct fsr_card *cd, uint32_t layer);
	/* The slot it gives up first.  NULL: fsr_tier_victim's order (oldest
	 * unprotected at the layer). */
	uint32_t (*victim)(struct fsr *r, uint32_t card, uint32_t layer);
	/* Its victim leaves.  NULL: evicted. */
	void (*leave)(struct fsr *r, uint32_t card, uint32_t s);
	/* A per-layer tier's reserved size at a layer whose share is `share`
	 * slots (from its <name>_slots, r->cfg_slots[tier], and its own auto
	 * rule), or FSR_SIZE_REST: what the other per-layer tiers leave of the
	 * share (fsr_tiers.c sizes the fixed ones first, in row order).  NULL:
	 * none (the card-wide tier takes what the layers' tiers leave). */
	uint32_t (*size)(const struct fsr *r, uint32_t share);
	/* With tier_adapt, its size at a layer moves with its ghost hits (one
	 * tier at most). */
	uint8_t adapts;
	/* The first prediction the core sees (once per core).  NULL: nothing. */
	void (*predictions_seen)(struct fsr *r);
};
#define FSR_SIZE_REST UINT32_MAX
#define FSR_TIER_OPS_DECL(A, NAME, name, ...) extern const struct fsr_tier_ops fsr_tier_##name##_ops;
FS_TIERS(FSR_TIER_OPS_DECL, ~)
#undef FSR_TIER_OPS_DECL
extern const struct fsr_tier_ops *const fsr_tier_table[FSR_NTIERS];
static inline const struct fsr_tier_ops *fsr_tier_ops(unsigned tier)
{
	return fsr_tier_table[tier];
}

static inline struct fsr_tlist *fsr_tl(struct fsr_card *cd, uint32_t layer, unsigned tier)
{
	return &cd->tl[layer * FSR_NTIERS + tier];
}

/* A tier's reserved size at a layer; a card-wide tier's is the card's. */
static inline uint32_t fsr_quota(const struct fsr_card *cd, uint32_t layer, unsigned tier)
{
	return fsr_tier_ops(tier)->card_wide ? cd->card_quota[tier] : cd->quota[layer * FSR_NTIERS + tier];
}

/* Slots the tier holds against that size. */
static inline uint32_t fsr_used(const struct fsr_card *cd, uint32_t layer, unsigned tier)
{
	return fsr_tier_ops(tier)->card_wide ? cd->ntier[tier] : cd->tl[layer * FSR_NTIERS + tier].n;
}

static inline int fsr_tier_has_room(const struct fsr_card *cd, uint32_t layer, unsigned tier)
{
	return fsr_used(cd, layer, tier) < fsr_quota(cd, layer, tier);
}

/* fsr_ghost.c: what each tier evicted lately, per (card, layer). */
FSR_INTERNAL void fsr_ghost_put(struct fsr_card *cd, uint32_t layer, unsigned tier, uint32_t expert);
FSR_INTERNAL int fsr_ghost_take(struct fsr_card *cd, uint32_t layer, unsigned tier, uint32_t expert,
				uint32_t len);

/* fsr_tlist.c: the tier lists and gauges (below the slot life cycle). */
FSR_INTERNAL void fsr_tier_link(struct fsr *r, uint32_t card, uint32_t s);
FSR_INTERNAL void fsr_tier_unlink(struct fsr *r, uint32_t card, uint32_t s);
FSR_INTERNAL void fsr_tier_touch(struct fsr_card *cd, uint32_t s);
FSR_INTERNAL void fsr_tier_retag(struct fsr *r, uint32_t card, uint32_t s, unsigned tier, int young);
FSR_INTERNAL void fsr_tier_gauges(struct fsr *r, uint32_t card);

/* fsr_tiers.c: the tier table, reserved sizes, the order slots leave tiers in. */
FSR_INTERNAL int fsr_tiers_init(struct fsr *r, uint32_t card);
FSR_INTERNAL void fsr_tiers_quotas(struct fsr *r, uint32_t card);
/* Every expert of the layers `card` serves (while up) has a slot of it. */
FSR_INTERNAL int fsr_card_fits(const struct fsr *r, uint32_t card);
FSR_INTERNAL void fsr_tiers_pred_adapt(struct fsr *r, uint32_t card);
FSR_INTERNAL uint32_t fsr_tier_victim(struct fsr *r, uint32_t card, uint32_t layer, unsigned tier);
FSR_INTERNAL int fsr_tier_room(struct fsr *r, uint32_t card, uint32_t layer, unsigned tier, uint32_t need);
FSR_INTERNAL void fsr_tiers_predictions_seen(struct fsr *r);
FSR_INTERNAL void fsr_tiers_ghost_miss(struct fsr *r, uint32_t card, uint32_t layer, uint32_t expert);

/* fsr_tier_static.c: decayed use scores, the profile, promotions. */
FSR_INTERNAL float fsr_score(const struct fsr *r, uint32_t idx);
FSR_INTERNAL void fsr_score_bump(struct fsr *r, uint32_t idx);
FSR_INTERNAL uint32_t fsr_static_coldest(struct fsr *r, uint32_t card, float *score);
FSR_INTERNAL void fsr_static_changed(struct fsr_card *cd, uint32_t layer);
FSR_INTERNAL void fsr_static_displace(struct fsr *r, uint32_t card, uint32_t z);
FSR_INTERNAL void fsr_static_used(struct fsr *r, uint32_t card, uint32_t s);
FSR_INTERNAL int fsr_static_wants(struct fsr *r, uint32_t card, uint32_t idx);
FSR_INTERNAL int fsr_static_beats(const struct fsr *r, uint32_t card, float sc, float cold);

/* fsr_tier_recency.c, fsr_tier_predicted.c: what a record means to a tier. */
FSR_INTERNAL void fsr_recency_missed(struct fsr *r, uint32_t card, uint32_t client, const struct fs_rec *rec);
FSR_INTERNAL void fsr_recency_hit(struct fsr *r, uint32_t card, uint32_t s);
FSR_INTERNAL void fsr_predicted_hit(struct fsr *r, uint32_t card, uint32_t s);
FSR_INTERNAL void fsr_predicted_recycle(struct fsr *r, uint32_t client, uint32_t window);
FSR_INTERNAL void fsr_predicted_want(struct fsr *r, uint32_t card, uint32_t client, const struct fs_rec *rec);
/* 0 when the predicted tier is configured off (predicted_slots 0): nowhere
 * to copy a prediction to. */
FSR_INTERNAL int fsr_predicted_configured(const struct fsr *r);
FSR_INTERNAL void fsr_predicted_seen(struct fsr *r, uint32_t client, uint32_t layer, uint32_t expert);
FSR_INTERNAL void fsr_predicted_cross(struct fsr *r, uint32_t client, uint32_t window);

/* fsr_learn.c: the learned predictor. */
FSR_INTERNAL int fsr_learn_create(struct fsr *r, const struct fsr_config *cfg);
FSR_INTERNAL void fsr_learn_destroy(struct fsr *r);
FSR_INTERNAL void fsr_learn_client_reset(struct fsr *r, uint32_t client);
FSR_INTERNAL void fsr_learn_record(struct fsr *r, uint32_t client, const struct fs_rec *rec);

/* fsr_cands.c: per (card, layer) copy candidates. */
FSR_INTERNAL void fsr_cand_put(struct fsr *r, uint32_t card, uint32_t layer, const struct fsr_cand *c);
FSR_INTERNAL void fsr_cand_del(struct fsr *r, uint32_t card, uint32_t layer, uint32_t i);
static inline struct fsr_cand *fsr_cands(const struct fsr *r, const struct fsr_card *cd, uint32_t layer)
{
	return cd->cand + (size_t)layer * r->cand_per_layer;
}

/* fsr_clock.c: where clients run, how long a layer takes, deadlines. */
FSR_INTERNAL void fsr_clock_record(struct fsr *r, uint32_t client, const struct fs_rec *rec, uint64_t now);
FSR_INTERNAL uint64_t fsr_clock_deadline(const struct fsr *r, uint32_t client, uint32_t layer, uint64_t now);
FSR_INTERNAL int fsr_clock_passed(const struct fsr *r, uint32_t client, uint32_t layer, uint32_t window);
FSR_INTERNAL uint64_t fsr_clock_period(const struct fsr *r);
FSR_INTERNAL int fsr_clock_on_pace(const struct fsr *r, uint32_t client, uint64_t now);

/* fsr_sched.c: the copy scheduler (tiers). */
FSR_INTERNAL unsigned fsr_sched_take(struct fsr *r, uint32_t card, struct fsr_copy *out, unsigned max,
				     uint64_t now);
FSR_INTERNAL void fsr_sched_value(struct fsr *r, uint32_t card, uint64_t now);
FSR_INTERNAL void fsr_sched_landed(struct fsr *r, uint32_t card, const struct fsr_slot *sl, uint64_t now);

/* fsr_policy.c: the untiered policy's take_copies. */
FSR_INTERNAL unsigned fsr_pool_take(struct fsr *r, uint32_t card, struct fsr_copy *out, unsigned max);

/* fsr_place.c: one tier across cards.  A card that is down is read by
 * nobody (fsr_card.c): no card counts it as a holder or a place to copy to.
 * Its own row stays, so that a record naming it still finds the live cards
 * it read. */
static inline int fsr_reaches(const struct fsr *r, uint32_t from, uint32_t to)
{
	return ((r->reach[from] & ~r->down) >> to) & 1u;
}
static inline int fsr_is_up(const struct fsr *r, uint32_t card)
{
	return !((r->down >> card) & 1u);
}
FSR_INTERNAL void fsr_place_init(struct fsr *r, const uint16_t reach[FS_MAX_CARDS]);
FSR_INTERNAL uint32_t fsr_holder(const struct fsr *r, uint32_t from, uint32_t idx);
FSR_INTERNAL int fsr_held_elsewhere(const struct fsr *r, uint32_t card, uint32_t idx);
FSR_INTERNAL uint32_t fsr_place_card(const struct fsr *r, uint32_t from, uint32_t layer, uint32_t idx);
FSR_INTERNAL void fsr_layer_used(struct fsr *r, uint32_t layer, uint32_t card);
FSR_INTERNAL void fsr_card_window_ended(struct fsr *r, uint32_t card);
FSR_INTERNAL void fsr_serves_changed(struct fsr *r, uint32_t cards);
static inline int fsr_serves(const struct fsr *r, uint32_t card, uint32_t layer)
{
	return (r->serves[layer] >> card) & 1u;
}
FSR_INTERNAL uint32_t fsr_live_card(const struct fsr *r, uint32_t from, uint32_t layer);

/* fsr_wants.c: the per-card want queue. */
FSR_INTERNAL void fsr_want_push(struct fsr *r, uint32_t card, const struct fsr_want *w);
FSR_INTERNAL int fsr_want_pop(struct fsr_card *cd, struct fsr_want *w);
FSR_INTERNAL void fsr_want_unpop(struct fsr_card *cd, const struct fsr_want *w);
FSR_INTERNAL int fsr_want_stale(const struct fsr *r, const struct fsr_want *w);

#endif /* FSR_INTERNAL_H */
