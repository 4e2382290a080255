/* SPDX-License-Identifier: Apache-2.0 */
/* fsr_test.c: the residency core: policy, slot life cycle, epochs and the
 * grace period, and a randomized adversarial interleaving against a model. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs_counters.h"
#include "fsr.h"

#define MAXL 64u

struct ctrs {
	uint64_t daemon[FS_N_DAEMON];
	uint64_t card[FS_MAX_CARDS][FS_N_CARD];
	uint64_t layer[MAXL][FS_N_LAYER];
	uint64_t client[64][FS_N_CLIENT];
};

static struct ctrs K;
static uint64_t g_now; /* the time records, takes and landings carry (0 in the untiered tests) */

static struct fsr_config mkcfg(uint32_t cards, uint32_t slots, uint32_t layers, uint32_t experts)
{
	struct fsr_config c = {
		.cards = cards,
		.layers = layers,
		.experts = experts,
		.max_clients = 4,
		.uniform_bytes = 1000,
	};
	for (uint32_t i = 0; i < cards; i++)
		c.slots[i] = slots;
	if (layers <= MAXL) {
		memset(&K, 0, sizeof(K));
		c.counters = (struct fsr_counters){K.daemon, &K.card[0][0], &K.layer[0][0], &K.client[0][0]};
	}
	fsr_config_defaults(&c);
	return c;
}

static struct fsr *mk(uint32_t cards, uint32_t slots, uint32_t layers, uint32_t experts)
{
	struct fsr_config c = mkcfg(cards, slots, layers, experts);
	struct fsr *r = fsr_create(&c);
	cr_assert_not_null(r);
	cr_assert_eq(fsr_client_add(r, 0), 0);
	return r;
}

static void rec(struct fsr *r, uint32_t client, uint8_t type, uint8_t aux, uint32_t card, uint32_t layer,
		uint32_t expert, uint32_t window)
{
	struct fs_rec x = {
		.type = type,
		.aux = aux,
		.layer = (uint16_t)layer,
		.expert = (uint16_t)expert,
		.card = (uint16_t)card,
		.window = window,
	};
	fsr_record(r, client, &x, g_now);
}

static void predict(struct fsr *r, uint32_t card, uint32_t layer, uint32_t expert, uint32_t window)
{
	rec(r, 0, FS_REC_PREDICT, FS_PRED_AUX(1, FS_SRC_ROUTER_AHEAD), card, layer, expert, window);
}

static void use(struct fsr *r, uint32_t card, uint32_t layer, uint32_t expert, int hit, uint32_t window)
{
	rec(r, 0, FS_REC_USAGE, hit ? FS_USE_HIT : FS_USE_MISS, card, layer, expert, window);
}

static enum fsr_slot_state state_of(const struct fsr *r, uint32_t card, uint32_t slot)
{
	struct fsr_slot_info si;
	cr_assert_eq(fsr_slot_info(r, card, slot, &si), 0);
	return si.state;
}

static void ok(const struct fsr *r)
{
	int rc = fsr_check(r);
	cr_assert_eq(rc, 0, "fsr_check failed at fsr_check.c:%d", -rc);
}

/* predict + take + land on card 0; returns the slot. */
static uint32_t load(struct fsr *r, uint32_t layer, uint32_t expert, uint32_t window)
{
	struct fsr_copy cp[4];
	predict(r, 0, layer, expert, window);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 1);
	cr_assert_eq(cp[0].layer, layer);
	cr_assert_eq(cp[0].expert, expert);
	fsr_copy_done(r, 0, cp[0].slot, cp[0].gen, 0);
	cr_assert_eq(state_of(r, 0, cp[0].slot), FSR_RESIDENT);
	return cp[0].slot;
}

static void publish(struct fsr *r, uint64_t *tbl)
{
	fsr_fill(r, tbl);
	fsr_publish(r);
}

/* Publish, then pass in every attached client's holds as all free. */
static void publish_idle(struct fsr *r, uint64_t *tbl)
{
	static const uint64_t none[FS_MAX_HOLDS];
	publish(r, tbl);
	for (uint32_t c = 0; c < 4; c++)
		fsr_client_holds(r, c, none);
}

/* ---- configuration ---------------------------------------------------- */

Test(fsr, config_defaults)
{
	struct fsr_config c = {0};
	fsr_config_defaults(&c);
	cr_assert_eq(c.max_inflight, 32);
	cr_assert_eq(c.want_max_age, 2);
	c.max_inflight = 5;
	c.want_max_age = 7;
	fsr_config_defaults(&c);
	cr_assert_eq(c.max_inflight, 5);
	cr_assert_eq(c.want_max_age, 7);
}

static void expect_einval(struct fsr_config c, const char *what)
{
	errno = 0;
	struct fsr *r = fsr_create(&c);
	cr_assert_null(r, "%s accepted", what);
	cr_assert_eq(errno, EINVAL, "%s: errno %d", what, errno);
}

Test(fsr, config_validation)
{
	struct fsr_config good = mkcfg(2, 4, 3, 5);
	struct fsr *r = fsr_create(&good);
	cr_assert_not_null(r);
	fsr_destroy(r);
	errno = 0;
	cr_assert_null(fsr_create(NULL));
	cr_assert_eq(errno, EINVAL);

	struct fsr_config c;
	c = good, c.cards = 0, expect_einval(c, "cards 0");
	c = good, c.cards = FS_MAX_CARDS + 1, expect_einval(c, "cards 17");
	c = good, c.slots[1] = 0, expect_einval(c, "slots 0");
	c = good, c.layers = 0, expect_einval(c, "layers 0");
	c = good, c.layers = FS_MAX_LAYERS + 1, expect_einval(c, "layers 1025");
	c = good, c.experts = 0, expect_einval(c, "experts 0");
	c = good, c.experts = FS_MAX_EXPERTS + 1, expect_einval(c, "experts 4097");
	c = good, c.max_clients = 0, expect_einval(c, "max_clients 0");
	c = good, c.max_clients = 65, expect_einval(c, "max_clients 65");
	c = good, c.max_inflight = 0, expect_einval(c, "max_inflight 0");
	c = good, c.want_max_age = 0x80000000u, expect_einval(c, "want_max_age 2^31");

	/* Bounds are inclusive; slots of cards past `cards` are ignored. */
	c = good, c.cards = 1, c.slots[1] = 0, c.max_clients = 64, c.layers = 1, c.experts = 1;
	c.counters = (struct fsr_counters){0};
	r = fsr_create(&c);
	cr_assert_not_null(r);
	cr_assert_eq(fsr_client_add(r, 63), 0);
	cr_assert_eq(fsr_client_add(r, 63), -EEXIST);
	cr_assert_eq(fsr_client_add(r, 64), -EINVAL);
	fsr_destroy(r);
	fsr_destroy(NULL);
}

Test(fsr, private_counters_and_expert_bytes)
{
	uint64_t bytes[2 * 3] = {10, 11, 12, 20, 21, 22};
	struct fsr_config c = {.cards = 1, .slots = {2}, .layers = 2, .experts = 3, .max_clients = 1};
	c.expert_bytes = bytes;
	fsr_config_defaults(&c);
	struct fsr *r = fsr_create(&c);
	cr_assert_not_null(r);
	bytes[4] = 999; /* the core keeps its own copy */
	fsr_client_add(r, 0);
	predict(r, 0, 1, 1, 0);
	struct fsr_copy cp;
	cr_assert_eq(fsr_take_copies(r, 0, &cp, 1, 0), 1);
	cr_assert_eq(cp.bytes, 21);
	fsr_copy_done(r, 0, cp.slot, cp.gen, 0);
	ok(r);
	fsr_destroy(r);
}

/* ---- slot life cycle -------------------------------------------------- */

