/* SPDX-License-Identifier: Apache-2.0 */
/*
 * eb_dev_cuda.cu: the CUDA device of fs-engine-bench.  Card i is CUDA
 * device i (the daemon's numbering, with the same CUDA_VISIBLE_DEVICES).
 * Per card: one stream, the hidden state on the device, a job table and
 * the per-(expert, token) results.
 *
 *  - dense: h up (pinned), one thread per hidden word runs eb_dense_word
 *    (a latency-bound integer chain of calibrated length), h down; the
 *    host waits for it (the CPU path needs the layer's hidden state);
 *  - experts: every resident expert is read whole from its slot (16-byte
 *    loads, up to 64 blocks per expert); each block adds its per-token
 *    partial sums into y with atomicAdd (wrapping sums: the order of the
 *    blocks does not matter); y comes down when the host waits.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "eb.h"
}
#include <foresight/router_ahead.h>

#define EB_CUDA_JOBS 1024u
#define EB_THREADS 256u

struct eb_djob {
	const unsigned char *p;
	unsigned long long bytes;
	unsigned int first_block, nblocks;
};

struct eb_keys {
	uint32_t k[EB_MAX_T];
};

struct eb_ccard {
	int dev;
	cudaStream_t s;
	cudaStream_t ra; /* the router-ahead kernel's own stream, beside the layer's */
	uint32_t *h_pin, *d_h;
	eb_djob *j_pin, *d_j;
	uint32_t *y_pin, *d_y;
	struct eb_job *jobs;
	uint32_t n;
};

struct eb_cuda {
	uint32_t cards;
	int ra_last; /* card of the last router-ahead launch, -1: none */
	struct eb_ccard c[16];
};

static int ok(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 1;
	fprintf(stderr, "fs-engine-bench: cuda: %s: %s\n", what, cudaGetErrorString(e));
	return 0;
}

__global__ void k_dense(uint32_t *h, uint32_t layer, uint32_t iters)
{
	uint32_t j = threadIdx.x, t = blockIdx.x;
	h[t * EB_D + j] = eb_dense_word(h[t * EB_D + j], layer, j, iters);
}

__global__ void k_experts(const eb_djob *jobs, unsigned njobs, eb_keys keys, unsigned ntok, uint32_t *y)
{
	unsigned b = blockIdx.x, lo = 0, hi = njobs - 1;
	while (lo < hi) {
		unsigned mid = (lo + hi + 1) / 2;
		if (jobs[mid].first_block <= b)
			lo = mid;
		else
			hi = mid - 1;
	}
	const eb_djob J = jobs[lo];
	unsigned rel = b - J.first_block;
	unsigned long long words = J.bytes / 4, vecs = words / 4;
	unsigned long long per = (vecs + J.nblocks - 1) / J.nblocks;
	unsigned long long v0 = rel * per, v1 = v0 + per < vecs ? v0 + per : vecs;
	uint32_t acc[EB_MAX_T];
#pragma unroll
	for (unsigned t = 0; t < EB_MAX_T; t++)
		acc[t] = 0;
	const uint4 *p4 = (const uint4 *)J.p;
	for (unsigned long long v = v0 + threadIdx.x; v < v1; v += blockDim.x) {
		uint4 w = p4[v];
		uint32_t i = (uint32_t)(v * 4);
#pragma unroll
		for (unsigned t = 0; t < EB_MAX_T; t++)
			if (t < ntok)
				acc[t] += eb_term(w.x, i, keys.k[t]) + eb_term(w.y, i + 1, keys.k[t]) +
					  eb_term(w.z, i + 2, keys.k[t]) + eb_term(w.w, i + 3, keys.k[t]);
	}
	if (rel == J.nblocks - 1 && threadIdx.x == 0) {
		const uint32_t *p = (const uint32_t *)J.p;
		for (unsigned long long i = vecs * 4; i < words; i++)
			for (unsigned t = 0; t < ntok; t++)
				acc[t] += eb_term(p[i], (uint32_t)i, keys.k[t]);
		for (unsigned long long bb = words * 4; bb < J.bytes; bb++)
			for (unsigned t = 0; t < ntok; t++)
				acc[t] += eb_term(J.p[bb], (uint32_t)(words + (bb - words * 4)), keys.k[t]);
	}
	unsigned lane = threadIdx.x & 31u;
#pragma unroll
	for (unsigned t = 0; t < EB_MAX_T; t++) {
		if (t >= ntok)
			break;
		uint32_t a = acc[t];
		for (int off = 16; off > 0; off >>= 1)
			a += __shfl_down_sync(0xffffffffu, a, off);
		if (lane == 0 && a)
			atomicAdd(&y[lo * EB_MAX_T + t], a);
	}
}

