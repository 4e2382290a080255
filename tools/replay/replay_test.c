/* SPDX-License-Identifier: Apache-2.0 */
/* replay_test.c: fs-replay: the same numbers twice for a fixed seed, the
 * three inputs (CSV, .fstrace, synthetic) agree, the predictor has the
 * recall it is told, and `--compare --json` prints JSON that parses. */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "replay.h"
#include "replay_predict.h"

static char g_dir[] = "/tmp/fs-replay-test-XXXXXX";

static void make_dir(void)
{
	cr_assert_not_null(mkdtemp(g_dir));
}

static void remove_dir(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(replay, .init = make_dir, .fini = remove_dir);

/* A small synthetic trace: 8 layers x 64 experts, top-4, 2-token windows. */
static void small_trace(struct fs_trace *t, uint32_t windows, uint64_t seed)
{
	struct fs_trace_gen g;
	fs_trace_gen_defaults(&g);
	g.layers = 8;
	g.experts = 64;
	g.topk = 4;
	g.tokens_per_window = 2;
	g.windows = windows;
	g.skew = 1.2;
	g.locality = 0.3;
	g.seed = seed;
	g.expert_bytes = 1 << 20;
	char err[FS_TRACE_ERRLEN];
	cr_assert_eq(fs_trace_generate(t, &g, err, sizeof(err)), 0, "%s", err);
}

static void small_model(struct replay_model *m)
{
	replay_model_defaults(m);
	m->tokens_per_window = 2;
	m->warmup = 10;
	m->slots_frac = 0.4;
}

static void run_all(const struct fs_trace *t, const struct replay_model *m, struct replay_result *res)
{
	static uint32_t counts[8 * 64];
	struct replay_input in = {.trace = t, .name = "test", .profile = counts, .profile_from = "warm-up"};
	cr_assert_gt(replay_profile_build(t, m->warmup, m->tokens_per_window, counts), 0);
	for (int p = 0; p < RP_COMPARE_N; p++) {
		char err[256] = "";
		cr_assert_eq(replay_run(&in, m, (enum replay_policy_id)p, &res[p], err, sizeof(err)), 0, "%s",
			     err);
	}
}

Test(replay, same_seed_same_numbers)
{
	struct fs_trace t;
	small_trace(&t, 70, 7);
	struct replay_model m;
	small_model(&m);
	struct replay_result a[RP_COMPARE_N], b[RP_COMPARE_N];
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	run_all(&t, &m, a);
	run_all(&t, &m, b);
	cr_assert_arr_eq(a, b, sizeof(a), "two runs with one seed differ");
	for (int p = 0; p < RP_COMPARE_N; p++) {
		cr_assert_str_eq(a[p].policy, replay_policy_name((enum replay_policy_id)p));
		cr_assert_eq(a[p].windows, 60);
		cr_assert_eq(a[p].hits + a[p].misses, a[p].uses);
		cr_assert_gt(a[p].uses, 0);
	}
	cr_assert_eq(a[RP_STATIC].copies, 0, "the static baseline copies nothing");
	cr_assert_gt(a[RP_LRU].copies, 0);
	cr_assert_gt(a[RP_ALL].predictions, 0);
	cr_assert_eq(a[RP_STATIC_RECENCY].predictions, 0);
	/* The predictor's noise depends on its seed. */
	m.seed = 8;
	struct replay_result c;
	static uint32_t counts[8 * 64];
	struct replay_input in = {.trace = &t, .name = "test", .profile = counts, .profile_from = "warm-up"};
	replay_profile_build(&t, m.warmup, m.tokens_per_window, counts);
	char err[256];
	cr_assert_eq(replay_run(&in, &m, RP_ALL, &c, err, sizeof(err)), 0);
	cr_assert_eq(c.uses, a[RP_ALL].uses);
	cr_assert(c.hits != a[RP_ALL].hits || c.copies != a[RP_ALL].copies, "seed 8 replayed seed 7's noise");
	fs_trace_free(&t);
}

/* The trace as a route CSV: its first `prefill` tokens as prefill rows. */
static void write_csv(const struct fs_trace *t, uint32_t prefill, const char *path)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f,
		"# route_trace v1\n# model=/m/synth.gguf arch=synth n_layer=%u n_expert=%u n_expert_used=%u\n",
		t->layers, t->experts, t->topk);
	for (uint32_t l = 0; l < t->layers; l++)
		fprintf(f, "# layer=%u expert_bytes=%llu dense_bytes=1\n", l,
			(unsigned long long)t->expert_bytes[l]);
	fprintf(f, "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes\n");
	for (uint32_t tok = 0; tok < t->tokens; tok++)
		for (uint32_t l = 0; l < t->layers; l++)
			for (uint32_t k = 0; k < t->topk; k++)
				fprintf(f, "0,%d,%u,%u,%u,%u,0.1,0,0\n", tok >= prefill, tok, l, k,
					fs_trace_token(t, tok, l)[k]);
	fclose(f);
}

