/* SPDX-License-Identifier: Apache-2.0 */
/* replay_strata_test.c: the strata-adapt peer (replay_strata.c) starts as
 * `static` does, adapts within its limits (96 swaps every 4 windows, each a
 * copy over the bus), follows routing that moved away from its profile,
 * and refuses what it does not model (more than one card or engine). */
#include <criterion/criterion.h>
#include <string.h>

#include "replay.h"

#define L 8
#define E 64

static void trace(struct fs_trace *t, uint32_t windows, uint64_t seed)
{
	struct fs_trace_gen g;
	fs_trace_gen_defaults(&g);
	g.layers = L;
	g.experts = E;
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

static void model(struct replay_model *m, uint32_t warmup)
{
	replay_model_defaults(m);
	m->tokens_per_window = 2;
	m->warmup = warmup;
	m->slots_frac = 0.3;
}

static void run(const struct fs_trace *t, const uint32_t *profile, const struct replay_model *m,
		enum replay_policy_id p, struct replay_result *r)
{
	struct replay_input in = {
		.trace = t, .name = "t", .profile = (uint32_t *)profile, .profile_from = "warm-up"};
	char err[256] = "";
	cr_assert_eq(replay_run(&in, m, p, r, err, sizeof(err)), 0, "%s", err);
}

/* Before its first adapt (window 4) it holds exactly static's slots. */
Test(strata, starts_as_static)
{
	struct fs_trace t;
	trace(&t, 13, 3);
	struct replay_model m;
	model(&m, 10);
	static uint32_t counts[L * E];
	cr_assert_eq(replay_profile_build(&t, m.warmup, 2, counts), 20);
	struct replay_result s, a;
	run(&t, counts, &m, RP_STATIC, &s);
	run(&t, counts, &m, RP_STRATA_ADAPT, &a);
	cr_assert_eq(a.windows, 3);
	cr_assert_eq(a.uses, s.uses);
	cr_assert_eq(a.misses, s.misses, "strata-adapt %llu, static %llu", (unsigned long long)a.misses,
		     (unsigned long long)s.misses);
	cr_assert_eq(a.copies, 0);
	cr_assert_str_eq(a.policy, "strata-adapt");
	fs_trace_free(&t);
}

/* With a profile of another session (another seed: other hot experts), it
 * swaps toward the routing: fewer misses than static, at most 96 copies per
 * adapt, each an expert's bytes over the bus; the same numbers twice. */
Test(strata, follows_routing_within_its_limits)
{
	struct fs_trace t, other;
	trace(&t, 200, 5);
	trace(&other, 200, 6);
	struct replay_model m;
	model(&m, 0);
	static uint32_t counts[L * E];
	cr_assert_gt(replay_profile_build(&other, 40, 2, counts), 0);
	struct replay_result s, a, b;
	run(&t, counts, &m, RP_STATIC, &s);
	run(&t, counts, &m, RP_STRATA_ADAPT, &a);
	run(&t, counts, &m, RP_STRATA_ADAPT, &b);
	cr_assert_lt(a.misses, s.misses, "strata-adapt %llu, static %llu", (unsigned long long)a.misses,
		     (unsigned long long)s.misses);
	cr_assert_gt(a.copies, 0);
	cr_assert_leq(a.copies, 96ull * (a.windows / 4));
	cr_assert_eq(a.bytes, a.copies * (1ull << 20));
	cr_assert_gt(a.ms_per_window, 0.0);
	cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0, "not deterministic");
	fs_trace_free(&t);
	fs_trace_free(&other);
}

Test(strata, one_card_one_engine_only)
{
	struct fs_trace t;
	trace(&t, 20, 3);
	struct replay_model m;
	model(&m, 10);
	static uint32_t counts[L * E];
	replay_profile_build(&t, m.warmup, 2, counts);
	struct replay_input in = {.trace = &t, .name = "t", .profile = counts, .profile_from = "warm-up"};
	struct replay_result r;
	char err[256] = "";
	m.cards = 2;
	cr_assert_eq(replay_run(&in, &m, RP_STRATA_ADAPT, &r, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "one card") != NULL, "%s", err);
	fs_trace_free(&t);
}
