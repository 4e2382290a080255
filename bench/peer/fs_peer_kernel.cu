/* SPDX-License-Identifier: Apache-2.0 */
#include <cuda_runtime.h>
#include <string.h>

#include "fs_peer_kernel.h"

/* Each thread loads 16-byte words grid-stride and the block adds its sum
 * once: the loads are the cost, as in a weight-streaming GEMV. */
__global__ void read_blob(const ulonglong2 *p, uint64_t n16, unsigned long long *acc)
{
	unsigned long long s = 0;
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n16;
	     i += (uint64_t)gridDim.x * blockDim.x) {
		ulonglong2 v = p[i];
		s += v.x + v.y;
	}
	__shared__ unsigned long long part[256];
	part[threadIdx.x] = s;
	__syncthreads();
	for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
		if (threadIdx.x < k)
			part[threadIdx.x] += part[threadIdx.x + k];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		atomicAdd(acc, part[0]);
}

static unsigned blocks_for(uint64_t n16)
{
	uint64_t b = n16 / (256 * 4); /* ~4 loads per thread */
	if (b < 1)
		b = 1;
	if (b > 1056) /* 8 per SM on an H200 (132 SMs) */
		b = 1056;
	return (unsigned)b;
}

extern "C" int fs_peer_read(const void *p, uint64_t bytes, void *stream, unsigned long long *acc)
{
	uint64_t n16 = bytes / 16;
	read_blob<<<blocks_for(n16), 256, 0, (cudaStream_t)stream>>>((const ulonglong2 *)p, n16, acc);
	return (int)cudaGetLastError();
}

extern "C" int fs_peer_sum(const void *p, uint64_t bytes, uint64_t *sum)
{
	unsigned long long *d = NULL, h = 0;
	cudaError_t e = cudaMalloc(&d, sizeof(*d));
	if (e != cudaSuccess)
		return (int)e;
	cudaMemset(d, 0, sizeof(*d));
	int r = fs_peer_read(p, bytes - bytes % 16, NULL, d);
	if (r == 0)
		r = (int)cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost);
	cudaFree(d);
	/* The sum of 16-byte pairs wraps like the host's sum of 8-byte words. */
	*sum = h;
	return r;
}

extern "C" uint64_t fs_peer_sum_host(const void *p, uint64_t bytes)
{
	uint64_t acc = 0, w;
	bytes -= bytes % 16;
	for (uint64_t i = 0; i + 8 <= bytes; i += 8) {
		memcpy(&w, (const char *)p + i, 8);
		acc += w;
	}
	return acc;
}
