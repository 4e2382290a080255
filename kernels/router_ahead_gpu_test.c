/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The router-ahead kernel against its CPU reference, on fresh random inputs
 * (the seed is printed), at the shapes of real MoE models and at odd ones;
 * its posting into a device ring; and replay inside a CUDA graph.  Where
 * no GPU exists every test prints a skip line.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "foresight/router_ahead.h"
#define FS_GPU_NEED_CRITERION
#include "fs_gpu_need.h"
#include "fs_ring.h"
#include "fs_ring_dev.h"
#include "router_ahead_rule.h"
#include "router_ahead_stage.h"

/* Skips only where no device exists; fails on a broken one (fs_gpu_need.h). */
static void need_gpu(void)
{
	FS_GPU_NEED(1);
}

#define CK(x)                                                                        \
	do {                                                                         \
		cudaError_t e_ = (x);                                                \
		cr_assert_eq(e_, cudaSuccess, "%s: %s", #x, cudaGetErrorString(e_)); \
	} while (0)

static uint64_t rng_state;
static uint32_t rnd(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng_state >> 33);
}
/* Roughly normal: the sum of four uniforms, centred. */
static float rnorm(void)
{
	float s = 0;
	for (int i = 0; i < 4; i++)
		s += (float)rnd() / 2147483648.0f;
	return s - 2.0f;
}

static uint16_t to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static uint16_t to_f16(float f) /* small normal values only (|f| < 4) */
{
	uint32_t u;
	memcpy(&u, &f, 4);
	uint32_t sign = (u >> 16) & 0x8000u;
	int exp = (int)((u >> 23) & 0xff) - 127 + 15;
	if (exp <= 0)
		return (uint16_t)sign;
	return (uint16_t)(sign | ((uint32_t)exp << 10) | ((u >> 13) & 0x3ffu));
}

/* A random array of n elements of type t (host). */
static void *rand_array(enum fs_ra_dtype t, size_t n, float scale)
{
	size_t esz = t == FS_RA_F32 ? 4 : 2;
	void *p = malloc(n * esz);
	cr_assert(p);
	for (size_t i = 0; i < n; i++) {
		float v = rnorm() * scale;
		if (t == FS_RA_F32)
			((float *)p)[i] = v;
		else if (t == FS_RA_BF16)
			((uint16_t *)p)[i] = to_bf16(v);
		else
			((uint16_t *)p)[i] = to_f16(v);
	}
	return p;
}

static void *to_dev(const void *h, size_t bytes)
{
	void *d = NULL;
	CK(cudaMalloc(&d, bytes));
	CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
	return d;
}

struct shape {
	uint32_t d, E, T, K, M, out;
	enum fs_ra_dtype ht, rt;
	int resident;
};

/* One shape: kernel vs reference (flags 0: fs_ra_launch; else the stages
 * and variants of router_ahead_stage.h, GEMV and SELECT as two calls when
 * split is set).  Fails the test with what differed. */
