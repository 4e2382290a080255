/* SPDX-License-Identifier: Apache-2.0 */
/* replay_opts.c: fs-replay's options, their defaults and --help. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay_calib.h"
#include "replay_opts.h"

/*
 * The synthetic trace stands in for the discussion's box: 48 layers x 512
 * experts, top-10, windows of 2 tokens (its real windows held ~2.5 with
 * speculative decoding), 1.77 MB experts (Q4_K of 3 x 2048 x 512 weights).
 * Skew and locality: see docs/results/replay.md for how they were chosen.
 */
#define BOX_LAYERS 48
#define BOX_EXPERTS 512
#define BOX_TOPK 10
#define BOX_TOKENS 2
#define BOX_WINDOWS 1000
#define BOX_WARMUP 200
#define BOX_SKEW 1.7
#define BOX_LOCALITY 0.25
#define BOX_EXPERT_BYTES 1769472ull
/* --model: four sessions of 500 tokens build the profile (2-token windows) */
#define MODEL_WARMUP 1000

void replay_model_defaults(struct replay_model *m)
{
	*m = (struct replay_model){
		.intercept_ms = 13.0,
		.miss_ms = 2.78,
		.bus_gbps = 13.5,
		.expert_bytes = BOX_EXPERT_BYTES,
		.delay = 1,
		.tokens_per_window = 1,
		.slots_frac = 0.5,
		.seed = 1,
		.decoys = DECOYS_POPULAR,
		.recency = FSR_AUTO, /* the core's default (fsr_config_tiers) */
		.predicted = FSR_AUTO,
		.spare = FSR_AUTO,
		.adapt = 1,
		.tier_adapt = -1,
		.admit_value = -1,
		.cross_window = -1,
		.cards = 1,
		.clients = 1,
	};
	replay_recall_default(&m->recall);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fs-replay TRACE [options]      TRACE: route CSV or .fstrace\n"
		"       fs-replay --synthetic [options]\n"
		"\n"
		"Replays a routing trace through foresightd's residency core on a virtual clock.\n"
		"\n"
		"What to run:\n"
		"  --compare             static, lru, static+recency, static+predicted, all (default)\n"
		"  --policy NAME         one policy (repeatable); also lru-warm (LRU seeded with the profile),\n"
		"                        static-layer (static, each layer its share: replay_ref.py's)\n"
		"  --json                print a JSON array, one object per policy\n"
		"  --no-bound            leave out the clairvoyant bound's row (future known, Belady eviction,\n"
		"                        copies at the bus rate); every row reports its share of it\n"
		"  --csv | --markdown    print the table as CSV or as a Markdown table\n"
		"  --sweep slots|delay   hit rate vs slots / misses vs landing delay: CSV and a plot\n"
		"  --out DIR             where --sweep writes (default .)\n"
		"  --tag NAME            --sweep's files are sweep-WHAT-NAME.* (default: the trace's name)\n"
		"  --trace-stats         print the trace's reuse at lags 1-10 and distinct experts per window\n"
		"Synthetic trace (defaults: the discussion's box):\n"
		"  --layers N (48)  --experts N (512)  --topk N (10)  --windows N (1000, scored)\n"
		"  --skew S (1.7: Zipf exponent of each layer's popularity)\n"
		"  --locality P (0.25: chance a token keeps each expert of the previous token)\n"
		"  --gen-seed N (1)\n"
		"  --model               the calibrated routing model (tools/trace/fs_trace_model.h) instead\n"
		"                        of the Zipf generator; sessions of 500 tokens, warm-up 1000 windows\n"
		"  --model-set NAME=V    one of its fields (sigma, reuse, reuse_decay, topic, topics, ...)\n"
		"  --calibrate           the model against every statistic it is fitted to (with --json: rows);\n"
		"                        exit status 0 only when every row is within tolerance; with a TRACE:\n"
		"                        the model at that trace's shape against its reuse and distinct experts\n"
		"Model:\n"
		"  --tokens-per-window T   (1; synthetic 2)\n"
		"  --warmup N              windows that only build the profile (0; synthetic 200)\n"
		"  --slots N | --slots-frac F   slot budget (default fraction 0.5 of layers x experts)\n"
		"  --bus-gbps G (13.5: PCIe Gen4 x8)   --expert-bytes B (the trace's, else 1769472)\n"
		"  --delay D               windows before a copy for a miss is usable (1)\n"
		"  --intercept-ms X (13.0) --miss-ms X (2.78 per extra miss per layer-window)\n"
		"Our tiers (the baselines ignore these):\n"
		"  --recency N|auto|all|pred  --predicted N|auto  --spare N|auto   slots per layer / per card\n"
		"                      (also foresightd's names --recency-slots, --predicted-slots, --spare-slots)\n"
		"  --no-adapt          freeze the static tier at its profile\n"
		"  --tier-adapt on|off   recency vs static sizes per layer from ghost hits (ARC-like)\n"
		"  --admit-value on|off  a copy must be worth more than the resident it displaces\n"
		"  --cross-window on|off layers 0-2 of the next window predicted from this one's routing\n"
		"  --decay F (0.95 per token)  --bus-share PCT (80)  --pred-min-score S (0)\n"
		"The daemon (foresightd's hot engine, daemon/engine/, runs the replay):\n"
		"  --cards N (1)       cards, each with --slots slots and its own bus (the core places across them)\n"
		"  --clients M (1)     engines, each replaying its own contiguous slice of the scored windows\n"
		"  --publish-us N (0)  at most one epoch per N us of virtual time (foresightd's default: 200)\n"
		"  --pred-max N (0)    post only the best N candidates not held, per target layer and\n"
		"                      horizon, as fs-engine-bench's engine does (its default 8; 0: all)\n"
		"Predictor (oracle-noised router-ahead):\n"
		"  --recall H:A,B,C    recall %% within ranks 10/24/48 (scaled to top-k), H layers ahead;\n"
		"                      defaults 1:61,82,90 2:52,72,83 3:46,66,78\n"
		"  --decoys popular|uniform (popular)   --seed N (1)\n");
}

