/* SPDX-License-Identifier: Apache-2.0 */
#include <cuda_runtime.h>
#include <string.h>

#include "fs_gpu_kernel.h"
#include "fs_ready.cuh"

__global__ void sum_if_ready(const uint64_t *p, uint64_t words, const uint32_t *ready, uint32_t slot,
			     uint32_t gen, unsigned long long *out, int *seen)
{
	__shared__ int ok;
	if (threadIdx.x == 0)
		ok = fs_slot_ready_dev(ready, slot, gen);
	__syncthreads();
	if (!ok)
		return;
	if (blockIdx.x == 0 && threadIdx.x == 0)
		*seen = 1;
	unsigned long long acc = 0;
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < words;
	     i += (uint64_t)gridDim.x * blockDim.x)
		acc += p[i];
	atomicAdd(out, acc);
}

extern "C" int fs_gpu_sum_if_ready(const void *slot_dev, uint64_t bytes, const uint32_t *ready_dev,
				   uint32_t slot, uint32_t gen, uint64_t *sum)
{
	unsigned long long *d_out;
	int *d_seen;
	if (cudaMalloc(&d_out, sizeof(*d_out)) != cudaSuccess)
		return -1;
	if (cudaMalloc(&d_seen, sizeof(*d_seen)) != cudaSuccess) {
		cudaFree(d_out);
		return -1;
	}
	cudaMemset(d_out, 0, sizeof(*d_out));
	cudaMemset(d_seen, 0, sizeof(*d_seen));
	sum_if_ready<<<32, 256>>>((const uint64_t *)slot_dev, bytes / 8, ready_dev, slot, gen, d_out, d_seen);
	unsigned long long h = 0;
	int seen = 0;
	cudaError_t e = cudaMemcpy(&h, d_out, sizeof(h), cudaMemcpyDeviceToHost);
	if (e == cudaSuccess)
		e = cudaMemcpy(&seen, d_seen, sizeof(seen), cudaMemcpyDeviceToHost);
	cudaFree(d_out);
	cudaFree(d_seen);
	if (e != cudaSuccess)
		return -1;
	*sum = h;
	return seen;
}

extern "C" uint64_t fs_gpu_sum_host(const void *p, uint64_t bytes)
{
	uint64_t acc = 0, w;
	for (uint64_t i = 0; i + 8 <= bytes; i += 8) {
		memcpy(&w, (const char *)p + i, 8);
		acc += w;
	}
	return acc;
}
