/* SPDX-License-Identifier: Apache-2.0 */
/*
 * foresightd: owns the expert arena, every card's slot pool and copy path,
 * and the residency core; serves engines over the control socket.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "fs_arena.h"
#include "fs_counters.h"
#include "fs_time.h"
#include "fsd_backend.h"
#include "fsd_hot.h"
#include "fsd_loop.h"
#include "fsd_preflight.h"
#include "fsd_sockpath.h"
#include "fse.h"
#include "fsr.h"

static void on_signal(uv_signal_t *h, int sig)
{
	struct fsd *d = h->loop->data;
	if (sig == SIGHUP) {
		fsd_config_reload(d); /* logs what changed and what needs a restart */
		return;
	}
	fsd_request_stop(d, sig == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* systemd's watchdog: WATCHDOG=1 from the loop at half of $WATCHDOG_USEC. */
static uint64_t watchdog_ns, watchdog_sent_ns;

static void on_timer(uv_timer_t *h)
{
	struct fsd *d = h->loop->data;
	uint64_t now = fs_now_ns();
	fsd_clients_expire_pending(d, now);
	if (watchdog_ns && now - watchdog_sent_ns >= watchdog_ns) {
		fsd_notify("WATCHDOG=1");
		watchdog_sent_ns = now;
	}
}

static void on_dropped(uv_async_t *h)
{
	fsd_clients_reap(h->loop->data);
}

/* The hot thread's notice (any thread but the loop's): rows to reap. */
static void dropped_notice(struct fsd *d)
{
	uv_async_send(&d->lp->dropped_async);
}

void fsd_request_stop(struct fsd *d, const char *why)
{
	if (d->stopping)
		return;
	d->stopping = 1;
	fsd_log(FSD_INFO, "stopping: %s", why);
	fsd_notify("STOPPING=1\nSTATUS=stopping");
	fs_store_release(&d->dh->state, (uint32_t)FS_DAEMON_STOPPING);
	uv_stop(d->lp->loop);
}

static void close_walk(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

/* The second half of the start: the residency core (fed the layers'
 * ready words: it acts on a layer only once the layer is in), the backend
 * (the CUDA backend pins the arena once it is whole), the hot thread.  It
 * runs as soon as the arena memfd exists, while a GGUF arena still loads:
 * engines that say they read the layer ready words attach and are served
 * layer by layer (fs_arena_expert answers -EAGAIN for the layers not in). */
static uint64_t watchdog_usec;
static int serve(struct fsd *d)
{
	int r;
	struct fsr_config rc;
	fsd_config_residency(&d->cfg, &rc);
	rc.expert_bytes = d->expert_bytes; /* GGUF: per-layer blob sizes; synthetic: NULL */
	rc.counters = (struct fsr_counters){d->counters_daemon, d->counters_card, d->counters_layer,
					    d->counters_client};
	rc.layer_ready = d->layer_ready;
	d->core = fsr_create(&rc);
	if (!d->core) {
		fsd_log(FSD_ERR, "residency core: %s", strerror(errno));
		return -errno;
	}
	if ((r = d->backend->start(d)) < 0) {
		fsd_log(FSD_ERR, "backend %s: %s", d->backend->name, strerror(-r));
		return r;
	}
	/* One tier across the cards that read each other (fsd_region.c). */
	if ((r = fsr_set_reach(d->core, d->dh->peer_reach)) < 0)
		return r;
	if ((r = fsd_hot_start(d)) < 0)
		return r;
	fs_store_release(&d->dh->heartbeat_ns, fs_now_ns());
	fs_store_release(&d->dh->state, (uint32_t)FS_DAEMON_RUNNING);
	return 0;
}

static int fill_on_hot(struct fsd *d, void *arg)
{
	(void)arg;
	return fsr_fill_all(d->core);
}

/* `fill`: a pool with a slot for every expert need not wait for each
 * one's first use (a fresh daemon's engines would read every expert over
 * the bus once).  Nothing is evicted for it; engines that attach meanwhile
 * are served first (the fill is the scheduler's background work). */
static void fill_pool(struct fsd *d)
{
	if (!d->cfg.fill || !d->core)
		return;
	int q = fsd_hot_call(d, fill_on_hot, NULL);
	if (q > 0)
		fsd_log(FSD_INFO,
			"fill: copying in all %d experts not resident: the pool has a slot for each", q);
	else if (q < 0 && q != -EINVAL) /* -EINVAL: no tiers, nothing to fill */
		fsd_log(FSD_WARN, "fill: not started: %s", strerror(-q));
}

/* The arena is whole (loaded, kept or synthetic): the fd store gets it,
 * ping answers, every attach is open and systemd hears READY=1. */
static void whole(struct fsd *d)
{
	if (d->backend->arena_whole)
		d->backend->arena_whole(d); /* before `loading` clears: see fsd_backend.h */
	fsd_arena_keep_store(d);            /* systemd's fd store keeps it across a restart */
	for (uint32_t l = 0; l < d->cfg.layers; l++)
		fs_store_release(&d->layer_ready[l], FS_LAYER_READY);
	fs_store_relaxed(&d->counters_daemon[FS_C_arena_layers_loaded], (uint64_t)d->cfg.layers);
	__atomic_store_n(&d->loading, 0, __ATOMIC_RELEASE);
	fill_pool(d);
	fsd_log(FSD_INFO, "ready: pid %d, backend %s, model %s (%u layers x %u experts), %u cards x %u slots",
		(int)getpid(), d->backend->name, d->cfg.model, d->cfg.layers, d->cfg.experts, d->cfg.cards,
		d->cfg.slots);
	char status[512];
	int n = snprintf(status, sizeof(status), "READY=1\nSTATUS=serving %s on %s (backend %s, %u cards)",
			 d->cfg.model, d->cfg.socket_path, d->backend->name, d->cfg.cards);
	if (watchdog_usec && n > 0 && (size_t)n < sizeof(status))
		snprintf(status + n, sizeof(status) - (size_t)n, "\nWATCHDOG_USEC=%llu\nWATCHDOG=1",
			 (unsigned long long)watchdog_usec);
	fsd_notify(status);
	watchdog_ns = watchdog_usec * 1000 / 2;
	watchdog_sent_ns = fs_now_ns();
}

static int start_rc;

static void on_loaded(struct fsd *d, int r)
{
	if (r == 0 && !d->stopping) {
		whole(d);
		return;
	}
	if (r != -ECANCELED) {
		start_rc = 1;
		fsd_notify("STATUS=failed to start (see the log)");
	}
	fsd_request_stop(d, "the start failed");
}

/* The first half: the model's plan, the daemon region, the arena memfd,
 * then the sockets, so that `fsctl stats` and /metrics show the load's
 * progress while a GGUF arena fills on its own thread. */
static int start(struct fsd *d)
{
	int r, loaded = 1;
	if (d->cfg.model_path[0]) {
		/* The model's dimensions first; its bytes once the daemon region
		 * (and with it the arena_load_* counters) exists. */
		if ((r = fsd_arena_gguf_open(d)) < 0)
			return r;
	} else if ((r = fsd_arena_synth_create(d)) < 0) {
		fsd_log(FSD_ERR, "arena: %s", strerror(-r));
		return r;
	}
	d->backend = fsd_backend_find(d->cfg.backend, NULL); /* the settings named a built one */
	if (!d->backend)
		return -EINVAL;
	if (d->backend->probe && (r = d->backend->probe(d)) < 0)
		return r;
	if ((r = fsd_regions_create(d)) < 0) {
		fsd_log(FSD_ERR, "daemon region: %s", strerror(-r));
		return r;
	}
	if (d->gguf) {
		if ((r = fsd_arena_gguf_begin(d)) < 0)
			return r;
		loaded = r == 1; /* taken over from the fd store */
	}
	d->loading = !loaded; /* the layers' words say which are in (serve) */
	if ((r = fsd_fdsock_start(d)) < 0) {
		fsd_log(FSD_ERR, "fd socket %s: %s", d->cfg.fd_socket_path, strerror(-r));
		return r;
	}
	if ((r = fsd_control_start(d)) < 0)
		return r;
	if ((r = fsd_metrics_start(d, d->cfg.metrics_listen, (int)d->cfg.metrics_allow_remote)) < 0)
		return r;
	if ((r = serve(d)) < 0)
		return r;
	if (loaded) {
		whole(d);
		return 0;
	}
	/* Layers are served as they land (the loader takes them in file
	 * order, layer 0 first); the rest of the start is whole(). */
	if ((r = fsd_arena_gguf_fill_start(d, on_loaded)) < 0)
		fsd_log(FSD_ERR, "arena: the loader thread: %s", strerror(-r));
	return r;
}

int main(int argc, char **argv)
{
	static struct fsd d;
	fsd_config_defaults(&d.cfg);
	if (fsd_config_parse(&d.settings, &d.cfg, argc, argv) < 0)
		return 2;
	fsd_log_level_at(&d.cfg.log_level);
	if (d.cfg.describe)
		return fsd_arena_gguf_describe(d.cfg.model_path);
	if (d.cfg.check_config) {
		printf("foresightd: settings OK; start-up checks:\n");
		if (fsd_preflight(&d.cfg, 1) < 0) {
			printf("foresightd: a start with these settings would fail (FAIL above)\n");
			return 2;
		}
		printf("foresightd: configuration OK\n");
		return 0;
	}
	/* Before anything is allocated: what stops the start stops it now.
	 * Then the socket paths' lock, held for life (fsd_sockpath.c). */
	if (fsd_preflight(&d.cfg, 0) < 0 || fsd_sock_claim(&d.cfg) < 0)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	d.start_ns = fs_now_ns();
	if (getrandom(&d.instance, sizeof(d.instance), 0) != (ssize_t)sizeof(d.instance))
		d.instance = d.start_ns ^ (uint64_t)getpid();
	d.daemon_ro_fd = d.arena_ro_fd = d.fdsock = -1;
	for (uint32_t i = 0; i < FS_MAX_CARDS; i++) {
		d.pool_ro_fd[i] = -1;
		d.pool_shm[i].fd = -1;
	}
	for (uint32_t row = 0; row < FSD_MAX_CLIENTS; row++) {
		d.clients[row].region.fd = -1;
	}
	d.arena_shm.fd = d.daemon_shm.fd = -1;
	pthread_mutex_init(&d.drop_lock, NULL);
	struct fsd_loop lp = {.loop = uv_default_loop()};
	d.lp = &lp;
	lp.loop->data = &d;
	uv_async_init(lp.loop, &lp.dropped_async, on_dropped);
	d.dropped_notice = dropped_notice;

	int rc = 0;
	/* Loading a large arena may outlast WatchdogSec: the unit's watchdog is
	 * stretched to its TimeoutStartSec (15 min) until READY; the start
	 * timeout itself is extended with each load status. */
	watchdog_usec = fsd_notify_watchdog_usec();
	fsd_notify(watchdog_usec ? "STATUS=starting: loading the arena\nWATCHDOG=1\nWATCHDOG_USEC=900000000" :
				   "STATUS=starting: loading the arena");
	uv_signal_init(lp.loop, &lp.sig_term);
	uv_signal_start(&lp.sig_term, on_signal, SIGTERM);
	uv_signal_init(lp.loop, &lp.sig_int);
	uv_signal_start(&lp.sig_int, on_signal, SIGINT);
	uv_signal_init(lp.loop, &lp.sig_hup);
	uv_signal_start(&lp.sig_hup, on_signal, SIGHUP);
	uv_timer_init(lp.loop, &lp.timer);
	uv_timer_start(&lp.timer, on_timer, 100, 100);
	if (start(&d) < 0) {
		fsd_notify("STATUS=failed to start (see the log)");
		rc = 1;
		goto out;
	}
	uv_run(lp.loop, UV_RUN_DEFAULT);
	if (start_rc)
		rc = start_rc;

out:
	fsd_metrics_stop(&d);      /* before anything a scrape reads goes away */
	fsd_arena_gguf_cancel(&d); /* a load in progress stops; its thread is joined */
	if (d.dh)
		fs_store_release(&d.dh->state, (uint32_t)FS_DAEMON_STOPPING);
	fsd_control_stop(&d);
	fsd_hot_stop(&d); /* marks every client detached (reason: shutdown) */
	fsd_clients_reap(&d);
	if (d.backend && d.backend_priv)
		d.backend->stop(&d);
	fse_destroy(d.eng); /* after the backend: its copy threads report to it */
	fsd_fdsock_stop(&d);
	uv_walk(lp.loop, close_walk, NULL);
	uv_run(lp.loop, UV_RUN_DEFAULT);
	uv_loop_close(lp.loop);
	for (uint32_t row = 0; row < FSD_MAX_CLIENTS; row++)
		fs_shm_close(&d.clients[row].region);
	if (d.core)
		fsr_destroy(d.core);
	fsd_regions_destroy(&d);
	if (d.arena_ro_fd >= 0)
		close(d.arena_ro_fd);
	fs_shm_close(&d.arena_shm);
	fsd_arena_gguf_close(&d);
	fsd_sock_release(&d.cfg);
	fsd_log(FSD_INFO, "stopped");
	return rc;
}
