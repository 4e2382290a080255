/* SPDX-License-Identifier: Apache-2.0 */
/* fsr_tier_test.c: the tiers' invariants: reserved sizes, where a copy
 * lands, promotion and the eviction order across tiers, and that a slot an
 * acquired epoch maps is never handed out again. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "fs_counters.h"
#include "fsr.h"
#include "fsr_internal.h"

#define TL 4u  /* layers */
#define TE 64u /* experts */

static uint64_t cd_[FS_N_DAEMON], cc_[FS_N_CARD * 2], cl_[TL * FS_N_LAYER], ccl_[4 * FS_N_CLIENT];
static uint64_t now_;

static struct fsr_config tcfg(uint32_t slots, uint32_t k, uint32_t p, uint32_t spare)
{
	struct fsr_config c = {.cards = 1,
			       .slots = {slots},
			       .layers = TL,
			       .experts = TE,
			       .max_clients = 4,
			       .uniform_bytes = 1000};
	memset(cc_, 0, sizeof(cc_));
	memset(cl_, 0, sizeof(cl_));
	c.counters = (struct fsr_counters){cd_, cc_, cl_, ccl_};
	fsr_config_tiers(&c);
	c.recency_slots = k;
	c.predicted_slots = p;
	c.spare_slots = spare;
	c.bus_gbps = 0; /* no bus limit: these tests are about slots */
	now_ = 0;
	return c;
}

static struct fsr *mk(struct fsr_config c)
{
	struct fsr *r = fsr_create(&c);
	cr_assert_not_null(r);
	cr_assert_eq(fsr_client_add(r, 0), 0);
	return r;
}

static void ok(const struct fsr *r)
{
	int rc = fsr_check(r);
	cr_assert_eq(rc, 0, "fsr_check failed at fsr_check.c:%d", -rc);
}

static void post(struct fsr *r, uint8_t type, uint8_t aux, uint32_t layer, uint32_t expert, uint32_t window,
		 float score)
{
	struct fs_rec x = {.type = type,
			   .aux = aux,
			   .layer = (uint16_t)layer,
			   .expert = (uint16_t)expert,
			   .card = 0,
			   .window = window};
	memcpy(&x.value, &score, sizeof(score));
	fsr_record(r, 0, &x, now_);
}

static void use(struct fsr *r, uint32_t layer, uint32_t expert, int hit, uint32_t window)
{
	post(r, FS_REC_USAGE, hit ? FS_USE_HIT : FS_USE_MISS, layer, expert, window, 0);
}

static void predict(struct fsr *r, uint32_t layer, uint32_t expert, uint32_t window, float score)
{
	post(r, FS_REC_PREDICT, FS_PRED_AUX(1, FS_SRC_ROUTER_AHEAD), layer, expert, window, score);
}

/* Publish, pass holds (none but `held`), reclaim; then copy and land all. */
static void settle(struct fsr *r, uint64_t held)
{
	uint64_t h[FS_MAX_HOLDS] = {held};
	struct fsr_copy cp[64];
	for (int round = 0; round < 8; round++) {
		static uint64_t tbl[2 * TL * TE]; /* up to two cards */
		fsr_fill(r, tbl);
		fsr_publish(r);
		fsr_client_holds(r, 0, h);
		fsr_reclaim(r);
		unsigned n = fsr_take_copies(r, 0, cp, 64, now_);
		for (unsigned i = 0; i < n; i++)
			fsr_copy_done(r, 0, cp[i].slot, cp[i].gen, now_);
		if (n == 0)
			break;
	}
	ok(r);
}

static struct fsr_tier_info info(const struct fsr *r, uint32_t layer, enum fsr_tier t)
{
	struct fsr_tier_info ti;
	cr_assert_eq(fsr_tier_info(r, 0, layer, t, &ti), 0);
	return ti;
}

static enum fsr_tier tier_of(const struct fsr *r, uint32_t layer, uint32_t expert)
{
	uint32_t s = fsr_lookup(r, 0, layer, expert);
	cr_assert_neq(s, FSR_NONE, "layer %u expert %u not resident", layer, expert);
	struct fsr_slot_info si;
	fsr_slot_info(r, 0, s, &si);
	return si.tier;
}

/* Counts that make expert e of layer l hot in proportion to 100 - e. */
static void profile(uint32_t *counts)
{
	for (uint32_t l = 0; l < TL; l++)
		for (uint32_t e = 0; e < TE; e++)
			counts[l * TE + e] = e < 40 ? 100 - e - l : 0;
}

