/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_peer_reader.c: `fs-fault-engine peer`, an engine that runs its layers
 * on one card and reads experts wherever the one tier holds them
 * (fs_lookup_from: LOCAL, PEER, or the CPU path), checking every byte it
 * reads against the arena.  The card-loss test (card_test.c) runs two of
 * them and takes a card down under them.
 *
 *   fs-fault-engine peer SOCKET card=N [windows=W] [rate=R] [k=K] [churn=C] [seed=S]
 *
 * Per window: note which cards fs_client_card() reports down, acquire a
 * view, and for each layer look up K experts (a random set that changes
 * every C windows), predicting the next layer's, and posting each use
 * (card FS_CARD_NONE once its own card is down: the CPU path).  A slot read
 * (LOCAL or PEER) must carry the arena's bytes when read and again before
 * the view is released; a miss reads the arena.  The "output" is a fold of
 * the checksums of the bytes each expert's computation read, compared with
 * the same fold over the arena's checksums: equal when every read was right.
 *
 * A lookup that returns a card the engine had seen down before it acquired
 * the view is a violation: that view's epoch was published after the card
 * was dropped, so it maps nothing there.  The last epoch in which a lookup
 * returned each card is printed; the test checks it is below the daemon's
 * first epoch without the card.  Prints one line:
 *   "windows W local L peer P unreachable U miss M verified V mismatches X
 *    torn T violations Z seen_down 0xD windows_after_down A output O
 *    expected E last_epoch E0 E1 ..."
 * and exits 1 on a mismatch, a violation or a wrong output.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <foresight/foresight.h>

#include "fs_peer_reader.h"

#define PR_MAX_K 16u

static uint64_t pr_opt(int argc, char **argv, const char *key, uint64_t def)
{
	size_t n = strlen(key);
	for (int i = 0; i < argc; i++)
		if (strncmp(argv[i], key, n) == 0 && argv[i][n] == '=')
			return strtoull(argv[i] + n + 1, NULL, 0);
	return def;
}