Test(replay, csv_fstrace_and_memory_agree)
{
	struct fs_trace gen, csv, bin;
	small_trace(&gen, 80, 3);
	char csv_path[128], bin_path[128], err[FS_TRACE_ERRLEN] = "";
	snprintf(csv_path, sizeof(csv_path), "%s/t.route.csv", g_dir);
	snprintf(bin_path, sizeof(bin_path), "%s/t.fstrace", g_dir);
	write_csv(&gen, 20, csv_path);
	cr_assert_eq(fs_trace_load(&csv, csv_path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(csv.prefill_tokens, 20);
	cr_assert_eq(csv.tokens, 140);
	cr_assert_eq(fs_trace_write_bin(&csv, bin_path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fs_trace_load(&bin, bin_path, err, sizeof(err)), 0, "%s", err);

	/* Prefill (CSV, .fstrace) and 10 warm-up windows of the same tokens
	 * (memory) build the same profile; the same windows are scored. */
	struct replay_model m;
	small_model(&m);
	static uint32_t pc[8 * 64], pb[8 * 64], pg[8 * 64];
	cr_assert_eq(replay_profile_build(&csv, 0, 2, pc), 20);
	cr_assert_eq(replay_profile_build(&bin, 0, 2, pb), 20);
	cr_assert_eq(replay_profile_build(&gen, 10, 2, pg), 20);
	cr_assert_arr_eq(pc, pg, sizeof(pc));
	cr_assert_arr_eq(pb, pg, sizeof(pb));
	struct replay_input ic = {.trace = &csv, .name = "csv", .profile = pc, .profile_from = "prefill"};
	struct replay_input ib = {.trace = &bin, .name = "bin", .profile = pb, .profile_from = "prefill"};
	for (int p = 0; p < RP_COMPARE_N; p++) {
		struct replay_result a, b;
		m.warmup = 0;
		cr_assert_eq(replay_run(&ic, &m, (enum replay_policy_id)p, &a, err, sizeof(err)), 0, "%s",
			     err);
		cr_assert_eq(replay_run(&ib, &m, (enum replay_policy_id)p, &b, err, sizeof(err)), 0, "%s",
			     err);
		cr_assert_eq(a.windows, 70);
		cr_assert_eq(a.misses, b.misses, "%s: CSV and .fstrace differ", a.policy);
		cr_assert_eq(a.copies, b.copies);
	}
	fs_trace_free(&gen);
	fs_trace_free(&csv);
	fs_trace_free(&bin);
}

/* The oracle-noised predictor places a token's routed experts within the
 * table's rank bands at the table's rates. */
Test(replay, predictor_recall_matches_the_table)
{
	struct fs_trace t;
	struct fs_trace_gen g;
	fs_trace_gen_defaults(&g);
	g.layers = 4;
	g.experts = 512;
	g.topk = 10;
	g.windows = 400;
	cr_assert_eq(fs_trace_generate(&t, &g, NULL, 0), 0);
	struct replay_model m;
	replay_model_defaults(&m);
	struct replay_predictor p;
	cr_assert_eq(replay_predictor_init(&p, &t, &m), 0);
	cr_assert_eq(p.cut[0], 10);
	cr_assert_eq(p.cut[1], 24);
	cr_assert_eq(p.cut[2], 48);
	static uint16_t ex[512];
	static float sc[512];
	for (unsigned h = 1; h <= 3; h++) {
		uint64_t in_a = 0, listed = 0, routed = 0;
		for (uint32_t w = 0; w < t.tokens; w++) {
			uint32_t n = replay_predict(&p, w, w, 1, 2, h, ex, sc);
			cr_assert_leq(n, 48);
			const uint16_t *tr = fs_trace_token(&t, w, 2);
			for (uint32_t k = 0; k < t.topk; k++) {
				routed++;
				for (uint32_t i = 0; i < n; i++)
					if (ex[i] == tr[k]) {
						listed++;
						in_a += sc[i] == p.prec[h - 1][0];
					}
			}
		}
		double ra = (double)in_a / routed, r48 = (double)listed / routed;
		cr_expect(ra > m.recall.at[h - 1][0] - 0.03 && ra < m.recall.at[h - 1][0] + 0.03,
			  "horizon %u: recall@10 %.3f, table %.2f", h, ra, m.recall.at[h - 1][0]);
		cr_expect(r48 > m.recall.at[h - 1][2] - 0.03 && r48 < m.recall.at[h - 1][2] + 0.03,
			  "horizon %u: recall@48 %.3f, table %.2f", h, r48, m.recall.at[h - 1][2]);
	}
	replay_predictor_free(&p);
	fs_trace_free(&t);
}

/* The real traces, when ../shared is there: the baselines are what their
 * definitions say, and the tiers beat them without predictions. */
Test(replay, real_trace_when_present)
{
	char path[512], err[FS_TRACE_ERRLEN] = "";
	snprintf(path, sizeof(path), "%s/qwen.route.csv", FS_ROUTE_TRACES_DIR);
	if (access(path, R_OK) != 0)
		cr_skip_test("%s absent (a fresh checkout has no ../shared)", path);
	struct fs_trace t;
	cr_assert_eq(fs_trace_load(&t, path, err, sizeof(err)), 0, "%s", err);
	struct replay_model m;
	replay_model_defaults(&m);
	uint32_t *counts = calloc((size_t)t.layers * t.experts, sizeof(uint32_t));
	cr_assert_gt(replay_profile_build(&t, 0, 1, counts), 0);
	struct replay_input in = {.trace = &t, .name = "qwen", .profile = counts, .profile_from = "prefill"};
	struct replay_result st, lru, rec;
	cr_assert_eq(replay_run(&in, &m, RP_STATIC, &st, err, sizeof(err)), 0);
	cr_assert_eq(replay_run(&in, &m, RP_LRU, &lru, err, sizeof(err)), 0);
	cr_assert_eq(replay_run(&in, &m, RP_STATIC_RECENCY, &rec, err, sizeof(err)), 0);
	cr_assert_eq(st.windows, 128);
	cr_assert_lt(rec.misses, lru.misses);
	cr_assert_lt(rec.misses_per_lw, 0.6 * st.misses_per_lw);
	free(counts);
	fs_trace_free(&t);
}

/* fs-replay itself: --compare --json parses, one object per policy. */
Test(replay, compare_json_smoke)
{
	char cmd[512];
	snprintf(
		cmd, sizeof(cmd),
		"'%s' --synthetic --layers 8 --experts 64 --topk 4 --windows 40 --warmup 10 --compare --json",
		FS_REPLAY_BIN);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	cr_assert_eq(pclose(f), 0, "fs-replay failed:\n%s", buf);
	cJSON *j = cJSON_Parse(buf);
	cr_assert_not_null(j, "not JSON:\n%s", buf);
	cr_assert(cJSON_IsArray(j));
	static const char *const want[] = {"static", "lru",     "static+recency", "static+predicted",
					   "all",    "learned", "clairvoyant"};
	cr_assert_eq(cJSON_GetArraySize(j), 7);
	for (int i = 0; i < 7; i++) {
		const cJSON *o = cJSON_GetArrayItem(j, i);
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "policy");
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "distinct_misses");
		const cJSON *sz = cJSON_GetObjectItemCaseSensitive(o, "share_of_zero_miss");
		const cJSON *sb = cJSON_GetObjectItemCaseSensitive(o, "share_of_bound");
		cr_assert(cJSON_IsString(p) && strcmp(p->valuestring, want[i]) == 0);
		cr_assert(cJSON_IsNumber(d) && d->valuedouble >= 0);
		cr_assert(cJSON_IsNumber(sz) && cJSON_IsNumber(sb), "shares of %s", want[i]);
		cr_assert(fabs(sz->valuedouble) <= fabs(sb->valuedouble) + 1e-9,
			  "the bound is never above zero-miss");
	}
	/* static is the reference of both shares; the bound is its own 100 % */
	cr_assert_float_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "share_of_bound")->valuedouble, 0.0,
			   1e-9);
	cr_assert_float_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 6), "share_of_bound")->valuedouble, 1.0,
			   1e-9);
	cJSON_Delete(j);
}

