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
static uint32_t publish_us = 0, liveness_ms = 5000, hold_ms = 10000, pressure_ms = 0, dev_poll_us = 50;

static void setup(void)
{
	memset(&H, 0, sizeof(H));
	H.now = 1000000000ull;
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
		.live = {&publish_us, &liveness_ms, &hold_ms, &pressure_ms, &dev_poll_us},
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