static int num(const char *s, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi))
		return -1;
	*out = v;
	return 0;
}

static int u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	double v;
	if (num(s, lo, hi, &v) || v != (double)(uint32_t)v)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int size_or_auto(const char *s, uint32_t *out)
{
	if (strcmp(s, "auto") == 0) {
		*out = FSR_AUTO;
		return 0;
	}
	if (strcmp(s, "all") == 0) { /* --recency all: no static tier (per-layer LRU + predictions) */
		*out = FSR_ALL;
		return 0;
	}
	if (strcmp(s, "pred") == 0) { /* the default: all once predictions arrive, else auto */
		*out = FSR_AUTO_PRED;
		return 0;
	}
	return u32(s, 0, 1u << 24, out);
}

int replay_recall_parse(const char *s, struct replay_recall *rc)
{
	unsigned h;
	double a, b, c;
	char tail;
	if (sscanf(s, "%u:%lf,%lf,%lf%c", &h, &a, &b, &c, &tail) != 4 || h < 1 || h > 3)
		return -1;
	if (!(a >= 0 && a <= b && b <= c && c <= 100))
		return -1;
	rc->at[h - 1][0] = a / 100;
	rc->at[h - 1][1] = b / 100;
	rc->at[h - 1][2] = c / 100;
	return 0;
}

