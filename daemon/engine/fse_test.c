/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fse_test.c: the hot engine as a library, hosted by the test on a clock it
 * moves by hand, with a backend that records what it is asked.  Pins what
 * the engine alone decides: a copy's length (the core's, bounded by the
 * slot) and source (the arena index), the card-down record (reported,
 * applied, published after the next epoch, nothing submitted to it), and
 * a client's life (ATTACHED on add, DETACHED with the reason on drop, the
 * host told).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fse.h"

#define CARDS 2u
#define LAYERS 2u
#define EXPERTS 4u
#define SLOTS 4u
#define RING 512u /* more than a drain batch (FSE_BATCH, 256) */
#define SLOT_BYTES 4096u
#define BLOB 6000u /* larger than a slot: the slot bounds the copy */

struct host {
	uint64_t now;
	struct fse_copy subs[64];
	unsigned nsub;
	unsigned downs[CARDS];
	uint32_t dropped_row, dropped_reason, notes_dropped, notes_gone;
	uint64_t gone_epoch;
};

static void h_submit(void *ctx, const struct fse_copy *cp)
{
	struct host *h = ctx;
	cr_assert_lt(h->nsub, 64u);
	h->subs[h->nsub++] = *cp;
}

static void h_card_down(void *ctx, uint32_t card)
{
	struct host *h = ctx;
	h->downs[card]++;
}

static void h_notice(void *ctx, const struct fse_notice *n)
{
	struct host *h = ctx;
	if (n->kind == FSE_NOTE_DROPPED) {
		h->dropped_row = n->row;
		h->dropped_reason = n->reason;
		h->notes_dropped++;
	} else if (n->kind == FSE_NOTE_CARD_GONE) {
		h->notes_gone++;
		h->gone_epoch = n->epoch;
	}
}

static uint64_t h_clock(void *ctx)
{
	return ((struct host *)ctx)->now;
}

static struct host H;
static struct fsr *core;
static struct fse *eng;
static struct fs_daemon_hdr *dh;
static uint64_t c_daemon[FS_N_DAEMON], c_card[CARDS * FS_N_CARD], c_layer[LAYERS * FS_N_LAYER],
	c_client[2 * FS_N_CLIENT];
static struct fs_arena_entry idx[LAYERS * EXPERTS];
static _Alignas(4096) unsigned char region[4096 * 8];
static struct fs_ring_prod prod;
static uint32_t publish_us = 0, liveness_ms = 5000, hold_ms = 10000, pressure_ms = 0, dev_poll_us = 50,
		pin_pct = 0, pin_grace = 0;

static void setup(void)
{
	memset(&H, 0, sizeof(H));
	H.now = 1000000000ull;
	pin_pct = 0;
	struct fsr_config rc = {0};
	rc.cards = CARDS;
	for (uint32_t i = 0; i < CARDS; i++)
		rc.slots[i] = SLOTS;
	rc.layers = LAYERS;
	rc.experts = EXPERTS;
	rc.max_clients = 2;
	rc.uniform_bytes = BLOB;
	rc.counters = (struct fsr_counters){c_daemon, c_card, c_layer, c_client};
	fsr_config_defaults(&rc); /* tiers 0: the untiered policy, a miss is copied */
	core = fsr_create(&rc);
	cr_assert_not_null(core);
	size_t bytes = fse_region_bytes(CARDS, LAYERS, EXPERTS, 4);
	dh = aligned_alloc(64, (bytes + 63) / 64 * 64);
	cr_assert_not_null(dh);
	memset(dh, 0, bytes);
	fse_region_init(dh, CARDS, LAYERS, EXPERTS, 4);
	cr_assert_eq(fsr_set_reach(core, dh->peer_reach), 0);
	for (uint32_t i = 0; i < LAYERS * EXPERTS; i++)
		idx[i].offset = 65536ull * (i + 1);
	struct fse_config ec = {
		.cards = CARDS,
		.layers = LAYERS,
		.experts = EXPERTS,
		.max_clients = 2,
		.epoch_bufs = 4,
		.heartbeat_ms = 100,
		.slot_bytes = SLOT_BYTES,
		.dh = dh,
		.arena_index = idx,
		.core = core,
		.ctr = {c_daemon, c_card, c_layer, c_client},
		.backend = {.ctx = &H, .submit = h_submit, .card_down = h_card_down},
		.notice = h_notice,
		.host = &H,
		.clock = h_clock,
		.live = {&publish_us, &liveness_ms, &hold_ms, &pressure_ms, &dev_poll_us, &pin_pct,
			 &pin_grace},
	};
	eng = fse_create(&ec);
	cr_assert_not_null(eng);
	fse_first(eng);

	memset(region, 0, sizeof(region));
	struct fs_client_hdr *hdr = (struct fs_client_hdr *)region;
	size_t rb = fs_ring_bytes(RING), off = sizeof(struct fs_client_hdr), off_dev = 16384;
	hdr->heartbeat_ns = H.now;
	struct fse_client_in in = {.hdr = hdr, .pid = 1};
	cr_assert_eq(fs_ring_format(&in.ring, region + off, rb, RING), 0);
	cr_assert_eq(fs_ring_format(&in.dev_ring, region + off_dev, rb, RING), 0);
	cr_assert_eq(fs_ring_prod_init(&prod, region + off, rb), 0);
	strcpy(in.name, "test");
	cr_assert_eq(fse_cmd_add(eng, 0, &in), 0);
	fse_pass(eng, H.now);
	cr_assert_eq(hdr->state, (uint32_t)FS_CLIENT_ATTACHED);
	cr_assert(fse_client_active(eng, 0));
}

