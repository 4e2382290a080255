/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsl_cuda.cu: the provider's runtime on CUDA (struct fsl_gpu) and its one
 * kernel, which posts the experts a layer's tokens use through the device
 * ring while the layer runs.
 */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>

#include "fs_rec.h"
#include "fs_ring_dev.h"
#include "fsl.h"
#include "fsl_cuda.h"
#include "fsl_stage.h"

#define ROUTE_THREADS 256
#define STAGE_BLOCKS 528 /* 4 per SM of an H100: enough 16-byte reads in flight to fill the bus */
#define STAGE_THREADS 256
#define ROUTE_MAX_EXPERTS 1024u

struct cuda_ctx {
	cudaEvent_t ev[FSL_INFLIGHT];
	cudaStream_t copy;    /* the in-process LRU's fills */
	cudaEvent_t *slot_ev; /* [nslot_ev]: each slot's last fill */
	uint32_t nslot_ev;
};

static int cerr(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	fprintf(stderr, "foresight-llama: %s: %s\n", what, cudaGetErrorString(e));
	(void)cudaGetLastError();
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

static int map_host(void *, const void *base, uint64_t bytes, uint64_t *dev)
{
	/* Read-only: the arena is mapped PROT_READ here, and the device only
	 * reads it.  Portable: every context of the process may read it. */
	cudaError_t e = cudaHostRegister((void *)base, bytes,
					 cudaHostRegisterMapped | cudaHostRegisterReadOnly |
						 cudaHostRegisterPortable);
	if (e == cudaErrorHostMemoryAlreadyRegistered) {
		(void)cudaGetLastError();
		e = cudaSuccess;
	}
	if (cerr(e, "cudaHostRegister(arena, read-only, mapped)") < 0)
		return -EIO;
	void *d = nullptr;
	if (cerr(cudaHostGetDevicePointer(&d, (void *)base, 0), "cudaHostGetDevicePointer(arena)") < 0)
		return -EIO;
	*dev = (uint64_t)(uintptr_t)d;
	return 0;
}

static int alloc_dev(void *, uint64_t bytes, void **dev)
{
	return cerr(cudaMalloc(dev, bytes), "cudaMalloc");
}

static int alloc_pinned(void *, uint64_t bytes, void **host)
{
	return cerr(cudaHostAlloc(host, bytes, cudaHostAllocDefault), "cudaHostAlloc");
}

static int alloc_mapped(void *, uint64_t bytes, void **host, void **dev)
{
	if (cerr(cudaHostAlloc(host, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
		 "cudaHostAlloc(mapped)") < 0)
		return -ENOMEM;
	return cerr(cudaHostGetDevicePointer(dev, *host, 0), "cudaHostGetDevicePointer");
}

static int copy_in(void *vctx, void *dev, const void *host, uint64_t bytes, uint32_t slot)
{
	struct cuda_ctx *ctx = (struct cuda_ctx *)vctx;
	if (!ctx->copy && cerr(cudaStreamCreateWithFlags(&ctx->copy, cudaStreamNonBlocking),
			       "cudaStreamCreate(copies)") < 0)
		return -EIO;
	if (slot >= ctx->nslot_ev) {
		uint32_t n = slot + 1 > 2 * ctx->nslot_ev ? slot + 1 : 2 * ctx->nslot_ev;
		cudaEvent_t *ev = (cudaEvent_t *)realloc(ctx->slot_ev, n * sizeof(*ev));
		if (!ev)
			return -ENOMEM;
		memset(ev + ctx->nslot_ev, 0, (n - ctx->nslot_ev) * sizeof(*ev));
		ctx->slot_ev = ev;
		ctx->nslot_ev = n;
	}
	if (!ctx->slot_ev[slot] && cerr(cudaEventCreateWithFlags(&ctx->slot_ev[slot], cudaEventDisableTiming),
					"cudaEventCreate") < 0)
		return -EIO;
	if (cerr(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, ctx->copy),
		 "cudaMemcpyAsync(fill)") < 0)
		return -EIO;
	return cerr(cudaEventRecord(ctx->slot_ev[slot], ctx->copy), "cudaEventRecord(fill)");
}

/* 1 when the stream has passed the event (or there is none), 0 not yet. */
static int event_passed(cudaEvent_t ev, const char *what)
{
	if (!ev)
		return 1;
	cudaError_t e = cudaEventQuery(ev);
	if (e == cudaErrorNotReady) {
		(void)cudaGetLastError();
		return 0;
	}
	return cerr(e, what) < 0 ? -EIO : 1;
}

static int copy_done(void *vctx, uint32_t slot)
{
	struct cuda_ctx *ctx = (struct cuda_ctx *)vctx;
	return slot < ctx->nslot_ev ? event_passed(ctx->slot_ev[slot], "cudaEventQuery(fill)") : 1;
}

static int download(void *, void *host, const void *dev, uint64_t bytes)
{
	return cerr(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(counters)");
}

static int upload(void *, void *dev, const void *host, uint64_t bytes, void *stream)
{
	return cerr(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, (cudaStream_t)stream),
		    "cudaMemcpyAsync(tables)");
}

static int mark(void *vctx, unsigned k, void *stream)
{
	struct cuda_ctx *ctx = (struct cuda_ctx *)vctx;
	if (!ctx->ev[k] &&
	    cerr(cudaEventCreateWithFlags(&ctx->ev[k], cudaEventDisableTiming), "cudaEventCreate") < 0)
		return -EIO;
	return cerr(cudaEventRecord(ctx->ev[k], (cudaStream_t)stream), "cudaEventRecord");
}

static int passed(void *vctx, unsigned k)
{
	return event_passed(((struct cuda_ctx *)vctx)->ev[k], "cudaEventQuery");
}

static int wait(void *vctx, unsigned k)
{
	struct cuda_ctx *ctx = (struct cuda_ctx *)vctx;
	return ctx->ev[k] ? cerr(cudaEventSynchronize(ctx->ev[k]), "cudaEventSynchronize") : 0;
}

/*
 * Staging: the layer's missed experts (fsl_stage.h) copied from the arena,
 * read in place over the bus with 16-byte loads by a wide grid (what the
 * bus needs to run near its speed; MMVQ's own reads of host memory do not
 * get there), into VRAM, before the layer's products.  The route kernel,
 * launched after it, points the tables at the copies.
 */
__global__ void fsl_stage_kernel(struct fsl_route r)
{
	__shared__ uint32_t list[FSL_STAGE_MAX_IDS];
	__shared__ uint32_t n;
	if (threadIdx.x == 0)
		n = fsl_stage_list(&r, list);
	__syncthreads();
	const uint64_t words = (r.blob_bytes + 15u) /
			       16u; /* blobs start 4 KiB apart: the round-up stays in the arena */
	const uint64_t total = (uint64_t)n * words;
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
	     i += (uint64_t)gridDim.x * blockDim.x) {
		const uint32_t m = (uint32_t)(i / words);
		const uint64_t w = i % words;
		const uint4 *src = (const uint4 *)fsl_stage_src(&r, list[m]);
		uint4 *dst = (uint4 *)(r.stage + (uint64_t)m * r.stage_stride);
		dst[w] = src[w];
	}
}

