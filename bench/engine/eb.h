/* SPDX-License-Identifier: Apache-2.0 */
/*
 * eb.h: fs-engine-bench, an MoE decode loop on a GPU (or, without one, on
 * the host backend) with foresightd on and off.  Files:
 *   eb_main.c    subcommands: engine, run, calibrate
 *   eb_engine.c  one engine process: the decode loop of one mode
 *   eb_driver.c  `run`: the daemon per mode, the engines, the table, the CSV
 *   eb_trace.c   routing (synthetic or a route CSV), windows, the profile
 *   eb_cpu.c     the CPU expert path (threads) and the CPU dense part
 *   eb_dev*.c/cu the "device": CUDA cards, or host threads reading the
 *                host backend's slot pool
 *   eb_ctl.c     control-plane calls (stats, profile load)
 *   eb_math.h    the integer arithmetic shared by host and device
 */
#ifndef EB_H
#define EB_H

#include <stdint.h>
#include <stdio.h>

#include "eb_math.h"
#include "fs_trace.h"

/* The modes, in table order.  Peers: what users run without foresightd,
 * in-process on the engine's own slots (static: the frozen profile, the
 * baseline of issue #10; strata-adapt; lru).  Daemon modes: foresightd's
 * tiers (learned: the engine posts usage only and foresightd's learned
 * predictor predicts, no oracle; perfect: both tiers fed by an oracle that
 * is never wrong, a bound, not a predictor).  zero: every expert
 * resident, the ceiling. */
#define EB_MODES(X)                           \
	X(EB_STATIC, "static", 1, 0, 0)       \
	X(EB_STRATA, "strata-adapt", 1, 0, 0) \
	X(EB_LRU, "lru", 1, 0, 0)             \
	X(EB_RECENCY, "recency", 0, 1, 0)     \
	X(EB_PREDICT, "predict", 0, 1, 1)     \
	X(EB_BOTH, "both", 0, 1, 1)           \
	X(EB_LEARNED, "learned", 0, 1, 0)     \
	X(EB_PERFECT, "perfect", 0, 1, 1)     \
	X(EB_ALT, "alt", 0, 1, 1)             \
	X(EB_ZERO, "zero", 0, 0, 0)
#define EB_MODE_ENUM(id, name, peer, daemon, predicts) id,
enum eb_mode { EB_MODES(EB_MODE_ENUM) EB_NMODES };
#undef EB_MODE_ENUM
#define EB_BASELINE EB_STATIC
const char *eb_mode_name(int m);
int eb_mode_by_name(const char *s); /* -1 when unknown; "baseline" is static */
int eb_mode_peer(int m);            /* in-process, the engine's own slots (static, strata-adapt, lru) */
int eb_mode_daemon(int m);          /* uses the daemon's slots */
int eb_mode_predicts(int m);        /* posts predictions */
/* Option checks shared by the driver's and an engine's fs_opt tables
 * (common/fs_opt.h FS_OPT_FN rows): 0, or -1 with err filled.
 * eb_opt_mode: a mode's name into an int (eb_mode_by_name). */
int eb_opt_mode(void *dst, const char *val, char *err, size_t errlen);
/* --card-down CARD@WINDOW: checked; dst (const char **) keeps the text. */
int eb_opt_card_down(void *dst, const char *val, char *err, size_t errlen);
/* The same, into two numbers: dst is uint32_t[2] {card, window}. */
int eb_card_down_parse(const char *val, uint32_t *card, uint32_t *window);

enum eb_device { EB_DEV_HOST = 0, EB_DEV_CUDA = 1 };

/* How the routing is made (the driver and every engine build the same). */
struct eb_route_opts {
	const char *trace;       /* a route CSV / .fstrace, or NULL: synthetic */
	int zipf;                /* --routing zipf: tools/trace's Zipf generator; else the calibrated model */
	uint32_t session_tokens; /* the calibrated model: a new session every N tokens (500) */
	double skew, locality;   /* --routing zipf */
	uint64_t gen_seed;
	double tpw;               /* mean tokens per window (2.5) */
	uint32_t profile_windows; /* windows before decode that build the profile */
	uint32_t windows;         /* decode windows */
};
void eb_route_defaults(struct eb_route_opts *o);
/* The routing options, the same rows in the driver's and an engine's
 * fs_opt tables (common/fs_opt.h; `ro` a struct eb_route_opts *;
 * eb_route_choices: "model", "zipf"). */
