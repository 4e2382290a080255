/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-peer-bench: what reading an expert from another card costs, and what
 * sharing one tier across two cards buys.
 *
 *   fs-peer-bench raw [--quick]
 *       On cards 0 (A) and 1 (B), in one run, for expert-sized blobs of
 *       256 KiB, 1.8 MiB and 16 MiB: a kernel on A reading blobs in A's own
 *       memory (local), the same kernel on A reading blobs in B's memory
 *       through peer access (peer), pinned host -> A cudaMemcpyAsync (the
 *       host arena's copy), and B -> A cudaMemcpyPeerAsync.  Bandwidth
 *       back to back over 1 GiB of distinct blobs (so no cache holds them)
 *       and the latency of one blob alone (p50), with ratios.  Checks that
 *       a peer read returns the bytes written.  Fewer than 2 GPUs: a SKIP
 *       line, exit 0.
 *
 *   fs-peer-bench engine SOCKET CARD PEER WINDOWS [LAYER_US [SEED]]
 *       A stand-in engine on daemon card CARD running every layer there
 *       (data parallel): per window and layer it routes top-k experts with
 *       a skewed distribution (the same hot experts for every engine),
 *       looks each up with fs_lookup_from, counts it a hit when it is on
 *       CARD or (PEER = 1, after fs_peer_open) on a card CARD reads, reads
 *       every 64th hit with a kernel on CARD and compares with the arena,
 *       posts usage, and spends LAYER_US per layer.  Prints one line:
 *       hit rate (after a warm-up fifth), local / peer / unreachable /
 *       miss counts, distinct experts held over all cards, duplicates,
 *       verified reads and mismatches.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <foresight/foresight.h>

#include "fs_gpu_need.h"
#include "fs_opt.h"
#include "fs_peer_kernel.h"

#define CK(x)                                                                                   \
	do {                                                                                    \
		cudaError_t e_ = (x);                                                           \
		if (e_ != cudaSuccess) {                                                        \
			fprintf(stderr, "fs-peer-bench: %s: %s\n", #x, cudaGetErrorString(e_)); \
			exit(1);                                                                \
		}                                                                               \
	} while (0)

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int cmp_f(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

/* ---- raw ------------------------------------------------------------------ */

enum op { OP_LOCAL, OP_PEER, OP_H2D, OP_P2P_COPY, NOPS };
static const char *const op_name[NOPS] = {"local kernel", "peer kernel", "host->A copy", "B->A peer copy"};

struct rig {
	int a, b, can;
	char *apool, *bpool, *adst, *host;
	uint64_t pool;
	cudaStream_t st;
	unsigned long long *acc;
	cudaEvent_t e0, e1;
};

static void issue(struct rig *g, enum op op, uint64_t off, uint64_t bytes)
{
	switch (op) {
	case OP_LOCAL:
		CK((cudaError_t)fs_peer_read(g->apool + off, bytes, g->st, g->acc));
		break;
	case OP_PEER:
		CK((cudaError_t)fs_peer_read(g->bpool + off, bytes, g->st, g->acc));
		break;
	case OP_H2D:
		CK(cudaMemcpyAsync(g->adst + off, g->host + off, bytes, cudaMemcpyHostToDevice, g->st));
		break;
	default:
		CK(cudaMemcpyPeerAsync(g->adst + off, g->a, g->bpool + off, g->b, bytes, g->st));
		break;
	}
}

struct meas {
	double gbps, us_per_blob, p50_us;
};

static struct meas measure(struct rig *g, enum op op, uint64_t bytes, unsigned passes)
{
	uint64_t stride = (bytes + 4095) / 4096 * 4096, nb = g->pool / stride;
	if (nb > 4096)
		nb = 4096;
	for (uint64_t i = 0; i < nb; i++) /* warm: every blob once */
		issue(g, op, i * stride, bytes);
	CK(cudaStreamSynchronize(g->st));
	uint64_t n = nb * passes;
	CK(cudaEventRecord(g->e0, g->st));
	for (uint64_t i = 0; i < n; i++)
		issue(g, op, (i % nb) * stride, bytes);
	CK(cudaEventRecord(g->e1, g->st));
	CK(cudaEventSynchronize(g->e1));
	float ms = 0;
	CK(cudaEventElapsedTime(&ms, g->e0, g->e1));
	struct meas m = {.gbps = (double)n * (double)bytes / ((double)ms * 1e6),
			 .us_per_blob = (double)ms * 1000.0 / (double)n};
	enum { LAT = 200 };
	float lat[LAT];
	for (unsigned i = 0; i < LAT; i++) {
		uint64_t off = ((i * 7919u) % nb) * stride;
		CK(cudaEventRecord(g->e0, g->st));
		issue(g, op, off, bytes);
		CK(cudaEventRecord(g->e1, g->st));
		CK(cudaEventSynchronize(g->e1));
		CK(cudaEventElapsedTime(&lat[i], g->e0, g->e1));
	}
	qsort(lat, LAT, sizeof(lat[0]), cmp_f);
	m.p50_us = lat[LAT / 2] * 1000.0;
	return m;
}

static int raw(int quick)
{
	/* 77: skipped (fewer than 2 devices; ctest SKIP_RETURN_CODE), 1: a
	 * broken GPU machine or FS_REQUIRE_GPU >= 2 unmet (fs_gpu_need.h). */
	int need = fs_gpu_need_print(2, "fs-peer-bench raw");
	if (need)
		return need;
	cudaError_t e;
	struct rig g = {.a = 0, .b = 1, .pool = quick ? 256ull << 20 : 1ull << 30};
	CK(cudaDeviceCanAccessPeer(&g.can, g.a, g.b));
	struct cudaDeviceProp pa, pb;
	CK(cudaGetDeviceProperties(&pa, g.a));
	CK(cudaGetDeviceProperties(&pb, g.b));
	printf("card A = device 0 (%s), card B = device 1 (%s); A can access B's memory: %s\n", pa.name,
	       pb.name, g.can ? "yes" : "NO");
	CK(cudaHostAlloc((void **)&g.host, g.pool, cudaHostAllocPortable));
	uint64_t s = 12345;
	for (uint64_t i = 0; i < g.pool / 8; i++)
		((uint64_t *)g.host)[i] = mix(&s);
	CK(cudaSetDevice(g.b));
	CK(cudaMalloc((void **)&g.bpool, g.pool));
	CK(cudaMemcpy(g.bpool, g.host, g.pool, cudaMemcpyHostToDevice));
	CK(cudaSetDevice(g.a));
	CK(cudaMalloc((void **)&g.apool, g.pool));
	CK(cudaMalloc((void **)&g.adst, g.pool));
	CK(cudaMemcpy(g.apool, g.host, g.pool, cudaMemcpyHostToDevice));
	if (g.can) {
		e = cudaDeviceEnablePeerAccess(g.b, 0);
		if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
			fprintf(stderr, "cudaDeviceEnablePeerAccess: %s\n", cudaGetErrorString(e));
			g.can = 0;
		}
	}
	CK(cudaStreamCreateWithFlags(&g.st, cudaStreamNonBlocking));
	CK(cudaMalloc((void **)&g.acc, sizeof(*g.acc)));
	CK(cudaEventCreate(&g.e0));
	CK(cudaEventCreate(&g.e1));

	int bad = 0;
	if (g.can) { /* a peer read returns what was written */
		uint64_t want = fs_peer_sum_host(g.host + 4096, 1887436), got = 0;
		CK((cudaError_t)fs_peer_sum(g.bpool + 4096, 1887436, &got));
		bad = got != want;
		printf("peer read check (kernel on A, 1.8 MiB of B's memory): %s\n", bad ? "MISMATCH" : "ok");
	}

	static const uint64_t all[] = {262144, 1887436, 16777216};
	const uint64_t *sizes = quick ? &all[1] : all;
	unsigned nsizes = quick ? 1 : 3;
	printf("\n| blob | %s GB/s (us/blob, p50 alone) | %s | %s | %s | peer/local | peer/host copy |\n",
	       op_name[0], op_name[1], op_name[2], op_name[3]);
	printf("|---|---|---|---|---|---|---|\n");
	for (unsigned k = 0; k < nsizes; k++) {
		struct meas m[NOPS] = {0};
		for (int op = 0; op < NOPS; op++)
			if (g.can || (op != OP_PEER && op != OP_P2P_COPY))
				m[op] = measure(&g, (enum op)op, sizes[k], quick ? 1 : 3);
		printf("| %.2f MiB |", (double)sizes[k] / 1048576.0);
		for (int op = 0; op < NOPS; op++)
			if (m[op].gbps > 0)
				printf(" %.1f (%.2f, %.2f) |", m[op].gbps, m[op].us_per_blob, m[op].p50_us);
			else
				printf(" n/a |");
		if (m[OP_PEER].gbps > 0)
			printf(" %.3f | %.2f |\n", m[OP_PEER].gbps / m[OP_LOCAL].gbps,
			       m[OP_PEER].gbps / m[OP_H2D].gbps);
		else
			printf(" n/a | n/a |\n");
		printf("raw bytes %" PRIu64 " local_gbps %.1f peer_gbps %.1f h2d_gbps %.1f p2pcopy_gbps %.1f "
		       "local_p50_us %.2f peer_p50_us %.2f h2d_p50_us %.2f\n",
		       sizes[k], m[0].gbps, m[1].gbps, m[2].gbps, m[3].gbps, m[0].p50_us, m[1].p50_us,
		       m[2].p50_us);
	}
	fflush(stdout);
	return bad;
}

/* ---- engine --------------------------------------------------------------- */

/* This process's device for a daemon card: its name ends with the PCI bus id. */
static int card_device(fs_client *c, uint32_t card)
{
	struct fs_card_info ci;
	if (fs_client_card(c, card, &ci) < 0 || ci.kind != FS_CARD_CUDA)
		return -1;
	const char *pci = strrchr(ci.name, ' ');
	int dev = -1;
	if (!pci || cudaDeviceGetByPCIBusId(&dev, pci + 1) != cudaSuccess)
		return -1;
	return dev;
}

/* Skewed routing: per layer a fixed permutation (the same for every engine:
 * seed 42), ranks drawn with weight 1 / (rank + 1)^s. */
struct router {
	uint32_t layers, experts;
	uint32_t *perm; /* [layers][experts] */
	double *cdf;    /* [experts] */
};

static void router_init(struct router *rt, uint32_t layers, uint32_t experts, double s)
{
	rt->layers = layers;
	rt->experts = experts;
	rt->perm = malloc((size_t)layers * experts * sizeof(*rt->perm));
	rt->cdf = malloc(experts * sizeof(*rt->cdf));
	if (!rt->perm || !rt->cdf)
		exit(1);
	uint64_t seed = 42;
	for (uint32_t l = 0; l < layers; l++) {
		uint32_t *p = rt->perm + (size_t)l * experts;
		for (uint32_t e = 0; e < experts; e++)
			p[e] = e;
		for (uint32_t e = experts - 1; e > 0; e--) {
			uint32_t j = (uint32_t)(mix(&seed) % (e + 1)), t = p[e];
			p[e] = p[j];
			p[j] = t;
		}
	}
	double tot = 0;
	for (uint32_t e = 0; e < experts; e++)
		tot += 1.0 / pow(e + 1.0, s);
	double acc = 0;
	for (uint32_t e = 0; e < experts; e++) {
		acc += 1.0 / pow(e + 1.0, s) / tot;
		rt->cdf[e] = acc;
	}
}

static uint32_t route(const struct router *rt, uint32_t layer, uint64_t *s)
{
	double u = (double)(mix(s) >> 11) / 9007199254740992.0;
	uint32_t lo = 0, hi = rt->experts - 1;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (rt->cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return rt->perm[(size_t)layer * rt->experts + lo];
}

static int engine(int argc, char **argv)
{
	const char *sock = NULL;
	uint32_t card = 0, windows = 0, layer_us = 200;
	int use_peer = 0, seed_given = 0;
	uint64_t seed = 0;
	/* The arguments as typed rows (common/fs_opt.h): each checked. */
	struct fs_opt args[] = {
		FS_OPT_STR("SOCKET", NULL, &sock, "foresightd's control socket"),
		FS_OPT_U32("CARD", NULL, &card, 0, 255, "the daemon card this engine runs on"),
		FS_OPT_INT("PEER", NULL, &use_peer, 0, 1, "1: read experts other cards hold (fs_peer_open)"),
		FS_OPT_U32("WINDOWS", NULL, &windows, 1, 100000000, "windows to run"),
		FS_OPT_U32("LAYER_US", NULL, &layer_us, 0, 10000000, "time spent per layer, us"),
		FS_OPT_U64("SEED", NULL, &seed, 0, UINT64_MAX, "routing seed (default: 1 + CARD)"),
	};
	args[5].given = &seed_given;
	const struct fs_opt_cmd cmd = {
		.prog = "fs-peer-bench engine",
		.usage = "usage: fs-peer-bench engine SOCKET CARD PEER WINDOWS [LAYER_US [SEED]]\n\n",
		.args = args,
		.nargs = FS_OPT_N(args),
		.min_args = 4};
	fs_opt_parse_or_exit(&cmd, argc - 1, argv + 1);
	if (!seed_given)
		seed = 1 + card;
	fs_client *c;
	char name[48];
	snprintf(name, sizeof(name), "peer-bench-card%u%s", card, use_peer ? "-peer" : "");
	struct fs_client_opts o = {.socket_path = sock, .name = name};
	if (fs_client_open(&c, &o) < 0)
		return 1;
	struct fs_model_info m;
	fs_client_model(c, &m);
	if (card >= m.cards) {
		fprintf(stderr, "engine: card %u of %u\n", card, m.cards);
		return 1;
	}
	int dev = card_device(c, card);
	if (dev < 0) {
		fprintf(stderr, "engine: card %u is not a CUDA card visible here\n", card);
		return 1;
	}
	CK(cudaSetDevice(dev));
	int mask = use_peer ? fs_peer_open(c, card) : (int)(1u << card);
	printf("engine card %u (device %d): daemon reach 0x%x, readable 0x%x\n", card, dev,
	       fs_card_reach(c, card), (unsigned)mask);
	uint32_t topk = m.experts_used ? m.experts_used : 8;
	struct router rt;
	router_init(&rt, m.layers, m.experts, 1.0);
	uint8_t *chosen = calloc(m.experts, 1);
	uint64_t cnt[4] = {0}, looked = 0, hits = 0, verified = 0, bad = 0, nhit_all = 0;
	uint32_t warm = windows / 5;
	for (uint32_t w = 1; w <= windows; w++) {
		struct fs_view v;
		fs_window_begin(c, w, 1);
		fs_acquire(c, &v);
		for (uint32_t l = 0; l < m.layers; l++) {
			uint64_t t0 = now_ns();
			memset(chosen, 0, m.experts);
			for (uint32_t k = 0; k < topk && k < m.experts; k++) {
				uint32_t e;
				do
					e = route(&rt, l, &seed);
				while (chosen[e]);
				chosen[e] = 1;
				struct fs_place p;
				int kind = fs_lookup_from(c, &v, card, l, e, &p);
				int hit = kind == FS_PLACE_LOCAL || (use_peer && kind == FS_PLACE_PEER);
				if (w > warm) {
					cnt[kind & 3]++;
					looked++;
					hits += hit;
				}
				if (hit && nhit_all++ % 64 == 0 && p.device) {
					struct fs_expert_blob b;
					uint64_t got = 0;
					if (fs_arena_expert(c, l, e, &b) == 0 &&
					    fs_peer_sum(p.device, p.bytes, &got) == 0) {
						verified++;
						bad += got != fs_peer_sum_host(b.data, b.bytes);
					}
				}
				fs_post_usage(c, w, l, e, card, hit);
			}
			while (now_ns() - t0 < (uint64_t)layer_us * 1000u)
				;
		}
		fs_window_end(c, w);
		fs_release(c, &v);
	}
	/* What the cards hold at the end, as one view shows it. */
	uint64_t distinct = 0, dups = 0;
	struct fs_view v;
	fs_acquire(c, &v);
	for (uint32_t l = 0; l < m.layers; l++)
		for (uint32_t e = 0; e < m.experts; e++) {
			uint32_t h = 0;
			for (uint32_t k = 0; k < m.cards; k++)
				h += fs_lookup(c, &v, k, l, e, NULL) != 0;
			distinct += h > 0;
			dups += h > 1 ? h - 1 : 0;
		}
	fs_release(c, &v);
	printf("engine card %u %s: hit_rate %.4f lookups %" PRIu64 " local %" PRIu64 " peer %" PRIu64
	       " unreachable %" PRIu64 " miss %" PRIu64 " distinct_held %" PRIu64 " of %u dup_held %" PRIu64
	       " verified %" PRIu64 " mismatches %" PRIu64 "\n",
	       card, use_peer ? "peer-path" : "own-card", looked ? (double)hits / (double)looked : 0.0,
	       looked, cnt[FS_PLACE_LOCAL], cnt[FS_PLACE_PEER], cnt[FS_PLACE_UNREACHABLE], cnt[FS_PLACE_MISS],
	       distinct, m.layers * m.experts, dups, verified, bad);
	free(chosen);
	free(rt.perm);
	free(rt.cdf);
	fs_client_close(c);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "raw") == 0) {
		int quick = 0;
		const struct fs_opt opts[] = {FS_OPT_FLAG(
			"quick", 0, &quick, "one blob size, fewer rounds: the check, not the figures")};
		const struct fs_opt_cmd cmd = {.prog = "fs-peer-bench raw",
					       .usage = "usage: fs-peer-bench raw [--quick]\n\n",
					       .opts = opts,
					       .n = FS_OPT_N(opts)};
		fs_opt_parse_or_exit(&cmd, argc - 1, argv + 1);
		return raw(quick);
	}
	if (argc >= 2 && strcmp(argv[1], "engine") == 0)
		return engine(argc, argv);
	fprintf(stderr, "usage: fs-peer-bench raw [--quick]\n"
			"       fs-peer-bench engine SOCKET CARD PEER WINDOWS [LAYER_US [SEED]]\n");
	return 2;
}
