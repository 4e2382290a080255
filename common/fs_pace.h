/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_pace.h: a link that carries copies one after another at a fixed rate.
 *
 * The one pacing rule of the project, for every bus that is modelled rather
 * than measured: the host backend's stand-in cards (fsd_backend_host.c), the
 * CUDA backend's --bus-gbps budget (fsd_backend_cuda.c) and fs-replay's
 * virtual bus (tools/replay/replay_bus.c).  A copy starts when it is offered
 * or when the link is free, whichever is later, and its bytes are in after
 * bytes / rate.  (The residency core's scheduler plans with its own share of
 * the link and rounds up: fsr_sched.c; that is a plan, not a pace.)
 *
 * Header only, no state but the caller's `free_at`; any clock in ns.
 */
#ifndef FS_PACE_H
#define FS_PACE_H

#include <stdint.h>

/* A copy of `bytes` offered at `now` over a link of `gbps` GB/s (1e9 B/s,
 * i.e. bytes per ns; <= 0: no limit, it lands at once).  Stores when it
 * starts in *start (may be NULL), advances *free_at to its landing and
 * returns that. */
static inline uint64_t fs_pace_copy(uint64_t *free_at, uint64_t now, uint64_t bytes, double gbps,
				    uint64_t *start)
{
	uint64_t s = *free_at > now ? *free_at : now;
	uint64_t dur = gbps > 0.0 ? (uint64_t)((double)bytes / gbps) : 0;
	if (start)
		*start = s;
	*free_at = s + dur;
	return s + dur;
}

#endif /* FS_PACE_H */
