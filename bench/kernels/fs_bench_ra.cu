/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-bench-ra: the router-ahead kernel's cost, and its path into the daemon.
 *
 *   fs-bench-ra kernel [REPS]     time per launch at model shapes, against
 *                                 the memory floor and a cuBLAS GEMM + top-k
 *                                 baseline, all measured in this run; then
 *                                 the stage table: each stage timed alone at
 *                                 the same shapes (the GEMV, the selection
 *                                 on the logits already there, with and
 *                                 without posting, posting alone, the pair
 *                                 with posting), the launch costs (one empty
 *                                 kernel, two, two with the second a
 *                                 dependent launch) and the SM clock
 *   fs-bench-ra e2e SOCKET [N]    with a foresightd --backend cuda running:
 *                                 launch -> records seen by the daemon, and
 *                                 launch -> first copy issued, N launches
 *
 * Times per launch come from CUDA graphs of 50 back-to-back launches (GPU
 * time, host launch cost excluded), best of REPS replays.  The floor is the
 * routers' bytes over the device read bandwidth measured by a streaming
 * read kernel here.  The baseline is what an engine without this kernel
 * would run: one cublasGemmEx for all horizons' logits (bf16 in, f32 out)
 * and a top-M kernel (one block per token and horizon), with neither
 * aggregation nor posting, so it is a lower bound for that path.
 * Posting rows post into a device ring in pinned host memory, drained
 * between replays; every record posted must be consumed (else the row
 * fails).  Exits non-zero when a promised row is missing or failed.
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "foresight/foresight.h"
#include "foresight/router_ahead.h"
extern "C" {
/* fs_ring_format (common/fs_ring.c) has C linkage; the header says nothing */
#include "fs_ring.h"
}
#include "fs_ring_dev.h"
#include "router_ahead_stage.h"

#define CK(x)                                                                                              \
	do {                                                                                               \
		cudaError_t e_ = (x);                                                                      \
		if (e_ != cudaSuccess) {                                                                   \
			fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
			exit(1);                                                                           \
		}                                                                                          \
	} while (0)

#define GRAPH_LAUNCHES 50

static uint64_t rng = 88172645463325252ull;
static float frand(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (float)(rng >> 40) / 16777216.0f - 0.5f;
}

static void *dev_bf16(size_t n, float scale)
{
	__nv_bfloat16 *h = (__nv_bfloat16 *)malloc(n * 2), *d;
	for (size_t i = 0; i < n; i++)
		h[i] = __float2bfloat16(frand() * scale);
	CK(cudaMalloc((void **)&d, n * 2));
	CK(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
	free(h);
	return d;
}

/* ---- the floor: streaming read bandwidth ------------------------------ */

__global__ void read_kernel(const uint4 *p, size_t n, unsigned *sink)
{
	unsigned acc = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		uint4 v = __ldcs(p + i);
		acc ^= v.x ^ v.y ^ v.z ^ v.w;
	}
	if (acc == 0x12345678u)
		*sink = acc; /* keeps the loads */
}

static double read_gbps(void)
{
	size_t bytes = 2ull << 30;
	uint4 *p;
	unsigned *sink;
	CK(cudaMalloc((void **)&p, bytes));
	CK(cudaMalloc((void **)&sink, 4));
	CK(cudaMemset(p, 1, bytes));
	int sms;
	CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	float best = 1e30f;
	for (int r = 0; r < 5; r++) {
		CK(cudaEventRecord(a));
		read_kernel<<<sms * 8, 512>>>(p, bytes / 16, sink);
		CK(cudaEventRecord(b));
		CK(cudaEventSynchronize(b));
		float ms;
		CK(cudaEventElapsedTime(&ms, a, b));
		best = ms < best ? ms : best;
	}
	cudaFree(p), cudaFree(sink);
	return (double)bytes / (best * 1e6);
}

/* ---- the baseline's top-M: one block per (horizon, token) ------------- */

