/* SPDX-License-Identifier: Apache-2.0 */
/*
 * router_ahead.cu: the router-ahead kernel (foresight/router_ahead.h).
 *
 * One launch does everything, so the whole thing is one node of a graph:
 *
 *  1. Logits.  Block (x, k) computes eight router rows of horizon k (one
 *     warp a row) against all tokens, eight tokens at a time, with the
 *     hidden rows staged in shared memory as f32.  The router is the only
 *     large input and is read once from memory for T <= 8 (again from L2
 *     for each further group of eight tokens).
 *  2. Selection.  The last block to finish a horizon (a counter per
 *     horizon; CUDA's threadFenceReduction pattern) picks each token's
 *     top-M (one warp a token), aggregates votes and margins in shared
 *     memory, skips resident experts, ranks the candidates and writes the
 *     horizon's prediction records.
 *  3. Posting.  The last horizon to finish posts every horizon's records to
 *     the device ring (block-wide writes, system fence, one tail store per
 *     horizon) and resets the counters for the next launch.
 *
 * Arithmetic follows the rule in the header exactly (explicit __fmaf_rn and
 * __fadd_rn, so nvcc's contraction cannot change a bit), which is what lets
 * the CPU reference check the kernel bit for bit.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <errno.h>

#include "foresight/router_ahead.h"
#include "fs_ring_dev.h"
#include "router_ahead_rule.h"

#define RA_WARPS 8u
#define RA_THREADS (RA_WARPS * 32u)
#define RA_TG 8u            /* tokens per group (accumulators per lane) */
#define RA_CH 2048u         /* hidden elements staged per chunk (multiple of 256) */
#define RA_G (RA_CH / 256u) /* 8-element groups per lane per chunk */
#define RA_NONE 0xffffffffu
#define RA_PICK_OWNER 0x8000u

/* Scratch: counters first (reset by each launch's last block), then the
 * per-horizon results and records, then the logits. */
struct ra_scratch {
	uint32_t cnt[FS_RA_MAX_HORIZONS]; /* blocks of horizon k done */
	uint32_t done;                    /* horizons done */
	uint32_t res_n[FS_RA_MAX_HORIZONS];
	uint32_t pad[9];
	struct fs_rec recs[FS_RA_MAX_HORIZONS][FS_RA_MAX_OUT];
	/* float logits[K][T][E] follows */
};

/*
 * Shared memory (dynamic, one buffer for the two phases):
 *  phase 1: float h[RA_TG][RA_CH], the hidden rows staged as f32;
 *  phase 2: uint32_t votes[E], margk[E] (ordered keys of the best margins),
 *           uint16_t pick_e[T*M] (rounded to 4 bytes), float pick_m[T*M]
 *           (then the candidates), float rows[RA_WARPS][E] (eight tokens'
 *           logits: the top-M scans read shared memory, not L2).
 */
struct ra_layout {
	uint32_t votes, margk, pick_e, pick_m, rows, bytes;
};

