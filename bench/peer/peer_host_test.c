/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer_host_test.c: the peer path through a real foresightd on the host
 * backend (two stand-in cards whose pools are host memory, so every card
 * reads every other): one tier across the cards, fs_lookup_from answering
 * LOCAL / PEER / UNREACHABLE / MISS, the reach in the daemon header and in
 * the stats reply, and `--peer off` (each card on its own tier, the other
 * card's experts unreachable: the engine computes from the arena).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <foresight/foresight.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "fs_harness.h"

/* 4 layers on 2 cards: layers 0, 1 run on card 0, layers 2, 3 on card 1. */
static const char *const opts[] = {"--backend",    "host", "--cards",        "2",    "--layers", "4",
				   "--experts",    "16",   "--expert-bytes", "8192", "--slots",  "24",
				   "--publish-us", "0",    "--bus-gbps",     "100",  NULL};

static struct fsh_daemon D;
static fs_client *C;

static void up(int peer_off)
{
	const char *args[sizeof(opts) / sizeof(opts[0]) + 2];
	size_t n = 0;
	for (; opts[n]; n++)
		args[n] = opts[n];
	args[n++] = "--peer";
	args[n++] = peer_off ? "off" : "on";
	args[n] = NULL;
	cr_assert_eq(fsh_daemon_start(&D, args), 0, "foresightd did not start");
	struct fs_client_opts o = {.socket_path = D.sock, .name = "peer-host-test", .no_reattach = 1};
	cr_assert_eq(fs_client_open(&C, &o), 0);
}

static void down(void)
{
	fs_client_close(C);
	fsh_daemon_stop(&D);
}

/* One window in which the engine on `card` misses (layer, expert). */
static void miss(uint32_t w, uint32_t card, uint32_t layer, uint32_t expert)
{
	cr_assert_eq(fs_window_begin(C, w, 1), 0);
	cr_assert_eq(fs_post_usage(C, w, layer, expert, card, 0), 0);
	cr_assert_eq(fs_window_end(C, w), 0);
}

/* Wait (at most 5 s) until a view shows (layer, expert) as `kind` from `from`. */
static int wait_kind(uint32_t from, uint32_t layer, uint32_t expert, int kind, struct fs_place *p)
{
	uint64_t end = fsh_now_ms() + 5000;
	int k = -1;
	while (fsh_now_ms() < end) {
		struct fs_view v;
		cr_assert_eq(fs_acquire(C, &v), 0);
		k = fs_lookup_from(C, &v, from, layer, expert, p);
		fs_release(C, &v);
		if (k == kind)
			return k;
		usleep(2000);
	}
	return k;
}

static uint64_t arena_sum(uint32_t layer, uint32_t expert)
{
	struct fs_expert_blob b;
	cr_assert_eq(fs_arena_expert(C, layer, expert, &b), 0);
	cr_assert_eq(fs_checksum(b.data, b.bytes), b.checksum, "the arena itself is intact");
	return b.checksum;
}

/* The stats reply's `reads` of a card and its `copied` counter. */
static void card_stats(uint32_t card, int *nreads, double *copied)
{
	static char buf[1 << 16];
	cr_assert_eq(fsh_request(D.sock, "{\"verb\":\"stats\",\"proto\":1}", buf, sizeof(buf)), 0);
	cJSON *o = cJSON_Parse(buf);
	cr_assert_not_null(o, "stats reply is not JSON");
	cJSON *cd = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "cards"), (int)card);
	cJSON *reads = cJSON_GetObjectItem(cd, "reads");
	cr_assert(cJSON_IsArray(reads), "card %u has no `reads`", card);
	*nreads = cJSON_GetArraySize(reads);
	*copied = cJSON_GetNumberValue(cJSON_GetObjectItem(cd, "copied"));
	cJSON_Delete(o);
}