/* Shared memory: the bitmap, 2 + 4 words, then the records (16-aligned). */
__host__ __device__ static inline size_t recs_at(uint32_t words)
{
	return ((words + 6u) * sizeof(uint32_t) + 15u) & ~(size_t)15u;
}

/*
 * One block: which experts the layer's tokens use (a bitmap in shared
 * memory), one usage record each (hit: its table entry is a slot, not the
 * arena), posted in one go; then the counters.  Reads the window from the
 * tables' header, which the evaluation's upload wrote: a replayed CUDA
 * graph posts under the right window.
 */
__global__ void fsl_route_kernel(struct fsl_route r)
{
	extern __shared__ __align__(16) uint32_t sh[];
	const uint32_t words = (r.experts + 31u) / 32u;
	uint32_t *bits = sh;
	uint32_t *ring_sh = sh + words; /* 2 words for fs_dev_ring_post_block */
	uint32_t *count = ring_sh + 2;  /* records built, hits, token uses, token hits */
	struct fs_rec *recs = (struct fs_rec *)((char *)sh + recs_at(words));

	for (uint32_t i = threadIdx.x; i < words; i += blockDim.x)
		bits[i] = 0;
	if (threadIdx.x < 4)
		count[threadIdx.x] = 0;
	__syncthreads();

	const uint64_t lo = r.arena_dev, hi = r.arena_dev + r.arena_bytes;
	uint32_t tu = 0, th = 0;
	const int64_t n = r.n_used * r.n_tokens;
	for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
		const int64_t j = k / r.n_used, i = k % r.n_used;
		const int32_t e = r.ids[i + j * r.ids_stride];
		if (e < 0 || (uint32_t)e >= r.experts)
			continue;
		atomicOr(&bits[e / 32], 1u << (e % 32));
		const uint64_t p = (uint64_t)(uintptr_t)r.table[e];
		tu++;
		th += p < lo || p >= hi;
	}
	atomicAdd(&count[2], tu);
	atomicAdd(&count[3], th);
	__syncthreads();

	const uint32_t window = *(const volatile uint32_t *)r.window;
	for (uint32_t e = threadIdx.x; e < r.experts; e += blockDim.x) {
		if (!(bits[e / 32] >> (e % 32) & 1u))
			continue;
		const uint64_t p = (uint64_t)(uintptr_t)r.table[e];
		const int hit = p < lo || p >= hi;
		const uint32_t at = atomicAdd(&count[0], 1u);
		if (hit)
			atomicAdd(&count[1], 1u);
		struct fs_rec rec;
		rec.type = FS_REC_USAGE;
		rec.aux = hit ? FS_USE_HIT : FS_USE_MISS;
		rec.layer = (uint16_t)r.layer;
		rec.expert = (uint16_t)e;
		rec.card = (uint16_t)r.card;
		rec.window = window;
		rec.value = 0;
		recs[at] = rec;
	}
	/* What the host's LRU learns from: the bitmap, then the window. */
	if (r.used) {
		for (uint32_t i = threadIdx.x; i < words; i += blockDim.x)
			((volatile uint32_t *)r.used)[FSL_USED_BITS + i] = bits[i];
		__threadfence_system();
	}
	__syncthreads();
	if (r.used && threadIdx.x == 0)
		((volatile uint32_t *)r.used)[FSL_USED_WINDOW] = window + 1u;
	const uint32_t built = count[0];
	uint32_t posted = 0;
	if (r.ring_desc && r.post)
		posted = fs_dev_ring_post_block((struct fs_dev_desc *)r.ring_desc, recs, built, ring_sh);
	/* The staged experts' entries, now that every read of the tables
	 * above is done: their copies in VRAM (fsl_stage_kernel ran before). */
	__shared__ uint32_t staged[FSL_STAGE_MAX_IDS];
	__shared__ uint32_t nstaged;
	if (threadIdx.x == 0)
		nstaged = fsl_stage_list(&r, staged);
	__syncthreads();
	for (uint32_t k = threadIdx.x; k < nstaged * 4u; k += blockDim.x) {
		const uint32_t m = k / 4u, role = k % 4u;
		if (r.tables[role])
			r.tables[role][staged[m]] = r.stage + (uint64_t)m * r.stage_stride + r.part_off[role];
	}
	if (threadIdx.x == 0) {
		struct fsl_counters *c = (struct fsl_counters *)r.counters;
		atomicAdd((unsigned long long *)&c->staged, (unsigned long long)nstaged);
		atomicAdd((unsigned long long *)&c->staged_bytes, (unsigned long long)nstaged * r.blob_bytes);
		atomicAdd((unsigned long long *)&c->uses, (unsigned long long)built);
		atomicAdd((unsigned long long *)&c->hits, (unsigned long long)count[1]);
		atomicAdd((unsigned long long *)&c->miss_bytes,
			  (unsigned long long)(built - count[1]) * (unsigned long long)r.expert_bytes);
		atomicAdd((unsigned long long *)&c->token_uses, (unsigned long long)count[2]);
		atomicAdd((unsigned long long *)&c->token_hits, (unsigned long long)count[3]);
		atomicAdd((unsigned long long *)&c->posted, (unsigned long long)posted);
	}
}

