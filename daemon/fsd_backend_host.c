/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_backend_host.c: the host backend.  Each stand-in card is a slot pool
 * in a memfd (clients map it read-only) and a copy thread that moves arena
 * bytes into slots no faster than a configured bus (default 13.5 GB/s, a
 * PCIe Gen4 x8 link), then flips the slot's ready word: the same contract
 * the CUDA backend's copy stream honours.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs_pace.h"
#include "fs_time.h"
#include "fsd.h"
#include "fsd_backend.h"
#include "fsd_stamps.h"
#include "fse.h"

#define HOST_QCAP 4096u

struct host_card {
	struct host_priv *hp;
	uint32_t card;
	pthread_t thr;
	int started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct fse_copy q[HOST_QCAP];
	uint32_t head, tail;
	int stop;
	uint64_t bus_free_at;
};

struct host_priv {
	struct fsd *d;
	struct fse_backend_cb cb; /* the engine's (bind) */
	struct host_card cards[FS_MAX_CARDS];
};

static void sleep_until(uint64_t t)
{
	for (;;) {
		uint64_t now = fs_now_ns();
		if (now >= t)
			return;
		if (t - now > 60000) {
			uint64_t ns = t - now - 50000;
			struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
					      .tv_nsec = (long)(ns % 1000000000u)};
			nanosleep(&ts, NULL);
		}
	}
}

static void *copy_thread(void *arg)
{
	struct host_card *hc = arg;
	struct host_priv *hp = hc->hp;
	struct fsd *d = hp->d;
	uint32_t *ready = fsd_ready(d, hc->card);
	uint8_t *pool = d->pool_shm[hc->card].base;

	for (;;) {
		pthread_mutex_lock(&hc->lock);
		while (hc->head == hc->tail && !hc->stop)
			pthread_cond_wait(&hc->cond, &hc->lock);
		if (hc->stop) {
			pthread_mutex_unlock(&hc->lock);
			return NULL;
		}
		struct fse_copy cp = hc->q[hc->head % HOST_QCAP];
		hc->head++;
		pthread_mutex_unlock(&hc->lock);

		/* The length and the source are the engine's (fse_pass.c:
		 * the core's size, bounded by the slot). */
		uint64_t bytes = cp.bytes;
		uint64_t start;
		uint64_t done_at = fs_pace_copy(&hc->bus_free_at, fs_now_ns(), bytes, d->cfg.bus_gbps,
						&start);
		fs_store_release(&ready[cp.slot], FS_GEN_NONE);
		fsd_issued(d, cp.card, cp.slot, fs_now_ns());
		memcpy(pool + (uint64_t)cp.slot * d->slot_bytes, (const uint8_t *)d->arena + cp.src, bytes);
		sleep_until(done_at); /* the emulated bus is the limit */
		fs_store_release(&ready[cp.slot], cp.gen);
		struct fse_done dn = {.card = cp.card,
				      .slot = cp.slot,
				      .gen = cp.gen,
				      .busy_ns = done_at - start,
				      .bytes = bytes};
		hp->cb.landed(hp->cb.ctx, &dn);
	}
}

static int host_start(struct fsd *d)
{
	struct host_priv *hp = calloc(1, sizeof(*hp));
	if (!hp)
		return -ENOMEM;
	hp->d = d;
	d->backend_priv = hp;
	for (uint32_t i = 0; i < d->cfg.cards; i++) {
		int r = fs_shm_create(&d->pool_shm[i], "foresight-pool",
				      (size_t)(d->cfg.slots * d->slot_bytes));
		if (r < 0)
			return r;
		d->pool_ro_fd[i] = fs_shm_ro_fd(&d->pool_shm[i]);
		if (d->pool_ro_fd[i] < 0)
			return d->pool_ro_fd[i];
		struct host_card *hc = &hp->cards[i];
		hc->hp = hp;
		hc->card = i;
		pthread_mutex_init(&hc->lock, NULL);
		pthread_cond_init(&hc->cond, NULL);
		if (pthread_create(&hc->thr, NULL, copy_thread, hc) != 0)
			return -EAGAIN;
		hc->started = 1;
	}
	fsd_log(FSD_INFO, "backend host: %u cards x %u slots x %llu bytes, bus %.1f GB/s each", d->cfg.cards,
		d->cfg.slots, (unsigned long long)d->slot_bytes, d->cfg.bus_gbps);
	return 0;
}

static void host_bind(void *ctx, const struct fse_backend_cb *cb)
{
	struct host_priv *hp = ctx;
	hp->cb = *cb;
}

static void host_submit(void *ctx, const struct fse_copy *cp)
{
	struct host_priv *hp = ctx;
	struct host_card *hc = &hp->cards[cp->card];
	fsd_stamp_submit(cp->card, cp->slot, fs_now_ns()); /* bench builds only */
	pthread_mutex_lock(&hc->lock);
	/* The core keeps at most max_inflight copies per card in flight, far
	 * below HOST_QCAP; a full queue is a bug, not a load condition. */
	if (hc->tail - hc->head >= HOST_QCAP) {
		pthread_mutex_unlock(&hc->lock);
		fsd_log(FSD_ERR, "host backend: copy queue of card %u overflowed", cp->card);
		abort();
	}
	hc->q[hc->tail % HOST_QCAP] = *cp;
	hc->tail++;
	pthread_cond_signal(&hc->cond);
	pthread_mutex_unlock(&hc->lock);
}

/* The card went down (an admin's `card` verb: the host backend has no
 * failure of its own): drop what is queued; the engine submits nothing
 * more to it.  A copy the thread is doing now finishes and reports; the
 * core ignores it (done_after_down). */
static void host_card_down(void *ctx, uint32_t card)
{
	struct host_priv *hp = ctx;
	struct host_card *hc = &hp->cards[card];
	pthread_mutex_lock(&hc->lock);
	hc->head = hc->tail;
	pthread_mutex_unlock(&hc->lock);
}

static void host_stop(struct fsd *d)
{
	struct host_priv *hp = d->backend_priv;
	if (!hp)
		return;
	for (uint32_t i = 0; i < d->cfg.cards; i++) {
		struct host_card *hc = &hp->cards[i];
		if (!hc->started)
			continue;
		pthread_mutex_lock(&hc->lock);
		hc->stop = 1;
		pthread_cond_signal(&hc->cond);
		pthread_mutex_unlock(&hc->lock);
		pthread_join(hc->thr, NULL);
		pthread_mutex_destroy(&hc->lock);
		pthread_cond_destroy(&hc->cond);
	}
	for (uint32_t i = 0; i < d->cfg.cards; i++) {
		if (d->pool_ro_fd[i] >= 0)
			close(d->pool_ro_fd[i]);
		fs_shm_close(&d->pool_shm[i]);
	}
	free(hp);
	d->backend_priv = NULL;
}

const struct fsd_backend fsd_backend_host = {
	.name = "host",
	.kind = FS_BACKEND_HOST,
	.start = host_start,
	.ops = {.bind = host_bind, .submit = host_submit, .poll = NULL, .card_down = host_card_down},
	.stop = host_stop,
	.emulated_bus = 1,
};
