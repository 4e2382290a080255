/* SPDX-License-Identifier: Apache-2.0 */
/* fsr_place_test.c: one expert tier across cards (fsr_place.c): no card
 * loads what a card it reads holds, a use from card A of an expert on card
 * B is served from B, layers keep their slots on their home card, and two
 * cards that read each other fill evenly and hold distinct experts. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs_counters.h"
#include "fsr.h"

#define PL 4u  /* layers */
#define PE 32u /* experts */
#define PCL 4u /* clients */

static uint64_t now_;
static uint64_t tbl_[FS_MAX_CARDS * PL * PE];

static struct fsr_config pcfg(uint32_t cards, uint32_t slots, int tiers, uint16_t reach_all)
{
	struct fsr_config c = {
		.cards = cards, .layers = PL, .experts = PE, .max_clients = PCL, .uniform_bytes = 1000};
	for (uint32_t i = 0; i < cards; i++) {
		c.slots[i] = slots;
		c.reach[i] = reach_all;
	}
	if (tiers) {
		fsr_config_tiers(&c);
		c.bus_gbps = 0; /* these tests are about slots, not the bus */
		/* A card-wide static tier beside one recency and one predicted
		 * slot per layer (what FSR_AUTO gave these small shares before
		 * it rounded a 16th down): these tests pin where the static
		 * tier's slots stay when layers move. */
		c.recency_slots = 1;
		c.predicted_slots = 1;
	} else {
		fsr_config_defaults(&c);
	}
	now_ = 0;
	return c;
}

static struct fsr *mk(struct fsr_config c)
{
	struct fsr *r = fsr_create(&c);
	cr_assert_not_null(r);
	for (uint32_t k = 0; k < PCL; k++)
		cr_assert_eq(fsr_client_add(r, k), 0);
	return r;
}

static void ok(const struct fsr *r)
{
	int rc = fsr_check(r);
	cr_assert_eq(rc, 0, "fsr_check failed at fsr_check.c:%d", -rc);
}

static void rec(struct fsr *r, uint32_t client, uint8_t type, uint8_t aux, uint32_t card, uint32_t layer,
		uint32_t expert, uint32_t window)
{
	struct fs_rec x = {.type = type,
			   .aux = aux,
			   .layer = (uint16_t)layer,
			   .expert = (uint16_t)expert,
			   .card = (uint16_t)card,
			   .window = window};
	if (type == FS_REC_PREDICT) {
		float score = 1.0f;
		memcpy(&x.value, &score, sizeof(score));
	}
	fsr_record(r, client, &x, now_);
}

static void use(struct fsr *r, uint32_t client, uint32_t card, uint32_t layer, uint32_t expert, int hit,
		uint32_t window)
{
	rec(r, client, FS_REC_USAGE, hit ? FS_USE_HIT : FS_USE_MISS, card, layer, expert, window);
}

static void predict(struct fsr *r, uint32_t client, uint32_t card, uint32_t layer, uint32_t expert,
		    uint32_t window)
{
	rec(r, client, FS_REC_PREDICT, FS_PRED_AUX(1, FS_SRC_ROUTER_AHEAD), card, layer, expert, window);
}

static void window_end(struct fsr *r, uint32_t client, uint32_t window)
{
	rec(r, client, FS_REC_WIN_END, 0, 0, 0, 0, window);
}

/* Publish, pass in every client's holds as free, reclaim; copy and land
 * everything every card wants, a few rounds. */
static void settle(struct fsr *r, uint32_t cards)
{
	static const uint64_t none[FS_MAX_HOLDS];
	struct fsr_copy cp[64];
	for (int round = 0; round < 6; round++) {
		fsr_fill(r, tbl_);
		fsr_publish(r);
		for (uint32_t k = 0; k < PCL; k++)
			fsr_client_holds(r, k, none);
		fsr_reclaim(r);
		for (uint32_t c = 0; c < cards; c++) {
			unsigned n = fsr_take_copies(r, c, cp, 64, now_);
			for (unsigned i = 0; i < n; i++)
				fsr_copy_done(r, c, cp[i].slot, cp[i].gen, now_);
		}
		now_ += 1000;
	}
}

/* How many cards map (layer, expert) in the working table. */
static uint32_t holders(const struct fsr *r, uint32_t cards, uint32_t layer, uint32_t expert)
{
	uint32_t n = 0;
	for (uint32_t c = 0; c < cards; c++)
		n += fsr_lookup(r, c, layer, expert) != FSR_NONE;
	return n;
}

