/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr.h: the residency core.  Decides which (layer, expert) lives in which
 * slot of which card, publishes that as numbered epochs, and keeps every
 * slot that a held epoch may map untouched (the grace period).
 *
 * Plain C: no I/O, no CUDA, no threads, no clock of its own.  The daemon
 * drives it from its hot thread; fs-replay drives the very same code on a
 * virtual clock.  Not thread-safe: one caller at a time.
 *
 * Slot life cycle (per card):
 *
 *   FREE --take_copies--> LOADING --copy_done--> RESIDENT --evict--> RETIRING
 *    ^                                                                   |
 *    +------ reclaim: retire epoch published and every hold >= it -------+
 *
 * A LOADING or RESIDENT slot is in the table (FS_ENTRY(slot, gen)); a
 * RETIRING slot left the table in epoch `retire` (the first published epoch
 * that does not map it) and is rewritten only after reclaim.
 *
 * Policy: with fsr_config.tiers = 0, one LRU pool per card fed by a FIFO of
 * wants (the first, simple policy, fsr_policy.c).  With tiers, each card's
 * slots are split into reserved sizes for a static tier (hot experts by
 * decayed use, seeded by a profile), a recency tier (experts that just
 * missed) and a predicted tier (router-ahead candidates), and a copy
 * scheduler hands out copies by deadline and score within what the bus
 * can land in time (fsr_tiers.c, fsr_tier_*.c, fsr_sched.c).  Times come
 * from the caller: the daemon's clock or fs-replay's virtual one.
 *
 * Inputs are trusted to be in bounds: the daemon validates every record
 * (layer < layers, expert < experts, card < cards or FS_CARD_NONE) before it
 * calls fsr_record().  Hold values are NOT trusted (they come from client
 * memory): impossible ones are ignored and counted.
 */
#ifndef FSR_H
#define FSR_H

#include <stdint.h>

#include "fs_proto.h"
#include "fs_regions.h"
#include "fs_tiers.h"

#define FSR_NONE UINT32_MAX

struct fsr;

/* Where the core writes its telemetry (fs_counters.h rows).  Any pointer may
 * be NULL: the core then keeps the counts privately. */
struct fsr_counters {
	uint64_t *daemon; /* [FS_N_DAEMON] */
	uint64_t *card;   /* [cards][FS_N_CARD] */
	uint64_t *layer;  /* [layers][FS_N_LAYER] */
	uint64_t *client; /* [max_clients][FS_N_CLIENT] */
};

/* Tier sizes: a number of slots per layer, or one of these. */
#define FSR_AUTO UINT32_MAX       /* the documented default for the layer's share */
#define FSR_ALL (UINT32_MAX - 1u) /* recency only: the layer's whole share (per-layer LRU) */
/* recency only, the default: FSR_ALL once any engine posts a prediction,
 * FSR_AUTO until then (fsr_core.c says why). */
#define FSR_AUTO_PRED (UINT32_MAX - 2u)
#define FSR_CROSS_MAX 4u     /* cross_window: at most the first 4 layers */
#define FSR_CROSS_DEFAULT 3u /* cross_window's size when on: layers 0-2 */

struct fsr_config {
	uint32_t cards;               /* 1..FS_MAX_CARDS */
	uint32_t slots[FS_MAX_CARDS]; /* slots per card, >= 1 */
	uint32_t layers;              /* 1..FS_MAX_LAYERS */
	uint32_t experts;             /* 1..FS_MAX_EXPERTS */
	uint32_t max_clients;         /* 1..64 */
	uint32_t max_inflight;        /* copies in flight per card (default 32) */
	uint32_t want_max_age;        /* windows a wanted expert stays wanted (default 2) */
	const uint64_t *expert_bytes; /* [layers * experts], or NULL: uniform_bytes */
	uint64_t uniform_bytes;
	struct fsr_counters counters;

