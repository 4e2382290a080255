/* SPDX-License-Identifier: Apache-2.0 */
/* fsr_sched_test.c: the copy scheduler's deadline logic on hand-made
 * cases.  Model: 8 layers of 100 us, a 1 GB/s bus (1 byte/ns), 50,000-byte
 * experts (50 us a copy); the engine enters layer 0 of window 1 at t = 0. */
#include <criterion/criterion.h>
#include <string.h>

#include "fs_counters.h"
#include "fsr.h"
#include "fsr_internal.h" /* the use rates, pred_adapt's sizes */

#define SL 8u
#define SE 32u
#define US 1000ull
#define LAYER_NS (100 * US)
#define COPY_NS (50 * US)

static uint64_t cd_[FS_N_DAEMON], cc_[FS_N_CARD], cl_[SL * FS_N_LAYER], ccl_[4 * FS_N_CLIENT];
static uint64_t bytes_[SL * SE];

static struct fsr_config scfg(void)
{
	struct fsr_config c = {.cards = 1, .slots = {64}, .layers = SL, .experts = SE, .max_clients = 4};
	memset(cc_, 0, sizeof(cc_));
	memset(cl_, 0, sizeof(cl_));
	for (uint32_t i = 0; i < SL * SE; i++)
		bytes_[i] = 50000;
	c.expert_bytes = bytes_;
	c.counters = (struct fsr_counters){cd_, cc_, cl_, ccl_};
	fsr_config_tiers(&c);
	c.recency_slots = 2;
	c.predicted_slots = 2;
	c.spare_slots = 8;
	c.adapt = 0;
	c.bus_gbps = 1.0;
	c.bus_share_pct = 100;
	c.layer_ns = LAYER_NS;
	return c;
}

static struct fsr *mk(struct fsr_config c)
{
	struct fsr *r = fsr_create(&c);
	cr_assert_not_null(r);
	cr_assert_eq(fsr_client_add(r, 0), 0);
	return r;
}

static void rec(struct fsr *r, uint8_t type, uint8_t aux, uint32_t layer, uint32_t expert, uint32_t window,
		float score, uint64_t now)
{
	struct fs_rec x = {.type = type,
			   .aux = aux,
			   .layer = (uint16_t)layer,
			   .expert = (uint16_t)expert,
			   .card = 0,
			   .window = window};
	memcpy(&x.value, &score, sizeof(score));
	fsr_record(r, 0, &x, now);
}

/* The engine starts window 1 and reaches layer 0 at t = 0. */
static void at_layer0(struct fsr *r)
{
	rec(r, FS_REC_WIN_BEGIN, 0, 0, 0, 1, 0, 0);
	rec(r, FS_REC_USAGE, FS_USE_HIT, 0, 31, 1, 0, 0);
}

static void predict(struct fsr *r, uint32_t layer, uint32_t expert, float score, uint64_t now)
{
	unsigned h = layer > 0 ? layer : 1;
	rec(r, FS_REC_PREDICT, FS_PRED_AUX(h > 15 ? 15 : h, FS_SRC_KERNEL), layer, expert, 1, score, now);
}

static void ok(const struct fsr *r)
{
	int rc = fsr_check(r);
	cr_assert_eq(rc, 0, "fsr_check failed at fsr_check.c:%d", -rc);
}

Test(sched, copies_only_what_lands_before_the_layer_runs)
{
	struct fsr *r = mk(scfg());
	at_layer0(r);
	predict(r, 1, 1, 0.9f, 0);
	predict(r, 1, 2, 0.8f, 0);
	predict(r, 1, 3, 0.7f, 0); /* third 50 us copy would land at 150 us: layer 1 runs at 100 */
	struct fsr_copy cp[8];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 0), 2);
	cr_assert_eq(cp[0].expert, 1); /* best score first */
	cr_assert_eq(cp[1].expert, 2);
	cr_assert_eq(cp[0].tier, FSR_TIER_PREDICTED);
	cr_assert_eq(cp[0].deadline_ns, LAYER_NS);
	cr_assert_eq(cc_[FS_CC_too_late], 1);
	cr_assert_eq(fsr_lookup(r, 0, 1, 3), FSR_NONE);
	ok(r);
	fsr_destroy(r);
}

