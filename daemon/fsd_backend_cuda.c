/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_backend_cuda.c: the CUDA backend.  Per card: one cudaMalloc'd slot
 * pool exported with cudaIpcGetMemHandle, and non-blocking prefetch streams.
 * The arena is registered pinned (portable) and the daemon region, where the
 * ready words live, registered host-mapped; after each copy the copy stream
 * itself writes the slot's ready word (cuStreamWriteValue32), so an engine
 * sees the bytes land with no host thread of ours on the path.  Where stream
 * memory operations do not work, a host function on the stream writes the
 * word instead (measured slower: docs/results/gpu.md).
 *
 * The hot thread issues copies directly (cudaMemcpyAsync costs ~1.3 us) and
 * learns of completions by watching the ready words it is waiting for: no
 * events, no callbacks in the common path.
 *
 * Linked against the static CUDA runtime, so foresightd starts (and runs
 * the host backend) on machines without a driver; the driver entry point
 * is looked up at run time.
 *
 * A card that fails (a failed cudaMemcpyAsync, ready-word write or host
 * function launch; a stream that reports an error, sticky or not, checked
 * every CUDA_CHECK_NS while copies are in flight; a copy not landed
 * CUDA_STUCK_NS after it should have) goes down: its in-flight copies are
 * abandoned, nothing more is submitted to it, and the engine's card_down
 * callback (bound at start: fse.h's struct fse_backend_cb) takes it out of
 * the tier with the CUDA error as the reason.  The
 * other cards keep serving; engines compute the lost card's experts from
 * the arena.  Nothing here aborts the daemon for a card's fault.
 *
 * Built where nvcc exists (FSD_HAVE_CUDA); elsewhere this file is a stub
 * without `start`: the backend is known by name but not built.
 */
#include "fsd.h"
#include "fsd_backend.h"

#ifdef FSD_HAVE_CUDA
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "fs_hex.h"
#include "fs_pace.h"
#include "fs_time.h"
#include "fsd_stamps.h"
#include "fse.h"

#define CUDA_MAX_STREAMS 8
#define CUDA_MAX_INFLIGHT 4096
/* While copies are in flight, ask a card's streams for errors this often:
 * cudaStreamQuery costs about a microsecond per stream, polls come every
 * few microseconds. */
#define CUDA_CHECK_NS 1000000u
/* A copy whose ready word has not come this long after it should have
 * landed: the card hangs (no error may ever come).  Seconds: far beyond
 * any copy of an expert, even behind a full queue. */
#define CUDA_STUCK_NS 5000000000ull

typedef CUresult (*pfn_write_value32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

struct cuda_inflight {
	uint32_t slot, gen;
	uint64_t bytes;
	uint64_t issued_ns;
	uint64_t start_ns, land_ns; /* bus budget: when the emulated link carries it */
};

struct cuda_card {
	int dev;
	void *pool;
	cudaIpcMemHandle_t ipc;
	cudaStream_t streams[CUDA_MAX_STREAMS];
	unsigned nstreams, next;
	CUdeviceptr ready_dev; /* the card's ready words, as this device sees them */
	struct cuda_inflight inflight[CUDA_MAX_INFLIGHT];
	unsigned ninflight;
	char pci[32];
	/* Bus budget (--bus-gbps given): the stream marks the copy done in a
	 * private word; the ready word follows when the emulated link has
	 * carried it (a token bucket per card: copies go over it one after the
	 * other at bus_gbps). */
	uint32_t *landed;
	CUdeviceptr landed_dev;
	uint64_t bus_free_ns;
	int failed;          /* down by its own fault: its streams are not waited for at stop (whether a
		     * card is down at all is the engine's record: is_down) */
	uint64_t checked_ns; /* last look at its streams for errors */
};

struct cuda_priv {
	struct fsd *d;
	struct fse_backend_cb cb; /* the engine's (bind) */
	struct cuda_card cards[FS_MAX_CARDS];
	pfn_write_value32 write_value32;
	int use_memops;
	int daemon_registered;
	/* The arena pinned, or pinning it failed (copies stay pageable): set
	 * at start or by cuda_arena_whole, both on the loop thread. */
	int arena_registered, arena_pageable;
	double budget_gbps; /* bus budget: --bus-gbps; 0 = none (the link's own speed) */
};

/* Host-function fallback: written by a CUDA driver thread when the copy
 * before it on the stream has completed. */
struct hostfn_arg {
	uint32_t *word;
	uint32_t gen;
};

static void CUDART_CB hostfn_write(void *p)
{
	struct hostfn_arg *a = p;
	fs_store_release(a->word, a->gen);
	free(a);
}

static int cerr(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	fsd_log(FSD_ERR, "cuda: %s: %s", what, cudaGetErrorString(e));
	return -EIO;
}

/* The attach reply's handle: the pool's IPC handle and the card's PCI bus
 * id, which the client library opens in its own process (client/fs_cuda.c). */
static int cuda_card_handle(struct fsd *d, uint32_t card, char *hex, size_t len, char *pci, size_t pci_len)
{
	struct cuda_priv *cp = d->backend_priv;
	if (!cp || len < 2 * sizeof(cudaIpcMemHandle_t) + 1 || pci_len == 0)
		return -EINVAL;
	fs_hex_encode(&cp->cards[card].ipc, sizeof(cudaIpcMemHandle_t), hex);
	snprintf(pci, pci_len, "%s", cp->cards[card].pci);
	return 0;
}

/* Before the regions exist: find the cards and size the pools. */
static int cuda_probe(struct fsd *d)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n == 0) {
		fsd_log(FSD_ERR,
			"cuda backend: no CUDA device (%s); use --backend host on machines without a GPU",
			e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
		return -ENODEV;
	}
	if (d->cfg.cards_set && d->cfg.cards < (uint32_t)n)
		n = (int)d->cfg.cards;
	if (n > (int)FS_MAX_CARDS)
		n = FS_MAX_CARDS;
	d->cfg.cards = (uint32_t)n;
	/* Size: --slots, or --pool-mib, or leave --leave-free-mib free (the
	 * smallest card decides, so every card gets the same slot count). */
	if (d->cfg.pool_mib || d->cfg.leave_free_mib) {
		uint64_t min_slots = UINT64_MAX;
		for (int i = 0; i < n; i++) {
			size_t fr, tot;
			if (cerr(cudaSetDevice(i), "cudaSetDevice") ||
			    cerr(cudaMemGetInfo(&fr, &tot), "cudaMemGetInfo"))
				return -EIO;
			uint64_t bytes = d->cfg.pool_mib ? (uint64_t)d->cfg.pool_mib << 20 :
					 fr > ((uint64_t)d->cfg.leave_free_mib << 20) ?
							   fr - ((uint64_t)d->cfg.leave_free_mib << 20) :
							   0;
			uint64_t s = bytes / d->slot_bytes;
			if (s < min_slots)
				min_slots = s;
		}
		if (min_slots == 0 || min_slots > (1u << 24)) {
			fsd_log(FSD_ERR, "cuda backend: pool size gives %llu slots of %llu bytes",
				(unsigned long long)min_slots, (unsigned long long)d->slot_bytes);
			return -EINVAL;
		}
		d->cfg.slots = (uint32_t)min_slots;
	}
	return 0;
}

static int cuda_start(struct fsd *d)
{
	struct cuda_priv *cp = calloc(1, sizeof(*cp));
	if (!cp)
		return -ENOMEM;
	cp->d = d;
	d->backend_priv = cp;

	/* The arena: pinned, readable by every card's copy engine.  While it
	 * still loads (served layer by layer) it is pinned at the first copy
	 * when the load is done (cuda_arena_whole): pinning faults in every
	 * page on one thread, which the loader's threads do in parallel. */
	if (!__atomic_load_n(&d->loading, __ATOMIC_ACQUIRE)) {
		if (cerr(cudaHostRegister(d->arena_shm.base, d->arena_shm.bytes, cudaHostRegisterPortable),
			 "cudaHostRegister(arena)"))
			return -EIO;
		cp->arena_registered = 1;
	}
	/* The daemon region: mapped into every card, so a stream can write ready words. */
	if (cerr(cudaHostRegister(d->daemon_shm.base, d->daemon_shm.bytes,
				  cudaHostRegisterPortable | cudaHostRegisterMapped),
		 "cudaHostRegister(daemon region)"))
		return -EIO;
	cp->daemon_registered = 1;

	enum cudaDriverEntryPointQueryResult q;
	void *fn = NULL;
	if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &fn, 12000, cudaEnableDefault, &q) ==
		    cudaSuccess &&
	    q == cudaDriverEntryPointSuccess)
		cp->write_value32 = (pfn_write_value32)fn;

	struct fs_card_desc *cd = (struct fs_card_desc *)((char *)d->dh + d->dh->off_cards);
	for (uint32_t i = 0; i < d->cfg.cards; i++) {
		struct cuda_card *c = &cp->cards[i];
		c->dev = (int)i;
		if (cerr(cudaSetDevice(c->dev), "cudaSetDevice"))
			return -EIO;
		struct cudaDeviceProp prop;
		if (cerr(cudaGetDeviceProperties(&prop, c->dev), "cudaGetDeviceProperties") ||
		    cerr(cudaDeviceGetPCIBusId(c->pci, sizeof(c->pci), c->dev), "cudaDeviceGetPCIBusId"))
			return -EIO;
		size_t bytes = (size_t)d->cfg.slots * d->slot_bytes;
		if (cerr(cudaMalloc(&c->pool, bytes), "cudaMalloc(slot pool)") ||
		    cerr(cudaIpcGetMemHandle(&c->ipc, c->pool), "cudaIpcGetMemHandle"))
			return -EIO;
		c->nstreams = d->cfg.streams ? d->cfg.streams : 2;
		if (c->nstreams > CUDA_MAX_STREAMS)
			c->nstreams = CUDA_MAX_STREAMS;
		for (unsigned s = 0; s < c->nstreams; s++)
			if (cerr(cudaStreamCreateWithFlags(&c->streams[s], cudaStreamNonBlocking),
				 "cudaStreamCreate"))
				return -EIO;
		void *dptr;
		if (cerr(cudaHostGetDevicePointer(&dptr, fsd_ready(d, i), 0), "cudaHostGetDevicePointer"))
			return -EIO;
		c->ready_dev = (CUdeviceptr)(uintptr_t)dptr;
		cd[i].kind = FS_BACKEND_CUDA;
		cd[i].fd_index = UINT32_MAX;
		cd[i].pool_bytes = bytes;
		snprintf(cd[i].name, sizeof(cd[i].name), "%.20s %.18s", prop.name, c->pci); /* 40 bytes */
	}

	/* Which card reads which (fs_daemon_hdr.peer_reach): narrow what
	 * fsd_region.c published to the pairs with peer access.  The daemon
	 * enables nothing itself (it copies host -> card only); engines map a
	 * peer card's pool through its IPC handle (client/fs_cuda.c). */
	for (uint32_t i = 0; i < d->cfg.cards; i++) {
		uint16_t m = (uint16_t)(1u << i);
		for (uint32_t j = 0; j < d->cfg.cards; j++) {
			int ok = 0;
			if (j != i &&
			    cudaDeviceCanAccessPeer(&ok, cp->cards[i].dev, cp->cards[j].dev) == cudaSuccess &&
			    ok)
				m |= (uint16_t)(1u << j);
		}
		d->dh->peer_reach[i] &= m;
		d->dh->peer_reach[i] |= (uint16_t)(1u << i);
		if (d->cfg.cards > 1)
			fsd_log(FSD_INFO, "cuda: card %u reads cards 0x%04x (peer access)", i,
				(unsigned)d->dh->peer_reach[i]);
	}

	/* The bus budget: a card's copies land no faster than --bus-gbps, to
	 * emulate a slower link (PCIe Gen4 x8: 13.5 GB/s) on faster hardware. */
	if (d->cfg.bus_gbps_set && d->cfg.bus_gbps > 0) {
		cp->budget_gbps = d->cfg.bus_gbps;
		for (uint32_t i = 0; i < d->cfg.cards; i++) {
			struct cuda_card *c = &cp->cards[i];
			void *dptr;
			if (cerr(cudaSetDevice(c->dev), "cudaSetDevice") ||
			    cerr(cudaHostAlloc((void **)&c->landed, (size_t)d->cfg.slots * sizeof(uint32_t),
					       cudaHostAllocPortable | cudaHostAllocMapped),
				 "cudaHostAlloc(landed words)") ||
			    cerr(cudaHostGetDevicePointer(&dptr, c->landed, 0), "cudaHostGetDevicePointer"))
				return -EIO;
			c->landed_dev = (CUdeviceptr)(uintptr_t)dptr;
		}
		fsd_log(FSD_INFO, "cuda: bus budget %.3g GB/s per card (copies land no faster)",
			d->cfg.bus_gbps);
	}

	/* Prove that the stream can write a ready word before relying on it. */
	if (cp->write_value32) {
		uint32_t *w = fsd_ready(d, 0);
		fs_store_release(&w[0], 0u);
		struct cuda_card *c = &cp->cards[0];
		cudaSetDevice(c->dev);
		CUresult r = cp->write_value32((CUstream)c->streams[0], c->ready_dev, 0x5a5a5a5au, 0);
		cudaError_t e = cudaStreamSynchronize(c->streams[0]);
		cp->use_memops = r == CUDA_SUCCESS && e == cudaSuccess &&
				 fs_load_acquire(&w[0]) == 0x5a5a5a5au;
		fs_store_release(&w[0], 0u);
	}
	if (!cp->use_memops)
		fsd_log(FSD_WARN,
			"cuda backend: cuStreamWriteValue32 unavailable: ready words written by a host "
			"function on the stream (higher latency)");
	fsd_log(FSD_INFO,
		"backend cuda: %u cards x %u slots x %llu bytes, %u streams each, ready words by %s",
		d->cfg.cards, d->cfg.slots, (unsigned long long)d->slot_bytes, cp->cards[0].nstreams,
		cp->use_memops ? "cuStreamWriteValue32" : "host function");
	return 0;
}

