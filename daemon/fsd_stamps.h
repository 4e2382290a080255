/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_stamps: where the time from a post to its copy goes, stage by stage,
 * in a bench-only build (cmake -DFS_BENCH_STAMPS=ON; bench/latency/
 * profile.sh).  Compiled out otherwise: every hook below is an empty
 * inline function and nothing is stored.
 *
 * Per copy: wake (the hot thread's last return from its idle sleep), pass
 * (the start of the hot pass that drained the record and took the copy:
 * fsd_stamp_pass at each pass), submit (the backend's submit got it) and issued (the slot's issued_ns, which
 * the engine reads: the join key with the engine's own stamps).  At exit
 * the daemon writes one line per copy to $FS_BENCH_STAMPS:
 *   "issued_ns wake_ns pass_ns submit_ns"
 */
#ifndef FSD_STAMPS_H
#define FSD_STAMPS_H

#include <stdint.h>

#ifdef FS_BENCH_STAMPS
void fsd_stamp_wake(uint64_t now);
void fsd_stamp_pass(uint64_t now);
void fsd_stamp_submit(uint32_t card, uint32_t slot, uint64_t now);
void fsd_stamp_issued(uint32_t card, uint32_t slot, uint64_t now);
#else
static inline void fsd_stamp_wake(uint64_t now)
{
	(void)now;
}
static inline void fsd_stamp_pass(uint64_t now)
{
	(void)now;
}
static inline void fsd_stamp_submit(uint32_t card, uint32_t slot, uint64_t now)
{
	(void)card, (void)slot, (void)now;
}
static inline void fsd_stamp_issued(uint32_t card, uint32_t slot, uint64_t now)
{
	(void)card, (void)slot, (void)now;
}
#endif

#endif /* FSD_STAMPS_H */
