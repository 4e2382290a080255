/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of fs_trace: CSV parsing (good and malformed), the generator, the
 * window iterator, the binary format, the converter and the real traces. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs_rng.h"
#include "fs_trace.h"

static char g_dir[64];

static void make_dir(void)
{
	snprintf(g_dir, sizeof(g_dir), "/tmp/fs_trace_test.XXXXXX");
	cr_assert_not_null(mkdtemp(g_dir));
}

static void remove_dir(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(trace, .init = make_dir, .fini = remove_dir);

/* Write `text` to a file in the test's folder; returns its path (static). */
static const char *fixture(const char *name, const char *text, size_t len)
{
	static char path[128];
	snprintf(path, sizeof(path), "%s/%s", g_dir, name);
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(text, 1, len, f), len);
	fclose(f);
	return path;
}

static const char *fixture_str(const char *text)
{
	return fixture("fixture.csv", text, strlen(text));
}

/* 2 layers x 4 experts, top-2: one prefill token without layer 1, three
 * decode tokens written out of order. */
#define HDR                                                                    \
	"# route_trace v1\n"                                                   \
	"# model=/m/tiny.gguf arch=toy n_layer=2 n_expert=4 n_expert_used=2\n" \
	"# layer=0 expert_bytes=1000 dense_bytes=5\n"                          \
	"# layer=1 expert_bytes=2000 dense_bytes=5\n"                          \
	"turn,phase,step,layer,slot,expert,weight,residency,expert_bytes\n"
/* Line numbers: the header is lines 1-5, the first row line 6. */
static const char good_rows[] = "0,0,0,0,0,3,0.5,0,1000\n"
				"0,0,0,0,1,1,0.5,0,1000\n"
				"0,1,6,0,0,2,0.6,1,0\n"
				"0,1,6,0,1,0,0.4,0,1000\n"
				"0,1,6,1,1,3,0.4,0,1000\n"
				"0,1,6,1,0,1,0.6,0,1000\n"
				"0,1,5,0,0,1,0.6,0,1000\n"
				"0,1,5,0,1,2,0.4,0,1000\n"
				"0,1,5,1,0,0,0.6,0,1000\n"
				"0,1,5,1,1,3,0.4,0,1000\n"
				"0,1,7,0,0,2,0.6,0,1000\n"
				"0,1,7,0,1,3,0.4,0,1000\n"
				"0,1,7,1,0,0,0.6,0,1000\n"
				"0,1,7,1,1,1,0.4,0,1000\n";

static void expect_token(const struct fs_trace *t, uint32_t tok, uint32_t layer, uint16_t a, uint16_t b)
{
	const uint16_t *e = fs_trace_token(t, tok, layer);
	cr_expect(e[0] == a && e[1] == b, "token %u layer %u: got %u,%u want %u,%u", tok, layer, e[0], e[1],
		  a, b);
}

Test(trace, csv_good)
{
	char text[2048], err[FS_TRACE_ERRLEN] = "";
	snprintf(text, sizeof(text), "%s%s", HDR, good_rows);
	struct fs_trace t;
	int rc = fs_trace_load_csv(&t, fixture_str(text), err, sizeof(err));
	cr_assert_eq(rc, 0, "load failed: %s", err);
	cr_expect_eq(t.layers, 2);
	cr_expect_eq(t.experts, 4);
	cr_expect_eq(t.topk, 2);
	cr_expect_eq(t.tokens, 3);
	cr_expect_eq(t.prefill_tokens, 1);
	cr_expect_str_eq(t.model, "/m/tiny.gguf");
	cr_expect_str_eq(t.arch, "toy");
	cr_expect_eq(t.expert_bytes[0], 1000);
	cr_expect_eq(t.expert_bytes[1], 2000);
	/* decode tokens ordered by step (5, 6, 7), experts in rank order */
	expect_token(&t, 0, 0, 1, 2);
	expect_token(&t, 0, 1, 0, 3);
	expect_token(&t, 1, 0, 2, 0);
	expect_token(&t, 1, 1, 1, 3);
	expect_token(&t, 2, 0, 2, 3);
	expect_token(&t, 2, 1, 0, 1);
	/* prefill kept apart; its missing layer reads as FS_TRACE_NONE */
	cr_expect_eq(t.prefill[0], 3);
	cr_expect_eq(t.prefill[1], 1);
	cr_expect_eq(t.prefill[2], FS_TRACE_NONE);
	cr_expect_eq(t.prefill[3], FS_TRACE_NONE);
	fs_trace_free(&t);
}

