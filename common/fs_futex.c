/* SPDX-License-Identifier: Apache-2.0 */
#include "fs_futex.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#ifndef FUTEX_32
#define FUTEX_32 2
#endif

void fs_futex_wake(uint32_t *word, int n)
{
	(void)syscall(SYS_futex, word, FUTEX_WAKE, n, NULL, NULL, 0);
}

int fs_futex_wait(uint32_t *word, uint32_t expect, uint64_t timeout_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(timeout_ns / 1000000000u),
		.tv_nsec = (long)(timeout_ns % 1000000000u),
	};
	if (syscall(SYS_futex, word, FUTEX_WAIT, expect, &ts, NULL, 0) == 0)
		return 0;
	if (errno == EAGAIN)
		return 0; /* the value had already changed */
	return -errno;
}

/* Mirrors struct futex_waitv of <linux/futex.h> (absent from old headers). */
struct fs_waitv {
	uint64_t val;
	uint64_t uaddr;
	uint32_t flags;
	uint32_t reserved;
};

static int waitv_missing;

int fs_futex_waitv(uint32_t *const *words, const uint32_t *expect, unsigned n, uint64_t timeout_ns)
{
	if (n == 0 || n > FS_FUTEX_WAITV_MAX)
		return -EINVAL;
	if (!__atomic_load_n(&waitv_missing, __ATOMIC_RELAXED)) {
		struct fs_waitv w[FS_FUTEX_WAITV_MAX];
		for (unsigned i = 0; i < n; i++) {
			w[i].val = expect[i];
			w[i].uaddr = (uint64_t)(uintptr_t)words[i];
			w[i].flags = FUTEX_32; /* shared: no FUTEX_PRIVATE_FLAG */
			w[i].reserved = 0;
		}
		/* futex_waitv takes an absolute CLOCK_MONOTONIC deadline. */
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		uint64_t ns = (uint64_t)now.tv_nsec + timeout_ns % 1000000000u;
		struct timespec dl = {
			.tv_sec = now.tv_sec + (time_t)(timeout_ns / 1000000000u) +
				  (time_t)(ns / 1000000000u),
			.tv_nsec = (long)(ns % 1000000000u),
		};
		long r = syscall(SYS_futex_waitv, w, n, 0, &dl, CLOCK_MONOTONIC);
		if (r >= 0)
			return 0;
		if (errno == EAGAIN)
			return 0;
		if (errno != ENOSYS)
			return -errno;
		__atomic_store_n(&waitv_missing, 1, __ATOMIC_RELAXED);
	}
	/* Fallback: sleep on the first word only, briefly, then let the caller
	 * re-check all of them.  Costs latency for the others, never a loss. */
	uint64_t t = timeout_ns < 200000u ? timeout_ns : 200000u;
	return fs_futex_wait(words[0], expect[0], t);
}