__host__ __device__ static inline struct ra_layout ra_layout_of(uint32_t E, uint32_t T, uint32_t M)
{
	struct ra_layout l;
	uint32_t tm = T * M;
	l.votes = 0;
	l.margk = l.votes + 4 * E;
	l.pick_e = l.margk + 4 * E;
	l.pick_m = l.pick_e + (2 * tm + 15) / 16 * 16;
	l.rows = l.pick_m + (4 * tm + 15) / 16 * 16;
	l.bytes = l.rows + 4 * RA_WARPS * E;
	uint32_t p1 = (uint32_t)(sizeof(float) * RA_TG * RA_CH);
	if (l.bytes < p1)
		l.bytes = p1;
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

/* Phase 1: logits of this block's rows for every token. */
__device__ static void ra_logits(const struct fs_ra_params &p, unsigned char *smem, float *logits)
{
	float(*h)[RA_CH] = (float(*)[RA_CH])smem;
	const uint32_t k = blockIdx.y, warp = threadIdx.x / 32u, lane = threadIdx.x % 32u;
	const uint32_t e = blockIdx.x * RA_WARPS + warp, d = p.dim, T = p.tokens;
	const size_t esz = p.router_type == FS_RA_F32 ? 4 : 2;
	const char *row = (const char *)router_of(p, k) + (size_t)(e < p.experts ? e : 0) * d * esz;
	const bool vec = ((uintptr_t)row % 16u) == 0;
	/* The hidden rows load 8 elements at a time when every row starts
	 * 16-byte aligned. */
	const size_t hsz = p.hidden_type == FS_RA_F32 ? 4 : 2;
	const bool hvec = ((uintptr_t)p.hidden % 16u) == 0 && (d * hsz) % 16u == 0;
	for (uint32_t tg = 0; tg < T; tg += RA_TG) {
		float acc[RA_TG];
#pragma unroll
		for (uint32_t t = 0; t < RA_TG; t++)
			acc[t] = 0.0f;
		for (uint32_t c0 = 0; c0 < d; c0 += RA_CH) {
			/* This chunk of the router row, in flight while the block
			 * stages the hidden rows. */
			struct ra_raw raw[RA_G];
			if (e < p.experts) {
#pragma unroll
				for (uint32_t g = 0; g < RA_G; g++)
					ra_load(row, p.router_type, c0 + g * 256u + lane * 8u, d, vec,
						&raw[g]);
			}
			__syncthreads();
			const uint32_t tn = T - tg < RA_TG ? T - tg : RA_TG;
			const uint32_t cn = d - c0 < RA_CH ? d - c0 : RA_CH;
			if (hvec && cn % 8u == 0) {
				/* 8 elements per load (16 bytes of bf16/f16, 32 of f32) */
				const uint32_t gpr = cn / 8u;
#pragma unroll 4
				for (uint32_t x = threadIdx.x; x < tn * gpr; x += RA_THREADS) {
					uint32_t t = x / gpr, i = (x % gpr) * 8u;
					const char *src = (const char *)p.hidden +
							  ((size_t)(tg + t) * d + c0 + i) * hsz;
					struct ra_raw r;
					if (p.hidden_type == FS_RA_F32) {
						r.a = __ldg((const uint4 *)src);
						r.b = __ldg((const uint4 *)src + 1);
					} else {
						r.a = __ldg((const uint4 *)src);
					}
					float v[8];
					ra_unpack(src, p.hidden_type, 0, 8, true, &r, v);
					*(float4 *)&h[t][i] = make_float4(v[0], v[1], v[2], v[3]);
					*(float4 *)&h[t][i + 4u] = make_float4(v[4], v[5], v[6], v[7]);
				}
			} else {
				for (uint32_t x = threadIdx.x; x < tn * RA_CH; x += RA_THREADS) {
					uint32_t t = x / RA_CH, i = x % RA_CH;
					if (i < cn)
						h[t][i] = ld_elem(p.hidden, p.hidden_type,
								  (size_t)(tg + t) * d + c0 + i);
				}
			}
			__syncthreads();
			if (e >= p.experts)
				continue;
#pragma unroll
			for (uint32_t g = 0; g < RA_G; g++) {
				uint32_t j = g * 256u, i = c0 + j + lane * 8u;
				if (i >= d)
					break;
				uint32_t n = d - i < 8u ? d - i : 8u;
				float w[8];
				ra_unpack(row, p.router_type, i, n, vec, &raw[g], w);
#pragma unroll
				for (uint32_t t = 0; t < RA_TG; t++) {
					if (t >= tn)
						break;
					/* two 16-byte shared loads: 2-way bank conflicts at worst */
					float4 a = *(const float4 *)&h[t][j + lane * 8u];
					float4 b = *(const float4 *)&h[t][j + lane * 8u + 4u];
					float hv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
					for (uint32_t q = 0; q < 8; q++)
						if (q < n)
							acc[t] = __fmaf_rn(w[q], hv[q], acc[t]);
				}
			}
		}
		if (e >= p.experts)
			continue;
#pragma unroll
		for (uint32_t t = 0; t < RA_TG; t++)
			for (uint32_t o = 16; o >= 1; o /= 2)
				acc[t] = __fadd_rn(acc[t], __shfl_xor_sync(0xffffffffu, acc[t], (int)o));
		if (lane == 0)
			for (uint32_t t = 0; t < RA_TG && tg + t < T; t++)
				logits[((size_t)k * T + tg + t) * p.experts + e] = acc[t];
	}
}

/* Phase 2: the horizon's candidates, ranked, as records. */
__device__ static void ra_select(const struct fs_ra_params &p, unsigned char *smem, struct ra_scratch *sc,
				 const float *logits, uint32_t *sh)
{
	const uint32_t k = blockIdx.y, warp = threadIdx.x / 32u, lane = threadIdx.x % 32u;
	const uint32_t E = p.experts, T = p.tokens, M = p.top_m;
	const struct ra_layout L = ra_layout_of(E, T, M);
	uint32_t *votes = (uint32_t *)(smem + L.votes), *margk = (uint32_t *)(smem + L.margk);
	uint16_t *pick_e = (uint16_t *)(smem + L.pick_e);
	float *pick_m = (float *)(smem + L.pick_m), *rows = (float *)(smem + L.rows);
	for (uint32_t e = threadIdx.x; e < E; e += RA_THREADS)
		votes[e] = margk[e] = 0;
	/* Each token's top-M (one warp a token, eight at a time, their logits
	 * in shared memory): pick m is the best key below pick m-1. */
	for (uint32_t t0 = 0; t0 < T; t0 += RA_WARPS) {
		const uint32_t tn = T - t0 < RA_WARPS ? T - t0 : RA_WARPS;
		const float *src = logits + ((size_t)k * T + t0) * E;
		for (uint32_t x = threadIdx.x; x < tn * E; x += RA_THREADS)
			rows[x] = __ldcg(src + x);
		__syncthreads();
		const uint32_t t = t0 + warp;
		if (warp < tn) {
			const float *lg = rows + (size_t)warp * E;
			float prev_l = 0.0f, top = 0.0f;
			uint32_t prev_e = RA_NONE, m = 0;
			for (; m < M; m++) {
				float bl = 0.0f;
				uint32_t be = RA_NONE;
				for (uint32_t e = lane; e < E; e += 32u) {
					float l = lg[e];
					if (prev_e != RA_NONE && !fs_ra_key_below(l, e, prev_l, prev_e))
						continue;
					if (be == RA_NONE || fs_ra_key_below(bl, be, l, e))
						bl = l, be = e;
				}
				for (int o = 16; o >= 1; o /= 2) {
					float ol = __shfl_xor_sync(0xffffffffu, bl, o);
					uint32_t oe = __shfl_xor_sync(0xffffffffu, be, o);
					if (oe != RA_NONE &&
					    (be == RA_NONE || fs_ra_key_below(bl, be, ol, oe)))
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
		__syncthreads();
	}
	/* Votes and best margins; the first vote marks its pick as the owner. */
	for (uint32_t i = threadIdx.x; i < T * M; i += RA_THREADS) {
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
	for (uint32_t i = threadIdx.x; i < T * M; i += RA_THREADS) {
		uint32_t pe = pick_e[i];
		if (pe == 0xffffu || !(pe & RA_PICK_OWNER))
			continue;
		uint32_t e = pe & ~RA_PICK_OWNER;
		if (res && fs_ra_bit(res, e))
			continue;
		cand[atomicAdd(&sh[2], 1u)] = e;
	}
	__syncthreads();
	/* Rank by counting who beats whom: exact and order-free. */
	const uint32_t n = sh[2], out = n < p.max_out ? n : p.max_out;
	const uint32_t window = p.window_dev ? *(volatile const uint32_t *)p.window_dev : p.window;
	for (uint32_t c = threadIdx.x; c < n; c += RA_THREADS) {
		uint32_t e = cand[c], v = votes[e], rank = 0;
		float mg = ord_float(margk[e]);
		for (uint32_t x = 0; x < n; x++) {
			uint32_t e2 = cand[x];
			rank += fs_ra_better(votes[e2], ord_float(margk[e2]), e2, v, mg, e);
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
}

__global__ void __launch_bounds__(RA_THREADS) fs_ra_kernel(const struct fs_ra_params p)
{
	extern __shared__ __align__(16) unsigned char smem[];
	__shared__ uint32_t sh[4];
	struct ra_scratch *sc = (struct ra_scratch *)p.scratch;
	float *logits = (float *)(sc + 1);
	const uint32_t k = blockIdx.y;

	ra_logits(p, smem, logits);

	/* Last block of horizon k?  (fence: our logits before the count) */
	__threadfence();
	__syncthreads();
	if (threadIdx.x == 0)
		sh[0] = atomicAdd(&sc->cnt[k], 1u) == gridDim.x - 1u;
	__syncthreads();
	if (!sh[0])
		return;
	__threadfence();
	ra_select(p, smem, sc, logits, sh);

	/* Last horizon?  It posts them all. */
	__threadfence();
	__syncthreads();
	if (threadIdx.x == 0)
		sh[1] = atomicAdd(&sc->done, 1u) == p.horizons - 1u;
	__syncthreads();
	if (!sh[1])
		return;
	__threadfence();
	if (p.desc)
		for (uint32_t h = 0; h < p.horizons; h++)
			fs_dev_ring_post_block((struct fs_dev_desc *)p.desc, sc->recs[h],
					       *(volatile uint32_t *)&sc->res_n[h], sh);
	if (threadIdx.x == 0) {
		for (uint32_t h = 0; h < FS_RA_MAX_HORIZONS; h++)
			sc->cnt[h] = 0;
		sc->done = 0;
	}
}

extern "C" size_t fs_ra_scratch_bytes(const struct fs_ra_params *p)
{
	return sizeof(struct ra_scratch) +
	       sizeof(float) * (size_t)FS_RA_MAX_HORIZONS * p->tokens * p->experts;
}

/* Shared memory a launch needs, against what the device allows a block
 * (its opt-in maximum less the kernel's static shared memory); the
 * kernel's dynamic limit is raised as far as a launch needs it. */
static int ra_smem_ok(uint32_t bytes)
{
	static int limit[64];
	static uint32_t raised[64];
	int dev = 0;
	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64)
		return 0;
	if (!limit[dev]) {
		int optin = 0;
		cudaFuncAttributes fa;
		if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) !=
			    cudaSuccess ||
		    cudaFuncGetAttributes(&fa, fs_ra_kernel) != cudaSuccess)
			return 0;
		limit[dev] = optin - (int)fa.sharedSizeBytes;
	}
	if (bytes > (uint32_t)limit[dev])
		return 0;
	if (bytes > 48u * 1024u && bytes > raised[dev]) {
		if (cudaFuncSetAttribute(fs_ra_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
					 (int)bytes) != cudaSuccess)
			return 0;
		raised[dev] = bytes;
	}
	return 1;
}

extern "C" int fs_ra_launch(const struct fs_ra_params *p, void *stream)
{
	if (fs_ra_check(p, NULL, 0) < 0 || !p->scratch)
		return -EINVAL;
	uint32_t smem = ra_layout_of(p->experts, p->tokens, p->top_m).bytes;
	if (!ra_smem_ok(smem))
		return -EINVAL; /* more experts x tokens than this device's shared memory holds */
	dim3 grid((p->experts + RA_WARPS - 1) / RA_WARPS, p->horizons);
	fs_ra_kernel<<<grid, RA_THREADS, smem, (cudaStream_t)stream>>>(*p);
	return cudaGetLastError() == cudaSuccess ? 0 : -EIO;
}