extern const char *const eb_route_choices[];
// clang-format off
#define EB_ROUTE_OPTS(ro)                                                                            \
	FS_OPT_STR("trace", "FILE", &(ro)->trace,                                                    \
		   "a route CSV / .fstrace instead of synthetic routing (the shape from it)"),       \
	FS_OPT_CHOICE("routing", "model|zipf", &(ro)->zipf, eb_route_choices,                        \
		      "synthetic routing: the calibrated model of tools/trace, or the Zipf generator"), \
	FS_OPT_U32("session-tokens", "N", &(ro)->session_tokens, 1, UINT32_MAX,                      \
		   "--routing model: a new session every N tokens"),                                  \
	FS_OPT_DBL("skew", "S", &(ro)->skew, 0, 1e3, "--routing zipf: the popularity's exponent"),   \
	FS_OPT_DBL("locality", "P", &(ro)->locality, 0, 1,                                           \
		   "--routing zipf: the chance a token keeps each expert of the one before"),          \
	FS_OPT_U64("gen-seed", "N", &(ro)->gen_seed, 0, UINT64_MAX, "the synthetic routing's seed"), \
	FS_OPT_DBL("tpw", "T", &(ro)->tpw, 1, EB_MAX_T, "mean tokens per window (2.5: 2,3,2,3,...)"), \
	FS_OPT_U32("profile-windows", "N", &(ro)->profile_windows, 0, UINT32_MAX,                    \
		   "windows before decode that build the profile"),                                   \
	FS_OPT_U32("windows", "N", &(ro)->windows, 1, UINT32_MAX, "decode windows")
// clang-format on

/* The routing, cut into windows. */
struct eb_route {
	struct fs_trace t;
	uint32_t nwin;     /* decode windows */
	uint32_t *first;   /* [nwin] first decode token */
	uint8_t *ntok;     /* [nwin] tokens, 1..EB_MAX_T */
	uint32_t *profile; /* [layers * experts] use counts (prefill + profile windows) */
	uint32_t profile_tokens;
};
/* Build for a model of L layers x E experts, top-K (a trace file must
 * match).  0, or -1 with err filled. */
int eb_route_build(struct eb_route *r, const struct eb_route_opts *o, uint32_t L, uint32_t E, uint32_t K,
		   char *err, size_t errlen);
void eb_route_free(struct eb_route *r);
/* What made the routing, for tables: the trace's file name, "calibrated
 * model" or "zipf S/P". */
void eb_route_describe(const struct eb_route_opts *o, char *out, size_t len);

/* One expert of a layer in a window: which tokens use it. */
struct eb_use {
	uint16_t expert;
	uint8_t mask; /* bit t: token t of the window routes to it */
};
/* Distinct experts of `layer` in window w, in first-use order. */
uint32_t eb_route_uses(const struct eb_route *r, uint32_t w, uint32_t layer, struct eb_use *out);

/* ---- the own pool (eb_pool.c): peers and zero-miss --------------------- */

#define EB_MAX_CARDS 16u
enum eb_pool_policy { EB_POOL_STATIC = 0, EB_POOL_STRATA, EB_POOL_LRU, EB_POOL_ZERO };
const char *eb_pool_policy_name(enum eb_pool_policy p);
struct eb_pool_opts {
	enum eb_pool_policy policy;
	struct fs_client *client; /* the arena: the bytes to copy */
	uint32_t layers, experts, topk, cards;
	const uint32_t *card_of; /* [layers]: the card a layer runs on */
	uint64_t slots_card[16]; /* slots per card */
	uint64_t slot_bytes;     /* the largest expert */
	const uint32_t *profile; /* [layers * experts] use counts */
	double tpw;              /* mean tokens per window */
	double bus_gbps;         /* per card, the same budget as the daemon's (bytes/ns) */
	uint32_t adapt_every;    /* strata-adapt: 4 */
	float decay;             /* strata-adapt: 0.7 */
	uint32_t max_swaps;      /* strata-adapt: 96 */
	uint32_t lru_inserts;    /* lru: uploads per layer per window, 2 */
};
struct eb_pool;
struct eb_dev;
int eb_pool_create(struct eb_pool **out, struct eb_dev *dev, const struct eb_pool_opts *o, char *err,
		   size_t errlen);
