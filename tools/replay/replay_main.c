/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-replay: replay a routing trace through foresightd's residency core on
 * a virtual clock and compare policies (replay.h says what each file does).
 *
 *   fs-replay ../shared/data/route-traces/qwen.route.csv --compare --slots-frac 0.25
 *   fs-replay --synthetic --compare --json
 *   fs-replay --synthetic --sweep delay --out docs/results
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "replay_bound.h"
#include "replay_calib.h"
#include "replay_opts.h"

static int load(struct replay_opts *o, struct fs_trace *t)
{
	char err[FS_TRACE_ERRLEN] = "";
	int rc;
	if (o->synthetic && o->use_model) {
		struct fs_trace_model m = o->tmodel;
		m.layers = o->gen.layers;
		m.experts = o->gen.experts;
		m.topk = o->gen.topk;
		m.tokens = o->gen.windows * o->gen.tokens_per_window;
		m.seed = o->gen.seed;
		m.expert_bytes = o->gen.expert_bytes;
		rc = fs_trace_model_generate(t, &m, err, sizeof(err));
	} else {
		rc = o->synthetic ? fs_trace_generate(t, &o->gen, err, sizeof(err)) :
				    fs_trace_load(t, o->path, err, sizeof(err));
	}
	if (rc)
		fprintf(stderr, "fs-replay: %s\n", err[0] ? err : strerror(-rc));
	return rc;
}

int main(int argc, char **argv)
{
	struct replay_opts o;
	int rc = replay_opts_parse(&o, argc, argv);
	if (rc)
		return rc > 0 ? 0 : 2;
	enum calib_format cf = o.json ? CALIB_JSON : o.markdown ? CALIB_MARKDOWN : CALIB_TABLE;
	if (o.calibrate && !o.path) {
		int bad = replay_calibrate(stdout, &o.tmodel, cf);
		return bad == 0 ? 0 : 1;
	}
	struct fs_trace t;
	if (load(&o, &t))
		return 1;
	if (o.calibrate) {
		int bad = replay_calibrate_trace(stdout, &o.tmodel, cf, &t, o.path);
		fs_trace_free(&t);
		return bad == 0 ? 0 : 1;
	}
	if (o.model.warmup >= fs_trace_windows(&t, o.model.tokens_per_window)) {
		fprintf(stderr, "fs-replay: --warmup %u leaves no window to score\n", o.model.warmup);
		fs_trace_free(&t);
		return 2;
	}
	struct replay_input in = {
		.trace = &t,
		.name = o.synthetic ? "synthetic" : o.path,
		.profile_from = t.prefill_tokens ? (o.model.warmup ? "prefill + warm-up" : "prefill") :
						   "warm-up",
	};
	in.profile = calloc((size_t)t.layers * t.experts, sizeof(uint32_t));
	if (!in.profile) {
		fs_trace_free(&t);
		return 1;
	}
	rc = replay_profile_build(&t, o.model.warmup, o.model.tokens_per_window, in.profile);
	in.profile_tokens = rc > 0 ? (uint32_t)rc : 0;
	if (in.profile_tokens == 0 && !o.stats)
		fprintf(stderr,
			"fs-replay: no prefill rows and no --warmup: the profile is empty (ties: lowest ids)\n");

	int status = 0;
	if (o.stats) {
		status = replay_trace_stats(stdout, &t, o.model.tokens_per_window) ? 1 : 0;
	} else if (o.sweep) {
		status = replay_sweep(&in, &o.model, o.sweep, o.out_dir, o.tag, o.pols, o.npols) ? 1 : 0;
	} else {
		struct replay_result res[RP_N + 1];
		char err[256] = "";
		for (int i = 0; i < o.npols && status == 0; i++)
			if (replay_run(&in, &o.model, o.pols[i], &res[i], err, sizeof(err)) != 0) {
				fprintf(stderr, "fs-replay: %s\n", err);
				status = 1;
			}
		int n = o.npols;
		if (status == 0 && !o.no_bound) {
			rc = replay_bound_run(&in, &o.model, &res[n]);
			if (rc) {
				fprintf(stderr, "fs-replay: clairvoyant bound: %s\n", strerror(-rc));
				status = 1;
			}
			n++;
		}
		if (status == 0)
			replay_report_shares(res, n, &o.model);
		if (status == 0 && o.json) {
			replay_report_json(stdout, &in, &o.model, res, n);
		} else if (status == 0 && o.csv) {
			replay_report_csv(stdout, res, n);
		} else if (status == 0 && o.markdown) {
			replay_report_markdown(stdout, res, n);
			if (o.why) {
				replay_report_why(stdout, res, n, 1);
				replay_report_learn(stdout, res, n, 1);
			}
		} else if (status == 0) {
			replay_report_header(stdout, &in, &o.model);
			replay_report_table(stdout, res, n);
			if (o.why) {
				replay_report_why(stdout, res, n, 0);
				replay_report_learn(stdout, res, n, 0);
			}
		}
	}
	free(in.profile);
	fs_trace_free(&t);
	return status;
}
