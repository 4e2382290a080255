/* SPDX-License-Identifier: Apache-2.0 */
/* replay_bound_test.c: the clairvoyant bound on traces whose answer is
 * known by hand, and against the policies it must never lose to. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "replay.h"
#include "replay_bound.h"

/* 1 layer x 3 experts, top-1: tokens route 0, 1, 0, 1, ... */
static void alternating(struct fs_trace *t, uint32_t tokens)
{
	cr_assert_eq(fs_trace_alloc(t, 1, 3, 1, tokens, 0), 0);
	for (uint32_t i = 0; i < tokens; i++)
		t->decode[i] = (uint16_t)(i % 2);
	t->expert_bytes[0] = 1000000; /* 1 MB */
}

static struct replay_bound_in one_token_windows(const struct fs_trace *t, uint32_t *first, uint8_t *ntok)
{
	for (uint32_t i = 0; i < t->tokens; i++) {
		first[i] = i;
		ntok[i] = 1;
	}
	return (struct replay_bound_in){
		.t = t,
		.nwin = t->tokens,
		.first = first,
		.ntok = ntok,
		.slots = 1,
		.intercept_ms = 10.0,
		.miss_ms = 5.0,
		.bus_gbps = 1000.0, /* 1 MB in 1 us: always in time */
	};
}

Test(bound, fast_bus_makes_every_use_a_hit)
{
	struct fs_trace t;
	uint32_t first[40];
	uint8_t ntok[40];
	alternating(&t, 40);
	struct replay_bound_in in = one_token_windows(&t, first, ntok);
	struct replay_result r;
	cr_assert_eq(replay_bound(&in, &r), 0);
	cr_assert_str_eq(r.policy, "clairvoyant");
	cr_assert_eq(r.uses, 40);
	cr_assert_eq(r.misses, 0);
	cr_assert_eq(r.copies, 39, "the preload holds expert 0; every later use needs a copy");
	cr_assert_float_eq(r.ms_per_window, 10.0, 1e-6);
	fs_trace_free(&t);
}

Test(bound, slow_bus_leaves_the_preload_only)
{
	struct fs_trace t;
	uint32_t first[40];
	uint8_t ntok[40];
	alternating(&t, 40);
	struct replay_bound_in in = one_token_windows(&t, first, ntok);
	in.bus_gbps = 0.001; /* 1 MB takes 1000 s */
	struct replay_result r;
	cr_assert_eq(replay_bound(&in, &r), 0);
	cr_assert_eq(r.copies, 0);
	cr_assert_eq(r.misses, 20, "expert 1 never lands");
	cr_assert_float_eq(r.ms_per_window, 10.0 + 5.0 * 0.5, 1e-6);
	fs_trace_free(&t);
}

/* One slot, experts 0 and 1 in turn: Belady needs a copy for every use
 * after the first, and a copy takes 1.5 windows.  The bus can never have
 * worked more than the time that passed, and a faster bus misses less. */
Test(bound, bus_rate_limits_copies)
{
	struct fs_trace t;
	uint32_t first[40];
	uint8_t ntok[40];
	alternating(&t, 40);
	struct replay_bound_in in = one_token_windows(&t, first, ntok);
	in.miss_ms = 0.0;
	in.bus_gbps = 1.0 / 15.0; /* 1 MB in 15 ms */
	struct replay_result r, fast;
	cr_assert_eq(replay_bound(&in, &r), 0);
	cr_assert_leq(r.copies * 15.0, 40 * 10.0, "%llu copies of 15 ms in 400 ms",
		      (unsigned long long)r.copies);
	cr_assert_gt(r.misses, 0);
	cr_assert_eq(r.hits + r.misses, 40);
	in.bus_gbps = 1.0 / 5.0;
	cr_assert_eq(replay_bound(&in, &fast), 0);
	cr_assert_lt(fast.misses, r.misses);
	fs_trace_free(&t);
}

Test(bound, bad_input)
{
	struct fs_trace t;
	uint32_t first[4];
	uint8_t ntok[4];
	alternating(&t, 4);
	struct replay_bound_in in = one_token_windows(&t, first, ntok);
	struct replay_result r;
	in.slots = 0;
	cr_assert_eq(replay_bound(&in, &r), -EINVAL);
	in = one_token_windows(&t, first, ntok);
	first[3] = 4; /* past the trace */
	cr_assert_eq(replay_bound(&in, &r), -EINVAL);
	fs_trace_free(&t);
}

/* On a synthetic trace the bound is at least as good as every policy. */
Test(bound, never_loses_to_a_policy)
{
	struct fs_trace t;
	struct fs_trace_gen g;
	fs_trace_gen_defaults(&g);
	g.layers = 8;
	g.experts = 64;
	g.topk = 4;
	g.tokens_per_window = 2;
	g.windows = 200;
	g.expert_bytes = 1 << 20;
	char err[FS_TRACE_ERRLEN];
	cr_assert_eq(fs_trace_generate(&t, &g, err, sizeof(err)), 0, "%s", err);
	struct replay_model m;
	replay_model_defaults(&m);
	m.tokens_per_window = 2;
	m.warmup = 20;
	m.slots_frac = 0.3;
	static uint32_t counts[8 * 64];
	struct replay_input in = {.trace = &t, .name = "test", .profile = counts, .profile_from = "warm-up"};
	cr_assert_gt(replay_profile_build(&t, m.warmup, 2, counts), 0);
	struct replay_result b, r;
	cr_assert_eq(replay_bound_run(&in, &m, &b), 0);
	for (int p = 0; p < RP_COMPARE_N; p++) {
		cr_assert_eq(replay_run(&in, &m, (enum replay_policy_id)p, &r, err, sizeof(err)), 0, "%s",
			     err);
		cr_assert_eq(r.uses, b.uses, "%s: the same uses", r.policy);
		cr_assert_leq(b.misses, r.misses, "%s: %llu misses, the bound %llu", r.policy,
			      (unsigned long long)r.misses, (unsigned long long)b.misses);
		cr_assert_geq(b.tokens_per_s, r.tokens_per_s - 1e-9);
	}
	fs_trace_free(&t);
}