Test(sched, earliest_deadline_first)
{
	struct fsr *r = mk(scfg());
	at_layer0(r);
	predict(r, 3, 7, 0.95f, 0);
	predict(r, 1, 8, 0.10f, 0);
	predict(r, 2, 9, 0.50f, 0);
	struct fsr_copy cp[8];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 0), 3);
	cr_assert_eq(cp[0].layer, 1);
	cr_assert_eq(cp[1].layer, 2);
	cr_assert_eq(cp[2].layer, 3);
	cr_assert_eq(cp[2].deadline_ns, 3 * LAYER_NS);
	fsr_destroy(r);
}

Test(sched, a_prediction_whose_layer_ran_is_dropped)
{
	struct fsr *r = mk(scfg());
	at_layer0(r);
	predict(r, 2, 5, 0.9f, 0);
	rec(r, FS_REC_USAGE, FS_USE_MISS, 1, 30, 1, 0, 100 * US);
	rec(r, FS_REC_USAGE, FS_USE_MISS, 2, 5, 1, 0, 200 * US); /* layer 2 ran: 5 missed */
	struct fsr_copy cp[8];
	unsigned n = fsr_take_copies(r, 0, cp, 8, 200 * US);
	int five = 0;
	for (unsigned i = 0; i < n; i++) {
		cr_assert(cp[i].tier != FSR_TIER_PREDICTED, "a late prediction was copied");
		five += cp[i].expert == 5 && cp[i].layer == 2;
	}
	/* The miss's want took the expired prediction's place (fsr_cands.c
	 * merge): 5 is copied for the layer's next run, nothing is dropped. */
	cr_assert_eq(five, 1, "the miss's recency want survived the prediction");
	cr_assert_eq(cc_[FS_CC_too_late], 0);
	fsr_destroy(r);
}

Test(sched, a_miss_is_needed_when_its_layer_next_runs)
{
	struct fsr_config c = scfg();
	bytes_[0 * SE + 9] = 1000000; /* 1 ms: cannot land before the next window's layer 0 */
	struct fsr *r = mk(c);
	at_layer0(r);
	rec(r, FS_REC_USAGE, FS_USE_MISS, 0, 8, 1, 0, 0);
	rec(r, FS_REC_USAGE, FS_USE_MISS, 0, 9, 1, 0, 0);
	struct fsr_copy cp[8];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 0), 2);
	/* The window is 8 x 100 us (no period measured yet): layer 0 runs next
	 * at 800 us.  Expert 8 makes it; expert 9 (1 ms, after 8's 50 us) aims
	 * at the run after, 1600 us: still worth copying, not dropped. */
	cr_assert_eq(cp[0].expert, 8);
	cr_assert_eq(cp[0].tier, FSR_TIER_RECENCY);
	cr_assert_eq(cp[0].deadline_ns, 8 * LAYER_NS);
	cr_assert_eq(cp[1].expert, 9);
	cr_assert_eq(cp[1].deadline_ns, 16 * LAYER_NS);
	cr_assert_eq(cc_[FS_CC_too_late], 0);
	fsr_destroy(r);
}

/* demand_late: a miss's copy waits until its deadline (the layer's next
 * run) nears, leaving the bus to predictions that come meanwhile. */
Test(sched, demand_late_waits_for_its_deadline)
{
	struct fsr_config c = scfg();
	c.demand_late = 1;
	struct fsr *r = mk(c);
	at_layer0(r);
	rec(r, FS_REC_USAGE, FS_USE_MISS, 0, 8, 1, 0, 0);
	struct fsr_copy cp[8];
	/* Layer 0 runs next at 800 us, the copy takes 50 us: it waits (without
	 * demand_late it goes at once: a_miss_is_needed_when_its_layer_next_runs). */
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 0), 0);
	predict(r, 2, 3, 1.0f, 0);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 0), 1, "the prediction waits behind nothing");
	cr_assert_eq(cp[0].tier, FSR_TIER_PREDICTED);
	fsr_copy_done(r, 0, cp[0].slot, cp[0].gen, COPY_NS);
	/* At 500 us it still lands with a layer time to spare if it starts
	 * later; at 700 us (lands 750, deadline 800) it goes. */
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 500 * US), 0);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 700 * US), 1);
	cr_assert_eq(cp[0].expert, 8);
	cr_assert_eq(cp[0].tier, FSR_TIER_RECENCY);
	cr_assert_eq(cp[0].deadline_ns, 8 * LAYER_NS);
	cr_assert_eq(cc_[FS_CC_landed_late], 0);
	fsr_copy_done(r, 0, cp[0].slot, cp[0].gen, 750 * US);
	/* The engine pauses: past its usual window (800 us) its deadlines move
	 * with the clock, so a miss's copy must not wait for one. */
	rec(r, FS_REC_USAGE, FS_USE_MISS, 0, 9, 1, 0, 900 * US);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 900 * US), 1, "held for an engine that paused");
	cr_assert_eq(cp[0].expert, 9);
	ok(r);
	fsr_destroy(r);
}