void eb_pool_free(struct eb_pool *p);
/* The expert's slot (device pointer; host pointer on the host device), or
 * NULL: not held, or its copy has not landed. */
const void *eb_pool_lookup(const struct eb_pool *p, uint32_t layer, uint32_t x);
/* After a layer of window w (its distinct uses): lru touches and uploads,
 * strata-adapt counts.  0, or -1 when a copy failed. */
int eb_pool_layer_done(struct eb_pool *p, uint32_t w, uint32_t layer, const struct eb_use *u, uint32_t n,
		       int measured);
/* After a window: strata-adapt adapts every adapt_every windows. */
int eb_pool_window_end(struct eb_pool *p, int measured);
void eb_pool_counts(const struct eb_pool *p, uint64_t *copies, uint64_t *bytes, uint64_t *swaps);

/* ---- CPU path -------------------------------------------------------- */

/* An expert to compute: its bytes and which tokens use it; y[t] results. */
struct eb_job {
	const void *ptr;
	uint64_t bytes;
	uint32_t expert;
	uint32_t mask;
	uint32_t y[EB_MAX_T];
};

struct eb_cpu;
/* A pool of `threads` workers that compute jobs, paced to `gbps` (0: as
 * fast as they go): a batch of B bytes takes at least B / gbps. */
int eb_cpu_create(struct eb_cpu **out, unsigned threads, double gbps);
void eb_cpu_destroy(struct eb_cpu *c);
/* Compute every job (y for the tokens in mask), blocking. */
void eb_cpu_run(struct eb_cpu *c, struct eb_job *jobs, uint32_t n, const uint32_t *keys, uint32_t ntok);
/* The same, in the calling thread, unpaced (the host "device"). */
void eb_cpu_jobs(struct eb_job *jobs, uint32_t n, const uint32_t *keys, uint32_t ntok);
/* The dense part on the CPU: h[ntok][EB_D] in place. */
void eb_cpu_dense(uint32_t *h, uint32_t ntok, uint32_t layer, uint32_t iters);

/* ---- the device -------------------------------------------------------- */

struct eb_dev;
int eb_dev_open(struct eb_dev **out, enum eb_device kind, uint32_t cards, char *err, size_t errlen);
void eb_dev_close(struct eb_dev *d);
/* Device memory of the engine's own (in-process) pool on card, and a copy
 * into it from host memory. */
void *eb_dev_alloc(struct eb_dev *d, uint32_t card, uint64_t bytes);
int eb_dev_put(struct eb_dev *d, uint32_t card, void *dst, const void *src, uint64_t bytes);
/* Dense part of a layer on card: h (host, [ntok][EB_D]) goes in, comes back. */
int eb_dev_dense(struct eb_dev *d, uint32_t card, uint32_t *h, uint32_t ntok, uint32_t layer, uint32_t iters);
/* Start the resident experts of a layer on card (ptr: device pointers, or
 * host pointers on the host device); wait fills jobs[].y. */
int eb_dev_experts_start(struct eb_dev *d, uint32_t card, struct eb_job *jobs, uint32_t n,
			 const uint32_t *keys, uint32_t ntok);
int eb_dev_experts_wait(struct eb_dev *d, uint32_t card);
/* Measured seconds of the dense part at `iters` on card 0 (calibration). */
double eb_dev_dense_time(struct eb_dev *d, uint32_t iters, uint32_t reps);
/* The router-ahead kernel (CUDA only; -1 on the host device) on card's
 * side stream, and a wait for every launch (before its inputs change). */
struct fs_ra_params;
int eb_dev_ra(struct eb_dev *d, uint32_t card, const struct fs_ra_params *p);
int eb_dev_ra_sync(struct eb_dev *d);