Test(peer_host, one_tier_and_reads_through_the_peer_path, .timeout = 60)
{
	up(0);
	cr_assert_eq(fs_card_reach(C, 0), 0x3u);
	cr_assert_eq(fs_card_reach(C, 1), 0x3u);
	cr_assert_eq(fs_card_reach(C, 2), 0u, "no card 2");
	cr_assert_eq(fs_peer_open(C, 0), 0x3, "host backend: card 0 reads both pools");
	cr_assert_eq(fs_peer_open(C, 5), -EINVAL);

	struct fs_place p;
	struct fs_view v;
	cr_assert_eq(fs_acquire(C, &v), 0);
	cr_assert_eq(fs_lookup_from(C, &v, 0, 3, 5, &p), FS_PLACE_MISS);
	cr_assert_eq(p.kind, FS_PLACE_MISS);
	cr_assert_eq(fs_lookup_from(C, &v, 7, 3, 5, &p), FS_PLACE_MISS, "a bad card is a miss");
	fs_release(C, &v);

	/* The engine on card 1 misses (3, 5): it lands on card 1. */
	miss(1, 1, 3, 5);
	cr_assert_eq(wait_kind(1, 3, 5, FS_PLACE_LOCAL, &p), FS_PLACE_LOCAL);
	cr_assert_eq(p.card, 1);
	/* Card 0 reads it from card 1's slot: the same bytes as the arena. */
	cr_assert_eq(wait_kind(0, 3, 5, FS_PLACE_PEER, &p), FS_PLACE_PEER);
	cr_assert_eq(p.card, 1);
	cr_assert_not_null(p.host);
	cr_assert_null(p.device);
	cr_assert_eq(p.bytes, 8192);
	cr_assert_eq(fs_checksum(p.host, p.bytes), arena_sum(3, 5), "peer read returns the expert's bytes");

	/* Card 0's engine now misses it (its epoch predated the landing) and
	 * predicts it: nothing is copied to card 0. */
	int nreads;
	double copied0, copied1;
	card_stats(0, &nreads, &copied0);
	cr_assert_eq(nreads, 1, "card 0 reads card 1 (stats)");
	card_stats(1, &nreads, &copied1);
	cr_assert_eq(copied1, 1);
	miss(2, 0, 3, 5);
	cr_assert_eq(fs_post_predict(C, 3, 3, 5, 0, 1.0f, 1, FS_SOURCE_HOST), 0);
	usleep(200000);
	cr_assert_eq(fs_acquire(C, &v), 0);
	cr_assert_eq(fs_lookup(C, &v, 0, 3, 5, NULL), 0, "not copied again to card 0");
	cr_assert_eq(fs_lookup_from(C, &v, 0, 3, 5, &p), FS_PLACE_PEER);
	fs_release(C, &v);
	double c0;
	card_stats(0, &nreads, &c0);
	cr_assert_eq(c0, copied0, "card 0 copied nothing");
	down();
}

Test(peer_host, peer_off_each_card_its_own_tier_and_the_cpu_path, .timeout = 60)
{
	up(1);
	cr_assert_eq(fs_card_reach(C, 0), 0x1u, "--peer off: own card only");
	cr_assert_eq(fs_peer_open(C, 0), 0x1);
	int nreads;
	double copied;
	card_stats(0, &nreads, &copied);
	cr_assert_eq(nreads, 0);

	miss(1, 1, 3, 5);
	struct fs_place p;
	cr_assert_eq(wait_kind(1, 3, 5, FS_PLACE_LOCAL, &p), FS_PLACE_LOCAL);
	/* Card 0 cannot read card 1: not reachable, the engine uses the arena. */
	cr_assert_eq(wait_kind(0, 3, 5, FS_PLACE_UNREACHABLE, &p), FS_PLACE_UNREACHABLE);
	cr_assert_eq(p.card, 1, "it says where the expert is");
	cr_assert_null(p.host);
	cr_assert_null(p.device);
	struct fs_expert_blob b;
	cr_assert_eq(fs_arena_expert(C, 3, 5, &b), 0);
	cr_assert_eq(fs_checksum(b.data, b.bytes), arena_sum(3, 5));
	/* Card 0 on its own tier: its misses copy to card 0 (the duplicate
	 * the rule allows when cards do not read each other).  A use moves
	 * the layer's home to card 0 at once (no one tier). */
	miss(2, 0, 3, 5);
	cr_assert_eq(wait_kind(0, 3, 5, FS_PLACE_LOCAL, &p), FS_PLACE_LOCAL);
	cr_assert_eq(p.card, 0);
	down();
}