__global__ void topm_kernel(const float *logits, int E, int T, int M, unsigned *out)
{
	/* logits: column-major [K*E][T] from cuBLAS: column t holds all rows. */
	const int t = blockIdx.x, k = blockIdx.y;
	const float *col = logits + (size_t)t * gridDim.y * E + (size_t)k * E;
	__shared__ float bl[256];
	__shared__ int be[256];
	float prev_l = INFINITY;
	int prev_e = -1;
	for (int m = 0; m < M; m++) {
		float l = -INFINITY;
		int e = -1;
		for (int i = threadIdx.x; i < E; i += blockDim.x) {
			float v = col[i];
			bool below = v < prev_l || (v == prev_l && i > prev_e);
			if (below && (e < 0 || v > l || (v == l && i < e)))
				l = v, e = i;
		}
		bl[threadIdx.x] = l, be[threadIdx.x] = e;
		__syncthreads();
		for (int s = blockDim.x / 2; s > 0; s /= 2) {
			if (threadIdx.x < s) {
				float ol = bl[threadIdx.x + s];
				int oe = be[threadIdx.x + s];
				if (oe >= 0 && (be[threadIdx.x] < 0 || ol > bl[threadIdx.x] ||
						(ol == bl[threadIdx.x] && oe < be[threadIdx.x])))
					bl[threadIdx.x] = ol, be[threadIdx.x] = oe;
			}
			__syncthreads();
		}
		prev_l = bl[0], prev_e = be[0];
		if (threadIdx.x == 0)
			out[((size_t)k * T + t) * M + m] = (unsigned)prev_e;
		__syncthreads();
	}
}

/* A device ring in pinned host memory, as a client region holds one; the
 * host drains it between replays (the GPU is idle then) and counts. */
struct dev_ring {
	void *mem;
	struct fs_ring_cons cons;
	struct fs_dev_desc *desc;
	void *desc_dev;
	uint64_t consumed;
};