	/*
	 * Tiers (fsr_tiers.c and fsr_tier_*.c).  tiers = 0 keeps the untiered
	 * policy (one LRU pool, FIFO wants); the fields below are then unused.
	 * With tiers, each card's slots less `spare_slots` are shared out over
	 * the layers that run on it; each layer's share reserves <name>_slots
	 * for each per-layer tier of proto/fs_tiers.h (recency_slots,
	 * predicted_slots: 0, a number or FSR_AUTO; recency also FSR_ALL and
	 * FSR_AUTO_PRED), and the rest of every share is the card-wide static
	 * tier's, one size for the card.  fsr_config_tiers() sets the
	 * documented defaults.
	 */
	uint32_t tiers; /* 0: untiered; 1: tiers and the copy scheduler */
#define FSR_SLOTS_FIELD_CARD(name)
#define FSR_SLOTS_FIELD_LAYER(name) uint32_t name##_slots;
#define FSR_SLOTS_FIELD(A, NAME, name, what, SCOPE, ...) FSR_SLOTS_FIELD_##SCOPE(name)
	FS_TIERS(FSR_SLOTS_FIELD, ~) /* per layer: recency_slots, predicted_slots */
#undef FSR_SLOTS_FIELD
	uint32_t spare_slots;    /* per card, outside every tier; FSR_AUTO */
	uint32_t adapt;          /* 1: the static tier follows measured use */
	uint32_t cand_per_layer; /* copy candidates kept per (card, layer), 1..255 */
	float freq_decay;        /* decayed use counts: factor per token, (0, 1] */
	float pred_min_score;    /* predictions scored lower are not copied */
	/* Levers of issue 18 (fsr_core.c says which are on by default and why). */
	uint32_t tier_adapt;   /* 1: each layer's recency size moves with ghost hits (ARC-like) */
	uint32_t admit_value;  /* 1: a copy must be worth more than the resident it displaces */
	uint32_t cross_window; /* layers 0..N-1 of a client's next window predicted from its last */
	uint32_t demand_late;  /* 1: a demand copy goes on the bus as late as its deadline allows */
	uint32_t pred_value;   /* 1: the likeliest predictions the bus can land go (fsr_sched_value.c) */
	uint32_t pred_adapt;   /* 1: an FSR_AUTO predicted size follows its copies' measured use */
	/* The learned predictor (fsr_learn.c): FSR_LEARN_OFF, _AUTO, _ON. */
	uint32_t learn;
	float learn_decay;   /* its counts' decay per token, (0, 1] (default 0.9995) */
	float learn_min_p;   /* its candidates less likely than this are not posted */
	uint32_t learn_post; /* it posts per (target layer, horizon), not resident (8, <= 64) */

	/* The copy scheduler's model of the bus (fsr_sched.c).  Times come
	 * from the caller: the core has no clock. */
	double bus_gbps;        /* one card's link, 1e9 B/s; 0: no limit known */
	uint32_t bus_share_pct; /* share of the link the scheduler plans with, 1..100 */
	uint64_t layer_ns;      /* per-layer time assumed until measured */

	/* Which card reads which (fsr_place.c): bit j of reach[i] = card i can
	 * read card j's slots (a peer path: P2P/NVLink, or host memory on the
	 * host backend).  A card always reads its own.  All zero (the default):
	 * no card reads another, each card keeps its own tier (of every layer
	 * it runs).  When any card reads another, the cards form one tier: see
	 * "Placement" below. */
	uint16_t reach[FS_MAX_CARDS];

	/* The arena's per-layer ready words (the daemon region's, read with
	 * acquire), or NULL: every layer is in.  A prediction or a use of a
	 * layer whose word is not FS_LAYER_READY is counted (predicted, a
	 * miss; arena_unloaded_recs) and goes no further: no want, no copy, no
	 * slot published for bytes the arena does not have yet.  A word only
	 * goes from not ready to ready, so a want admitted stays good. */
	const uint32_t *layer_ready;

	/* Optional (fs-replay's miss decomposition, tools/replay/replay_why.c):
	 * told when a prediction of (layer, expert) leaves `card`'s copy
	 * candidates without a copy, and why (enum fsr_unserved).  NULL:
	 * nothing is told.  Called on the thread that runs the core. */
	void (*unserved)(void *ctx, uint32_t card, uint32_t layer, uint32_t expert, unsigned why);
	void *unserved_ctx;
	/* Optional (the same decomposition): told what the learned predictor
	 * did with a candidate of `client`'s `window` (enum fsr_learned_how).
	 * NULL: nothing is told. */
	void (*learned)(void *ctx, uint32_t client, uint32_t window, uint32_t layer, uint32_t expert,
			unsigned how);
	void *learned_ctx;
};