/* ---- router-ahead inputs (eb_ra.c) ------------------------------------- */

/* Routers and hidden rows (bf16) that carry r's routing (eb_ra.c says how);
 * dim: the hidden size. */
struct eb_ra;
int eb_ra_create(struct eb_ra **out, const struct eb_route *r, uint32_t dim, uint64_t seed, char *err,
		 size_t errlen);
void eb_ra_free(struct eb_ra *ra);
const uint16_t *eb_ra_routers(const struct eb_ra *ra, uint64_t *bytes); /* [L][E][dim] */
const uint16_t *eb_ra_hidden_all(const struct eb_ra *ra, uint64_t *bytes);
uint64_t eb_ra_row(const struct eb_ra *ra, uint32_t dw, uint32_t layer); /* first row of (dw, layer) */
/* Measured per-token recall [horizon - 1][within 10, 24, 48 candidates]. */
void eb_ra_recall(const struct eb_ra *ra, double out[3][3]);

#ifdef EB_HAVE_CUDA
/* eb_dev_cuda.cu */
struct eb_cuda;
int eb_cuda_open(struct eb_cuda **out, uint32_t cards, char *err, size_t errlen);
void eb_cuda_close(struct eb_cuda *g);
void *eb_cuda_alloc(struct eb_cuda *g, uint32_t card, uint64_t bytes);
int eb_cuda_put(struct eb_cuda *g, uint32_t card, void *dst, const void *src, uint64_t bytes);
int eb_cuda_dense(struct eb_cuda *g, uint32_t card, uint32_t *h, uint32_t ntok, uint32_t layer,
		  uint32_t iters);
int eb_cuda_experts_start(struct eb_cuda *g, uint32_t card, struct eb_job *jobs, uint32_t n,
			  const uint32_t *keys, uint32_t ntok);
int eb_cuda_experts_wait(struct eb_cuda *g, uint32_t card);
int eb_cuda_ra(struct eb_cuda *g, uint32_t card, const struct fs_ra_params *p);
int eb_cuda_ra_sync(struct eb_cuda *g); /* 1 when done, 0 on error */
#endif

/* ---- control plane ------------------------------------------------------- */

struct eb_stats {
	double bytes, copied, late, landed_late, too_late, hits, misses, loading, predicted, learned;
};
int eb_ctl_stats(const char *socket, struct eb_stats *out, char *err, size_t errlen);
int eb_ctl_profile_load(const char *socket, uint32_t L, uint32_t E, const uint32_t *counts, char *err,
			size_t errlen);
/* Take a card down (the control verb `card`, as `fsctl card down N`). */
int eb_ctl_card_down(const char *socket, uint32_t card, char *err, size_t errlen);

/* ---- the protocol's rows and tables (eb_report.c) ------------------------- */

#define EB_MAX_REPS 32
/* One (config, repetition, mode): a CSV row. */
struct eb_rec {
	char label[64], device[8], routing[160], predictor[48];
	int rep, mode, ok;
	uint32_t cards, engines, layers, experts, topk, windows;
	uint64_t slots, expert_bytes;
	double budget, bus_gbps, cpu_gbps;
	double tps, hit, mplw, late_seen, late_daemon, bus, copies, swaps, peer;
	double bound_mplw;       /* clairvoyant misses per layer-window, -1: none */
	uint32_t promised_modes; /* bit per mode */
	int promised_reps;
};
void eb_csv_header(FILE *f);
void eb_csv_row(FILE *f, const struct eb_rec *r);
/* Tables of every config in r (grouped by label); returns the number of
 * configs with a promised row missing or failed. */
int eb_report(FILE *out, const struct eb_rec *r, size_t n);

/* ---- subcommands ---------------------------------------------------------- */
int eb_engine_main(int argc, char **argv);
int eb_driver_main(int argc, char **argv, const char *self);
int eb_calibrate_main(int argc, char **argv);
int eb_report_main(int argc, char **argv);

uint64_t eb_now_ns(void);
uint64_t eb_fnv(uint64_t h, const void *p, size_t n);
#define EB_FNV_INIT 0xcbf29ce484222325ull

#endif /* EB_H */
