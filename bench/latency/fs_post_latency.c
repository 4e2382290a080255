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

#include "fs_opt.h"
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

/* The commands' arguments: typed rows (common/fs_opt.h), each checked. */
static int cmd_latency(int argc, char **argv)
{
	const char *sock = NULL;
	uint32_t n = 0, gap_us = 200, runs = 1;
	const struct fs_opt args[] = {
		FS_OPT_STR("SOCKET", NULL, &sock, "foresightd's control socket"),
		FS_OPT_U32("N", NULL, &n, 1, 10000000, "samples per run"),
		FS_OPT_U32("GAP_US", NULL, &gap_us, 0, 10000000, "sleep between samples, us"),
		FS_OPT_U32("RUNS", NULL, &runs, 1, 1000, "runs"),
	};
	const struct fs_opt_cmd cmd = {.prog = "fs-post-latency latency",
				       .usage = "usage: fs-post-latency latency SOCKET N [GAP_US [RUNS]]\n\n",
				       .args = args,
				       .nargs = FS_OPT_N(args),
				       .min_args = 2};
	fs_opt_parse_or_exit(&cmd, argc, argv);
	return latency(sock, runs, n, gap_us);
}

static int cmd_idle(int argc, char **argv)
{
	const char *sock = NULL;
	double secs = 0;
	const struct fs_opt args[] = {
		FS_OPT_STR("SOCKET", NULL, &sock, "foresightd's control socket"),
		FS_OPT_DBL("SECONDS", NULL, &secs, 0, 86400, "how long to stay attached"),
	};
	const struct fs_opt_cmd cmd = {.prog = "fs-post-latency idle",
				       .usage = "usage: fs-post-latency idle SOCKET SECONDS\n\n",
				       .args = args,
				       .nargs = FS_OPT_N(args),
				       .min_args = 2};
	fs_opt_parse_or_exit(&cmd, argc, argv);
	fs_client *c = open_client(sock, "post-latency-idle");
	usleep((useconds_t)(secs * 1e6));
	fs_client_close(c);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "latency") == 0)
		return cmd_latency(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "idle") == 0)
		return cmd_idle(argc - 1, argv + 1);
	fprintf(stderr, "usage: fs-post-latency latency SOCKET N [GAP_US [RUNS]] | idle SOCKET SECONDS\n");
	return 2;
}
