/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_calib.h: fs-replay --calibrate, the routing model (tools/trace's
 * fs_trace_model) against every statistic it is fitted to, and the small
 * simulators of the discussion's measurements that those statistics need
 * (static profile, 16-slot recency ring, Strata's adapt rules) on windows
 * of a fractional number of tokens (T ~ 2.5: 2, 3, 2, 3, ...).
 */
#ifndef REPLAY_CALIB_H
#define REPLAY_CALIB_H

#include <stdint.h>
#include <stdio.h>

#include "fs_trace.h"
#include "fs_trace_model.h"

/* Windows of a mean of tpw tokens over tokens [from, to): window w holds
 * floor((w + 1) tpw) - floor(w tpw) tokens (the engine bench's rule). */
struct calib_windows {
	uint32_t n;
	uint32_t *first; /* [n] */
	uint8_t *ntok;   /* [n] */
};
int calib_windows_init(struct calib_windows *w, uint32_t from, uint32_t to, double tpw);
void calib_windows_free(struct calib_windows *w);

/* What one simulated policy did: distinct (window, layer, expert) uses. */
struct calib_result {
	uint64_t uses, misses;
	double hit;           /* percent */
	double misses_per_lw; /* distinct misses per layer-window */
};

/* The static profile: counts of tokens [0, profile_tokens) per (layer,
 * expert); the `slots` hottest of the card hold it (ties: spread over the
 * layers).  Writes resident[layer * experts + e] = 1 for them. */
void calib_static_set(const struct fs_trace *t, uint32_t profile_tokens, uint32_t slots, uint8_t *resident);

/* Static profile, frozen. */
void calib_static(const struct fs_trace *t, const struct calib_windows *w, const uint8_t *resident,
		  struct calib_result *out);
/* The discussion's recency ring: `ring` slots per layer taken from the
 * coldest static residents, an LRU of the experts that missed, each miss
 * usable `delay` windows later. */
int calib_ring(const struct fs_trace *t, const struct calib_windows *w, uint32_t profile_tokens,
	       uint32_t slots, uint32_t ring, uint32_t delay, struct calib_result *out);
/* Strata's adapt rules on the static profile: every `every` windows,
 * usage decayed by `decay`, at most `swaps` swaps of the coldest residents
 * for hotter non-residents; a swap is usable from the next window. */
int calib_adapt(const struct fs_trace *t, const struct calib_windows *w, uint32_t profile_tokens,
		uint32_t slots, uint32_t every, double decay, uint32_t swaps, struct calib_result *out);

/* Trace statistics within sessions of `session` tokens (0: the whole
 * trace is one): reuse of a layer's experts `lag` tokens later, and the
 * mean number of distinct experts a layer uses over spans of n tokens. */
double calib_reuse(const struct fs_trace *t, uint32_t session, uint32_t lag);
double calib_distinct(const struct fs_trace *t, uint32_t session, uint32_t n);
/* Routing-only recall h layers ahead (issue 32): within sessions, counts
 * of what followed what learned from earlier tokens only; the share of a
 * token's experts ranked within its top-k and 2k (replay_calib_sim.c).
 * 0, -EINVAL (h, or top-k > 32), -ENOMEM. */
int calib_route_recall(const struct fs_trace *t, uint32_t session, unsigned h, double *at_k, double *at_2k);

/* A real trace's statistics, the targets of the reuse rows. */
struct replay_trace_target {
	const char *name;
	uint32_t layers, experts, topk;
	double reuse[3];    /* at lags 1, 2, 10 tokens */
	double distinct[2]; /* distinct experts per layer over 16 and 64 tokens */
	double route[3][2]; /* routing-only recall 1-3 layers ahead, at k and 2k (calib_route_recall) */
	uint32_t session;   /* its decode tokens: the model's sessions are as long */
};
extern const struct replay_trace_target replay_trace_targets[2]; /* qwen, gemma */

/* --calibrate: one row per statistic (name, target, measured, tolerance,
 * ok) as a table, a JSON array or a Markdown table.  Returns the number of
 * rows out of tolerance, or -1 on error. */
enum calib_format { CALIB_TABLE = 0, CALIB_JSON, CALIB_MARKDOWN };
int replay_calibrate(FILE *out, const struct fs_trace_model *box, enum calib_format format);
/* `fs-replay TRACE --calibrate`: only the reuse and distinct rows, with a
 * trace the model was not fitted to (a held-out check): its statistics are
 * the targets, the model is generated at its shape. */
int replay_calibrate_trace(FILE *out, const struct fs_trace_model *box, enum calib_format format,
			   const struct fs_trace *t, const char *name);

/* "name=value" for one behaviour field of the model (--model-set). */
int calib_model_set(struct fs_trace_model *m, const char *spec);

#endif /* REPLAY_CALIB_H */
