/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_why_test.c: the miss decomposition (replay_why.c).  A hand-made
 * sequence of postings, copies and landings on one card's virtual bus in
 * which the class of every miss is known puts each miss where it belongs;
 * and on whole runs, every policy's classes, and its history classes, sum
 * exactly to its misses.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "replay_bus.h"
#include "replay_why.h"

#define L 4
#define E 16
#define SLOTS 4

static struct replay_bus bus;
static struct replay_why why;

static void setup(void)
{
	/* 1 byte per ns: a copy of 1000 bytes is in 1000 ns after it starts;
	 * a cross-window copy is usable a window after the one it was for */
	cr_assert_eq(replay_bus_init(&bus, SLOTS, 16, 1.0, 1), 0);
	cr_assert_eq(replay_why_init(&why, L, E, 1, 1, &bus), 0);
}

static void teardown(void)
{
	replay_why_free(&why);
	replay_bus_free(&bus);
}

/* A copy of (layer, expert) into slot, for `tier`, wanted in `window`,
 * handed to the bus at `now`, as replay_run's backend does. */
static void copy(uint32_t slot, uint32_t gen, uint32_t layer, uint32_t expert, unsigned tier, uint32_t window,
		 uint64_t now)
{
	struct fse_copy cp = {.card = 0, .slot = slot, .gen = gen, .bytes = 1000};
	cp.core = (struct fsr_copy){.card = 0,
				    .slot = slot,
				    .gen = gen,
				    .layer = layer,
				    .expert = expert,
				    .bytes = 1000,
				    .tier = tier,
				    .window = window,
				    .deadline_ns = fsr_tier_speculative(tier) ? 5000 : 9000};
	cr_assert_eq(replay_bus_submit(&bus, &cp, now), 0);
	replay_why_copy(&why, 0, slot, gen, layer, expert, tier);
}

static void land(uint64_t now, uint32_t window)
{
	struct fse_done d[16];
	replay_bus_land(&bus, now, window, d, 16);
}

static unsigned miss(uint32_t window, uint32_t layer, uint32_t expert, int predicts)
{
	return replay_why_miss(&why, 0, window, layer, expert, predicts);
}