Test(fsr, predict_take_land)
{
	struct fsr *r = mk(1, 4, 3, 5);
	uint64_t tbl[3 * 5];
	cr_assert_eq(fsr_dirty(r), 0);
	predict(r, 0, 1, 2, 0);
	cr_assert_eq(K.card[0][FS_CC_predicted], 1);
	cr_assert_eq(K.layer[1][FS_CL_predicted], 1);
	cr_assert_eq(K.client[0][FS_CCL_predicted], 1);
	cr_assert_eq(fsr_lookup(r, 0, 1, 2), FSR_NONE);

	struct fsr_copy cp[4];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 1);
	cr_assert_eq(cp[0].card, 0);
	cr_assert_eq(cp[0].layer, 1);
	cr_assert_eq(cp[0].expert, 2);
	cr_assert_eq(cp[0].bytes, 1000);
	cr_assert_neq(cp[0].gen, FS_GEN_NONE);
	cr_assert_lt(cp[0].slot, 4);
	struct fsr_slot_info si;
	cr_assert_eq(fsr_slot_info(r, 0, cp[0].slot, &si), 0);
	cr_assert_eq(si.state, FSR_LOADING);
	cr_assert_eq(si.gen, cp[0].gen);
	cr_assert_eq(si.layer, 1);
	cr_assert_eq(si.expert, 2);
	cr_assert_eq(fsr_lookup(r, 0, 1, 2), cp[0].slot);
	cr_assert_eq(fsr_dirty(r), 1);
	cr_assert_eq(K.card[0][FS_CC_loading], 1);
	cr_assert_eq(K.card[0][FS_CC_resident], 0);

	fsr_fill(r, tbl);
	for (uint32_t i = 0; i < 15; i++)
		cr_assert_eq(tbl[i], i == 1 * 5 + 2 ? FS_ENTRY(cp[0].slot, cp[0].gen) : FS_ENTRY_NONE);
	cr_assert_eq(fsr_publish(r), 1);
	cr_assert_eq(fsr_epoch(r), 1);
	cr_assert_eq(fsr_dirty(r), 0);

	fsr_copy_done(r, 0, cp[0].slot, cp[0].gen, 0);
	cr_assert_eq(state_of(r, 0, cp[0].slot), FSR_RESIDENT);
	cr_assert_eq(fsr_dirty(r), 0); /* the entry did not change: the ready word says it landed */
	cr_assert_eq(K.card[0][FS_CC_copied], 1);
	cr_assert_eq(K.card[0][FS_CC_copied_bytes], 1000);
	cr_assert_eq(K.layer[1][FS_CL_copied], 1);
	cr_assert_eq(K.card[0][FS_CC_loading], 0);
	cr_assert_eq(K.card[0][FS_CC_resident], 1);
	uint64_t t2[15];
	fsr_fill(r, t2);
	cr_assert_arr_eq(tbl, t2, sizeof(tbl));
	ok(r);

	cr_assert_eq(fsr_slot_info(r, 0, 4, &si), -EINVAL);
	cr_assert_eq(fsr_slot_info(r, 1, 0, &si), -EINVAL);
	cr_assert_eq(fsr_lookup(r, 1, 0, 0), FSR_NONE);
	fsr_destroy(r);
}

Test(fsr, duplicates_dropped)
{
	struct fsr *r = mk(1, 4, 2, 4);
	struct fsr_copy cp[4];
	predict(r, 0, 0, 1, 0);
	predict(r, 0, 0, 1, 0); /* already wanted */
	cr_assert_eq(K.card[0][FS_CC_dropped], 1);
	cr_assert_eq(K.card[0][FS_CC_predicted], 2);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 1);
	predict(r, 0, 0, 1, 0); /* LOADING */
	cr_assert_eq(K.card[0][FS_CC_dropped], 2);
	fsr_copy_done(r, 0, cp[0].slot, cp[0].gen, 0);
	predict(r, 0, 0, 1, 0); /* RESIDENT */
	cr_assert_eq(K.card[0][FS_CC_dropped], 3);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 0);
	/* A miss of a wanted expert is the recency tier, not a prediction. */
	predict(r, 0, 1, 3, 0);
	use(r, 0, 1, 3, 0, 0);
	cr_assert_eq(K.card[0][FS_CC_dropped], 3);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 1);
	ok(r);
	fsr_destroy(r);
}

Test(fsr, miss_is_recency_insert)
{
	struct fsr *r = mk(2, 4, 2, 4);
	struct fsr_copy cp[4];
	use(r, 1, 1, 3, 0, 0);
	cr_assert_eq(K.card[1][FS_CC_misses], 1);
	cr_assert_eq(K.layer[1][FS_CL_misses], 1);
	cr_assert_eq(K.client[0][FS_CCL_misses], 1);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 0);
	cr_assert_eq(fsr_take_copies(r, 1, cp, 4, 0), 1);
	cr_assert_eq(cp[0].card, 1);
	cr_assert_eq(cp[0].layer, 1);
	cr_assert_eq(cp[0].expert, 3);
	fsr_copy_done(r, 1, cp[0].slot, cp[0].gen, 0);
	use(r, 1, 1, 3, 1, 0);
	cr_assert_eq(K.card[1][FS_CC_hits], 1);
	cr_assert_eq(K.layer[1][FS_CL_hits], 1);
	cr_assert_eq(K.client[0][FS_CCL_hits], 1);
	rec(r, 0, FS_REC_WIN_BEGIN, 0, FS_CARD_NONE, 0, 0, 1);
	rec(r, 0, FS_REC_WIN_END, 0, FS_CARD_NONE, 0, 0, 1);
	rec(r, 0, FS_REC_WIN_END, 0, FS_CARD_NONE, 9999, 9999, 2); /* WIN_* ignore layer, expert */
	cr_assert_eq(K.client[0][FS_CCL_windows], 2);
	cr_assert_eq(K.daemon[FS_C_epochs], 0); /* the daemon counts publishes */
	ok(r);
	fsr_destroy(r);
}

Test(fsr, late)
{
	struct fsr *r = mk(1, 4, 2, 4);
	struct fsr_copy cp[4];
	predict(r, 0, 1, 2, 0);
	use(r, 0, 1, 2, 0, 0); /* wanted, not yet loading: not late */
	cr_assert_eq(K.card[0][FS_CC_late], 0);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 1);
	use(r, 0, 1, 2, 0, 0);            /* loading: late */
	use(r, FS_CARD_NONE, 1, 2, 0, 0); /* CPU path, layer 1's home card is 0 */
	cr_assert_eq(K.card[0][FS_CC_late], 2);
	cr_assert_eq(K.layer[1][FS_CL_late], 2);
	cr_assert_eq(K.card[0][FS_CC_misses], 3);
	cr_assert_eq(fsr_take_copies(r, 0, cp + 1, 3, 0), 0); /* no second copy of it */
	fsr_copy_done(r, 0, cp[0].slot, cp[0].gen, 0);
	use(r, 0, 1, 2, 0, 0); /* resident (the engine used an older epoch): not late */
	cr_assert_eq(K.card[0][FS_CC_late], 2);
	ok(r);
	fsr_destroy(r);
}

Test(fsr, copy_done_mismatch_ignored)
{
	struct fsr *r = mk(2, 3, 2, 4);
	struct fsr_copy cp[4];
	predict(r, 0, 0, 1, 0);
	predict(r, 0, 0, 2, 0);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 2);
	fsr_copy_done(r, 0, cp[1].slot, cp[1].gen, 0); /* cp[1] RESIDENT, cp[0] LOADING */

	struct fsr_slot_info before[2][3], after[2][3];
	struct ctrs kb;
	for (uint32_t c = 0; c < 2; c++)
		for (uint32_t s = 0; s < 3; s++)
			fsr_slot_info(r, c, s, &before[c][s]);
	memcpy(&kb, &K, sizeof(K));
	uint32_t free_slot = 3 - cp[0].slot - cp[1].slot;

	fsr_copy_done(r, 0, cp[0].slot, cp[0].gen + 1, 0); /* wrong gen */
	fsr_copy_done(r, 0, cp[0].slot, FS_GEN_NONE, 0);
	fsr_copy_done(r, 0, cp[1].slot, cp[1].gen, 0); /* already landed */
	fsr_copy_done(r, 0, free_slot, 0, 0);          /* FREE */
	fsr_copy_done(r, 0, free_slot, 1, 0);
	fsr_copy_done(r, 0, 3, cp[0].gen, 0); /* no such slot */
	fsr_copy_done(r, 0, UINT32_MAX, cp[0].gen, 0);
	fsr_copy_done(r, 1, cp[0].slot, cp[0].gen, 0); /* other card's slot is FREE */
	fsr_copy_done(r, 2, cp[0].slot, cp[0].gen, 0); /* no such card */
	fsr_copy_done(r, UINT32_MAX, 0, 1, 0);

	for (uint32_t c = 0; c < 2; c++)
		for (uint32_t s = 0; s < 3; s++)
			fsr_slot_info(r, c, s, &after[c][s]);
	cr_assert_arr_eq(before, after, sizeof(before));
	cr_assert_arr_eq(&kb, &K, sizeof(K));
	cr_assert_eq(state_of(r, 0, cp[0].slot), FSR_LOADING);
	ok(r);
	fsr_copy_done(r, 0, cp[0].slot, cp[0].gen, 0);
	cr_assert_eq(state_of(r, 0, cp[0].slot), FSR_RESIDENT);
	ok(r);
	fsr_destroy(r);
}

