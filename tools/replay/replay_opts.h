/* SPDX-License-Identifier: Apache-2.0 */
/* replay_opts.h: fs-replay's command line (replay_opts.c). */
#ifndef REPLAY_OPTS_H
#define REPLAY_OPTS_H

#include "fs_trace_model.h"
#include "replay.h"

struct replay_opts {
	const char *path; /* trace file, or NULL with synthetic */
	int synthetic;
	struct fs_trace_gen gen;      /* the synthetic trace's knobs */
	int use_model;                /* --model: the synthetic trace is the calibrated routing model */
	struct fs_trace_model tmodel; /* its fields (--model-set) */
	int calibrate;                /* --calibrate */
	int no_bound;                 /* --no-bound: leave the clairvoyant row out */
	struct replay_model model;
	int tokens_given; /* --tokens-per-window was given */
	int warmup_given;
	enum replay_policy_id pols[RP_N];
	int npols;
	int json;
	int csv, markdown; /* --csv, --markdown: the table in those forms */
	int why;           /* --why: where the misses come from, after the table */
	const char *tag;   /* --tag: names --sweep's files (default: the trace's) */
	int stats;         /* --trace-stats */
	const char *sweep; /* "slots", "delay" or NULL */
	const char *out_dir;
	struct fsd_opt_src src; /* where each of foresightd's options (model.daemon) was set */
};

/* 0: run; 1: --help printed; -1: error printed. */
int replay_opts_parse(struct replay_opts *o, int argc, char **argv);
/* 1 when fs-replay's default of foresightd's option `key` is its own (its
 * model of the machine: cards, slots, publish_us), not the row's. */
int replay_own_default(const char *key);

#endif /* REPLAY_OPTS_H */