static uint32_t occupied(const struct fsr *r, uint32_t card, uint32_t slots)
{
	uint32_t n = 0;
	for (uint32_t s = 0; s < slots; s++) {
		struct fsr_slot_info si;
		cr_assert_eq(fsr_slot_info(r, card, s, &si), 0);
		n += si.state == FSR_LOADING || si.state == FSR_RESIDENT;
	}
	return n;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t rnd(uint64_t *s, uint32_t n)
{
	return (uint32_t)(rng_next(s) % n);
}

/* Skewed expert ids: the low ones are hot. */
static uint32_t skewed(uint64_t *s, uint32_t n)
{
	uint32_t a = rnd(s, n), b = rnd(s, n);
	return a < b ? a : b;
}

/* ---- the reach matrix ---------------------------------------------------- */

Test(place, reach_defaults_own_card_and_set_only_while_empty)
{
	struct fsr *r = mk(pcfg(3, 8, 0, 0));
	for (uint32_t c = 0; c < 3; c++)
		cr_assert_eq(fsr_reach(r, c), 1u << c, "card %u reads only itself by default", c);
	uint16_t all[FS_MAX_CARDS] = {0xffff, 0xffff, 0xffff};
	cr_assert_eq(fsr_set_reach(r, all), 0);
	for (uint32_t c = 0; c < 3; c++)
		cr_assert_eq(fsr_reach(r, c), 0x7u, "bits past the cards are dropped");
	predict(r, 0, 0, 0, 1, 1);
	settle(r, 3);
	cr_assert_eq(fsr_set_reach(r, all), -EBUSY, "a slot in use: the reach is fixed");
	ok(r);
	fsr_destroy(r);
}

/* ---- a use from card A of an expert on card B ---------------------------- */

static void served_from_holder(int tiers)
{
	struct fsr *r = mk(pcfg(2, 8, tiers, 0x3));
	struct fsr_copy cp[8];
	/* Layer 2 runs on card 1 (the default split: layers 2, 3 -> card 1). */
	use(r, 0, 1, 2, 5, 0, 1);
	settle(r, 2);
	uint32_t on1 = fsr_lookup(r, 1, 2, 5);
	cr_assert_neq(on1, FSR_NONE, "the miss was copied to card 1");
	/* An engine on card 0 misses, predicts and uses (2, 5): card 1 has it. */
	use(r, 1, 0, 2, 5, 0, 2);
	predict(r, 1, 0, 2, 5, 2);
	use(r, 1, 0, 2, 5, 1, 2);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, now_), 0, "nothing to copy to card 0");
	settle(r, 2);
	cr_assert_eq(fsr_lookup(r, 0, 2, 5), FSR_NONE, "not copied again to card 0");
	uint32_t card = 99;
	cr_assert_eq(fsr_lookup_from(r, 0, 2, 5, &card), on1, "card 0 finds card 1's slot");
	cr_assert_eq(card, 1);
	cr_assert_eq(fsr_lookup_from(r, 1, 2, 5, &card), on1);
	cr_assert_eq(card, 1);
	cr_assert_eq(holders(r, 2, 2, 5), 1);
	ok(r);
	fsr_destroy(r);

	/* Control: the same records with cards that do not read each other
	 * copy it to card 0 too (the detector above can fail). */
	r = mk(pcfg(2, 8, tiers, 0));
	use(r, 0, 1, 2, 5, 0, 1);
	settle(r, 2);
	use(r, 1, 0, 2, 5, 0, 2);
	predict(r, 1, 0, 2, 5, 2);
	settle(r, 2);
	cr_assert_eq(holders(r, 2, 2, 5), tiers ? holders(r, 2, 2, 5) : 2u);
	card = 99;
	cr_assert_eq(fsr_lookup_from(r, 0, 2, 5, &card), fsr_lookup(r, 0, 2, 5),
		     "without reach, card 0 finds only its own");
	ok(r);
	fsr_destroy(r);
}

Test(place, use_on_card_a_of_expert_on_card_b_served_from_b_untiered)
{
	served_from_holder(0);
}

Test(place, use_on_card_a_of_expert_on_card_b_served_from_b_tiers)
{
	served_from_holder(1);
}

Test(place, control_without_reach_the_untiered_pool_duplicates)
{
	/* Untiered, the record's card is where a want goes: two cards that
	 * do not read each other each copy what they miss. */
	struct fsr *r = mk(pcfg(2, 8, 0, 0));
	use(r, 0, 1, 2, 5, 0, 1);
	use(r, 1, 0, 2, 5, 0, 1);
	settle(r, 2);
	cr_assert_eq(holders(r, 2, 2, 5), 2);
	ok(r);
	fsr_destroy(r);
}

