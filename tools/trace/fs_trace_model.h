/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_trace_model.h: a calibrated routing model (the structured generator).
 *
 * fs_trace_generate() (fs_trace.h) draws every token from one Zipf law per
 * layer with a one-token locality knob: it matches the discussion's static
 * hit rate at one slot budget only and has almost no temporal structure.
 * This generator builds each token's routing from three sources, each with
 * a meaning, and is fitted to the statistics docs/results/replay.md lists
 * (fs-replay --calibrate checks every one):
 *
 *  - global popularity: per layer, log-normal expert weights (log-weight
 *    standard deviation `sigma`, varying across layers by `layer_spread`):
 *    a heavy core and a long tail, the same for every session of a kind
 *    (what a static profile learns from earlier sessions);
 *  - topics: each session holds `topics` topics; a topic is, per layer, a
 *    set of topic_size x topk experts drawn from popularity^topic_temper.
 *    Every token follows one topic (kept from the previous token with
 *    probability topic_stay), the same at every layer, which is what makes
 *    routing co-occur across layers; a share `topic` of a token's slots
 *    comes from its topic's set.  Members drift: each is replaced with
 *    probability topic_drift per token (the slowly moving session part);
 *  - expert paths: the model holds `paths` paths (the same in every
 *    session: a property of the model, like its popularity); a path is,
 *    per layer, a set of path_size x topk experts drawn from
 *    popularity^path_temper.  Every token follows one path (kept from
 *    the previous token with probability path_stay, else drawn anew, path
 *    i with weight (i + 1)^-path_skew: a few paths are common, as a few
 *    kinds of token are),
 *    the same at every layer, and a share `path` of its
 *    slots comes from its path's set: a token's experts at one layer name
 *    its path, and so its experts at the next layers, as real routing's
 *    do (what fs-replay --calibrate's route rows measure, issue 32);
 *  - short-term reuse: a share `reuse` of the slots re-draws an expert that
 *    the same layer used `lag` tokens earlier, lag >= 1 with weight
 *    reuse_decay^(lag - 1) (up to FS_TRACE_MODEL_HISTORY tokens back,
 *    never across a session boundary).
 * The rest of the slots draw from the global popularity.  A token never
 * routes twice to one expert at a layer (a repeat is drawn again).
 *
 * Sessions: every `session_tokens` tokens (0: never) a new session starts
 * with new topics and no history; the global popularity stays.  A run that
 * profiles on the first sessions and scores the later ones sees "a profile
 * from earlier sessions of the same kind", as the discussion's engine did.
 *
 * Same fields, same trace, on every platform (fs_rng).
 */
#ifndef FS_TRACE_MODEL_H
#define FS_TRACE_MODEL_H

#include "fs_trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How far back short-term reuse looks, in tokens. */
#define FS_TRACE_MODEL_HISTORY 32u

struct fs_trace_model {
	/* shape and length */
	uint32_t layers;         /* default 48 */
	uint32_t experts;        /* default 512 */
	uint32_t topk;           /* default 10 */
	uint32_t tokens;         /* default 2000 */
	uint32_t session_tokens; /* a new session every N tokens; 0 = one session (default 500) */
	uint64_t seed;           /* default 1 */
	uint64_t expert_bytes;   /* recorded per layer; default 0 (unknown) */
	/* behaviour: the calibrated values are the defaults */
	double sigma;        /* log-weight std of the global popularity */
	double layer_spread; /* std of log(sigma) across layers */
	double reuse;        /* share of slots re-drawn from the layer's recent tokens, 0..1 */
	double reuse_decay;  /* weight of lag j is reuse_decay^(j-1), 0..1 */
	double topic;        /* share of slots drawn from the token's topic, 0..1 */
	uint32_t topics;     /* topics per session, >= 1 */
	double topic_size;   /* experts per topic and layer, in units of topk, > 0 */
	double topic_temper; /* topic members drawn from popularity^temper, 0..2 */
	double topic_drift;  /* chance per token that a topic member is replaced, 0..1 */
	double topic_stay;   /* chance a token keeps the previous token's topic, 0..1 */
	/* expert paths (issue 32): what one layer's routing says of the next */
	double path;        /* share of slots drawn from the token's path, 0..1 */
	uint32_t paths;     /* paths of the model (all sessions), >= 1 */
	double path_size;   /* experts per path and layer, in units of topk, > 0 */
	double path_temper; /* path members drawn from popularity^temper, 0..2 */
	double path_stay;   /* chance a token keeps the previous token's path, 0..1 */
	double path_skew;   /* a new path is path i with weight (i + 1)^-skew, 0..4 (0: uniform) */
};

/* The calibrated model on the discussion's box: 48 x 512, top-10. */
void fs_trace_model_defaults(struct fs_trace_model *m);

/* Generate m->tokens decode tokens (no prefill rows) into t.  0 or a
 * negative errno (-EINVAL with a message for bad fields, -ENOMEM). */
int fs_trace_model_generate(struct fs_trace *t, const struct fs_trace_model *m, char *err, size_t errlen);

/* The engine bench's call: the calibrated model at this shape and length,
 * sessions of `session_tokens` (0: one session). */
int fs_trace_model_simple(struct fs_trace *t, uint32_t layers, uint32_t experts, uint32_t topk,
			  uint32_t tokens, uint32_t session_tokens, uint64_t seed, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* FS_TRACE_MODEL_H */