Test(sched, demand_copies_before_predictions)
{
	struct fsr *r = mk(scfg());
	at_layer0(r);
	/* 20 misses over layers 1..7 wait for the next window: 1 ms of bus
	 * time, more than a window (800 us).  A prediction for layer 1 would
	 * come first by deadline, but it would push them past it. */
	for (uint32_t i = 0; i < 20; i++)
		rec(r, FS_REC_USAGE, FS_USE_MISS, 1 + i % 7, 10 + i, 1, 0, 0);
	predict(r, 1, 2, 1.0f, 0);
	struct fsr_copy cp[64];
	unsigned n = fsr_take_copies(r, 0, cp, 64, 0);
	cr_assert_gt(n, 0);
	for (unsigned i = 0; i < n; i++)
		cr_assert(cp[i].tier != FSR_TIER_PREDICTED, "the prediction went before the misses");
	/* With the misses copied, predictions go again (the misses told the
	 * core the engine reached layer 7: predict for the next window). */
	for (unsigned i = 0; i < n; i++)
		fsr_copy_done(r, 0, cp[i].slot, cp[i].gen, COPY_NS);
	rec(r, FS_REC_WIN_BEGIN, 0, 0, 0, 2, 0, 8 * LAYER_NS);
	rec(r, FS_REC_USAGE, FS_USE_HIT, 0, 31, 2, 0, 8 * LAYER_NS);
	rec(r, FS_REC_PREDICT, FS_PRED_AUX(2, FS_SRC_KERNEL), 2, 3, 2, 1.0f, 8 * LAYER_NS);
	n = fsr_take_copies(r, 0, cp, 64, 8 * LAYER_NS);
	int pred = 0;
	for (unsigned i = 0; i < n; i++)
		pred += cp[i].tier == FSR_TIER_PREDICTED;
	cr_assert_geq(pred, 1);
	ok(r);
	fsr_destroy(r);
}

Test(sched, bus_share_and_landing_late)
{
	struct fsr_config c = scfg();
	c.bus_share_pct = 50; /* plans 100 us a copy */
	struct fsr *r = mk(c);
	at_layer0(r);
	predict(r, 1, 1, 0.9f, 0);
	predict(r, 1, 2, 0.8f, 0);
	struct fsr_copy cp[8];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 0), 1);
	cr_assert_eq(cc_[FS_CC_too_late], 1);
	/* It lands after its deadline: counted per card and per layer. */
	fsr_copy_done(r, 0, cp[0].slot, cp[0].gen, LAYER_NS + 1);
	cr_assert_eq(cc_[FS_CC_landed_late], 1);
	cr_assert_eq(cl_[1 * FS_N_LAYER + FS_CL_landed_late], 1);
	fsr_destroy(r);

	/* In time: not late; and a bus faster than planned frees the plan. */
	memset(cc_, 0, sizeof(cc_));
	r = mk(c);
	at_layer0(r);
	predict(r, 2, 1, 0.9f, 0);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 0), 1); /* planned to land at 100 us */
	fsr_copy_done(r, 0, cp[0].slot, cp[0].gen, COPY_NS);
	cr_assert_eq(cc_[FS_CC_landed_late], 0);
	predict(r, 2, 2, 0.9f, COPY_NS);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, COPY_NS), 1, "the plan should restart from the landing");
	fsr_destroy(r);
}

Test(sched, profile_fill_waits_for_an_idle_bus)
{
	struct fsr *r = mk(scfg());
	static uint32_t counts[SL * SE];
	for (uint32_t i = 0; i < SL * SE; i++)
		counts[i] = i % SE < 4 ? 10 : 0;
	cr_assert_eq(fsr_profile_load(r, counts), 0);
	struct fsr_copy cp[8];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 0), 1);
	cr_assert_eq(cp[0].deadline_ns, UINT64_MAX);
	cr_assert_eq(fsr_take_copies(r, 0, cp + 1, 7, 0), 0, "the bus is busy until 50 us");
	cr_assert_eq(fsr_take_copies(r, 0, cp + 1, 7, COPY_NS), 1);
	fsr_destroy(r);
}

