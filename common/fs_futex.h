/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_futex.h: futex waits and wakes on words in shared (MAP_SHARED) memory.
 *
 * The words live in mappings that several processes share, so these use
 * the non-private futex operations.  Waits always take a timeout: a peer
 * that never wakes us (dead or hostile) costs latency, never a hang.
 */
#ifndef FS_FUTEX_H
#define FS_FUTEX_H

#include <stdint.h>

/* Wake up to `n` waiters on `word`.  Never blocks. */
void fs_futex_wake(uint32_t *word, int n);

/* Sleep while *word == expect, at most timeout_ns.  Returns 0 when woken or
 * the value differed, -ETIMEDOUT, or -EINTR. */
int fs_futex_wait(uint32_t *word, uint32_t expect, uint64_t timeout_ns);

/* Sleep until any of words[i] != expect[i] or one is woken, at most
 * timeout_ns (futex_waitv, Linux >= 5.16; n <= 128).  Falls back to a
 * wait on words[0] with a short timeout where futex_waitv is missing, so
 * callers must re-check every word after it returns. */
int fs_futex_waitv(uint32_t *const *words, const uint32_t *expect, unsigned n, uint64_t timeout_ns);

#define FS_FUTEX_WAITV_MAX 128u

#endif /* FS_FUTEX_H */
