/* SPDX-License-Identifier: Apache-2.0 */
/* replay_calib_test.c: the pieces of fs-replay --calibrate: windows of a
 * fractional number of tokens, the discussion's simulators on traces whose
 * answers are known by hand, the real traces' targets against the files,
 * and the model's field setter. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "replay_calib.h"

Test(calib, windows_of_two_and_a_half_tokens)
{
	struct calib_windows w;
	cr_assert_eq(calib_windows_init(&w, 10, 30, 2.5), 0);
	cr_assert_eq(w.n, 8);
	static const uint8_t want[8] = {2, 3, 2, 3, 2, 3, 2, 3};
	uint32_t tok = 10;
	for (uint32_t i = 0; i < w.n; i++) {
		cr_assert_eq(w.ntok[i], want[i], "window %u", i);
		cr_assert_eq(w.first[i], tok);
		tok += w.ntok[i];
	}
	calib_windows_free(&w);
	cr_assert_neq(calib_windows_init(&w, 10, 30, 0.5), 0);
}

/* 2 layers x 4 experts, top-1, one token per window.  Profile tokens 0-3:
 * layer 0 uses 0,0,0,1 and layer 1 uses 2,2,3,3; then layer 0 uses
 * 1,2,1,2 and layer 1 uses 3,3,3,3. */
static void tiny(struct fs_trace *t)
{
	static const uint16_t l0[8] = {0, 0, 0, 1, 1, 2, 1, 2}, l1[8] = {2, 2, 3, 3, 3, 3, 3, 3};
	cr_assert_eq(fs_trace_alloc(t, 2, 4, 1, 8, 0), 0);
	for (uint32_t i = 0; i < 8; i++) {
		t->decode[i * 2] = l0[i];
		t->decode[i * 2 + 1] = l1[i];
	}
}

Test(calib, static_profile_by_hand)
{
	struct fs_trace t;
	tiny(&t);
	uint8_t res[8];
	/* two slots: the card's hottest (layer 0 expert 0: 3 uses; then a tie
	 * of 2 between (1, 2) and (1, 3), spread over layers by expert id) */
	calib_static_set(&t, 4, 2, res);
	cr_assert_eq(res[0 * 4 + 0], 1);
	cr_assert_eq(res[1 * 4 + 2], 1);
	struct calib_windows w;
	cr_assert_eq(calib_windows_init(&w, 4, 8, 1.0), 0);
	struct calib_result r;
	calib_static(&t, &w, res, &r);
	cr_assert_eq(r.uses, 8);
	cr_assert_eq(r.misses, 8, "nothing the decode uses is in the profile's two slots");
	cr_assert_float_eq(r.misses_per_lw, 1.0, 1e-9);
	calib_static_set(&t, 4, 4, res); /* + (0, 1) and (1, 3) */
	calib_static(&t, &w, res, &r);
	cr_assert_eq(r.misses, 2, "layer 0 expert 2, twice");
	calib_windows_free(&w);
	fs_trace_free(&t);
}

/* The ring takes its slots from the static set and catches what missed
 * `delay` windows earlier. */
Test(calib, ring_by_hand)
{
	struct fs_trace t;
	tiny(&t);
	struct calib_windows w;
	cr_assert_eq(calib_windows_init(&w, 4, 8, 1.0), 0);
	struct calib_result r;
	/* 4 slots, ring of 1 per layer: static keeps 2 ((0,0), (1,2)); layer 0
	 * misses 1, 2 (delay 1: 1 lands in window 1 and is evicted by 2 in
	 * window 2...): every use of layer 0 misses; layer 1 misses 3 once */
	cr_assert_eq(calib_ring(&t, &w, 4, 4, 1, 1, &r), 0);
	cr_assert_eq(r.misses, 5, "layer 0: 4, layer 1: 1; got %llu", (unsigned long long)r.misses);
	/* delay 3: layer 1's expert 3 lands for the last window only */
	cr_assert_eq(calib_ring(&t, &w, 4, 4, 1, 3, &r), 0);
	cr_assert_eq(r.misses, 4 + 3);
	calib_windows_free(&w);
	fs_trace_free(&t);
}

/* Adapt swaps a resident nobody uses for an expert used in every window. */
Test(calib, adapt_by_hand)
{
	struct fs_trace t;
	tiny(&t);
	for (uint32_t i = 4; i < 8; i++)
		t.decode[i * 2] = 1; /* layer 0 decodes with expert 1 only */
	struct calib_windows w;
	cr_assert_eq(calib_windows_init(&w, 4, 8, 1.0), 0);
	struct calib_result st, ad;
	uint8_t res[8];
	calib_static_set(&t, 4, 3, res);
	calib_static(&t, &w, res, &st);
	/* every 2 windows, no decay, any number of swaps: layer 0's expert 1
	 * (2 uses by then) replaces a resident with none */
	cr_assert_eq(calib_adapt(&t, &w, 4, 3, 2, 1.0, 8, &ad), 0);
	cr_assert_eq(st.misses, 4);
	cr_assert_eq(ad.misses, 2, "swapped in after two windows: %llu", (unsigned long long)ad.misses);
	calib_windows_free(&w);
	fs_trace_free(&t);
}

