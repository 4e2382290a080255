/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-trace-convert: CSV route trace -> compact .fstrace (what fs-replay
 * reads), or --info to describe a trace of either format.
 */
#include <stdio.h>

#include "fs_opt.h"
#include "fs_trace.h"

static const char usage[] = "usage: fs-trace-convert [--tokens T] IN OUT\n"
			    "       fs-trace-convert --info [--tokens T] IN\n"
			    "\n"
			    "Reads a routing trace (CSV route trace, or .fstrace) and writes it as\n"
			    "a compact binary .fstrace.  --info only prints what the trace holds.\n"
			    "\n";
static const char tail[] = "\nExit status: 0 ok, 1 the trace could not be read or written, 2 usage.\n";

static void describe(const struct fs_trace *t, const char *path, uint32_t tpw)
{
	struct fs_trace_stats st;
	printf("%s: model %s, %u layers x %u experts, top-%u, %u decode tokens, %u prefill tokens\n", path,
	       t->model[0] ? t->model : "?", t->layers, t->experts, t->topk, t->tokens, t->prefill_tokens);
	if (fs_trace_stats(t, tpw, &st) == 0)
		printf("  %u windows of %u token(s); distinct experts per window-layer %.2f; "
		       "reuse from previous token %.1f %%; top-10 %% experts take %.1f %% of uses\n",
		       fs_trace_windows(t, tpw), tpw, st.distinct_per_window, 100.0 * st.reuse,
		       100.0 * st.top_decile_share);
}

int main(int argc, char **argv)
{
	int info = 0;
	uint32_t tpw = 1;
	const char *pos[2];
	unsigned npos = 0;
	const struct fs_opt opts[] = {
		FS_OPT_FLAG("info", 0, &info, "only print what the trace holds"),
		FS_OPT_U32("tokens", "T", &tpw, 1, UINT32_MAX,
			   "tokens per decode window for the window statistics"),
	};
	const struct fs_opt_cmd cmd = {"fs-trace-convert", usage, tail, opts, FS_OPT_N(opts), pos, 2, &npos};
	fs_opt_parse_or_exit(&cmd, argc, argv);
	if (npos != (info ? 1u : 2u)) {
		fs_opt_help(&cmd, stderr);
		return 2;
	}
	struct fs_trace t;
	char err[FS_TRACE_ERRLEN];
	if (fs_trace_load(&t, pos[0], err, sizeof(err))) {
		fprintf(stderr, "fs-trace-convert: %s\n", err);
		return 1;
	}
	describe(&t, pos[0], tpw);
	int rc = 0;
	if (!info) {
		if (fs_trace_write_bin(&t, pos[1], err, sizeof(err))) {
			fprintf(stderr, "fs-trace-convert: %s\n", err);
			rc = 1;
		} else {
			printf("wrote %s\n", pos[1]);
		}
	}
	fs_trace_free(&t);
	return rc;
}