Test(place, hit_from_card_a_keeps_card_b_copy_recent)
{
	/* Untiered card 1 with two slots: (2, 1) then (2, 2).  A hit from card
	 * 0 on (2, 1) makes it card 1's most recent, so room for a third
	 * expert is made by evicting (2, 2). */
	struct fsr_config c = pcfg(2, 2, 0, 0x3);
	c.slots[0] = 1;
	struct fsr *r = mk(c);
	predict(r, 0, 1, 2, 1, 1); /* layer 2's home is card 1 */
	settle(r, 2);
	predict(r, 0, 1, 2, 2, 1);
	settle(r, 2);
	cr_assert_neq(fsr_lookup(r, 1, 2, 1), FSR_NONE);
	cr_assert_neq(fsr_lookup(r, 1, 2, 2), FSR_NONE);
	use(r, 1, 0, 2, 1, 1, 2); /* client 1 on card 0: a hit through the peer path */
	predict(r, 2, 1, 2, 3, 3);
	settle(r, 2);
	cr_assert_neq(fsr_lookup(r, 1, 2, 1), FSR_NONE, "the expert read from card 0 stays");
	cr_assert_eq(fsr_lookup(r, 1, 2, 2), FSR_NONE, "the unused one went");
	cr_assert_neq(fsr_lookup(r, 1, 2, 3), FSR_NONE);
	ok(r);
	fsr_destroy(r);
}

Test(place, asymmetric_reach_copies_only_for_the_card_that_cannot_read)
{
	/* Card 0 reads card 1; card 1 does not read card 0. */
	struct fsr_config c = pcfg(2, 8, 0, 0);
	c.reach[0] = 0x3;
	struct fsr *r = mk(c);
	predict(r, 0, 1, 0, 7, 1); /* (0, 7) on card 1 */
	predict(r, 0, 0, 1, 4, 1); /* (1, 4) on card 0 */
	settle(r, 2);
	predict(r, 1, 0, 0, 7, 2); /* card 0 reads card 1: nothing to copy */
	predict(r, 1, 1, 1, 4, 2); /* card 1 cannot read card 0: its own copy */
	settle(r, 2);
	cr_assert_eq(fsr_lookup(r, 0, 0, 7), FSR_NONE);
	cr_assert_neq(fsr_lookup(r, 1, 1, 4), FSR_NONE);
	cr_assert_eq(holders(r, 2, 1, 4), 2, "the one duplicate the rule allows");
	uint32_t card = 99;
	fsr_lookup_from(r, 1, 1, 4, &card);
	cr_assert_eq(card, 1);
	ok(r);
	fsr_destroy(r);
}

Test(place, a_prediction_goes_to_the_card_it_names_unless_a_readable_card_holds_it)
{
	struct fsr *r = mk(pcfg(2, 8, 0, 0x3));
	predict(r, 0, 1, 0, 2, 1); /* layer 0's home is card 0; the engine says card 1 */
	settle(r, 2);
	cr_assert_neq(fsr_lookup(r, 1, 0, 2), FSR_NONE);
	cr_assert_eq(fsr_lookup(r, 0, 0, 2), FSR_NONE);
	predict(r, 0, 0, 0, 2, 2); /* card 0 reads card 1: nothing to copy */
	settle(r, 2);
	cr_assert_eq(holders(r, 2, 0, 2), 1);
	ok(r);
	fsr_destroy(r);
}

/* ---- layers and their home cards ----------------------------------------- */

Test(place, layer_split_places_on_the_home_card_and_home_moves_after_idle_windows)
{
	struct fsr *r = mk(pcfg(2, 32, 1, 0x3));
	/* Default split: layers 0, 1 -> card 0; 2, 3 -> card 1.  An engine
	 * on card 1 missing layer 0 (data parallel): the copy goes to layer
	 * 0's home, card 0, which card 1 reads. */
	use(r, 1, 1, 0, 3, 0, 1);
	use(r, 0, 0, 0, 4, 0, 1);
	use(r, 0, 0, 2, 6, 0, 1); /* card 0 missing layer 2: to card 1 */
	settle(r, 2);
	cr_assert_neq(fsr_lookup(r, 0, 0, 3), FSR_NONE);
	cr_assert_neq(fsr_lookup(r, 0, 0, 4), FSR_NONE);
	cr_assert_neq(fsr_lookup(r, 1, 2, 6), FSR_NONE);
	cr_assert_eq(holders(r, 2, 0, 3) + holders(r, 2, 0, 4) + holders(r, 2, 2, 6), 3);
	struct fsr_tier_info ti;
	fsr_tier_info(r, 0, 0, FSR_TIER_RECENCY, &ti);
	cr_assert_gt(ti.quota, 0, "layer 0's reserved slots stay on card 0");
	/* Card 0 falls silent about layer 0 while card 1 keeps using it: the
	 * home moves once FSR_HOME_IDLE_WINDOWS windows have ended. */
	uint32_t w = 2;
	for (; w < 2 + FSR_HOME_IDLE_WINDOWS - 1; w++) {
		use(r, 1, 1, 0, 3, 1, w);
		window_end(r, 1, w);
	}
	fsr_tier_info(r, 0, 0, FSR_TIER_RECENCY, &ti);
	cr_assert_gt(ti.quota, 0, "not yet: %u windows", w - 2);
	use(r, 1, 1, 0, 3, 1, w);
	window_end(r, 1, w++);
	use(r, 1, 1, 0, 9, 0, w);
	fsr_tier_info(r, 0, 0, FSR_TIER_RECENCY, &ti);
	cr_assert_eq(ti.quota, 0, "layer 0 moved to card 1");
	fsr_tier_info(r, 1, 0, FSR_TIER_RECENCY, &ti);
	cr_assert_gt(ti.quota, 0);
	settle(r, 2);
	cr_assert_neq(fsr_lookup(r, 1, 0, 9), FSR_NONE, "a new miss of layer 0 lands on card 1");
	cr_assert_eq(holders(r, 2, 0, 3), 1, "what card 0 still holds is read from there");
	ok(r);
	fsr_destroy(r);
}

