/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_ring_dev.h: posting from a GPU kernel into the device ring.
 *
 * Every client region holds a second ring (fs_client_hdr.off_dev_ring)
 * whose producer is the engine's GPU: the router-ahead kernel writes
 * prediction records there through host-mapped memory, with no host thread
 * of the engine involved.  Same layout and consumer as the host ring
 * (fs_ring.h); what differs is the producer:
 *
 *  - It keeps no private state between posts (a kernel launch has none):
 *    it reads its own tail back from the ring.  Launches that post must be
 *    serialised (one stream, or ordered by events): one producer at a time.
 *  - It cannot make a system call, so it never wakes the daemon.  The client
 *    sets fs_client_hdr.dev_armed while kernels may post, and the daemon
 *    then sleeps at most dev_poll_us between looks at the ring.  A host
 *    thread posting here instead (fs_dev_ring_post_predict) does wake it,
 *    through the host ring's NEED_WAKEUP handshake (one futex word per
 *    client).
 *  - Order: read head, fence, write records, system-scope fence, store
 *    tail.  The consumer's acquire of tail then sees the records, and the
 *    producer never overwrites a record before the consumer released it.
 *
 * The kernel finds the ring through a descriptor word in pinned host memory
 * that stays put for the life of the client handle: re-attaching to a
 * restarted daemon gives a new client region, and the client library swaps
 * the word (one 64-bit store) so launches already captured in a CUDA graph
 * post to the new ring.  Old regions stay mapped and registered until
 * fs_client_close, so a kernel in flight never writes to freed memory.
 */
#ifndef FS_RING_DEV_H
#define FS_RING_DEV_H

#include <stdint.h>

#include "fs_proto.h"
#include "fs_ring.h"

/* Descriptor word: device address of the ring header (bits 0..55) and
 * log2(entries) (bits 56..63); 0 = no ring (detached: posts are dropped). */
#define FS_DEV_DESC(addr, log2e) ((uint64_t)(addr) | ((uint64_t)(log2e) << 56))
#define FS_DEV_DESC_ADDR(w) ((w) & ((1ull << 56) - 1u))
#define FS_DEV_DESC_LOG2E(w) ((uint32_t)((w) >> 56))

struct fs_dev_desc {
	uint64_t word;     /* FS_DEV_DESC(...), written by the client library */
	uint64_t detached; /* records dropped while no ring existed (producer) */
	uint64_t pad[6];
};
_Static_assert(sizeof(struct fs_dev_desc) == FS_CACHELINE, "device descriptor is one line");

#ifdef __CUDACC__
/*
 * Post n records from a whole thread block (every thread calls it; recs may
 * be in any memory the block can read).  Returns, in every thread, how many
 * went in; the rest are counted in the ring's `full` (or the descriptor's
 * `detached`).  `sh` is one uint32_t[2] of the block's shared memory.
 */
__device__ __forceinline__ uint32_t fs_dev_ring_post_block(struct fs_dev_desc *desc,
							   const struct fs_rec *recs, uint32_t n,
							   uint32_t *sh)
{
	uint64_t w = *(volatile uint64_t *)&desc->word;
	struct fs_ring_hdr *h = (struct fs_ring_hdr *)(uintptr_t)FS_DEV_DESC_ADDR(w);
	uint32_t entries = 1u << FS_DEV_DESC_LOG2E(w);
	if (threadIdx.x == 0) {
		uint32_t tail = 0, k = 0;
		if (w == 0) {
			atomicAdd((unsigned long long *)&desc->detached, (unsigned long long)n);
		} else {
			tail = *(volatile uint32_t *)&h->tail;
			uint32_t head = *(volatile uint32_t *)&h->head;
			uint32_t used = tail - head;
			uint32_t space = used > entries ? 0u : entries - used;
			k = n < space ? n : space;
			if (k < n)
				*(volatile uint32_t *)&h->full = *(volatile uint32_t *)&h->full + (n - k);
		}
		sh[0] = tail;
		sh[1] = k;
	}
	__syncthreads();
	/* Head was read before any record below is written (the barrier). */
	uint32_t tail = sh[0], k = sh[1];
	uint4 *ring = (uint4 *)((char *)h + FS_RING_REC_OFFSET);
	for (uint32_t i = threadIdx.x; i < k; i += blockDim.x)
		ring[(tail + i) & (entries - 1u)] = *(const uint4 *)&recs[i];
	__threadfence_system(); /* each writer: its records before the tail */
	__syncthreads();
	if (threadIdx.x == 0 && k > 0)
		*(volatile uint32_t *)&h->tail = tail + k;
	return k;
}
#endif

#endif /* FS_RING_DEV_H */