static void ring_make(struct dev_ring *r, uint32_t entries)
{
	size_t bytes = fs_ring_bytes(entries);
	CK(cudaHostAlloc(&r->mem, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
	if (fs_ring_format(&r->cons, r->mem, bytes, entries) != 0) {
		fprintf(stderr, "fs_ring_format failed\n");
		exit(1);
	}
	void *dev;
	CK(cudaHostGetDevicePointer(&dev, r->mem, 0));
	CK(cudaHostAlloc((void **)&r->desc, sizeof(*r->desc), cudaHostAllocMapped | cudaHostAllocPortable));
	memset(r->desc, 0, sizeof(*r->desc));
	uint32_t l = 0;
	while ((1u << l) < entries)
		l++;
	r->desc->word = FS_DEV_DESC((uintptr_t)dev, l);
	CK(cudaHostGetDevicePointer(&r->desc_dev, r->desc, 0));
	r->consumed = 0;
}

static void ring_drain(struct dev_ring *r)
{
	static struct fs_rec buf[4096];
	uint32_t n;
	while ((n = fs_ring_consume(&r->cons, buf, 4096)) > 0)
		r->consumed += n;
}

/* GPU time of one replay of a graph of GRAPH_LAUNCHES launches, / launches.
 * ring (optional) is drained after every replay. */
static double graph_us_ring(cudaGraphExec_t ge, cudaStream_t st, int reps, struct dev_ring *ring)
{
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	CK(cudaGraphLaunch(ge, st)); /* warm */
	CK(cudaStreamSynchronize(st));
	if (ring)
		ring_drain(ring);
	float best = 1e30f;
	for (int r = 0; r < reps; r++) {
		CK(cudaEventRecord(a, st));
		CK(cudaGraphLaunch(ge, st));
		CK(cudaEventRecord(b, st));
		CK(cudaEventSynchronize(b));
		float ms;
		CK(cudaEventElapsedTime(&ms, a, b));
		best = ms < best ? ms : best;
		if (ring)
			ring_drain(ring);
	}
	cudaEventDestroy(a), cudaEventDestroy(b);
	return best * 1000.0 / GRAPH_LAUNCHES;
}

static double graph_us(cudaGraphExec_t ge, cudaStream_t st, int reps)
{
	return graph_us_ring(ge, st, reps, NULL);
}

/* One stage (or set of stages) of the kernel, GRAPH_LAUNCHES launches in a
 * graph; -1 when a launch failed. */
static double stage_us(const struct fs_ra_params *p, unsigned flags, cudaStream_t st, int reps,
		       struct dev_ring *ring)
{
	cudaGraph_t g;
	cudaGraphExec_t ge;
	CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
	int bad = 0;
	for (int i = 0; i < GRAPH_LAUNCHES; i++)
		if (fs_ra_launch_stage(p, st, flags) != 0)
			bad = 1;
	cudaError_t ce = cudaStreamEndCapture(st, &g);
	if (bad || ce != cudaSuccess) {
		fprintf(stderr, "stage 0x%x: launch failed (%s)\n", flags, cudaGetErrorString(ce));
		if (ce == cudaSuccess)
			cudaGraphDestroy(g);
		(void)cudaGetLastError();
		return -1;
	}
	CK(cudaGraphInstantiate(&ge, g, 0));
	double us = graph_us_ring(ge, st, reps, ring);
	cudaGraphExecDestroy(ge), cudaGraphDestroy(g);
	return us;
}

struct shape {
	const char *name;
	int d, E;
};

__global__ void empty_kernel(void)
{
}

/* The pair of a dependent launch: the first lets the second start at
 * once, the second waits for the first's completion. */
__global__ void empty_primary(void)
{
	cudaTriggerProgrammaticLaunchCompletion();
}

__global__ void empty_secondary(void)
{
	cudaGridDependencySynchronize();
}

/* Launch costs, timed like the kernel (a graph of GRAPH_LAUNCHES, best
 * replay): kernels = 1: one empty kernel; 2: two; 3: two, the second a
 * programmatic dependent launch (the kernel's GEMV -> selection edge).
 * The goal compares the kernel with its memory floor plus one launch. */
static double launch_us(cudaStream_t st, int reps, int kernels)
{
	cudaGraph_t g;
	cudaGraphExec_t ge;
	CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
	for (int i = 0; i < GRAPH_LAUNCHES; i++) {
		if (kernels == 1) {
			empty_kernel<<<1, 32, 0, st>>>();
		} else if (kernels == 2) {
			empty_kernel<<<1, 32, 0, st>>>();
			empty_kernel<<<1, 32, 0, st>>>();
		} else {
			empty_primary<<<1, 32, 0, st>>>();
			cudaLaunchConfig_t cfg = {};
			cudaLaunchAttribute attr[1];
			attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
			attr[0].val.programmaticStreamSerializationAllowed = 1;
			cfg.gridDim = dim3(1), cfg.blockDim = dim3(32), cfg.stream = st;
			cfg.attrs = attr, cfg.numAttrs = 1;
			CK(cudaLaunchKernelEx(&cfg, empty_secondary));
		}
	}
	CK(cudaStreamEndCapture(st, &g));
	CK(cudaGraphInstantiate(&ge, g, 0));
	double us = graph_us(ge, st, reps);
	cudaGraphExecDestroy(ge), cudaGraphDestroy(g);
	return us;
}

/* One shape's stage times (us; < 0: failed). */
struct stages {
	const char *name;
	int d, E, K, T;
	double floor_us, full, gemv, sel, selp, post, fullp;
	int post_ok;
};

#define N_STAGE_VALUES 6

static int stages_ok(const struct stages *s)
{
	const double v[N_STAGE_VALUES] = {s->full, s->gemv, s->sel, s->selp, s->post, s->fullp};
	for (int i = 0; i < N_STAGE_VALUES; i++)
		if (!(v[i] > 0 && v[i] < 1e6))
			return 0;
	return s->post_ok;
}

/* The SM clock while a kernel runs: clock64() cycles over %globaltimer
 * nanoseconds across a spin of ~200 us on one SM.  Small kernels may run
 * before the clock has ramped up; the stage table is read against it. */
__global__ void clock_kernel(double *mhz)
{
	uint64_t t0, t1;
	long long c0 = clock64();
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
	while (t1 - t0 < 200000);
	long long c1 = clock64();
	*mhz = (double)(c1 - c0) * 1000.0 / (double)(t1 - t0);
}

static double sm_mhz(void)
{
	double *d, h = 0;
	CK(cudaMalloc((void **)&d, sizeof(double)));
	clock_kernel<<<1, 1>>>(d);
	CK(cudaMemcpy(&h, d, sizeof(double), cudaMemcpyDeviceToHost));
	cudaFree(d);
	return h;
}

static int bench_kernel(int reps)
{
	static const struct shape shapes[] = {{"Qwen3-Next", 2048, 512},
					      {"Qwen3-30B-A3B", 2048, 128},
					      {"Mixtral-8x7B", 4096, 8},
					      {"DeepSeek-V3", 7168, 256}};
	static const int tokens[] = {1, 2, 4, 8, 16, 64};
	/* FS_BENCH_RA_QUICK=1: K 1, T 1, 8 and 64 only (run.sh's nsys pass). */
	const char *qenv = getenv("FS_BENCH_RA_QUICK");
	const int quick = qenv && qenv[0] == '1';
	cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, 0));
	double bw = read_gbps();
	printf("device: %s, read bandwidth measured here: %.0f GB/s\n", prop.name, bw);
	int clock_khz = 0;
	CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
	double mhz_before = sm_mhz();
	printf("time per launch: CUDA graph of %d launches, best of %d replays; top-M 10 (Mixtral 2), "
	       "max_out 48 (8); bf16 routers and hidden rows\n\n",
	       GRAPH_LAUNCHES, reps);
	cublasHandle_t cb;
	if (cublasCreate(&cb) != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "cublasCreate failed\n");
		return 1;
	}
	cudaStream_t st;
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	cublasSetStream(cb, st);
	double lus = launch_us(st, reps, 1), lus2 = launch_us(st, reps, 2), lusd = launch_us(st, reps, 3);
	printf("one launch (an empty kernel, same timing): %.2f us\n\n", lus);
	struct dev_ring ring;
	ring_make(&ring, 1u << 14);
	static struct stages stv[64];
	int nst = 0, nst_want = 0;
	printf("| model | d | E | K | T | router MiB | floor us | kernel us | kernel/floor | "
	       "kernel/(floor+launch) | cuBLAS+top-M us | baseline/kernel |\n"
	       "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	double worst_fl = 0, worst_bk = 1e30;
	char worst_fl_at[96] = "", worst_bk_at[96] = "";
	for (unsigned si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
		const struct shape *s = &shapes[si];
		for (int K = 1; K <= 3; K += 2) {
			/* routers stacked: one GEMM serves every horizon in the baseline */
			char *routers = (char *)dev_bf16((size_t)K * s->E * s->d, 0.05f);
			for (unsigned ti = 0; ti < sizeof(tokens) / sizeof(tokens[0]); ti++) {
				int T = tokens[ti];
				if (K == 3 && T != 1 && T != 8)
					continue;
				if (quick && (K != 1 || (T != 1 && T != 8 && T != 64)))
					continue;
				int M = s->E < 10 ? 2 : 10, OUT = s->E < 48 ? s->E : 48;
				void *hid = dev_bf16((size_t)T * s->d, 1.0f);
				struct fs_ra_params p;
				memset(&p, 0, sizeof(p));
				p.hidden = hid, p.hidden_type = FS_RA_BF16, p.tokens = (uint32_t)T;
				p.dim = (uint32_t)s->d, p.router_type = FS_RA_BF16,
				p.experts = (uint32_t)s->E;
				p.horizons = (uint32_t)K, p.top_m = (uint32_t)M, p.max_out = (uint32_t)OUT;
				for (int k = 0; k < K; k++)
					p.router[k] = routers + (size_t)k * s->E * s->d * 2;
				CK(cudaMalloc((void **)&p.out_expert, (size_t)K * OUT * 4));
				CK(cudaMalloc((void **)&p.out_score, (size_t)K * OUT * 4));
				CK(cudaMalloc((void **)&p.out_count, 3 * 4));
				size_t sb = fs_ra_scratch_bytes(&p);
				CK(cudaMalloc(&p.scratch, sb));
				CK(cudaMemset(p.scratch, 0, sb));

				cudaGraph_t g;
				cudaGraphExec_t ge;
				CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
				for (int i = 0; i < GRAPH_LAUNCHES; i++)
					if (fs_ra_launch(&p, st) != 0)
						return fprintf(stderr, "launch failed\n"), 1;
				CK(cudaStreamEndCapture(st, &g));
				CK(cudaGraphInstantiate(&ge, g, 0));
				double kus = graph_us(ge, st, reps);
				cudaGraphExecDestroy(ge), cudaGraphDestroy(g);

				/* baseline: logits (K*E x T, f32) = routers (K*E x d) . hidden^T */
				float *logits;
				unsigned *topm;
				CK(cudaMalloc((void **)&logits, (size_t)K * s->E * T * 4));
				CK(cudaMalloc((void **)&topm, (size_t)K * T * M * 4));
				const float one = 1.0f, zero = 0.0f;
				CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
				for (int i = 0; i < GRAPH_LAUNCHES; i++) {
					cublasStatus_t cs = cublasGemmEx(
						cb, CUBLAS_OP_T, CUBLAS_OP_N, K * s->E, T, s->d, &one,
						routers, CUDA_R_16BF, s->d, hid, CUDA_R_16BF, s->d, &zero,
						logits, CUDA_R_32F, K * s->E, CUBLAS_COMPUTE_32F,
						CUBLAS_GEMM_DEFAULT);
					if (cs != CUBLAS_STATUS_SUCCESS)
						return fprintf(stderr, "cublasGemmEx: %d\n", (int)cs), 1;
					topm_kernel<<<dim3(T, K), 256, 0, st>>>(logits, s->E, T, M, topm);
				}
				CK(cudaStreamEndCapture(st, &g));
				CK(cudaGraphInstantiate(&ge, g, 0));
				double bus = graph_us(ge, st, reps);
				cudaGraphExecDestroy(ge), cudaGraphDestroy(g);

				/* The stages alone, on the same inputs and scratch (the
				 * selection reads the logits the launches above left). */
				double mib = (double)K * s->E * s->d * 2 / (1 << 20);
				double floor_us = (double)K * s->E * s->d * 2 / (bw * 1e3);
				struct stages *sv = &stv[nst_want++];
				memset(sv, 0, sizeof(*sv));
				sv->name = s->name, sv->d = s->d, sv->E = s->E, sv->K = K, sv->T = T;
				sv->floor_us = floor_us, sv->full = kus;
				sv->gemv = stage_us(&p, FS_RA_STAGE_GEMV, st, reps, NULL);
				sv->sel = stage_us(&p, FS_RA_STAGE_SELECT | FS_RA_OPT_NO_PDL, st, reps, NULL);
				uint32_t cnt[3] = {0, 0, 0};
				CK(cudaMemcpy(cnt, p.out_count, (size_t)K * 4, cudaMemcpyDeviceToHost));
				uint64_t per = (uint64_t)cnt[0] + cnt[1] + cnt[2];
				struct fs_ra_params pp = p;
				pp.desc = ring.desc_dev;
				uint64_t c0 = ring.consumed;
				sv->selp = stage_us(&pp, FS_RA_STAGE_SELECT | FS_RA_OPT_NO_PDL, st, reps,
						    &ring);
				sv->post = stage_us(&pp, FS_RA_STAGE_POST, st, reps, &ring);
				sv->fullp = stage_us(&pp, FS_RA_STAGE_GEMV | FS_RA_STAGE_SELECT, st, reps,
						     &ring);
				uint64_t want = 3ull * (uint64_t)(reps + 1) * GRAPH_LAUNCHES * per;
				sv->post_ok = per > 0 && ring.consumed - c0 == want &&
					      ring.cons.bad_record == 0 && ring.cons.hdr->full == 0;
				if (!sv->post_ok)
					fprintf(stderr,
						"%s K %d T %d: %llu records consumed from the posting stages, "
						"%llu expected (%llu a launch), bad %u, full %u\n",
						s->name, K, T, (unsigned long long)(ring.consumed - c0),
						(unsigned long long)want, (unsigned long long)per,
						(unsigned)ring.cons.bad_record,
						(unsigned)ring.cons.hdr->full);
				nst += stages_ok(sv);
				double fl = kus / (floor_us + lus);
				printf("| %s | %d | %d | %d | %d | %.2f | %.2f | %.2f | %.1f | %.2f | %.2f | %.2f |\n",
				       s->name, s->d, s->E, K, T, mib, floor_us, kus, kus / floor_us, fl, bus,
				       bus / kus);
				if (T <= 8 && fl > worst_fl) {
					worst_fl = fl;
					snprintf(worst_fl_at, sizeof(worst_fl_at), "%s K %d T %d", s->name, K,
						 T);
				}
				if (bus / kus < worst_bk) {
					worst_bk = bus / kus;
					snprintf(worst_bk_at, sizeof(worst_bk_at), "%s K %d T %d", s->name, K,
						 T);
				}
				fflush(stdout);
				cudaFree(logits), cudaFree(topm), cudaFree(hid), cudaFree(p.scratch);
				cudaFree(p.out_expert), cudaFree(p.out_score), cudaFree(p.out_count);
			}
			cudaFree(routers);
		}
	}
	cublasDestroy(cb);
	/* bench/kernels/run.sh reads these two lines into its goal rows. */
	printf("\nworst_floor_launch_ratio_t8 %.2f at %s\n", worst_fl, worst_fl_at);
	printf("worst_baseline_over_kernel %.2f at %s\n", worst_bk, worst_bk_at);

	double mhz_after = sm_mhz();
	printf("\n## Where a launch's time goes (stage table)\n\n");
	printf("SM clock measured in a kernel (clock64 over globaltimer, 200 us): %.0f MHz before the "
	       "launch table, %.0f MHz after the stages (device maximum %.0f MHz).\n",
	       mhz_before, mhz_after, (double)clock_khz / 1000.0);
	printf("Launch costs, same timing: one empty kernel %.2f us; two %.2f us; two, the second a "
	       "dependent launch (programmatic, as the kernel's GEMV -> selection) %.2f us.\n",
	       lus, lus2, lusd);
	printf("Each stage alone, a graph of %d, best of %d replays, same inputs as above: GEMV = the "
	       "logits; select = top-M, votes, "
	       "ranking on the logits already there (an ordinary launch), +post = posting into a device "
	       "ring in pinned host memory (drained between replays, every record counted); post = "
	       "posting alone; launch = GEMV + select as fs_ra_launch() does it (dependent launch).\n\n",
	       GRAPH_LAUNCHES, reps);
	printf("| model | K | T | floor+launch us | GEMV us | select us | select+post us | post us | "
	       "launch us | launch+post us | launch - GEMV - select us |\n"
	       "|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (int i = 0; i < nst_want; i++) {
		const struct stages *v = &stv[i];
		printf("| %s | %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |%s\n",
		       v->name, v->K, v->T, v->floor_us + lus, v->gemv, v->sel, v->selp, v->post, v->full,
		       v->fullp, v->full - v->gemv - v->sel, stages_ok(v) ? "" : " FAILED");
	}
	/* bench/kernels/run.sh reads this line into its stage row. */
	printf("\nstage_rows %d of %d\n", nst, nst_want);
	return nst == nst_want && nst_want > 0 ? 0 : 1;
}

