/* SPDX-License-Identifier: Apache-2.0 */
/* fsd_stamps.c: see fsd_stamps.h (built only with FS_BENCH_STAMPS). */
#include "fsd_stamps.h"

#include <stdio.h>
#include <stdlib.h>

#define ST_CARDS 8u
#define ST_SLOTS 65536u
#define ST_LOG (1u << 18)

struct st_pending {
	uint64_t wake, pass, submit;
};
struct st_done {
	uint64_t issued, wake, pass, submit;
};

static uint64_t st_wake;                              /* the hot thread's */
static uint64_t st_pass;                              /* the hot thread's */
static struct st_pending st_slot[ST_CARDS][ST_SLOTS]; /* submit -> issued */
static struct st_done st_log[ST_LOG];
static uint32_t st_n;
static int st_registered;

static void st_dump(void)
{
	const char *path = getenv("FS_BENCH_STAMPS");
	FILE *f = path ? fopen(path, "w") : NULL;
	if (!f)
		return;
	uint32_t n = __atomic_load_n(&st_n, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n && i < ST_LOG; i++)
		fprintf(f, "%llu %llu %llu %llu\n", (unsigned long long)st_log[i].issued,
			(unsigned long long)st_log[i].wake, (unsigned long long)st_log[i].pass,
			(unsigned long long)st_log[i].submit);
	fclose(f);
}

void fsd_stamp_wake(uint64_t now)
{
	__atomic_store_n(&st_wake, now, __ATOMIC_RELAXED);
}

void fsd_stamp_pass(uint64_t now)
{
	__atomic_store_n(&st_pass, now, __ATOMIC_RELAXED);
}

void fsd_stamp_submit(uint32_t card, uint32_t slot, uint64_t now)
{
	if (!st_registered) { /* the hot thread: the first copy of the run */
		st_registered = 1;
		atexit(st_dump);
	}
	if (card >= ST_CARDS || slot >= ST_SLOTS)
		return;
	struct st_pending p = {.wake = __atomic_load_n(&st_wake, __ATOMIC_RELAXED),
			       .pass = __atomic_load_n(&st_pass, __ATOMIC_RELAXED),
			       .submit = now};
	/* The backend's copy thread reads it after the submit's queue lock. */
	st_slot[card][slot] = p;
}

void fsd_stamp_issued(uint32_t card, uint32_t slot, uint64_t now)
{
	if (card >= ST_CARDS || slot >= ST_SLOTS)
		return;
	uint32_t i = __atomic_fetch_add(&st_n, 1u, __ATOMIC_ACQ_REL);
	if (i >= ST_LOG)
		return;
	const struct st_pending *p = &st_slot[card][slot];
	st_log[i] = (struct st_done){.issued = now, .wake = p->wake, .pass = p->pass, .submit = p->submit};
}