static void cuda_bind(void *ctx, const struct fse_backend_cb *cb)
{
	struct cuda_priv *cp = ctx;
	cp->cb = *cb;
}

/* The card is down, reported or applied (the engine's record). */
static int is_down(const struct cuda_priv *cp, uint32_t card)
{
	return card < 32 && (cp->cb.cards_down(cp->cb.ctx) >> card & 1u);
}

/* Card `card` failed: abandon its copies, submit nothing more to it, and
 * take it down with the CUDA error as the reason (hot thread). */
static void card_fail(struct fsd *d, uint32_t card, const char *what, const char *err)
{
	struct cuda_priv *cp = d->backend_priv;
	struct cuda_card *c = &cp->cards[card];
	if (c->failed || is_down(cp, card))
		return;
	c->failed = 1;
	c->ninflight = 0;
	(void)cudaGetLastError(); /* clear a non-sticky error: the next card's calls start clean */
	char reason[128];
	snprintf(reason, sizeof(reason), "cuda %s %s: %s", c->pci, what, err);
	(void)cp->cb.card_down(cp->cb.ctx, card, reason);
}

static void card_fail_rt(struct fsd *d, uint32_t card, const char *what, cudaError_t e)
{
	card_fail(d, card, what, cudaGetErrorString(e));
}

