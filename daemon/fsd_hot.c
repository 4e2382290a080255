/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_hot.c: the hot thread, foresightd's host of the hot engine
 * (daemon/engine/fse.h).  The engine does the pass (clients in and out,
 * every ring, completions, copies, epochs, holds, reclaim, liveness); this
 * file gives it the daemon's regions, core and backend (whose ops the
 * engine calls directly, and which calls back only what the engine binds
 * it to), runs its passes on
 * one thread with the idle policy below, and turns its notices into log
 * lines and the loop's notice hook (struct fsd's dropped_notice).  No
 * libuv, no nng here (fsd_loop.h has them).  The control loop never runs
 * any of this, and this never waits on it.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "fs_arena.h"
#include "fs_counters.h"
#include "fs_time.h"
#include "fsd.h"
#include "fsd_backend.h"
#include "fsd_hot.h"
#include "fsd_idle.h"
#include "fsd_stamps.h"
#include "fse.h"

_Static_assert(FSD_MAX_CLIENTS <= FSE_MAX_CLIENTS, "the hot engine has a row for every client");

#define HOT_CHECK_NS 10000000u /* sleep at most this long: liveness checks every 10 ms */
#define HOT_POLL_NS 20000u     /* sleep while a polled backend has copies in flight */

/* ---- the engine's notices: to the log and to the loop ------------------ */

static void on_notice(void *host, const struct fse_notice *n)
{
	struct fsd *d = host;
	switch (n->kind) {
	case FSE_NOTE_LOG:
		fsd_log(n->prio, "%s", n->text);
		break;
	case FSE_NOTE_DROPPED:
		pthread_mutex_lock(&d->drop_lock);
		d->dropped_rows[d->n_dropped] = n->row;
		d->dropped_reason[d->n_dropped] = n->reason;
		d->n_dropped++;
		pthread_mutex_unlock(&d->drop_lock);
		if (d->dropped_notice)
			d->dropped_notice(d); /* the loop reaps them (main.c: a uv_async) */
		break;
	case FSE_NOTE_CARD_DOWN:
		fsd_log(FSD_ERR,
			"card %u is down: %s; engines get none of its slots from the next epoch on, its copies "
			"are abandoned, and it stays down until foresightd restarts",
			n->card, n->text);
		break;
	case FSE_NOTE_CARD_GONE:
		fsd_log(FSD_INFO, "card %u: epoch %llu is the first without it; engines see it down", n->card,
			(unsigned long long)n->epoch);
		break;
	}
}

int fsd_hot_init(struct fsd *d)
{
	if (d->eng)
		return 0;
	const struct fs_arena_entry *idx = NULL;
	if (d->arena)
		idx = (const struct fs_arena_entry *)((const char *)d->arena + d->arena->off_index);
	struct fse_config ec = {
		.cards = d->cfg.cards,
		.layers = d->cfg.layers,
		.experts = d->cfg.experts,
		.max_clients = d->cfg.max_clients,
		.epoch_bufs = d->cfg.epoch_bufs,
		.heartbeat_ms = d->cfg.heartbeat_ms,
		.slot_bytes = d->slot_bytes,
		.dh = d->dh,
		.arena_index = idx,
		.core = d->core,
		.ctr = {d->counters_daemon, d->counters_card, d->counters_layer, d->counters_client},
		.backend = d->backend->ops, /* the backend's own interface, on its state */
		.notice = on_notice,
		.host = d,
		/* reloadable (SIGHUP stores them with relaxed stores) */
		.live = {&d->cfg.publish_us, &d->cfg.liveness_ms, &d->cfg.hold_timeout_ms,
			 &d->cfg.hold_pressure_ms, &d->cfg.dev_poll_us, &d->cfg.pin_share_pct,
			 &d->cfg.pin_grace_ms},
	};
	ec.backend.ctx = d->backend_priv;
	d->eng = fse_create(&ec); /* binds the backend to the engine's callbacks */
	return d->eng ? 0 : -errno;
}

void fsd_hot_wake(struct fsd *d)
{
	if (d->eng)
		fse_wake(d->eng);
}

int fsd_hot_add(struct fsd *d, uint32_t row)
{
	if (!d->eng)
		return -EAGAIN;
	struct fsd_client *c = &d->clients[row];
	struct fse_client_in in = {.hdr = c->region.base,
				   .ring = c->ring,
				   .dev_ring = c->dev_ring,
				   .pid = c->pid,
				   .uid = (uint32_t)c->uid};
	memcpy(in.name, c->name, sizeof(in.name) < sizeof(c->name) ? sizeof(in.name) : sizeof(c->name));
	in.name[sizeof(in.name) - 1] = 0;
	return fse_cmd_add(d->eng, row, &in);
}

int fsd_hot_drop(struct fsd *d, uint32_t row, uint32_t reason)
{
	return d->eng ? fse_cmd_drop(d->eng, row, reason) : -EAGAIN;
}

struct call_arg {
	struct fsd *d;
	int (*fn)(struct fsd *d, void *arg);
	void *arg;
};

