/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_learn.h: the learned predictor's private data (fsr_learn.c says what
 * it learns and how it predicts).  Included by fsr_internal.h; nothing
 * outside daemon/residency/ includes it.
 */
#ifndef FSR_LEARN_H
#define FSR_LEARN_H

#include <stdint.h>

/* Distinct experts kept per (client, layer, window): a set larger than
 * this (a prefill batch) is not learned from and not used as evidence. */
#define FSR_LEARN_SET 64u
#define FSR_LEARN_OVER 0xffu
/* Scored candidates remembered per (target, horizon): the best
 * FSR_LEARN_RANKED, and those posted below them: the calibration's
 * outcomes and the recall statistics (at k and 2k). */
#define FSR_LEARN_RANKED 32u
#define FSR_LEARN_POST_MAX 64u /* learn_post at most */
#define FSR_LEARN_PEND (FSR_LEARN_RANKED + FSR_LEARN_POST_MAX)
/* Targets in flight per client: the next three layers, and the one that
 * is closing. */
#define FSR_LEARN_TARGETS 4u
/* The calibration's bins over the raw log-odds [FSR_LEARN_S0, +..), 0.5 wide. */
#define FSR_LEARN_BINS 48u
#define FSR_LEARN_S0 (-16.0f)
#define FSR_LEARN_BIN_W 0.5f
/* Successor entries the model may hold in all (memory bound: 6 bytes each). */
#define FSR_LEARN_MAX_ENTRIES (8u << 20)
#define FSR_LEARN_ROW_MAX 32u /* successors per row at most */
#define FSR_LEARN_ROW_MIN 4u  /* fewer than this fit the bound: the learner stays off */
#define FSR_LEARN_NOEXP 0xffffu
#define FSR_LEARN_RESCALE 1e-6f /* a row's scale below this is folded into its counts */
/* decay^n tables: n mod FSR_LEARN_POW_LO, and its multiples up to 65536 */
#define FSR_LEARN_POW_LO 1024u
#define FSR_LEARN_POW_HI 64u

/* What one (target, horizon) was predicted: candidates best first. */
struct fsr_learn_guess {
	uint8_t n;
	uint8_t posted[FSR_LEARN_PEND]; /* posted (not resident then) */
	uint8_t bin[FSR_LEARN_PEND];    /* its calibration bin */
	uint8_t p8[FSR_LEARN_PEND];     /* its probability, x 255 */
	uint8_t rank[FSR_LEARN_PEND];   /* its place in the ranking (255: past it) */
	uint16_t e[FSR_LEARN_PEND];
};

struct fsr_learn_target {
	uint32_t win, layer;
	uint8_t live;
	struct fsr_learn_guess h[FSR_HORIZONS];
};

struct fsr_learn_client {
	uint8_t valid, prev_valid;
	uint8_t self_pred; /* it posted predictions of its own */
	uint8_t dirty;     /* usage since the last flush */
	uint8_t todo;      /* targets still to predict for `layer` (fsr_learn_flush: one a step) */
	uint32_t win, prev_win;
	uint32_t tokens, prev_tokens; /* WIN_BEGIN's count, 0: unknown */
	uint32_t tok_win, tok_win_n;  /* the newest WIN_BEGIN: its window and count */
	uint32_t layer;               /* newest layer with usage in win, FSR_NONE: none */
	uint32_t pend;                /* the layer before it, complete, not learned from yet */
	uint16_t *cur, *prev;         /* [layers][FSR_LEARN_SET] */
	uint8_t *ncur, *nprev;        /* [layers]; FSR_LEARN_OVER: overflowed */
	struct fsr_learn_target tgt[FSR_LEARN_TARGETS];
};

struct fsr_learn_cand {
	float s, p; /* raw log-odds, calibrated probability */
	uint16_t e;
	uint16_t card; /* where it is posted (the posting list) */
};

struct fsr_learn {
	uint32_t layers, experts, m; /* m: successors kept per row */
	uint32_t post;               /* candidates posted per (target, horizon) */
	int mode;                    /* FSR_LEARN_ON, FSR_LEARN_AUTO */
	float decay, alpha, min_p;
	uint32_t tick;                  /* tokens of the windows ended: the decay clock */
	float pow_lo[FSR_LEARN_POW_LO]; /* decay^n */
	float pow_hi[FSR_LEARN_POW_HI]; /* decay^(n FSR_LEARN_POW_LO) */
	float bin_raw[FSR_LEARN_BINS];  /* a calibration bin's raw probability (its middle's) */
	float *row_n;                   /* [rows]: occurrences of the row's expert */
	uint32_t *row_tick;             /* [rows] */
	uint16_t *ent_e;                /* [rows][m] successor, FSR_LEARN_NOEXP empty */
	float *ent_c;                   /* [rows][m] co-occurrences, as of row_tick */
	float *row_sc;                  /* [rows] the scale its counts are stored at (fsr_learn.c) */
	float *use_c;                   /* [layers][experts] uses (decayed) */
	uint32_t *use_tick;             /* [layers][experts] */
	float *win_n;                   /* [layers] windows that ran the layer (decayed) */
	float *set_n;                   /* [layers] their experts used, summed (decayed) */
	uint32_t *win_tick;             /* [layers] */
	float *rep_n, *rep_hit;         /* [layers][experts] used in a window; and in the next */
	uint32_t *rep_tick;             /* [layers][experts] */
	float cal_n[FSR_HORIZONS][FSR_LEARN_BINS], cal_hit[FSR_HORIZONS][FSR_LEARN_BINS];
	/* scratch for one target's scoring */
	float *acc;  /* [experts] the layers' evidence */
	float *base; /* [experts] the target layer's base rate of each touched */
	struct fsr_learn_cand cand[FSR_LEARN_RANKED];
	struct fsr_learn_cand post_c[FSR_LEARN_POST_MAX]; /* the best not resident, to post */
	float *rep;                                       /* [experts] the repetition's */
	uint16_t *touched;                                /* [experts] */
	uint8_t *mark;                                    /* [experts] */
	uint32_t ntouched;
	uint32_t next;               /* the client fsr_learn_flush looks at first */
	struct fsr_learn_client *cl; /* [max_clients] */
	struct fsr_learn_stats st;
};

#endif /* FSR_LEARN_H */
