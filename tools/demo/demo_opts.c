/* SPDX-License-Identifier: Apache-2.0 */
/* demo_opts.c: fs-demo-engine's command line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

static const char help[] =
	"usage: fs-demo-engine [OPTIONS]\n"
	"\n"
	"A stand-in MoE inference engine: attaches to foresightd, replays a routing\n"
	"trace window by window (post predictions, look up each expert, read it from\n"
	"its slot or from the arena, verify its checksum, post the usage) and checks\n"
	"that every byte it reads is right.  Keeps going on the CPU path if the\n"
	"daemon goes away.\n"
	"\n"
	"  --socket PATH       control socket (else $FORESIGHT_SOCKET, else " FS_DEFAULT_SOCKET ")\n"
	"  --name NAME         name shown by `fsctl clients` (default fs-demo-engine)\n"
	"  --windows N         decode windows to run (default 200)\n"
	"  --tokens T          tokens per window (default 1)\n"
	"  --window-us X       sleep X microseconds per window to pace it (default 0)\n"
	"  --trace FILE        replay a route trace (CSV or .fstrace), wrapping around;\n"
	"                      else a synthetic trace:\n"
	"  --layers N          synthetic: layers (default: the daemon's model)\n"
	"  --experts N         synthetic: experts per layer (default: the daemon's)\n"
	"  --topk K            synthetic: experts per token (default: the daemon's, else 8)\n"
	"  --skew S            synthetic: Zipf exponent of expert popularity (default 1.0)\n"
	"  --locality P        synthetic: chance a token re-uses each expert of the\n"
	"                      previous token (default 0.3)\n"
	"  --seed N            synthetic trace and predictor seed (default 1)\n"
	"  --predict KIND      none | oracle | recency (default oracle)\n"
	"  --recall R          oracle: chance each true next-layer expert is posted (default 0.6)\n"
	"  --decoys D          oracle: wrong experts posted per layer (default 2)\n"
	"  --quiet             no progress lines\n"
	"  --help              this text\n"
	"\n"
	"The last two lines are \"hits: H misses: M hit rate: x%\" and\n"
	"\"verified reads: N mismatches: M\".  Exit status: 0 when every read verified\n"
	"(N > 0, M = 0), 1 on a mismatch, 2 on a usage error or when it cannot attach.\n";

const char *demo_predict_name(enum demo_predict p)
{
	return p == PREDICT_NONE ? "none" : p == PREDICT_ORACLE ? "oracle" : "recency";
}

static int bad(const char *opt, const char *val, const char *want)
{
	fprintf(stderr, "fs-demo-engine: %s '%s': %s (try --help)\n", opt, val, want);
	return 2;
}

static int get_u64(const char *opt, const char *val, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(val, &end, 10);
	if (errno || end == val || *end || val[0] == '-' || v < lo || v > hi) {
		char want[80];
		snprintf(want, sizeof(want), "give an integer from %llu to %llu", (unsigned long long)lo,
			 (unsigned long long)hi);
		return bad(opt, val, want);
	}
	*out = v;
	return 0;
}

static int get_u32(const char *opt, const char *val, uint32_t lo, uint32_t hi, uint32_t *out)
{
	uint64_t v;
	int rc = get_u64(opt, val, lo, hi, &v);
	if (!rc)
		*out = (uint32_t)v;
	return rc;
}

static int get_double(const char *opt, const char *val, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(val, &end);
	if (end == val || *end || !(v >= lo && v <= hi)) {
		char want[80];
		snprintf(want, sizeof(want), "give a number from %g to %g", lo, hi);
		return bad(opt, val, want);
	}
	*out = v;
	return 0;
}

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
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		int rc = 0;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(help, stdout);
			return -1;
		} else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
			o->quiet = 1;
			continue;
		} else if (!v || strncmp(a, "--", 2) != 0) {
			fprintf(stderr, "fs-demo-engine: unknown or incomplete option '%s' (try --help)\n",
				a);
			return 2;
		}
		i++; /* every other option takes a value */
		if (!strcmp(a, "--socket"))
			o->socket = v;
		else if (!strcmp(a, "--name"))
			o->name = v;
		else if (!strcmp(a, "--trace"))
			o->trace = v;
		else if (!strcmp(a, "--windows"))
			rc = get_u32(a, v, 1, UINT32_MAX / 2, &o->windows);
		else if (!strcmp(a, "--tokens"))
			rc = get_u32(a, v, 1, 4096, &o->tokens);
		else if (!strcmp(a, "--window-us"))
			rc = get_u64(a, v, 0, 60000000, &o->window_us);
		else if (!strcmp(a, "--layers"))
			rc = get_u32(a, v, 1, FS_TRACE_MAX_LAYERS, &o->layers);
		else if (!strcmp(a, "--experts"))
			rc = get_u32(a, v, 1, FS_TRACE_MAX_EXPERTS, &o->experts);
		else if (!strcmp(a, "--topk"))
			rc = get_u32(a, v, 1, FS_TRACE_MAX_TOPK, &o->topk);
		else if (!strcmp(a, "--skew"))
			rc = get_double(a, v, 0, 16, &o->skew);
		else if (!strcmp(a, "--locality"))
			rc = get_double(a, v, 0, 1, &o->locality);
		else if (!strcmp(a, "--seed"))
			rc = get_u64(a, v, 0, UINT64_MAX, &o->seed);
		else if (!strcmp(a, "--recall"))
			rc = get_double(a, v, 0, 1, &o->recall);
		else if (!strcmp(a, "--decoys"))
			rc = get_u32(a, v, 0, 1024, &o->decoys);
		else if (!strcmp(a, "--predict")) {
			if (!strcmp(v, "none"))
				o->predict = PREDICT_NONE;
			else if (!strcmp(v, "oracle"))
				o->predict = PREDICT_ORACLE;
			else if (!strcmp(v, "recency"))
				o->predict = PREDICT_RECENCY;
			else
				rc = bad(a, v, "give none, oracle or recency");
		} else {
			fprintf(stderr, "fs-demo-engine: unknown option '%s' (try --help)\n", a);
			return 2;
		}
		if (rc)
			return rc;
	}
	return 0;
}