Test(fsr, max_inflight)
{
	struct fsr_config c = mkcfg(1, 8, 1, 8);
	c.max_inflight = 2;
	struct fsr *r = fsr_create(&c);
	cr_assert_not_null(r);
	fsr_client_add(r, 0);
	struct fsr_copy cp[8];
	for (uint32_t e = 0; e < 5; e++)
		predict(r, 0, 0, e, 0);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 0), 2);
	cr_assert_eq(fsr_take_copies(r, 0, cp + 2, 8, 0), 0);
	fsr_copy_done(r, 0, cp[0].slot, cp[0].gen, 0);
	cr_assert_eq(fsr_take_copies(r, 0, cp + 2, 8, 0), 1);
	cr_assert_eq(cp[2].expert, 2); /* FIFO */
	fsr_copy_done(r, 0, cp[1].slot, cp[1].gen, 0);
	fsr_copy_done(r, 0, cp[2].slot, cp[2].gen, 0);
	cr_assert_eq(fsr_take_copies(r, 0, cp + 3, 1, 0), 1); /* caller's max */
	cr_assert_eq(cp[3].expert, 3);
	cr_assert_eq(fsr_take_copies(r, 0, cp + 4, 8, 0), 1);
	cr_assert_eq(cp[4].expert, 4);
	ok(r);
	fsr_destroy(r);
}

Test(fsr, eviction_is_lru)
{
	struct fsr *r = mk(1, 3, 1, 8);
	uint32_t s0 = load(r, 0, 0, 0), s1 = load(r, 0, 1, 0), s2 = load(r, 0, 2, 0);
	use(r, 0, 0, 0, 1, 0); /* touch expert 0: LRU order is now 1, 2, 0 */
	struct fsr_copy cp[4];
	predict(r, 0, 0, 3, 0);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 0); /* no FREE slot: evict, wait */
	cr_assert_eq(K.card[0][FS_CC_evicted], 1);
	cr_assert_eq(state_of(r, 0, s1), FSR_RETIRING);
	cr_assert_eq(state_of(r, 0, s0), FSR_RESIDENT);
	cr_assert_eq(state_of(r, 0, s2), FSR_RESIDENT);
	cr_assert_eq(fsr_lookup(r, 0, 0, 1), FSR_NONE);
	cr_assert_eq(fsr_dirty(r), 1);
	cr_assert_eq(K.card[0][FS_CC_resident], 2);
	/* Waiting for the grace period does not evict more. */
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 0);
	cr_assert_eq(K.card[0][FS_CC_evicted], 1);

	/* A duplicate prediction touches too: order 0, 2 -> touch 0 -> 2, 0. */
	predict(r, 0, 0, 0, 0);
	predict(r, 0, 0, 4, 0); /* two wants pending now, one slot retiring */
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 0);
	cr_assert_eq(K.card[0][FS_CC_evicted], 2);
	cr_assert_eq(state_of(r, 0, s2), FSR_RETIRING);
	cr_assert_eq(state_of(r, 0, s0), FSR_RESIDENT);

	uint64_t tbl[8];
	publish_idle(r, tbl);
	cr_assert_eq(fsr_reclaim(r), 2); /* client 0 holds nothing */
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 2);
	cr_assert_eq(cp[0].expert, 3);
	cr_assert_eq(cp[1].expert, 4);
	ok(r);
	fsr_destroy(r);
}

Test(fsr, eviction_spares_current_window)
{
	/* Client 1 touched slot X in its current window; client 0 touched Y
	 * later but has moved on since: Y goes first although X is older. */
	struct fsr *r = mk(1, 2, 1, 8);
	cr_assert_eq(fsr_client_add(r, 1), 0);
	uint32_t x = load(r, 0, 0, 5), y = load(r, 0, 1, 5);
	rec(r, 1, FS_REC_USAGE, FS_USE_HIT, 0, 0, 0, 100); /* client 1, window 100: X */
	use(r, 0, 0, 1, 1, 5);                             /* client 0, window 5: Y */
	rec(r, 0, FS_REC_WIN_END, 0, FS_CARD_NONE, 0, 0, 6);
	predict(r, 0, 0, 2, 6);
	struct fsr_copy cp[2];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 2, 0), 0);
	cr_assert_eq(state_of(r, 0, y), FSR_RETIRING);
	cr_assert_eq(state_of(r, 0, x), FSR_RESIDENT);
	/* When only protected slots are left, the LRU one goes anyway. */
	uint64_t tbl[8];
	publish_idle(r, tbl);
	cr_assert_eq(fsr_reclaim(r), 1);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 2, 0), 1);
	fsr_copy_done(r, 0, cp[0].slot, cp[0].gen, 0); /* expert 2, client 0's window 6 */
	predict(r, 0, 0, 3, 6);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 2, 0), 0);
	cr_assert_eq(state_of(r, 0, x), FSR_RETIRING);
	cr_assert_eq(state_of(r, 0, cp[0].slot), FSR_RESIDENT);
	ok(r);
	fsr_destroy(r);
}

Test(fsr, eviction_bounded_by_wants)
{
	struct fsr *r = mk(1, 6, 1, 16);
	for (uint32_t e = 0; e < 6; e++)
		load(r, 0, e, 0);
	predict(r, 0, 0, 10, 0);
	predict(r, 0, 0, 11, 0);
	struct fsr_copy cp[8];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 8, 0), 0);
	cr_assert_eq(K.card[0][FS_CC_evicted], 2);
	cr_assert_eq(K.card[0][FS_CC_resident], 4);
	for (uint32_t e = 0; e < 6; e++)
		cr_assert_eq(fsr_lookup(r, 0, 0, e) == FSR_NONE, e < 2, "expert %u", e);
	ok(r);
	fsr_destroy(r);
}

Test(fsr, gen_changes_on_every_reuse)
{
	struct fsr *r = mk(1, 1, 1, 16);
	uint64_t tbl[16], prev = 0;
	uint32_t last_gen = 0;
	for (uint32_t e = 0; e < 12; e++) {
		predict(r, 0, 0, e, 0);
		struct fsr_copy cp;
		if (e > 0) {
			cr_assert_eq(fsr_take_copies(r, 0, &cp, 1, 0), 0); /* evicts e - 1 */
			publish_idle(r, tbl);
			cr_assert_eq(fsr_reclaim(r), 1);
		}
		cr_assert_eq(fsr_take_copies(r, 0, &cp, 1, 0), 1);
		cr_assert_eq(cp.slot, 0);
		cr_assert_eq(cp.gen, last_gen + 1);
		last_gen = cp.gen;
		fsr_copy_done(r, 0, 0, cp.gen, 0);
		fsr_fill(r, tbl);
		cr_assert_eq(tbl[e], FS_ENTRY(0, cp.gen));
		cr_assert_neq(tbl[e], prev);
		prev = tbl[e];
	}
	ok(r);
	fsr_destroy(r);
}

/* ---- epochs and the grace period -------------------------------------- */

/* One slot holding expert 0, published in epoch 1, then evicted for expert
 * 1: the slot retires in epoch 2. */
static struct fsr *retire_setup(uint64_t *tbl)
{
	struct fsr *r = mk(1, 1, 1, 4);
	uint32_t s = load(r, 0, 0, 0);
	cr_assert_eq(s, 0);
	publish(r, tbl);
	predict(r, 0, 0, 1, 0);
	struct fsr_copy cp;
	cr_assert_eq(fsr_take_copies(r, 0, &cp, 1, 0), 0);
	struct fsr_slot_info si;
	fsr_slot_info(r, 0, 0, &si);
	cr_assert_eq(si.state, FSR_RETIRING);
	cr_assert_eq(si.retire, 2);
	return r;
}