/* --sweep writes its CSV whether or not gnuplot is there. */
Test(replay, sweep_writes_csv)
{
	char cmd[768], path[256];
	snprintf(
		cmd, sizeof(cmd),
		"PATH=/nonexistent '%s' --synthetic --layers 8 --experts 64 --topk 4 --windows 20 --warmup 5 "
		"--policy static --policy static+recency --sweep delay --out '%s' 2>/dev/null",
		FS_REPLAY_BIN, g_dir);
	cr_assert_eq(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/sweep-delay-synthetic.csv", g_dir);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s missing", path);
	char line[256];
	int rows = 0;
	while (fgets(line, sizeof(line), f))
		rows++;
	fclose(f);
	cr_assert_eq(rows, 1 + 6 * 2, "header + 6 delays x 2 policies, got %d lines", rows);
}

/* A second card adds slots, so `static` with one engine on 2 cards hits at
 * least what it hits on one, and 2 engines on 2 cards as well.  Was 50.5 %
 * against 96.3 % on the discussion's box: once the homes of the second
 * card's layers moved to the engine's card, the second card served no
 * layer and its static tier was trimmed to nothing (fsr_tiers.c). */
Test(replay, a_second_card_never_loses_static_hits)
{
	struct fs_trace t;
	small_trace(&t, 130, 11);
	struct replay_model m;
	small_model(&m);
	m.slots_frac = 0.25;
	static uint32_t counts[8 * 64];
	struct replay_input in = {.trace = &t, .name = "test", .profile = counts, .profile_from = "warm-up"};
	cr_assert_gt(replay_profile_build(&t, m.warmup, m.tokens_per_window, counts), 0);
	char err[256] = "";
	struct replay_result one, two[2];
	cr_assert_eq(replay_run(&in, &m, RP_STATIC, &one, err, sizeof(err)), 0, "%s", err);
	m.cards = 2;
	for (uint32_t cl = 1; cl <= 2; cl++) {
		m.clients = cl;
		cr_assert_eq(replay_run(&in, &m, RP_STATIC, &two[cl - 1], err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(two[cl - 1].uses, one.uses);
		cr_assert_geq(two[cl - 1].hits, one.hits, "2 cards, %u engine(s): %llu hits, 1 card %llu", cl,
			      (unsigned long long)two[cl - 1].hits, (unsigned long long)one.hits);
		cr_assert_eq(two[cl - 1].copies, 0, "the static baseline copies nothing");
	}
	fs_trace_free(&t);
}