Test(calib, reuse_and_distinct_by_hand)
{
	struct fs_trace t;
	tiny(&t);
	/* layer 0: 0,0,0,1,1,2,1,2; layer 1: 2,2,3,3,3,3,3,3 */
	cr_assert_float_eq(calib_reuse(&t, 0, 1), (3.0 + 6.0) / 14.0, 1e-9);
	cr_assert_float_eq(calib_reuse(&t, 4, 1), (2.0 + 5.0) / 12.0, 1e-9,
			   "pairs across sessions do not count");
	cr_assert_float_eq(calib_distinct(&t, 0, 4), (2.0 + 2.0 + 2.0 + 1.0) / 4.0, 1e-9);
	fs_trace_free(&t);
}

Test(calib, model_set)
{
	struct fs_trace_model m;
	fs_trace_model_defaults(&m);
	cr_assert_eq(calib_model_set(&m, "sigma=1.25"), 0);
	cr_assert_float_eq(m.sigma, 1.25, 1e-12);
	cr_assert_eq(calib_model_set(&m, "topics=7"), 0);
	cr_assert_eq(m.topics, 7);
	cr_assert_neq(calib_model_set(&m, "sigmas=1"), 0);
	cr_assert_neq(calib_model_set(&m, "sigma="), 0);
	cr_assert_neq(calib_model_set(&m, "sigma=nan"), 0);
	cr_assert_neq(calib_model_set(&m, "topics=0"), 0);
	cr_assert_neq(calib_model_set(&m, "sigma"), 0);
}

/* The targets written into replay_calib.c are what the traces say. */
Test(calib, trace_targets_match_the_files)
{
	for (int i = 0; i < 2; i++) {
		const struct replay_trace_target *tt = &replay_trace_targets[i];
		char path[512];
		snprintf(path, sizeof(path), "%s/%s.route.csv", FS_ROUTE_TRACES_DIR, tt->name);
		if (access(path, R_OK) != 0)
			cr_skip_test("%s absent (a fresh checkout has no ../shared)", path);
		struct fs_trace t;
		char err[FS_TRACE_ERRLEN];
		cr_assert_eq(fs_trace_load(&t, path, err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(t.layers, tt->layers);
		cr_assert_eq(t.experts, tt->experts);
		cr_assert_eq(t.topk, tt->topk);
		static const uint32_t lag[3] = {1, 2, 10}, span[2] = {16, 64};
		for (int j = 0; j < 3; j++)
			cr_assert_float_eq(calib_reuse(&t, 0, lag[j]), tt->reuse[j], 0.0006, "%s lag %u",
					   tt->name, lag[j]);
		for (int j = 0; j < 2; j++)
			cr_assert_float_eq(calib_distinct(&t, 0, span[j]), tt->distinct[j], 0.006,
					   "%s span %u", tt->name, span[j]);
		for (unsigned h = 1; h <= 3; h++) {
			double k, k2;
			cr_assert_eq(calib_route_recall(&t, 0, h, &k, &k2), 0);
			cr_assert_float_eq(k, tt->route[h - 1][0], 0.00006, "%s %u ahead at k", tt->name, h);
			cr_assert_float_eq(k2, tt->route[h - 1][1], 0.00006, "%s %u ahead at 2k", tt->name,
					   h);
		}
		fs_trace_free(&t);
	}
}

/* fs-replay TRACE --calibrate: a trace the model was not fitted to.  A
 * trace drawn from the model itself (same fields) must pass; one drawn
 * from a uniform router (no popularity, no reuse) must not. */
Test(calib, held_out_trace)
{
	struct fs_trace_model m;
	fs_trace_model_defaults(&m);
	m.layers = 48;
	m.experts = 128;
	m.topk = 6;
	m.tokens = 128;
	m.session_tokens = 128;
	m.seed = 77;
	struct fs_trace t;
	char err[FS_TRACE_ERRLEN];
	cr_assert_eq(fs_trace_model_generate(&t, &m, err, sizeof(err)), 0, "%s", err);
	FILE *devnull = fopen("/dev/null", "w");
	cr_assert_not_null(devnull);
	struct fs_trace_model box;
	fs_trace_model_defaults(&box);
	cr_assert_eq(replay_calibrate_trace(getenv("CALIB_SHOW") ? stdout : devnull, &box, CALIB_TABLE, &t,
					    "dir/self.route.csv"),
		     0);
	fs_trace_free(&t);

	struct fs_trace_gen g;
	fs_trace_gen_defaults(&g);
	g.layers = 16;
	g.experts = 128;
	g.topk = 6;
	g.windows = 128;
	g.skew = 0.0;
	g.locality = 0.0;
	cr_assert_eq(fs_trace_generate(&t, &g, err, sizeof(err)), 0, "%s", err);
	cr_assert_gt(replay_calibrate_trace(devnull, &box, CALIB_JSON, &t, "uniform"), 0);
	t.tokens = 8; /* too short to say anything */
	cr_assert_eq(replay_calibrate_trace(devnull, &box, CALIB_JSON, &t, "short"), -1);
	t.tokens = 128;
	fs_trace_free(&t);
	fclose(devnull);
}