static int route(void *, const struct fsl_route *r, void *stream)
{
	if (r->experts > ROUTE_MAX_EXPERTS)
		return -EINVAL;
	const uint32_t words = (r->experts + 31u) / 32u;
	const size_t shmem = recs_at(words) + r->experts * sizeof(struct fs_rec);
	if (r->stage && r->n_used * r->n_tokens <= FSL_STAGE_MAX_IDS) {
		fsl_stage_kernel<<<STAGE_BLOCKS, STAGE_THREADS, 0, (cudaStream_t)stream>>>(*r);
		if (cerr(cudaGetLastError(), "the stage kernel's launch") < 0)
			return -EIO;
	}
	fsl_route_kernel<<<1, ROUTE_THREADS, shmem, (cudaStream_t)stream>>>(*r);
	return cerr(cudaGetLastError(), "the route kernel's launch");
}

static int ring(void *, fs_client *c, void **desc)
{
	int r = fs_dev_ring_enable(c, desc);
	if (r < 0)
		fprintf(stderr, "foresight-llama: the device ring: %s\n", fs_client_last_error(c));
	return r;
}

extern "C" int fsl_cuda_gpu(struct fsl_gpu *out, int device)
{
	static struct cuda_ctx ctx;
	memset(out, 0, sizeof(*out));
	out->ctx = &ctx;
	out->map_host = map_host;
	out->alloc_dev = alloc_dev;
	out->download = download;
	out->alloc_mapped = alloc_mapped;
	out->copy_in = copy_in;
	out->copy_done = copy_done;
	out->alloc_pinned = alloc_pinned;
	out->upload = upload;
	out->mark = mark;
	out->passed = passed;
	out->wait = wait;
	out->route = route;
	out->ring = ring;
	out->host_slots = 0;
	out->device = device;
	return 0;
}