/* The engine took the card down (an admin, or card_fail above). */
static void cuda_card_down(void *ctx, uint32_t card)
{
	struct cuda_priv *cp = ctx;
	cp->cards[card].ninflight = 0;
}

/* The arena, whole now, pinned (a copy from pageable memory is right but
 * staged through the driver's buffers, so slower). */
static void pin_arena(struct fsd *d, struct cuda_priv *cp)
{
	uint64_t t0 = fs_now_ns();
	cudaError_t e = cudaHostRegister(d->arena_shm.base, d->arena_shm.bytes, cudaHostRegisterPortable);
	if (e != cudaSuccess) {
		fsd_log(FSD_WARN, "cuda: cudaHostRegister(arena) after the load: %s; copies stay pageable",
			cudaGetErrorString(e));
		cp->arena_pageable = 1;
		return;
	}
	cp->arena_registered = 1;
	fsd_log(FSD_INFO, "cuda: the loaded arena pinned in %.2f s", (double)(fs_now_ns() - t0) / 1e9);
}

/* Loop thread, the load done (fsd_backend.h's arena_whole): pin here, not
 * in the hot thread at its first copy.  That took 0.83 s for a 17.5 GB
 * arena on an H100 host, during which the hot thread took no record: a
 * llama.cpp run started with the daemon decoded its first 40-60 tokens with no
 * copy at all and then met a backlog of stale records (hit rate 68 %
 * against 92 % for the same routing on the host backend,
 * docs/results/llama.md).  The hot thread's copies meanwhile read the
 * arena pageable, as they do while it loads. */