Test(place, a_card_left_serving_no_layer_keeps_its_static_slots)
{
	/* Two cards that read each other, the static tier alone (fs-replay's
	 * `static`), one engine on card 0.  The profile fills card 0 with
	 * layers 0, 1 and card 1 with layers 2, 3; the engine's uses move the
	 * homes of 2 and 3 to card 0 once card 1 has been silent for
	 * FSR_HOME_IDLE_WINDOWS windows.  Card 1 then serves no layer, but its
	 * static slots stay and are read from there (fsr.h, "Placement across
	 * cards").  Was: a card serving no layer had no static size, so the
	 * trim emptied it and `fs-replay --synthetic --cards 2 --clients 1
	 * --policy static` hit 50.5 % where one card hit 96.3 %. */
	struct fsr_config c = pcfg(2, 16, 1, 0x3);
	c.recency_slots = c.predicted_slots = c.spare_slots = 0;
	c.adapt = 0;
	struct fsr *r = mk(c);
	uint32_t counts[PL * PE] = {0};
	for (uint32_t i = 0; i < PL * PE; i++)
		counts[i] = i % PE < 8 ? 100 - i % PE : 0; /* experts 0..7 of every layer */
	cr_assert_eq(fsr_profile_load(r, counts), 0);
	settle(r, 2);
	for (uint32_t l = 0; l < PL; l++)
		for (uint32_t e = 0; e < 8; e++)
			cr_assert_eq(holders(r, 2, l, e), 1, "layer %u expert %u after the fill", l, e);
	cr_assert_eq(occupied(r, 1, 16), 16);
	for (uint32_t w = 1; w <= FSR_HOME_IDLE_WINDOWS + 2; w++) {
		for (uint32_t l = 0; l < PL; l++)
			use(r, 0, 0, l, w % 8, 1, w);
		window_end(r, 0, w);
		settle(r, 2);
	}
	struct fsr_tier_info ti;
	fsr_tier_info(r, 0, 3, FSR_TIER_STATIC, &ti);
	cr_assert_gt(ti.quota, 0, "layer 3 is served from card 0 now");
	cr_assert_eq(occupied(r, 1, 16), 16, "card 1 kept its static slots");
	for (uint32_t l = 0; l < PL; l++)
		for (uint32_t e = 0; e < 8; e++)
			cr_assert_eq(holders(r, 2, l, e), 1, "layer %u expert %u", l, e);
	ok(r);
	fsr_destroy(r);
}

Test(place, without_reach_a_use_adds_the_card_and_the_first_keeps_its_share)
{
	/* Cards that do not read each other: a use from card 1 of layer 0
	 * (homed on card 0) gives card 1 a share of the layer at once, and
	 * card 0 keeps its own (it has not been silent about it). */
	struct fsr *r = mk(pcfg(2, 32, 1, 0));
	use(r, 0, 1, 0, 3, 0, 1);
	struct fsr_tier_info ti;
	fsr_tier_info(r, 1, 0, FSR_TIER_RECENCY, &ti);
	cr_assert_gt(ti.quota, 0);
	fsr_tier_info(r, 0, 0, FSR_TIER_RECENCY, &ti);
	cr_assert_gt(ti.quota, 0, "card 0 keeps serving layer 0");
	/* A prediction naming no card goes to the card that used it last. */
	predict(r, 1, FS_CARD_NONE, 0, 7, 1);
	settle(r, 2);
	cr_assert_neq(fsr_lookup(r, 1, 0, 7), FSR_NONE);
	cr_assert_eq(fsr_lookup(r, 0, 0, 7), FSR_NONE);
	ok(r);
	fsr_destroy(r);
}

/* ---- free slots: two data-parallel engines sharing one tier -------------- */

struct dp_result {
	uint32_t occ[2];
	uint32_t distinct, dups;
};