static void teardown(void)
{
	fse_destroy(eng);
	fsr_destroy(core);
	free(dh);
}

static void miss(uint32_t card, uint32_t layer, uint32_t expert)
{
	struct fs_rec r = {.type = FS_REC_USAGE,
			   .aux = FS_USE_MISS,
			   .layer = (uint16_t)layer,
			   .expert = (uint16_t)expert,
			   .card = (uint16_t)card,
			   .window = 1};
	cr_assert_eq(fs_ring_post(&prod, &r), 0);
}

static void passes(void)
{
	H.now += 1000000;
	((struct fs_client_hdr *)region)->heartbeat_ns = H.now;
	for (int i = 0; i < 16 && fse_pass(eng, H.now); i++)
		;
}

TestSuite(fse, .init = setup, .fini = teardown);

Test(fse, a_copy_is_the_cores_size_bounded_by_the_slot_from_the_arena_index)
{
	miss(0, 1, 2);
	passes();
	cr_assert_geq(H.nsub, 1u);
	const struct fse_copy *cp = &H.subs[0];
	cr_assert_eq(cp->core.layer, 1u);
	cr_assert_eq(cp->core.expert, 2u);
	cr_assert_eq(cp->core.bytes, (uint64_t)BLOB);
	cr_assert_eq(cp->bytes, (uint64_t)SLOT_BYTES, "bounded by the slot: %llu",
		     (unsigned long long)cp->bytes);
	cr_assert_eq(cp->src, idx[1 * EXPERTS + 2].offset);
	cr_assert_eq(cp->card, cp->core.card);
	cr_assert_eq(cp->slot, cp->core.slot);
	cr_assert_eq(cp->gen, cp->core.gen);
	/* It lands: the next epoch maps it. */
	fse_copy_landed(eng, &(struct fse_done){.card = cp->card, .slot = cp->slot, .gen = cp->gen});
	passes();
	uint64_t cur = dh->current;
	const uint64_t *e = fse_epoch_entries(dh, FS_CUR_BUF(cur));
	cr_assert_eq(e[cp->card * LAYERS * EXPERTS + 1 * EXPERTS + 2], FS_ENTRY(cp->slot, cp->gen));
}