/* A tier is its file and its row (proto/fs_tiers.h): the ops its file
 * defines agree with the row (name, gauge, scope), a per-layer tier sizes
 * itself (size op) and a card-wide one does not, and exactly one tier is
 * card-wide (it takes what the layers' tiers leave). */
#define ROW_CHECK(A, NAME, tname, what, SCOPE, help)                                                \
	{                                                                                           \
		const struct fsr_tier_ops *op = fsr_tier_ops(FSR_TIER_##NAME);                      \
		cr_expect_str_eq(op->name, #tname);                                                 \
		cr_expect_str_eq(fsr_tier_name(FSR_TIER_##NAME), #tname);                           \
		cr_expect_eq(op->gauge, FS_CC_tier_##tname, #tname ": gauge");                      \
		cr_expect_eq(op->card_wide, strcmp(#SCOPE, "CARD") == 0, #tname ": scope " #SCOPE); \
		cr_expect_eq(op->size != NULL, strcmp(#SCOPE, "LAYER") == 0, #tname ": size op");   \
		wide += op->card_wide;                                                              \
	}
Test(tiers, every_row_is_its_file)
{
	unsigned wide = 0;
	FS_TIERS(ROW_CHECK, ~)
	cr_expect_eq(wide, 1u, "card-wide tiers: %u", wide);
}
#undef ROW_CHECK

Test(tiers, reserved_sizes)
{
	struct fsr *r = mk(tcfg(100, 3, 2, 4));
	/* 96 slots over 4 layers: 24 each, 3 recency + 2 predicted per layer,
	 * the static tier the rest of all of them. */
	for (uint32_t l = 0; l < TL; l++) {
		cr_assert_eq(info(r, l, FSR_TIER_RECENCY).quota, 3);
		cr_assert_eq(info(r, l, FSR_TIER_PREDICTED).quota, 2);
		cr_assert_eq(info(r, l, FSR_TIER_STATIC).quota, 96 - 4 * 5);
	}
	fsr_destroy(r);

	/* FSR_AUTO: a 16th of the share, predicted 1..4; spare: one a layer,
	 * at most 1 % of the card: 250 slots, 1 spare, shares 63 62 62 62. */
	r = mk(tcfg(250, FSR_AUTO, FSR_AUTO, FSR_AUTO));
	cr_assert_eq(info(r, 0, FSR_TIER_RECENCY).quota, 63 / 16);
	cr_assert_eq(info(r, 0, FSR_TIER_PREDICTED).quota, 3);
	cr_assert_eq(info(r, 0, FSR_TIER_STATIC).quota, 249 - 4 * (3 + 3));
	fsr_destroy(r);

	/* Every expert has a slot (1000 for 4 x 64): no spare, no auto recency
	 * or predicted tier, every slot static (nothing need ever leave); an
	 * explicit size stays. */
	r = mk(tcfg(1000, FSR_AUTO, FSR_AUTO, FSR_AUTO));
	cr_assert_eq(info(r, 0, FSR_TIER_RECENCY).quota, 0);
	cr_assert_eq(info(r, 0, FSR_TIER_PREDICTED).quota, 0);
	cr_assert_eq(info(r, 0, FSR_TIER_STATIC).quota, 1000);
	fsr_destroy(r);
	r = mk(tcfg(1000, 2, FSR_AUTO, FSR_AUTO));
	cr_assert_eq(info(r, 3, FSR_TIER_RECENCY).quota, 2);
	cr_assert_eq(info(r, 3, FSR_TIER_PREDICTED).quota, 0);
	cr_assert_eq(info(r, 0, FSR_TIER_STATIC).quota, 1000 - 4 * 2);
	fsr_destroy(r);

	/* FSR_AUTO under 16 slots per layer (a few experts per layer): the
	 * 16th rounds down to no recency or predicted tier, and the static
	 * tier, card-wide, keeps every slot (rounded up, each layer had a
	 * recency and a predicted tier of one slot). */
	r = mk(tcfg(TL * 15, FSR_AUTO, FSR_AUTO, 0));
	for (uint32_t l = 0; l < TL; l++) {
		cr_assert_eq(info(r, l, FSR_TIER_RECENCY).quota, 0, "layer %u", l);
		cr_assert_eq(info(r, l, FSR_TIER_PREDICTED).quota, 0, "layer %u", l);
	}
	cr_assert_eq(info(r, 0, FSR_TIER_STATIC).quota, TL * 15);
	fsr_destroy(r);
	r = mk(tcfg(TL * 16, FSR_AUTO, FSR_AUTO, 0));
	cr_assert_eq(info(r, 0, FSR_TIER_RECENCY).quota, 1, "a 16th of 16");
	cr_assert_eq(info(r, 0, FSR_TIER_PREDICTED).quota, 1);
	cr_assert_eq(info(r, 0, FSR_TIER_STATIC).quota, TL * 14);
	fsr_destroy(r);

	/* FSR_ALL: every slot of a layer's share is recency (the lru baseline). */
	r = mk(tcfg(40, FSR_ALL, 0, 0));
	cr_assert_eq(info(r, 2, FSR_TIER_RECENCY).quota, 10);
	cr_assert_eq(info(r, 2, FSR_TIER_STATIC).quota, 0);
	fsr_destroy(r);

	/* K + P larger than a share: recency first, then predicted. */
	r = mk(tcfg(20, 4, 4, 0));
	cr_assert_eq(info(r, 0, FSR_TIER_RECENCY).quota, 4);
	cr_assert_eq(info(r, 0, FSR_TIER_PREDICTED).quota, 1);
	cr_assert_eq(info(r, 0, FSR_TIER_STATIC).quota, 0);
	ok(r);
	fsr_destroy(r);
}

Test(tiers, profile_fills_static_card_wide_then_per_layer)
{
	struct fsr *r = mk(tcfg(100, 3, 2, 4));
	static uint32_t counts[TL * TE];
	profile(counts);
	cr_assert_eq(fsr_profile_load(r, counts), 0);
	settle(r, 0);
	cr_assert_eq(info(r, 0, FSR_TIER_STATIC).used, 76);
	for (uint32_t l = 0; l < TL; l++) {
		cr_assert_eq(info(r, l, FSR_TIER_RECENCY).used, 3);
		cr_assert_eq(info(r, l, FSR_TIER_PREDICTED).used, 2);
	}
	/* The static tier holds the card's 76 hottest: counts 100 - e - l, so
	 * layer 0 gets the most (e <= 19 - ...); a colder layer fewer. */
	uint32_t per_layer[TL] = {0};
	for (uint32_t l = 0; l < TL; l++)
		for (uint32_t e = 0; e < TE; e++) {
			uint32_t s = fsr_lookup(r, 0, l, e);
			if (s == FSR_NONE)
				continue;
			struct fsr_slot_info si;
			fsr_slot_info(r, 0, s, &si);
			per_layer[l] += si.tier == FSR_TIER_STATIC;
		}
	cr_assert_geq(per_layer[0], per_layer[3]);
	cr_assert_eq(per_layer[0] + per_layer[1] + per_layer[2] + per_layer[3], 76);
	cr_assert_eq(tier_of(r, 0, 0), FSR_TIER_STATIC);
	cr_assert_eq(fsr_profile_load(r, NULL), -EINVAL);
	fsr_destroy(r);

	/* Untiered cores have no profile. */
	struct fsr_config c = {.cards = 1, .slots = {8}, .layers = 1, .experts = 8, .max_clients = 1};
	fsr_config_defaults(&c);
	r = fsr_create(&c);
	cr_assert_eq(fsr_profile_load(r, counts), -EINVAL);
	fsr_destroy(r);
}

/* A pool that holds every expert is filled at once, the used ones first;
 * one slot short, nothing is queued (a fill would only displace). */
Test(tiers, fill_all_only_when_every_expert_fits)
{
	struct fsr *r = mk(tcfg(TL * TE - 1, FSR_AUTO, FSR_AUTO, 0));
	cr_assert_eq(fsr_fill_all(r), 0);
	settle(r, 0);
	cr_assert_eq(fsr_lookup(r, 0, 0, 0), FSR_NONE, "one slot short: nothing copied");
	fsr_destroy(r);

	r = mk(tcfg(TL * TE, FSR_AUTO, FSR_AUTO, 0));
	post(r, FS_REC_WIN_BEGIN, 0, 0, 0, 1, 0);
	use(r, 2, 63, 0, 1); /* a miss: its candidate and a score */
	post(r, FS_REC_WIN_END, 0, 0, 0, 1, 0);
	cr_assert_eq(fsr_fill_all(r), (int)(TL * TE) - 1, "every expert but the one already wanted");
	struct fsr_copy cp[4];
	unsigned n = fsr_take_copies(r, 0, cp, 1, now_);
	cr_assert_eq(n, 1);
	cr_assert(cp[0].layer == 2 && cp[0].expert == 63, "the used expert goes first: %u/%u", cp[0].layer,
		  cp[0].expert);
	fsr_copy_done(r, 0, cp[0].slot, cp[0].gen, now_);
	settle(r, 0);
	for (uint32_t l = 0; l < TL; l++)
		for (uint32_t e = 0; e < TE; e++)
			cr_assert_neq(fsr_lookup(r, 0, l, e), FSR_NONE, "layer %u expert %u not resident", l,
				      e);
	cr_assert_eq(fsr_fill_all(r), 0, "nothing left to queue");
	/* Windows of use move nothing out: every slot is static, no tier
	 * recycles or demotes (predicted slots would leave at a window's end). */
	for (uint32_t w = 2; w < 6; w++) {
		post(r, FS_REC_WIN_BEGIN, 0, 0, 0, w, 0);
		for (uint32_t l = 0; l < TL; l++)
			for (uint32_t e = w; e < TE; e += 7)
				use(r, l, e, 1, w);
		post(r, FS_REC_WIN_END, 0, 0, 0, w, 0);
		settle(r, 0);
	}
	cr_assert_eq(cc_[FS_CC_evicted], 0);
	for (uint32_t l = 0; l < TL; l++)
		for (uint32_t e = 0; e < TE; e++)
			cr_assert_neq(fsr_lookup(r, 0, l, e), FSR_NONE, "layer %u expert %u left", l, e);
	fsr_destroy(r);

	struct fsr_config c = {.cards = 1, .slots = {TL * TE}, .layers = TL, .experts = TE, .max_clients = 1};
	fsr_config_defaults(&c);
	r = fsr_create(&c);
	cr_assert_eq(fsr_fill_all(r), -EINVAL, "untiered cores have no fill");
	fsr_destroy(r);
}

Test(tiers, recency_takes_misses_and_keeps_its_size)
{
	struct fsr_config c = tcfg(100, 3, 2, 4);
	c.adapt = 0; /* the profile is frozen: every miss is the recency tier's */
	struct fsr *r = mk(c);
	static uint32_t counts[TL * TE];
	profile(counts);
	fsr_profile_load(r, counts);
	settle(r, 0);
	uint64_t evicted0 = cc_[FS_CC_evicted];
	for (uint32_t w = 1; w <= 20; w++) {
		post(r, FS_REC_WIN_BEGIN, 0, 0, 0, w, 0);
		use(r, 1, 50 + w % 10, 0, w); /* cold experts of layer 1 miss */
		post(r, FS_REC_WIN_END, 0, 0, 0, w, 0);
		settle(r, 0);
		cr_assert_leq(info(r, 1, FSR_TIER_RECENCY).used, 3);
		cr_assert_eq(info(r, 1, FSR_TIER_STATIC).used, 76, "the static tier lost slots to recency");
		cr_assert_eq(info(r, 0, FSR_TIER_RECENCY).used, 3, "layer 0 lost recency slots to layer 1");
	}
	/* The three newest misses are there, in the recency tier. */
	for (uint32_t w = 18; w <= 20; w++)
		cr_assert_eq(tier_of(r, 1, 50 + w % 10), FSR_TIER_RECENCY);
	cr_assert_eq(fsr_lookup(r, 0, 1, 50 + 17 % 10), FSR_NONE);
	cr_assert_gt(cc_[FS_CC_evicted], evicted0);
	fsr_destroy(r);
}

Test(tiers, static_baseline_copies_nothing)
{
	struct fsr_config c = tcfg(100, 0, 0, 0);
	c.adapt = 0;
	struct fsr *r = mk(c);
	static uint32_t counts[TL * TE];
	profile(counts);
	fsr_profile_load(r, counts);
	settle(r, 0);
	cr_assert_eq(info(r, 0, FSR_TIER_STATIC).used, 100);
	uint64_t copied = cc_[FS_CC_copied];
	for (uint32_t e = 40; e < 64; e++) {
		use(r, 2, e, 0, 1);
		predict(r, 3, e, 1, 1.0f);
	}
	settle(r, 0);
	cr_assert_eq(cc_[FS_CC_copied], copied);
	fsr_destroy(r);
}

Test(tiers, promotion_and_demotion)
{
	struct fsr *r = mk(tcfg(100, 3, 2, 4));
	static uint32_t counts[TL * TE];
	profile(counts);
	fsr_profile_load(r, counts);
	settle(r, 0);
	/* Expert 60 of layer 2 misses: not hotter than the static tier's
	 * coldest yet, so it lands in the recency tier. */
	use(r, 2, 60, 0, 1);
	settle(r, 0);
	cr_assert_eq(tier_of(r, 2, 60), FSR_TIER_RECENCY);
	/* Used every window while the profile decays: it becomes hotter than
	 * the static tier's coldest and is promoted without a copy. */
	uint64_t copied = cc_[FS_CC_copied];
	uint32_t w = 2;
	for (; w < 200 && tier_of(r, 2, 60) != FSR_TIER_STATIC; w++) {
		post(r, FS_REC_WIN_BEGIN, 0, 0, 0, w, 0);
		use(r, 2, 60, 1, w);
		post(r, FS_REC_WIN_END, 0, 0, 0, w, 0);
		settle(r, 0);
	}
	cr_assert_eq(tier_of(r, 2, 60), FSR_TIER_STATIC, "never promoted");
	cr_assert_eq(cc_[FS_CC_copied], copied, "a promotion copies nothing");
	cr_assert_geq(cc_[FS_CC_promoted], 1);
	cr_assert_eq(info(r, 0, FSR_TIER_STATIC).used, 76);
	cr_assert_leq(info(r, 2, FSR_TIER_RECENCY).used, 3);
	fsr_destroy(r);
}

Test(tiers, hot_miss_is_copied_into_static)
{
	struct fsr *r = mk(tcfg(100, 3, 2, 4));
	static uint32_t counts[TL * TE];
	profile(counts);
	fsr_profile_load(r, counts);
	settle(r, 0);
	/* Let the profile fade, then miss the same cold expert many times in
	 * one window's worth of records: its score passes the coldest's. */
	for (uint32_t w = 1; w <= 60; w++)
		post(r, FS_REC_WIN_END, 0, 0, 0, w, 0);
	for (int i = 0; i < 5; i++)
		use(r, 3, 63, 0, 61);
	settle(r, 0);
	cr_assert_eq(tier_of(r, 3, 63), FSR_TIER_STATIC);
	cr_assert_eq(info(r, 0, FSR_TIER_STATIC).used, 76);
	ok(r);
	fsr_destroy(r);
}

Test(tiers, predicted_hit_moves_to_recency_unused_ones_recycle)
{
	struct fsr_config c = tcfg(100, 3, 2, 4);
	c.adapt = 0;
	struct fsr *r = mk(c);
	static uint32_t counts[TL * TE];
	profile(counts);
	fsr_profile_load(r, counts);
	settle(r, 0);
	post(r, FS_REC_WIN_BEGIN, 0, 0, 0, 5, 0);
	use(r, 0, 1, 1, 5); /* the engine is at layer 0 */
	predict(r, 2, 61, 5, 0.9f);
	predict(r, 2, 62, 5, 0.8f);
	settle(r, 0);
	cr_assert_eq(tier_of(r, 2, 61), FSR_TIER_PREDICTED);
	cr_assert_eq(tier_of(r, 2, 62), FSR_TIER_PREDICTED);
	cr_assert_eq(info(r, 2, FSR_TIER_PREDICTED).used, 2);
	use(r, 2, 61, 1, 5); /* used: it joins the recency tier */
	cr_assert_eq(tier_of(r, 2, 61), FSR_TIER_RECENCY);
	cr_assert_eq(info(r, 2, FSR_TIER_RECENCY).used, 3);
	cr_assert_eq(info(r, 2, FSR_TIER_PREDICTED).used, 2);
	ok(r);
	/* A pipelining engine has begun window 6 and predicted for it. */
	post(r, FS_REC_WIN_BEGIN, 0, 0, 0, 6, 0);
	use(r, 0, 1, 1, 6);
	predict(r, 3, 60, 6, 0.9f);
	settle(r, 0);
	cr_assert_eq(tier_of(r, 3, 60), FSR_TIER_PREDICTED);
	post(r, FS_REC_WIN_END, 0, 0, 0, 5, 0); /* 62 was never used: it leaves */
	cr_assert_eq(fsr_lookup(r, 0, 2, 62), FSR_NONE);
	cr_assert_eq(tier_of(r, 2, 61), FSR_TIER_RECENCY);
	cr_assert_eq(tier_of(r, 3, 60), FSR_TIER_PREDICTED, "window 6's prediction left with window 5");
	post(r, FS_REC_WIN_END, 0, 0, 0, 6, 0);
	cr_assert_eq(fsr_lookup(r, 0, 3, 60), FSR_NONE);
	ok(r);
	fsr_destroy(r);
}

/* One predicted slot per layer: within a window the best prediction keeps
 * it (a lower score does not displace it; a higher one does), and the next
 * window's predictions take it again. */
Test(tiers, predicted_tier_keeps_the_best_of_a_window)
{
	struct fsr_config c = tcfg(100, 3, 1, 4);
	c.adapt = 0;
	struct fsr *r = mk(c);
	static uint32_t counts[TL * TE];
	profile(counts); /* a full static tier: the free slots are the spare ones */
	fsr_profile_load(r, counts);
	settle(r, 0);
	post(r, FS_REC_WIN_BEGIN, 0, 0, 0, 5, 0);
	use(r, 0, 1, 1, 5);
	predict(r, 2, 51, 5, 0.9f);
	settle(r, 0);
	cr_assert_eq(tier_of(r, 2, 51), FSR_TIER_PREDICTED);
	predict(r, 2, 52, 5, 0.5f);
	predict(r, 2, 53, 5, 0.4f);
	settle(r, 0);
	cr_assert_eq(tier_of(r, 2, 51), FSR_TIER_PREDICTED, "a lower score displaced the window's best");
	cr_assert_eq(fsr_lookup(r, 0, 2, 52), FSR_NONE);
	cr_assert_eq(fsr_lookup(r, 0, 2, 53), FSR_NONE);
	predict(r, 2, 54, 5, 0.95f);
	settle(r, 0);
	cr_assert_eq(tier_of(r, 2, 54), FSR_TIER_PREDICTED, "a higher score must take the slot");
	cr_assert_eq(fsr_lookup(r, 0, 2, 51), FSR_NONE);
	/* Window 6: its slot is free game for window 6's predictions. */
	post(r, FS_REC_WIN_END, 0, 0, 0, 5, 0);
	post(r, FS_REC_WIN_BEGIN, 0, 0, 0, 6, 0);
	use(r, 0, 1, 1, 6);
	predict(r, 2, 55, 6, 0.1f);
	settle(r, 0);
	cr_assert_eq(tier_of(r, 2, 55), FSR_TIER_PREDICTED);
	ok(r);
	fsr_destroy(r);
}

Test(tiers, held_slot_not_reused)
{
	/* Layer 0's recency tier has one slot.  The engine holds the epoch that
	 * maps expert 50 there; a new miss evicts it, but its slot is handed
	 * out again only after the engine releases that epoch. */
	struct fsr_config c = tcfg(8, 1, 0, 0);
	c.adapt = 0;
	struct fsr *r = mk(c);
	use(r, 0, 50, 0, 1);
	settle(r, 0);
	uint32_t s = fsr_lookup(r, 0, 0, 50);
	cr_assert_neq(s, FSR_NONE);
	uint64_t held = fsr_epoch(r) + 1;
	static uint64_t tbl[TL * TE];
	fsr_fill(r, tbl);
	cr_assert_eq(fsr_publish(r), held);
	uint64_t h[FS_MAX_HOLDS] = {held};
	fsr_client_holds(r, 0, h);
	use(r, 0, 51, 0, 2);
	settle(r, held);
	struct fsr_slot_info si;
	fsr_slot_info(r, 0, s, &si);
	cr_assert_eq(si.state, FSR_RETIRING, "slot %u held by epoch %llu was reused", s,
		     (unsigned long long)held);
	cr_assert_eq(fsr_lookup(r, 0, 0, 51), FSR_NONE, "no other free slot: 51 must wait");
	settle(r, 0); /* released */
	cr_assert_eq(fsr_lookup(r, 0, 0, 51), s);
	fsr_destroy(r);
}

Test(tiers, layer_moving_cards_trims_reserved_sizes)
{
	struct fsr_config c = tcfg(40, 2, 1, 0);
	c.cards = 2;
	c.slots[1] = 40;
	struct fsr *r = mk(c);
	/* Layers 0, 1 on card 0 and 2, 3 on card 1: 20 slots of share each. */
	cr_assert_eq(info(r, 0, FSR_TIER_STATIC).quota, 40 - 2 * 3);
	for (uint32_t e = 0; e < 30; e++)
		use(r, 0, e, 0, 1);
	settle(r, 0);
	/* Layer 2 shows up on card 0: card 0's shares shrink to 13, 13, 14. */
	struct fs_rec x = {
		.type = FS_REC_USAGE, .aux = FS_USE_MISS, .layer = 2, .expert = 0, .card = 0, .window = 1};
	fsr_record(r, 0, &x, 0);
	settle(r, 0);
	struct fsr_tier_info ti;
	fsr_tier_info(r, 0, 0, FSR_TIER_STATIC, &ti);
	cr_assert_eq(ti.quota, 40 - 3 * 3);
	cr_assert_leq(ti.used, ti.quota);
	ok(r);
	fsr_destroy(r);
}

/* ---- issue 18's levers ----------------------------------------------- */

/* The size gauges are the reserved sizes, and the tiers' sizes add up to
 * the card's slots less the spare ones, whatever ghost hits moved. */
static void sizes_add_up(const struct fsr *r, uint32_t total)
{
	uint64_t rec = 0, pred = 0;
	for (uint32_t l = 0; l < TL; l++) {
		rec += info(r, l, FSR_TIER_RECENCY).quota;
		pred += info(r, l, FSR_TIER_PREDICTED).quota;
	}
	uint64_t st = info(r, 0, FSR_TIER_STATIC).quota;
	cr_assert_eq(cc_[FS_CC_size_recency], rec);
	cr_assert_eq(cc_[FS_CC_size_predicted], pred);
	cr_assert_eq(cc_[FS_CC_size_static], st);
	cr_assert_eq(st + rec + pred, total);
}

/* tier_adapt: a miss on an expert the recency tier evicted lately is a
 * recency ghost hit, and the layer's recency size grows by one (the static
 * tier, the card's, gives the slot). */
Test(levers, recency_ghost_hit_grows_the_recency_tier)
{
	struct fsr_config c = tcfg(100, 3, 2, 4);
	c.tier_adapt = 1;
	struct fsr *r = mk(c);
	static uint32_t counts[TL * TE];
	profile(counts);
	fsr_profile_load(r, counts);
	settle(r, 0);
	sizes_add_up(r, 96);
	cr_assert_eq(info(r, 1, FSR_TIER_RECENCY).quota, 3);
	/* Five cold experts of layer 1 miss in turn, each once per window:
	 * three recency slots cannot hold them, so each comes back as a
	 * recency ghost hit until the tier holds all five. */
	uint32_t w = 1;
	for (; w <= 40; w++) {
		post(r, FS_REC_WIN_BEGIN, 0, 0, 0, w, 0);
		use(r, 1, 50 + w % 5, fsr_lookup(r, 0, 1, 50 + w % 5) != FSR_NONE, w);
		post(r, FS_REC_WIN_END, 0, 0, 0, w, 0);
		settle(r, 0);
		sizes_add_up(r, 96);
	}
	cr_assert_gt(cc_[FS_CC_ghost_recency], 0);
	cr_assert_gt(info(r, 1, FSR_TIER_RECENCY).quota, 3, "recency ghost hits did not grow the tier");
	cr_assert_eq(info(r, 0, FSR_TIER_RECENCY).quota, 3, "layer 0 moved without a ghost hit there");
	fsr_destroy(r);
}

/* Without tier_adapt the same misses move nothing, but the ghost hits are
 * still counted: what `fsctl stats` shows an operator beside the sizes. */
Test(levers, fixed_sizes_without_tier_adapt)
{
	struct fsr_config c = tcfg(100, 3, 2, 4);
	struct fsr *r = mk(c);
	static uint32_t counts[TL * TE];
	profile(counts);
	fsr_profile_load(r, counts);
	settle(r, 0);
	for (uint32_t w = 1; w <= 40; w++) {
		post(r, FS_REC_WIN_BEGIN, 0, 0, 0, w, 0);
		use(r, 1, 50 + w % 5, fsr_lookup(r, 0, 1, 50 + w % 5) != FSR_NONE, w);
		post(r, FS_REC_WIN_END, 0, 0, 0, w, 0);
		settle(r, 0);
	}
	cr_assert_eq(info(r, 1, FSR_TIER_RECENCY).quota, 3);
	cr_assert_gt(cc_[FS_CC_ghost_recency], 0, "ghost hits are counted with fixed sizes too");
	sizes_add_up(r, 96);
	fsr_destroy(r);
}

/* cross_window: what a window used at layer 0 is predicted for the next
 * window's layer 0 when the window ends (a predicted copy), while a use at
 * layer 3 stays the recency tier's want. */
Test(levers, cross_window_predicts_the_next_windows_first_layers)
{
	for (int on = 0; on <= 1; on++) {
		struct fsr_config c = tcfg(100, 3, 2, 4);
		c.adapt = 0;
		c.cross_window = on ? FSR_CROSS_DEFAULT : 0;
		struct fsr *r = mk(c);
		static uint32_t counts[TL * TE];
		profile(counts);
		fsr_profile_load(r, counts);
		settle(r, 0);
		post(r, FS_REC_WIN_BEGIN, 0, 0, 0, 1, 0);
		use(r, 0, 55, 0, 1);
		use(r, 3, 56, 0, 1);
		post(r, FS_REC_WIN_END, 0, 0, 0, 1, 0);
		settle(r, 0);
		cr_assert_eq(tier_of(r, 0, 55), on ? FSR_TIER_PREDICTED : FSR_TIER_RECENCY);
		cr_assert_eq(tier_of(r, 3, 56), FSR_TIER_RECENCY);
		fsr_destroy(r);
	}
}

Test(levers, bad_lever_values_are_refused)
{
	struct fsr_config c = tcfg(100, 3, 2, 4);
	c.cross_window = FSR_CROSS_MAX + 1;
	cr_assert_null(fsr_create(&c));
	c = tcfg(100, 3, 2, 4);
	c.tier_adapt = 2;
	cr_assert_null(fsr_create(&c));
}

/* The default recency size is FSR_AUTO (a 16th of the share beside a
 * card-wide static tier, before and after predictions: fsr_core.c says
 * why).  FSR_AUTO_PRED, an option: the same until the first prediction;
 * then each layer's whole share less its predicted slots, the static slots
 * joining their layer's recency tier in place (resident still, nothing
 * copied). */
Test(levers, first_prediction_gives_the_static_slots_to_recency)
{
	struct fsr_config c = tcfg(100, 0, 0, 4);
	fsr_config_tiers(&c);
	cr_assert_eq(c.recency_slots, FSR_AUTO, "the default: the split, predictions or not");
	c.recency_slots = FSR_AUTO_PRED;
	c.bus_gbps = 0;
	c.spare_slots = 4;
	struct fsr *r = mk(c);
	static uint32_t counts[TL * TE];
	profile(counts);
	fsr_profile_load(r, counts);
	settle(r, 0);
	cr_assert_eq(info(r, 1, FSR_TIER_RECENCY).quota, 1, "a 16th of a 24-slot share, at least 1");
	cr_assert_gt(info(r, 0, FSR_TIER_STATIC).used, 0);
	uint32_t s = fsr_lookup(r, 0, 1, 0), landed = (uint32_t)cc_[FS_CC_copied];
	cr_assert_neq(s, FSR_NONE);
	cr_assert_eq(tier_of(r, 1, 0), FSR_TIER_STATIC);
	post(r, FS_REC_WIN_BEGIN, 0, 0, 0, 1, 0);
	use(r, 0, 0, 1, 1);
	predict(r, 2, 63, 1, 0.9f);
	cr_assert_eq(info(r, 0, FSR_TIER_STATIC).quota, 0);
	cr_assert_eq(info(r, 0, FSR_TIER_STATIC).used, 0);
	cr_assert_eq(fsr_lookup(r, 0, 1, 0), s, "the hottest expert moved or left");
	cr_assert_eq(tier_of(r, 1, 0), FSR_TIER_RECENCY);
	cr_assert_eq(info(r, 1, FSR_TIER_RECENCY).quota + info(r, 1, FSR_TIER_PREDICTED).quota, 24);
	settle(r, 0);
	cr_assert_eq(tier_of(r, 2, 63), FSR_TIER_PREDICTED);
	cr_assert_eq((uint32_t)cc_[FS_CC_copied], landed + 1, "only the prediction was copied");
	fsr_destroy(r);
}