/* What the learned predictor did with a candidate (fsr_config.learned). */
enum fsr_learned_how {
	FSR_LEARNED_RANKED = 0, /* ranked, not posted */
	FSR_LEARNED_POSTED,     /* posted as a prediction: not resident */
	FSR_LEARNED_HELD,       /* ranked among those posted, and resident (protected) */
};

/* Why a prediction left without a copy (fsr_config.unserved).  WAIT is 0:
 * a candidate that nothing held back waited for copies due sooner. */
#define FSR_UNSERVED(X)                                                                                      \
	X(WAIT, wait, "its layer ran while it waited (copies due sooner, or in flight up to max_inflight)")  \
	X(WAIT_DEMAND, wait_demand, "its layer ran while it waited behind the demand copies (demand first)") \
	X(WAIT_SLOT, wait_slot, "its layer ran while it waited for a slot (a victim's grace period)")        \
	X(TOO_LATE, too_late, "the bus could not land it before its layer's run, given the copies queued")   \
	X(ADMIT, admit, "the predicted tier was full of this window's predictions scored higher")            \
	X(CAND_FULL, cand_full, "the layer's copy candidates were full and it was the weakest")              \
	X(VALUE, value, "the bus could land only likelier predictions due by then (pred_value)")             \
	X(REFUSED, refused,                                                                                  \
	  "not taken at its record: no predicted slots on the layer, score too low, or its layer had run")
#define FSR_UNSERVED_ENUM(NAME, name, what) FSR_UNS_##NAME,
enum fsr_unserved { FSR_UNSERVED(FSR_UNSERVED_ENUM) FSR_UNS_N };
#undef FSR_UNSERVED_ENUM

/*
 * Placement across cards (fsr_place.c).  The rule, one line: a card never
 * loads an expert that a card it can read already holds (LOADING or
 * RESIDENT); the only duplicates are copies for a card that cannot read the
 * holder, where the copy is the card's only way to use the expert and pays
 * for itself as any first copy does.  So with a symmetric reach (NVLink,
 * PCIe P2P, the host backend) an expert is on at most one of the cards that
 * read each other.  Where a record's expert goes:
 *  - held on a card the record's card reads: that holder (a use touches it
 *    there, a prediction or a miss copies nothing);
 *  - else, for a prediction, the card it names (the engine says where the
 *    layer will run; FS_CARD_NONE: the layer's home card);
 *  - else, for a use, the layer's home card (where it runs; the layer's
 *    reserved sizes live there) when the record's card reads it, else the
 *    record's card: engines running the same layer on several cards share
 *    one copy of each of its experts.
 * With one tier, a layer's home moves to another card only after its home
 * card has reported no use of it for FSR_HOME_IDLE_WINDOWS windows: two
 * engines running the same layer on two cards (data parallel) then share
 * the layer's slots on one card instead of moving its reserved sizes back
 * and forth with every record.  A move is no special copy: the old card's
 * reserved slots of the layer are trimmed (after the grace period) and the
 * new card's copies are candidates like any other, planned by deadline and
 * bus budget; the old card's static slots stay and are read from there.
 *
 * Without one tier (no card reads another: consumer GPUs without P2P,
 * `foresightd --peer off`), a card keeps its own tier for every layer it
 * runs: a use of a layer from a card makes that card serve the layer at
 * once (a share of its slots is reserved for it), and the card stops
 * serving it only after FSR_HOME_IDLE_WINDOWS of its own windows (those
 * its engines end) without a use of it; its slots of the layer then go.
 * Data-parallel engines on such cards each get a full tier, and the hot
 * experts are on every card (the copies for a card that cannot read the
 * holder the rule above allows).  Why: with one home per layer that moved
 * to the record's card on every use, two data-parallel engines moved every
 * layer's reserved sizes back and forth with nearly every record
 * (reserved sizes worked out again, trims, the static tier refilled on the
 * other card); on 2 x H200 with --peer off at 26 % slots the daemon's
 * modes hit 71 % while the engines' own static pools hit 86.9 % and one
 * tier over peer reads 91.4 %.  The home stays the card that reported a
 * use last: where a record naming no card acts.  A card that goes down
 * serves nothing (fsr_card_down).
 */
#define FSR_HOME_IDLE_WINDOWS 8u