Test(sched, measures_layer_and_window_time)
{
	struct fsr *r = mk(scfg());
	cr_assert_eq(fsr_layer_ns(r), LAYER_NS); /* the configured guess */
	rec(r, FS_REC_WIN_BEGIN, 0, 0, 0, 1, 0, 0);
	for (uint32_t l = 0; l < SL; l++)
		rec(r, FS_REC_USAGE, FS_USE_HIT, l, 0, 1, 0, 10 * US + l * 200 * US);
	cr_assert_eq(fsr_layer_ns(r), 200 * US);
	/* Window 2 starts 2 ms after window 1: a miss at layer 5 of window 2
	 * is needed at layer 5 of window 3, ~2 ms after window 2 began. */
	rec(r, FS_REC_WIN_END, 0, 0, 0, 1, 0, 1900 * US);
	rec(r, FS_REC_WIN_BEGIN, 0, 0, 0, 2, 0, 2000 * US);
	rec(r, FS_REC_USAGE, FS_USE_MISS, 5, 6, 2, 0, 3000 * US);
	struct fsr_copy cp[8];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 3000 * US), 1);
	cr_assert_eq(cp[0].deadline_ns, 2000 * US + 2000 * US + 5 * 200 * US);
	fsr_destroy(r);
}

/* fsr_config.unserved (fs-replay's miss decomposition): a prediction that
 * leaves without a copy is told once, with its reason; one that is copied
 * is not told. */
static unsigned told_n, told_why[8], told_expert[8];
static void told(void *ctx, uint32_t card, uint32_t layer, uint32_t expert, unsigned why)
{
	(void)ctx;
	(void)card;
	(void)layer;
	if (told_n < 8) {
		told_why[told_n] = why;
		told_expert[told_n] = expert;
	}
	told_n++;
}

/* The n-th report (1-based) so far, and the last: why, for expert. */
static void expect_told(unsigned n, unsigned why, uint32_t expert)
{
	cr_assert_eq(told_n, n);
	cr_assert_eq(told_why[n - 1], why);
	cr_assert_eq(told_expert[n - 1], expert);
}

Test(sched, unserved_predictions_are_told_why)
{
	struct fsr_config c = scfg();
	c.unserved = told;
	told_n = 0;
	struct fsr *r = mk(c);
	at_layer0(r);
	predict(r, 1, 1, 0.9f, 0);
	predict(r, 1, 2, 0.8f, 0);
	predict(r, 1, 3, 0.7f, 0); /* lands at 150 us, layer 1 runs at 100: too late */
	struct fsr_copy cp[8];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 0), 2);
	expect_told(1, FSR_UNS_TOO_LATE, 3);
	/* refused at its record: its layer has run (layer 0, at layer 0) */
	rec(r, FS_REC_PREDICT, FS_PRED_AUX(1, FS_SRC_KERNEL), 0, 4, 1, 0.9f, 0);
	cr_assert_eq(told_n, 2);
	cr_assert_eq(told_why[1], FSR_UNS_REFUSED);
	/* a candidate still waiting when its layer is used: told when the
	 * use's own want replaces it (it waited: nothing held it back) */
	predict(r, 5, 6, 0.9f, 0);
	rec(r, FS_REC_USAGE, FS_USE_MISS, 5, 6, 1, 0, 10 * US);
	expect_told(3, FSR_UNS_WAIT, 6);
	ok(r);
	fsr_destroy(r);
}

/* The engine uses layer `layer` (an expert nothing predicted): the layer
 * has run, and whatever still waits for it leaves. */
static void layer_runs(struct fsr *r, uint32_t layer, uint64_t now)
{
	rec(r, FS_REC_USAGE, FS_USE_HIT, layer, 31, 1, 0, now);
}

/* Layers 1..last run, layer l at l layer times. */
static void layers_run_to(struct fsr *r, uint32_t last)
{
	for (uint32_t l = 1; l <= last; l++)
		layer_runs(r, l, l * LAYER_NS);
}

static struct fsr *mk_told(struct fsr_config c)
{
	c.unserved = told;
	told_n = 0;
	return mk(c);
}

/* Layer 3's predicted tier (2 slots) holds experts 1 (0.5) and 2 (0.4) of
 * this window, landed at 50 and 100 us. */
