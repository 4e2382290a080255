/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-post-latency: an engine that measures how soon the daemon acts on a
 * prediction, on any backend (the host backend here; bench/gpu's
 * fs-gpu-check does the same on a GPU and adds the transfer).
 *
 *   fs-post-latency latency SOCKET N [GAP_US]  N times: post one prediction
 *        for a non-resident expert, spin until the slot is usable, sleep
 *        GAP_US (default 200: longer than the daemon's 50 us spin, the
 *        engines' layer rhythm).  Prints p50/p99 of post -> copy issued
 *        (the daemon's issued_ns of the slot) and post -> usable.
 *   fs-post-latency idle SOCKET SECONDS  attach and do nothing (the
 *        daemon's idle CPU with an engine attached).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <foresight/foresight.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static fs_client *open_client(const char *sock, const char *name)
{
	struct fs_client_opts o = {.socket_path = sock, .name = name, .ring_entries = 4096};
	fs_client *c;
	int r = fs_client_open(&c, &o);
	if (r < 0) {
		fprintf(stderr, "fs-post-latency: attach: %s\n", fs_strerror(r));
		exit(2);
	}
	return c;
}

static uint32_t card_of(const struct fs_model_info *m, uint32_t layer)
{
	return layer * m->cards / m->layers;
}

static int latency(const char *sock, unsigned n, unsigned gap_us)
{
	fs_client *c = open_client(sock, "post-latency");
	struct fs_model_info m;
	fs_client_model(c, &m);
	uint64_t *issue = calloc(n, 8), *seen = calloc(n, 8);
	if (!issue || !seen)
		return 2;
	unsigned got = 0, timeouts = 0;
	uint32_t w = 1;
	for (unsigned i = 0; i < n; i++) {
		struct fs_view v;
		fs_acquire(c, &v);
		uint32_t l, e;
		struct fs_slot s;
		do {
			l = (uint32_t)(rnd() % m.layers);
			e = (uint32_t)(rnd() % m.experts);
		} while (fs_lookup_live(c, &v, card_of(&m, l), l, e, &s));
		uint64_t t0 = now_ns(), t1 = 0;
		fs_post_predict(c, w, l, e, card_of(&m, l), 1.0f, 1, FS_SOURCE_HOST);
		while (now_ns() - t0 < 1000000000ull) {
			if (fs_lookup_live(c, &v, card_of(&m, l), l, e, &s)) {
				t1 = now_ns();
				break;
			}
			/* Windows pass: holding one epoch for the whole wait would keep
			 * the slot this copy needs in its grace period. */
			fs_release(c, &v);
			fs_acquire(c, &v);
		}
		if (t1) {
			uint64_t is = fs_slot_issued_ns(c, &s);
			issue[got] = is > t0 ? is - t0 : 0;
			seen[got] = t1 - t0;
			got++;
		} else {
			timeouts++;
		}
		fs_release(c, &v);
		if ((i & 63) == 63) {
			fs_window_end(c, w);
			w++;
		}
		if (gap_us)
			usleep(gap_us);
	}
	qsort(issue, got, 8, cmp_u64);
	qsort(seen, got, 8, cmp_u64);
	if (got)
		printf("samples %u timeouts %u post_to_issue_us p50 %.2f p99 %.2f post_to_ready_us p50 %.2f p99 %.2f\n",
		       got, timeouts, issue[got / 2] / 1e3, issue[got * 99 / 100] / 1e3, seen[got / 2] / 1e3,
		       seen[got * 99 / 100] / 1e3);
	fs_client_close(c);
	free(issue);
	free(seen);
	return got && !timeouts ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && strcmp(argv[1], "latency") == 0)
		return latency(argv[2], (unsigned)atoi(argv[3]), argc > 4 ? (unsigned)atoi(argv[4]) : 200);
	if (argc >= 4 && strcmp(argv[1], "idle") == 0) {
		fs_client *c = open_client(argv[2], "post-latency-idle");
		usleep((useconds_t)(atof(argv[3]) * 1e6));
		fs_client_close(c);
		return 0;
	}
	fprintf(stderr, "usage: fs-post-latency latency SOCKET N [GAP_US] | idle SOCKET SECONDS\n");
	return 2;
}