static void check_shape_as(const struct shape *s, unsigned flags, int split)
{
	size_t hsz = s->ht == FS_RA_F32 ? 4 : 2, rsz = s->rt == FS_RA_F32 ? 4 : 2;
	void *hid = rand_array(s->ht, (size_t)s->T * s->d, 1.0f);
	void *rt[3] = {0}, *drt[3] = {0};
	uint32_t *bits[3] = {0}, *dbits[3] = {0};
	uint32_t words = (s->E + 31) / 32;
	for (uint32_t k = 0; k < s->K; k++) {
		rt[k] = rand_array(s->rt, (size_t)s->E * s->d, 0.05f);
		drt[k] = to_dev(rt[k], (size_t)s->E * s->d * rsz);
		if (s->resident) {
			bits[k] = calloc(words, 4);
			for (uint32_t e = 0; e < s->E; e++)
				if (rnd() % 4 == 0)
					bits[k][e / 32] |= 1u << (e % 32);
			dbits[k] = to_dev(bits[k], words * 4u);
		}
	}
	void *dhid = to_dev(hid, (size_t)s->T * s->d * hsz);
	size_t on = (size_t)s->K * s->out;
	uint32_t *re = calloc(on, 4), *ge = calloc(on, 4), rn[3] = {0}, gn[3] = {0};
	float *rs = calloc(on, 4), *gs = calloc(on, 4);
	struct fs_ra_params p = {.hidden = hid,
				 .hidden_type = s->ht,
				 .tokens = s->T,
				 .dim = s->d,
				 .router_type = s->rt,
				 .experts = s->E,
				 .horizons = s->K,
				 .top_m = s->M,
				 .max_out = s->out,
				 .out_expert = re,
				 .out_score = rs,
				 .out_count = rn};
	for (uint32_t k = 0; k < s->K; k++) {
		p.router[k] = rt[k];
		p.resident[k] = bits[k];
	}
	cr_assert_eq(fs_ra_reference(&p), 0);

	/* The kernel, twice on the same scratch: counters must reset. */
	uint32_t *dge, *dgn;
	float *dgs;
	CK(cudaMalloc((void **)&dge, on * 4));
	CK(cudaMalloc((void **)&dgs, on * 4));
	CK(cudaMalloc((void **)&dgn, 3 * 4));
	p.hidden = dhid;
	for (uint32_t k = 0; k < s->K; k++) {
		p.router[k] = drt[k];
		p.resident[k] = dbits[k];
	}
	p.out_expert = dge, p.out_score = dgs, p.out_count = dgn;
	size_t sb = fs_ra_scratch_bytes(&p);
	CK(cudaMalloc(&p.scratch, sb));
	CK(cudaMemset(p.scratch, 0, sb));
	for (int rep = 0; rep < 2; rep++) {
		CK(cudaMemset(dge, 0xff, on * 4));
		if (!flags)
			cr_assert_eq(fs_ra_launch(&p, NULL), 0);
		else if (!split)
			cr_assert_eq(fs_ra_launch_stage(&p, NULL, flags), 0);
		else {
			cr_assert_eq(fs_ra_launch_stage(&p, NULL, flags & ~FS_RA_STAGE_SELECT), 0);
			cr_assert_eq(fs_ra_launch_stage(&p, NULL, flags & ~FS_RA_STAGE_GEMV), 0);
		}
		CK(cudaDeviceSynchronize());
		CK(cudaMemcpy(ge, dge, on * 4, cudaMemcpyDeviceToHost));
		CK(cudaMemcpy(gs, dgs, on * 4, cudaMemcpyDeviceToHost));
		CK(cudaMemcpy(gn, dgn, 3 * 4, cudaMemcpyDeviceToHost));
		for (uint32_t k = 0; k < s->K; k++) {
			cr_assert_eq(
				gn[k], rn[k],
				"d %u E %u T %u K %u M %u flags 0x%x%s: horizon %u: %u candidates, reference %u",
				s->d, s->E, s->T, s->K, s->M, flags, split ? " split" : "", k, gn[k], rn[k]);
			for (uint32_t i = 0; i < rn[k]; i++) {
				size_t x = (size_t)k * s->out + i;
				cr_assert_eq(
					ge[x], re[x],
					"d %u E %u T %u K %u M %u flags 0x%x: horizon %u rank %u: expert %u, reference %u",
					s->d, s->E, s->T, s->K, s->M, flags, k, i, ge[x], re[x]);
				cr_assert(fabsf(gs[x] - rs[x]) <= 1e-6f * fabsf(rs[x]) + 1e-30f,
					  "score %.9g vs reference %.9g", (double)gs[x], (double)rs[x]);
			}
		}
	}
	cudaFree(p.scratch), cudaFree(dge), cudaFree(dgs), cudaFree(dgn), cudaFree(dhid);
	for (uint32_t k = 0; k < s->K; k++) {
		cudaFree(drt[k]), free(rt[k]), cudaFree(dbits[k]), free(bits[k]);
	}
	free(hid), free(re), free(ge), free(rs), free(gs);
}

static void check_shape(const struct shape *s)
{
	check_shape_as(s, 0, 0);
}

static void seed(void)
{
	rng_state = (uint64_t)time(NULL) * 1000003u ^ (uint64_t)getpid();
	fprintf(stderr, "router-ahead gpu test: seed %llu\n", (unsigned long long)rng_state);
}

