/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay.h: fs-replay, the trace-replay simulator.  It runs the daemon's
 * own hot engine and residency core (fs_engine, fs_residency: the libraries
 * foresightd links) with a routing trace on a virtual clock, and measures
 * what each policy does to distinct misses and to the time per window.
 *
 * Files: replay_main.c (command line), replay_opts.c (options),
 * replay_policy.c (the policies as core configurations), replay_profile.c
 * (static profiles from prefill or warm-up), replay_predict.c (the
 * oracle-noised router-ahead predictor), replay_bus.c (the virtual bus: the
 * hot engine's backend), replay_run.c (one policy over one trace),
 * replay_report.c (table, JSON), replay_sweep.c (CSV and plots).
 */
#ifndef REPLAY_H
#define REPLAY_H

#include <stdint.h>
#include <stdio.h>

#include "fs_trace.h"
#include "fsd_options.h"
#include "fsr.h"
#include "replay_why.h"

/* The policies of --compare, in table order. */
enum replay_policy_id {
	RP_STATIC = 0,       /* baseline: the profile, frozen; misses go to the CPU */
	RP_LRU,              /* baseline: per-layer LRU, cold, every miss lands a window later */
	RP_STATIC_RECENCY,   /* static tier + recency tier */
	RP_STATIC_PREDICTED, /* static tier + predicted tier (oracle-noised predictions) */
	RP_ALL,              /* all three tiers */
	RP_LEARNED,          /* all three tiers, predictions from the core's learner (no oracle) */
	RP_COMPARE_N,
	RP_LRU_WARM = RP_COMPARE_N, /* sensitivity: the LRU seeded with the profile */
	RP_STATIC_LAYER,            /* oracle check: static, each layer its own share (replay_layer.c) */
	RP_STRATA_ADAPT,            /* peer: static, adapted in batches as Strata does (replay_strata.c) */
	RP_N
};
const char *replay_policy_name(enum replay_policy_id p);
int replay_policy_by_name(const char *name); /* -1 when unknown */

/* The router-ahead recall table: share of a token's routed experts that
 * the predictor ranks within the first 10 / 24 / 48 candidates (for top-10
 * routing; the ranks scale with top-k), 1, 2 and 3 layers ahead. */
struct replay_recall {
	double at[3][3]; /* [horizon - 1][rank band] in 0..1, non-decreasing per row */
};
void replay_recall_default(struct replay_recall *rc);
/* One horizon's row from "H:A,B,C" (percent within ranks 10/24/48, scaled
 * to top-k; A <= B <= C <= 100).  0, or -1 on a malformed spec. */
int replay_recall_parse(const char *s, struct replay_recall *rc);

/* DECOYS_NONE: the other ranks stay empty, a predictor with the table's
 * recall that never names an expert the window does not use (a bound on
 * what precision is worth: docs/results/replay.md, "Session 9"). */
enum replay_decoys { DECOYS_POPULAR = 0, DECOYS_UNIFORM, DECOYS_NONE };

/* The model of the machine and of the engine, and the knobs of our tiers. */
struct replay_model {
	double intercept_ms;        /* time per window with no miss (13.0) */
	double miss_ms;             /* per extra miss per layer-window (2.78) */
	double bus_gbps;            /* one card's link (13.5: PCIe Gen4 x8) */
	uint64_t expert_bytes;      /* when the trace records none */
	uint32_t delay;             /* landing delay of cross-window copies, windows (0: at landing) */
	uint32_t tokens_per_window; /* T */
	double slots_frac;          /* slots as a share of layers x experts (used when slots == 0) */
	uint32_t slots;             /* slots of the one card */
	uint32_t warmup;            /* decode windows that only build the profile */
	uint64_t seed;              /* the predictor's noise */
	struct replay_recall recall;
	enum replay_decoys decoys;
	/* foresightd's options as fs-replay read them (replay_opts.c): its
	 * FSD_POLICY rows (fsd_options.h) configure our tiers through the
	 * daemon's own fsd_config_residency (replay_policy.c; the baselines
	 * take foresightd's defaults instead).  The machine's rows among them
	 * (cards, slots, bus_gbps, publish_us) are copied into the fields of
	 * the same names here, which the bus, the sweeps and the tests set. */
	struct fsd_config daemon;
	/* fs-replay's own knobs of our tiers, which foresightd has no option for. */
	uint32_t recency_override; /* --recency auto|all|pred: FSR_AUTO, FSR_ALL, FSR_AUTO_PRED; 0: none */
	int adapt;                 /* 0: --no-adapt, the static tier frozen at its profile */
	float pred_min_score;
	/* The daemon around the core (replay_run.c): foresightd's names. */
	uint32_t cards;      /* --cards: cards, each with `slots` slots and its own bus (1) */
	uint32_t clients;    /* --clients: engines, each its own slice of the trace (1) */
	uint32_t publish_us; /* --publish-us: at most one epoch per this (0: every change at once) */
	uint32_t pred_max;   /* --pred-max: best N not held per horizon, as fs-engine-bench (0: all) */
	int learn_past;      /* --learn-past: the learner first learns the prefill and warm-up routing */
};
void replay_model_defaults(struct replay_model *m);

#define REPLAY_PER_MAX 8u

/* What one policy did over the scored windows. */
struct replay_result {
	char policy[32];
	uint32_t windows; /* scored */
	uint32_t layers;
	uint32_t slots;
	uint64_t uses; /* distinct (window, layer, expert) uses */
	uint64_t hits;
	uint64_t misses;      /* distinct misses */
	uint64_t copies;      /* copies landed */
	uint64_t bytes;       /* bytes moved over the bus */
	uint64_t landed_late; /* copies that landed after their deadline */
	uint64_t late_uses;   /* uses that missed while their copy was in flight */
	uint64_t too_late;    /* wants the scheduler did not copy: could not land in time */
	uint64_t promoted;    /* experts moved into the static tier without a copy */
	uint64_t predictions; /* PREDICT records posted */
	double hit_rate;
	double misses_per_lw; /* distinct misses per layer-window */
	double ms_per_window; /* the virtual clock: intercept + miss cost */
	double tokens_per_s;
	/* share of the headroom over static this row captures (NAN: no static
	 * row): of the zero-miss clock's, and of the clairvoyant bound's
	 * (replay_bound.h; filled by replay_report_shares) */
	double share_zero, share_bound;
	/* --cards N --clients M (the first REPLAY_PER_MAX of each): what each
	 * engine looked up and hit, and the copies each card landed, over the
	 * scored windows, and the profile's fill on each card before them (the
	 * agreement test, replay_agree_test.c, compares them with a real
	 * foresightd's). */
	uint64_t client_uses[REPLAY_PER_MAX], client_hits[REPLAY_PER_MAX];
	uint64_t card_copies[REPLAY_PER_MAX], card_fill[REPLAY_PER_MAX];
	/* where the misses come from (replay_why.h): each miss in one class of
	 * each list, so each list sums to `misses`; why_counted 0: the row was
	 * not classified (the strata-adapt peer, the clairvoyant bound) */
	int why_counted;
	uint64_t why[RW_N], why_hist[RH_N], why_info[RI_N];
	/* the core's learned predictor over the whole run (learn.on 0: none ran) */
	struct fsr_learn_stats learn;
};

/* The trace and what builds the profile. */
struct replay_input {
	const struct fs_trace *trace;
	const char *name;         /* for reports */
	uint32_t *profile;        /* [layers * experts] counts (replay_profile.c) */
	uint32_t profile_tokens;  /* tokens the profile counted */
	const char *profile_from; /* "prefill" or "warm-up" */
};

/* replay_profile.c: counts of the trace's prefill rows plus its first
 * `warmup` windows of T tokens.  Returns tokens counted, -errno on error. */
int replay_profile_build(const struct fs_trace *t, uint32_t warmup, uint32_t tokens_per_window,
			 uint32_t *counts);

/* replay_layer.c: static-layer's profile: each layer's `per_layer` most
 * used experts of `counts` (ties: first seen in the profile's rows), ranked
 * per_layer..1, the rest 0.  Returns how many were chosen, -errno. */
int replay_layer_profile(const struct fs_trace *t, const uint32_t *counts, uint32_t warmup,
			 uint32_t tokens_per_window, uint32_t per_layer, uint32_t *out);

/* replay_strata.c: the strata-adapt peer (not a core configuration: its
 * own loop on the replay's clock); one card, one engine.  0 or -errno. */
int replay_strata_run(const struct replay_input *in, const struct replay_model *m, struct replay_result *out,
		      char *err, size_t errlen);

/* replay_policy.c: the core configuration of a policy on this trace. */
int replay_policy_config(enum replay_policy_id p, const struct replay_model *m, const struct fs_trace *t,
			 struct fsr_config *cfg);
int replay_policy_uses_profile(enum replay_policy_id p);
int replay_policy_predicts(enum replay_policy_id p); /* the engine posts the oracle's predictions */
int replay_policy_ours(enum replay_policy_id p);     /* our tiers: foresightd's options apply */
uint32_t replay_slots(const struct replay_model *m, const struct fs_trace *t);

/* replay_run.c: one policy, one trace; deterministic for equal inputs. */
int replay_run(const struct replay_input *in, const struct replay_model *m, enum replay_policy_id p,
	       struct replay_result *out, char *err, size_t errlen);

/* replay_report.c */
/* Fill share_zero / share_bound of every row: static, and the row named
 * "clairvoyant" when present, are the references. */
void replay_report_shares(struct replay_result *res, int n, const struct replay_model *m);
void replay_report_header(FILE *out, const struct replay_input *in, const struct replay_model *m);
void replay_report_table(FILE *out, const struct replay_result *res, int n);
void replay_report_json(FILE *out, const struct replay_input *in, const struct replay_model *m,
			const struct replay_result *res, int n);
void replay_report_csv(FILE *out, const struct replay_result *res, int n);
void replay_report_markdown(FILE *out, const struct replay_result *res, int n);
/* --why: each classified row's misses by class (replay_why.h), the four
 * classes' sums and the never-predicted ones against lru's misses when an
 * lru row is there; markdown: as a Markdown table. */
void replay_report_why(FILE *out, const struct replay_result *res, int n, int markdown);

/* replay_learn_report.c: the learned predictor's recall and precision
 * per horizon and its calibration (after --why's tables; --json "learn"). */
void replay_report_learn(FILE *out, const struct replay_result *res, int n, int markdown);
void replay_report_learn_json(FILE *out, const struct replay_result *r);

/* replay_stats.c: --trace-stats. */
int replay_trace_stats(FILE *out, const struct fs_trace *t, uint32_t tokens_per_window);

/* replay_sweep.c: --sweep slots|delay into DIR: CSV always, a plot when
 * gnuplot is installed. */
int replay_sweep(const struct replay_input *in, const struct replay_model *m, const char *what,
		 const char *dir, const char *tag, const enum replay_policy_id *pols, int npols);

#endif /* REPLAY_H */