static void cuda_arena_whole(struct fsd *d)
{
	struct cuda_priv *cp = d->backend_priv;
	if (cp && !cp->arena_registered && !cp->arena_pageable)
		pin_arena(d, cp);
}

static void cuda_submit(void *ctx, const struct fse_copy *cpy)
{
	struct cuda_priv *cp = ctx;
	struct fsd *d = cp->d;
	struct cuda_card *c = &cp->cards[cpy->card];
	fsd_stamp_submit(cpy->card, cpy->slot, fs_now_ns()); /* bench builds only */
	/* The arena is pinned at start or when its load is done
	 * (cuda_arena_whole), never here: until then copies read it pageable. */
	/* The length and the source are the engine's (fse_pass.c: the core's
	 * size, bounded by the slot); it submits nothing to a card that is
	 * down. */
	uint64_t bytes = cpy->bytes;
	uint32_t *ready = fsd_ready(d, cpy->card);
	if (c->ninflight == CUDA_MAX_INFLIGHT) {
		fsd_log(FSD_ERR, "cuda backend: more than %u copies in flight on card %u", CUDA_MAX_INFLIGHT,
			cpy->card);
		abort();
	}
	fs_store_release(&ready[cpy->slot], FS_GEN_NONE);
	/* With a bus budget the stream writes the private landed word; poll
	 * publishes the ready word once the emulated link has carried the
	 * bytes. */
	uint32_t *word = c->landed ? &c->landed[cpy->slot] : &ready[cpy->slot];
	CUdeviceptr word_dev = c->landed ? c->landed_dev : c->ready_dev;
	if (c->landed)
		fs_store_release(word, FS_GEN_NONE);
	cudaStream_t s = c->streams[c->next++ % c->nstreams];
	cudaError_t err = cudaSetDevice(c->dev);
	if (err == cudaSuccess)
		err = cudaMemcpyAsync((char *)c->pool + (uint64_t)cpy->slot * d->slot_bytes,
				      (const char *)d->arena + cpy->src, bytes, cudaMemcpyHostToDevice, s);
	if (err != cudaSuccess) {
		/* A broken copy path cannot be reported as landed: the card goes
		 * down, the others keep serving. */
		card_fail_rt(d, cpy->card, "cudaMemcpyAsync", err);
		return;
	}
	/* The copy is in the stream: that is when it was issued (issued_ns).
	 * The ready word's write queued behind it costs the hot thread another
	 * ~3 us of host time (cuStreamWriteValue32), which is signalling, not
	 * issuing (issue 20: the stamp was after it until session 6). */
	uint64_t issued = fs_now_ns();
	if (cp->use_memops) {
		CUresult r = cp->write_value32(
			(CUstream)s, word_dev + (CUdeviceptr)cpy->slot * sizeof(uint32_t), cpy->gen, 0);
		if (r != CUDA_SUCCESS) {
			char msg[48];
			snprintf(msg, sizeof(msg), "CUresult %d", (int)r);
			card_fail(d, cpy->card, "cuStreamWriteValue32", msg);
			return;
		}
	} else {
		struct hostfn_arg *a = malloc(sizeof(*a));
		if (!a)
			abort();
		a->word = word;
		a->gen = cpy->gen;
		if ((err = cudaLaunchHostFunc(s, hostfn_write, a)) != cudaSuccess) {
			free(a);
			card_fail_rt(d, cpy->card, "cudaLaunchHostFunc", err);
			return;
		}
	}
	uint64_t now = fs_now_ns(), start;
	uint64_t land = fs_pace_copy(&c->bus_free_ns, now, bytes, cp->budget_gbps, &start);
	c->inflight[c->ninflight++] = (struct cuda_inflight){cpy->slot, cpy->gen, bytes, now, start, land};
	fsd_issued(d, cpy->card, cpy->slot, issued);
}