extern "C" int eb_cuda_open(struct eb_cuda **out, uint32_t cards, char *err, size_t errlen)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n < (int)cards || cards > 16) {
		snprintf(err, errlen, "--device cuda with %u cards: %s (%d devices)", cards,
			 e != cudaSuccess ? cudaGetErrorString(e) : "not enough devices", n);
		return -1;
	}
	struct eb_cuda *g = (struct eb_cuda *)calloc(1, sizeof(*g));
	if (!g)
		return -1;
	g->cards = cards;
	g->ra_last = -1;
	for (uint32_t i = 0; i < cards; i++) {
		struct eb_ccard *c = &g->c[i];
		c->dev = (int)i;
		if (!ok(cudaSetDevice(c->dev), "cudaSetDevice") ||
		    !ok(cudaStreamCreateWithFlags(&c->s, cudaStreamNonBlocking), "cudaStreamCreate") ||
		    !ok(cudaStreamCreateWithFlags(&c->ra, cudaStreamNonBlocking), "cudaStreamCreate") ||
		    !ok(cudaMallocHost((void **)&c->h_pin, EB_MAX_T * EB_D * 4), "cudaMallocHost") ||
		    !ok(cudaMalloc((void **)&c->d_h, EB_MAX_T * EB_D * 4), "cudaMalloc") ||
		    !ok(cudaMallocHost((void **)&c->j_pin, EB_CUDA_JOBS * sizeof(eb_djob)),
			"cudaMallocHost") ||
		    !ok(cudaMalloc((void **)&c->d_j, EB_CUDA_JOBS * sizeof(eb_djob)), "cudaMalloc") ||
		    !ok(cudaMallocHost((void **)&c->y_pin, EB_CUDA_JOBS * EB_MAX_T * 4), "cudaMallocHost") ||
		    !ok(cudaMalloc((void **)&c->d_y, EB_CUDA_JOBS * EB_MAX_T * 4), "cudaMalloc")) {
			snprintf(err, errlen, "CUDA set-up of card %u failed", i);
			*out = g;
			return -1;
		}
	}
	*out = g;
	return 0;
}

extern "C" void eb_cuda_close(struct eb_cuda *g)
{
	for (uint32_t i = 0; i < g->cards; i++) {
		struct eb_ccard *c = &g->c[i];
		cudaSetDevice(c->dev);
		if (c->s)
			cudaStreamSynchronize(c->s);
		if (c->ra) {
			cudaStreamSynchronize(c->ra);
			cudaStreamDestroy(c->ra);
		}
		cudaFreeHost(c->h_pin);
		cudaFreeHost(c->j_pin);
		cudaFreeHost(c->y_pin);
		cudaFree(c->d_h);
		cudaFree(c->d_j);
		cudaFree(c->d_y);
		if (c->s)
			cudaStreamDestroy(c->s);
	}
	free(g);
}

extern "C" void *eb_cuda_alloc(struct eb_cuda *g, uint32_t card, uint64_t bytes)
{
	void *p = NULL;
	if (!ok(cudaSetDevice(g->c[card].dev), "cudaSetDevice") ||
	    !ok(cudaMalloc(&p, bytes), "cudaMalloc(pool)"))
		return NULL;
	return p;
}

/* A copy into the engine's own pool, done when this returns: from
 * pageable memory cudaMemcpy may return before the DMA out of its staging
 * buffer has finished, and the peers' copier thread (eb_pool.c) publishes
 * the slot right after; the sync on the legacy stream waits for it. */
