/* SPDX-License-Identifier: Apache-2.0 */
/* fs_gpu_kernel.h: a kernel that reads a slot the way an engine's kernel
 * would (ready word first, then the bytes), for fs-gpu-check. */
#ifndef FS_GPU_KERNEL_H
#define FS_GPU_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 and *sum = wrapping sum of the slot's 64-bit words when the device saw
 * ready[slot] == gen; 0 when it did not; -1 on a CUDA error. */
int fs_gpu_sum_if_ready(const void *slot_dev, uint64_t bytes, const uint32_t *ready_dev, uint32_t slot,
			uint32_t gen, uint64_t *sum);
/* The same sum on the host. */
uint64_t fs_gpu_sum_host(const void *p, uint64_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* FS_GPU_KERNEL_H */