Test(trace, csv_reordered_columns_crlf_comments)
{
	const char *text = "# route_trace v1\r\n"
			   "# a free comment\r\n"
			   "# model=x n_layer=1 n_expert=3 n_expert_used=1 extra words\r\n"
			   "\r\n"
			   "expert,slot,layer,step,phase,note\r\n"
			   "2,0,0,10,1,hello\r\n"
			   "# comment among rows\r\n"
			   "0,0,0,11,1,\r\n";
	struct fs_trace t;
	char err[FS_TRACE_ERRLEN] = "";
	cr_assert_eq(fs_trace_load_csv(&t, fixture_str(text), err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(t.tokens, 2);
	cr_expect_eq(t.prefill_tokens, 0);
	cr_expect_eq(fs_trace_token(&t, 0, 0)[0], 2);
	cr_expect_eq(fs_trace_token(&t, 1, 0)[0], 0);
	cr_expect_eq(t.expert_bytes[0], 0, "no layer line: size unknown");
	fs_trace_free(&t);
}

/* A malformed trace: the text after HDR (or a whole file when raw), the
 * line the error must name and a word the message must contain. */
struct bad_case {
	const char *what;
	int raw;
	const char *text;
	const char *line;
	const char *word;
};

static const struct bad_case bad_cases[] = {
	{"not a trace", 1, "hello,world\n", "line 1", "route_trace v1"},
	{"future version", 1, "# route_trace v2\n", "line 1", "unsupported"},
	{"empty file", 1, "", "line 1", "empty"},
	{"layer out of range", 0, "0,1,5,2,0,1,0.5,0,1\n", "line 6", "layer 2 out of range"},
	{"expert out of range", 0, "0,1,5,0,0,1,0.5,0,1\n0,1,5,0,1,4,0.5,0,1\n", "line 7",
	 "expert 4 out of range"},
	{"rank beyond top-k", 0, "0,1,5,0,2,1,0.5,0,1\n", "line 6", "slot 2 out of range"},
	{"bad phase", 0, "0,2,5,0,0,1,0.5,0,1\n", "line 6", "phase"},
	{"not a number", 0, "0,1,x5,0,0,1,0.5,0,1\n", "line 6", "step 'x5'"},
	{"negative", 0, "0,1,5,0,0,-1,0.5,0,1\n", "line 6", "expert '-1'"},
	{"overflow", 0, "0,1,99999999999999999999,0,0,1,0.5,0,1\n", "line 6", "not an unsigned integer"},
	{"empty field", 0, "0,1,5,,0,1,0.5,0,1\n", "line 6", "layer ''"},
	{"short row", 0, "0,1,5,0,0,1\n", "line 6", "6 fields, the header has 9"},
	{"long row", 0, "0,1,5,0,0,1,0.5,0,1,9\n", "line 6", "10 fields"},
	{"duplicate row", 0,
	 "0,1,5,0,0,1,0.5,0,1\n0,1,5,0,1,2,0.5,0,1\n0,1,5,1,0,1,0.5,0,1\n0,1,5,1,1,2,0.5,0,1\n0,1,5,0,1,3,0.5,0,1\n",
	 "line 10", "duplicate row"},
	{"expert twice", 0, "0,1,5,0,0,1,0.5,0,1\n0,1,5,0,1,1,0.5,0,1\n", "line 7", "expert 1 twice"},
	{"incomplete decode token", 0,
	 "0,1,5,0,0,1,0.5,0,1\n0,1,5,0,1,2,0.5,0,1\n0,1,5,1,0,1,0.5,0,1\n0,1,6,0,0,1,0.5,0,1\n", "line 6",
	 "layer 1 has 1 of 2"},
	{"no decode rows", 0, "0,0,5,0,0,1,0.5,0,1\n", "line 6", "no decode rows"},
	{"columns before model", 1, "# route_trace v1\nturn,phase,step,layer,slot,expert\n", "line 2",
	 "before the '# model="},
	{"missing column", 1,
	 "# route_trace v1\n# model=m n_layer=2 n_expert=4 n_expert_used=2\nturn,phase,step,layer,slot,weight\n",
	 "line 3", "no 'expert' column"},
	{"top-k above experts", 1, "# route_trace v1\n# model=m n_layer=2 n_expert=4 n_expert_used=5\n",
	 "line 2", "top-k"},
	{"model line without dims", 1, "# route_trace v1\n# model=m n_layer=2\n", "line 2", "n_expert="},
	{"bad n_layer", 1, "# route_trace v1\n# model=m n_layer=two n_expert=4 n_expert_used=2\n", "line 2",
	 "n_layer='two'"},
	{"layer line out of range", 1,
	 "# route_trace v1\n# model=m n_layer=2 n_expert=4 n_expert_used=2\n# layer=2 expert_bytes=9\n",
	 "line 3", "layer=2 out of range"},
	{"layer line before model", 1, "# route_trace v1\n# layer=0 expert_bytes=9\n", "line 2",
	 "before the"},
};

Test(trace, csv_malformed_names_the_line)
{
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *c = &bad_cases[i];
		char text[4096], err[FS_TRACE_ERRLEN] = "";
		snprintf(text, sizeof(text), "%s%s", c->raw ? "" : HDR, c->text);
		struct fs_trace t;
		int rc = fs_trace_load_csv(&t, fixture_str(text), err, sizeof(err));
		cr_expect_lt(rc, 0, "%s: accepted", c->what);
		cr_expect(strstr(err, c->line) != NULL, "%s: message does not name %s: %s", c->what, c->line,
			  err);
		cr_expect(strstr(err, c->word) != NULL, "%s: message lacks '%s': %s", c->what, c->word, err);
		cr_expect_null(t.decode, "%s: a failed load leaves no trace", c->what);
		fs_trace_free(&t); /* harmless after failure */
	}
}

Test(trace, csv_nul_byte_and_missing_file)
{
	static const char text[] =
		"# route_trace v1\n# model=m n_layer=1 n_expert=2 n_expert_used=1\nph\0ase\n";
	struct fs_trace t;
	char err[FS_TRACE_ERRLEN] = "";
	cr_expect_lt(fs_trace_load_csv(&t, fixture("nul.csv", text, sizeof(text) - 1), err, sizeof(err)), 0);
	cr_expect(strstr(err, "line 3") && strstr(err, "NUL"), "%s", err);
	cr_expect_lt(fs_trace_load_csv(&t, "/nonexistent/x.csv", err, sizeof(err)), 0);
	cr_expect(strstr(err, "/nonexistent/x.csv") != NULL, "%s", err);
	cr_expect_lt(fs_trace_load(&t, "/nonexistent/x.csv", err, sizeof(err)), 0);
}

/* Random byte edits of a good file: every load either succeeds or fails
 * with a message; none crashes (run under ASan by tools/test.sh). */
Test(trace, csv_random_mutations_never_crash)
{
	char text[2048], mut[2048], err[FS_TRACE_ERRLEN];
	int n = snprintf(text, sizeof(text), "%s%s", HDR, good_rows);
	static const char alphabet[] = "0123456789,#\n\r =-x\0";
	struct fs_rng rng;
	fs_rng_seed(&rng, 2024);
	int failed = 0;
	for (int round = 0; round < 400; round++) {
		memcpy(mut, text, (size_t)n);
		int edits = 1 + (int)fs_rng_below(&rng, 4);
		for (int e = 0; e < edits; e++)
			mut[fs_rng_below(&rng, (uint32_t)n)] =
				alphabet[fs_rng_below(&rng, sizeof(alphabet) - 1)];
		struct fs_trace t;
		err[0] = '\0';
		int rc = fs_trace_load_csv(&t, fixture("mut.csv", mut, (size_t)n), err, sizeof(err));
		if (rc) {
			failed++;
			cr_expect(strstr(err, "mut.csv") != NULL, "message without the file name: '%s'", err);
		} else {
			cr_expect_gt(t.tokens, 0);
			fs_trace_free(&t);
		}
	}
	cr_expect_gt(failed, 100, "most random edits should be caught (%d of 400)", failed);
}

/* ---- generator ---------------------------------------------------------- */

static void gen(struct fs_trace *t, double skew, double locality, uint64_t seed)
{
	struct fs_trace_gen g;
	fs_trace_gen_defaults(&g);
	g.layers = 8;
	g.experts = 64;
	g.topk = 4;
	g.windows = 500;
	g.skew = skew;
	g.locality = locality;
	g.seed = seed;
	char err[FS_TRACE_ERRLEN] = "";
	cr_assert_eq(fs_trace_generate(t, &g, err, sizeof(err)), 0, "%s", err);
}

static int same_decode(const struct fs_trace *a, const struct fs_trace *b)
{
	return a->tokens == b->tokens && a->layers == b->layers && a->topk == b->topk &&
	       memcmp(a->decode, b->decode, (size_t)a->tokens * a->layers * a->topk * 2) == 0;
}

Test(trace, gen_deterministic_and_valid)
{
	struct fs_trace a, b, c;
	gen(&a, 1.0, 0.3, 42);
	gen(&b, 1.0, 0.3, 42);
	gen(&c, 1.0, 0.3, 43);
	cr_expect(same_decode(&a, &b), "same seed, different trace");
	cr_expect(!same_decode(&a, &c), "different seeds, same trace");
	cr_expect_eq(a.tokens, 500);
	cr_expect_eq(a.seed, 42);
	for (uint32_t tok = 0; tok < a.tokens; tok++)
		for (uint32_t l = 0; l < a.layers; l++) {
			const uint16_t *e = fs_trace_token(&a, tok, l);
			for (uint32_t k = 0; k < a.topk; k++) {
				cr_assert_lt(e[k], a.experts);
				for (uint32_t j = 0; j < k; j++)
					cr_assert_neq(e[j], e[k], "token %u layer %u repeats expert %u", tok,
						      l, e[k]);
			}
		}
	fs_trace_free(&a);
	fs_trace_free(&b);
	fs_trace_free(&c);
}

Test(trace, gen_skew_concentrates_uses)
{
	double share[3];
	const double skews[3] = {0.0, 0.8, 1.5};
	for (int i = 0; i < 3; i++) {
		struct fs_trace t;
		struct fs_trace_stats st;
		gen(&t, skews[i], 0.0, 7);
		cr_assert_eq(fs_trace_stats(&t, 1, &st), 0);
		share[i] = st.top_decile_share;
		fs_trace_free(&t);
	}
	/* uniform: the top 10 % of 64 experts (7) take a bit above 7/64 */
	cr_expect_lt(share[0], 0.2, "uniform top-decile share %.3f", share[0]);
	cr_expect_gt(share[1], share[0] + 0.05, "skew 0.8: %.3f vs %.3f", share[1], share[0]);
	cr_expect_gt(share[2], share[1] + 0.05, "skew 1.5: %.3f vs %.3f", share[2], share[1]);
}

Test(trace, gen_locality_reuses_previous_token)
{
	double reuse[3], distinct[3];
	const double loc[3] = {0.0, 0.5, 0.9};
	for (int i = 0; i < 3; i++) {
		struct fs_trace t;
		struct fs_trace_stats st;
		gen(&t, 0.5, loc[i], 9);
		cr_assert_eq(fs_trace_stats(&t, 4, &st), 0);
		reuse[i] = st.reuse;
		distinct[i] = st.distinct_per_window;
		fs_trace_free(&t);
	}
	cr_expect_lt(reuse[0], 0.25, "locality 0: reuse %.3f", reuse[0]);
	cr_expect_gt(reuse[1], reuse[0] + 0.2, "locality 0.5: %.3f", reuse[1]);
	cr_expect_gt(reuse[2], 0.88, "locality 0.9: %.3f", reuse[2]);
	/* more reuse, fewer distinct experts in a 4-token window */
	cr_expect_gt(distinct[0], distinct[1]);
	cr_expect_gt(distinct[1], distinct[2]);
}

Test(trace, gen_rejects_bad_knobs)
{
	struct fs_trace_gen g;
	struct fs_trace t;
	char err[FS_TRACE_ERRLEN];
	fs_trace_gen_defaults(&g);
	g.topk = 200;
	cr_expect_lt(fs_trace_generate(&t, &g, err, sizeof(err)), 0);
	cr_expect(strstr(err, "top-k") != NULL, "%s", err);
	fs_trace_gen_defaults(&g);
	g.locality = 1.5;
	cr_expect_lt(fs_trace_generate(&t, &g, err, sizeof(err)), 0);
	cr_expect(strstr(err, "locality") != NULL, "%s", err);
	fs_trace_gen_defaults(&g);
	g.skew = -1;
	cr_expect_lt(fs_trace_generate(&t, &g, err, sizeof(err)), 0);
	cr_expect(strstr(err, "skew") != NULL, "%s", err);
	fs_trace_gen_defaults(&g);
	g.windows = 0;
	cr_expect_lt(fs_trace_generate(&t, &g, err, sizeof(err)), 0);
	fs_trace_gen_defaults(&g);
	g.windows = 100000000;
	cr_expect_lt(fs_trace_generate(&t, &g, err, sizeof(err)), 0);
	cr_expect(strstr(err, "too large") != NULL, "%s", err);
}

Test(trace, gen_full_topk_and_heavy_skew_terminates)
{
	/* topk == experts with a very steep law: the fallback path must fill */
	struct fs_trace_gen g;
	fs_trace_gen_defaults(&g);
	g.layers = 2;
	g.experts = 8;
	g.topk = 8;
	g.skew = 16;
	g.windows = 20;
	struct fs_trace t;
	char err[FS_TRACE_ERRLEN];
	cr_assert_eq(fs_trace_generate(&t, &g, err, sizeof(err)), 0, "%s", err);
	struct fs_trace_iter it;
	cr_assert_eq(fs_trace_iter_init(&it, &t, 1), 0);
	while (fs_trace_iter_next(&it))
		cr_expect_eq(fs_trace_iter_experts(&it, 1, &(const uint16_t *){0}), 8);
	fs_trace_iter_free(&it);
	fs_trace_free(&t);
}

/* ---- windows -------------------------------------------------------------- */

Test(trace, iterator_distinct_sorted)
{
	char text[2048], err[FS_TRACE_ERRLEN] = "";
	snprintf(text, sizeof(text), "%s%s", HDR, good_rows);
	struct fs_trace t;
	cr_assert_eq(fs_trace_load_csv(&t, fixture_str(text), err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(fs_trace_windows(&t, 1), 3);
	cr_expect_eq(fs_trace_windows(&t, 2), 2);
	cr_expect_eq(fs_trace_windows(&t, 9), 1);
	cr_expect_eq(fs_trace_windows(&t, 0), 0);

	struct fs_trace_iter it;
	const uint16_t *e;
	cr_assert_eq(fs_trace_iter_init(&it, &t, 2), 0);
	cr_assert_eq(fs_trace_iter_next(&it), 1);
	cr_expect_eq(it.window, 0);
	cr_expect_eq(it.first_token, 0);
	cr_expect_eq(it.n_tokens, 2);
	/* layer 0: tokens {1,2} and {2,0} -> 0 1 2 */
	cr_assert_eq(fs_trace_iter_experts(&it, 0, &e), 3);
	cr_expect(e[0] == 0 && e[1] == 1 && e[2] == 2);
	/* layer 1: {0,3} and {1,3} -> 0 1 3 */
	cr_assert_eq(fs_trace_iter_experts(&it, 1, &e), 3);
	cr_expect(e[0] == 0 && e[1] == 1 && e[2] == 3);
	cr_assert_eq(fs_trace_iter_next(&it), 1);
	cr_expect_eq(it.n_tokens, 1, "the last window is short");
	cr_assert_eq(fs_trace_iter_experts(&it, 0, &e), 2);
	cr_expect(e[0] == 2 && e[1] == 3);
	cr_expect_eq(fs_trace_iter_next(&it), 0);
	cr_expect_eq(fs_trace_iter_experts(&it, 7, &e), 0, "layer out of range");
	/* seek back to the start */
	cr_expect_eq(fs_trace_iter_seek(&it, 0), 1);
	cr_expect_eq(fs_trace_iter_experts(&it, 0, &e), 3);
	cr_expect_eq(fs_trace_iter_seek(&it, 2), 0);
	fs_trace_iter_free(&it);
	cr_expect_lt(fs_trace_iter_init(&it, &t, 0), 0);
	fs_trace_free(&t);
}

/* ---- binary format ------------------------------------------------------ */

static void expect_equal_traces(const struct fs_trace *a, const struct fs_trace *b)
{
	cr_assert(same_decode(a, b));
	cr_expect_eq(a->experts, b->experts);
	cr_expect_eq(a->prefill_tokens, b->prefill_tokens);
	cr_expect_eq(a->seed, b->seed);
	cr_expect_str_eq(a->model, b->model);
	cr_expect_str_eq(a->arch, b->arch);
	cr_expect_eq(memcmp(a->expert_bytes, b->expert_bytes, a->layers * 8), 0);
	cr_expect_eq(memcmp(a->prefill, b->prefill, (size_t)a->prefill_tokens * a->layers * a->topk * 2), 0);
}

Test(trace, binary_round_trip)
{
	struct fs_trace a, b;
	char path[128], err[FS_TRACE_ERRLEN] = "";
	gen(&a, 1.2, 0.4, 5);
	a.expert_bytes[3] = 123456789012ull;
	snprintf(path, sizeof(path), "%s/a.fstrace", g_dir);
	cr_assert_eq(fs_trace_write_bin(&a, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fs_trace_read_bin(&b, path, err, sizeof(err)), 0, "%s", err);
	expect_equal_traces(&a, &b);
	fs_trace_free(&b);
	cr_assert_eq(fs_trace_load(&b, path, err, sizeof(err)), 0, "sniffed: %s", err);
	expect_equal_traces(&a, &b);
	fs_trace_free(&a);
	fs_trace_free(&b);

	/* CSV with prefill -> binary -> same trace */
	char text[2048];
	snprintf(text, sizeof(text), "%s%s", HDR, good_rows);
	cr_assert_eq(fs_trace_load(&a, fixture_str(text), err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fs_trace_write_bin(&a, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fs_trace_read_bin(&b, path, err, sizeof(err)), 0, "%s", err);
	expect_equal_traces(&a, &b);
	fs_trace_free(&a);
	fs_trace_free(&b);
}

static size_t read_all(const char *path, unsigned char *buf, size_t cap)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f);
	size_t n = fread(buf, 1, cap, f);
	fclose(f);
	return n;
}

Test(trace, binary_rejects_corruption)
{
	struct fs_trace a, b;
	char path[128], err[FS_TRACE_ERRLEN] = "";
	gen(&a, 1.0, 0.3, 1);
	snprintf(path, sizeof(path), "%s/a.fstrace", g_dir);
	cr_assert_eq(fs_trace_write_bin(&a, path, err, sizeof(err)), 0, "%s", err);
	static unsigned char buf[1 << 20];
	size_t n = read_all(path, buf, sizeof(buf));
	cr_assert_lt(n, sizeof(buf));

	const struct {
		const char *what;
		size_t off;
		unsigned char val;
		size_t len;
		const char *word;
	} cases[] = {
		{"bad magic", 0, 'X', n, "magic"},
		{"future version", 8, 9, n, "version"},
		{"flipped expert", 256 + 8 * 8 + 100, 0x55, n, "checksum"},
		{"huge layers", 17, 0x7f, n, "layers"},
		{"truncated", 0, 'F', n - 3, "truncated"},
		{"header only", 0, 'F', 100, "header"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned char saved = buf[cases[i].off];
		buf[cases[i].off] = cases[i].val;
		const char *p = fixture("bad.fstrace", (const char *)buf, cases[i].len);
		buf[cases[i].off] = saved;
		cr_expect_lt(fs_trace_read_bin(&b, p, err, sizeof(err)), 0, "%s: accepted", cases[i].what);
		cr_expect(strstr(err, cases[i].word) != NULL, "%s: message lacks '%s': %s", cases[i].what,
			  cases[i].word, err);
	}
	/* any single flipped byte is refused (checksum or a header check) */
	struct fs_rng rng;
	fs_rng_seed(&rng, 7);
	for (int round = 0; round < 200; round++) {
		size_t off = fs_rng_below(&rng, (uint32_t)n);
		unsigned char saved = buf[off];
		buf[off] ^= (unsigned char)(1 + fs_rng_below(&rng, 255));
		const char *p = fixture("flip.fstrace", (const char *)buf, n);
		buf[off] = saved;
		cr_expect_lt(fs_trace_read_bin(&b, p, err, sizeof(err)), 0, "flip at %zu accepted", off);
	}
	fs_trace_free(&a);
}

/* ---- converter and the real traces -------------------------------------- */

static int run(const char *cmd)
{
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(trace, converter)
{
	char text[2048], cmd[512];
	snprintf(text, sizeof(text), "%s%s", HDR, good_rows);
	const char *csv = fixture_str(text);
	snprintf(cmd, sizeof(cmd), "%s %s %s/out.fstrace >/dev/null", FS_TRACE_CONVERT, csv, g_dir);
	cr_expect_eq(run(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s --info %s/out.fstrace >/dev/null", FS_TRACE_CONVERT, g_dir);
	cr_expect_eq(run(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s /nonexistent.csv %s/x 2>/dev/null", FS_TRACE_CONVERT, g_dir);
	cr_expect_eq(run(cmd), 1);
	snprintf(cmd, sizeof(cmd), "%s --bogus 2>/dev/null", FS_TRACE_CONVERT);
	cr_expect_eq(run(cmd), 2);
	snprintf(cmd, sizeof(cmd), "%s --help >/dev/null", FS_TRACE_CONVERT);
	cr_expect_eq(run(cmd), 0);
}

static int have_real(const char *file, char *path, size_t cap)
{
	snprintf(path, cap, "%s/%s", FS_ROUTE_TRACES_DIR, file);
	struct stat st;
	return stat(path, &st) == 0;
}

Test(trace, real_qwen_trace)
{
	char path[512], err[FS_TRACE_ERRLEN] = "";
	if (!have_real("qwen.route.csv", path, sizeof(path)))
		cr_skip_test(
			"real traces absent (%s): ../shared/data/route-traces is not beside this checkout",
			path);
	struct fs_trace t;
	cr_assert_eq(fs_trace_load_csv(&t, path, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(t.layers, 48);
	cr_expect_eq(t.experts, 128);
	cr_expect_eq(t.topk, 6);
	cr_expect_eq(t.tokens, 128);
	cr_expect_eq(t.prefill_tokens, 28);
	cr_expect_eq(t.expert_bytes[0], 3059712);
	cr_expect_eq(t.expert_bytes[6], 2654208);
	cr_expect(strstr(t.model, "Qwen3-30B-A3B") != NULL, "%s", t.model);
	/* the first decode row: 0,1,28,0,0,<expert> */
	struct fs_trace_iter it;
	cr_assert_eq(fs_trace_iter_init(&it, &t, 1), 0);
	uint32_t windows = 0;
	while (fs_trace_iter_next(&it)) {
		const uint16_t *e;
		cr_expect_eq(fs_trace_iter_experts(&it, 47, &e), 6);
		windows++;
	}
	cr_expect_eq(windows, 128);
	fs_trace_iter_free(&it);
	fs_trace_free(&t);
}

Test(trace, real_gemma_trace)
{
	char path[512], err[FS_TRACE_ERRLEN] = "";
	if (!have_real("gemma.route.csv", path, sizeof(path)))
		cr_skip_test(
			"real traces absent (%s): ../shared/data/route-traces is not beside this checkout",
			path);
	struct fs_trace t;
	cr_assert_eq(fs_trace_load_csv(&t, path, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(t.layers, 30);
	cr_expect_eq(t.experts, 128);
	cr_expect_eq(t.topk, 6);
	cr_expect_eq(t.tokens, 128);
	fs_trace_free(&t);
}
