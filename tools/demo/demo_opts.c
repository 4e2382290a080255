/* SPDX-License-Identifier: Apache-2.0 */
/* demo_opts.c: fs-demo-engine's command line. */
#include <stdio.h>
#include <string.h>

#include "demo.h"
#include "fs_opt.h"

static const char usage[] = "usage: fs-demo-engine [OPTIONS]\n"
			    "\n"
			    "A stand-in MoE inference engine: attaches to foresightd, replays a routing\n"
			    "trace window by window (post predictions, look up each expert, read it from\n"
			    "its slot or from the arena, verify its checksum, post the usage) and checks\n"
			    "that every byte it reads is right.  Keeps going on the CPU path if the\n"
			    "daemon goes away.\n"
			    "\n";
static const char tail[] = "\n"
			   "The last two lines are \"hits: H misses: M hit rate: x%\" and\n"
			   "\"verified reads: N mismatches: M\".  Exit status: 0 when every read verified\n"
			   "(N > 0, M = 0), 1 on a mismatch, 2 on a usage error or when it cannot attach.\n"
			   "SIGINT or SIGTERM ends the run after the current window, with these lines.\n";

const char *demo_predict_name(enum demo_predict p)
{
	return p == PREDICT_NONE ? "none" : p == PREDICT_ORACLE ? "oracle" : "recency";
}

static const char *const predict_names[] = {"none", "oracle", "recency", NULL};

int demo_parse(int argc, char **argv, struct demo_opts *o)
{
	*o = (struct demo_opts){.name = "fs-demo-engine",
				.windows = 200,
				.skew = 1.0,
				.locality = 0.3,
				.seed = 1,
				.tokens = 1,
				.predict = PREDICT_ORACLE,
				.recall = 0.6,
				.decoys = 2};
	int predict = (int)o->predict;
	_Static_assert(PREDICT_NONE == 0 && PREDICT_ORACLE == 1 && PREDICT_RECENCY == 2,
		       "predict_names' order");
	const struct fs_opt opts[] = {
		FS_OPT_STR("socket", "PATH", &o->socket,
			   "control socket (default: $FORESIGHT_SOCKET, else " FS_DEFAULT_SOCKET ")"),
		FS_OPT_STR("name", "NAME", &o->name, "name shown by `fsctl clients`"),
		FS_OPT_U32("windows", "N", &o->windows, 1, UINT32_MAX / 2, "decode windows to run"),
		FS_OPT_U32("tokens", "T", &o->tokens, 1, 4096, "tokens per window"),
		FS_OPT_U64("window-us", "X", &o->window_us, 0, 60000000,
			   "sleep X microseconds per window to pace it"),
		FS_OPT_U64("hold-us", "X", &o->hold_us, 0, 60000000,
			   "a slow engine: spend X microseconds inside each window, its epoch held "
			   "(spread over the layers, as their compute would be)"),
		FS_OPT_STR(
			"trace", "FILE", &o->trace,
			"replay a route trace (CSV or .fstrace), wrapping around; else a synthetic trace:"),
		FS_OPT_U32("layers", "N", &o->layers, 1, FS_TRACE_MAX_LAYERS,
			   "synthetic: layers (default: the daemon's model)"),
		FS_OPT_U32("experts", "N", &o->experts, 1, FS_TRACE_MAX_EXPERTS,
			   "synthetic: experts per layer (default: the daemon's)"),
		FS_OPT_U32("topk", "K", &o->topk, 1, FS_TRACE_MAX_TOPK,
			   "synthetic: experts per token (default: the daemon's, else 8)"),
		FS_OPT_DBL("skew", "S", &o->skew, 0, 16, "synthetic: Zipf exponent of expert popularity"),
		FS_OPT_DBL("locality", "P", &o->locality, 0, 1,
			   "synthetic: chance a token re-uses each expert of the previous token"),
		FS_OPT_U64("seed", "N", &o->seed, 0, UINT64_MAX, "synthetic trace and predictor seed"),
		FS_OPT_CHOICE("predict", "KIND", &predict, predict_names, "none | oracle | recency"),
		FS_OPT_DBL("recall", "R", &o->recall, 0, 1,
			   "oracle: chance each true next-layer expert is posted"),
		FS_OPT_U32("decoys", "D", &o->decoys, 0, 1024, "oracle: wrong experts posted per layer"),
		FS_OPT_FLAG("quiet", 'q', &o->quiet, "no progress lines"),
	};
	const struct fs_opt_cmd cmd = {"fs-demo-engine", usage, tail, opts, FS_OPT_N(opts)};
	int rc = fs_opt_parse(&cmd, argc, argv);
	if (rc == FS_OPT_HELP)
		return -1;
	if (rc < 0)
		return 2;
	o->predict = (enum demo_predict)predict;
	return 0;
}