static void fill_predicted(struct fsr *r)
{
	struct fsr_copy cp[8];
	predict(r, 3, 1, 0.5f, 0);
	predict(r, 3, 2, 0.4f, 0);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 0), 2);
	fsr_copy_done(r, 0, cp[0].slot, cp[0].gen, COPY_NS);
	fsr_copy_done(r, 0, cp[1].slot, cp[1].gen, 2 * COPY_NS);
	cr_assert_eq(told_n, 0);
}

/* One case per reason the core gives besides the three above, each built
 * as small as it goes: with the reason's line in fsr_sched.c / fsr_cands.c
 * replaced by WAIT or its report removed, only its own case fails. */
Test(sched, unserved_wait_slot_no_free_slot)
{
	struct fsr_config c = scfg();
	c.spare_slots = 0; /* every FREE slot is some tier's shortfall */
	struct fsr *r = mk_told(c);
	at_layer0(r);
	fill_predicted(r);
	/* Scored above the victim (2): admitted, but a tier at its size
	 * takes no FREE slot; the victim leaves and the slot comes back only
	 * after the grace period. */
	predict(r, 3, 3, 0.9f, 2 * COPY_NS);
	struct fsr_copy cp[8];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 2 * COPY_NS), 0);
	cr_assert_eq(told_n, 0);
	layers_run_to(r, 3);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 3 * LAYER_NS), 0);
	expect_told(1, FSR_UNS_WAIT_SLOT, 3);
	ok(r);
	fsr_destroy(r);
}

Test(sched, unserved_wait_slot_no_victim_yet)
{
	struct fsr *r = mk_told(scfg());
	at_layer0(r);
	struct fsr_copy cp[8];
	predict(r, 3, 1, 0.5f, 0);
	predict(r, 3, 2, 0.4f, 0);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 0), 2); /* both still LOADING */
	/* A spare slot is FREE, but the tier is at its size and neither of
	 * its slots can leave while it loads: no room in time. */
	predict(r, 3, 3, 0.9f, 0);
	cr_assert_eq(fsr_take_copies(r, 0, cp + 2, 6, 0), 0);
	cr_assert_eq(told_n, 0);
	fsr_copy_done(r, 0, cp[0].slot, cp[0].gen, COPY_NS);
	fsr_copy_done(r, 0, cp[1].slot, cp[1].gen, 2 * COPY_NS);
	layers_run_to(r, 3);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 3 * LAYER_NS), 0);
	expect_told(1, FSR_UNS_WAIT_SLOT, 3);
	ok(r);
	fsr_destroy(r);
}

Test(sched, unserved_wait_demand)
{
	struct fsr_config c = scfg();
	bytes_[0 * SE + 9] = 1000000; /* 1 ms of bus: more than a window (800 us) */
	struct fsr *r = mk_told(c);
	at_layer0(r);
	rec(r, FS_REC_USAGE, FS_USE_MISS, 0, 9, 1, 0, 0);
	predict(r, 1, 2, 1.0f, 0);
	/* The prediction comes first by deadline (100 us, it lands at 50)
	 * and alone would be in time, but the miss's copy behind it would
	 * not fit in a window: demand first. */
	struct fsr_copy cp[8];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 0), 1);
	cr_assert_eq(cp[0].tier, FSR_TIER_RECENCY);
	cr_assert_eq(cp[0].expert, 9);
	cr_assert_eq(told_n, 0);
	layer_runs(r, 1, LAYER_NS);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, LAYER_NS), 0);
	expect_told(1, FSR_UNS_WAIT_DEMAND, 2);
	ok(r);
	fsr_destroy(r);
}

Test(sched, unserved_admit)
{
	struct fsr *r = mk_told(scfg());
	at_layer0(r);
	fill_predicted(r);
	/* Scored below both of this window's predictions there: dropped. */
	predict(r, 3, 3, 0.3f, 2 * COPY_NS);
	struct fsr_copy cp[8];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 2 * COPY_NS), 0);
	expect_told(1, FSR_UNS_ADMIT, 3);
	cr_assert_eq(fsr_lookup(r, 0, 3, 3), FSR_NONE);
	ok(r);
	fsr_destroy(r);
}

