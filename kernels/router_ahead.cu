/* SPDX-License-Identifier: Apache-2.0 */
/*
 * router_ahead.cu: the router-ahead kernel (foresight/router_ahead.h).
 *
 * Two kernels, launched back to back into the caller's stream (so the pair
 * is two nodes of a graph):
 *
 *  1. fs_ra_logits_kernel: the GEMV.  One warp a router row, a group of up
 *     to eight tokens per warp, grid (rows / 4, horizons, token groups):
 *     every SM gets work even when E is small, each lane streams its row
 *     with 16-byte loads (RA_G of them in flight) and reads the hidden rows
 *     straight from L1/L2 (no shared-memory staging, no barrier).  When
 *     there are too few rows to fill the device the token groups shrink
 *     (more warps re-read the router from L2, in parallel).  A GEMV that
 *     staged the hidden rows in shared memory and read the router once per
 *     eight tokens (commit 01eb2c6) measured slower at T >= 8 and at
 *     Mixtral's shape, faster by ~1 us only at T <= 4 (the stage table,
 *     docs/results/kernels.md), and its unrolled loops took ptxas minutes:
 *     it was taken out again.
 *  2. fs_ra_select_kernel: one block per horizon, one warp per token (up
 *     to 32 at once): each token's top-M (a lane's logits cached in
 *     registers for E <= 512), votes and margins in shared memory, the
 *     resident experts skipped, the candidates ranked into prediction
 *     records; the last horizon to finish (the only one when K = 1) posts
 *     every horizon's records to the device ring in one post: one tail
 *     store and one system fence per launch, the ring's descriptor, head
 *     and tail read over PCIe while the GEMV still runs.
 *
 * On sm_90 and newer the second kernel is a programmatic dependent launch:
 * its blocks start while the GEMV runs and wait in
 * cudaGridDependencySynchronize(), so the pair pays about one launch
 * (FS_RA_PDL=0 in the environment turns that off).
 *
 * Arithmetic follows the rule in the header exactly (explicit __fmaf_rn and
 * __fadd_rn, so nvcc's contraction cannot change a bit), which is what lets
 * the CPU reference check the kernel bit for bit: a (row, token) dot
 * product is still one warp's, lane (i / 8) % 32 accumulating its elements
 * in increasing order, whatever the grid.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <stdlib.h>

#include "foresight/router_ahead.h"
#include "fs_ring_dev.h"
#include "router_ahead_rule.h"
#include "router_ahead_stage.h"

#define RA_LWARPS 4u /* rows (warps) per GEMV block */
#define RA_LTHREADS (RA_LWARPS * 32u)
#define RA_TG 8u            /* most tokens per warp (accumulators per lane) */
#define RA_CH 2048u         /* router elements loaded per lane batch (multiple of 256) */
#define RA_G (RA_CH / 256u) /* 8-element groups per lane per batch */
#define RA_SWARPS_MAX 32u   /* selection warps (tokens at once) */
#define RA_REG_J 16         /* logits a lane caches in registers: E <= 512 */
#define RA_NONE 0xffffffffu
#define RA_PICK_OWNER 0x8000u

/* Scratch: the counter first (reset by each launch's last horizon), then
 * the per-horizon results and records, then the logits. */
struct ra_scratch {
	uint32_t done; /* horizons done */
	uint32_t res_n[FS_RA_MAX_HORIZONS];
	uint32_t pad[12];
	struct fs_rec recs[FS_RA_MAX_HORIZONS][FS_RA_MAX_OUT];
	/* float logits[K][T][E] follows */
};

/*
 * The selection kernel's shared memory (dynamic): uint32_t votes[E],
 * margk[E] (ordered keys of the best margins), uint16_t pick_e[T*M]
 * (rounded to 16 bytes), float pick_m[T*M] (then the candidates, as
 * votes << 16 | expert), float cm[T*M] (the candidates' margins).
 * At most 8 * 4096 + 10 * 64 * 32 + 32 bytes: over the 48 KiB default only
 * at E = 4096 with T * M = 2048, so the kernel is allowed the device's
 * opt-in maximum (ra_dev_of).
 */
struct ra_layout {
	uint32_t votes, margk, pick_e, pick_m, cm, bytes;
};

