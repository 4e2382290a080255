/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_post_lat: the post -> copy issued measurement both latency benches
 * make (fs-post-latency on any backend, fs-gpu-check on the CUDA one), so
 * the two report the same thing the same way.
 *
 * One sample: pick a (layer, expert) that is not resident, post one
 * prediction for it, spin until the slot is usable, sleep gap_us (the
 * engines' layer rhythm, longer than the daemon's default 50 us spin).
 * issue = the daemon's issued_ns of the slot - the post; seen = when the
 * engine saw the slot usable - the post.  Every 64 samples a window ends.
 *
 * A run is n samples; fs_post_lat_runs() makes `runs` of them and keeps
 * each run's percentiles, so a p99 claim carries its spread across runs
 * (one run's p99 is its ~n/100 worst samples: on a loaded machine it moves
 * by 4x between runs, docs/results/gpu.md).
 */
#ifndef FS_POST_LAT_H
#define FS_POST_LAT_H

#include <stdint.h>

#include <foresight/foresight.h>

#define FS_POST_LAT_MAX_RUNS 32u

struct fs_post_lat_run {
	unsigned got, timeouts;
	double issue_p50, issue_p99, seen_p50, seen_p99; /* us */
};

struct fs_post_lat {
	unsigned runs;
	struct fs_post_lat_run run[FS_POST_LAT_MAX_RUNS];
	/* Across runs: the median run's p50, and the p99s' median, min, max. */
	double issue_p50, issue_p99_med, issue_p99_min, issue_p99_max;
	double seen_p50, seen_p99_med, seen_p99_min, seen_p99_max;
	unsigned got, timeouts; /* summed over the runs */
};

uint64_t fs_post_lat_now_ns(void);

/* runs (1..FS_POST_LAT_MAX_RUNS) runs of n samples on client c.
 * 0, or -ENOMEM / -EINVAL. */
int fs_post_lat_runs(fs_client *c, unsigned runs, unsigned n, unsigned gap_us, struct fs_post_lat *out);

/* One line per run ("run I samples ..."), then the summary line
 *   "samples G timeouts T runs R post_to_issue_us p50 A p99 B min C max D
 *    post_to_ready_us p50 E p99 F min G max H [EXTRA]"
 * (the scripts read the line that starts with "samples"; its p99 is the
 * median of the runs', min/max their spread).  extra may be NULL. */
void fs_post_lat_print(const struct fs_post_lat *l, const char *extra);

#endif /* FS_POST_LAT_H */
