/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-gpu-check: an engine process for the CUDA backend's tests and
 * benchmarks.  Modes:
 *
 *   integrity SOCKET N [MAX_S]  post predictions that churn the slots, and check
 *                            N landed slots byte for byte against the arena
 *                            (device -> host copy + memcmp), plus a kernel that
 *                            reads slots on the device through the ready word.
 *                            Prints "landings N mismatches M".
 *   latency SOCKET N [GAP_US [RUNS]]  RUNS (default 1) runs of N samples
 *                            (bench/latency/fs_post_lat.h: post one prediction
 *                            for a non-resident expert, spin until the slot is
 *                            usable).  Prints each run's p50/p99 of post->issue
 *                            and post->ready, their spread across runs, the
 *                            plain transfer of one expert, and post->ready
 *                            minus that transfer.
 *   bandwidth SOCKET ROUNDS  prefetch a full pool of experts through the
 *                            daemon, against raw cudaMemcpyAsync of the same
 *                            blobs from the same (pinned) arena pages.
 *                            Prints "daemon_gbps X raw_gbps Y ratio Z".
 *   idle SOCKET SECONDS      attach and stay idle (the daemon's idle CPU cost).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include <foresight/foresight.h>

#include "fs_gpu_kernel.h"
#include "fs_opt.h"
#include "fs_post_lat.h"

static uint64_t now_ns(void)
{
	return fs_post_lat_now_ns();
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#define CK(x)                                                                                  \
	do {                                                                                   \
		cudaError_t e_ = (x);                                                          \
		if (e_ != cudaSuccess) {                                                       \
			fprintf(stderr, "fs-gpu-check: %s: %s\n", #x, cudaGetErrorString(e_)); \
			exit(3);                                                               \
		}                                                                              \
	} while (0)

static fs_client *open_client(const char *sock, const char *name)
{
	struct fs_client_opts o = {.socket_path = sock, .name = name, .ring_entries = 65536};
	fs_client *c;
	int r = fs_client_open(&c, &o);
	if (r < 0) {
		fprintf(stderr, "fs-gpu-check: attach: %s\n", fs_strerror(r));
		exit(2);
	}
	return c;
}

static uint32_t card_of(const struct fs_model_info *m, uint32_t layer)
{
	return layer * m->cards / m->layers;
}

static int integrity(const char *sock, unsigned long want, double max_s)
{
	uint64_t t_end = now_ns() + (uint64_t)(max_s * 1e9);
	fs_client *c = open_client(sock, "gpu-integrity");
	struct fs_model_info m;
	fs_client_model(c, &m);
	uint64_t bytes_max = m.max_expert_bytes;
	unsigned char *hbuf = malloc(bytes_max);
	/* The kernel check reads ready words on the device.  The cards' ready
	 * words lie back to back in the daemon region, so one card's last page
	 * can be the next card's first: register the pages of all of them once
	 * (a second registration of a page fails "already mapped"). */
	const uint32_t *ready_dev[16] = {0};
	uintptr_t rlo = UINTPTR_MAX, rhi = 0;
	for (uint32_t card = 0; card < m.cards; card++) {
		struct fs_card_info ci;
		fs_client_card(c, card, &ci);
		uintptr_t rw = (uintptr_t)fs_card_ready_words(c, card);
		uintptr_t end = rw + (uintptr_t)ci.slots * 4;
		rlo = rw < rlo ? rw : rlo;
		rhi = end > rhi ? end : rhi;
	}
	rlo &= ~(uintptr_t)4095;
	rhi = (rhi + 4095) & ~(uintptr_t)4095;
	/* Portable: the kernel check runs on each slot's own card (its context). */
	CK(cudaHostRegister((void *)rlo, rhi - rlo,
			    cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterReadOnly));
	for (uint32_t card = 0; card < m.cards; card++) {
		void *dp;
		CK(cudaHostGetDevicePointer(&dp, (void *)fs_card_ready_words(c, card), 0));
		ready_dev[card] = dp;
	}
	unsigned long checks = 0, bad = 0, kchecks = 0, kbad = 0;
	uint32_t recent[256][2];
	unsigned nrecent = 0;
	for (uint32_t w = 1; checks < want && now_ns() < t_end; w++) {
		struct fs_view v;
		fs_window_begin(c, w, 1);
		fs_acquire(c, &v);
		for (int i = 0; i < 24; i++) {
			uint32_t l = (uint32_t)(rnd() % m.layers), e = (uint32_t)(rnd() % m.experts);
			fs_post_predict(c, w, l, e, card_of(&m, l), 1.0f, 1, FS_SOURCE_HOST);
			recent[nrecent % 256][0] = l;
			recent[nrecent % 256][1] = e;
			nrecent++;
		}
		unsigned n = nrecent < 256 ? nrecent : 256;
		for (int i = 0; i < 32; i++) {
			uint32_t *le = recent[rnd() % n];
			struct fs_slot s;
			struct fs_expert_blob b;
			if (!fs_lookup_live(c, &v, card_of(&m, le[0]), le[0], le[1], &s))
				continue;
			fs_arena_expert(c, le[0], le[1], &b);
			if (!s.device || s.bytes != b.bytes) {
				bad++;
				checks++;
				continue;
			}
			CK(cudaMemcpy(hbuf, s.device, s.bytes, cudaMemcpyDeviceToHost));
			bad += memcmp(hbuf, b.data, b.bytes) != 0;
			checks++;
			if ((checks & 15) == 0) {
				/* The engine's-kernel path: the device reads the ready word and
				 * the slot's bytes; the host sums the arena blob the same way. */
				uint64_t dsum = 0;
				int dev = fs_card_device(c, s.card);
				if (dev >= 0)
					CK(cudaSetDevice(dev)); /* the slot's own card reads it */
				int ok = fs_gpu_sum_if_ready(s.device, s.bytes, ready_dev[s.card], s.slot,
							     s.gen, &dsum);
				if (ok >= 0) {
					kchecks++;
					kbad += ok == 0 || dsum != fs_gpu_sum_host(b.data, b.bytes);
				}
			}
		}
		fs_window_end(c, w);
		fs_release(c, &v);
	}
	printf("landings %lu mismatches %lu kernel_checks %lu kernel_mismatches %lu dropped %llu\n", checks,
	       bad, kchecks, kbad, (unsigned long long)fs_client_dropped(c));
	fs_client_close(c);
	free(hbuf);
	return bad || kbad ? 1 : 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The transfer the ready word waits for: one expert of layer 0 copied from
 * the arena (pinned here too) with cudaMemcpyAsync + cudaStreamSynchronize,
 * timed on the host like the engine's wait; the median of 50 (after 5
 * warm-ups).  "Ready seen over the transfer" = post -> ready seen minus this. */
static double transfer_us(fs_client *c, const struct fs_model_info *m)
{
	struct fs_expert_blob b;
	fs_arena_expert(c, 0, 0, &b);
	uintptr_t lo = (uintptr_t)b.data & ~(uintptr_t)4095;
	uintptr_t hi = ((uintptr_t)b.data + b.bytes + 4095) & ~(uintptr_t)4095;
	int dev = fs_card_device(c, card_of(m, 0));
	if (dev >= 0)
		CK(cudaSetDevice(dev));
	CK(cudaHostRegister((void *)lo, hi - lo, cudaHostRegisterPortable | cudaHostRegisterReadOnly));
	void *d;
	cudaStream_t st;
	CK(cudaMalloc(&d, b.bytes));
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	uint64_t t[55];
	for (int i = 0; i < 55; i++) {
		uint64_t t0 = now_ns();
		CK(cudaMemcpyAsync(d, b.data, b.bytes, cudaMemcpyHostToDevice, st));
		CK(cudaStreamSynchronize(st));
		t[i] = now_ns() - t0;
	}
	qsort(t + 5, 50, 8, cmp_u64);
	CK(cudaStreamDestroy(st));
	CK(cudaFree(d));
	CK(cudaHostUnregister((void *)lo));
	return t[5 + 25] / 1e3;
}

static int latency(const char *sock, unsigned runs, unsigned n, unsigned gap_us)
{
	fs_client *c = open_client(sock, "gpu-latency");
	struct fs_model_info m;
	fs_client_model(c, &m);
	struct fs_post_lat l;
	int r = fs_post_lat_runs(c, runs, n, gap_us, &l);
	if (r < 0) {
		fprintf(stderr, "fs-gpu-check: latency: %s\n", fs_strerror(r));
		exit(2);
	}
	double xfer = transfer_us(c, &m);
	char extra[160];
	snprintf(extra, sizeof(extra), "transfer_us %.2f ready_over_transfer_us p50 %.2f p99 %.2f", xfer,
		 l.seen_p50 - xfer, l.seen_p99_med - xfer);
	fs_post_lat_print(&l, extra);
	fs_client_close(c);
	return l.got && !l.timeouts && xfer > 0 ? 0 : 1;
}

/* idle SOCKET SECONDS: attach and do nothing, so the caller can read what
 * the daemon's hot thread costs with an engine attached and idle. */
static int idle(const char *sock, double secs)
{
	fs_client *c = open_client(sock, "gpu-idle");
	printf("idle attached\n");
	fflush(stdout);
	usleep((useconds_t)(secs * 1e6));
	fs_client_close(c);
	return 0;
}

static int bandwidth(const char *sock, unsigned rounds)
{
	fs_client *c = open_client(sock, "gpu-bandwidth");
	struct fs_model_info m;
	fs_client_model(c, &m);
	struct fs_card_info ci;
	fs_client_card(c, 0, &ci);
	unsigned k = ci.slots; /* a full pool per card per round */
	uint64_t total = (uint64_t)m.layers * m.experts;
	double best_daemon = 0;
	uint32_t w = 1;
	for (unsigned r = 0; r < rounds; r++) {
		/* Experts of this round: a window of the arena not resident now. */
		uint64_t first = (uint64_t)r * k % total;
		uint64_t bytes = 0;
		uint64_t t0 = now_ns();
		for (uint32_t card = 0; card < m.cards; card++)
			for (unsigned i = 0; i < k; i++) {
				uint64_t x = (first + i + (uint64_t)card * k) % total;
				uint32_t l = (uint32_t)(x / m.experts), e = (uint32_t)(x % m.experts);
				fs_post_predict(c, w, l, e, card, 1.0f, 1, FS_SOURCE_HOST);
			}
		/* Wait until every one of them is usable. */
		struct fs_view v;
		fs_acquire(c, &v);
		for (uint32_t card = 0; card < m.cards; card++)
			for (unsigned i = 0; i < k; i++) {
				uint64_t x = (first + i + (uint64_t)card * k) % total;
				uint32_t l = (uint32_t)(x / m.experts), e = (uint32_t)(x % m.experts);
				struct fs_slot s;
				uint64_t until = now_ns() + 2000000000ull;
				int hit;
				while (!(hit = fs_lookup_live(c, &v, card, l, e, &s)) && now_ns() < until) {
					fs_release(c, &v); /* windows pass (see latency) */
					fs_acquire(c, &v);
				}
				if (!hit) {
					fprintf(stderr, "fs-gpu-check: expert %u/%u never landed\n", l, e);
					return 1;
				}
				bytes += s.bytes;
			}
		double gbps = (double)bytes / (double)(now_ns() - t0);
		fs_release(c, &v);
		if (gbps > best_daemon)
			best_daemon = gbps;
		w += 4; /* older wants go stale; nothing to do with this round */
		fs_window_end(c, w);
		usleep(20000); /* let evictions pass their grace period */
	}
	/* Raw: the same blobs, from the same arena pages (pinned here too), into
	 * device buffers with cudaMemcpyAsync on two streams per card. */
	struct fs_expert_blob b0, bl;
	fs_arena_expert(c, 0, 0, &b0);
	fs_arena_expert(c, m.layers - 1, m.experts - 1, &bl);
	uintptr_t lo = (uintptr_t)b0.data & ~(uintptr_t)4095;
	uintptr_t hi = ((uintptr_t)bl.data + bl.bytes + 4095) & ~(uintptr_t)4095;
	CK(cudaHostRegister((void *)lo, hi - lo, cudaHostRegisterPortable | cudaHostRegisterReadOnly));
	double best_raw = 0;
	void *dbuf[16];
	cudaStream_t st[16][2];
	for (uint32_t card = 0; card < m.cards; card++) {
		CK(cudaSetDevice((int)card));
		CK(cudaMalloc(&dbuf[card], (size_t)k * ci.slot_bytes));
		CK(cudaStreamCreateWithFlags(&st[card][0], cudaStreamNonBlocking));
		CK(cudaStreamCreateWithFlags(&st[card][1], cudaStreamNonBlocking));
	}
	for (unsigned r = 0; r < rounds; r++) {
		uint64_t first = (uint64_t)r * k % total, bytes = 0;
		uint64_t t0 = now_ns();
		for (uint32_t card = 0; card < m.cards; card++) {
			CK(cudaSetDevice((int)card));
			for (unsigned i = 0; i < k; i++) {
				uint64_t x = (first + i + (uint64_t)card * k) % total;
				struct fs_expert_blob b;
				fs_arena_expert(c, (uint32_t)(x / m.experts), (uint32_t)(x % m.experts), &b);
				CK(cudaMemcpyAsync((char *)dbuf[card] + (uint64_t)i * ci.slot_bytes, b.data,
						   b.bytes, cudaMemcpyHostToDevice, st[card][i & 1]));
				bytes += b.bytes;
			}
		}
		for (uint32_t card = 0; card < m.cards; card++) {
			CK(cudaSetDevice((int)card));
			CK(cudaDeviceSynchronize());
		}
		double gbps = (double)bytes / (double)(now_ns() - t0);
		if (gbps > best_raw)
			best_raw = gbps;
	}
	printf("expert_bytes %llu cards %u experts_per_round %u daemon_gbps %.1f raw_gbps %.1f ratio %.3f\n",
	       (unsigned long long)m.max_expert_bytes, m.cards, k * m.cards, best_daemon, best_raw,
	       best_raw > 0 ? best_daemon / best_raw : 0);
	fs_client_close(c);
	return 0;
}

/* A command's arguments against its typed rows (common/fs_opt.h): returns
 * when they were taken; exits 0 after --help, 2 after an error. */
static void args_of(int argc, char **argv, const char *prog, const char *usage, const struct fs_opt *args,
		    unsigned nargs, unsigned min)
{
	const struct fs_opt_cmd cmd = {
		.prog = prog, .usage = usage, .args = args, .nargs = nargs, .min_args = min};
	fs_opt_parse_or_exit(&cmd, argc, argv);
}

int main(int argc, char **argv)
{
	const char *sock = NULL;
	uint32_t n = 0, gap_us = 100, runs = 1;
	double max_s = 600.0, secs = 0;
	const struct fs_opt sock_row = FS_OPT_STR("SOCKET", NULL, &sock, "foresightd's control socket");
	const char *what = argc >= 2 ? argv[1] : "";
	if (strcmp(what, "integrity") == 0) {
		const struct fs_opt a[] = {
			sock_row, FS_OPT_U32("N", NULL, &n, 1, 100000000, "landed slots to check"),
			FS_OPT_DBL("MAX_S", NULL, &max_s, 0.001, 86400, "give up after, s")};
		args_of(argc - 1, argv + 1, "fs-gpu-check integrity",
			"usage: fs-gpu-check integrity SOCKET N [MAX_S]\n\n", a, FS_OPT_N(a), 2);
		return integrity(sock, n, max_s);
	} else if (strcmp(what, "latency") == 0) {
		const struct fs_opt a[] = {
			sock_row, FS_OPT_U32("N", NULL, &n, 1, 10000000, "samples per run"),
			FS_OPT_U32("GAP_US", NULL, &gap_us, 0, 10000000, "sleep between samples, us"),
			FS_OPT_U32("RUNS", NULL, &runs, 1, 1000, "runs")};
		args_of(argc - 1, argv + 1, "fs-gpu-check latency",
			"usage: fs-gpu-check latency SOCKET N [GAP_US [RUNS]]\n\n", a, FS_OPT_N(a), 2);
		return latency(sock, runs, n, gap_us);
	} else if (strcmp(what, "idle") == 0) {
		const struct fs_opt a[] = {
			sock_row, FS_OPT_DBL("SECONDS", NULL, &secs, 0, 86400, "how long to stay attached")};
		args_of(argc - 1, argv + 1, "fs-gpu-check idle",
			"usage: fs-gpu-check idle SOCKET SECONDS\n\n", a, FS_OPT_N(a), 2);
		return idle(sock, secs);
	} else if (strcmp(what, "bandwidth") == 0) {
		const struct fs_opt a[] = {sock_row, FS_OPT_U32("ROUNDS", NULL, &n, 1, 1000000, "rounds")};
		args_of(argc - 1, argv + 1, "fs-gpu-check bandwidth",
			"usage: fs-gpu-check bandwidth SOCKET ROUNDS\n\n", a, FS_OPT_N(a), 2);
		return bandwidth(sock, n);
	} else {
		fprintf(stderr,
			"usage: fs-gpu-check integrity SOCKET N [MAX_S] | latency SOCKET N [GAP_US [RUNS]] | bandwidth SOCKET ROUNDS | "
			"idle SOCKET SECONDS\n");
	}
	return 2;
}