Test(router_ahead_gpu, matches_reference_at_model_shapes, .timeout = 240)
{
	need_gpu();
	seed();
	/* (d, E): Qwen3-Next, Qwen3-30B-A3B, Mixtral, DeepSeek-V3 */
	static const uint32_t models[][2] = {{2048, 512}, {2048, 128}, {4096, 8}, {7168, 256}};
	static const uint32_t tokens[] = {1, 3, 8, 17, 64};
	unsigned shapes = 0;
	for (unsigned m = 0; m < 4; m++)
		for (unsigned t = 0; t < 5; t++) {
			uint32_t E = models[m][1];
			struct shape s = {.d = models[m][0],
					  .E = E,
					  .T = tokens[t],
					  .K = 1 + (m + t) % 3,
					  .M = E < 10 ? 2 : 10,
					  .out = E < 48 ? E : 48,
					  .ht = (m + t) % 2 ? FS_RA_F32 : FS_RA_BF16,
					  .rt = (enum fs_ra_dtype)((m + t) % 3),
					  .resident = t % 2};
			check_shape(&s);
			shapes++;
		}
	fprintf(stderr, "router-ahead gpu test: %u model shapes match the reference\n", shapes);
}

Test(router_ahead_gpu, matches_reference_at_odd_shapes, .timeout = 240)
{
	need_gpu();
	seed();
	static const struct shape odd[] = {
		{.d = 1, .E = 1, .T = 1, .K = 1, .M = 1, .out = 1, .ht = FS_RA_F32, .rt = FS_RA_F32},
		{.d = 7, .E = 33, .T = 5, .K = 3, .M = 32, .out = 256, .ht = FS_RA_F32, .rt = FS_RA_BF16},
		{.d = 1001, .E = 129, .T = 9, .K = 2, .M = 7, .out = 100, .ht = FS_RA_BF16, .rt = FS_RA_F16},
		{.d = 2051,
		 .E = 4096,
		 .T = 2,
		 .K = 1,
		 .M = 32,
		 .out = 64,
		 .ht = FS_RA_F16,
		 .rt = FS_RA_BF16,
		 .resident = 1},
		{.d = 300,
		 .E = 60,
		 .T = 64,
		 .K = 3,
		 .M = 32,
		 .out = 256,
		 .ht = FS_RA_BF16,
		 .rt = FS_RA_F32,
		 .resident = 1},
	};
	for (unsigned i = 0; i < sizeof(odd) / sizeof(odd[0]); i++)
		check_shape(&odd[i]);
	fprintf(stderr, "router-ahead gpu test: %zu odd shapes match the reference\n",
		sizeof(odd) / sizeof(odd[0]));
}

/* The variants the benchmark times (router_ahead_stage.h) compute the same
 * candidates: the selection as an ordinary launch, and the GEMV and the
 * selection as two separate calls. */
Test(router_ahead_gpu, variants_match_reference, .timeout = 240)
{
	need_gpu();
	seed();
	static const struct shape shapes[] = {
		{.d = 2048, .E = 512, .T = 8, .K = 1, .M = 10, .out = 48, .ht = FS_RA_BF16, .rt = FS_RA_BF16},
		{.d = 7168, .E = 256, .T = 17, .K = 2, .M = 10, .out = 48, .ht = FS_RA_F32, .rt = FS_RA_F32},
		{.d = 4096,
		 .E = 8,
		 .T = 64,
		 .K = 3,
		 .M = 2,
		 .out = 8,
		 .ht = FS_RA_BF16,
		 .rt = FS_RA_F16,
		 .resident = 1},
		{.d = 1001, .E = 129, .T = 9, .K = 2, .M = 7, .out = 100, .ht = FS_RA_F16, .rt = FS_RA_BF16},
	};
	const unsigned both = FS_RA_STAGE_GEMV | FS_RA_STAGE_SELECT;
	for (unsigned i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		check_shape_as(&shapes[i], both | FS_RA_OPT_NO_PDL, 0);
		check_shape_as(&shapes[i], both, 1);
	}
	fprintf(stderr, "router-ahead gpu test: 2 variants at %zu shapes match the reference\n",
		sizeof(shapes) / sizeof(shapes[0]));
}

