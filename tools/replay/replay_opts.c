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

/* The rows of foresightd's options whose default fs-replay does not take:
 * its model of the machine, not the daemon's (fsd_options.h, FSD_POLICY).
 * slots: when neither --slots nor the config file gives it, --slots-frac
 * of the trace's layers x experts. */
static const struct {
	const char *key, *dflt;
} own_defaults[] = {
	{"cards", "1"},
	{"publish_us", "0"},
	{"slots", "--slots-frac 0.5"},
};

int replay_own_default(const char *key)
{
	for (size_t i = 0; i < sizeof(own_defaults) / sizeof(own_defaults[0]); i++)
		if (strcmp(own_defaults[i].key, key) == 0)
			return 1;
	return 0;
}

void replay_model_defaults(struct replay_model *m)
{
	*m = (struct replay_model){
		.intercept_ms = 13.0,
		.miss_ms = 2.78,
		.expert_bytes = BOX_EXPERT_BYTES,
		.delay = 1,
		.tokens_per_window = 1,
		.slots_frac = 0.5,
		.seed = 1,
		.decoys = DECOYS_POPULAR,
		.adapt = 1,
		.clients = 1,
	};
	fsd_config_defaults(&m->daemon);
	m->daemon.cards = 1;
	m->daemon.publish_us = 0;
	m->cards = m->daemon.cards;
	m->publish_us = m->daemon.publish_us;
	m->bus_gbps = m->daemon.bus_gbps;
	replay_recall_default(&m->recall);
}

/* A row of the machine (fsd_options.h) set from a flag or the file: the
 * model's field of the same name follows it. */
static void machine_row(struct replay_model *m, const char *key)
{
	if (strcmp(key, "cards") == 0)
		m->cards = m->daemon.cards;
	else if (strcmp(key, "slots") == 0)
		m->slots = m->daemon.slots;
	else if (strcmp(key, "bus_gbps") == 0)
		m->bus_gbps = m->daemon.bus_gbps;
	else if (strcmp(key, "publish_us") == 0)
		m->publish_us = m->daemon.publish_us;
}

/* `text` from column `col` (where the line is now) to `width`, each
 * further line indented to col. */
static void wrap(FILE *f, const char *text, int col, int width)
{
	const char *p = text;
	int at = col;
	while (*p) {
		size_t w = strcspn(p, " ");
		if (at > col && at + 1 + (int)w > width) {
			fprintf(f, "\n%*s", col, "");
			at = col;
		}
		fprintf(f, " %.*s", (int)w, p);
		at += 1 + (int)w;
		p += w;
		while (*p == ' ')
			p++;
	}
	fputc('\n', f);
}

/* foresightd's FSD_POLICY rows, generated: the row's flag, help and
 * default (fs-replay's own where own_defaults says, with foresightd's). */