static uint64_t pr_rng(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t pr_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* K distinct experts of layer l for window w: a set held for `churn`
 * windows, then another (so copies keep going). */
static void pr_pick(uint32_t experts, uint32_t k, uint32_t churn, uint64_t seed, uint32_t w, uint32_t l,
		    uint32_t *out)
{
	uint64_t h = seed ^ ((uint64_t)(w / churn) << 32) ^ ((uint64_t)l << 16);
	for (uint32_t i = 0; i < k; i++) {
		uint32_t x, j;
		do {
			x = (uint32_t)(pr_rng(&h) % experts);
			for (j = 0; j < i && out[j] != x; j++)
				;
		} while (j < i && k <= experts);
		out[i] = x;
	}
}

struct pr_read {
	const void *p;
	uint64_t bytes, sum;
	struct fs_slot s;
};

struct pr_counts {
	unsigned long long windows, local, peer, unreachable, miss, verified, bad, torn, violations, after;
	uint64_t out, expect, last_epoch[16]; /* per card */
};

static uint64_t fold(uint64_t acc, uint64_t sum)
{
	return (acc ^ sum) * 0x100000001b3ull;
}

/* The cards fs_client_card reports down now. */
static uint32_t cards_down(fs_client *c, uint32_t cards)
{
	uint32_t m = 0;
	for (uint32_t j = 0; j < cards; j++) {
		struct fs_card_info ci;
		if (fs_client_card(c, j, &ci) == 0 && ci.down)
			m |= 1u << j;
	}
	return m;
}

/* One expert's computation: from a slot when the tier has it, else from
 * the arena; the bytes checked either way. */
static void one(fs_client *c, const struct fs_view *v, uint32_t from, uint32_t seen, uint32_t l, uint32_t x,
		struct pr_counts *n, struct pr_read *held, uint32_t *nh)
{
	struct fs_expert_blob b;
	if (fs_arena_expert(c, l, x, &b) < 0)
		return;
	n->expect = fold(n->expect, b.checksum);
	struct fs_place p;
	int kind = fs_lookup_from(c, v, from, l, x, &p);
	int hit = (kind == FS_PLACE_LOCAL || kind == FS_PLACE_PEER) && p.host;
	if (hit) {
		if (seen >> p.card & 1u)
			n->violations++; /* a card seen down before this view was acquired */
		if (p.card < 16 && v->epoch > n->last_epoch[p.card])
			n->last_epoch[p.card] = v->epoch;
		struct fs_slot s = {
			.card = p.card, .slot = p.slot, .gen = p.gen, .host = p.host, .bytes = p.bytes};
		uint64_t sum = fs_checksum(p.host, p.bytes);
		n->verified++;
		if (sum != b.checksum) {
			if (fs_slot_ready(c, &s))
				n->bad++;
			else
				n->torn++; /* detached and the slot reused: the CPU path */
			hit = 0;
		} else {
			held[(*nh)++] = (struct pr_read){p.host, p.bytes, b.checksum, s};
			n->out = fold(n->out, sum);
			n->local += kind == FS_PLACE_LOCAL;
			n->peer += kind == FS_PLACE_PEER;
		}
	} else {
		n->unreachable += kind == FS_PLACE_UNREACHABLE;
	}
	if (!hit) {
		uint64_t sum = fs_checksum(b.data, b.bytes);
		n->verified++;
		n->bad += sum != b.checksum;
		n->out = fold(n->out, sum);
		n->miss++;
	}
	uint32_t card = (seen >> from & 1u) ? FS_ANY_CARD : from;
	fs_post_usage(c, (uint32_t)n->windows, l, x, card, hit);
}

int fault_peer_reader(const char *sock, int argc, char **argv)
{
	uint32_t from = (uint32_t)pr_opt(argc, argv, "card", 0);
	uint64_t windows = pr_opt(argc, argv, "windows", 400), seed = pr_opt(argc, argv, "seed", 7);
	uint32_t rate = (uint32_t)pr_opt(argc, argv, "rate", 200), k = (uint32_t)pr_opt(argc, argv, "k", 4);
	uint32_t churn = (uint32_t)pr_opt(argc, argv, "churn", 3);
	if (k == 0 || k > PR_MAX_K || churn == 0)
		return 2;
	fs_client *c;
	struct fs_client_opts o = {.socket_path = sock, .name = "fault-peer", .no_reattach = 1};
	if (fs_client_open(&c, &o) < 0)
		return 2;
	struct fs_model_info m;
	fs_client_model(c, &m);
	if (from >= m.cards) {
		fs_client_close(c);
		return 2;
	}
	(void)fs_peer_open(c, from); /* -ENODEV: the card is down already (the CPU path) */
	struct pr_counts n = {.out = 0xcbf29ce484222325ull, .expect = 0xcbf29ce484222325ull};
	uint32_t sel[2][PR_MAX_K], seen = 0;
	struct pr_read *held = calloc((size_t)m.layers * k, sizeof(*held));
	if (!held)
		return 2;
	printf("started pid %d card %u\n", (int)getpid(), from);
	fflush(stdout);
	uint64_t t0 = pr_now();
	for (n.windows = 1; n.windows <= windows; n.windows++) {
		uint32_t w = (uint32_t)n.windows, nh = 0;
		seen = cards_down(c, m.cards); /* before the acquire: the view is newer */
		n.after += seen != 0;
		fs_window_begin(c, w, 1);
		struct fs_view v;
		fs_acquire(c, &v);
		pr_pick(m.experts, k, churn, seed, w, 0, sel[0]);
		for (uint32_t l = 0; l < m.layers; l++) {
			uint32_t *cur = sel[l & 1], *next = sel[(l + 1) & 1];
			if (l + 1 < m.layers) {
				pr_pick(m.experts, k, churn, seed, w, l + 1, next);
				uint32_t pc = (seen >> from & 1u) ? FS_ANY_CARD : from;
				for (uint32_t i = 0; i < k; i++)
					fs_post_predict(c, w, l + 1, next[i], pc, 1.0f, 1, FS_SOURCE_HOST);
			}
			for (uint32_t i = 0; i < k; i++)
				one(c, &v, from, seen, l, cur[i], &n, held, &nh);
		}
		/* Still the same bytes: the held epoch kept its slots. */
		for (uint32_t i = 0; i < nh; i++) {
			n.verified++;
			if (fs_checksum(held[i].p, held[i].bytes) != held[i].sum) {
				if (fs_slot_ready(c, &held[i].s))
					n.bad++;
				else
					n.torn++;
			}
		}
		fs_window_end(c, w);
		if (rate) {
			uint64_t due = t0 + n.windows * 1000000000ull / rate;
			while (pr_now() < due)
				usleep(200);
		}
		fs_release(c, &v);
	}
	n.windows--;
	printf("windows %llu local %llu peer %llu unreachable %llu miss %llu verified %llu mismatches %llu "
	       "torn %llu violations %llu seen_down 0x%x windows_after_down %llu output %016llx expected "
	       "%016llx last_epoch",
	       n.windows, n.local, n.peer, n.unreachable, n.miss, n.verified, n.bad, n.torn, n.violations,
	       seen, n.after, (unsigned long long)n.out, (unsigned long long)n.expect);
	for (uint32_t j = 0; j < m.cards && j < 16; j++)
		printf(" %llu", (unsigned long long)n.last_epoch[j]);
	printf("\n");
	fflush(stdout);
	fs_client_close(c);
	free(held);
	return n.bad || n.violations || n.out != n.expect ? 1 : 0;
}