Test(why, each_class_where_it_belongs, .init = setup, .fini = teardown)
{
	uint32_t w = 7;
	/* (a): no predictions; the first layer; ranked but not posted; never ranked */
	cr_assert_eq(miss(w, 2, 0, 0), RW_a_nopred);
	cr_assert_eq(miss(w, 0, 1, 1), RW_a_layer0);
	replay_why_ranked(&why, 0, w, 2, 2);
	cr_assert_eq(miss(w, 2, 2, 1), RW_a_cut);
	cr_assert_eq(miss(w, 2, 3, 1), RW_a_unranked);
	/* a posting of another window does not count for this one */
	replay_why_posted(&why, 0, w - 1, 2, 4, 0);
	cr_assert_eq(miss(w, 2, 4, 1), RW_a_unranked);

	/* (b): posted, never copied; the core's reason came before the use */
	replay_why_posted(&why, 0, w, 1, 5, 0);
	replay_why_unserved(&why, 1, 5, FSR_UNS_TOO_LATE);
	cr_assert_eq(miss(w, 1, 5, 1), RW_b_too_late);
	/* (b): the reason came for an earlier posting; posted again, the
	 * reason after the use is the one that counts */
	replay_why_posted(&why, 0, w, 1, 14, 0);
	replay_why_unserved(&why, 1, 14, FSR_UNS_ADMIT);
	replay_why_posted(&why, 0, w, 1, 14, 0);
	cr_assert_eq(miss(w, 1, 14, 1), RW_b_untold); /* not counted yet */
	replay_why_unserved(&why, 1, 14, FSR_UNS_WAIT_DEMAND);
	/* (b): no reason ever told: b_untold at the end */
	replay_why_posted(&why, 0, w, 2, 15, 0);
	cr_assert_eq(miss(w, 2, 15, 1), RW_b_untold);
	/* (b): a copy that landed before the posting, evicted before it, does
	 * not serve it; the slot went to another expert meanwhile */
	copy(0, 1, 3, 6, FSR_TIER_RECENCY, w - 1, 0);
	land(2000, w);
	copy(0, 2, 3, 7, FSR_TIER_STATIC, w - 1, 2000);
	replay_why_posted(&why, 0, w, 3, 6, 0);
	land(3000, w);
	cr_assert_eq(miss(w, 3, 6, 1), RW_b_untold);
	replay_why_unserved(&why, 3, 6, FSR_UNS_WAIT_SLOT);

	/* (d): posted, copied, bytes not in at the lookup */
	replay_why_posted(&why, 0, w, 1, 8, 0);
	copy(1, 1, 1, 8, FSR_TIER_PREDICTED, w, 3000);
	cr_assert_eq(miss(w, 1, 8, 1), RW_d_on_bus);
	/* (d): a recency copy for this window that landed, held back by the
	 * landing delay (usable from the next window) */
	replay_why_posted(&why, 0, w, 2, 9, 0);
	copy(2, 1, 2, 9, FSR_TIER_RECENCY, w, 3000);
	land(6000, w); /* both landed; the predicted one is usable */
	cr_assert_eq(bus.ready[1], 1u);
	cr_assert_eq(bus.ready[2], 0u);
	cr_assert_eq(miss(w, 2, 9, 1), RW_d_delayed);

	/* (c): the predicted copy of (1, 8) landed, then a predicted copy of
	 * another expert took its slot: evicted by the predicted tier */
	copy(1, 2, 1, 10, FSR_TIER_PREDICTED, w, 6000);
	land(7000, w);
	cr_assert_eq(miss(w, 1, 8, 1), RW_c_by_predicted);
	/* (c): resident at its posting (held), evicted, its slot not refilled */
	replay_why_posted(&why, 0, w, 3, 11, 1);
	cr_assert_eq(miss(w, 3, 11, 1), RW_c_unfilled);
	/* (c): copied after its posting, landed, its slot taken by a static
	 * copy and by a recency copy */
	replay_why_posted(&why, 0, w, 2, 12, 0);
	copy(3, 1, 2, 12, FSR_TIER_PREDICTED, w, 7000);
	land(9000, w);
	copy(3, 2, 2, 13, FSR_TIER_STATIC, w, 9000);
	cr_assert_eq(miss(w, 2, 12, 1), RW_c_by_static);
	land(11000, w);
	replay_why_posted(&why, 0, w, 2, 13, 0);
	copy(3, 3, 2, 14, FSR_TIER_RECENCY, w, 11000);
	cr_assert_eq(miss(w, 2, 13, 1), RW_c_by_recency);

	replay_why_finish(&why);
	uint64_t want[RW_N] = {0};
	want[RW_a_nopred] = 1;
	want[RW_a_layer0] = 1;
	want[RW_a_cut] = 1;
	want[RW_a_unranked] = 2;
	want[RW_b_too_late] = 1;
	want[RW_b_wait_demand] = 1;
	want[RW_b_wait_slot] = 1;
	want[RW_b_untold] = 1;
	want[RW_d_on_bus] = 1;
	want[RW_d_delayed] = 1;
	want[RW_c_by_predicted] = 1;
	want[RW_c_unfilled] = 1;
	want[RW_c_by_static] = 1;
	want[RW_c_by_recency] = 1;
	for (unsigned c = 0; c < RW_N; c++)
		cr_assert_eq(why.n[c], want[c], "%s: %llu, want %llu", replay_why_name(c),
			     (unsigned long long)why.n[c], (unsigned long long)want[c]);
	/* history: the two (d) were on their way; (3, 6), (1, 8), (2, 12)
	 * and (2, 13) had a copy before; the other 9 never had one (11 was
	 * held at its posting, as if from the profile: no copy here) */
	cr_assert_eq(why.hist[RH_in_flight], 2);
	cr_assert_eq(why.hist[RH_evicted], 4);
	cr_assert_eq(why.hist[RH_cold], 9);
}

/* The whole-run cases' routing: 8 layers x 64 experts, top-4, windows of
 * 2 tokens, 1 MiB experts; the caller may change the rest of g. */
static void small_gen(struct fs_trace_gen *g, uint32_t windows, uint64_t seed)
{
	fs_trace_gen_defaults(g);
	g->layers = 8;
	g->experts = 64;
	g->topk = 4;
	g->tokens_per_window = 2;
	g->windows = windows;
	g->seed = seed;
	g->expert_bytes = 1 << 20;
}

/* g's trace, a model at 25 % slots with 40 warm-up windows, and the input
 * with the warm-up's profile. */
static void small_input(struct fs_trace *t, const struct fs_trace_gen *g, struct replay_model *m,
			struct replay_input *in)
{
	static uint32_t counts[8 * 64];
	char err[FS_TRACE_ERRLEN];
	cr_assert_eq(fs_trace_generate(t, g, err, sizeof(err)), 0, "%s", err);
	replay_model_defaults(m);
	m->tokens_per_window = 2;
	m->warmup = 40;
	m->slots_frac = 0.25;
	cr_assert_gt(replay_profile_build(t, m->warmup, 2, counts), 0);
	*in = (struct replay_input){.trace = t, .name = "t", .profile = counts, .profile_from = "warm-up"};
}

/* --decoys none: the table's recall and no wrong guess, so every posted
 * prediction is used in its window (posted_used == posted); with decoys
 * (the default) most are not. */