static struct dp_result data_parallel(uint16_t reach, uint64_t seed)
{
	enum { SLOTS = 40, WINDOWS = 120 };
	struct fsr *r = mk(pcfg(2, SLOTS, 1, reach));
	uint64_t s = seed;
	for (uint32_t w = 1; w <= WINDOWS; w++) {
		for (uint32_t cl = 0; cl < 2; cl++) { /* client 0 runs on card 0, client 1 on card 1 */
			rec(r, cl, FS_REC_WIN_BEGIN, 0, 0, 0, 0, w);
			for (uint32_t l = 0; l < PL; l++)
				for (int k = 0; k < 3; k++) {
					uint32_t e = skewed(&s, PE), card;
					int hit = fsr_lookup_from(r, cl, l, e, &card) != FSR_NONE;
					use(r, cl, cl, l, e, hit, w);
				}
			window_end(r, cl, w);
		}
		settle(r, 2);
		int rc = fsr_check(r);
		cr_assert_eq(rc, 0, "window %u: fsr_check.c:%d", w, -rc);
	}
	struct dp_result out = {{occupied(r, 0, SLOTS), occupied(r, 1, SLOTS)}, 0, 0};
	for (uint32_t l = 0; l < PL; l++)
		for (uint32_t e = 0; e < PE; e++) {
			uint32_t h = holders(r, 2, l, e);
			out.distinct += h > 0;
			out.dups += h > 1 ? h - 1 : 0;
		}
	fsr_destroy(r);
	return out;
}

Test(place, data_parallel_engines_fill_both_cards_with_distinct_experts)
{
	for (uint64_t seed = 1; seed <= 5; seed++) {
		struct dp_result one = data_parallel(0x3, seed);
		cr_assert_eq(one.dups, 0, "seed %llu: one tier holds no duplicate", (unsigned long long)seed);
		/* Both cards' slots are used, and about evenly: each holds its
		 * home layers' share (a spare slot each, at most). */
		for (int c = 0; c < 2; c++)
			cr_assert_geq(one.occ[c], 40 * 9 / 10, "seed %llu: card %d holds %u of 40",
				      (unsigned long long)seed, c, one.occ[c]);
		uint32_t diff = one.occ[0] > one.occ[1] ? one.occ[0] - one.occ[1] : one.occ[1] - one.occ[0];
		cr_assert_leq(diff, 4, "seed %llu: %u vs %u slots", (unsigned long long)seed, one.occ[0],
			      one.occ[1]);
		cr_assert_eq(one.distinct, one.occ[0] + one.occ[1]);

		/* Control: cards that do not read each other.  Each keeps its
		 * own tier of every layer, so both hold the hottest experts:
		 * fewer distinct ones than one tier over both cards. */
		struct dp_result own = data_parallel(0, seed);
		cr_assert_gt(one.distinct, own.distinct,
			     "seed %llu: %u vs %u distinct (own tiers %u + %u slots)",
			     (unsigned long long)seed, one.distinct, own.distinct, own.occ[0], own.occ[1]);
	}
}

/* ---- data parallel engines on cards that do not read each other ----------- */

#define OT_WINDOWS 150u
#define OT_WARM 30u
#define OT_USES 4u /* per layer and window */
#define OT_BUS 1u  /* copies per card and layer step */
#define OT_SLOTS 64u
/* A recency ring of 8 per layer (the discussion's were 16): the reserved
 * sizes are then a good part of each card, as on the engine bench. */
#define OT_RECENCY 8u

struct ot_run {
	uint32_t hits[2], uses[2]; /* per engine, after the warm-up */
	uint32_t changes;          /* after the warm-up: steps that changed a reserved size */
	uint32_t static_layers[2]; /* layers with static slots on each card at the end */
	uint32_t reserving[PL];    /* per layer, bit c: card c reserves recency slots for it, every window */
	uint32_t dups;             /* (layer, expert) on both cards at the end */
};

/* Every reserved size of the first `cards` cards. */
static void quotas(const struct fsr *r, uint32_t cards, uint32_t *q)
{
	static const enum fsr_tier tiers[] = {FSR_TIER_STATIC, FSR_TIER_RECENCY, FSR_TIER_PREDICTED};
	for (uint32_t c = 0; c < cards; c++)
		for (uint32_t l = 0; l < PL; l++)
			for (uint32_t t = 0; t < 3; t++) {
				struct fsr_tier_info ti;
				cr_assert_eq(fsr_tier_info(r, c, l, tiers[t], &ti), 0);
				q[(c * PL + l) * 3 + t] = ti.quota;
			}
}

/* Publish, free every hold, reclaim; then land at most `bus` copies per
 * card (what its link carries in a layer's time). */