/* One copy for the backend to perform: arena blob (layer, expert) -> slot. */
struct fsr_copy {
	uint32_t card;
	uint32_t slot;
	uint32_t gen;
	uint32_t layer;
	uint32_t expert;
	uint64_t bytes;
	uint32_t tier;        /* enum fsr_tier the slot joins */
	uint32_t window;      /* window of the record that wanted it */
	uint64_t deadline_ns; /* when it is needed (tiers); UINT64_MAX: no deadline */
};

/*
 * The learned predictor (fsr_learn.c): the core predicts the next layers'
 * experts from the usage records themselves, for engines that post only
 * their routing.  FSR_LEARN_AUTO: for the clients that post no prediction
 * of their own (a client's first PREDICT record takes it out); it learns
 * from every client's usage either way.
 */
#define FSR_LEARN_OFF 0u
#define FSR_LEARN_AUTO 1u
#define FSR_LEARN_ON 2u
#define FSR_HORIZONS 3u
#define FSR_LEARN_REL 10u /* reliability rows: deciles of the probability */
struct fsr_learn_hstats {
	uint64_t targets;             /* (window, layer) scored at this horizon and then run */
	uint64_t used;                /* the experts those used */
	uint64_t at_k, at_2k;         /* of them, ranked within the first k, 2k (k: the used count) */
	uint64_t posted, posted_used; /* posted (not resident), and of them used there */
};
struct fsr_learn_stats {
	int on;               /* a learner runs (off: not configured, or too big a model) */
	uint32_t row_entries; /* successors kept per (horizon, layer, expert) */
	uint64_t bytes;       /* its memory */
	uint64_t records;     /* usage records learned from */
	uint64_t windows;     /* client windows completed */
	uint64_t predictions; /* predictions posted (not resident) */
	struct fsr_learn_hstats h[FSR_HORIZONS];
	/* reliability: per decile of the posted probability, candidates
	 * judged, their probabilities summed, and how many were used */
	uint64_t rel_n[FSR_LEARN_REL], rel_hit[FSR_LEARN_REL];
	double rel_p[FSR_LEARN_REL];
};
/* One step of the learner's work on the records taken in so far: learn
 * from a layer they completed, or score one target layer and post its
 * predictions (as fsr_record would take PREDICT records).  The host calls
 * it once per pass, after the pass's copies were handed to the backend
 * and its epoch published, so it never delays them, and runs another pass
 * while it returns nonzero (a step did work; a take_copies copies what it
 * predicted).  A step is a few microseconds: a record that arrives
 * meanwhile waits no longer than one.  0 when no learner runs. */
unsigned fsr_learn_flush(struct fsr *r);
/* 0, -EINVAL; all zero when no learner runs. */
int fsr_learn_stats(const struct fsr *r, struct fsr_learn_stats *out);
/* A record of the client's past that only the learner takes in (USAGE,
 * WIN_BEGIN; the tiers do not act on it): a host that has the routing of
 * what ran before the core did (fs-replay: the trace's prefill and warm-up
 * windows, which the static profile also counts).  Window numbers run
 * before the client's first live one. */
void fsr_learn_observe(struct fsr *r, uint32_t client, const struct fs_rec *rec);

/* Fill in defaults for fields left 0; then fsr_create() validates. */
void fsr_config_defaults(struct fsr_config *cfg);
/* Turn the tiers on with their documented defaults (fsr_core.c says why
 * each is what it is); the caller may then override any of them. */
void fsr_config_tiers(struct fsr_config *cfg);
/* NULL with errno EINVAL (bad config) or ENOMEM. */
struct fsr *fsr_create(const struct fsr_config *cfg);
void fsr_destroy(struct fsr *r);

/* Clients are rows 0..max_clients-1 (the daemon's client table index). */
int fsr_client_add(struct fsr *r, uint32_t client);     /* 0, -EINVAL, -EEXIST */
void fsr_client_remove(struct fsr *r, uint32_t client); /* drops its holds */
/* The client's holds as read from its region after the latest publish.
 * Zero entries are free; values above the published epoch are ignored and
 * counted in bad_holds.  Returns how many were ignored. */
