/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_why.h: where a policy's misses come from (replay_why.c).  Every
 * distinct miss of a run is put in exactly one class of REPLAY_WHY, so the
 * classes sum to the misses (replay_why_test.c pins it), and in exactly one
 * class of REPLAY_HIST (its residency history), which sums to them too.
 *
 * The classes, first match wins:
 *  (a) never predicted: no posting of the engine's (PREDICT record, or a
 *      candidate the engine left out because it held it: --pred-max's
 *      "not held") named the expert for this window's layer before its
 *      lookup: a window's first layer (no layer runs before it in the
 *      window), ranked by the predictor but cut by --pred-max, in no
 *      candidate list, or a policy without predictions;
 *  (d) predicted, and a copy of it was on its way at the lookup: its bytes
 *      not in yet, or in but held back by the landing delay;
 *  (c) predicted, and it was resident or on its way at a posting, or a copy
 *      of it was issued after the first posting: it was usable and left
 *      before its use; by the tier of the copy that took its slot, or its
 *      slot not refilled yet (evicted ahead, waiting out the grace period);
 *  (b) predicted, and no copy was issued for it after the first posting:
 *      by the reason the core gives when the prediction leaves its copy
 *      candidates (fsr_config.unserved, enum fsr_unserved, one row each in
 *      the same order), the one that ended the latest posting.
 * The bookkeeping is the replay's own: what the engine posted and looked
 * up, and the copies the hot engine handed to the virtual bus (the slot a
 * copy goes into is the one the core evicted ahead); from the core only
 * its reasons for (b).  "After" is in the order the replay saw events,
 * not in virtual time (two events can share a virtual time).  With several cards an expert's state is the union over the
 * cards (the engine reads every card); the tier that evicted it is the last
 * one to take a slot of it on any card.  The core's reasons for (b) are
 * kept per (layer, expert), not per client: with --clients > 1 one
 * engine's reason can settle another engine's pending miss of the same
 * expert (the class sums stay exact; only the (b) split is blurred).
 */
#ifndef REPLAY_WHY_H
#define REPLAY_WHY_H

#include <stddef.h>
#include <stdint.h>

#include "fs_regions.h" /* FS_MAX_CARDS */
#include "fs_tiers.h"

struct replay_bus;

/* X(name, class letter, what).  c_by_pool, then one c_by_<tier> row per
 * tier of proto/fs_tiers.h in its order: c_by_pool + enum fsr_tier. */