Test(fsr, retire_waits_for_publish)
{
	uint64_t tbl[4];
	struct fsr *r = retire_setup(tbl);
	uint64_t none[FS_MAX_HOLDS] = {0};
	fsr_client_holds(r, 0, none);
	cr_assert_eq(fsr_reclaim(r), 0); /* epoch 2 not published: epoch 1 can still be acquired */
	cr_assert_eq(state_of(r, 0, 0), FSR_RETIRING);
	publish(r, tbl);
	cr_assert_eq(tbl[0], FS_ENTRY_NONE);
	/* Holds read before the publish prove nothing about epoch 1. */
	cr_assert_eq(fsr_reclaim(r), 0);
	fsr_client_holds(r, 0, none);
	cr_assert_eq(fsr_reclaim(r), 1);
	cr_assert_eq(state_of(r, 0, 0), FSR_FREE);
	struct fsr_copy cp;
	cr_assert_eq(fsr_take_copies(r, 0, &cp, 1, 0), 1);
	cr_assert_eq(cp.expert, 1);
	cr_assert_eq(cp.gen, 2);
	ok(r);
	fsr_destroy(r);
}

Test(fsr, old_hold_blocks_release_unblocks)
{
	uint64_t tbl[4];
	struct fsr *r = retire_setup(tbl);
	uint64_t h[FS_MAX_HOLDS] = {0};
	h[3] = 1;
	publish(r, tbl);
	cr_assert_eq(fsr_client_holds(r, 0, h), 0);
	cr_assert_eq(fsr_epoch_held(r, 1), 1);
	cr_assert_eq(fsr_epoch_held(r, 2), 0);
	cr_assert_eq(fsr_min_hold(r), 1);
	cr_assert_eq(K.client[0][FS_CCL_holds], 1);
	cr_assert_eq(fsr_reclaim(r), 0);
	struct fsr_copy cp;
	cr_assert_eq(fsr_take_copies(r, 0, &cp, 1, 0), 0);
	cr_assert_eq(state_of(r, 0, 0), FSR_RETIRING);
	/* Acquiring epoch 2 beside it does not help; releasing 1 does. */
	h[0] = 2;
	fsr_client_holds(r, 0, h);
	cr_assert_eq(fsr_reclaim(r), 0);
	h[3] = 0;
	fsr_client_holds(r, 0, h);
	cr_assert_eq(fsr_min_hold(r), 2);
	cr_assert_eq(fsr_reclaim(r), 1);
	cr_assert_eq(fsr_take_copies(r, 0, &cp, 1, 0), 1);
	ok(r);
	fsr_destroy(r);
}

/*
 * Issue 33: an old hold pins only the slots of the tables its client can
 * read: those of its epochs and, up to its reach, the newer ones
 * (fs_lookup_live).  Slot A holds expert 0 in epoch 1, which client 1
 * holds; B, loaded after it (epoch 2), is evicted and retires in epoch 3:
 * it was in no table client 1 read, so it is free at once, unless client 1
 * said it read epoch 2 (reach 2) or said nothing (reach 0, a library that
 * does not store it: every newer table).  A, in epoch 1's table, waits
 * for the release whatever the reach.
 */
static void pins_case(uint64_t reach, unsigned freed_b)
{
	struct fsr *r = mk(1, 2, 1, 8);
	cr_assert_eq(fsr_client_add(r, 1), 0);
	uint64_t tbl[8], none[FS_MAX_HOLDS] = {0}, h[FS_MAX_HOLDS] = {0};
	uint32_t a = load(r, 0, 0, 1);
	publish(r, tbl); /* epoch 1: A */
	h[0] = 1;
	fsr_client_holds(r, 0, none);
	fsr_client_holds(r, 1, h);
	uint32_t b = load(r, 0, 1, 1);
	publish(r, tbl); /* epoch 2: A, B */
	fsr_client_reach(r, 1, reach);
	use(r, 0, 0, 0, 1, 1); /* A touched: B is the LRU one */
	predict(r, 0, 0, 2, 1);
	struct fsr_copy cp;
	cr_assert_eq(fsr_take_copies(r, 0, &cp, 1, 0), 0); /* evicts B for expert 2 */
	cr_assert_eq(state_of(r, 0, b), FSR_RETIRING);
	publish(r, tbl); /* epoch 3: A */
	fsr_client_holds(r, 0, none);
	fsr_client_holds(r, 1, h);
	uint32_t c1 = 1, both[2] = {0, 1};
	cr_assert_eq(fsr_pinned(r, 0, &c1, 1, 1), 1u - freed_b, "reach %llu: pinned",
		     (unsigned long long)reach);
	/* B was evicted for client 0's want: not a cost to others of 0 and 1. */
	cr_assert_eq(fsr_pinned(r, 0, both, 2, 1), 0u);
	cr_assert_eq(fsr_pinned(r, 0, both, 2, 0), 1u - freed_b);
	cr_assert_eq(fsr_reclaim(r), freed_b, "reach %llu", (unsigned long long)reach);
	cr_assert_eq(state_of(r, 0, b), freed_b ? FSR_FREE : FSR_RETIRING);
	ok(r);
	/* A, in the held table, is kept whatever the reach. */
	if (freed_b) {
		cr_assert_eq(fsr_take_copies(r, 0, &cp, 1, 0), 1); /* expert 2 into B */
		fsr_copy_done(r, 0, cp.slot, cp.gen, 0);
		use(r, 0, 0, 2, 1, 1);
		predict(r, 0, 0, 3, 1);
		cr_assert_eq(fsr_take_copies(r, 0, &cp, 1, 0), 0); /* evicts A */
		cr_assert_eq(state_of(r, 0, a), FSR_RETIRING);
		publish(r, tbl);
		fsr_client_holds(r, 0, none);
		fsr_client_holds(r, 1, h);
		cr_assert_eq(fsr_pinned(r, 0, &c1, 1, 1), 1);
		cr_assert_eq(fsr_reclaim(r), 0);
		h[0] = 0; /* the release */
		fsr_client_holds(r, 1, h);
		cr_assert_eq(fsr_pinned(r, 0, &c1, 1, 1), 0);
		cr_assert_eq(fsr_reclaim(r), 1);
		ok(r);
	}
	fsr_destroy(r);
}

Test(fsr, old_hold_pins_only_the_tables_it_reads)
{
	pins_case(1, 1); /* read epoch 1 only: B goes at once */
	pins_case(2, 0); /* read epoch 2's table too (fs_lookup_live): B is kept */
	pins_case(0, 0); /* said nothing: every newer table, as before */
}

Test(fsr, client_remove_unblocks)
{
	uint64_t tbl[4];
	struct fsr *r = retire_setup(tbl);
	uint64_t h[FS_MAX_HOLDS] = {1};
	publish(r, tbl);
	fsr_client_holds(r, 0, h);
	cr_assert_eq(fsr_reclaim(r), 0);
	fsr_client_remove(r, 0);
	cr_assert_eq(K.client[0][FS_CCL_holds], 0);
	cr_assert_eq(fsr_epoch_held(r, 1), 0);
	cr_assert_eq(fsr_min_hold(r), UINT64_MAX);
	cr_assert_eq(fsr_reclaim(r), 1);
	/* Its wants stayed: expert 1 is copied. */
	struct fsr_copy cp;
	cr_assert_eq(fsr_take_copies(r, 0, &cp, 1, 0), 1);
	cr_assert_eq(cp.expert, 1);
	/* A removed client's holds are no longer taken. */
	cr_assert_eq(fsr_client_holds(r, 0, h), 0);
	cr_assert_eq(fsr_min_hold(r), UINT64_MAX);
	fsr_client_remove(r, 0); /* twice: harmless */
	cr_assert_eq(fsr_client_add(r, 0), 0);
	cr_assert_eq(fsr_min_hold(r), UINT64_MAX);
	ok(r);
	fsr_destroy(r);
}

Test(fsr, bad_holds_ignored)
{
	uint64_t tbl[4];
	struct fsr *r = retire_setup(tbl); /* published 1 */
	uint64_t h[FS_MAX_HOLDS] = {0, 5, 1, 2, UINT64_MAX, 0, 0, 0};
	cr_assert_eq(fsr_client_holds(r, 0, h), 3);
	cr_assert_eq(K.daemon[FS_C_bad_holds], 3);
	cr_assert_eq(K.client[0][FS_CCL_holds], 1);
	cr_assert_eq(fsr_min_hold(r), 1);
	cr_assert_eq(fsr_epoch_held(r, 5), 0);
	cr_assert_eq(fsr_epoch_held(r, 2), 0);
	cr_assert_eq(fsr_epoch_held(r, 0), 0);
	/* After epoch 2 is published, 2 is a real hold; 5 still is not. */
	publish(r, tbl);
	cr_assert_eq(fsr_client_holds(r, 0, h), 2);
	cr_assert_eq(K.daemon[FS_C_bad_holds], 5);
	cr_assert_eq(fsr_epoch_held(r, 2), 1);
	h[2] = 0; /* epoch 1 released; 2 >= retire 2 does not block */
	fsr_client_holds(r, 0, h);
	cr_assert_eq(fsr_reclaim(r), 1);
	ok(r);
	fsr_destroy(r);
}