unsigned fsr_client_holds(struct fsr *r, uint32_t client, const uint64_t holds[FS_MAX_HOLDS]);
/* The newest epoch whose table the client may have read through its holds
 * (fs_lookup_live), read with its holds; 0: it does not say, and may read
 * every newer table.  Larger than the published epoch reads as that. */
void fsr_client_reach(struct fsr *r, uint32_t client, uint64_t reach);
/* RETIRING slots of `card` (their epoch published) that the holds of any
 * of the n clients keep from reuse; others = 1: only those evicted for a
 * want of a client not among them, what they cost the others (a slot
 * evicted for one of their own wants is theirs to wait for). */
unsigned fsr_pinned(const struct fsr *r, uint32_t card, const uint32_t *clients, unsigned n, int others);

/* One validated record from a client's ring, at time now_ns. */
void fsr_record(struct fsr *r, uint32_t client, const struct fs_rec *rec, uint64_t now_ns);

/* Up to max copies for `card`; their slots become LOADING with a new gen.
 * The backend must store ready word 0 before the copy and gen after it.
 * With tiers, the copy scheduler (fsr_sched.c) picks them by deadline and
 * score and hands over only what the bus can land before it is needed. */
unsigned fsr_take_copies(struct fsr *r, uint32_t card, struct fsr_copy *out, unsigned max, uint64_t now_ns);
/* The copy into (card, slot) with gen has landed: LOADING -> RESIDENT.
 * A landing after the copy's deadline counts `landed_late`; one reported
 * for a card that went down is ignored (`done_after_down`). */
void fsr_copy_done(struct fsr *r, uint32_t card, uint32_t slot, uint32_t gen, uint64_t now_ns);

/* Epochs. */
int fsr_dirty(const struct fsr *r); /* the table changed since the last publish */
/* Write the table to publish next: cards * layers * experts entries,
 * entries[(card * layers + layer) * experts + expert]. */
void fsr_fill(const struct fsr *r, uint64_t *entries);
/* Mark the filled table as published; returns its epoch number (1, 2, ...).
 * Call it right after fsr_fill(), with no call in between that changes the
 * table: a slot evicted in between would be in the published table yet be
 * retired as if it were not. */
uint64_t fsr_publish(struct fsr *r);
uint64_t fsr_epoch(const struct fsr *r); /* last published, 0 = none */
/* Nonzero when any live client holds `epoch`. */
int fsr_epoch_held(const struct fsr *r, uint64_t epoch);
/* Free every RETIRING slot whose grace period is over.  Call after the
 * holds read following a publish were passed in.  Returns slots freed.
 * A slot retired in epoch U is freed once U is published and no live
 * client's holds, passed in after U was published, pin it: holds that are
 * 0 or >= U do not, nor an older hold whose client cannot read a table
 * that maps the slot (fsr_client_reach); a live client whose holds were
 * last passed in before that publish, or never since it was added, keeps
 * it RETIRING. */
unsigned fsr_reclaim(struct fsr *r);

/* ---- tiers ------------------------------------------------------------ */

/* The tier a LOADING or RESIDENT slot belongs to: FSR_TIER_<NAME> for each
 * row of proto/fs_tiers.h (static, recency, predicted).  Untiered cores put
 * every slot in FSR_TIER_POOL, which is no tier: one LRU pool per card. */
#define FSR_TIER_ENUM_ROW(A, NAME, name, ...) FSR_TIER_##NAME,
enum fsr_tier { FSR_TIER_POOL = 0, FS_TIERS(FSR_TIER_ENUM_ROW, ~) FSR_NTIERS };
#undef FSR_TIER_ENUM_ROW
const char *fsr_tier_name(enum fsr_tier t);
/* A tier whose copies are speculative (predictions: wanted within one
 * window, too late after it).  A copy of any other tier is for an expert
 * that was used, and stays useful across windows. */
int fsr_tier_speculative(unsigned tier);

/* A static profile: use counts per (layer, expert), counts[layer * experts
 * + expert] (a saved profile, a warm-up, prefill).  Seeds the decayed use
 * scores and queues background copies that fill each layer's tiers with its
 * hottest experts, hottest first (ties: lower expert id).  Tiers only:
 * -EINVAL otherwise. */