/* A ring in pinned host memory, as a client region would hold it. */
struct dev_ring {
	void *mem;
	struct fs_ring_cons cons;
	struct fs_dev_desc *desc;
	void *desc_dev;
};

static void ring_make(struct dev_ring *r, uint32_t entries)
{
	size_t bytes = fs_ring_bytes(entries);
	CK(cudaHostAlloc(&r->mem, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
	cr_assert_eq(fs_ring_format(&r->cons, r->mem, bytes, entries), 0);
	void *dev;
	CK(cudaHostGetDevicePointer(&dev, r->mem, 0));
	CK(cudaHostAlloc((void **)&r->desc, sizeof(*r->desc), cudaHostAllocMapped | cudaHostAllocPortable));
	memset(r->desc, 0, sizeof(*r->desc));
	uint32_t l = 0;
	while ((1u << l) < entries)
		l++;
	r->desc->word = FS_DEV_DESC((uintptr_t)dev, l);
	CK(cudaHostGetDevicePointer(&r->desc_dev, r->desc, 0));
}

/* Records posted: every horizon's candidates, in rank order, complete. */
Test(router_ahead_gpu, posts_records_to_the_device_ring, .timeout = 120)
{
	need_gpu();
	seed();
	enum { D = 2048, E = 128, T = 4, K = 3, OUT = 12 };
	struct dev_ring ring;
	ring_make(&ring, 64);
	void *hid = rand_array(FS_RA_BF16, (size_t)T * D, 1.0f);
	struct fs_ra_params p = {.hidden = to_dev(hid, (size_t)T * D * 2),
				 .hidden_type = FS_RA_BF16,
				 .tokens = T,
				 .dim = D,
				 .router_type = FS_RA_BF16,
				 .experts = E,
				 .horizons = K,
				 .top_m = 8,
				 .max_out = OUT,
				 .desc = ring.desc_dev,
				 .layer = 5,
				 .card = 1,
				 .window = 77};
	uint32_t oe[K * OUT], on[K];
	float os[K * OUT];
	CK(cudaMalloc((void **)&p.out_expert, sizeof(oe)));
	CK(cudaMalloc((void **)&p.out_score, sizeof(os)));
	CK(cudaMalloc((void **)&p.out_count, sizeof(on)));
	for (int k = 0; k < K; k++) {
		void *w = rand_array(FS_RA_BF16, (size_t)E * D, 0.05f);
		p.router[k] = to_dev(w, (size_t)E * D * 2);
		free(w);
	}
	size_t sb = fs_ra_scratch_bytes(&p);
	CK(cudaMalloc(&p.scratch, sb));
	CK(cudaMemset(p.scratch, 0, sb));
	cr_assert_eq(fs_ra_launch(&p, NULL), 0);
	CK(cudaDeviceSynchronize());
	CK(cudaMemcpy(oe, p.out_expert, sizeof(oe), cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(os, p.out_score, sizeof(os), cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(on, p.out_count, sizeof(on), cudaMemcpyDeviceToHost));
	struct fs_rec got[64];
	uint32_t n = fs_ring_consume(&ring.cons, got, 64), want = 0, x = 0;
	for (int k = 0; k < K; k++)
		want += on[k];
	cr_assert_eq(n, want, "%u records in the ring, %u candidates", n, want);
	cr_assert_eq(ring.cons.bad_record, 0u);
	for (int k = 0; k < K; k++)
		for (uint32_t i = 0; i < on[k]; i++, x++) {
			float sc;
			memcpy(&sc, &got[x].value, 4);
			cr_assert_eq(got[x].type, FS_REC_PREDICT);
			cr_assert_eq(FS_PRED_HORIZON(got[x].aux), (unsigned)k + 1);
			cr_assert_eq(FS_PRED_SOURCE(got[x].aux), FS_SRC_KERNEL);
			cr_assert_eq(got[x].layer, 5 + k + 1);
			cr_assert_eq(got[x].expert, oe[k * OUT + i]);
			cr_assert_eq(got[x].card, 1);
			cr_assert_eq(got[x].window, 77u);
			cr_assert_eq(sc, os[k * OUT + i]);
		}

	/* Posting alone (the benchmark's post stage): the same records again. */
	cr_assert_eq(fs_ra_launch_stage(&p, NULL, FS_RA_STAGE_POST), 0);
	CK(cudaDeviceSynchronize());
	struct fs_rec again[64];
	cr_assert_eq(fs_ring_consume(&ring.cons, again, 64), n, "post stage: not the %u records", n);
	cr_assert(memcmp(again, got, n * sizeof(got[0])) == 0, "post stage: other records");

	/* A ring too small: three launches of `want` (24..36) records into
	 * 64 entries, nothing consumed: what does not fit is counted. */
	for (int i = 0; i < 3; i++)
		cr_assert_eq(fs_ra_launch(&p, NULL), 0);
	CK(cudaDeviceSynchronize());
	cr_assert_eq(fs_ring_pending(&ring.cons), 64u);
	cr_assert_eq(ring.cons.hdr->full, 3 * want - 64, "full %u, want %u", ring.cons.hdr->full,
		     3 * want - 64);

	/* Detached (descriptor word 0): records counted, nothing written. */
	uint64_t w = ring.desc->word;
	ring.desc->word = 0;
	cr_assert_eq(fs_ra_launch(&p, NULL), 0);
	CK(cudaDeviceSynchronize());
	cr_assert_eq(ring.desc->detached, want);
	ring.desc->word = w;
}

/* Captured once in a graph, replayed with the window read at run time. */
Test(router_ahead_gpu, replays_in_a_cuda_graph, .timeout = 120)
{
	need_gpu();
	seed();
	enum { D = 512, E = 64, T = 2 };
	struct dev_ring ring;
	ring_make(&ring, 1024);
	void *hid = rand_array(FS_RA_F32, (size_t)T * D, 1.0f),
	     *w = rand_array(FS_RA_F32, (size_t)E * D, 0.05f);
	uint32_t *win;
	CK(cudaMalloc((void **)&win, 4));
	struct fs_ra_params p = {.hidden = to_dev(hid, (size_t)T * D * 4),
				 .hidden_type = FS_RA_F32,
				 .tokens = T,
				 .dim = D,
				 .router = {to_dev(w, (size_t)E * D * 4)},
				 .router_type = FS_RA_F32,
				 .experts = E,
				 .horizons = 1,
				 .top_m = 4,
				 .max_out = 8,
				 .desc = ring.desc_dev,
				 .layer = 0,
				 .card = 0xffff,
				 .window_dev = win};
	size_t sb = fs_ra_scratch_bytes(&p);
	CK(cudaMalloc(&p.scratch, sb));
	CK(cudaMemset(p.scratch, 0, sb));
	cudaStream_t st;
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	cudaGraph_t g;
	cudaGraphExec_t ge;
	CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
	cr_assert_eq(fs_ra_launch(&p, st), 0);
	CK(cudaStreamEndCapture(st, &g));
	CK(cudaGraphInstantiate(&ge, g, 0));
	uint32_t per = 0;
	for (uint32_t rep = 1; rep <= 3; rep++) {
		CK(cudaMemcpyAsync(win, &rep, 4, cudaMemcpyHostToDevice, st));
		CK(cudaGraphLaunch(ge, st));
		CK(cudaStreamSynchronize(st));
		struct fs_rec got[64];
		uint32_t n = fs_ring_consume(&ring.cons, got, 64);
		cr_assert(n >= 1 && n <= 8, "replay %u: %u records", rep, n);
		if (rep == 1)
			per = n;
		cr_assert_eq(n, per, "the same inputs must give the same records");
		for (uint32_t i = 0; i < n; i++)
			cr_assert_eq(got[i].window, rep, "replay %u posted window %u", rep, got[i].window);
	}
	cudaGraphExecDestroy(ge);
	cudaGraphDestroy(g);
	cudaStreamDestroy(st);
	free(hid), free(w);
}