enum {
	O_COMPARE = 256,
	O_POLICY,
	O_JSON,
	O_SWEEP,
	O_OUT,
	O_SYNTH,
	O_LAYERS,
	O_EXPERTS,
	O_TOPK,
	O_WINDOWS,
	O_SKEW,
	O_LOCALITY,
	O_GENSEED,
	O_TOKENS,
	O_WARMUP,
	O_SLOTS,
	O_SLOTS_FRAC,
	O_BUS,
	O_EBYTES,
	O_DELAY,
	O_ICPT,
	O_MISS,
	O_RECENCY,
	O_PREDICTED,
	O_SPARE,
	O_NOADAPT,
	O_DECAY,
	O_SHARE,
	O_MINSCORE,
	O_RECALL,
	O_DECOYS,
	O_SEED,
	O_STATS,
	O_CSV,
	O_MARKDOWN,
	O_TAG,
	O_MODEL,
	O_MODEL_SET,
	O_CALIBRATE,
	O_NO_BOUND,
	O_TIER_ADAPT,
	O_ADMIT_VALUE,
	O_CROSS_WINDOW,
	O_CARDS,
	O_CLIENTS,
	O_PUBLISH_US,
	O_PRED_MAX,
};

static const struct option longopts[] = {
	{"compare", no_argument, NULL, O_COMPARE},
	{"policy", required_argument, NULL, O_POLICY},
	{"json", no_argument, NULL, O_JSON},
	{"sweep", required_argument, NULL, O_SWEEP},
	{"out", required_argument, NULL, O_OUT},
	{"synthetic", no_argument, NULL, O_SYNTH},
	{"layers", required_argument, NULL, O_LAYERS},
	{"experts", required_argument, NULL, O_EXPERTS},
	{"topk", required_argument, NULL, O_TOPK},
	{"windows", required_argument, NULL, O_WINDOWS},
	{"skew", required_argument, NULL, O_SKEW},
	{"locality", required_argument, NULL, O_LOCALITY},
	{"gen-seed", required_argument, NULL, O_GENSEED},
	{"tokens-per-window", required_argument, NULL, O_TOKENS},
	{"warmup", required_argument, NULL, O_WARMUP},
	{"slots", required_argument, NULL, O_SLOTS},
	{"slots-frac", required_argument, NULL, O_SLOTS_FRAC},
	{"bus-gbps", required_argument, NULL, O_BUS},
	{"expert-bytes", required_argument, NULL, O_EBYTES},
	{"delay", required_argument, NULL, O_DELAY},
	{"intercept-ms", required_argument, NULL, O_ICPT},
	{"miss-ms", required_argument, NULL, O_MISS},
	{"recency", required_argument, NULL, O_RECENCY},
	{"predicted", required_argument, NULL, O_PREDICTED},
	{"spare", required_argument, NULL, O_SPARE},
	{"no-adapt", no_argument, NULL, O_NOADAPT},
	{"decay", required_argument, NULL, O_DECAY},
	{"bus-share", required_argument, NULL, O_SHARE},
	{"pred-min-score", required_argument, NULL, O_MINSCORE},
	{"recall", required_argument, NULL, O_RECALL},
	{"decoys", required_argument, NULL, O_DECOYS},
	{"seed", required_argument, NULL, O_SEED},
	{"trace-stats", no_argument, NULL, O_STATS},
	{"csv", no_argument, NULL, O_CSV},
	{"markdown", no_argument, NULL, O_MARKDOWN},
	{"tag", required_argument, NULL, O_TAG},
	{"model", no_argument, NULL, O_MODEL},
	{"model-set", required_argument, NULL, O_MODEL_SET},
	{"calibrate", no_argument, NULL, O_CALIBRATE},
	{"no-bound", no_argument, NULL, O_NO_BOUND},
	{"tier-adapt", required_argument, NULL, O_TIER_ADAPT},
	{"admit-value", required_argument, NULL, O_ADMIT_VALUE},
	{"cross-window", required_argument, NULL, O_CROSS_WINDOW},
	/* the daemon around the core, with foresightd's names (replay_run.c) */
	{"cards", required_argument, NULL, O_CARDS},
	{"clients", required_argument, NULL, O_CLIENTS},
	{"publish-us", required_argument, NULL, O_PUBLISH_US},
	{"pred-max", required_argument, NULL, O_PRED_MAX},
	{"recency-slots", required_argument, NULL, O_RECENCY},
	{"predicted-slots", required_argument, NULL, O_PREDICTED},
	{"spare-slots", required_argument, NULL, O_SPARE},
	{"help", no_argument, NULL, 'h'},
	{0},
};

