/* SPDX-License-Identifier: Apache-2.0 */
/* fs_pace_test.c: the one pacing rule (fs_pace.h) that the host backend,
 * the CUDA backend's bus budget and fs-replay's virtual bus share. */
#include <criterion/criterion.h>

#include "fs_pace.h"

/* 13.5 GB/s: 13.5 bytes per ns. */
Test(pace, back_to_back_copies_queue_on_the_link)
{
	uint64_t free_at = 0, start;
	uint64_t a = fs_pace_copy(&free_at, 1000, 27000, 13.5, &start);
	cr_assert_eq(start, 1000);
	cr_assert_eq(a, 3000);
	cr_assert_eq(free_at, 3000);
	/* Offered before the first landed: it waits for the link. */
	uint64_t b = fs_pace_copy(&free_at, 1500, 13500, 13.5, &start);
	cr_assert_eq(start, 3000);
	cr_assert_eq(b, 4000);
}

Test(pace, an_idle_link_starts_at_once)
{
	uint64_t free_at = 4000, start;
	uint64_t c = fs_pace_copy(&free_at, 10000, 135, 13.5, &start);
	cr_assert_eq(start, 10000);
	cr_assert_eq(c, 10010);
}

Test(pace, no_limit_lands_at_once)
{
	uint64_t free_at = 0;
	cr_assert_eq(fs_pace_copy(&free_at, 77, 1u << 30, 0.0, NULL), 77);
	cr_assert_eq(fs_pace_copy(&free_at, 78, 1u << 30, -1.0, NULL), 78);
}

/* A fraction of a nanosecond is dropped (truncated), never rounded up:
 * fs-replay's pinned numbers (replay_pin.txt) rest on this. */
Test(pace, truncates)
{
	uint64_t free_at = 0;
	cr_assert_eq(fs_pace_copy(&free_at, 0, 1769473, 13.5, NULL), 131072);
}