static int call_tramp(void *p)
{
	struct call_arg *a = p;
	return a->fn(a->d, a->arg);
}

int fsd_hot_call(struct fsd *d, int (*fn)(struct fsd *d, void *arg), void *arg)
{
	if (!d->eng)
		return -EAGAIN;
	/* On the stack: a call that timed out is never run (fse_call). */
	struct call_arg a = {d, fn, arg};
	return fse_call(d->eng, call_tramp, &a, 2000);
}

void fsd_hot_first(struct fsd *d)
{
	fse_first(d->eng);
}

int fsd_hot_pass(struct fsd *d, uint64_t now)
{
	return fse_pass(d->eng, now);
}

/* ---- the thread and its idle policy ------------------------------------ */

static void *hot_main(void *arg)
{
	struct fsd *d = arg;
	struct fsd_idle idle = {0};

	/* The idle policy's planned sleeps (fsd_idle.h) end on a timer: without
	 * this the kernel may fire it up to 50 us late (the default slack). */
	(void)prctl(PR_SET_TIMERSLACK, 1000ul, 0, 0, 0);
	fse_first(d->eng);
	while (!fs_load_relaxed(&d->hot_stop)) {
		/* Read each pass: a reload (SIGHUP) may have changed them. */
		struct fsd_idle_cfg ic = {
			.spin_ns = (uint64_t)fs_load_relaxed(&d->cfg.spin_us) * 1000u,
			.adapt_ns = (uint64_t)fs_load_relaxed(&d->cfg.spin_adapt_us) * 1000u,
			.rhythm_ns = (uint64_t)fs_load_relaxed(&d->cfg.rhythm_us) * 1000u,
		};
		uint64_t now = fs_now_ns();
		fsd_stamp_pass(now); /* bench builds only (fsd_stamps.h) */
		/* The records this pass drains (this thread's own counter): the
		 * engines' rhythm is their posts, not the rest of the work. */
		uint64_t recs = fs_load_relaxed(&d->counters_daemon[FS_C_records]);
		if (fse_pass(d->eng, now)) {
			fsd_idle_work(&idle, &ic, now,
				      fs_load_relaxed(&d->counters_daemon[FS_C_records]) != recs);
			continue;
		}
		uint64_t plan;
		enum fsd_idle_act act = fsd_idle_next(&idle, &ic, now, &plan);
		if (act == FSD_IDLE_SPIN)
			continue;
		if (act == FSD_IDLE_YIELD) {
			/* spin_adapt_us: give the core to anyone who wants it (an
			 * engine on a busy machine); on an idle one it returns at once. */
			sched_yield();
			continue;
		}
		uint64_t timeout = HOT_CHECK_NS;
		if (d->backend->ops.poll && fse_inflight(d->eng))
			timeout = HOT_POLL_NS; /* completions are seen by looking */
		uint64_t left = fse_publish_in(d->eng, now);
		timeout = left < timeout ? left : timeout;
		if (plan && plan < timeout)
			timeout = plan; /* the engines' rhythm: up just before their next post */
		if (timeout > 0) {
			fsd_idle_sleep(&idle, now, timeout, plan);
			fse_sleep(d->eng, timeout, &d->hot_stop);
			uint64_t woke = fs_now_ns();
			fsd_idle_woke(&idle, woke);
			fsd_stamp_wake(woke); /* bench builds only (fsd_stamps.h) */
		}
		/* Still idle: a wake-up that finds nothing sleeps again at once
		 * (or spins through the rhythm's window) instead of spinning
		 * spin_us again. */
	}
	/* Leaving: every client learns it is on its own. */
	fse_stop_clients(d->eng, FS_DETACH_SHUTDOWN);
	if (idle.hits + idle.misses + idle.lates)
		fsd_log(FSD_INFO,
			"hot thread idle: the engines' rhythm %.1f us (deviation -%.1f/+%.1f), lead %.1f us, lag "
			"%.1f us, timer late %.1f us; posts found it awake after a planned wake %llu, asleep in "
			"one %llu, asleep after the window %llu",
			(double)idle.r_mean / 1e3, (double)idle.r_lo / 1e3, (double)idle.r_hi / 1e3,
			(double)idle.lead / 1e3, (double)idle.lag / 1e3, (double)idle.late / 1e3,
			(unsigned long long)idle.hits, (unsigned long long)idle.misses,
			(unsigned long long)idle.lates);
	return NULL;
}

int fsd_hot_start(struct fsd *d)
{
	int r = fsd_hot_init(d);
	if (r < 0)
		return r;
	if (pthread_create(&d->hot, NULL, hot_main, d) != 0)
		return -EAGAIN;
	d->hot_running = 1;
	return 0;
}

void fsd_hot_stop(struct fsd *d)
{
	if (!d->hot_running)
		return;
	fs_store_relaxed(&d->hot_stop, 1);
	fse_wake(d->eng);
	pthread_join(d->hot, NULL);
	d->hot_running = 0;
}