static int on_off(const char *a, int *v)
{
	if (strcmp(a, "on") == 0)
		*v = 1;
	else if (strcmp(a, "off") == 0)
		*v = 0;
	else
		return -1;
	return 0;
}

static int add_policy(struct replay_opts *o, enum replay_policy_id p)
{
	for (int i = 0; i < o->npols; i++)
		if (o->pols[i] == p)
			return 0;
	if (o->npols >= RP_N)
		return -1;
	o->pols[o->npols++] = p;
	return 0;
}

/* One option; 0 or -1 (the caller names it). */
static int one(struct replay_opts *o, int ch, const char *a)
{
	struct replay_model *m = &o->model;
	double d;
	uint32_t u;
	switch (ch) {
	case O_COMPARE:
		for (int p = 0; p < RP_COMPARE_N; p++)
			add_policy(o, (enum replay_policy_id)p);
		return 0;
	case O_POLICY: {
		int p = replay_policy_by_name(a);
		return p < 0 ? -1 : add_policy(o, (enum replay_policy_id)p);
	}
	case O_JSON:
		o->json = 1;
		return 0;
	case O_SWEEP:
		o->sweep = a;
		return strcmp(a, "slots") && strcmp(a, "delay") ? -1 : 0;
	case O_OUT:
		o->out_dir = a;
		return 0;
	case O_SYNTH:
		o->synthetic = 1;
		return 0;
	case O_LAYERS:
		return u32(a, 1, FS_MAX_LAYERS, &o->gen.layers);
	case O_EXPERTS:
		return u32(a, 1, FS_MAX_EXPERTS, &o->gen.experts);
	case O_TOPK:
		return u32(a, 1, FS_TRACE_MAX_TOPK, &o->gen.topk);
	case O_WINDOWS:
		return u32(a, 1, 1u << 24, &o->gen.windows);
	case O_SKEW:
		return num(a, 0, 16, &o->gen.skew);
	case O_LOCALITY:
		return num(a, 0, 1, &o->gen.locality);
	case O_GENSEED:
		if (num(a, 0, 1.8e19, &d))
			return -1;
		o->gen.seed = (uint64_t)d;
		return 0;
	case O_TOKENS:
		o->tokens_given = 1;
		return u32(a, 1, 1024, &m->tokens_per_window);
	case O_WARMUP:
		o->warmup_given = 1;
		return u32(a, 0, 1u << 24, &m->warmup);
	case O_SLOTS:
		return u32(a, 1, UINT32_MAX >> 2, &m->slots);
	case O_SLOTS_FRAC:
		m->slots = 0;
		return num(a, 1e-6, 1, &m->slots_frac);
	case O_BUS:
		return num(a, 0.001, 1e5, &m->bus_gbps);
	case O_EBYTES:
		if (num(a, 1, 1e12, &d))
			return -1;
		m->expert_bytes = (uint64_t)d;
		return 0;
	case O_DELAY:
		return u32(a, 1, 1000, &m->delay);
	case O_ICPT:
		return num(a, 0.001, 1e6, &m->intercept_ms);
	case O_MISS:
		return num(a, 0, 1e6, &m->miss_ms);
	case O_CARDS:
		return u32(a, 1, FS_MAX_CARDS, &m->cards);
	case O_CLIENTS:
		return u32(a, 1, 64, &m->clients);
	case O_PUBLISH_US:
		return u32(a, 0, 1000000, &m->publish_us);
	case O_PRED_MAX:
		return u32(a, 0, 1024, &m->pred_max);
	case O_RECENCY:
		return size_or_auto(a, &m->recency);
	case O_PREDICTED:
		return size_or_auto(a, &m->predicted) ||
				       (m->predicted >= FSR_AUTO_PRED && m->predicted != FSR_AUTO) ?
			       -1 :
			       0;
	case O_SPARE:
		return size_or_auto(a, &m->spare) || (m->spare >= FSR_AUTO_PRED && m->spare != FSR_AUTO) ?
			       -1 :
			       0;
	case O_NOADAPT:
		m->adapt = 0;
		return 0;
	case O_TIER_ADAPT:
		return on_off(a, &m->tier_adapt);
	case O_ADMIT_VALUE:
		return on_off(a, &m->admit_value);
	case O_CROSS_WINDOW:
		return on_off(a, &m->cross_window);
	case O_DECAY:
		if (num(a, 1e-6, 1, &d))
			return -1;
		m->decay = (float)d;
		return 0;
	case O_SHARE:
		if (u32(a, 1, 100, &u))
			return -1;
		m->bus_share_pct = u;
		return 0;
	case O_MINSCORE:
		if (num(a, 0, 1e6, &d))
			return -1;
		m->pred_min_score = (float)d;
		return 0;
	case O_RECALL:
		return replay_recall_parse(a, &m->recall);
	case O_DECOYS:
		if (strcmp(a, "popular") == 0)
			m->decoys = DECOYS_POPULAR;
		else if (strcmp(a, "uniform") == 0)
			m->decoys = DECOYS_UNIFORM;
		else
			return -1;
		return 0;
	case O_STATS:
		o->stats = 1;
		return 0;
	case O_CSV:
		o->csv = 1;
		return 0;
	case O_MARKDOWN:
		o->markdown = 1;
		return 0;
	case O_TAG:
		o->tag = a;
		return 0;
	case O_MODEL:
		o->use_model = 1;
		return 0;
	case O_MODEL_SET:
		return calib_model_set(&o->tmodel, a);
	case O_CALIBRATE:
		o->calibrate = 1;
		return 0;
	case O_NO_BOUND:
		o->no_bound = 1;
		return 0;
	case O_SEED:
		if (num(a, 0, 1.8e19, &d))
			return -1;
		m->seed = (uint64_t)d;
		return 0;
	default:
		return -1;
	}
}