static void policy_help(FILE *f)
{
	struct fsd_config def;
	fsd_config_defaults(&def);
	for (size_t i = 0; i < FSD_NOPTS; i++) {
		const struct fsd_opt *o = &fsd_opt_rows[i];
		if (!(o->flags & FSD_POLICY))
			continue;
		char flag[48], v[96];
		fsd_opt_flag(o, flag, sizeof(flag));
		if (o->type == FSD_OPT_ONOFF)
			snprintf(flag + strlen(flag), sizeof(flag) - strlen(flag), " on|off");
		else if (o->type != FSD_OPT_FLAG)
			snprintf(flag + strlen(flag), sizeof(flag) - strlen(flag), " N");
		fsd_opt_format(o, &def, v, sizeof(v));
		size_t n = strlen(v);
		if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
			memmove(v, v + 1, n - 2);
			v[n - 2] = 0;
		}
		const char *own = NULL;
		for (size_t k = 0; k < sizeof(own_defaults) / sizeof(own_defaults[0]); k++)
			if (strcmp(own_defaults[k].key, o->key) == 0)
				own = own_defaults[k].dflt;
		char text[640];
		if (own)
			snprintf(text, sizeof(text), "%s (default here: %s; foresightd's: %s)", o->help, own,
				 v);
		else
			snprintf(text, sizeof(text), "%s (default: %s)", o->help, v);
		fprintf(f, "  %-22s", flag);
		wrap(f, text, 24, 100);
	}
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
		"  --compare             static, lru, static+recency, static+predicted, all, learned\n"
		"                        (default)\n"
		"  --policy NAME         one policy (repeatable); also lru-warm (LRU seeded with the profile),\n"
		"                        static-layer (static, each layer its share: replay_ref.py's),\n"
		"                        strata-adapt (static adapted every 4 windows from use decayed by 0.7,\n"
		"                        at most 96 swaps over the bus: Strata's peer, one card and engine)\n"
		"  --json                print a JSON array, one object per policy\n"
		"  --no-bound            leave out the clairvoyant bound's row (future known, Belady eviction,\n"
		"                        copies at the bus rate); every row reports its share of it\n"
		"  --csv | --markdown    print the table as CSV or as a Markdown table\n"
		"  --why                 after the table (or the Markdown table), where each policy's misses\n"
		"                        come from: each in one class (replay_why.h; --json always has them)\n"
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
		"  --slots-frac F          slots per card as a share of layers x experts, when --slots is\n"
		"                          not given (0.5)\n"
		"  --expert-bytes B        (the trace's, else 1769472)\n"
		"  --delay D               windows before a copy for a miss is usable (1; 0: when its\n"
		"                          bytes are in, as on foresightd's host backend)\n"
		"  --intercept-ms X (13.0) --miss-ms X (2.78 per extra miss per layer-window)\n"
		"foresightd's policy options: its own rows (daemon/fsd_options.h), the same flags,\n"
		"ranges and defaults as `foresightd --help`, through its fsd_config_residency; our tiers\n"
		"take them, the baselines (static, lru, lru-warm, static-layer, strata-adapt) foresightd's defaults:\n"
		"  --config FILE          foresightd's config file (foresightd.json(5)): its policy keys\n"
		"                         are taken, the others checked and left; the flags win over it\n");
	policy_help(f);
	fprintf(f,
		"fs-replay's own spellings and knobs of our tiers:\n"
		"  --recency N|auto|all|pred   --recency-slots N, or the core's sizes foresightd has no\n"
		"                      value for: auto, a 16th of the share beside a card-wide static tier;\n"
		"                      all, the whole share, no static tier; pred, auto until predictions\n"
		"                      arrive, then all\n"
		"  --predicted N|auto  --spare N|auto   --predicted-slots, --spare-slots (auto: -1)\n"
		"  --decay F           --freq-decay     --bus-share PCT   --bus-share-pct\n"
		"  --no-adapt          freeze the static tier at its profile\n"
		"  --pred-min-score S  (0)\n"
		"The daemon (foresightd's hot engine, daemon/engine/, runs the replay):\n"
		"  --clients M (1)     engines, each replaying its own contiguous slice of the scored windows\n"
		"  --pred-max N (0)    post only the best N candidates not held, per target layer and\n"
		"                      horizon, as fs-engine-bench's engine does (its default 8; 0: all)\n"
		"Predictor (oracle-noised router-ahead):\n"
		"  --recall H:A,B,C    recall %% within ranks 10/24/48 (scaled to top-k), H layers ahead;\n"
		"                      defaults 1:61,82,90 2:52,72,83 3:46,66,78\n"
		"  --decoys popular|uniform|none (popular)   --seed N (1); none: no wrong candidates\n"
		"Learned predictor (policy learned: the engine posts usage only, foresightd's core predicts\n"
		"from it, daemon/residency/fsr_learn.c; its options are foresightd's learn_* rows above):\n"
		"  --learn-past        it first learns the routing that ran before the scored windows\n"
		"                      (the prefill's tokens, the warm-up windows: what the profile counts)\n");
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

/* One of foresightd's rows from a flag of fs-replay's own spelling (or of
 * its own): the row's checks and messages, and where it was set. */
static int row_set(struct replay_opts *o, const char *key, const char *val, const char *flag)
{
	const struct fsd_opt *r = fsd_opt_find(key);
	if (!r || fsd_opt_set(&o->src, &o->model.daemon, r, val, flag) < 0)
		return -2; /* the message is printed */
	fsd_opt_note(&o->src, key, flag);
	machine_row(&o->model, key);
	if (strcmp(key, "recency_slots") == 0)
		o->model.recency_override = 0;
	return 0;
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
	O_SLOTS_FRAC,
	O_EBYTES,
	O_DELAY,
	O_ICPT,
	O_MISS,
	O_RECENCY,
	O_PREDICTED,
	O_SPARE,
	O_NOADAPT,
	O_DECAY,
	O_MINSCORE,
	O_BUSSHARE,
	O_CONFIG,
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
	O_CLIENTS,
	O_PRED_MAX,
	O_WHY,
	O_LEARN_PAST,
};

