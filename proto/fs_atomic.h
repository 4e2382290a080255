/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_atomic.h: the only memory-ordering primitives shared layouts use.
 *
 * Shared structures keep plain integer fields (so the same header works
 * for C, C++ and CUDA code that maps them) and every access that needs
 * ordering goes through one of these named helpers, as liburing does.
 * Grep for them to audit the ordering of the whole project.
 */
#ifndef FS_ATOMIC_H
#define FS_ATOMIC_H

#include <stdint.h>

/* Plain value loads/stores that must not be torn or cached by the compiler. */
#define fs_load_relaxed(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define fs_store_relaxed(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

/* Publish: everything written before is visible to an acquirer of this store. */
#define fs_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
/* Observe: everything the releaser wrote before its store is visible after this. */
#define fs_load_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)

/* Full barrier (StoreLoad): used only by the sleep/wake-up handshakes and
 * the epoch hold protocol, where each side stores then loads the other's
 * word (Dekker).  Both sides of such a handshake must use it. */
#define fs_smp_mb() __atomic_thread_fence(__ATOMIC_SEQ_CST)

#define fs_likely(x) __builtin_expect(!!(x), 1)
#define fs_unlikely(x) __builtin_expect(!!(x), 0)

#endif /* FS_ATOMIC_H */
