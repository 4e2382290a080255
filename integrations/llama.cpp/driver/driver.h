/* SPDX-License-Identifier: Apache-2.0 */
/*
 * driver.h: fs-llama-driver, a small libllama program that feeds token
 * ids 0, 1, 2, ... (a prefill of P tokens, then D decode steps, R times),
 * times them, and dumps what a comparison needs: a hash of every output
 * token's logits, the raw logits, the routed experts per (token, layer).
 */
#ifndef FS_LLAMA_DRIVER_H
#define FS_LLAMA_DRIVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "llama.h"

#define DRV_MAX_OT 64

struct drv_opts {
	const char *model;
	int ngl;
	const char *ot[DRV_MAX_OT]; /* PATTERN=BUFT, as llama.cpp's -ot */
	unsigned n_ot;
	uint32_t n_cpu_moe;
	int fa;            /* index into drv_fa_choices: auto, on, off */
	const char *label; /* a name for the configuration in the JSON/CSV lines */
	uint32_t threads, ubatch, batch, ctx;
	uint32_t pp, tg, reps, warmup, first_token;
	uint32_t rep_stride;     /* run k (warm-ups first) starts at first_token + k * rep_stride */
	int all_logits;          /* the prefill outputs logits for every token */
	const char *logits_out;  /* FNV-1a 64 per output token (first repetition) */
	const char *logits_raw;  /* raw float32 logits of every output token (first repetition) */
	const char *routes_out;  /* routed experts per (token, layer) (first repetition) */
	const char *jsonl, *csv; /* one line per repetition, then a summary line */
	int require_identical;   /* exit 4 when repetitions' logits differ */
	int no_repack;           /* llama_model_params.use_extra_bufts = false */
	int load_mode;           /* index into the --load-mode choices; 0: llama.cpp's default */
	int verbose;
};

extern const char *const drv_fa_choices[]; /* "auto", "on", "off", NULL */

/* ---- dumps and hashes (driver_dump.c) ---- */

uint64_t drv_fnv1a(uint64_t h, const void *p, size_t n);
#define DRV_FNV_INIT 0xcbf29ce484222325ull

/* The expert ids the eval callback sees, per (token, layer). */
struct drv_routes {
	FILE *f;                       /* NULL: no dump */
	int on;                        /* recording now (the first measured repetition) */
	uint32_t first_token, n_vocab; /* token id at position p: (first_token + p) % n_vocab */
	uint32_t base;                 /* position of the batch being decoded */
	uint32_t *seen;                /* [n_layer]: tokens recorded at each layer in this batch */
	uint32_t n_layer;
	uint64_t rows; /* lines written */
	int bad;       /* a tensor that was not I32 [k, n] */
};
int drv_routes_open(struct drv_routes *r, const char *path, uint32_t n_layer, uint32_t first_token,
		    uint32_t n_vocab);
/* The next llama_decode's batch starts at position pos. */
void drv_routes_batch(struct drv_routes *r, uint32_t pos);
/* The llama_context_params.cb_eval for it. */
bool drv_routes_cb(struct ggml_tensor *t, bool ask, void *user);
int drv_routes_close(struct drv_routes *r);

/* One repetition's figures. */
struct drv_rep {
	double pp_s;          /* prefill wall time */
	double *tg_ms;        /* [tg] each decode step */
	double tg_s;          /* their sum */
	uint64_t logits_hash; /* over every output token's logits, in order */
	uint64_t nonfinite;   /* NaN/Inf logits */
	uint32_t outputs;     /* output tokens hashed */
};

void drv_report_rep(const struct drv_opts *o, FILE *jsonl, FILE *csv, unsigned rep, const struct drv_rep *r);
void drv_report_summary(const struct drv_opts *o, FILE *jsonl, FILE *csv, const struct drv_rep *reps,
			unsigned n, int identical);

#endif /* FS_LLAMA_DRIVER_H */