int fsr_profile_load(struct fsr *r, const uint32_t *counts);
/* When every card's slots hold every expert of the layers it serves: queue
 * background copies of every expert not resident, in the order a profile
 * of the current scores would fill the tiers (a fresh daemon: expert id
 * order).  Nothing is ever evicted for them, so a pool that fits the model
 * need not wait for each expert's first use.  Returns how many were
 * queued; 0 when some card cannot hold them all (nothing queued); -EINVAL
 * without tiers. */
int fsr_fill_all(struct fsr *r);
/* The decayed use scores now, rounded, in the same layout (what `fsctl
 * profile save` writes and fsr_profile_load() reads back). */
void fsr_profile_save(const struct fsr *r, uint32_t *counts);

/* Recency and predicted: reserved size and use at this (card, layer).  The
 * static tier has one size per card, shared by its layers: both fields are
 * then the card's. */
struct fsr_tier_info {
	uint32_t quota;
	uint32_t used; /* LOADING + RESIDENT slots of the tier */
};
int fsr_tier_info(const struct fsr *r, uint32_t card, uint32_t layer, enum fsr_tier t,
		  struct fsr_tier_info *out);
/* Measured (or, before any measurement, configured) per-layer time. */
uint64_t fsr_layer_ns(const struct fsr *r);

/* Introspection for telemetry and tests. */
enum fsr_slot_state { FSR_FREE = 0, FSR_LOADING, FSR_RESIDENT, FSR_RETIRING };
struct fsr_slot_info {
	enum fsr_slot_state state;
	uint32_t gen;
	uint32_t layer, expert; /* valid unless FREE */
	uint64_t retire;        /* RETIRING: first epoch without it */
	enum fsr_tier tier;     /* LOADING, RESIDENT */
};
int fsr_slot_info(const struct fsr *r, uint32_t card, uint32_t slot, struct fsr_slot_info *out);
uint32_t fsr_card_slots(const struct fsr *r, uint32_t card); /* its pool's size, 0: no such card */
/* Slot of (layer, expert) on card in the working table, or FSR_NONE. */
uint32_t fsr_lookup(const struct fsr *r, uint32_t card, uint32_t layer, uint32_t expert);
/* Where an engine on card `from` finds (layer, expert): its slot on `from`,
 * else on a card `from` reads (*card set to that card), else FSR_NONE. */
uint32_t fsr_lookup_from(const struct fsr *r, uint32_t from, uint32_t layer, uint32_t expert, uint32_t *card);
/*
 * Cards going down (fsr_card.c).  fsr_card_down() takes a card out of the
 * tier for good: its LOADING and RESIDENT slots leave the working table
 * (the next epoch maps nothing to it; a copy in flight never lands, a late
 * fsr_copy_done for it is ignored and counted), it gets no copy and no want
 * again, no card reads it for placement, it serves no layer, its layers'
 * homes move to the live cards (one that serves the layer already, else
 * dealt out in turn), and records naming it act on a live card it
 * read (one tier) or are dropped and counted.  Its slot memory is never
 * reused; a reader holding an older epoch may still read it until it
 * releases (the daemon does not free it either).  Every card may go down:
 * engines then run every expert on the CPU path.  A card never comes back
 * (a restart of the daemon does that).  0, -EINVAL (no such card),
 * -EALREADY (already down).
 */
int fsr_card_down(struct fsr *r, uint32_t card);
int fsr_card_is_down(const struct fsr *r, uint32_t card);
uint32_t fsr_cards_down(const struct fsr *r); /* bit i: card i is down */

/* Replace the reach matrix (fsr_config.reach) before any slot is used (the
 * daemon learns it from its backend after creating the core).  -EBUSY once
 * a slot left FREE: a new reach could make two holders of one expert. */
int fsr_set_reach(struct fsr *r, const uint16_t reach[FS_MAX_CARDS]);
/* The reach matrix in use (each card's own bit included); a card that is
 * down reads nothing and is read by none (0, and its bit cleared). */
uint16_t fsr_reach(const struct fsr *r, uint32_t card);
/* Lowest epoch any live client holds, or UINT64_MAX when none is held. */
uint64_t fsr_min_hold(const struct fsr *r);
/* Check the core's internal consistency (lists, counts, table, want
 * queues, gauges): 0 when sound, else minus the source line of the first
 * failed check.  O(slots + cards * layers * experts): tests and debugging. */
int fsr_check(const struct fsr *r);

#endif /* FSR_H */
