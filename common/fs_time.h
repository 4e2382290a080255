/* SPDX-License-Identifier: Apache-2.0 */
#ifndef FS_TIME_H
#define FS_TIME_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds: the one clock every shared timestamp
 * (heartbeats, hold ages) uses, the same in every process of a host. */
static inline uint64_t fs_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* FS_TIME_H */