#define REPLAY_WHY_TIER(X, NAME, name, ...) \
	X(c_by_##name, "c", "predicted, usable, evicted before its use: slot taken by a " #name " copy")
#define REPLAY_WHY(X)                                                                                       \
	X(a_layer0, "a", "never predicted: a window's first layer (no posting can precede its lookup)")     \
	X(a_cut, "a", "never predicted: ranked by the predictor, cut by --pred-max")                        \
	X(a_unranked, "a", "never predicted: in no candidate list of the predictor")                        \
	X(a_nopred, "a", "never predicted: the policy has no predictions")                                  \
	X(b_wait, "b", "predicted, not copied: its layer ran while it waited (copies due sooner)")          \
	X(b_wait_demand, "b", "predicted, not copied: its layer ran while it waited behind demand copies")  \
	X(b_wait_slot, "b", "predicted, not copied: its layer ran while it waited for a slot")              \
	X(b_too_late, "b", "predicted, not copied: the bus could not land it before its layer ran")         \
	X(b_admit, "b", "predicted, not copied: the predicted tier held this window's better-scored ones")  \
	X(b_cand_full, "b", "predicted, not copied: the layer's copy candidates were full, it the weakest") \
	X(b_value, "b", "predicted, not copied: the bus could land only likelier ones (pred_value)")        \
	X(b_refused, "b", "predicted, not copied: refused at its record (no predicted slots on the layer)") \
	X(b_untold, "b", "predicted, not copied: the core told no reason (still a candidate at the end)")   \
	X(c_by_pool, "c", "predicted, usable, evicted before its use: slot taken by an untiered copy")      \
	FS_TIERS(REPLAY_WHY_TIER, X)                                                                        \
	X(c_unfilled, "c", "predicted, usable, evicted before its use: its slot not refilled yet")          \
	X(d_on_bus, "d", "predicted and copied, its bytes not in at the lookup")                            \
	X(d_delayed, "d", "predicted and copied, landed but held back by the landing delay")

#define REPLAY_HIST(X)                                                                           \
	X(cold, "no copy of it was ever issued (since the profile's fill): not resident before") \
	X(evicted, "a copy of it landed earlier, and it was evicted since")                      \
	X(in_flight, "a copy of it was on its way (bus, or the landing delay)")

/* Beside the classes (not part of their sums): how precise the posting
 * was, as the engine posted it (a candidate it held is not counted). */
#define REPLAY_WHY_INFO(X)                                                                         \
	X(posted, "distinct (window, layer, expert) the engine posted a prediction for, not held") \
	X(posted_used, "of those, the ones the window then used at that layer")                    \
	X(copies_pool, "copies handed to the bus for an untiered pool")                            \
	FS_TIERS(REPLAY_INFO_COPIES, X)                                                            \
	X(used_pool, "of the untiered copies, those hit before the next copy of the expert")       \
	FS_TIERS(REPLAY_INFO_USED, X)                                                              \
	X(unseen, "misses of an expert its layer never used before (not in the profile's tokens, " \
		  "not earlier in the run): no predictor from routing alone can name it")
/* copies_pool + enum fsr_tier, used_pool + enum fsr_tier */
#define REPLAY_INFO_COPIES(X, NAME, name, ...) \
	X(copies_##name, "copies handed to the bus for the " #name " tier")
#define REPLAY_INFO_USED(X, NAME, name, ...) \
	X(used_##name,                       \
	  "of the " #name " tier's copies, those hit at least once before the next copy of the expert")

#define REPLAY_WHY_ENUM(name, cls, what) RW_##name,
enum replay_why_class { REPLAY_WHY(REPLAY_WHY_ENUM) RW_N };
#undef REPLAY_WHY_ENUM
#define REPLAY_HIST_ENUM(name, what) RH_##name,
enum replay_hist_class { REPLAY_HIST(REPLAY_HIST_ENUM) RH_N };
#undef REPLAY_HIST_ENUM
#define REPLAY_INFO_ENUM(name, what) RI_##name,
enum replay_why_info { REPLAY_WHY_INFO(REPLAY_INFO_ENUM) RI_N };
#undef REPLAY_INFO_ENUM

const char *replay_why_name(unsigned c);  /* "a_layer0" ... */
const char *replay_why_class(unsigned c); /* "a" .. "d" */
const char *replay_why_what(unsigned c);
const char *replay_hist_name(unsigned c);
const char *replay_hist_what(unsigned c);
const char *replay_info_name(unsigned c);
const char *replay_info_what(unsigned c);

struct replay_why {
	uint32_t layers, experts, clients, cards;
	size_t le;
	const struct replay_bus *bus; /* [cards]: the ready words and what is in flight */
	/* per engine, per (layer, expert) */
	uint32_t *pred_win;  /* the window of its latest posting, 0: none */
	uint32_t *cand_win;  /* the window the predictor last ranked it */
	uint64_t *pred_t;    /* the event number of its first posting in pred_win */
	uint64_t *last_t;    /* the event number of its latest posting */
	uint8_t *pred_cover; /* resident or on its way at a posting in pred_win */
	uint8_t *pred_flags; /* in pred_win: 1 posted not held (counted), 2 its use counted */
	/* per (layer, expert) */
	uint64_t *issue_t;   /* the event number of its newest copy, 0: none */
	uint64_t *uns_t;     /* the event number of the core's latest reason for it, 0: none */
	uint8_t *uns_why;    /* that reason (enum fsr_unserved) */
	uint32_t *pend;      /* its (b) misses waiting for the core's reason */
	uint64_t seq;        /* events seen (postings, copies, reasons) */
	uint8_t *evicted_by; /* 1 + the tier of the copy that took its newest copy's slot, 0: none */
	uint8_t *copy_tier;  /* the tier of its newest copy */
	uint8_t *copy_used;  /* its newest copy was hit */
	uint8_t *seen;       /* its layer used it (the profile's tokens, or a use in the run) */
	/* per card */
	uint32_t *copy_slot[FS_MAX_CARDS]; /* [le]: 1 + the slot of its newest copy on the card, 0: none */
	uint32_t *copy_gen[FS_MAX_CARDS];  /* [le]: that copy's generation */
	uint32_t *slot_idx[FS_MAX_CARDS];  /* [slots]: 1 + the (layer, expert) of the slot's newest copy */
	uint64_t n[RW_N], hist[RH_N], info[RI_N];
};

/* bus: the cards' virtual buses (their slot counts size the arrays). */
int replay_why_init(struct replay_why *w, uint32_t layers, uint32_t experts, uint32_t clients, uint32_t cards,
		    const struct replay_bus *bus);
void replay_why_free(struct replay_why *w);
/* The predictor ranked `expert` for `layer` of engine `client`'s window. */
void replay_why_ranked(struct replay_why *w, uint32_t client, uint32_t window, uint32_t layer,
		       uint32_t expert);
/* The engine posted `expert` for `layer` (held: it left it out because it
 * would hit it now). */
void replay_why_posted(struct replay_why *w, uint32_t client, uint32_t window, uint32_t layer,
		       uint32_t expert, int held);
/* A copy handed to card `card`'s bus into `slot` (its newest generation). */
void replay_why_copy(struct replay_why *w, uint32_t card, uint32_t slot, uint32_t gen, uint32_t layer,
		     uint32_t expert, uint32_t tier);
/* The core's reason a prediction of (layer, expert) left without a copy
 * (fsr_config.unserved). */
void replay_why_unserved(struct replay_why *w, uint32_t layer, uint32_t expert, unsigned why);
/* (layer, expert) was used before the run (the profile's tokens). */
void replay_why_seen(struct replay_why *w, uint32_t layer, uint32_t expert);
/* Scoring starts: the copies so far (the profile's fill) are not counted
 * in why_info's copies and first hits. */
void replay_why_start(struct replay_why *w);
/* The run is over: (b) misses whose reason never came are b_untold. */
void replay_why_finish(struct replay_why *w);
/* Every distinct use at the engine's lookup, hit or miss (the info). */
void replay_why_use(struct replay_why *w, uint32_t client, uint32_t window, uint32_t layer, uint32_t expert,
		    int hit);
/* A distinct miss at the engine's lookup: counted in one class of each
 * list; returns its REPLAY_WHY class.  predicts: the policy posts. */
unsigned replay_why_miss(struct replay_why *w, uint32_t client, uint32_t window, uint32_t layer,
			 uint32_t expert, int predicts);

#endif /* REPLAY_WHY_H */