Test(fsr, multiple_clients)
{
	uint64_t tbl[4];
	struct fsr *r = retire_setup(tbl);
	cr_assert_eq(fsr_client_add(r, 1), 0);
	cr_assert_eq(fsr_client_add(r, 2), 0);
	cr_assert_eq(fsr_client_add(r, 1), -EEXIST);
	cr_assert_eq(fsr_client_add(r, 4), -EINVAL);
	publish(r, tbl);
	uint64_t h0[FS_MAX_HOLDS] = {2}, h1[FS_MAX_HOLDS] = {2, 1}, h2[FS_MAX_HOLDS] = {0};
	fsr_client_holds(r, 0, h0);
	fsr_client_holds(r, 1, h1);
	fsr_client_holds(r, 2, h2);
	fsr_client_holds(r, 3, h1); /* row 3 is not attached: ignored */
	cr_assert_eq(fsr_min_hold(r), 1);
	cr_assert_eq(fsr_reclaim(r), 0);
	h1[1] = 0;
	fsr_client_holds(r, 1, h1);
	cr_assert_eq(fsr_reclaim(r), 1);
	ok(r);

	/* A client (re)attached holds what it holds: it blocks until its holds
	 * are passed in after the retire epoch's publish. */
	struct fsr_copy cp;
	cr_assert_eq(fsr_take_copies(r, 0, &cp, 1, 0), 1);
	fsr_copy_done(r, 0, cp.slot, cp.gen, 0);
	predict(r, 0, 0, 2, 0);
	cr_assert_eq(fsr_take_copies(r, 0, &cp, 1, 0), 0); /* evicts expert 1, retire 3 */
	fsr_client_remove(r, 2);
	cr_assert_eq(fsr_client_add(r, 2), 0);
	publish(r, tbl);
	uint64_t z[FS_MAX_HOLDS] = {0};
	fsr_client_holds(r, 0, z);
	fsr_client_holds(r, 1, z);
	cr_assert_eq(fsr_reclaim(r), 0); /* client 2 not re-read since epoch 3 */
	fsr_client_holds(r, 2, z);
	cr_assert_eq(fsr_reclaim(r), 1);
	ok(r);

	/* An engine may map its region and acquire before the daemon adds it:
	 * a client added after the publish blocks until its holds are read. */
	cr_assert_eq(fsr_take_copies(r, 0, &cp, 1, 0), 1); /* expert 2 */
	fsr_copy_done(r, 0, cp.slot, cp.gen, 0);
	publish(r, tbl); /* epoch 4 maps expert 2 */
	predict(r, 0, 0, 3, 0);
	cr_assert_eq(fsr_take_copies(r, 0, &cp, 1, 0), 0); /* evicts expert 2, retire 5 */
	publish(r, tbl);
	for (uint32_t c = 0; c < 3; c++)
		fsr_client_holds(r, c, z);
	cr_assert_eq(fsr_client_add(r, 3), 0);
	cr_assert_eq(fsr_reclaim(r), 0);
	uint64_t h3[FS_MAX_HOLDS] = {4};
	fsr_client_holds(r, 3, h3);
	cr_assert_eq(fsr_reclaim(r), 0);
	h3[0] = 0;
	fsr_client_holds(r, 3, h3);
	cr_assert_eq(fsr_reclaim(r), 1);
	ok(r);
	fsr_destroy(r);
}

/* ---- wants ------------------------------------------------------------- */

Test(fsr, stale_wants)
{
	struct fsr *r = mk(1, 4, 1, 8); /* want_max_age 2 */
	predict(r, 0, 0, 1, 10);
	predict(r, 0, 0, 2, 11);
	rec(r, 0, FS_REC_WIN_END, 0, FS_CARD_NONE, 0, 0, 13); /* 1 is 3 windows old, 2 is 2 */
	struct fsr_copy cp[4];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 1);
	cr_assert_eq(cp[0].expert, 2);
	cr_assert_eq(K.card[0][FS_CC_dropped], 1);
	/* An older window number later does not move the newest back. */
	rec(r, 0, FS_REC_WIN_END, 0, FS_CARD_NONE, 0, 0, 3);
	predict(r, 0, 0, 3, 3);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 0);
	cr_assert_eq(K.card[0][FS_CC_dropped], 2);
	ok(r);
	fsr_destroy(r);
}

Test(fsr, stale_wants_window_wrap)
{
	struct fsr *r = mk(1, 4, 1, 8);
	predict(r, 0, 0, 4, UINT32_MAX);
	predict(r, 0, 0, 5, UINT32_MAX - 1);
	rec(r, 0, FS_REC_WIN_END, 0, FS_CARD_NONE, 0, 0, 1); /* 4 is 2 old, 5 is 3 old */
	struct fsr_copy cp[4];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 1);
	cr_assert_eq(cp[0].expert, 4);
	cr_assert_eq(K.card[0][FS_CC_dropped], 1);
	ok(r);
	fsr_destroy(r);
}

Test(fsr, stale_per_client)
{
	/* A want is aged by its own client's windows, not another client's
	 * numbering. */
	struct fsr *r = mk(1, 4, 1, 8);
	fsr_client_add(r, 1);
	predict(r, 0, 0, 1, 10);
	rec(r, 1, FS_REC_WIN_END, 0, FS_CARD_NONE, 0, 0, 5000);
	struct fsr_copy cp[4];
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 1);
	cr_assert_eq(cp[0].expert, 1);
	ok(r);
	fsr_destroy(r);
}

Test(fsr, want_queue_overflow)
{
	/* 1 slot: the queue holds max(1024, 2) wants. */
	struct fsr *r = mk(1, 1, 2, 1024);
	for (uint32_t i = 0; i < 1030; i++)
		predict(r, 0, i / 1024, i % 1024, 0);
	cr_assert_eq(K.card[0][FS_CC_dropped], 6);
	ok(r);
	struct fsr_copy cp;
	cr_assert_eq(fsr_take_copies(r, 0, &cp, 1, 0), 1);
	cr_assert_eq(cp.layer, 0);
	cr_assert_eq(cp.expert, 6); /* the six oldest were dropped */
	/* A dropped want can be wanted again; a queued one cannot. */
	predict(r, 0, 0, 0, 0); /* fills the queue again */
	cr_assert_eq(K.card[0][FS_CC_dropped], 6);
	predict(r, 0, 0, 1, 0); /* full: the oldest, (0, 7), goes */
	cr_assert_eq(K.card[0][FS_CC_dropped], 7);
	predict(r, 0, 0, 7, 0); /* wanted again; (0, 8) goes */
	cr_assert_eq(K.card[0][FS_CC_dropped], 8);
	predict(r, 0, 0, 9, 0); /* still queued: a duplicate */
	cr_assert_eq(K.card[0][FS_CC_dropped], 9);
	cr_assert_eq(fsr_take_copies(r, 0, &cp, 1, 0), 0); /* the slot is LOADING, none free */
	ok(r);
	fsr_destroy(r);
}

Test(fsr, home_card_from_usage)
{
	struct fsr *r = mk(2, 8, 4, 4);
	struct fsr_copy cp[4];
	/* Default home: layer * cards / layers: layers 0,1 -> card 0; 2,3 -> 1. */
	predict(r, FS_CARD_NONE, 0, 1, 0);
	predict(r, FS_CARD_NONE, 3, 1, 0);
	cr_assert_eq(K.card[0][FS_CC_predicted], 1);
	cr_assert_eq(K.card[1][FS_CC_predicted], 1);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 1);
	cr_assert_eq(cp[0].layer, 0);
	cr_assert_eq(fsr_take_copies(r, 1, cp, 4, 0), 1);
	cr_assert_eq(cp[0].layer, 3);
	/* Layer 0 is seen running on card 1 now. */
	use(r, 1, 0, 3, 0, 0);
	predict(r, FS_CARD_NONE, 0, 2, 0);
	cr_assert_eq(K.card[1][FS_CC_predicted], 2);
	cr_assert_eq(fsr_take_copies(r, 0, cp, 4, 0), 0);
	cr_assert_eq(fsr_take_copies(r, 1, cp, 4, 0), 2); /* the miss, then the prediction */
	cr_assert_eq(cp[0].expert, 3);
	cr_assert_eq(cp[1].expert, 2);
	/* A CPU-path usage (no card) does not move the home. */
	use(r, FS_CARD_NONE, 0, 0, 0, 0);
	cr_assert_eq(K.card[1][FS_CC_misses], 2);
	predict(r, FS_CARD_NONE, 0, 1, 0); /* LOADING on card 0, but the home is card 1 */
	cr_assert_eq(fsr_take_copies(r, 1, cp, 4, 0), 2);
	ok(r);
	fsr_destroy(r);
}

