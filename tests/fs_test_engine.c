/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-test-engine: a minimal engine for the integration and fault tests.
 *
 *   fs-test-engine hold SOCKET
 *       attach, hold an epoch, print "holding epoch N", sleep until killed
 *   fs-test-engine run SOCKET WINDOWS [WINDOW_US]
 *       run windows over a fixed, slowly drifting expert set; verify every
 *       slot read against the arena checksum; print
 *       "hits H misses M verified V mismatches X attaches A"
 *   fs-test-engine request SOCKET JSON
 *       one raw control request; prints the reply (exit 1 when none came)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <foresight/foresight.h>

#include "fs_harness.h"

static int hold(const char *sock)
{
	struct fs_client_opts o = {.socket_path = sock, .name = "test-hold"};
	fs_client *c;
	if (fs_client_open(&c, &o) < 0)
		return 2;
	/* Post something so an epoch with mappings exists, then hold it. */
	for (int i = 0; i < 50; i++) {
		fs_post_usage(c, 1, 0, (uint32_t)(i % 8), 0, 0);
		usleep(2000);
	}
	struct fs_view v;
	fs_acquire(c, &v);
	printf("holding epoch %llu\n", (unsigned long long)v.epoch);
	fflush(stdout);
	for (;;)
		pause();
}

static int run(const char *sock, uint32_t windows, unsigned window_us)
{
	struct fs_client_opts o = {.socket_path = sock, .name = "test-run"};
	fs_client *c;
	if (fs_client_open(&c, &o) < 0)
		return 2;
	struct fs_model_info m;
	fs_client_model(c, &m);
	unsigned long hits = 0, misses = 0, verified = 0, bad = 0;
	for (uint32_t w = 1; w <= windows; w++) {
		struct fs_view v;
		fs_window_begin(c, w, 1);
		fs_acquire(c, &v);
		for (uint32_t l = 0; l < m.layers; l++) {
			uint32_t card = l * m.cards / m.layers;
			for (uint32_t k = 0; k < 6; k++) {
				uint32_t x = (k * 5 + l + w / 40) % m.experts;
				struct fs_slot s;
				struct fs_expert_blob b;
				if (fs_arena_expert(c, l, x, &b) < 0)
					continue;
				int hit = fs_lookup(c, &v, card, l, x, &s);
				const void *p = hit ? s.host : b.data;
				uint64_t n = hit ? s.bytes : b.bytes;
				verified++;
				if (fs_checksum(p, n) != b.checksum)
					bad++;
				hits += hit;
				misses += !hit;
				fs_post_usage(c, w, l, x, card, hit);
			}
		}
		fs_window_end(c, w);
		if (window_us)
			usleep(window_us);
		fs_release(c, &v);
	}
	printf("hits %lu misses %lu verified %lu mismatches %lu attaches %llu\n", hits, misses, verified, bad,
	       (unsigned long long)fs_client_attach_count(c));
	fs_client_close(c);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "hold") == 0)
		return hold(argv[2]);
	if (argc >= 4 && strcmp(argv[1], "run") == 0)
		return run(argv[2], (uint32_t)atoi(argv[3]), argc > 4 ? (unsigned)atoi(argv[4]) : 0);
	if (argc >= 4 && strcmp(argv[1], "request") == 0) {
		static char buf[1 << 16];
		if (fsh_request(argv[2], argv[3], buf, sizeof(buf)) < 0)
			return 1;
		printf("%s\n", buf);
		return 0;
	}
	fprintf(stderr,
		"usage: fs-test-engine hold SOCKET | run SOCKET WINDOWS [WINDOW_US] | request SOCKET JSON\n");
	return 2;
}