Test(why, no_decoys_posts_only_what_is_used)
{
	struct fs_trace t;
	struct fs_trace_gen g;
	small_gen(&g, 120, 5);
	struct replay_model m;
	struct replay_input in;
	small_input(&t, &g, &m, &in);
	struct replay_result r;
	for (int d = DECOYS_POPULAR; d <= DECOYS_NONE; d += DECOYS_NONE) {
		m.decoys = (enum replay_decoys)d;
		char e[256] = "";
		cr_assert_eq(replay_run(&in, &m, RP_ALL, &r, e, sizeof(e)), 0, "%s", e);
		cr_assert_gt(r.why_info[RI_posted], 0);
		if (d == DECOYS_NONE)
			cr_assert_eq(r.why_info[RI_posted_used], r.why_info[RI_posted]);
		else
			cr_assert_lt(2 * r.why_info[RI_posted_used], r.why_info[RI_posted]);
	}
	fs_trace_free(&t);
}

/* Whole runs: each list sums to the misses, for every policy; the
 * policies without predictions have only never-predicted misses; without
 * --pred-max nothing is cut. */
/* `fs-replay --why`'s text prints every why_info counter (REPLAY_WHY_INFO)
 * with its value, as --json does: the row after the why_info header. */
static void text_has_every_info(const struct replay_result *r)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cr_assert_not_null(f);
	replay_report_why(f, r, 1, 0);
	fclose(f);
	const char *t = strstr(buf, "(why_info):\n");
	cr_assert_not_null(t, "no why_info table in:\n%s", buf);
	t = strchr(t, '\n') + 1; /* the header: every name */
	const char *row = strchr(t, '\n') + 1;
	for (unsigned c = 0; c < RI_N; c++) {
		const char *at = strstr(t, replay_info_name(c));
		cr_assert(at && at < row, "why_info column %s missing", replay_info_name(c));
	}
	cr_assert_eq(strncmp(row, r->policy, strlen(r->policy)), 0, "row: %.40s", row);
	const char *p = row + strlen(r->policy);
	for (unsigned c = 0; c < RI_N; c++) {
		char *end;
		unsigned long long v = strtoull(p, &end, 10);
		cr_assert(end != p, "why_info %s: no value", replay_info_name(c));
		cr_assert_eq(v, r->why_info[c], "why_info %s: printed %llu, counted %llu",
			     replay_info_name(c), v, (unsigned long long)r->why_info[c]);
		p = end;
	}
	free(buf);
}

static void run_all(uint32_t pred_max)
{
	struct fs_trace t;
	struct fs_trace_gen g;
	small_gen(&g, 160, 11);
	g.skew = 1.2;
	g.locality = 0.3;
	struct replay_model m;
	struct replay_input in;
	small_input(&t, &g, &m, &in);
	m.bus_gbps = 2.0; /* a tight bus: every class shows */
	m.pred_max = pred_max;
	uint64_t letters[4] = {0};
	for (int p = 0; p < RP_COMPARE_N; p++) {
		struct replay_result r;
		char e[256] = "";
		cr_assert_eq(replay_run(&in, &m, (enum replay_policy_id)p, &r, e, sizeof(e)), 0, "%s", e);
		cr_assert(r.why_counted);
		uint64_t s = 0, h = 0;
		/* learned: the core's learner predicts (its postings are told) */
		int pred = replay_policy_predicts((enum replay_policy_id)p) || p == RP_LEARNED;
		for (unsigned c = 0; c < RW_N; c++) {
			s += r.why[c];
			if (pred)
				letters[replay_why_class(c)[0] - 'a'] += r.why[c];
		}
		for (unsigned c = 0; c < RH_N; c++)
			h += r.why_hist[c];
		cr_assert_gt(r.misses, 0);
		cr_assert_eq(s, r.misses, "%s: classes %llu, misses %llu", r.policy, (unsigned long long)s,
			     (unsigned long long)r.misses);
		cr_assert_eq(h, r.misses, "%s: history %llu, misses %llu", r.policy, (unsigned long long)h,
			     (unsigned long long)r.misses);
		if (!pred)
			cr_assert_eq(r.why[RW_a_nopred], r.misses, "%s", r.policy);
		else
			cr_assert_eq(r.why[RW_a_nopred], 0);
		if (pred_max == 0 && p != RP_LEARNED) /* the learner ranks more than it posts */
			cr_assert_eq(r.why[RW_a_cut], 0);
		if (pred)
			text_has_every_info(&r);
	}
	/* (d) is rare on a whole run (the scheduler hands out only copies that
	 * land in time): the hand-made sequence above pins it */
	for (int k = 0; k < 3; k++)
		cr_assert_gt(letters[k], 0, "class %c never seen on a tight bus", 'a' + k);
	fs_trace_free(&t);
}

Test(why, classes_sum_to_the_misses)
{
	run_all(0);
}

Test(why, classes_sum_to_the_misses_with_pred_max)
{
	run_all(4);
}