static void settle_bus(struct fsr *r, uint32_t cards, unsigned bus)
{
	static const uint64_t none[FS_MAX_HOLDS];
	struct fsr_copy cp[64];
	fsr_fill(r, tbl_);
	fsr_publish(r);
	for (uint32_t k = 0; k < PCL; k++)
		fsr_client_holds(r, k, none);
	fsr_reclaim(r);
	for (uint32_t c = 0; c < cards; c++) {
		unsigned n = fsr_take_copies(r, c, cp, bus, now_);
		for (unsigned i = 0; i < n; i++)
			fsr_copy_done(r, c, cp[i].slot, cp[i].gen, now_);
	}
	now_ += 1000;
}

/* `engines` engines, engine i on card i, each running every layer (data
 * parallel) on its own skewed stream seeds[i], with tiers; a hit is the
 * expert on a card the engine's card reads.  The engines run in step, layer by
 * layer, and after each layer at most OT_BUS copies land per card (as when
 * they run at once); the reserved sizes are compared after each engine's
 * records with the state before. */
static struct ot_run own_tiers(uint32_t engines, uint16_t reach, const uint64_t *seeds)
{
	const uint32_t slots = OT_SLOTS;
	struct fsr_config cfg = pcfg(engines, slots, 1, reach);
	cfg.recency_slots = OT_RECENCY;
	struct fsr *r = mk(cfg);
	struct ot_run out = {{0}};
	uint64_t s[2] = {seeds[0], engines > 1 ? seeds[1] : 0};
	uint32_t q[2][2 * PL * 3], step = 0;
	quotas(r, engines, q[0]);
	for (uint32_t l = 0; l < PL; l++)
		out.reserving[l] = (1u << engines) - 1u;
	for (uint32_t w = 1; w <= OT_WINDOWS; w++) {
		for (uint32_t cl = 0; cl < engines; cl++)
			rec(r, cl, FS_REC_WIN_BEGIN, 0, 0, 0, 0, w);
		for (uint32_t l = 0; l <= PL; l++) { /* step PL: the window ends */
			for (uint32_t i = 0; i < engines; i++) {
				uint32_t cl = (i + w + l) % engines; /* who reports first varies */
				for (uint32_t k = 0; k < OT_USES && l < PL; k++) {
					uint32_t e = skewed(&s[cl], PE), card;
					int hit = fsr_lookup_from(r, cl, l, e, &card) != FSR_NONE;
					use(r, cl, cl, l, e, hit, w);
					if (w > OT_WARM) {
						out.uses[cl]++;
						out.hits[cl] += hit;
					}
				}
				if (l == PL)
					window_end(r, cl, w);
				step++;
				quotas(r, engines, q[step & 1]);
				if (w > OT_WARM && memcmp(q[0], q[1], sizeof(q[0])) != 0)
					out.changes++;
			}
			settle_bus(r, engines, OT_BUS);
		}
		int rc = fsr_check(r);
		cr_assert_eq(rc, 0, "window %u: fsr_check.c:%d", w, -rc);
		for (uint32_t l = 0; l < PL; l++) {
			uint32_t m = 0;
			for (uint32_t c = 0; c < engines; c++) {
				struct fsr_tier_info ti;
				fsr_tier_info(r, c, l, FSR_TIER_RECENCY, &ti);
				m |= (ti.quota > 0) << c;
			}
			out.reserving[l] &= m;
		}
	}
	for (uint32_t c = 0; c < engines; c++)
		for (uint32_t l = 0; l < PL; l++) {
			uint32_t n = 0;
			for (uint32_t sl = 0; sl < slots; sl++) {
				struct fsr_slot_info si;
				fsr_slot_info(r, c, sl, &si);
				n += (si.state == FSR_RESIDENT || si.state == FSR_LOADING) && si.layer == l &&
				     si.tier == FSR_TIER_STATIC;
			}
			out.static_layers[c] += n > 0;
		}
	for (uint32_t l = 0; l < PL; l++)
		for (uint32_t e = 0; e < PE; e++)
			out.dups += holders(r, engines, l, e) > 1;
	fsr_destroy(r);
	return out;
}

static double rate(uint32_t hits, uint32_t uses)
{
	return uses ? (double)hits / uses : 0.0;
}