__host__ __device__ static inline struct ra_layout ra_layout_of(uint32_t E, uint32_t T, uint32_t M)
{
	struct ra_layout l;
	uint32_t tm = T * M;
	l.votes = 0;
	l.margk = l.votes + 4 * E;
	l.pick_e = l.margk + 4 * E;
	l.pick_m = l.pick_e + (2 * tm + 15) / 16 * 16;
	l.cm = l.pick_m + (4 * tm + 15) / 16 * 16;
	l.bytes = l.cm + (4 * tm + 15) / 16 * 16;
	return l;
}

__device__ __forceinline__ uint32_t ord_key(float f)
{
	uint32_t u = __float_as_uint(f);
	return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float ord_float(uint32_t k)
{
	return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

__device__ __forceinline__ float ld_elem(const void *base, int t, size_t i)
{
	if (t == FS_RA_BF16)
		return fs_ra_bf16_to_f32(((const uint16_t *)base)[i]);
	if (t == FS_RA_F16)
		return __half2float(((const __half *)base)[i]);
	return ((const float *)base)[i];
}

/* A lane's raw 8 router elements (one group): 16 bytes of bf16/f16, 32 of
 * f32.  Loaded for a whole chunk before any arithmetic, so a warp keeps
 * RA_G loads in flight instead of one. */
struct ra_raw {
	uint4 a, b;
};

__device__ __forceinline__ void ra_load(const char *row, int t, uint32_t i, uint32_t d, bool vec,
					struct ra_raw *r)
{
	if (i >= d)
		return;
	if (vec && d - i >= 8) {
		if (t == FS_RA_F32) {
			r->a = __ldg((const uint4 *)(row + (size_t)i * 4));
			r->b = __ldg((const uint4 *)(row + (size_t)i * 4) + 1);
		} else {
			r->a = __ldg((const uint4 *)(row + (size_t)i * 2));
		}
	}
}

/* The group's elements as f32 (n of them; the row's tail element-wise). */
__device__ __forceinline__ void ra_unpack(const char *row, int t, uint32_t i, uint32_t n, bool vec,
					  const struct ra_raw *r, float w[8])
{
	if (vec && n == 8) {
		if (t == FS_RA_F32) {
			w[0] = __uint_as_float(r->a.x), w[1] = __uint_as_float(r->a.y);
			w[2] = __uint_as_float(r->a.z), w[3] = __uint_as_float(r->a.w);
			w[4] = __uint_as_float(r->b.x), w[5] = __uint_as_float(r->b.y);
			w[6] = __uint_as_float(r->b.z), w[7] = __uint_as_float(r->b.w);
			return;
		}
		uint32_t u[4] = {r->a.x, r->a.y, r->a.z, r->a.w};
#pragma unroll
		for (int q = 0; q < 4; q++) {
			uint16_t lo = (uint16_t)(u[q] & 0xffffu), hi = (uint16_t)(u[q] >> 16);
			if (t == FS_RA_BF16) {
				w[2 * q] = fs_ra_bf16_to_f32(lo);
				w[2 * q + 1] = fs_ra_bf16_to_f32(hi);
			} else {
				w[2 * q] = __half2float(__ushort_as_half(lo));
				w[2 * q + 1] = __half2float(__ushort_as_half(hi));
			}
		}
		return;
	}
#pragma unroll
	for (uint32_t q = 0; q < 8; q++)
		w[q] = q < n ? ld_elem(row, t, i + q) : 0.0f;
}

__device__ __forceinline__ const void *router_of(const struct fs_ra_params &p, uint32_t k)
{
	return k == 0 ? p.router[0] : k == 1 ? p.router[1] : p.router[2];
}

__device__ __forceinline__ const uint32_t *resident_of(const struct fs_ra_params &p, uint32_t k)
{
	return k == 0 ? p.resident[0] : k == 1 ? p.resident[1] : p.resident[2];
}

/* Kernel 1: logits[k][t][e] for this warp's row and token group. */
__global__ void __launch_bounds__(RA_LTHREADS)
	fs_ra_logits_kernel(const struct fs_ra_params p, float *logits, uint32_t tpw)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	/* The selection kernel may be scheduled now: it waits for this grid's
	 * completion (and memory) in cudaGridDependencySynchronize(). */
	cudaTriggerProgrammaticLaunchCompletion();
#endif
	const uint32_t k = blockIdx.y, warp = threadIdx.x / 32u, lane = threadIdx.x % 32u;
	const uint32_t e = blockIdx.x * RA_LWARPS + warp, d = p.dim, T = p.tokens;
	const uint32_t tg = blockIdx.z * tpw;
	if (e >= p.experts || tg >= T)
		return; /* no barrier below: a warp may leave */
	const uint32_t tn = T - tg < tpw ? T - tg : tpw;
	const size_t esz = p.router_type == FS_RA_F32 ? 4 : 2;
	const char *row = (const char *)router_of(p, k) + (size_t)e * d * esz;
	const bool vec = ((uintptr_t)row % 16u) == 0;
	/* The hidden rows load 8 elements at a time when every row starts
	 * 16-byte aligned. */
	const size_t hsz = p.hidden_type == FS_RA_F32 ? 4 : 2;
	const bool hvec = ((uintptr_t)p.hidden % 16u) == 0 && (d * hsz) % 16u == 0;
	const char *hid = (const char *)p.hidden + (size_t)tg * d * hsz;
	float acc[RA_TG];
#pragma unroll
	for (uint32_t t = 0; t < RA_TG; t++)
		acc[t] = 0.0f;
	for (uint32_t c0 = 0; c0 < d; c0 += RA_CH) {
		/* This batch of the router row in flight before any arithmetic. */
		struct ra_raw raw[RA_G];
#pragma unroll
		for (uint32_t g = 0; g < RA_G; g++)
			ra_load(row, p.router_type, c0 + g * 256u + lane * 8u, d, vec, &raw[g]);
#pragma unroll
		for (uint32_t g = 0; g < RA_G; g++) {
			uint32_t i = c0 + g * 256u + lane * 8u;
			if (i >= d)
				break;
			uint32_t n = d - i < 8u ? d - i : 8u;
			float w[8];
			ra_unpack(row, p.router_type, i, n, vec, &raw[g], w);
#pragma unroll
			for (uint32_t t = 0; t < RA_TG; t++) {
				if (t >= tn)
					break;
				const char *hrow = hid + (size_t)t * d * hsz;
				struct ra_raw hr = {};
				float hv[8];
				if (hvec && n == 8u) {
					const uint4 *src = (const uint4 *)(hrow + (size_t)i * hsz);
					hr.a = __ldg(src);
					if (p.hidden_type == FS_RA_F32)
						hr.b = __ldg(src + 1);
				}
				ra_unpack(hrow, p.hidden_type, i, n, hvec, &hr, hv);
#pragma unroll
				for (uint32_t q = 0; q < 8; q++)
					if (q < n)
						acc[t] = __fmaf_rn(w[q], hv[q], acc[t]);
			}
		}
	}
#pragma unroll
	for (uint32_t t = 0; t < RA_TG; t++)
		for (uint32_t o = 16; o >= 1; o /= 2)
			acc[t] = __fadd_rn(acc[t], __shfl_xor_sync(0xffffffffu, acc[t], (int)o));
	if (lane == 0)
		for (uint32_t t = 0; t < RA_TG && t < tn; t++)
			logits[((size_t)k * T + tg + t) * p.experts + e] = acc[t];
}

/* Token t's top-M into pick_e/pick_m (one warp): pick m is the best key
 * below pick m-1.  J > 0: the lane's logits (e = lane + 32 j) are first
 * cached in registers (E <= 32 J); J == 0: read from L2 each pass.  The
 * logits are read L2-only (__ldcg): with a dependent launch this block
 * began before the GEMV ended, so its SM's L1 may hold a previous
 * launch's lines. */
template <int J>
__device__ static void ra_topm(const float *lg, uint32_t E, uint32_t M, uint32_t t, uint32_t lane,
			       uint16_t *pick_e, float *pick_m)
{
	constexpr uint32_t JN = J > 0 ? (uint32_t)J : 1u;
	float v[JN];
	if (J > 0) {
#pragma unroll
		for (uint32_t j = 0; j < JN; j++)
			v[j] = lane + 32u * j < E ? __ldcg(lg + lane + 32u * j) : 0.0f;
	}
	float prev_l = 0.0f, top = 0.0f;
	uint32_t prev_e = RA_NONE, m = 0;
	for (; m < M; m++) {
		float bl = 0.0f;
		uint32_t be = RA_NONE;
		if (J > 0) {
#pragma unroll
			for (uint32_t j = 0; j < JN; j++) {
				uint32_t e = lane + 32u * j;
				float l = v[j];
				if (e >= E)
					break;
				if (prev_e != RA_NONE && !fs_ra_key_below(l, e, prev_l, prev_e))
					continue;
				if (be == RA_NONE || fs_ra_key_below(bl, be, l, e))
					bl = l, be = e;
			}
		} else {
			for (uint32_t e = lane; e < E; e += 32u) {
				float l = __ldcg(lg + e);
				if (prev_e != RA_NONE && !fs_ra_key_below(l, e, prev_l, prev_e))
					continue;
				if (be == RA_NONE || fs_ra_key_below(bl, be, l, e))
					bl = l, be = e;
			}
		}
		for (int o = 16; o >= 1; o /= 2) {
			float ol = __shfl_xor_sync(0xffffffffu, bl, o);
			uint32_t oe = __shfl_xor_sync(0xffffffffu, be, o);
			if (oe != RA_NONE && (be == RA_NONE || fs_ra_key_below(bl, be, ol, oe)))
				bl = ol, be = oe;
		}
		if (be == RA_NONE)
			break; /* NaN logits: nothing ranks below */
		if (m == 0)
			top = bl;
		if (lane == 0) {
			pick_e[t * M + m] = (uint16_t)be;
			pick_m[t * M + m] = __fsub_rn(bl, top);
		}
		prev_l = bl, prev_e = be;
	}
	for (m += lane; m < M; m += 32u)
		pick_e[t * M + m] = 0xffffu;
}

/* The device ring's state, read early (over PCIe from host-mapped memory:
 * a round trip each) by the one thread that may post.  Reading head early
 * is safe (an older head only shows less space); tail and full are this
 * producer's own, and launches that post are serialised. */
struct ra_ring_view {
	uint64_t w;
	uint32_t tail, full, head;
};

__device__ __forceinline__ struct ra_ring_view ra_ring_peek(const void *desc)
{
	struct ra_ring_view v = {0, 0, 0, 0};
	v.w = *(const volatile uint64_t *)&((const struct fs_dev_desc *)desc)->word;
	if (v.w) {
		const struct fs_ring_hdr *h = (const struct fs_ring_hdr *)(uintptr_t)FS_DEV_DESC_ADDR(v.w);
		v.tail = *(const volatile uint32_t *)&h->tail;
		v.full = *(const volatile uint32_t *)&h->full;
		v.head = *(const volatile uint32_t *)&h->head;
	}
	return v;
}

/* Post every horizon's records (sc->recs[h][0..res_n[h])) as one run: one
 * system fence and one tail store per launch, where fs_dev_ring_post_block
 * (fs_ring_dev.h) would take one of each, and its own descriptor, head and
 * tail reads, per horizon.  The same protocol: head read before any record
 * is written, records, system fence, tail; what does not fit is counted in
 * the ring's `full`, a detached descriptor counts it in `detached`.  Every
 * thread of the block calls it; rv is valid in thread 0. */
__device__ static void ra_post(const struct fs_ra_params &p, struct ra_scratch *sc,
			       const struct ra_ring_view &rv)
{
	__shared__ uint32_t ps[4];
	struct fs_dev_desc *desc = (struct fs_dev_desc *)p.desc;
	if (threadIdx.x == 0) {
		uint32_t total = 0, k = 0;
		for (uint32_t h = 0; h < p.horizons; h++)
			total += *(volatile uint32_t *)&sc->res_n[h];
		if (rv.w == 0) {
			atomicAdd((unsigned long long *)&desc->detached, (unsigned long long)total);
		} else {
			struct fs_ring_hdr *h = (struct fs_ring_hdr *)(uintptr_t)FS_DEV_DESC_ADDR(rv.w);
			uint32_t entries = 1u << FS_DEV_DESC_LOG2E(rv.w);
			uint32_t used = rv.tail - rv.head;
			uint32_t space = used > entries ? 0u : entries - used;
			k = total < space ? total : space;
			if (k < total)
				*(volatile uint32_t *)&h->full = rv.full + (total - k);
		}
		ps[0] = k;
		ps[1] = rv.tail;
		ps[2] = (uint32_t)rv.w;
		ps[3] = (uint32_t)(rv.w >> 32);
	}
	__syncthreads();
	const uint32_t k = ps[0], tail = ps[1];
	const uint64_t w = (uint64_t)ps[2] | ((uint64_t)ps[3] << 32);
	struct fs_ring_hdr *h = (struct fs_ring_hdr *)(uintptr_t)FS_DEV_DESC_ADDR(w);
	if (k > 0) {
		const uint32_t mask = (1u << FS_DEV_DESC_LOG2E(w)) - 1u;
		uint4 *ring = (uint4 *)((char *)h + FS_RING_REC_OFFSET);
		uint32_t off = 0;
		for (uint32_t hz = 0; hz < p.horizons && off < k; hz++) {
			uint32_t n = *(volatile uint32_t *)&sc->res_n[hz];
			n = n < k - off ? n : k - off;
			for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
				ring[(tail + off + i) & mask] = __ldcg((const uint4 *)&sc->recs[hz][i]);
			off += n;
		}
	}
	__threadfence_system(); /* each writer: its records before the tail */
	__syncthreads();
	if (threadIdx.x == 0 && k > 0)
		*(volatile uint32_t *)&h->tail = tail + k;
}

/* Kernel 2: horizon k's candidates, ranked, as records; the last horizon
 * posts them all. */
__global__ void __launch_bounds__(RA_SWARPS_MAX * 32u)
	fs_ra_select_kernel(const struct fs_ra_params p, struct ra_scratch *sc, const float *logits)
{
	extern __shared__ __align__(16) unsigned char smem[];
	__shared__ uint32_t sh[4];
	const uint32_t k = blockIdx.x, warp = threadIdx.x / 32u, lane = threadIdx.x % 32u;
	const uint32_t nw = blockDim.x / 32u, nt = blockDim.x;
	const uint32_t E = p.experts, T = p.tokens, M = p.top_m;
	const struct ra_layout L = ra_layout_of(E, T, M);
	uint32_t *votes = (uint32_t *)(smem + L.votes), *margk = (uint32_t *)(smem + L.margk);
	uint16_t *pick_e = (uint16_t *)(smem + L.pick_e);
	float *pick_m = (float *)(smem + L.pick_m), *cm = (float *)(smem + L.cm);
	/* Before the logits are ready (while the GEMV runs): the window (its
	 * writes are stream-ordered before the GEMV began) and the ring's
	 * state, kept in thread 0's registers until the post. */
	const uint32_t window = p.window_dev ? *(volatile const uint32_t *)p.window_dev : p.window;
	struct ra_ring_view rv = {0, 0, 0, 0};
	if (p.desc && threadIdx.x == 0)
		rv = ra_ring_peek(p.desc);
	for (uint32_t e = threadIdx.x; e < E; e += nt)
		votes[e] = margk[e] = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	/* The logits are complete and visible past this point (a no-op when
	 * this was an ordinary launch). */
	cudaGridDependencySynchronize();
#endif
	for (uint32_t t = warp; t < T; t += nw) {
		const float *lg = logits + ((size_t)k * T + t) * E;
		if (E <= 32u * 4u)
			ra_topm<4>(lg, E, M, t, lane, pick_e, pick_m);
		else if (E <= 32u * (uint32_t)RA_REG_J)
			ra_topm<RA_REG_J>(lg, E, M, t, lane, pick_e, pick_m);
		else
			ra_topm<0>(lg, E, M, t, lane, pick_e, pick_m);
	}
	__syncthreads();
	/* Votes and best margins; the first vote marks its pick as the owner. */
	for (uint32_t i = threadIdx.x; i < T * M; i += nt) {
		uint32_t e = pick_e[i];
		if (e == 0xffffu)
			continue;
		atomicMax(&margk[e], ord_key(pick_m[i]));
		if (atomicAdd(&votes[e], 1u) == 0)
			pick_e[i] = (uint16_t)(e | RA_PICK_OWNER);
	}
	if (threadIdx.x == 0)
		sh[2] = 0;
	__syncthreads();
	/* Candidates: owners that are not resident (into pick_m's space). */
	uint32_t *cand = (uint32_t *)pick_m;
	const uint32_t *res = resident_of(p, k);
	for (uint32_t i = threadIdx.x; i < T * M; i += nt) {
		uint32_t pe = pick_e[i];
		if (pe == 0xffffu || !(pe & RA_PICK_OWNER))
			continue;
		uint32_t e = pe & ~RA_PICK_OWNER;
		if (res && fs_ra_bit(res, e))
			continue;
		cand[atomicAdd(&sh[2], 1u)] = e;
	}
	__syncthreads();
	/* Each candidate's votes and margin beside it (votes <= 64, e < 4096):
	 * the ranking loop below reads them without an indirection. */
	const uint32_t n = sh[2], out = n < p.max_out ? n : p.max_out;
	for (uint32_t c = threadIdx.x; c < n; c += nt) {
		uint32_t e = cand[c];
		cm[c] = ord_float(margk[e]);
		cand[c] = votes[e] << 16 | e;
	}
	__syncthreads();
	/* Rank by counting who beats whom: exact and order-free. */
	for (uint32_t c = threadIdx.x; c < n; c += nt) {
		const uint32_t ce = cand[c], v = ce >> 16, e = ce & 0xffffu;
		const float mg = cm[c];
		uint32_t rank = 0;
		for (uint32_t x = 0; x < n; x++) {
			uint32_t cx = cand[x];
			rank += fs_ra_better(cx >> 16, cm[x], cx & 0xffffu, v, mg, e);
		}
		if (rank >= out)
			continue;
		float score = fs_ra_score(v, T, mg);
		struct fs_rec r;
		r.type = FS_REC_PREDICT;
		r.aux = FS_PRED_AUX(k + 1u, FS_SRC_KERNEL);
		r.layer = (uint16_t)(p.layer + k + 1u);
		r.expert = (uint16_t)e;
		r.card = (uint16_t)p.card;
		r.window = window;
		r.value = __float_as_uint(score);
		sc->recs[k][rank] = r;
		if (p.out_expert) {
			p.out_expert[(size_t)k * p.max_out + rank] = e;
			p.out_score[(size_t)k * p.max_out + rank] = score;
		}
	}
	if (threadIdx.x == 0) {
		sc->res_n[k] = out;
		if (p.out_count)
			p.out_count[k] = out;
	}

	if (p.horizons > 1) {
		/* Last horizon?  It posts them all.  (fence: our records before
		 * the count; CUDA's threadFenceReduction pattern) */
		__threadfence();
		__syncthreads();
		if (threadIdx.x == 0)
			sh[1] = atomicAdd(&sc->done, 1u) == p.horizons - 1u;
		__syncthreads();
		if (!sh[1])
			return;
		__threadfence();
		if (threadIdx.x == 0)
			sc->done = 0; /* for the next launch (which starts after this grid ends) */
	}
	if (!p.desc)
		return;
	__syncthreads(); /* this block's records and count, before the post reads them */
	ra_post(p, sc, rv);
}

/* Posting alone (FS_RA_STAGE_POST): the records the last selection left in
 * the scratch, again (one block). */
__global__ void fs_ra_post_kernel(const struct fs_ra_params p, struct ra_scratch *sc)
{
	struct ra_ring_view rv = {0, 0, 0, 0};
	if (threadIdx.x == 0)
		rv = ra_ring_peek(p.desc);
	ra_post(p, sc, rv);
}

extern "C" size_t fs_ra_scratch_bytes(const struct fs_ra_params *p)
{
	return sizeof(struct ra_scratch) +
	       sizeof(float) * (size_t)FS_RA_MAX_HORIZONS * p->tokens * p->experts;
}

/* Per device, once: how many SMs (the GEMV's grid is sized to fill them),
 * the selection kernel allowed the shared memory a block may opt into (its
 * layout passes 48 KiB only at E = 4096 with T * M = 2048), and whether it
 * may be a programmatic dependent launch (sm_90 and newer, unless
 * FS_RA_PDL=0). */
struct ra_dev {
	int sms, pdl, ok;
};

/* Allow a kernel the device's opt-in shared memory (less its static). */
template <typename K> static int ra_allow_smem(K kern, int optin)
{
	cudaFuncAttributes a;
	if (cudaFuncGetAttributes(&a, kern) != cudaSuccess || optin < (int)a.sharedSizeBytes)
		return -1;
	int dyn = optin - (int)a.sharedSizeBytes;
	if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn) != cudaSuccess)
		return -1;
	return 0;
}