Test(fse, a_card_down_is_one_record_applied_then_published)
{
	char why[64] = "";
	uint64_t ep = 99;
	cr_assert_eq(fse_card_down(eng, 1, "lost"), 0);
	cr_assert_eq(fse_card_down(eng, 1, "again"), -EALREADY);
	cr_assert_eq(fse_card_down(eng, CARDS, "none"), -EINVAL);
	cr_assert_eq(fse_cards_down(eng), 0x2u);
	cr_assert_eq(fse_card_state(eng, 1, why, sizeof(why), &ep), 1);
	cr_assert_str_eq(why, "lost");
	cr_assert_eq(ep, 0u, "not published yet");
	cr_assert_eq(dh->cards_down, 0u, "engines learn it only with the epoch without it");
	cr_assert_eq(fse_card_state(eng, 0, NULL, 0, NULL), 0);
	miss(1, 0, 1); /* a record naming the card that is down */
	passes();
	cr_assert_eq(H.downs[1], 1u, "the backend dropped the card's copies once");
	cr_assert_eq(H.downs[0], 0u);
	cr_assert_eq(dh->cards_down, 0x2u);
	cr_assert_eq(dh->peer_reach[1], 0u);
	cr_assert_eq(dh->peer_reach[0], 0x1u);
	cr_assert_eq(H.notes_gone, 1u);
	cr_assert_eq(fse_card_state(eng, 1, NULL, 0, &ep), 1);
	cr_assert_eq(ep, H.gone_epoch);
	cr_assert_eq(ep, FS_CUR_EPOCH(dh->current));
	for (unsigned i = 0; i < H.nsub; i++)
		cr_assert_neq(H.subs[i].card, 1u, "a copy went to the card that is down");
	uint32_t unpub, applied = fse_cards_applied(eng, &unpub);
	cr_assert_eq(applied, 0x2u);
	cr_assert_eq(unpub, 0u);
}

Test(fse, a_dropped_client_is_detached_with_its_reason_and_the_host_told)
{
	cr_assert_eq(fse_cmd_drop(eng, 0, FS_DETACH_REQUESTED), 0);
	passes();
	struct fs_client_hdr *hdr = (struct fs_client_hdr *)region;
	cr_assert_eq(hdr->state, (uint32_t)FS_CLIENT_DETACHED);
	cr_assert_eq(hdr->reason, (uint32_t)FS_DETACH_REQUESTED);
	cr_assert_eq(H.notes_dropped, 1u);
	cr_assert_eq(H.dropped_row, 0u);
	cr_assert_eq(H.dropped_reason, (uint32_t)FS_DETACH_REQUESTED);
	cr_assert_not(fse_client_active(eng, 0));
}

Test(fse, a_stale_heartbeat_drops_the_client_on_the_hosts_clock)
{
	H.now += 6000000000ull; /* past liveness_ms, heartbeat not refreshed */
	fse_pass(eng, H.now);
	cr_assert_not(fse_client_active(eng, 0));
	cr_assert_eq(H.dropped_reason, (uint32_t)FS_DETACH_STALE);
}

Test(fse, a_copy_that_waits_for_a_reclaimed_slot_goes_in_the_pass_that_reclaims_it)
{
	/* One card (the other down), its four slots resident... */
	cr_assert_eq(fse_card_down(eng, 1, "test"), 0);
	passes();
	for (uint32_t e = 0; e < SLOTS; e++)
		miss(0, e / EXPERTS, e % EXPERTS);
	passes();
	cr_assert_eq(H.nsub, SLOTS);
	for (unsigned i = 0; i < H.nsub; i++) {
		cr_assert_eq(H.subs[i].card, 0u);
		fse_copy_landed(eng,
				&(struct fse_done){.card = 0, .slot = H.subs[i].slot, .gen = H.subs[i].gen});
	}
	passes();
	unsigned before = H.nsub;
	/* ...then a miss for a fifth expert: the pass evicts a victim and
	 * publishes; no engine holds an epoch, so the same pass reclaims it
	 * and hands the copy to the backend (issue 20: it went a pass later). */
	miss(0, 1, 3);
	H.now += 1000;
	fse_pass(eng, H.now);
	cr_assert_eq(H.nsub, before + 1, "the copy waited for another pass (%u submitted)", H.nsub - before);
	cr_assert_eq(H.subs[before].card, 0u);
	cr_assert_eq(H.subs[before].core.layer, 1u);
	cr_assert_eq(H.subs[before].core.expert, 3u);
}