Test(place, no_reach_data_parallel_each_card_keeps_a_full_tier_for_every_layer)
{
	/* Two engines, engine i running every layer on card i, cards that do
	 * not read each other (consumer GPUs, --peer off).  Each card keeps
	 * its own tier for every layer it runs: its reserved sizes settle and
	 * stay, it holds static slots of every layer, and each engine hits as
	 * often as one engine alone on one card with the same slots.  (Before:
	 * each record moved its layer's reserved sizes to its card, so the two
	 * engines pulled every layer back and forth all run long.) */
	for (uint64_t seed = 1; seed <= 4; seed++) {
		const uint64_t seeds[2] = {seed, seed + 100};
		struct ot_run dp = own_tiers(2, 0, seeds);
		cr_assert_eq(dp.changes, 0, "seed %llu: reserved sizes changed in %u steps after the warm-up",
			     (unsigned long long)seed, dp.changes);
		for (uint32_t l = 0; l < PL; l++)
			cr_assert_eq(dp.reserving[l], 0x3u, "seed %llu: layer %u reserved on cards %#x only",
				     (unsigned long long)seed, l, dp.reserving[l]);
		for (uint32_t c = 0; c < 2; c++) {
			cr_assert_eq(dp.static_layers[c], PL,
				     "seed %llu: card %u holds static slots of %u layers",
				     (unsigned long long)seed, c, dp.static_layers[c]);
			const uint64_t one_seed[1] = {seeds[c]};
			struct ot_run one = own_tiers(1, 0, one_seed);
			double got = rate(dp.hits[c], dp.uses[c]), want = rate(one.hits[0], one.uses[0]);
			cr_assert_geq(got, want - 0.03,
				      "seed %llu: engine %u hits %.3f, alone on one card %.3f",
				      (unsigned long long)seed, c, got, want);
		}
		cr_assert_gt(dp.dups, 0, "seed %llu: the hot experts are on both cards",
			     (unsigned long long)seed);
	}
}

Test(place, with_reach_data_parallel_keeps_each_layer_on_its_home_card)
{
	/* The same engines on cards that read each other: one tier, as
	 * before.  Each layer's reserved sizes stay on its first home (layers
	 * 0, 1 on card 0; 2, 3 on card 1: both cards use every layer every
	 * window, so no home is ever idle), nothing moves after the warm-up,
	 * and no expert is on both cards. */
	for (uint64_t seed = 1; seed <= 4; seed++) {
		const uint64_t seeds[2] = {seed, seed + 100};
		struct ot_run one = own_tiers(2, 0x3, seeds);
		cr_assert_eq(one.changes, 0, "seed %llu", (unsigned long long)seed);
		for (uint32_t l = 0; l < PL; l++)
			cr_assert_eq(one.reserving[l], 1u << (l * 2 / PL),
				     "seed %llu: layer %u reserved on %#x", (unsigned long long)seed, l,
				     one.reserving[l]);
		cr_assert_eq(one.dups, 0, "seed %llu", (unsigned long long)seed);
	}
}

Test(place, no_reach_a_layer_a_card_stops_using_is_no_longer_served_there)
{
	struct fsr *r = mk(pcfg(2, 40, 1, 0));
	uint64_t s = 7;
	uint32_t w = 1;
	/* Both engines run every layer for a while. */
	for (; w <= 20; w++) {
		for (uint32_t cl = 0; cl < 2; cl++) {
			for (uint32_t l = 0; l < PL; l++)
				for (uint32_t k = 0; k < OT_USES; k++) {
					uint32_t e = skewed(&s, PE);
					use(r, cl, cl, l, e, fsr_lookup(r, cl, l, e) != FSR_NONE, w);
				}
			window_end(r, cl, w);
		}
		settle(r, 2);
	}
	struct fsr_tier_info st0, ti;
	fsr_tier_info(r, 1, 0, FSR_TIER_STATIC, &st0);
	fsr_tier_info(r, 1, 3, FSR_TIER_RECENCY, &ti);
	cr_assert_gt(ti.quota, 0);
	uint32_t on1 = 0;
	for (uint32_t e = 0; e < PE; e++)
		on1 += fsr_lookup(r, 1, 3, e) != FSR_NONE;
	cr_assert_gt(on1, 0, "card 1 holds experts of layer 3");
	/* Engine 1 stops running layer 3 (engine 0 goes on): still served
	 * through FSR_HOME_IDLE_WINDOWS - 1 of card 1's windows, not after
	 * FSR_HOME_IDLE_WINDOWS. */
	for (uint32_t n = 1; n <= FSR_HOME_IDLE_WINDOWS; n++, w++) {
		for (uint32_t cl = 0; cl < 2; cl++) {
			for (uint32_t l = 0; l < PL; l++) {
				if (cl == 1 && l == 3)
					continue;
				uint32_t e = skewed(&s, PE);
				use(r, cl, cl, l, e, fsr_lookup(r, cl, l, e) != FSR_NONE, w);
			}
			window_end(r, cl, w);
		}
		settle(r, 2);
		fsr_tier_info(r, 1, 3, FSR_TIER_RECENCY, &ti);
		if (n < FSR_HOME_IDLE_WINDOWS)
			cr_assert_gt(ti.quota, 0, "dropped after %u silent windows", n);
		else
			cr_assert_eq(ti.quota, 0, "still served after %u silent windows", n);
	}
	/* Its reserved sizes went to the other layers, its slots went, and card
	 * 0 (which runs it) kept it. */
	fsr_tier_info(r, 1, 3, FSR_TIER_PREDICTED, &ti);
	cr_assert_eq(ti.quota, 0);
	fsr_tier_info(r, 1, 0, FSR_TIER_STATIC, &ti);
	cr_assert_gt(ti.quota, st0.quota, "card 1's static tier grew (%u -> %u)", st0.quota, ti.quota);
	for (uint32_t e = 0; e < PE; e++)
		cr_assert_eq(fsr_lookup(r, 1, 3, e), FSR_NONE, "card 1 still holds (3, %u)", e);
	fsr_tier_info(r, 0, 3, FSR_TIER_RECENCY, &ti);
	cr_assert_gt(ti.quota, 0);
	/* A use brings it back at once. */
	use(r, 1, 1, 3, 1, 0, w);
	fsr_tier_info(r, 1, 3, FSR_TIER_RECENCY, &ti);
	cr_assert_gt(ti.quota, 0);
	settle(r, 2);
	cr_assert_neq(fsr_lookup(r, 1, 3, 1), FSR_NONE);
	ok(r);
	fsr_destroy(r);
}