static void ra_dev_init(struct ra_dev *d, int dev);

static const struct ra_dev *ra_dev_of(void)
{
	static struct ra_dev devs[64];
	int dev = 0;
	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64)
		return NULL;
	struct ra_dev *d = &devs[dev];
	if (!d->ok) {
		/* The first launch may come inside a stream capture (a graph):
		 * the set-up calls below are allowed there in relaxed mode,
		 * which a library may switch to for them (and back). */
		cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
		(void)cudaThreadExchangeStreamCaptureMode(&mode);
		ra_dev_init(d, dev);
		(void)cudaThreadExchangeStreamCaptureMode(&mode);
	}
	return d->ok ? d : NULL;
}

static void ra_dev_init(struct ra_dev *d, int dev)
{
	int major = 0, sms = 0, optin = 0;
	if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
		return;
	if (ra_allow_smem(fs_ra_select_kernel, optin) < 0)
		return;
	const char *env = getenv("FS_RA_PDL");
	d->sms = sms > 0 ? sms : 1;
	d->pdl = major >= 9 && !(env && env[0] == '0');
	d->ok = 1;
}

/* The GEMV.  Tokens per warp: eight (the router read once per eight
 * tokens) unless that leaves the device with fewer than two blocks per SM. */
static int ra_launch_gemv(const struct fs_ra_params *p, const struct ra_dev *dev, float *logits,
			  cudaStream_t st)
{
	const uint32_t rb = (p->experts + RA_LWARPS - 1) / RA_LWARPS;
	uint32_t tpw = RA_TG;
	while (tpw > 1 &&
	       (uint64_t)rb * p->horizons * ((p->tokens + tpw - 1) / tpw) < 2u * (uint64_t)dev->sms)
		tpw /= 2;
	dim3 g1(rb, p->horizons, (p->tokens + tpw - 1) / tpw);
	fs_ra_logits_kernel<<<g1, RA_LTHREADS, 0, st>>>(*p, logits, tpw);
	return cudaGetLastError() == cudaSuccess ? 0 : -EIO;
}

