/* SPDX-License-Identifier: Apache-2.0 */
/* demo.h: the pieces of fs-demo-engine (options, predictors). */
#ifndef FS_DEMO_H
#define FS_DEMO_H

#include <stdint.h>

#include <foresight/foresight.h>

#include "fs_rng.h"
#include "fs_trace.h"

enum demo_predict { PREDICT_NONE, PREDICT_ORACLE, PREDICT_RECENCY };

struct demo_opts {
	const char *socket; /* NULL: the library's default resolution */
	const char *name;
	uint32_t windows;
	const char *trace; /* NULL: synthetic */
	/* synthetic trace; 0 = take it from the daemon's model */
	uint32_t layers, experts, topk;
	double skew, locality;
	uint64_t seed;
	uint32_t tokens; /* per window */
	uint64_t window_us;
	uint64_t hold_us; /* a slow engine: this long inside each window, its epoch held */
	enum demo_predict predict;
	double recall;   /* oracle: chance each true expert is posted */
	uint32_t decoys; /* oracle: wrong experts posted per layer */
	int quiet;
};

/* Parse argv.  Returns -1 after --help (exit 0), 0 to run, or 2 after
 * printing a usage error. */
int demo_parse(int argc, char **argv, struct demo_opts *o);
const char *demo_predict_name(enum demo_predict p);

/*
 * The predictor posts, before layer l runs, what it expects layer l+1 to
 * use (horizon 1).  oracle: it knows the window's true experts, posts each
 * with probability `recall`, plus `decoys` wrong ones, standing in for a
 * router-ahead predictor of that recall.  recency: the experts layer l+1
 * used in the previous window.
 */
struct demo_predictor {
	enum demo_predict kind;
	double recall;
	uint32_t decoys;
	uint32_t layers, experts, cards;
	struct fs_rng rng;
	uint32_t cap;    /* per-layer capacity of prev */
	uint16_t *prev;  /* recency: [layers][cap], the last window's experts */
	uint32_t *nprev; /* [layers] */
	uint64_t posted; /* predictions posted (accepted by the ring) */
};

int demo_predictor_init(struct demo_predictor *p, const struct demo_opts *o, uint32_t layers,
			uint32_t experts, uint32_t cards, uint32_t cap);
/* Post the predictions for `layer` (its true distinct experts this window
 * are truth[0..n)). */
void demo_predict_layer(struct demo_predictor *p, fs_client *c, uint32_t window, uint32_t layer,
			const uint16_t *truth, uint32_t n);
/* Remember what `layer` used this window (for recency). */
void demo_predict_learn(struct demo_predictor *p, uint32_t layer, const uint16_t *used, uint32_t n);
void demo_predictor_free(struct demo_predictor *p);

/* The card that runs a layer: layers split evenly over the cards. */
static inline uint32_t demo_card_of(uint32_t layer, uint32_t layers, uint32_t cards)
{
	return cards ? (uint32_t)((uint64_t)layer * cards / layers) : 0;
}

#endif /* FS_DEMO_H */