/* ---- adversarial interleaving ------------------------------------------ */

/* The adversarial loop's assertions: cr_assert's count of passed
 * assertions would cost more than the whole run, so only a failure calls
 * into criterion.  Both name the seed and step. */
static uint64_t g_seed;
static unsigned g_step;
#define MUST(cond)                                                                                          \
	do {                                                                                                \
		if (!(cond))                                                                                \
			cr_assert_fail("seed %llu step %u: %s", (unsigned long long)g_seed, g_step, #cond); \
	} while (0)
#define MUSTF(cond, ...)                             \
	do {                                         \
		if (!(cond))                         \
			cr_assert_fail(__VA_ARGS__); \
	} while (0)

#define AC 2u  /* cards */
#define AL 3u  /* layers */
#define AE 8u  /* experts */
#define ACL 4u /* clients */
#define AT (AC * AL * AE)
#define ASTEPS 20000u
#define ASEEDS 50u
#define GARBAGE_HOLD (FS_MAX_HOLDS - 1) /* the index a client scribbles on */

static const uint32_t aslots[AC] = {6, 3};

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

enum { C_IDLE, C_READ, C_WROTE };

struct mclient {
	int live;
	int phase;    /* acquire in progress: C_READ (read current), C_WROTE (hold written) */
	unsigned k;   /* hold index of the acquire in progress */
	uint64_t cur; /* the `current` it read */
	uint64_t region[FS_MAX_HOLDS];
	int in_use[FS_MAX_HOLDS]; /* acquire confirmed: the engine uses this epoch's table */
	uint32_t window;
	/* fs_lookup_live: a declared library stores its reach before reading
	 * the newest table through a hold (fs_regions.h); an undeclared one
	 * (reach 0) reads it at once, as before. */
	int declared;
	uint64_t reach;                 /* the word in its region */
	uint64_t live_ep[FS_MAX_HOLDS]; /* the newest table it read through hold k, 0: none */
	int lphase;                     /* 1: reach stored, current not re-checked yet */
	unsigned lk;
	uint64_t lcur;
};

struct model {
	struct fsr *r;
	uint64_t *tables; /* [epoch][AT] */
	uint64_t cap;
	struct mclient cl[ACL];
	struct fsr_copy out[64];
	unsigned nout;
	uint32_t last_gen[AC][8];
	uint64_t copies, evictions_seen, reclaimed, acquired, failed_rechecks, bogus, live_reads;
	uint64_t tier_slots[FSR_NTIERS], promoted, too_late;
};

static const uint64_t *table_of(const struct model *m, uint64_t epoch)
{
	MUST(epoch >= 1 && epoch <= fsr_epoch(m->r));
	return m->tables + epoch * AT;
}

/* The distinct epochs that live clients use now. */
static unsigned epochs_in_use(const struct model *m, uint64_t *e)
{
	unsigned n = 0;
	for (unsigned c = 0; c < ACL; c++) {
		if (!m->cl[c].live)
			continue;
		for (unsigned k = 0; k < FS_MAX_HOLDS; k++) {
			if (!m->cl[c].in_use[k])
				continue;
			for (int live = 0; live < 2; live++) {
				uint64_t ep = live ? m->cl[c].live_ep[k] : m->cl[c].region[k];
				unsigned j = 0;
				while (j < n && e[j] != ep)
					j++;
				if (j == n && ep)
					e[n++] = ep;
			}
		}
	}
	return n;
}

/* Is (card, slot) mapped by an epoch that a live client uses? */
static int slot_in_use(const struct model *m, uint32_t card, uint32_t slot)
{
	uint64_t e[2 * ACL * FS_MAX_HOLDS];
	unsigned n = epochs_in_use(m, e);
	for (unsigned j = 0; j < n; j++) {
		const uint64_t *t = table_of(m, e[j]) + card * AL * AE;
		for (unsigned i = 0; i < AL * AE; i++)
			if (t[i] != FS_ENTRY_NONE && FS_ENTRY_SLOT(t[i]) == slot)
				return 1;
	}
	return 0;
}

static void check_invariants(struct model *m, uint64_t seed, unsigned step)
{
	struct fsr *r = m->r;
	int rc = fsr_check(r);
	MUSTF((rc) == (0), "seed %llu step %u: fsr_check line %d", (unsigned long long)seed, step, -rc);

	/* Every epoch in use still describes its slots: none of them was
	 * handed out again (the gen would differ) or freed. */
	uint64_t ep[2 * ACL * FS_MAX_HOLDS];
	unsigned nep = epochs_in_use(m, ep);
	for (unsigned j = 0; j < nep; j++) {
		const uint64_t *t = table_of(m, ep[j]);
		for (unsigned i = 0; i < AT; i++) {
			if (t[i] == FS_ENTRY_NONE)
				continue;
			struct fsr_slot_info si;
			MUST((fsr_slot_info(r, i / (AL * AE), FS_ENTRY_SLOT(t[i]), &si)) == (0));
			MUSTF(si.state != FSR_FREE && si.gen == FS_ENTRY_GEN(t[i]),
			      "seed %llu step %u: epoch %llu in use maps card %u slot %u gen %u, now state %d "
			      "gen %u",
			      (unsigned long long)seed, step, (unsigned long long)ep[j], i / (AL * AE),
			      FS_ENTRY_SLOT(t[i]), FS_ENTRY_GEN(t[i]), si.state, si.gen);
		}
	}

	/* The working table: one slot per (layer, expert), one (layer, expert)
	 * per slot, exactly the LOADING and RESIDENT slots; no slot lost. */
	uint64_t t[AT];
	fsr_fill(r, t);
	for (uint32_t card = 0; card < AC; card++) {
		int seen[8] = {0};
		unsigned mapped = 0, n[4] = {0};
		for (unsigned i = 0; i < AL * AE; i++) {
			uint64_t e = t[card * AL * AE + i];
			if (e == FS_ENTRY_NONE)
				continue;
			uint32_t s = FS_ENTRY_SLOT(e);
			MUST((s) < (aslots[card]));
			MUSTF((seen[s]) == (0), "seed %llu step %u: card %u slot %u mapped twice",
			      (unsigned long long)seed, step, card, s);
			seen[s] = 1;
			mapped++;
			struct fsr_slot_info si;
			fsr_slot_info(r, card, s, &si);
			MUST(si.state == FSR_LOADING || si.state == FSR_RESIDENT);
			MUST((si.layer * AE + si.expert) == (i));
			MUST((si.gen) == (FS_ENTRY_GEN(e)));
		}
		for (uint32_t s = 0; s < aslots[card]; s++) {
			struct fsr_slot_info si;
			fsr_slot_info(r, card, s, &si);
			MUST((si.state) <= (FSR_RETIRING));
			n[si.state]++;
			if (si.state == FSR_LOADING || si.state == FSR_RESIDENT)
				MUST((t[card * AL * AE + si.layer * AE + si.expert]) ==
				     (FS_ENTRY(s, si.gen)));
		}
		MUST((n[0] + n[1] + n[2] + n[3]) == (aslots[card]));
		MUST((mapped) == (n[FSR_LOADING] + n[FSR_RESIDENT]));
		MUST((K.card[card][FS_CC_loading]) == (n[FSR_LOADING]));
		MUST((K.card[card][FS_CC_resident]) == (n[FSR_RESIDENT]));
	}
}

static void a_publish(struct model *m)
{
	uint64_t e = fsr_epoch(m->r) + 1;
	MUST((e) < (m->cap));
	fsr_fill(m->r, m->tables + e * AT);
	MUST((fsr_publish(m->r)) == (e));
}

/* The daemon reads one client's holds (any time after the latest publish). */
static void a_read_holds(struct model *m, unsigned c)
{
	uint64_t pub = fsr_epoch(m->r);
	unsigned bad = 0;
	for (unsigned k = 0; k < FS_MAX_HOLDS; k++)
		bad += m->cl[c].region[k] > pub;
	MUST((fsr_client_holds(m->r, c, m->cl[c].region)) == (bad));
	fsr_client_reach(m->r, c, m->cl[c].reach);
}

/* One step of an fs_lookup_live through a held epoch: read current, store
 * the reach (a declared library), re-check current, then read that table
 * until the hold's release. */
static void a_live(struct model *m, uint64_t *rs, unsigned c)
{
	struct mclient *cl = &m->cl[c];
	uint64_t cur = fsr_epoch(m->r);
	if (cl->lphase == 0) {
		unsigned k0 = rnd(rs, GARBAGE_HOLD), k = GARBAGE_HOLD;
		for (unsigned i = 0; i < GARBAGE_HOLD && k == GARBAGE_HOLD; i++)
			if (cl->in_use[(k0 + i) % GARBAGE_HOLD])
				k = (k0 + i) % GARBAGE_HOLD;
		if (k == GARBAGE_HOLD)
			return;
		cl->lk = k;
		cl->lcur = cur;
		if (cl->declared && cl->reach < cur) {
			cl->reach = cur;
			cl->lphase = 1;
			return;
		}
	} else if (cur != cl->lcur) {
		cl->lphase = 0; /* a newer epoch: try again */
		return;
	}
	cl->lphase = 0;
	if (cl->in_use[cl->lk] && cl->lcur > cl->live_ep[cl->lk]) {
		cl->live_ep[cl->lk] = cl->lcur;
		m->live_reads++;
	}
}

static void a_take(struct model *m, uint64_t *rs, uint64_t seed, unsigned step)
{
	uint32_t card = rnd(rs, AC);
	struct fsr_copy cp[8];
	unsigned max = 1 + rnd(rs, 5);
	unsigned n = fsr_take_copies(m->r, card, cp, max, g_now);
	MUST((n) <= (max));
	for (unsigned i = 0; i < n; i++) {
		MUST((cp[i].card) == (card));
		MUST((cp[i].slot) < (aslots[card]));
		MUSTF(!slot_in_use(m, card, cp[i].slot),
		      "seed %llu step %u: card %u slot %u handed out while a held epoch maps it",
		      (unsigned long long)seed, step, card, cp[i].slot);
		MUST((cp[i].gen) == (m->last_gen[card][cp[i].slot] + 1));
		m->last_gen[card][cp[i].slot] = cp[i].gen;
		MUST((fsr_lookup(m->r, card, cp[i].layer, cp[i].expert)) == (cp[i].slot));
		MUST((m->nout) < (64));
		m->out[m->nout++] = cp[i];
		m->copies++;
	}
}

static void a_land(struct model *m, uint64_t *rs)
{
	if (m->nout == 0)
		return;
	unsigned i = rnd(rs, m->nout);
	struct fsr_copy cp = m->out[i];
	if (rnd(rs, 8) == 0) {
		/* A bogus completion first: nothing may change. */
		struct fsr_slot_info a[8] = {0}, b[8] = {0};
		for (uint32_t s = 0; s < aslots[cp.card]; s++)
			fsr_slot_info(m->r, cp.card, s, &a[s]);
		uint32_t slot = rnd(rs, 2) ? cp.slot : rnd(rs, aslots[cp.card] + 1);
		uint32_t gen = slot == cp.slot ? cp.gen + 1 + rnd(rs, 3) : rnd(rs, 4);
		struct fsr_slot_info si;
		if (slot < aslots[cp.card] && fsr_slot_info(m->r, cp.card, slot, &si) == 0 &&
		    si.state == FSR_LOADING && si.gen == gen)
			gen++;
		fsr_copy_done(m->r, cp.card, slot, gen, g_now);
		for (uint32_t s = 0; s < aslots[cp.card]; s++)
			fsr_slot_info(m->r, cp.card, s, &b[s]);
		MUST(memcmp(a, b, aslots[cp.card] * sizeof(a[0])) == 0);
	}
	fsr_copy_done(m->r, cp.card, cp.slot, cp.gen, g_now);
	MUST((fsr_lookup(m->r, cp.card, cp.layer, cp.expert)) == (cp.slot));
	m->out[i] = m->out[--m->nout];
}

/* One step of a client's acquire (fs_regions.h): read current; write the
 * hold; re-check current (the daemon's reads may fall anywhere between). */
static void a_acquire(struct model *m, uint64_t *rs, unsigned c)
{
	struct mclient *cl = &m->cl[c];
	uint64_t cur = fsr_epoch(m->r);
	switch (cl->phase) {
	case C_IDLE:
		if (cur == 0)
			return;
		for (unsigned k = 0, k0 = rnd(rs, GARBAGE_HOLD); k < GARBAGE_HOLD; k++) {
			unsigned kk = (k0 + k) % GARBAGE_HOLD;
			if (cl->region[kk] == 0 && !cl->in_use[kk]) {
				cl->k = kk;
				cl->cur = cur;
				cl->phase = C_READ;
				return;
			}
		}
		return;
	case C_READ:
		cl->region[cl->k] = cl->cur;
		cl->phase = C_WROTE;
		return;
	case C_WROTE:
		if (cur == cl->cur) {
			cl->in_use[cl->k] = 1;
			cl->phase = C_IDLE;
			m->acquired++;
		} else {
			cl->cur = cur; /* retry: the stale hold stays until overwritten */
			cl->phase = C_READ;
			m->failed_rechecks++;
		}
		return;
	}
}

static void a_release(struct model *m, uint64_t *rs, unsigned c)
{
	struct mclient *cl = &m->cl[c];
	for (unsigned i = 0, k0 = rnd(rs, GARBAGE_HOLD); i < GARBAGE_HOLD; i++) {
		unsigned k = (k0 + i) % GARBAGE_HOLD;
		if (cl->in_use[k]) {
			cl->in_use[k] = 0;
			cl->region[k] = 0;
			cl->live_ep[k] = 0;
			return;
		}
	}
}

static void a_record(struct model *m, uint64_t *rs, unsigned c)
{
	struct mclient *cl = &m->cl[c];
	uint32_t card = rnd(rs, 4) == 0 ? FS_CARD_NONE : rnd(rs, AC);
	uint32_t layer = rnd(rs, AL), expert = rnd(rs, AE);
	/* A skewed expert choice so that hits, duplicates and LRU matter. */
	if (rnd(rs, 2))
		expert = rnd(rs, 3);
	switch (rnd(rs, 8)) {
	case 0:
	case 1:
	case 2: {
		/* Scores and horizons vary so the tiers' orderings matter. */
		float score = (float)rnd(rs, 100) / 50.0f;
		struct fs_rec x = {
			.type = FS_REC_PREDICT,
			.aux = FS_PRED_AUX(1 + rnd(rs, 3), FS_SRC_KERNEL),
			.layer = (uint16_t)layer,
			.expert = (uint16_t)expert,
			.card = (uint16_t)card,
			.window = cl->window,
		};
		memcpy(&x.value, &score, sizeof(score));
		fsr_record(m->r, c, &x, g_now);
		break;
	}
	case 3:
	case 4:
	case 5:
	case 6: {
		int hit = card != FS_CARD_NONE && fsr_lookup(m->r, card, layer, expert) != FSR_NONE;
		if (rnd(rs, 4) == 0)
			hit = !hit;
		rec(m->r, c, FS_REC_USAGE, hit ? FS_USE_HIT : FS_USE_MISS, card, layer, expert, cl->window);
		break;
	}
	default:
		rec(m->r, c, FS_REC_WIN_END, 0, FS_CARD_NONE, 0, 0, cl->window);
		cl->window++;
		rec(m->r, c, FS_REC_WIN_BEGIN, 0, FS_CARD_NONE, 0, 0, cl->window);
		break;
	}
}

/* Tiered runs: sizes, bus, decay and profile vary by seed; the clock
 * moves forward by a random step before every action. */
static void tiered_config(struct fsr_config *cfg, uint64_t *rs)
{
	static const uint32_t sizes[] = {0, 1, 2, FSR_AUTO};
	fsr_config_tiers(cfg);
	cfg->recency_slots = rnd(rs, 5) == 0 ? FSR_ALL : sizes[rnd(rs, 4)];
	cfg->predicted_slots = sizes[rnd(rs, 4)];
	cfg->spare_slots = rnd(rs, 2) ? FSR_AUTO : rnd(rs, 3);
	cfg->adapt = rnd(rs, 4) != 0;
	cfg->cand_per_layer = 1 + rnd(rs, 6);
	cfg->freq_decay = rnd(rs, 2) ? 0.9f : 0.5f;
	cfg->bus_gbps = rnd(rs, 3) == 0 ? 0.0 : 0.5 + rnd(rs, 4); /* 1000-byte experts: 0.3..2 us */
	cfg->layer_ns = 1000 + rnd(rs, 5000);
	cfg->pred_min_score = rnd(rs, 2) ? 0.0f : 0.5f;
}

static void adversarial_seed(struct model *m, uint64_t seed, int tiered)
{
	uint64_t rs = seed * 0x2545f4914f6cdd1dull + 1;
	struct fsr_config cfg = mkcfg(AC, 0, AL, AE);
	cfg.slots[0] = aslots[0];
	cfg.slots[1] = aslots[1];
	cfg.max_inflight = 1 + rnd(&rs, 4);
	cfg.want_max_age = 1 + rnd(&rs, 3);
	if (tiered)
		tiered_config(&cfg, &rs);
	g_now = 0;
	m->r = fsr_create(&cfg);
	MUST((m->r) != NULL);
	if (tiered && rnd(&rs, 2)) {
		uint32_t counts[AL * AE];
		for (unsigned i = 0; i < AL * AE; i++)
			counts[i] = rnd(&rs, 10);
		MUST(fsr_profile_load(m->r, counts) == 0);
	}
	memset(m->cl, 0, sizeof(m->cl));
	memset(m->last_gen, 0, sizeof(m->last_gen));
	m->nout = 0;
	for (unsigned c = 0; c < 2; c++) {
		MUST((fsr_client_add(m->r, c)) == (0));
		m->cl[c].live = 1;
		m->cl[c].window = UINT32_MAX - 50 + rnd(&rs, 100);
		m->cl[c].declared = rnd(&rs, 4) != 0;
		m->cl[c].reach = m->cl[c].declared;
	}

	g_seed = seed;
	for (unsigned step = 0; step < ASTEPS; step++) {
		g_step = step;
		if (tiered)
			g_now += rnd(&rs, 3000);
		unsigned c = rnd(&rs, ACL);
		struct mclient *cl = &m->cl[c];
		unsigned a = rnd(&rs, 100);
		if (a < 30) {
			if (cl->live)
				a_record(m, &rs, c);
		} else if (a < 45) {
			a_take(m, &rs, seed, step);
		} else if (a < 57) {
			a_land(m, &rs);
		} else if (a < 63) {
			/* The daemon's publish: fill, publish, read every live
			 * client's holds (mostly), reclaim (mostly). */
			a_publish(m);
			if (rnd(&rs, 4) != 0)
				for (unsigned i = 0; i < ACL; i++)
					if (m->cl[i].live)
						a_read_holds(m, i);
			if (rnd(&rs, 4) != 0)
				m->reclaimed += fsr_reclaim(m->r);
		} else if (a < 68) {
			if (cl->live)
				a_read_holds(m, c);
		} else if (a < 72) {
			m->reclaimed += fsr_reclaim(m->r);
		} else if (a < 82) {
			/* Several phases of one acquire, or just one. */
			for (unsigned i = 0; i < 3 && cl->live; i++) {
				a_acquire(m, &rs, c);
				if (rnd(&rs, 4) == 0)
					break;
			}
		} else if (a < 86) {
			if (cl->live)
				a_live(m, &rs, c);
		} else if (a < 94) {
			if (cl->live)
				a_release(m, &rs, c);
		} else if (a < 96) {
			/* Scribble: an impossible epoch, or clear it. */
			if (cl->live) {
				uint64_t bogus = fsr_epoch(m->r) + 1 + rnd(&rs, 1000);
				cl->region[GARBAGE_HOLD] = rnd(&rs, 2) ? bogus : 0;
				m->bogus++;
			}
		} else if (a < 98) {
			/* Its death is seen: its holds are dropped. */
			if (cl->live && rnd(&rs, 3) == 0) {
				fsr_client_remove(m->r, c);
				memset(cl, 0, sizeof(*cl));
			}
		} else {
			/* Attach.  The engine may acquire only once the core
			 * knows it: holds the core has not been told of cannot
			 * keep a slot (a client added late is safe only if no
			 * reclaim ran in between; fsr/multiple_clients). */
			if (!cl->live) {
				MUST((fsr_client_add(m->r, c)) == (0));
				memset(cl, 0, sizeof(*cl));
				cl->live = 1;
				cl->window = (uint32_t)rng_next(&rs);
				cl->declared = rnd(&rs, 4) != 0;
				cl->reach = (uint64_t)cl->declared;
			} else {
				MUST((fsr_client_add(m->r, c)) == (-EEXIST));
			}
		}
		check_invariants(m, seed, step);
	}
	m->evictions_seen += K.card[0][FS_CC_evicted] + K.card[1][FS_CC_evicted];
	for (unsigned t = FSR_TIER_STATIC; t < FSR_NTIERS; t++)
		for (unsigned c = 0; c < AC; c++)
			m->tier_slots[t] += K.card[c][FS_CC_tier_static + (t - FSR_TIER_STATIC)];
	m->promoted += K.card[0][FS_CC_promoted] + K.card[1][FS_CC_promoted];
	m->too_late += K.card[0][FS_CC_too_late] + K.card[1][FS_CC_too_late];
	fsr_destroy(m->r);
	g_now = 0;
}

Test(fsr, adversarial_interleaving)
{
	struct model *m = calloc(1, sizeof(*m));
	cr_assert_not_null(m);
	m->cap = ASTEPS + 2;
	m->tables = malloc(m->cap * AT * sizeof(uint64_t));
	cr_assert_not_null(m->tables);
	for (uint64_t seed = 1; seed <= ASEEDS; seed++)
		adversarial_seed(m, seed, 0);
	cr_log_info("adversarial: %llu copies, %llu evictions, %llu reclaimed, %llu acquires, %llu failed "
		    "re-checks",
		    (unsigned long long)m->copies, (unsigned long long)m->evictions_seen,
		    (unsigned long long)m->reclaimed, (unsigned long long)m->acquired,
		    (unsigned long long)m->failed_rechecks);
	/* The run must have exercised what it claims to test. */
	cr_assert_gt(m->copies, 10000);
	cr_assert_gt(m->evictions_seen, 5000);
	cr_assert_gt(m->reclaimed, 5000);
	cr_assert_gt(m->acquired, 10000);
	cr_assert_gt(m->failed_rechecks, 100);
	cr_assert_gt(m->live_reads, 1000, "live reads %llu", (unsigned long long)m->live_reads);
	free(m->tables);
	free(m);
}

/* The same adversary against the tiers and the copy scheduler: reserved
 * sizes (fsr_check: no tier above its size, lists and counts agree), and
 * no slot that an acquired epoch maps is handed out again. */
Test(fsr, adversarial_interleaving_tiers)
{
	struct model *m = calloc(1, sizeof(*m));
	cr_assert_not_null(m);
	m->cap = ASTEPS + 2;
	m->tables = malloc(m->cap * AT * sizeof(uint64_t));
	cr_assert_not_null(m->tables);
	for (uint64_t seed = 1; seed <= ASEEDS; seed++)
		adversarial_seed(m, 1000 + seed, 1);
	cr_log_info(
		"adversarial tiers: %llu copies, %llu evictions, %llu reclaimed, %llu acquires, %llu promoted, "
		"%llu too late",
		(unsigned long long)m->copies, (unsigned long long)m->evictions_seen,
		(unsigned long long)m->reclaimed, (unsigned long long)m->acquired,
		(unsigned long long)m->promoted, (unsigned long long)m->too_late);
	cr_assert_gt(m->copies, 5000);
	cr_assert_gt(m->evictions_seen, 2000);
	cr_assert_gt(m->reclaimed, 2000);
	cr_assert_gt(m->acquired, 10000);
	cr_assert_gt(m->promoted, 100);
	cr_assert_gt(m->too_late, 100);
	for (unsigned t = FSR_TIER_STATIC; t < FSR_NTIERS; t++)
		cr_assert_gt(m->tier_slots[t], 0, "tier %s never held a slot at the end of a run",
			     fsr_tier_name(t));
	free(m->tables);
	free(m);
}