extern "C" int eb_cuda_put(struct eb_cuda *g, uint32_t card, void *dst, const void *src, uint64_t bytes)
{
	return ok(cudaSetDevice(g->c[card].dev), "cudaSetDevice") &&
			       ok(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy(pool)") &&
			       ok(cudaStreamSynchronize(0), "cudaStreamSynchronize(pool)") ?
		       0 :
		       -1;
}

extern "C" int eb_cuda_dense(struct eb_cuda *g, uint32_t card, uint32_t *h, uint32_t ntok, uint32_t layer,
			     uint32_t iters)
{
	struct eb_ccard *c = &g->c[card];
	size_t n = (size_t)ntok * EB_D * 4;
	cudaSetDevice(c->dev);
	memcpy(c->h_pin, h, n);
	cudaMemcpyAsync(c->d_h, c->h_pin, n, cudaMemcpyHostToDevice, c->s);
	k_dense<<<ntok, EB_D, 0, c->s>>>(c->d_h, layer, iters);
	cudaMemcpyAsync(c->h_pin, c->d_h, n, cudaMemcpyDeviceToHost, c->s);
	if (!ok(cudaStreamSynchronize(c->s), "dense"))
		return -1;
	memcpy(h, c->h_pin, n);
	return 0;
}

extern "C" int eb_cuda_experts_start(struct eb_cuda *g, uint32_t card, struct eb_job *jobs, uint32_t n,
				     const uint32_t *keys, uint32_t ntok)
{
	struct eb_ccard *c = &g->c[card];
	c->jobs = jobs;
	c->n = n;
	if (n == 0)
		return 0;
	if (n > EB_CUDA_JOBS)
		return -1;
	cudaSetDevice(c->dev);
	unsigned blocks = 0;
	for (uint32_t i = 0; i < n; i++) {
		unsigned long long vecs = jobs[i].bytes / 16;
		unsigned long long nb = (vecs + EB_THREADS * 8 - 1) / (EB_THREADS * 8);
		if (nb < 1)
			nb = 1;
		if (nb > 64)
			nb = 64;
		c->j_pin[i] = eb_djob{(const unsigned char *)jobs[i].ptr, jobs[i].bytes, blocks,
				      (unsigned)nb};
		blocks += (unsigned)nb;
	}
	eb_keys k;
	memset(&k, 0, sizeof(k));
	memcpy(k.k, keys, ntok * sizeof(uint32_t));
	cudaMemcpyAsync(c->d_j, c->j_pin, n * sizeof(eb_djob), cudaMemcpyHostToDevice, c->s);
	cudaMemsetAsync(c->d_y, 0, (size_t)n * EB_MAX_T * 4, c->s);
	k_experts<<<blocks, EB_THREADS, 0, c->s>>>(c->d_j, n, k, ntok, c->d_y);
	cudaMemcpyAsync(c->y_pin, c->d_y, (size_t)n * EB_MAX_T * 4, cudaMemcpyDeviceToHost, c->s);
	return ok(cudaGetLastError(), "expert kernel launch") ? 0 : -1;
}

extern "C" int eb_cuda_experts_wait(struct eb_cuda *g, uint32_t card)
{
	struct eb_ccard *c = &g->c[card];
	if (c->n == 0)
		return 0;
	cudaSetDevice(c->dev);
	if (!ok(cudaStreamSynchronize(c->s), "experts"))
		return -1;
	for (uint32_t i = 0; i < c->n; i++)
		memcpy(c->jobs[i].y, &c->y_pin[i * EB_MAX_T], sizeof(c->jobs[i].y));
	return 0;
}

/* The router-ahead kernel on card's own side stream: it reads only its
 * inputs, so it runs beside the layer's expert kernel.  A client's device
 * ring takes one producer at a time (foresight.h), so a launch on another
 * card first waits for the previous one. */
extern "C" int eb_cuda_ra(struct eb_cuda *g, uint32_t card, const struct fs_ra_params *p)
{
	if (g->ra_last >= 0 && (uint32_t)g->ra_last != card && !eb_cuda_ra_sync(g))
		return -1;
	struct eb_ccard *c = &g->c[card];
	cudaSetDevice(c->dev);
	int rc = fs_ra_launch(p, c->ra);
	if (rc != 0) {
		fprintf(stderr, "fs-engine-bench: fs_ra_launch on card %u: %d\n", card, rc);
		return -1;
	}
	g->ra_last = (int)card;
	return 0;
}

/* Every router-ahead launch done (before its inputs change). */
extern "C" int eb_cuda_ra_sync(struct eb_cuda *g)
{
	if (g->ra_last < 0)
		return 1;
	struct eb_ccard *c = &g->c[g->ra_last];
	cudaSetDevice(c->dev);
	return ok(cudaStreamSynchronize(c->ra), "router-ahead");
}