/* ---- random demand --------------------------------------------------------- */

/* Records from random clients naming random cards (or none), copies taken
 * and landed in random order, publishes with random holds: after every
 * step, no expert on two cards that read each other (checked here and by
 * fsr_check), and the core stays sound. */
static void random_demand(int tiers, uint16_t reach, uint64_t seed, int expect_dups)
{
	enum { CARDS = 3, STEPS = 6000 };
	struct fsr_config c = pcfg(CARDS, 6, tiers, reach);
	c.slots[1] = 3;
	c.slots[2] = 9;
	struct fsr *r = mk(c);
	uint64_t s = seed;
	struct fsr_copy fl[CARDS * 64];
	unsigned nfl = 0, max_dup = 0;
	uint32_t win[PCL] = {1, 1, 1, 1};
	for (unsigned step = 0; step < STEPS; step++) {
		now_ += 1 + rnd(&s, 5000);
		uint32_t op = rnd(&s, 10), cl = rnd(&s, PCL);
		uint32_t card = rnd(&s, CARDS + 1);
		if (card == CARDS)
			card = FS_CARD_NONE;
		uint32_t l = rnd(&s, PL), e = skewed(&s, PE);
		if (op < 3) {
			use(r, cl, card, l, e, rnd(&s, 2), win[cl]);
		} else if (op < 5) {
			predict(r, cl, card, l, e, win[cl]);
		} else if (op == 5) {
			window_end(r, cl, win[cl]);
			win[cl]++;
			rec(r, cl, FS_REC_WIN_BEGIN, 0, 0, 0, 0, win[cl]);
		} else if (op == 6) {
			uint32_t k = rnd(&s, CARDS);
			if (nfl + 8 <= sizeof(fl) / sizeof(fl[0]))
				nfl += fsr_take_copies(r, k, fl + nfl, 8, now_);
		} else if (op == 7 && nfl) {
			uint32_t i = rnd(&s, nfl);
			fsr_copy_done(r, fl[i].card, fl[i].slot, fl[i].gen, now_);
			fl[i] = fl[--nfl];
		} else {
			fsr_fill(r, tbl_);
			uint64_t ep = fsr_publish(r);
			for (uint32_t k = 0; k < PCL; k++) {
				uint64_t h[FS_MAX_HOLDS] = {
					rnd(&s, 3) ? 0 : ep - rnd(&s, ep < 3 ? (uint32_t)ep : 3)};
				fsr_client_holds(r, k, h);
			}
			fsr_reclaim(r);
		}
		for (uint32_t y = 0; y < PL; y++)
			for (uint32_t x = 0; x < PE; x++) {
				unsigned h = holders(r, CARDS, y, x);
				if (h > max_dup)
					max_dup = h;
				if (!expect_dups && h > 1)
					cr_assert_fail("seed %llu step %u: (%u, %u) on %u cards",
						       (unsigned long long)seed, step, y, x, h);
			}
		if (step % 64 == 0 || step == STEPS - 1) {
			int rc = fsr_check(r);
			if (rc)
				cr_assert_fail("seed %llu step %u: fsr_check.c:%d", (unsigned long long)seed,
					       step, -rc);
		}
	}
	if (expect_dups)
		cr_assert_gt(max_dup, 1, "seed %llu: cards on their own tiers never held a duplicate?",
			     (unsigned long long)seed);
	fsr_destroy(r);
}

Test(place, random_demand_never_duplicates_across_cards_that_read_each_other)
{
	for (uint64_t seed = 1; seed <= 8; seed++) {
		random_demand(0, 0x7, seed, 0);
		random_demand(1, 0x7, seed, 0);
	}
}

Test(place, random_demand_control_cards_on_their_own_tiers_duplicate)
{
	for (uint64_t seed = 1; seed <= 3; seed++) {
		random_demand(0, 0, seed, 1);
		random_demand(1, 0, seed, 1);
	}
}