/* Errors the copies themselves do not return: a stream that failed (an
 * asynchronous error, or a sticky one that broke the card's context), or a
 * copy that never lands.  The card then goes down.  Hot thread. */
static void check_card(struct fsd *d, uint32_t card, uint64_t now)
{
	struct cuda_priv *cp = d->backend_priv;
	struct cuda_card *c = &cp->cards[card];
	if (c->failed || c->ninflight == 0 || now - c->checked_ns < CUDA_CHECK_NS || is_down(cp, card))
		return;
	c->checked_ns = now;
	cudaError_t e = cudaSetDevice(c->dev);
	for (unsigned s = 0; e == cudaSuccess && s < c->nstreams; s++) {
		e = cudaStreamQuery(c->streams[s]);
		if (e == cudaErrorNotReady)
			e = cudaSuccess;
	}
	if (e != cudaSuccess) {
		card_fail_rt(d, card, "stream", e);
		return;
	}
	for (unsigned k = 0; k < c->ninflight; k++)
		if (now > c->inflight[k].land_ns + CUDA_STUCK_NS) {
			card_fail(d, card, "copy", "not landed 5 s after it should have (the card hangs)");
			return;
		}
}

/* Completions: every in-flight copy whose ready word now carries its gen. */
static unsigned cuda_poll(void *ctx, struct fse_done *out, unsigned max)
{
	struct cuda_priv *cp = ctx;
	struct fsd *d = cp->d;
	unsigned n = 0;
	uint64_t now = 0;
	for (uint32_t i = 0; i < d->cfg.cards && n < max; i++) {
		struct cuda_card *c = &cp->cards[i];
		uint32_t *ready = fsd_ready(d, i);
		if (c->failed || is_down(cp, i))
			continue;
		if (c->ninflight) {
			if (!now)
				now = fs_now_ns();
			check_card(d, i, now);
		}
		for (unsigned k = 0; k < c->ninflight && n < max;) {
			struct cuda_inflight *f = &c->inflight[k];
			if (c->landed) {
				/* bus budget: the bytes are in (landed word) and the
				 * emulated link has carried them (land_ns) */
				if (fs_load_acquire(&c->landed[f->slot]) != f->gen) {
					k++;
					continue;
				}
				if (!now)
					now = fs_now_ns();
				if (now < f->land_ns) {
					k++;
					continue;
				}
				fs_store_release(&ready[f->slot], f->gen);
			} else if (fs_load_acquire(&ready[f->slot]) != f->gen) {
				k++;
				continue;
			}
			if (!now)
				now = fs_now_ns();
			uint64_t busy = c->landed ? f->land_ns - f->start_ns : now - f->issued_ns;
			out[n++] = (struct fse_done){.card = i,
						     .slot = f->slot,
						     .gen = f->gen,
						     .busy_ns = busy,
						     .bytes = f->bytes};
			c->inflight[k] = c->inflight[--c->ninflight];
		}
	}
	return n;
}