static const struct option own_longopts[] = {
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
	{"slots-frac", required_argument, NULL, O_SLOTS_FRAC},
	{"expert-bytes", required_argument, NULL, O_EBYTES},
	{"delay", required_argument, NULL, O_DELAY},
	{"intercept-ms", required_argument, NULL, O_ICPT},
	{"miss-ms", required_argument, NULL, O_MISS},
	{"recency", required_argument, NULL, O_RECENCY},
	{"predicted", required_argument, NULL, O_PREDICTED},
	{"spare", required_argument, NULL, O_SPARE},
	{"no-adapt", no_argument, NULL, O_NOADAPT},
	{"decay", required_argument, NULL, O_DECAY},
	{"bus-share", required_argument, NULL, O_BUSSHARE},
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
	{"clients", required_argument, NULL, O_CLIENTS},
	{"pred-max", required_argument, NULL, O_PRED_MAX},
	{"why", no_argument, NULL, O_WHY},
	{"learn-past", no_argument, NULL, O_LEARN_PAST},
	{"config", required_argument, NULL, O_CONFIG},
	/* then foresightd's FSD_POLICY rows (replay_opts_parse) */
};
#define N_OWN (sizeof(own_longopts) / sizeof(own_longopts[0]))
#define O_ROW 1000 /* + the row's index in fsd_opt_rows */

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
	case O_SLOTS_FRAC:
		m->slots = 0;
		return num(a, 1e-6, 1, &m->slots_frac);
	case O_EBYTES:
		if (num(a, 1, 1e12, &d))
			return -1;
		m->expert_bytes = (uint64_t)d;
		return 0;
	case O_DELAY:
		return u32(a, 0, 1000, &m->delay); /* 0: usable when landed (replay_bus.c) */
	case O_ICPT:
		return num(a, 0.001, 1e6, &m->intercept_ms);
	case O_MISS:
		return num(a, 0, 1e6, &m->miss_ms);
	case O_CLIENTS:
		return u32(a, 1, 64, &m->clients);
	case O_PRED_MAX:
		return u32(a, 0, 1024, &m->pred_max);
	case O_RECENCY:
		if (strcmp(a, "auto") == 0 || strcmp(a, "all") == 0 || strcmp(a, "pred") == 0) {
			int rc = row_set(o, "recency_slots", "-1", "--recency");
			m->recency_override = a[1] == 'u' ? FSR_AUTO : a[1] == 'l' ? FSR_ALL : FSR_AUTO_PRED;
			return rc;
		}
		return row_set(o, "recency_slots", a, "--recency");
	case O_PREDICTED:
		return row_set(o, "predicted_slots", strcmp(a, "auto") == 0 ? "-1" : a, "--predicted");
	case O_SPARE:
		return row_set(o, "spare_slots", strcmp(a, "auto") == 0 ? "-1" : a, "--spare");
	case O_NOADAPT:
		m->adapt = 0;
		return 0;
	case O_DECAY:
		return row_set(o, "freq_decay", a, "--decay");
	case O_BUSSHARE:
		return row_set(o, "bus_share_pct", a, "--bus-share");
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
		else if (strcmp(a, "none") == 0)
			m->decoys = DECOYS_NONE;
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
	case O_WHY:
		o->why = 1;
		return 0;
	case O_LEARN_PAST:
		m->learn_past = 1;
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
	fsd_opt_src_init(&o->src, "fs-replay");
	fs_trace_gen_defaults(&o->gen);
	o->gen.layers = BOX_LAYERS;
	o->gen.experts = BOX_EXPERTS;
	o->gen.topk = BOX_TOPK;
	o->gen.windows = BOX_WINDOWS;
	o->gen.skew = BOX_SKEW;
	o->gen.locality = BOX_LOCALITY;
	o->out_dir = ".";
	fs_trace_model_defaults(&o->tmodel);

	/* fs-replay's own options, then foresightd's FSD_POLICY rows. */
	struct option lo[N_OWN + FSD_NOPTS + 2];
	char names[FSD_NOPTS][48];
	size_t n = 0;
	for (size_t i = 0; i < N_OWN; i++)
		lo[n++] = own_longopts[i];
	for (size_t i = 0; i < FSD_NOPTS; i++) {
		const struct fsd_opt *r = &fsd_opt_rows[i];
		if (!(r->flags & FSD_POLICY))
			continue;
		fsd_opt_flag(r, names[i], sizeof(names[i]));
		lo[n++] = (struct option){names[i] + 2,
					  r->type == FSD_OPT_FLAG ? no_argument : required_argument, NULL,
					  O_ROW + (int)i};
	}
	lo[n++] = (struct option){"help", no_argument, NULL, 'h'};
	lo[n] = (struct option){0};

	/* Pass 1: --help, and --config FILE: the file first, the flags over it
	 * wherever they stand (as foresightd reads them). */
	int ch;
	const char *file = NULL;
	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (ch == 'h') {
			usage(stdout);
			return 1;
		}
		if (ch == O_CONFIG)
			file = optarg;
	}
	if (file) {
		if (fsd_config_load(&o->src, &o->model.daemon, file) < 0)
			return -1;
		for (size_t i = 0; i < FSD_NOPTS; i++)
			if ((fsd_opt_rows[i].flags & FSD_POLICY) &&
			    fsd_opt_given(&o->src, fsd_opt_rows[i].key))
				machine_row(&o->model, fsd_opt_rows[i].key);
	}
	/* Pass 2: every option, in order. */
	opterr = 1;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (ch == '?') {
			usage(stderr);
			return -1;
		}
		if (ch == O_CONFIG)
			continue;
		if (ch >= O_ROW) {
			const struct fsd_opt *r = &fsd_opt_rows[ch - O_ROW];
			if (row_set(o, r->key, optarg ? optarg : "1", names[ch - O_ROW]) != 0)
				return -1;
			continue;
		}
		int rc = one(o, ch, optarg);
		if (rc == -2)
			return -1;
		if (rc != 0) {
			const char *name = "?";
			for (size_t i = 0; i < N_OWN; i++)
				if (own_longopts[i].val == ch)
					name = own_longopts[i].name;
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
