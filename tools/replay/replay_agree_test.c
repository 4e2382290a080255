/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_agree_test.c: fs-replay --cards 2 --clients 2 against a real
 * foresightd (host backend, 2 cards, the same policy options) driven by two
 * real engine processes (fs-replay-client) replaying the same trace slices
 * with the same per-layer pacing on the real clock (issue 19, "Done
 * when").  The replay runs the daemon's hot engine and core on its virtual
 * clock; the daemon runs them on its hot thread.  They must agree:
 *
 *  - exactly where no clock is involved: the uses of each engine (the same
 *    windows) and the profile's fill on each card (where the placement
 *    across cards puts each layer's static slots);
 *  - within the clock's noise where the clock decides: each engine's hits
 *    and the cards' copies (both policies).  The daemon
 *    reads the records late by its wake-up and the engines' sleeps
 *    (microseconds idle, milliseconds and more on a loaded machine), and
 *    the two engines' records interleave in real rather than virtual time.
 *
 * The tolerances (docs/results/replay.md, "Agreement with foresightd",
 * has the runs): |hits - fs-replay's| <= 5 % of the engine's uses + 8; for
 * static+recency |copies - fs-replay's| <= 10 % of fs-replay's + 8 per
 * card; for all (static + recency + predicted) the cards' copies together
 * within 15 % + 16 (which card a predicted copy goes to moves with the two
 * engines' real interleaving: -6 .. +21 % on one card, -4 .. +8 % on both).
 * The same with one card and one engine (the most slot pressure).
 * Measured on this 2-core machine at a load average of 7-8, with the
 * replay in the daemon's order (session 7: no pass between an engine's
 * release and its next acquire, nor before a layer's posts; copies taken
 * in at their landing): hits -0.1 .. -1.3 %, static+recency's copies
 * +0 .. +16 per card, all's -4 .. +8 % in total; one card: hits within
 * 0.4 %, copies within 0.5 %.  Before that order the daemon hit 2.8 %
 * less with one card and landed 5-25 % fewer predicted copies.
 *
 * FS_AGREE_LONG=1: 2000 scored windows (about 20 s per policy).
 * FS_AGREE_SCALE=X: every layer X times as long (1 ms x 2 by default).
 */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs_harness.h"
#include "replay.h"

#define L 8u
#define E 64u
#define TOPK 4u
#define TPW 2u
#define MAXN 2u
static uint32_t CARDS = 2, CLIENTS = 2; /* per test: agree()'s n */
enum { COPIES_NONE, COPIES_PER_CARD, COPIES_TOTAL };

struct setup {
	uint32_t warmup, scored, slots;
	double intercept_ms, miss_ms;
	uint64_t expert_bytes;
	double bus_gbps;
};

static struct setup setup_of(void)
{
	int longer = getenv("FS_AGREE_LONG") != NULL;
	const char *sc = getenv("FS_AGREE_SCALE"); /* slower layers: the clock's noise shrinks */
	double scale = sc && atof(sc) > 0 ? atof(sc) : 2.0;
	return (struct setup){
		.warmup = 40,
		.scored = longer ? 2000 : 120, /* 60 windows per engine: about 1.2 s */
		.slots = 96,                   /* per card: 19 % of 8 x 64 each */
		.intercept_ms = 8.0 * scale,   /* 1 ms per layer x scale */
		.miss_ms = 2.0 * scale,        /* 0.25 ms per distinct miss x scale */
		.expert_bytes = 65536,
		.bus_gbps = 13.5,
	};
}

static void make_trace(struct fs_trace *t, const struct setup *s, const char *path)
{
	struct fs_trace_gen g;
	fs_trace_gen_defaults(&g);
	g.layers = L;
	g.experts = E;
	g.topk = TOPK;
	g.tokens_per_window = TPW;
	g.windows = s->warmup + s->scored;
	g.skew = 1.1;
	g.locality = 0.3;
	g.seed = 19;
	g.expert_bytes = s->expert_bytes;
	char err[FS_TRACE_ERRLEN];
	cr_assert_eq(fs_trace_generate(t, &g, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fs_trace_write_bin(t, path, err, sizeof(err)), 0, "%s", err);
}

static void model_of(struct replay_model *m, const struct setup *s)
{
	replay_model_defaults(m);
	m->tokens_per_window = TPW;
	m->warmup = s->warmup;
	m->slots = s->slots;
	m->intercept_ms = s->intercept_ms;
	m->miss_ms = s->miss_ms;
	m->expert_bytes = s->expert_bytes;
	m->bus_gbps = s->bus_gbps;
	m->delay = 0;      /* usable when landed, as on the host backend */
	m->publish_us = 0; /* the daemon runs with --publish-us 0 too */
	m->cards = CARDS;
	m->clients = CLIENTS;
}

static cJSON *stats(const struct fsh_daemon *d)
{
	static char buf[1 << 20];
	if (fsh_request(d->sock, "{\"verb\":\"stats\",\"proto\":1}", buf, sizeof(buf)) < 0)
		return NULL;
	return cJSON_Parse(buf);
}

static double card_num(const cJSON *st, uint32_t card, const char *key)
{
	const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(st, "cards"), (int)card);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static double total(const cJSON *st, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(st, "totals"),
							  key);
	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static void load_profile(const struct fsh_daemon *d, const uint32_t *counts)
{
	cJSON *req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "verb", "profile");
	cJSON_AddNumberToObject(req, "proto", 1);
	cJSON_AddStringToObject(req, "action", "load");
	cJSON_AddNumberToObject(req, "layers", L);
	cJSON_AddNumberToObject(req, "experts", E);
	cJSON *arr = cJSON_AddArrayToObject(req, "counts");
	for (uint32_t i = 0; i < L * E; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateNumber(counts[i]));
	char *txt = cJSON_PrintUnformatted(req), rep[512];
	cJSON_Delete(req);
	cr_assert_eq(fsh_request(d->sock, txt, rep, sizeof(rep)), 0);
	free(txt);
	cr_assert(strstr(rep, "\"ok\":true") != NULL, "profile load: %s", rep);
}

struct engine_out {
	unsigned long long uses, hits, misses, predictions, dropped, late_us;
	unsigned windows;
};

static void parse_engine(const char *path, struct engine_out *o)
{
	char buf[512] = "";
	fsh_read_file(path, buf, sizeof(buf));
	const char *p = strstr(buf, "uses ");
	cr_assert(
		p && sscanf(p,
			    "uses %llu hits %llu misses %llu windows %u predictions %llu dropped %llu late_us %llu",
			    &o->uses, &o->hits, &o->misses, &o->windows, &o->predictions, &o->dropped,
			    &o->late_us) == 7,
		"fs-replay-client printed: %s", buf);
}

static long long diff(uint64_t a, uint64_t b)
{
	return (long long)a - (long long)b;
}

/* What one comparison needs. */
struct ctx {
	struct setup s;
	enum replay_policy_id p;
	const char *const *policy;
	int predict, copies;
	char dir[32], trace[64], ncards[16];
	uint32_t counts[L * E];
	struct replay_result ref;
};

/* A run whose engines fell further behind their schedule than this is no
 * measurement of agreement: the engines' relative timing, which the
 * replay keeps exact, broke.  In a run here one engine stalled for 385 ms
 * while the other ran on, and the stalled card's layers moved home to the
 * other card (FSR_HOME_IDLE_WINDOWS, 8 silent windows): 1373 and 76 copies
 * against fs-replay's 669 and 650.  The limit: 4 windows with no miss,
 * half of that; runs 92 ms late (under 6 windows) still agreed.  A run in
 * which the daemon fell so far behind that an engine's ring filled (a post
 * dropped: its records never reached the core; the rings hold 16384
 * records here, about 250 layer steps) is not a loaded machine's noise but
 * a daemon that did not keep up with its engines: it fails. */
static uint64_t late_limit_us(const struct setup *s)
{
	return (uint64_t)(4 * s->intercept_ms * 1000);
}

/* foresightd (host backend, the same machine and policy) and the engines,
 * once.  Returns 0 when compared (the checks made), 1 when an engine ran
 * later than late_limit_us (nothing compared but the exact counts). */
static int daemon_run(struct ctx *x, char *why, size_t whylen)
{
	const struct setup *s = &x->s;
	const struct replay_result *ref = &x->ref;
	const char *const *policy = x->policy;
	const int predict = x->predict, copies = x->copies;
	const enum replay_policy_id p = x->p;
	const char *ncards = x->ncards, *trace = x->trace, *dir = x->dir;
	const uint32_t *counts = x->counts;
	/* foresightd, host backend, the same machine and policy. */
	char slots[24], eb[24], bus[24], layers[24], experts[24], topk[24];
	snprintf(slots, sizeof(slots), "%u", s->slots);
	snprintf(eb, sizeof(eb), "%llu", (unsigned long long)s->expert_bytes);
	snprintf(bus, sizeof(bus), "%g", s->bus_gbps);
	snprintf(layers, sizeof(layers), "%u", L);
	snprintf(experts, sizeof(experts), "%u", E);
	snprintf(topk, sizeof(topk), "%u", TOPK);
	const char *args[40] = {"--backend",      "host", "--cards",        ncards,  "--slots",        slots,
				"--layers",       layers, "--experts",      experts, "--experts-used", topk,
				"--expert-bytes", eb,     "--bus-gbps",     bus,     "--publish-us",   "0",
				"--max-clients",  "2",    "--ring-entries", "16384"};
	int na = 22;
	for (int i = 0; policy && policy[i] && na < 38; i++)
		args[na++] = policy[i];
	args[na] = NULL;
	struct fsh_daemon d;
	cr_assert_eq(fsh_daemon_start(&d, args), 0, "foresightd did not start");
	load_profile(&d, counts);
	/* The fill lands before decode, as fs-replay's preload: every card has
	 * copied exactly what the replay's did, and nothing is in flight. */
	cJSON *st = NULL;
	int filled = 0;
	for (uint64_t end = fsh_now_ms() + 10000; !filled && fsh_now_ms() < end; usleep(10000)) {
		cJSON_Delete(st);
		cr_assert_not_null(st = stats(&d));
		filled = 1;
		for (uint32_t c = 0; c < CARDS; c++)
			filled &= card_num(st, c, "copied") == (double)ref->card_fill[c] &&
				  card_num(st, c, "loading") == 0;
	}
	for (uint32_t c = 0; c < CARDS; c++)
		cr_assert_eq(card_num(st, c, "copied"), (double)ref->card_fill[c],
			     "card %u: the profile's fill copied %.0f, fs-replay's %llu (placement differs)",
			     c, card_num(st, c, "copied"), (unsigned long long)ref->card_fill[c]);
	double copied0[MAXN];
	for (uint32_t c = 0; c < CARDS; c++)
		copied0[c] = card_num(st, c, "copied");
	cJSON_Delete(st);
	st = NULL;

	/* The engines: each its slice, as replay_run.c's engines_start. */
	uint64_t start = 0;
	{
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		start = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 300000000ull;
	}
	pid_t pid[MAXN];
	char out[MAXN][96];
	for (uint32_t i = 0; i < CLIENTS; i++) {
		char from[24], to[24], num[24], card[24], st_ns[24], im[32], mm[32], tpw[24];
		snprintf(from, sizeof(from), "%u", s->warmup + s->scored * i / CLIENTS);
		snprintf(to, sizeof(to), "%u", s->warmup + s->scored * (i + 1) / CLIENTS);
		snprintf(num, sizeof(num), "%u", s->warmup + 1);
		snprintf(card, sizeof(card), "%u", i % CARDS);
		snprintf(st_ns, sizeof(st_ns), "%llu", (unsigned long long)start);
		snprintf(im, sizeof(im), "%g", s->intercept_ms);
		snprintf(mm, sizeof(mm), "%g", s->miss_ms);
		snprintf(tpw, sizeof(tpw), "%u", TPW);
		snprintf(out[i], sizeof(out[i]), "%s/engine%u.out", dir, i);
		pid[i] = fsh_spawn(fsh_argv(FS_REPLAY_CLIENT_BIN, "--socket", d.sock, "--trace", trace,
					    "--from", from, "--to", to, "--num", num, "--card", card,
					    "--start-ns", st_ns, "--intercept-ms", im, "--miss-ms", mm,
					    "--tokens-per-window", tpw, predict ? "--predict" : NULL, NULL),
				   out[i]);
		cr_assert_gt(pid[i], 0);
	}
	struct engine_out eo[MAXN] = {0};
	uint64_t uses = 0;
	for (uint32_t i = 0; i < CLIENTS; i++) {
		cr_assert_eq(fsh_wait(pid[i], 600000), 0, "fs-replay-client %u failed", i);
		parse_engine(out[i], &eo[i]);
		uses += eo[i].uses;
	}
	/* The daemon has read every record (the engines' last copies land). */
	for (uint64_t end = fsh_now_ms() + 10000; fsh_now_ms() < end; usleep(10000)) {
		cJSON_Delete(st);
		cr_assert_not_null(st = stats(&d));
		if (total(st, "hits") + total(st, "misses") == (double)uses &&
		    card_num(st, 0, "loading") == 0 && card_num(st, CARDS - 1, "loading") == 0)
			break;
	}
	uint64_t dropped = 0;
	for (uint32_t i = 0; i < CLIENTS; i++)
		dropped += eo[i].dropped;
	cr_assert_eq(dropped, 0,
		     "the daemon fell %llu records behind: the engines' posts were dropped on a full ring "
		     "(16384 records, about 250 layer steps)",
		     (unsigned long long)dropped);
	cr_assert_eq(total(st, "hits") + total(st, "misses"), (double)uses,
		     "the daemon saw %.0f uses of %llu", total(st, "hits") + total(st, "misses"),
		     (unsigned long long)uses);

	char line[1024];
	int n = snprintf(line, sizeof(line), "%s:", replay_policy_name(p));
	for (uint32_t i = 0; i < CLIENTS; i++) {
		cr_assert_eq(eo[i].uses, ref->client_uses[i], "engine %u: %llu uses, fs-replay's %llu", i,
			     eo[i].uses, (unsigned long long)ref->client_uses[i]);
		long long dh = diff(eo[i].hits, ref->client_hits[i]);
		double share = eo[i].uses ? fabs((double)dh) / (double)eo[i].uses : 0;
		n += snprintf(line + n, sizeof(line) - (size_t)n,
			      " engine %u hits %llu/%llu (fs-replay %llu, %+lld = %.2f %%, late %llu us)", i,
			      eo[i].hits, eo[i].uses, (unsigned long long)ref->client_hits[i], dh,
			      100.0 * share, eo[i].late_us);
	}
	long long dc[MAXN];
	for (uint32_t c = 0; c < CARDS; c++) {
		uint64_t dcop = (uint64_t)(card_num(st, c, "copied") - copied0[c]);
		dc[c] = diff(dcop, ref->card_copies[c]);
		n += snprintf(line + n, sizeof(line) - (size_t)n,
			      " card %u copies %llu (fs-replay %llu, %+lld)", c, (unsigned long long)dcop,
			      (unsigned long long)ref->card_copies[c], dc[c]);
	}
	n += snprintf(
		line + n, sizeof(line) - (size_t)n,
		"; too-late %.0f (fs-replay %llu), landed late %.0f (%llu), predictions %llu+%llu (%llu)",
		total(st, "too_late"), (unsigned long long)ref->too_late, total(st, "landed_late"),
		(unsigned long long)ref->landed_late, eo[0].predictions, eo[1].predictions,
		(unsigned long long)ref->predictions);
	fprintf(stderr, "agree %s\n", line);
	if (getenv("FS_AGREE_VERBOSE")) {
		char *txt = cJSON_Print(cJSON_GetObjectItemCaseSensitive(st, "totals"));
		fprintf(stderr, "%s\n", txt);
		free(txt);
	}
	uint64_t late = 0;
	for (uint32_t i = 0; i < CLIENTS; i++)
		late = eo[i].late_us > late ? eo[i].late_us : late;
	int disturbed = late > late_limit_us(s);
	if (disturbed)
		snprintf(why, whylen, "an engine ran %llu us behind its schedule (limit %llu): %s",
			 (unsigned long long)late, (unsigned long long)late_limit_us(s), line);
	if (!disturbed) {
		for (uint32_t i = 0; i < CLIENTS; i++) {
			double tol = 0.05 * (double)eo[i].uses + 8;
			cr_expect_leq(fabs((double)diff(eo[i].hits, ref->client_hits[i])), tol,
				      "engine %u beyond %.0f: %s", i, tol, line);
		}
		for (uint32_t c = 0; c < CARDS && copies == COPIES_PER_CARD; c++) {
			double tol = 0.10 * (double)ref->card_copies[c] + 8;
			cr_expect_leq(fabs((double)dc[c]), tol, "card %u copies beyond %.0f: %s", c, tol,
				      line);
		}
		if (copies == COPIES_TOTAL) {
			long long sum = 0, want = 0;
			for (uint32_t c = 0; c < CARDS; c++) {
				sum += dc[c];
				want += (long long)ref->card_copies[c];
			}
			double tol = 0.15 * (double)want + 16;
			cr_expect_leq(fabs((double)sum), tol, "the cards' copies beyond %.0f: %s", tol, line);
		}
	}
	cJSON_Delete(st);
	cr_expect_eq(fsh_daemon_stop(&d), 0);
	return disturbed;
}

/* One policy both ways; the daemon's policy options in `policy` (NULL
 * ended); the engines post predictions with `predict`; the cards' copies
 * are checked with `copies`.  Up to 4 daemon runs: the first one whose
 * engines kept to their schedule is compared; none: skipped, saying why. */
static void agree(uint32_t n, enum replay_policy_id p, const char *const *policy, int predict, int copies)
{
	static struct ctx x;
	memset(&x, 0, sizeof(x));
	x.s = setup_of();
	x.p = p;
	x.policy = policy;
	x.predict = predict;
	x.copies = copies;
	CARDS = CLIENTS = n; /* n cards, n engines (engine i on card i) */
	snprintf(x.ncards, sizeof(x.ncards), "%u", CARDS);
	snprintf(x.dir, sizeof(x.dir), "/tmp/fs-agree-XXXXXX");
	cr_assert_not_null(mkdtemp(x.dir));
	snprintf(x.trace, sizeof(x.trace), "%s/t.fstrace", x.dir);
	struct fs_trace t;
	make_trace(&t, &x.s, x.trace);
	struct replay_model m;
	model_of(&m, &x.s);
	struct replay_input in = {
		.trace = &t, .name = "agree", .profile = x.counts, .profile_from = "warm-up"};
	cr_assert_gt(replay_profile_build(&t, m.warmup, m.tokens_per_window, x.counts), 0);
	/* fs-replay --cards 2 --clients 2, in process. */
	char err[256] = "";
	cr_assert_eq(replay_run(&in, &m, p, &x.ref, err, sizeof(err)), 0, "%s", err);
	char why[1200] = "";
	int disturbed = 1;
	for (int attempt = 0; attempt < 4 && disturbed; attempt++) {
		disturbed = daemon_run(&x, why, sizeof(why));
		if (disturbed)
			fprintf(stderr, "agree: attempt %d not compared: %s\n", attempt + 1, why);
	}
	fs_trace_free(&t);
	char cmd[96];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", x.dir);
	(void)!system(cmd);
	if (disturbed)
		cr_skip("the machine is too loaded to compare: %s", why);
}

Test(agree, static_recency_two_cards_two_engines, .timeout = 600)
{
	static const char *const pol[] = {"--predicted-slots", "0", NULL};
	agree(2, RP_STATIC_RECENCY, pol, 0, COPIES_PER_CARD);
}

Test(agree, all_tiers_with_predictions_two_cards_two_engines, .timeout = 600)
{
	agree(2, RP_ALL, NULL, 1, COPIES_TOTAL);
}

/* One card, one engine: 96 slots for what two cards share above. */
Test(agree, static_recency_one_card_one_engine, .timeout = 600)
{
	static const char *const pol[] = {"--predicted-slots", "0", NULL};
	agree(1, RP_STATIC_RECENCY, pol, 0, COPIES_PER_CARD);
}

Test(agree, all_tiers_with_predictions_one_card_one_engine, .timeout = 600)
{
	agree(1, RP_ALL, NULL, 1, COPIES_TOTAL);
}