int replay_opts_parse(struct replay_opts *o, int argc, char **argv)
{
	memset(o, 0, sizeof(*o));
	replay_model_defaults(&o->model);
	fs_trace_gen_defaults(&o->gen);
	o->gen.layers = BOX_LAYERS;
	o->gen.experts = BOX_EXPERTS;
	o->gen.topk = BOX_TOPK;
	o->gen.windows = BOX_WINDOWS;
	o->gen.skew = BOX_SKEW;
	o->gen.locality = BOX_LOCALITY;
	o->out_dir = ".";
	fs_trace_model_defaults(&o->tmodel);
	int ch;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (ch == 'h') {
			usage(stdout);
			return 1;
		}
		if (ch == '?') {
			usage(stderr);
			return -1;
		}
		if (one(o, ch, optarg) != 0) {
			const char *name = "?";
			for (const struct option *lo = longopts; lo->name; lo++)
				if (lo->val == ch)
					name = lo->name;
			fprintf(stderr, "fs-replay: --%s: bad value '%s'\n", name, optarg ? optarg : "");
			return -1;
		}
	}
	if (optind < argc)
		o->path = argv[optind++];
	if (o->calibrate && !o->path && !o->synthetic)
		return 0;
	if (optind < argc || (!o->path && !o->synthetic) || (o->path && o->synthetic)) {
		fprintf(stderr, "fs-replay: give one trace file or --synthetic (try --help)\n");
		return -1;
	}
	if (o->synthetic) {
		if (!o->tokens_given)
			o->model.tokens_per_window = BOX_TOKENS;
		if (!o->warmup_given)
			o->model.warmup = o->use_model ? MODEL_WARMUP : BOX_WARMUP;
		o->gen.tokens_per_window = o->model.tokens_per_window;
		o->gen.expert_bytes = o->model.expert_bytes;
		o->gen.windows += o->model.warmup; /* --windows counts scored windows */
	}
	if (o->npols == 0)
		one(o, O_COMPARE, NULL);
	return 0;
}