Test(fse, bad_records_do_not_hold_up_the_good_ones_behind_them)
{
	/* A whole drain batch (256) of records of no known type, then a
	 * miss: fs_ring_consume() takes the batch and returns none of it,
	 * which ended the ring's drain; the miss waited for the next pass. */
	for (uint32_t i = 0; i < 256; i++) {
		struct fs_rec r = {.type = 99, .window = 1};
		cr_assert_eq(fs_ring_post(&prod, &r), 0);
	}
	miss(0, 1, 2);
	H.now += 1000;
	((struct fs_client_hdr *)region)->heartbeat_ns = H.now;
	fse_pass(eng, H.now);
	cr_assert_eq(c_daemon[FS_C_bad_records], 256u);
	cr_assert_eq(c_daemon[FS_C_records], 1u, "the miss behind the bad records waited for another pass");
	cr_assert_eq(H.nsub, 1u);
	cr_assert_eq(H.subs[0].core.layer, 1u);
	cr_assert_eq(H.subs[0].core.expert, 2u);
}

/* Land every copy submitted since `from`; returns the new count. */
static unsigned land_all(unsigned from)
{
	for (unsigned i = from; i < H.nsub; i++)
		fse_copy_landed(eng, &(struct fse_done){.card = H.subs[i].card,
							.slot = H.subs[i].slot,
							.gen = H.subs[i].gen});
	return H.nsub;
}

/* A new epoch: a miss on card 0 for the (layer, expert) numbered x, copied,
 * landed (a resident one is copied again once evicted: x cycles). */
static uint64_t next_epoch(uint32_t x)
{
	unsigned n = H.nsub;
	uint64_t before = FS_CUR_EPOCH(dh->current);
	miss(0, (x / EXPERTS) % LAYERS, x % EXPERTS);
	passes();
	land_all(n);
	passes();
	cr_assert_gt(FS_CUR_EPOCH(dh->current), before, "no new epoch for x %u", x);
	return FS_CUR_EPOCH(dh->current);
}

/*
 * Issue 33: a hold word is checked when read.  A value new to the word
 * must be the epoch current now or when the holds were last read, in a
 * buffer; anything else is refused at once (read as 0 while the word keeps
 * it), counted, and the client's region says which value and why.  Before,
 * a word naming a future epoch counted from that epoch's publish on and
 * was honoured for the whole hold timeout.
 */
Test(fse, a_hold_on_an_epoch_the_client_did_not_acquire_is_refused_at_once_and_said_why)
{
	struct fs_client_hdr *hdr = (struct fs_client_hdr *)region;
	uint64_t cur = next_epoch(0);
	cr_assert_geq(cur, 2u);
	/* The future: in no buffer now, and still refused once it exists. */
	hdr->holds[0] = cur + 1;
	passes();
	cr_assert_eq(hdr->holds_refused, 1u);
	cr_assert_eq(hdr->refused_epoch, cur + 1);
	cr_assert_eq(hdr->refused_why, (uint32_t)FS_HOLD_NO_BUFFER);
	cr_assert_eq(c_daemon[FS_C_bad_holds], 1u);
	cr_assert_eq(c_client[FS_CCL_holds_refused], 1u);
	for (uint32_t x = 4; FS_CUR_EPOCH(dh->current) <= cur + 1; x++)
		next_epoch(x);
	cr_assert_eq(fsr_min_hold(core), UINT64_MAX, "a refused word came to count once its epoch existed");
	cr_assert_eq(c_client[FS_CCL_holds], 0u);
	cr_assert_eq(hdr->holds_refused, 1u, "counted once per value, not once per read");
	/* An epoch still in a buffer but superseded before the word named it:
	 * never acquired. */
	uint64_t old = FS_CUR_EPOCH(dh->current) - 1;
	hdr->holds[1] = old;
	passes();
	cr_assert_eq(hdr->holds_refused, 2u);
	cr_assert_eq(hdr->refused_epoch, old);
	cr_assert_eq(hdr->refused_why, (uint32_t)FS_HOLD_NOT_CURRENT);
	cr_assert_eq(fsr_min_hold(core), UINT64_MAX);
	/* What an acquire stores, the current epoch, counts. */
	hdr->holds[2] = FS_CUR_EPOCH(dh->current);
	passes();
	cr_assert_eq(fsr_min_hold(core), hdr->holds[2]);
	cr_assert_eq(hdr->holds_refused, 2u);
	cr_assert_eq(c_client[FS_CCL_holds], 1u);
}

