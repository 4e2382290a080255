/* SPDX-License-Identifier: Apache-2.0 */
/* fsr_card_test.c: a card that goes down (fsr_card.c): its slots leave the
 * table at once, a copy in flight never lands, it is never copied to or
 * read for placement again, records naming it act on a live card or are
 * dropped and counted, its layers move to live cards, and the core stays
 * sound through random churn with a card going down half way.  Tiers and
 * the untiered policy, one tier across the cards and each card its own. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "fs_counters.h"
#include "fsr.h"

#define KL 4u  /* layers */
#define KE 32u /* experts */
#define KCL 4u /* clients */
#define KMAXC 3u

static uint64_t now_;
static uint64_t tbl_[FS_MAX_CARDS * KL * KE];
static uint64_t cc_[KMAXC][FS_N_CARD];

static struct fsr_config kcfg(uint32_t cards, uint32_t slots, int tiers, uint16_t reach_all)
{
	struct fsr_config c = {
		.cards = cards, .layers = KL, .experts = KE, .max_clients = KCL, .uniform_bytes = 1000};
	for (uint32_t i = 0; i < cards; i++) {
		c.slots[i] = slots;
		c.reach[i] = reach_all;
	}
	memset(cc_, 0, sizeof(cc_));
	c.counters.card = &cc_[0][0];
	if (tiers) {
		fsr_config_tiers(&c);
		c.bus_gbps = 0; /* slots, not the bus */
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
	for (uint32_t k = 0; k < KCL; k++)
		cr_assert_eq(fsr_client_add(r, k), 0);
	return r;
}

static void ok_at(const struct fsr *r, const char *where)
{
	int rc = fsr_check(r);
	cr_assert_eq(rc, 0, "%s: fsr_check failed at fsr_check.c:%d", where, -rc);
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
	rec(r, client, FS_REC_PREDICT, FS_PRED_AUX(1, FS_SRC_HOST), card, layer, expert, window);
}

/* Publish, free every hold, reclaim; copy and land what every card wants. */
static void settle(struct fsr *r, uint32_t cards)
{
	static const uint64_t none[FS_MAX_HOLDS];
	struct fsr_copy cp[64];
	for (int round = 0; round < 6; round++) {
		fsr_fill(r, tbl_);
		fsr_publish(r);
		for (uint32_t k = 0; k < KCL; k++)
			fsr_client_holds(r, k, none);
		fsr_reclaim(r);
		for (uint32_t c = 0; c < cards; c++) {
			unsigned n = fsr_take_copies(r, c, cp, 64, now_);
			for (unsigned i = 0; i < n; i++) {
				cr_assert_eq(cp[i].card, c);
				fsr_copy_done(r, c, cp[i].slot, cp[i].gen, now_);
			}
		}
		now_ += 1000;
	}
}

/* Slots of `card` in the working table (LOADING or RESIDENT). */
static uint32_t in_table(const struct fsr *r, uint32_t card, uint32_t slots)
{
	uint32_t n = 0;
	for (uint32_t s = 0; s < slots; s++) {
		struct fsr_slot_info si;
		cr_assert_eq(fsr_slot_info(r, card, s, &si), 0);
		n += si.state == FSR_LOADING || si.state == FSR_RESIDENT;
	}
	return n;
}

/* Entries of `card` in the table fsr_fill writes. */
static uint32_t published_entries(const struct fsr *r, uint32_t card)
{
	fsr_fill(r, tbl_);
	uint32_t n = 0;
	for (uint32_t i = 0; i < KL * KE; i++)
		n += tbl_[(uint64_t)card * KL * KE + i] != FS_ENTRY_NONE;
	return n;
}

/* ---- the card's slots -------------------------------------------------- */

static void evicts_everything(int tiers)
{
	struct fsr *r = mk(kcfg(2, 16, tiers, 0x3));
	/* Layers 2, 3 live on card 1 (the default split): land a few there. */
	for (uint32_t e = 0; e < 4; e++) {
		use(r, 0, 1, 2, e, 0, 1);
		use(r, 0, 0, 0, e, 0, 1);
	}
	settle(r, 2);
	uint32_t landed1 = in_table(r, 1, 16);
	cr_assert_geq(landed1, 4, "card 1 holds its misses (%u)", landed1);
	cr_assert_gt(in_table(r, 0, 16), 0);
	cr_assert_eq(cc_[1][FS_CC_up], 1);
	/* Two more copies handed out to card 1, still in flight. */
	use(r, 1, 1, 3, 7, 0, 2);
	use(r, 1, 1, 3, 8, 0, 2);
	fsr_fill(r, tbl_);
	fsr_publish(r);
	struct fsr_copy fl[8];
	unsigned nfl = fsr_take_copies(r, 1, fl, 8, now_);
	cr_assert_geq(nfl, 2, "copies in flight on card 1");
	uint64_t evicted = cc_[1][FS_CC_evicted];

	cr_assert_eq(fsr_card_down(r, 1), 0);
	ok_at(r, "after down");
	cr_assert(fsr_card_is_down(r, 1) && !fsr_card_is_down(r, 0));
	cr_assert_eq(fsr_cards_down(r), 0x2u);
	cr_assert_eq(in_table(r, 1, 16), 0, "RESIDENT and LOADING slots left the table");
	cr_assert_eq(published_entries(r, 1), 0, "the next epoch maps nothing to card 1");
	cr_assert_gt(published_entries(r, 0), 0, "card 0 keeps its experts");
	cr_assert(fsr_dirty(r), "a publish is due");
	cr_assert_eq(cc_[1][FS_CC_up], 0);
	cr_assert_eq(cc_[1][FS_CC_abandoned], nfl);
	cr_assert_eq(cc_[1][FS_CC_resident] + cc_[1][FS_CC_loading], 0);
	cr_assert_eq(cc_[1][FS_CC_evicted] - evicted, landed1 + nfl);
	for (uint32_t e = 0; e < KE; e++)
		cr_assert_eq(fsr_lookup(r, 1, 2, e), FSR_NONE);

	/* The copies in flight report landing later: ignored, counted. */
	for (unsigned i = 0; i < nfl; i++)
		fsr_copy_done(r, 1, fl[i].slot, fl[i].gen, now_);
	cr_assert_eq(cc_[1][FS_CC_done_after_down], nfl);
	cr_assert_eq(in_table(r, 1, 16), 0, "nothing landed on a card that is down");
	cr_assert_eq(cc_[1][FS_CC_copied], landed1, "no copy counted as landed");
	ok_at(r, "after late completions");

	cr_assert_eq(fsr_card_down(r, 1), -EALREADY);
	cr_assert_eq(fsr_card_down(r, 2), -EINVAL);
	cr_assert_eq(fsr_card_down(r, 99), -EINVAL);
	ok_at(r, "after refusals");
	fsr_destroy(r);
}

Test(card, down_evicts_everything_and_ignores_late_completions_untiered)
{
	evicts_everything(0);
}

Test(card, down_evicts_everything_and_ignores_late_completions_tiers)
{
	evicts_everything(1);
}

Test(card, a_held_epoch_keeps_its_window_and_the_slots_are_never_reused)
{
	struct fsr *r = mk(kcfg(2, 8, 0, 0x3));
	predict(r, 0, 1, 2, 5, 1);
	settle(r, 2);
	uint32_t s = fsr_lookup(r, 1, 2, 5);
	cr_assert_neq(s, FSR_NONE);
	uint64_t held = fsr_epoch(r); /* an engine holds the epoch that maps it */
	uint64_t h[FS_MAX_HOLDS] = {held};
	uint64_t none[FS_MAX_HOLDS] = {0};
	fsr_client_holds(r, 0, h);
	cr_assert_eq(fsr_card_down(r, 1), 0);
	fsr_fill(r, tbl_);
	fsr_publish(r);
	for (uint32_t k = 0; k < KCL; k++)
		fsr_client_holds(r, k, k == 0 ? h : none);
	fsr_reclaim(r);
	struct fsr_slot_info si;
	fsr_slot_info(r, 1, s, &si);
	cr_assert_eq(si.state, FSR_RETIRING, "the reader's window: not freed while held");
	fsr_client_holds(r, 0, none);
	fsr_reclaim(r);
	fsr_slot_info(r, 1, s, &si);
	cr_assert_eq(si.state, FSR_FREE);
	/* Demand for card 1 from then on never loads a slot of it. */
	for (uint32_t w = 2; w < 40; w++) {
		predict(r, 1, 1, 2, w % KE, w);
		use(r, 1, 1, 3, (w * 7) % KE, 0, w);
		settle(r, 2);
		cr_assert_eq(in_table(r, 1, 8), 0, "window %u", w);
	}
	ok_at(r, "end");
	fsr_destroy(r);
}

/* ---- records naming the card ---------------------------------------------- */

static void records_replaced_one_tier(int tiers)
{
	struct fsr *r = mk(kcfg(2, 16, tiers, 0x3));
	cr_assert_eq(fsr_card_down(r, 1), 0);
	uint64_t dropped = cc_[1][FS_CC_dropped];
	/* An engine still naming card 1 (it has not seen the news): a miss
	 * and a prediction.  Card 1 read card 0: they act on card 0. */
	use(r, 0, 1, 2, 9, 0, 1);
	predict(r, 0, 1, 3, 4, 1);
	predict(r, 2, FS_CARD_NONE, 2, 11, 1); /* "where the layer runs": its new home */
	settle(r, 2);
	cr_assert_neq(fsr_lookup(r, 0, 2, 9), FSR_NONE, "the miss was copied to card 0");
	cr_assert_neq(fsr_lookup(r, 0, 3, 4), FSR_NONE, "the prediction was copied to card 0");
	cr_assert_neq(fsr_lookup(r, 0, 2, 11), FSR_NONE);
	cr_assert_eq(cc_[1][FS_CC_dropped], dropped, "nothing dropped: re-placed");
	cr_assert_eq(cc_[1][FS_CC_misses], 1, "counted where the engine ran it");
	uint32_t card = 99;
	cr_assert_eq(fsr_lookup_from(r, 1, 2, 9, &card), fsr_lookup(r, 0, 2, 9));
	cr_assert_eq(card, 0);
	cr_assert_eq(fsr_reach(r, 0), 0x1u, "card 0 reads no card that is down");
	cr_assert_eq(fsr_reach(r, 1), 0u);
	ok_at(r, "end");
	fsr_destroy(r);
}

Test(card, records_naming_it_act_on_a_live_card_it_read_untiered)
{
	records_replaced_one_tier(0);
}

Test(card, records_naming_it_act_on_a_live_card_it_read_tiers)
{
	records_replaced_one_tier(1);
}

static void records_dropped_own_tiers(int tiers)
{
	struct fsr *r = mk(kcfg(2, 16, tiers, 0));
	cr_assert_eq(fsr_card_down(r, 1), 0);
	uint64_t dropped = cc_[1][FS_CC_dropped];
	use(r, 0, 1, 2, 9, 0, 1);
	predict(r, 0, 1, 3, 4, 1);
	use(r, 0, 1, 3, 4, 1, 1);
	settle(r, 2);
	cr_assert_eq(in_table(r, 0, 16) + in_table(r, 1, 16), 0, "copied nowhere: card 1 read no other card");
	cr_assert_eq(cc_[1][FS_CC_dropped] - dropped, 3, "each record dropped and counted");
	cr_assert_eq(cc_[1][FS_CC_predicted], 1);
	/* Card 0's own records go on as before. */
	use(r, 0, 0, 2, 9, 0, 2);
	settle(r, 2);
	cr_assert_neq(fsr_lookup(r, 0, 2, 9), FSR_NONE);
	ok_at(r, "end");
	fsr_destroy(r);
}

Test(card, records_naming_it_are_dropped_and_counted_without_reach_untiered)
{
	records_dropped_own_tiers(0);
}

Test(card, records_naming_it_are_dropped_and_counted_without_reach_tiers)
{
	records_dropped_own_tiers(1);
}

/* ---- homes and reserved sizes --------------------------------------------- */

Test(card, homes_move_to_the_live_cards_in_turn_and_reserved_sizes_follow)
{
	/* 3 cards, 4 layers: the first split puts layers 0, 1 on card 0, 2 on
	 * card 1, 3 on card 2. */
	struct fsr_config c = kcfg(3, 48, 1, 0x7);
	struct fsr *r = mk(c);
	struct fsr_tier_info ti;
	fsr_tier_info(r, 1, 2, FSR_TIER_RECENCY, &ti);
	cr_assert_gt(ti.quota, 0, "layer 2 is card 1's");
	uint32_t q0_before;
	fsr_tier_info(r, 0, 0, FSR_TIER_RECENCY, &ti);
	q0_before = ti.quota;
	cr_assert_eq(fsr_card_down(r, 1), 0);
	ok_at(r, "after down");
	/* Layer 2 went to the first live card (0). */
	fsr_tier_info(r, 1, 2, FSR_TIER_RECENCY, &ti);
	cr_assert_eq(ti.quota, 0, "card 1 reserves nothing");
	fsr_tier_info(r, 1, 0, FSR_TIER_STATIC, &ti);
	cr_assert_eq(ti.quota, 0);
	fsr_tier_info(r, 0, 2, FSR_TIER_RECENCY, &ti);
	cr_assert_gt(ti.quota, 0, "layer 2's reserved slots on card 0 now");
	fsr_tier_info(r, 0, 0, FSR_TIER_RECENCY, &ti);
	cr_assert_leq(ti.quota, q0_before, "card 0's share split over one more layer");
	/* A miss of layer 2 from card 1 (FS_CARD_NONE: where it runs) lands on card 0. */
	use(r, 0, FS_CARD_NONE, 2, 3, 0, 1);
	settle(r, 3);
	cr_assert_neq(fsr_lookup(r, 0, 2, 3), FSR_NONE);
	/* A use from card 1 never makes card 1 a home again. */
	for (uint32_t w = 1; w < 4 * FSR_HOME_IDLE_WINDOWS; w++) {
		use(r, 0, 1, 2, 3, 1, w);
		rec(r, 0, FS_REC_WIN_END, 0, 0, 0, 0, w);
	}
	fsr_tier_info(r, 1, 2, FSR_TIER_RECENCY, &ti);
	cr_assert_eq(ti.quota, 0);
	ok_at(r, "end");
	fsr_destroy(r);

	/* Two layers on the card going down: one to each live card. */
	r = mk(kcfg(3, 48, 0, 0x7));
	cr_assert_eq(fsr_card_down(r, 0), 0); /* card 0 is home to layers 0 and 1 */
	predict(r, 0, FS_CARD_NONE, 0, 1, 1);
	predict(r, 0, FS_CARD_NONE, 1, 1, 1);
	settle(r, 3);
	cr_assert_neq(fsr_lookup(r, 1, 0, 1), FSR_NONE, "layer 0 to card 1");
	cr_assert_neq(fsr_lookup(r, 2, 1, 1), FSR_NONE, "layer 1 to card 2");
	ok_at(r, "round robin");
	fsr_destroy(r);
}

/* Every reserved size of card c. */
static void card_quotas(const struct fsr *r, uint32_t c, uint32_t *q)
{
	static const enum fsr_tier tiers[] = {FSR_TIER_STATIC, FSR_TIER_RECENCY, FSR_TIER_PREDICTED};
	for (uint32_t l = 0; l < KL; l++)
		for (uint32_t t = 0; t < 3; t++) {
			struct fsr_tier_info ti;
			cr_assert_eq(fsr_tier_info(r, c, l, tiers[t], &ti), 0);
			q[l * 3 + t] = ti.quota;
		}
}

Test(card, without_reach_it_drops_the_layers_it_served_and_the_others_keep_theirs)
{
	/* Cards that do not read each other, two data-parallel engines: both
	 * cards serve every layer (each its own tier). */
	struct fsr *r = mk(kcfg(2, 32, 1, 0));
	for (uint32_t w = 1; w <= 6; w++) {
		for (uint32_t cl = 0; cl < 2; cl++) {
			for (uint32_t l = 0; l < KL; l++) {
				uint32_t e = (w + l + cl) % 6;
				use(r, cl, cl, l, e, fsr_lookup(r, cl, l, e) != FSR_NONE, w);
			}
			rec(r, cl, FS_REC_WIN_END, 0, 0, 0, 0, w);
		}
		settle(r, 2);
	}
	struct fsr_tier_info ti;
	for (uint32_t c = 0; c < 2; c++)
		for (uint32_t l = 0; l < KL; l++) {
			fsr_tier_info(r, c, l, FSR_TIER_RECENCY, &ti);
			cr_assert_gt(ti.quota, 0, "card %u serves layer %u", c, l);
		}
	cr_assert_gt(in_table(r, 1, 32), 0);
	uint32_t before[KL * 3], after[KL * 3], evicted0 = (uint32_t)cc_[0][FS_CC_evicted];
	card_quotas(r, 0, before);
	cr_assert_eq(fsr_card_down(r, 1), 0);
	ok_at(r, "after down");
	/* Card 1 serves nothing and reserves nothing; card 0 served every
	 * layer already: its reserved sizes and slots stay as they were. */
	for (uint32_t l = 0; l < KL; l++) {
		fsr_tier_info(r, 1, l, FSR_TIER_RECENCY, &ti);
		cr_assert_eq(ti.quota, 0);
		fsr_tier_info(r, 1, l, FSR_TIER_PREDICTED, &ti);
		cr_assert_eq(ti.quota, 0);
	}
	fsr_tier_info(r, 1, 0, FSR_TIER_STATIC, &ti);
	cr_assert_eq(ti.quota, 0);
	card_quotas(r, 0, after);
	cr_assert_arr_eq(before, after, sizeof(before), "card 0's reserved sizes changed");
	settle(r, 2);
	cr_assert_eq(cc_[0][FS_CC_evicted], evicted0, "card 0 trimmed slots");
	/* Engine 1 still naming card 1 (it cannot read card 0): dropped; a
	 * record naming no card goes to card 0, which runs every layer. */
	use(r, 1, 1, 2, 20, 0, 7);
	predict(r, 1, FS_CARD_NONE, 3, 21, 7);
	settle(r, 2);
	cr_assert_eq(in_table(r, 1, 32), 0);
	cr_assert_eq(fsr_lookup(r, 0, 2, 20), FSR_NONE);
	cr_assert_neq(fsr_lookup(r, 0, 3, 21), FSR_NONE);
	ok_at(r, "dp end");
	fsr_destroy(r);

	/* Layers split over the cards without reach: layers 2, 3 run on card
	 * 1 only, so they are dealt to card 0 when it goes down. */
	r = mk(kcfg(2, 32, 1, 0));
	use(r, 0, 0, 0, 1, 0, 1);
	use(r, 1, 1, 2, 1, 0, 1);
	settle(r, 2);
	fsr_tier_info(r, 0, 2, FSR_TIER_RECENCY, &ti);
	cr_assert_eq(ti.quota, 0);
	cr_assert_eq(fsr_card_down(r, 1), 0);
	ok_at(r, "split: after down");
	for (uint32_t l = 0; l < KL; l++) {
		fsr_tier_info(r, 0, l, FSR_TIER_RECENCY, &ti);
		cr_assert_gt(ti.quota, 0, "card 0 serves layer %u", l);
	}
	predict(r, 0, FS_CARD_NONE, 2, 5, 2);
	settle(r, 2);
	cr_assert_neq(fsr_lookup(r, 0, 2, 5), FSR_NONE);
	ok_at(r, "split end");
	fsr_destroy(r);
}

Test(card, every_card_down_empties_the_tier)
{
	for (int tiers = 0; tiers < 2; tiers++) {
		struct fsr *r = mk(kcfg(2, 8, tiers, 0x3));
		use(r, 0, 0, 0, 1, 0, 1);
		use(r, 0, 1, 2, 1, 0, 1);
		settle(r, 2);
		cr_assert_eq(fsr_card_down(r, 0), 0);
		cr_assert_eq(fsr_card_down(r, 1), 0);
		ok_at(r, "all down");
		for (uint32_t w = 2; w < 10; w++) {
			use(r, 0, w % 2, w % KL, w, 0, w);
			predict(r, 0, FS_CARD_NONE, w % KL, w + 1, w);
			settle(r, 2);
		}
		cr_assert_eq(published_entries(r, 0) + published_entries(r, 1), 0);
		cr_assert_eq(fsr_reach(r, 0) | fsr_reach(r, 1), 0);
		ok_at(r, "all down, records in");
		fsr_destroy(r);
	}
}

/* ---- random churn with a card going down half way ------------------------ */

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

static void churn(int tiers, uint16_t reach, uint64_t seed)
{
	enum { CARDS = 3, STEPS = 5000, DOWN = 1 };
	struct fsr_config c = kcfg(CARDS, 6, tiers, reach);
	c.slots[1] = 9;
	c.slots[2] = 4;
	struct fsr *r = mk(c);
	uint64_t s = seed;
	struct fsr_copy fl[CARDS * 64];
	unsigned nfl = 0;
	uint32_t win[KCL] = {1, 1, 1, 1};
	unsigned down_at = STEPS / 3 + rnd(&s, STEPS / 3);
	int down = 0;
	uint64_t copied_at_down = 0;
	for (unsigned step = 0; step < STEPS; step++) {
		now_ += 1 + rnd(&s, 5000);
		if (step == down_at) {
			cr_assert_eq(fsr_card_down(r, DOWN), 0);
			down = 1;
			copied_at_down = cc_[0][FS_CC_copied] + cc_[2][FS_CC_copied];
		}
		uint32_t op = rnd(&s, 10), cl = rnd(&s, KCL);
		uint32_t card = rnd(&s, CARDS + 1);
		if (card == CARDS)
			card = FS_CARD_NONE;
		uint32_t l = rnd(&s, KL), e = rnd(&s, KE) & rnd(&s, KE); /* skewed */
		if (op < 3) {
			use(r, cl, card, l, e, rnd(&s, 2), win[cl]);
		} else if (op < 5) {
			predict(r, cl, card, l, e, win[cl]);
		} else if (op == 5) {
			rec(r, cl, FS_REC_WIN_END, 0, 0, 0, 0, win[cl]);
			win[cl]++;
			rec(r, cl, FS_REC_WIN_BEGIN, 0, 0, 0, 0, win[cl]);
		} else if (op == 6) {
			uint32_t k = rnd(&s, CARDS);
			if (nfl + 8 <= sizeof(fl) / sizeof(fl[0])) {
				unsigned n = fsr_take_copies(r, k, fl + nfl, 8, now_);
				for (unsigned i = 0; i < n; i++)
					if (down && fl[nfl + i].card == DOWN)
						cr_assert_fail(
							"seed %llu step %u: a copy to the card that is down",
							(unsigned long long)seed, step);
				nfl += n;
			}
		} else if (op == 7 && nfl) {
			/* Completions in any order, the abandoned ones included. */
			uint32_t i = rnd(&s, nfl);
			fsr_copy_done(r, fl[i].card, fl[i].slot, fl[i].gen, now_);
			fl[i] = fl[--nfl];
		} else {
			fsr_fill(r, tbl_);
			uint64_t ep = fsr_publish(r);
			for (uint32_t k = 0; k < KCL; k++) {
				uint64_t h[FS_MAX_HOLDS] = {
					rnd(&s, 3) ? 0 : ep - rnd(&s, ep < 3 ? (uint32_t)ep : 3)};
				fsr_client_holds(r, k, h);
			}
			fsr_reclaim(r);
		}
		if (down) {
			if (in_table(r, DOWN, c.slots[DOWN]) != 0)
				cr_assert_fail("seed %llu step %u: the card that is down holds a slot",
					       (unsigned long long)seed, step);
			uint32_t hc;
			if (fsr_lookup_from(r, 0, l, e, &hc) != FSR_NONE && hc == DOWN)
				cr_assert_fail(
					"seed %llu step %u: card 0 finds an expert on the card that is down",
					(unsigned long long)seed, step);
		}
		if (step % 32 == 0 || step == down_at || step == STEPS - 1) {
			int rc = fsr_check(r);
			if (rc)
				cr_assert_fail("seed %llu step %u (down at %u): fsr_check.c:%d",
					       (unsigned long long)seed, step, down_at, -rc);
		}
	}
	cr_assert(down);
	cr_assert_eq(published_entries(r, DOWN), 0);
	/* The live cards kept copying after the loss. */
	cr_assert_gt(cc_[0][FS_CC_copied] + cc_[2][FS_CC_copied], copied_at_down);
	fsr_destroy(r);
}

Test(card, random_churn_with_a_card_going_down_half_way)
{
	for (uint64_t seed = 1; seed <= 6; seed++) {
		churn(0, 0x7, seed);
		churn(1, 0x7, seed);
		churn(0, 0, seed);
		churn(1, 0, seed);
	}
}