extern "C" int fs_ra_launch_stage(const struct fs_ra_params *p, void *stream, unsigned flags)
{
	if (fs_ra_check(p, NULL, 0) < 0 || !p->scratch)
		return -EINVAL;
	if ((flags & FS_RA_STAGE_POST) && !p->desc)
		return -EINVAL;
	const struct ra_dev *dev = ra_dev_of();
	if (!dev)
		return -EIO;
	struct ra_scratch *sc = (struct ra_scratch *)p->scratch;
	float *logits = (float *)(sc + 1);
	cudaStream_t st = (cudaStream_t)stream;

	if ((flags & FS_RA_STAGE_GEMV) && ra_launch_gemv(p, dev, logits, st) < 0)
		return -EIO;

	if (flags & FS_RA_STAGE_SELECT) {
		uint32_t nw = p->tokens < RA_SWARPS_MAX ? p->tokens : RA_SWARPS_MAX;
		uint32_t smem = ra_layout_of(p->experts, p->tokens, p->top_m).bytes;
		const struct fs_ra_params pc = *p;
		const bool pdl = dev->pdl && (flags & FS_RA_STAGE_GEMV) && !(flags & FS_RA_OPT_NO_PDL);
		cudaLaunchConfig_t cfg = {};
		cudaLaunchAttribute attr[1];
		cfg.gridDim = dim3(p->horizons);
		cfg.blockDim = dim3(nw * 32u);
		cfg.dynamicSmemBytes = smem;
		cfg.stream = st;
		if (pdl) {
			attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
			attr[0].val.programmaticStreamSerializationAllowed = 1;
			cfg.attrs = attr;
			cfg.numAttrs = 1;
		}
		const float *lg = logits;
		if (cudaLaunchKernelEx(&cfg, fs_ra_select_kernel, pc, sc, lg) != cudaSuccess) {
			/* A stream that refuses the dependent launch (outside a
			 * capture, which a failed launch would have invalidated):
			 * an ordinary one. */
			cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
			if (!pdl || cudaStreamIsCapturing(st, &cs) != cudaSuccess ||
			    cs != cudaStreamCaptureStatusNone)
				return -EIO;
			(void)cudaGetLastError();
			cfg.attrs = NULL;
			cfg.numAttrs = 0;
			if (cudaLaunchKernelEx(&cfg, fs_ra_select_kernel, pc, sc, lg) != cudaSuccess)
				return -EIO;
		}
	}

	if (flags & FS_RA_STAGE_POST) {
		fs_ra_post_kernel<<<1, 256, 0, st>>>(*p, sc);
		if (cudaGetLastError() != cudaSuccess)
			return -EIO;
	}
	return 0;
}

extern "C" int fs_ra_launch(const struct fs_ra_params *p, void *stream)
{
	return fs_ra_launch_stage(p, stream, FS_RA_STAGE_GEMV | FS_RA_STAGE_SELECT);
}