/* ---- end to end: the daemon sees the kernel's records ----------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The daemon's clients[] entry for us: dev_seen_ns and dev_records. */
static int dev_seen(fs_client *c, double *seen_ns, double *records)
{
	static char buf[1 << 20];
	int n = fs_client_stats_json(c, buf, sizeof(buf));
	if (n < 0 || (size_t)n >= sizeof(buf))
		return -1;
	cJSON *o = cJSON_Parse(buf);
	const cJSON *cl = cJSON_GetObjectItemCaseSensitive(o, "clients"), *it;
	int found = -1;
	pid_t me = getpid();
	cJSON_ArrayForEach(it, cl)
	{
		const cJSON *pid = cJSON_GetObjectItemCaseSensitive(it, "pid");
		if (cJSON_IsNumber(pid) && (pid_t)pid->valuedouble == me) {
			*seen_ns = cJSON_GetObjectItemCaseSensitive(it, "dev_seen_ns")->valuedouble;
			*records = cJSON_GetObjectItemCaseSensitive(it, "dev_records")->valuedouble;
			found = 0;
		}
	}
	cJSON_Delete(o);
	return found;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int bench_e2e(const char *sock, int n)
{
	struct fs_client_opts o;
	memset(&o, 0, sizeof(o));
	o.socket_path = sock;
	o.name = "fs-bench-ra";
	fs_client *c;
	int r = fs_client_open(&c, &o);
	if (r < 0)
		return fprintf(stderr, "fs_client_open: %s\n", fs_strerror(r)), 1;
	struct fs_model_info mi;
	fs_client_model(c, &mi);
	void *desc;
	if ((r = fs_dev_ring_enable(c, &desc)) < 0)
		return fprintf(stderr, "fs_dev_ring_enable: %s\n", fs_client_last_error(c)), 1;
	const int d = 2048, T = 4, M = 8, OUT = 16;
	int E = (int)mi.experts, L = (int)mi.layers;
	char *hidpool = (char *)dev_bf16((size_t)n * T * d, 1.0f);
	char *routers = (char *)dev_bf16((size_t)L * E * d, 0.05f);
	struct fs_ra_params p;
	memset(&p, 0, sizeof(p));
	p.hidden_type = FS_RA_BF16, p.tokens = T, p.dim = d, p.router_type = FS_RA_BF16;
	p.experts = (uint32_t)E, p.horizons = 1, p.top_m = M, p.max_out = OUT, p.desc = desc, p.card = 0;
	CK(cudaMalloc((void **)&p.out_expert, OUT * 4));
	CK(cudaMalloc((void **)&p.out_score, OUT * 4));
	CK(cudaMalloc((void **)&p.out_count, 3 * 4));
	size_t sb = fs_ra_scratch_bytes(&p);
	CK(cudaMalloc(&p.scratch, sb));
	CK(cudaMemset(p.scratch, 0, sb));
	cudaStream_t st;
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	double *seen = (double *)calloc(n, sizeof(double)), *issued = (double *)calloc(n, sizeof(double));
	int nseen = 0, nissued = 0;
	uint64_t predicted = 0, copied = 0;
	double recs_before = 0, recs_after = 0, tmp;
	dev_seen(c, &tmp, &recs_before);
	for (int i = 0; i < n; i++) {
		int layer = i % (L - 1);
		p.layer = (uint32_t)layer, p.window = (uint32_t)i;
		p.router[0] = routers + (size_t)(layer + 1) * E * d * 2;
		p.hidden = hidpool + (size_t)i * T * d * 2; /* fresh rows: new candidates */
		uint64_t t0 = now_ns();
		if (fs_ra_launch(&p, st) != 0)
			return fprintf(stderr, "launch failed\n"), 1;
		CK(cudaStreamSynchronize(st));
		/* The daemon's receipt time (its clock: CLOCK_MONOTONIC too). */
		double s_ns = 0, recs = 0;
		uint64_t until = now_ns() + 200000000ull;
		while (now_ns() < until && (dev_seen(c, &s_ns, &recs) < 0 || s_ns < (double)t0))
			;
		if (s_ns >= (double)t0)
			seen[nseen++] = (s_ns - (double)t0) / 1000.0;
		/* The copies it issued for the predicted experts: the earliest
		 * issue stamp after the launch among those that have landed. */
		uint32_t oe[OUT], on = 0;
		CK(cudaMemcpy(&on, p.out_count, 4, cudaMemcpyDeviceToHost));
		CK(cudaMemcpy(oe, p.out_expert, sizeof(oe), cudaMemcpyDeviceToHost));
		double first = -1;
		uint32_t landed = 0;
		until = now_ns() + 50000000ull;
		while (now_ns() < until) {
			struct fs_view v;
			fs_acquire(c, &v);
			landed = 0;
			for (uint32_t j = 0; j < on && j < (uint32_t)OUT; j++) {
				struct fs_slot sl;
				if (!fs_lookup_live(c, &v, 0, (uint32_t)layer + 1, oe[j], &sl))
					continue;
				uint64_t is = fs_slot_issued_ns(c, &sl);
				if (is < t0)
					continue; /* resident before this launch */
				landed++;
				double us = (double)(is - t0) / 1000.0;
				if (first < 0 || us < first)
					first = us;
			}
			fs_release(c, &v);
			if (landed == on)
				break;
		}
		predicted += on;
		copied += landed;
		if (first >= 0)
			issued[nissued++] = first;
	}
	dev_seen(c, &tmp, &recs_after);
	qsort(seen, nseen, sizeof(double), cmp_d);
	qsort(issued, nissued, sizeof(double), cmp_d);
	printf("e2e: %d launches (T %d, top-M %d, %d candidates max), %.0f records consumed from the device ring, "
	       "%llu dropped\n",
	       n, T, M, OUT, recs_after - recs_before, (unsigned long long)fs_dev_ring_dropped(c));
	printf("predicted experts copied after the launch and landed within 50 ms: %llu of %llu\n",
	       (unsigned long long)copied, (unsigned long long)predicted);
	printf("| path | p50 us | p99 us | samples |\n|---|---|---|---|\n");
	if (nseen)
		printf("| kernel launch -> daemon consumed the records | %.1f | %.1f | %d |\n",
		       seen[nseen / 2], seen[(nseen * 99) / 100], nseen);
	if (nissued)
		printf("| kernel launch -> first copy issued | %.1f | %.1f | %d |\n", issued[nissued / 2],
		       issued[(nissued * 99) / 100], nissued);
	fs_client_close(c);
	return nseen == n && recs_after - recs_before >= (double)predicted ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "kernel") == 0)
		return bench_kernel(argc > 2 ? atoi(argv[2]) : 20);
	if (argc >= 3 && strcmp(argv[1], "e2e") == 0)
		return bench_e2e(argv[2], argc > 3 ? atoi(argv[3]) : 200);
	fprintf(stderr, "usage: fs-bench-ra kernel [REPS] | e2e SOCKET [N]\n");
	return 2;
}