Test(sched, unserved_cand_full)
{
	struct fsr_config c = scfg();
	c.cand_per_layer = 2;
	struct fsr *r = mk_told(c);
	at_layer0(r);
	predict(r, 5, 1, 0.9f, 0);
	predict(r, 5, 2, 0.8f, 0);
	predict(r, 5, 3, 0.7f, 0); /* full: the new one is the weakest */
	expect_told(1, FSR_UNS_CAND_FULL, 3);
	predict(r, 5, 4, 0.95f, 0); /* full: the weakest kept one (2) goes */
	expect_told(2, FSR_UNS_CAND_FULL, 2);
	struct fsr_copy cp[8];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 0), 2);
	cr_assert_eq(cp[0].expert, 4);
	cr_assert_eq(cp[1].expert, 1);
	cr_assert_eq(told_n, 2);
	ok(r);
	fsr_destroy(r);
}

/* The use rates' measure: a scheduled copy counts once, used at its first
 * hit, unused at its eviction without one.  Only where something reads it
 * (pred_adapt): otherwise the hit path does none of it. */
static void use_rate_case(int measure)
{
	struct fsr *r = mk(scfg());
	cr_assert_eq(r->use_measure, 0, "explicit predicted size, no pred_adapt: not measured");
	r->use_measure = measure;
	const float *rate = r->card[0].use_rate;
	cr_assert_float_eq(rate[FSR_TIER_RECENCY], FSR_USE_RATE0, 1e-6);
	at_layer0(r);
	rec(r, FS_REC_USAGE, FS_USE_MISS, 0, 8, 1, 0, 0);
	rec(r, FS_REC_USAGE, FS_USE_MISS, 0, 9, 1, 0, 0);
	struct fsr_copy cp[8];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 0), 2);
	fsr_copy_done(r, 0, cp[0].slot, cp[0].gen, COPY_NS);
	fsr_copy_done(r, 0, cp[1].slot, cp[1].gen, 2 * COPY_NS);
	cr_assert_float_eq(rate[FSR_TIER_RECENCY], FSR_USE_RATE0, 1e-6, "landed: no outcome yet");
	/* Window 2: 8 is used (twice: counted once), 9 is not. */
	uint64_t t = 8 * LAYER_NS;
	rec(r, FS_REC_WIN_BEGIN, 0, 0, 0, 2, 0, t);
	rec(r, FS_REC_USAGE, FS_USE_HIT, 0, 8, 2, 0, t);
	float up = rate[FSR_TIER_RECENCY];
	if (!measure) {
		cr_assert_float_eq(up, FSR_USE_RATE0, 1e-6, "not measured: a hit moves no rate");
		ok(r);
		fsr_destroy(r);
		return;
	}
	cr_assert_gt(up, FSR_USE_RATE0);
	rec(r, FS_REC_USAGE, FS_USE_HIT, 0, 8, 2, 0, t);
	cr_assert_float_eq(rate[FSR_TIER_RECENCY], up, 1e-6, "a second hit is no second outcome");
	cr_assert_float_eq(rate[FSR_TIER_PREDICTED], FSR_USE_RATE0, 1e-6, "another tier's is not moved");
	/* Two more misses at layer 0: the recency tier (2 slots) gives up 9,
	 * landed and never used. */
	rec(r, FS_REC_USAGE, FS_USE_MISS, 0, 10, 2, 0, t);
	rec(r, FS_REC_USAGE, FS_USE_MISS, 0, 11, 2, 0, t);
	(void)fsr_take_copies(r, 0, cp, 8, t);
	cr_assert_eq(fsr_lookup(r, 0, 0, 9), FSR_NONE, "9 should have been evicted");
	cr_assert_lt(rate[FSR_TIER_RECENCY], up);
	ok(r);
	fsr_destroy(r);
}

Test(sched, use_rate_follows_used_and_unused_copies)
{
	use_rate_case(1);
}

Test(sched, use_rate_not_measured_without_pred_adapt)
{
	use_rate_case(0);
}

/* pred_adapt: 8 layers of 64 slots each (and 8 spare) and no bus model
 * (pred_auto_max 4): the predicted tier's auto size is 4 a layer.  128
 * experts a layer: with a slot for every expert there would be no
 * predicted tier (fsr_tiers_quotas). */
static struct fsr *mk_adapt(uint32_t adapt, uint32_t predicted_slots)
{
	struct fsr_config c = scfg();
	c.experts = 128;
	c.expert_bytes = NULL;
	c.uniform_bytes = 50000;
	c.slots[0] = 8 + SL * 64;
	c.adapt = 1;
	c.bus_gbps = 0.0;
	c.predicted_slots = predicted_slots;
	c.pred_adapt = adapt;
	return mk(c);
}

