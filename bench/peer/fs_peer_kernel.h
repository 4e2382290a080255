/* SPDX-License-Identifier: Apache-2.0 */
/* fs_peer_kernel.h: read an expert-sized blob in a kernel (what an engine's
 * GEMV does to its weights), wherever the pointer points: the card's own
 * memory, a peer card's (P2P), for fs-peer-bench. */
#ifndef FS_PEER_KERNEL_H
#define FS_PEER_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueue a read of `bytes` (a multiple of 16) at `p` on `stream` (a
 * cudaStream_t), on the current device; the blocks' sums are added into
 * *acc (device memory).  0, or a cudaError_t. */
int fs_peer_read(const void *p, uint64_t bytes, void *stream, unsigned long long *acc);
/* The wrapping sum of the blob's 64-bit words, on the current device,
 * synchronously.  0, or a cudaError_t. */
int fs_peer_sum(const void *p, uint64_t bytes, uint64_t *sum);
/* The same sum on the host. */
uint64_t fs_peer_sum_host(const void *p, uint64_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* FS_PEER_KERNEL_H */
