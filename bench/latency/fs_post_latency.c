/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-post-latency: an engine that measures how soon the daemon acts on a
 * prediction, on any backend (the host backend here; bench/gpu's
 * fs-gpu-check does the same on a GPU and adds the transfer).
 *
 *   fs-post-latency latency SOCKET N [GAP_US [RUNS]]  RUNS (default 1)
 *        runs of N samples: post one prediction for a non-resident expert,
 *        spin until the slot is usable, sleep GAP_US (default 200: longer
 *        than the daemon's 50 us spin, the engines' layer rhythm).  Prints
 *        each run's p50/p99 of post -> copy issued (the daemon's issued_ns
 *        of the slot) and post -> usable, then the median run's p50 and the
 *        runs' p99 median, min and max (fs_post_lat.h).
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

#include "fs_post_lat.h"

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

static int latency(const char *sock, unsigned runs, unsigned n, unsigned gap_us)
{
	fs_client *c = open_client(sock, "post-latency");
	struct fs_post_lat l;
	int r = fs_post_lat_runs(c, runs, n, gap_us, &l);
	fs_client_close(c);
	if (r < 0) {
		fprintf(stderr, "fs-post-latency: %s\n", fs_strerror(r));
		return 2;
	}
	fs_post_lat_print(&l, NULL);
	return l.got && !l.timeouts ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && strcmp(argv[1], "latency") == 0)
		return latency(argv[2], argc > 5 ? (unsigned)atoi(argv[5]) : 1, (unsigned)atoi(argv[3]),
			       argc > 4 ? (unsigned)atoi(argv[4]) : 200);
	if (argc >= 4 && strcmp(argv[1], "idle") == 0) {
		fs_client *c = open_client(argv[2], "post-latency-idle");
		usleep((useconds_t)(atof(argv[3]) * 1e6));
		fs_client_close(c);
		return 0;
	}
	fprintf(stderr, "usage: fs-post-latency latency SOCKET N [GAP_US [RUNS]] | idle SOCKET SECONDS\n");
	return 2;
}