/* A second client, uid 2, with a region of its own (holds only). */
static _Alignas(4096) unsigned char region2[4096 * 8];

static struct fs_client_hdr *add_second(void)
{
	memset(region2, 0, sizeof(region2));
	struct fs_client_hdr *hdr = (struct fs_client_hdr *)region2;
	size_t rb = fs_ring_bytes(RING), off = sizeof(struct fs_client_hdr), off_dev = 16384;
	hdr->heartbeat_ns = H.now;
	hdr->reach = 1; /* a library that says what it reads */
	struct fse_client_in in = {.hdr = hdr, .pid = 2, .uid = 2};
	cr_assert_eq(fs_ring_format(&in.ring, region2 + off, rb, RING), 0);
	cr_assert_eq(fs_ring_format(&in.dev_ring, region2 + off_dev, rb, RING), 0);
	strcpy(in.name, "holder");
	cr_assert_eq(fse_cmd_add(eng, 1, &in), 0);
	passes();
	cr_assert(fse_client_active(eng, 1));
	return hdr;
}

/*
 * Issue 33: what one user's holds keep from reuse for the others is
 * bounded.  Two users: client 0 (uid 0) misses, client 1 (uid 2) holds an
 * epoch and never lets go.  With pin_share_pct 50 the budget is half of
 * each user's share (two users: two slots of four) of card 0: one slot.
 * Client 0's misses evict slots of the held table for its wants, which the
 * hold pins; at the second, client 1 is revoked at once
 * (FS_DETACH_OVER_BUDGET) once past its grace, long before the hold timeout, and the slots
 * come back.  A user's holds pinning slots evicted for its own wants cost
 * no one else: client 0 holding an epoch through its own misses is not
 * revoked.
 */
Test(fse, a_users_holds_past_its_budget_revoke_the_holder_at_once)
{
	struct fs_client_hdr *own = (struct fs_client_hdr *)region;
	cr_assert_eq(fse_card_down(eng, 1, "test"), 0); /* one card of four slots */
	passes();
	for (uint32_t e = 0; e < SLOTS; e++)
		next_epoch(e); /* experts 0..3 of layer 0 resident */
	pin_pct = 50;
	struct fs_client_hdr *hdr = add_second();
	uint64_t held = FS_CUR_EPOCH(dh->current);
	hdr->holds[0] = held;
	own->holds[0] = held; /* its own wants' slots: its own to wait for */
	passes();
	cr_assert_eq(fsr_min_hold(core), held);
	/* Within the grace (pin_grace_ms: an honest window on a loaded host),
	 * over the budget but not revoked; past it, at the next check. */
	pin_grace = 60000;
	for (uint32_t e = 0; e < 2 * SLOTS + 8 && fse_client_active(eng, 1); e++) {
		if (e == 2 * SLOTS) {
			cr_assert(fse_client_active(eng, 1), "revoked within its grace");
			cr_assert_gt(c_client[FS_N_CLIENT + FS_CCL_pinned], 1u, "never over the budget");
			pin_grace = 50;
		}
		miss(0, 1, e % EXPERTS); /* layer 1: evicts a slot of the held table */
		passes();
		land_all(0);
		H.now += 20000000; /* the budget is checked every 10 ms */
		hdr->heartbeat_ns = H.now;
		passes();
	}
	cr_assert_not(fse_client_active(eng, 1), "never revoked");
	cr_assert(fse_client_active(eng, 0), "the client whose own wants its hold pinned was revoked");
	cr_assert_eq(hdr->reason, (uint32_t)FS_DETACH_OVER_BUDGET);
	cr_assert_eq(H.dropped_row, 1u);
	cr_assert_eq(H.dropped_reason, (uint32_t)FS_DETACH_OVER_BUDGET);
	cr_assert_eq(c_daemon[FS_C_over_budget], 1u);
	cr_assert_lt(H.now, 1000000000ull + (uint64_t)hold_ms * 1000000u, "not the hold timeout");
	uint32_t row = 1;
	cr_assert_eq(fsr_pinned(core, 0, &row, 1, 0), 0u);
}