/* `rounds` times FSR_USE_N outcomes of each tier's copies (all used or
 * all not), each followed by a take, where the size is decided. */
static void outcomes(struct fsr *r, int pred_used, int static_used, unsigned rounds)
{
	struct fsr_copy cp[8];
	for (unsigned i = 0; i < rounds; i++) {
		for (unsigned k = 0; k < (unsigned)FSR_USE_N; k++) {
			fsr_use_outcome(&r->card[0], FSR_TIER_PREDICTED, pred_used);
			fsr_use_outcome(&r->card[0], FSR_TIER_STATIC, static_used);
		}
		(void)fsr_take_copies(r, 0, cp, 8, 0);
	}
}

static uint32_t pred_q(const struct fsr *r, uint32_t layer)
{
	return fsr_quota(&r->card[0], layer, FSR_TIER_PREDICTED);
}

Test(sched, pred_adapt_shrinks_an_unused_predicted_tier_to_its_floor)
{
	struct fsr *r = mk_adapt(1, FSR_AUTO);
	cr_assert_eq(r->use_measure, 1, "pred_adapt reads the use rates: they are measured");
	uint32_t stat0 = r->card[0].card_quota[FSR_TIER_STATIC];
	for (uint32_t l = 0; l < SL; l++)
		cr_assert_eq(pred_q(r, l), 4);
	outcomes(r, 0, 1, 1);
	cr_assert_eq(pred_q(r, 0), 3, "one slot a layer per decision");
	cr_assert_eq(r->card[0].card_quota[FSR_TIER_STATIC], stat0 + SL, "back to the static tier");
	outcomes(r, 0, 1, 10);
	for (uint32_t l = 0; l < SL; l++)
		cr_assert_eq(pred_q(r, l), 1, "the floor: 1, so its use is still measured");
	cr_assert_eq(r->card[0].card_quota[FSR_TIER_STATIC], stat0 + 3 * SL);
	ok(r);
	fsr_destroy(r);
}

Test(sched, pred_adapt_grows_back_when_predicted_copies_are_used)
{
	struct fsr *r = mk_adapt(1, FSR_AUTO);
	uint32_t stat0 = r->card[0].card_quota[FSR_TIER_STATIC];
	outcomes(r, 0, 1, 10);
	cr_assert_eq(pred_q(r, 5), 1);
	/* Now its copies are used, the static tier's not: back to 4, no more. */
	outcomes(r, 1, 0, 10);
	for (uint32_t l = 0; l < SL; l++)
		cr_assert_eq(pred_q(r, l), 4);
	cr_assert_eq(r->card[0].card_quota[FSR_TIER_STATIC], stat0);
	ok(r);
	fsr_destroy(r);
}

Test(sched, pred_adapt_holds_between_the_two_rates)
{
	struct fsr *r = mk_adapt(1, FSR_AUTO);
	/* Predicted copies used 0.6 times as often as static ones: above
	 * FSR_PRED_SHRINK, below FSR_PRED_GROW: the size stays. */
	struct fsr_card *cd = &r->card[0];
	struct fsr_copy cp[8];
	for (unsigned i = 0; i < 5; i++) {
		cd->use_rate[FSR_TIER_PREDICTED] = 0.3f;
		cd->use_rate[FSR_TIER_STATIC] = 0.5f;
		cd->pred_outcomes = (uint32_t)FSR_USE_N;
		(void)fsr_take_copies(r, 0, cp, 8, 0);
	}
	cr_assert_eq(pred_q(r, 0), 4);
	fsr_destroy(r);
}

Test(sched, pred_adapt_leaves_an_explicit_size_and_is_off_by_option)
{
	struct fsr *r = mk_adapt(1, 2);
	outcomes(r, 0, 1, 10);
	for (uint32_t l = 0; l < SL; l++)
		cr_assert_eq(pred_q(r, l), 2, "--predicted-slots 2 stays 2");
	ok(r);
	fsr_destroy(r);
	r = mk_adapt(0, FSR_AUTO);
	outcomes(r, 0, 1, 10);
	for (uint32_t l = 0; l < SL; l++)
		cr_assert_eq(pred_q(r, l), 4, "pred_adapt off: the auto size stays");
	ok(r);
	fsr_destroy(r);
}