static void cuda_stop(struct fsd *d)
{
	struct cuda_priv *cp = d->backend_priv;
	if (!cp)
		return;
	for (uint32_t i = 0; i < d->cfg.cards; i++) {
		struct cuda_card *c = &cp->cards[i];
		if (cudaSetDevice(c->dev) != cudaSuccess)
			continue;
		for (unsigned s = 0; s < c->nstreams; s++)
			if (c->streams[s]) {
				if (!c->failed) /* a card that failed may never finish */
					cudaStreamSynchronize(c->streams[s]);
				cudaStreamDestroy(c->streams[s]);
			}
		if (c->pool)
			cudaFree(c->pool);
		if (c->landed)
			cudaFreeHost(c->landed);
	}
	if (cp->daemon_registered)
		cudaHostUnregister(d->daemon_shm.base);
	if (cp->arena_registered)
		cudaHostUnregister(d->arena_shm.base);
	free(cp);
	d->backend_priv = NULL;
}

const struct fsd_backend fsd_backend_cuda = {
	.name = "cuda",
	.kind = FS_BACKEND_CUDA,
	.probe = cuda_probe,
	.start = cuda_start,
	.ops = {.bind = cuda_bind, .submit = cuda_submit, .poll = cuda_poll, .card_down = cuda_card_down},
	.stop = cuda_stop,
	.card_handle = cuda_card_handle,
	.arena_whole = cuda_arena_whole,
};

#else /* no CUDA toolkit at build time: known, not built */
const struct fsd_backend fsd_backend_cuda = {.name = "cuda", .kind = FS_BACKEND_CUDA};
#endif
