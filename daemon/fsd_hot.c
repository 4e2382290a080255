/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_hot.c: the hot thread.  One loop that
 *   1. takes clients in and out (commands from the loop thread),
 *   2. drains every client ring (host and device), checking each record
 *      against the model,
 *   3. feeds copy completions to the residency core,
 *   4. hands new copies to the backend,
 *   5. publishes an epoch when the table changed (a card that went down
 *      changes it: fsd_cards.c),
 *   6. then (after a full fence) reads every hold and reclaims slots,
 *   7. checks liveness, and sleeps on all rings at once when idle.
 * The control loop never runs any of this, and this never waits on it.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs_futex.h"
#include "fsd_stamps.h"
#include "fs_rec.h"
#include "fs_time.h"
#include "fsd.h"

#define HOT_BATCH 256u
#define HOT_CHECK_NS 10000000u /* liveness checks every 10 ms */
#define HOT_POLL_NS 20000u     /* sleep while a polled backend has copies in flight */

void fsd_hot_wake(struct fsd *d)
{
	__atomic_fetch_add(&d->hot_wake, 1u, __ATOMIC_SEQ_CST);
	fs_futex_wake(&d->hot_wake, 1);
}

int fsd_hot_cmd(struct fsd *d, enum fsd_cmd_type type, uint32_t row, uint32_t reason)
{
	pthread_mutex_lock(&d->cmd_lock);
	if (d->cmd_tail - d->cmd_head >= FSD_CMDQ) {
		pthread_mutex_unlock(&d->cmd_lock);
		return -EAGAIN;
	}
	d->cmdq[d->cmd_tail % FSD_CMDQ] = (struct fsd_cmd){.type = type, .row = row, .reason = reason};
	d->cmd_tail++;
	pthread_mutex_unlock(&d->cmd_lock);
	fsd_hot_wake(d);
	return 0;
}

void fsd_copy_landed(struct fsd *d, const struct fsd_done *done)
{
	pthread_mutex_lock(&d->done_lock);
	if (d->done_n == d->done_cap) {
		uint32_t cap = d->done_cap ? d->done_cap * 2 : 256;
		struct fsd_done *q = realloc(d->doneq, cap * sizeof(*q));
		if (!q) {
			pthread_mutex_unlock(&d->done_lock);
			fsd_log(FSD_ERR, "out of memory queueing a copy completion");
			abort();
		}
		d->doneq = q;
		d->done_cap = cap;
	}
	d->doneq[d->done_n++] = *done;
	pthread_mutex_unlock(&d->done_lock);
	fsd_hot_wake(d);
}

struct fsd_call {
	int (*fn)(struct fsd *d, void *arg);
	void *arg;
	int rc;
	int done;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

int fsd_hot_call(struct fsd *d, int (*fn)(struct fsd *d, void *arg), void *arg)
{
	struct fsd_call *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->fn = fn;
	k->arg = arg;
	pthread_mutex_init(&k->lock, NULL);
	pthread_cond_init(&k->cond, NULL);
	pthread_mutex_lock(&d->cmd_lock);
	if (d->cmd_tail - d->cmd_head >= FSD_CMDQ) {
		pthread_mutex_unlock(&d->cmd_lock);
		free(k);
		return -EAGAIN;
	}
	d->cmdq[d->cmd_tail % FSD_CMDQ] = (struct fsd_cmd){.type = FSD_CMD_CALL, .call = k};
	d->cmd_tail++;
	pthread_mutex_unlock(&d->cmd_lock);
	fsd_hot_wake(d);
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 2;
	pthread_mutex_lock(&k->lock);
	while (!k->done)
		if (pthread_cond_timedwait(&k->cond, &k->lock, &dl) != 0)
			break;
	int done = k->done, rc = k->rc;
	/* Timed out: the hot thread frees it when it gets there. */
	k->done = done ? 1 : -1;
	pthread_mutex_unlock(&k->lock);
	if (!done)
		return -ETIMEDOUT;
	free(k);
	return rc;
}

static void hot_run_call(struct fsd *d, struct fsd_call *k)
{
	pthread_mutex_lock(&k->lock);
	if (k->done == -1) { /* the caller gave up */
		pthread_mutex_unlock(&k->lock);
		free(k);
		return;
	}
	k->rc = k->fn(d, k->arg);
	k->done = 1;
	pthread_cond_signal(&k->cond);
	pthread_mutex_unlock(&k->lock);
}

static uint64_t *client_ctr(struct fsd *d, uint32_t row)
{
	return d->counters_client + (uint64_t)row * FS_N_CLIENT;
}

/* Drop a client: its holds no longer count, its region says why. */
static uint32_t hot_drain_ring(struct fsd *d, uint32_t row, struct fs_ring_cons *ring, uint64_t now);

static void hot_finish(struct fsd *d, struct fsd_client *c, uint32_t reason)
{
	if (!c->hot_active)
		return;
	/* What it posted before it detached or died is still its data: take
	 * it in (one bounded drain per ring) before the row goes, so no record
	 * is lost but the ones a full ring refused (counted by the client). */
	uint64_t now = fs_now_ns();
	hot_drain_ring(d, c->row, &c->ring, now);
	hot_drain_ring(d, c->row, &c->dev_ring, now);
	fsr_client_remove(d->core, c->row);
	fs_store_relaxed(&c->hdr->reason, reason);
	fs_store_release(&c->hdr->state, (uint32_t)FS_CLIENT_DETACHED);
	c->hot_active = 0;
	fs_store_relaxed(&client_ctr(d, c->row)[FS_CCL_holds], 0);
	pthread_mutex_lock(&d->cmd_lock);
	d->dropped_rows[d->n_dropped] = c->row;
	d->dropped_reason[d->n_dropped] = reason;
	d->n_dropped++;
	pthread_mutex_unlock(&d->cmd_lock);
	uv_async_send(&d->dropped_async);
}

static void hot_apply_cmds(struct fsd *d)
{
	struct fsd_cmd cmds[FSD_CMDQ];
	uint32_t n = 0;
	pthread_mutex_lock(&d->cmd_lock);
	while (d->cmd_head != d->cmd_tail)
		cmds[n++] = d->cmdq[d->cmd_head++ % FSD_CMDQ];
	pthread_mutex_unlock(&d->cmd_lock);
	for (uint32_t i = 0; i < n; i++) {
		struct fsd_client *c = &d->clients[cmds[i].row];
		if (cmds[i].type == FSD_CMD_ADD) {
			c->hdr = c->region.base;
			memset(c->hold_seen, 0, sizeof(c->hold_seen));
			memset(c->hold_bad, 0, sizeof(c->hold_bad));
			/* Its engine acquires only once ATTACHED is set below, so
			 * no epoch older than the current one is ever its own. */
			c->first_epoch = d->buf_epoch[d->cur_buf];
			c->newest_window = 0;
			if (fsr_client_add(d->core, c->row) == 0) {
				c->hot_active = 1;
				fs_store_release(&c->hdr->state, (uint32_t)FS_CLIENT_ATTACHED);
			}
		} else if (cmds[i].type == FSD_CMD_DROP) {
			hot_finish(d, c, cmds[i].reason);
		} else if (cmds[i].type == FSD_CMD_CALL) {
			hot_run_call(d, cmds[i].call);
		}
	}
}

/* The checks the ring cannot make: the record's fields against the model
 * (proto/fs_rec.h, the client library's check too). */
static int rec_in_bounds(const struct fsd *d, const struct fs_rec *r)
{
	struct fs_rec_model m = {d->cfg.layers, d->cfg.experts, d->cfg.cards};
	return fs_rec_fits(r, &m);
}

/* Drain one ring of client `row` (at most 64 batches: let the other
 * clients and the copies in).  Returns the records consumed. */
static uint32_t hot_drain_ring(struct fsd *d, uint32_t row, struct fs_ring_cons *ring, uint64_t now)
{
	struct fs_rec buf[HOT_BATCH];
	uint64_t *cc = client_ctr(d, row);
	uint64_t bad_before = ring->bad_record, idx_before = ring->bad_index;
	uint32_t n, total = 0;
	while ((n = fs_ring_consume(ring, buf, HOT_BATCH)) > 0) {
		uint32_t bad = 0;
		for (uint32_t i = 0; i < n; i++) {
			if (!rec_in_bounds(d, &buf[i])) {
				bad++;
				continue;
			}
			if (buf[i].type == FS_REC_WIN_END)
				fsd_count(&d->counters_daemon[FS_C_windows], 1);
			fsr_record(d->core, row, &buf[i], now);
		}
		fsd_count(&cc[FS_CCL_records], n);
		fsd_count(&d->counters_daemon[FS_C_records], n);
		if (bad) {
			fsd_count(&cc[FS_CCL_bad_records], bad);
			fsd_count(&d->counters_daemon[FS_C_bad_records], bad);
		}
		total += n;
		if (total > 64u * HOT_BATCH)
			break;
	}
	/* Structurally bad records and impossible indices the ring counted. */
	uint64_t br = ring->bad_record - bad_before, bi = ring->bad_index - idx_before;
	if (br) {
		fsd_count(&cc[FS_CCL_bad_records], br);
		fsd_count(&d->counters_daemon[FS_C_bad_records], br);
	}
	if (bi)
		fsd_count(&d->counters_daemon[FS_C_bad_index], bi);
	return total;
}

static uint32_t hot_drain_rings(struct fsd *d, uint64_t now)
{
	uint32_t total = 0;
	for (uint32_t row = 0; row < d->cfg.max_clients; row++) {
		struct fsd_client *c = &d->clients[row];
		if (!c->hot_active)
			continue;
		uint64_t *cc = client_ctr(d, row);
		total += hot_drain_ring(d, row, &c->ring, now);
		uint32_t dev = hot_drain_ring(d, row, &c->dev_ring, now);
		if (dev) {
			fsd_count(&cc[FS_CCL_dev_records], dev);
			fs_store_relaxed(&cc[FS_CCL_dev_seen_ns], fs_now_ns());
			total += dev;
		}
		/* The producers' own counts (client memory: shown, not trusted). */
		fs_store_relaxed(&cc[FS_CCL_ring_full], fs_load_relaxed(&c->hdr->ring_full));
		fs_store_relaxed(&cc[FS_CCL_dev_full], (uint64_t)fs_load_relaxed(&c->dev_ring.hdr->full));
	}
	return total;
}

static uint32_t hot_completions(struct fsd *d, uint64_t now)
{
	struct fsd_done local[256];
	uint32_t n = 0;
	if (d->backend->poll)
		n = d->backend->poll(d, local, 256);
	pthread_mutex_lock(&d->done_lock);
	while (d->done_n > 0 && n < 256)
		local[n++] = d->doneq[--d->done_n];
	pthread_mutex_unlock(&d->done_lock);
	for (uint32_t i = 0; i < n; i++) {
		fsr_copy_done(d->core, local[i].card, local[i].slot, local[i].gen, now);
		fsd_count(&d->counters_card[(uint64_t)local[i].card * FS_N_CARD + FS_CC_bus_busy_ns],
			  local[i].busy_ns);
	}
	return n;
}

static uint32_t hot_issue(struct fsd *d, uint64_t now)
{
	struct fsr_copy cps[64];
	uint32_t total = 0;
	uint32_t down = fs_load_relaxed(&d->cards_down); /* reported down, maybe not applied yet */
	for (uint32_t card = 0; card < d->cfg.cards; card++) {
		if (down >> card & 1u)
			continue;
		unsigned n = fsr_take_copies(d->core, card, cps, 64, now);
		for (unsigned i = 0; i < n; i++) {
			fsd_stamp_submit(card, cps[i].slot, now, fs_now_ns()); /* bench builds only */
			d->backend->submit(d, &cps[i]);
		}
		total += n;
	}
	return total;
}

/* Publish the working table into a buffer no live client holds. */
static int hot_publish(struct fsd *d, int *deferred)
{
	uint32_t b, nb = d->cfg.epoch_bufs;
	for (b = 0; b < nb; b++) {
		if (b == d->cur_buf && d->buf_epoch[b] != 0)
			continue;
		if (d->buf_epoch[b] == 0 || !fsr_epoch_held(d->core, d->buf_epoch[b]))
			break;
	}
	if (b == nb) {
		if (!*deferred)
			fsd_count(&d->counters_daemon[FS_C_publish_deferred], 1);
		*deferred = 1;
		return 0;
	}
	*deferred = 0;
	struct fs_epoch_buf_hdr *bh = fsd_epoch_buf(d, b);
	fs_store_release(&bh->epoch, 0ull); /* seqlock: being rewritten */
	fsr_fill(d->core, fsd_epoch_entries(d, b));
	uint64_t e = fsr_publish(d->core);
	fs_store_release(&bh->epoch, e);
	d->buf_epoch[b] = e;
	d->buf_superseded_ns[d->cur_buf] = fs_now_ns();
	d->buf_superseded_ns[b] = 0;
	d->cur_buf = b;
	fs_store_release(&d->dh->current, FS_CUR(e, b));
	fsd_count(&d->counters_daemon[FS_C_epochs], 1);
	fsd_cards_published(d, e); /* a card that went down: engines learn it now */
	return 1;
}

/* The buffer that holds epoch e now, or -1. */
static int epoch_buf_of(const struct fsd *d, uint64_t e)
{
	for (uint32_t b = 0; b < d->cfg.epoch_bufs; b++)
		if (d->buf_epoch[b] == e)
			return (int)b;
	return -1;
}

/*
 * A hold is what an engine can have acquired: an epoch published since it
 * was added (first_epoch) and still in a buffer.  Anything else (the
 * future, an epoch from before it attached, one whose buffer was rewritten
 * long ago) maps nothing the engine may read, so it protects nothing: it is
 * taken as a release, and counted once per value a word takes, not once
 * per pass.  Only a held epoch's buffer is never rewritten, so an honest
 * engine's hold always names a buffer's epoch; the one exception is an
 * acquire preempted between its load of `current` and its hold store for
 * two publishes, which its re-check of `current` then retries (counted once,
 * harmless).  Without this, a word naming epoch 2 pinned reclaim forever
 * (fsr_min_hold) and no hold timeout fired (the epoch was in no buffer).
 */
static uint64_t hold_check(struct fsd *d, struct fsd_client *c, unsigned k, uint64_t h)
{
	if (h == 0 || (h >= c->first_epoch && epoch_buf_of(d, h) >= 0)) {
		c->hold_bad[k] = 0;
		return h;
	}
	if (c->hold_bad[k] != h) {
		c->hold_bad[k] = h;
		fsd_count(&d->counters_daemon[FS_C_bad_holds], 1);
	}
	return 0;
}

/* After a publish (and a full fence): read every hold, free what no one holds. */
static uint32_t hot_holds(struct fsd *d)
{
	fs_smp_mb(); /* the current store above, before these hold loads */
	for (uint32_t row = 0; row < d->cfg.max_clients; row++) {
		struct fsd_client *c = &d->clients[row];
		if (!c->hot_active)
			continue;
		uint64_t holds[FS_MAX_HOLDS];
		for (unsigned k = 0; k < FS_MAX_HOLDS; k++) {
			holds[k] = hold_check(d, c, k, fs_load_acquire(&c->hdr->holds[k]));
			c->hold_seen[k] = holds[k];
		}
		/* Only valid holds reach the core (it keeps the holds gauge). */
		fsr_client_holds(d->core, row, holds);
	}
	return fsr_reclaim(d->core);
}

/*
 * Publication must go on whatever the engines hold.  Each client may pin
 * its share of the buffers that are not current (the reserve is the rest):
 * max(2, (epoch_bufs - 1) / live clients).  When every buffer has been held
 * for longer than an honest window takes (PUBLISH_BLOCKED_NS), the client
 * holding the most buffers beyond its share is revoked as for an overlong
 * hold (and backs off before it may attach again).  Two engines holding 8
 * epochs each stopped publication before.
 */
#define PUBLISH_BLOCKED_NS 100000000ull

static void hot_reserve(struct fsd *d, struct fsd_hot_state *s, uint64_t now)
{
	if (!s->deferred) {
		s->deferred_since = 0;
		return;
	}
	if (s->deferred_since == 0)
		s->deferred_since = now;
	if (now - s->deferred_since < PUBLISH_BLOCKED_NS)
		return;
	uint32_t live = 0, worst_n = 0;
	struct fsd_client *worst = NULL;
	for (uint32_t row = 0; row < d->cfg.max_clients; row++) {
		struct fsd_client *c = &d->clients[row];
		if (!c->hot_active)
			continue;
		live++;
		uint64_t bufs = 0; /* distinct buffers, not current */
		for (unsigned k = 0; k < FS_MAX_HOLDS; k++) {
			int b = c->hold_seen[k] ? epoch_buf_of(d, c->hold_seen[k]) : -1;
			if (b >= 0 && (uint32_t)b != d->cur_buf)
				bufs |= 1ull << b;
		}
		uint32_t n = (uint32_t)__builtin_popcountll(bufs);
		if (n > worst_n) {
			worst_n = n;
			worst = c;
		}
	}
	uint32_t share = live ? (d->cfg.epoch_bufs - 1) / live : 0;
	if (share < 2)
		share = 2;
	if (!worst || worst_n <= share)
		return;
	fsd_log(FSD_WARN,
		"client %u (%s, pid %d): holds %u of %u epoch buffers (its share: %u) and publication is "
		"blocked, revoking",
		worst->row, worst->name, (int)worst->pid, worst_n, d->cfg.epoch_bufs, share);
	fsd_count(&d->counters_daemon[FS_C_stale], 1);
	hot_finish(d, worst, FS_DETACH_HOLD_TIMEOUT);
	s->deferred_since = now; /* the next one, if any, after another period */
}

/* When the epoch `e` stopped being current, or 0 (current, or unknown). */
static uint64_t hold_superseded(const struct fsd *d, uint64_t e)
{
	int b = e ? epoch_buf_of(d, e) : -1;
	return b < 0 || (uint32_t)b == d->cur_buf ? 0 : d->buf_superseded_ns[b];
}

/*
 * A valid hold still pins every slot retired after its epoch (fsr_reclaim
 * frees nothing newer than the oldest hold), so one engine holding an old
 * epoch takes the tier from the others until hold_timeout_ms.  Under slot
 * pressure the wait is shorter: when the oldest hold was superseded more
 * than hold_pressure_ms ago and the slots it keeps retired are at least an
 * eighth of a card's pool, its holder is revoked as for an overlong hold
 * (and backs off before it may attach again).  An honest decode window
 * holds an epoch for milliseconds; a window longer than this that pins the
 * pool costs the others as much whether it is honest or not.  Off by
 * default (0): on a host loaded far past its cores an honest engine was
 * seen stalled 1 s mid-window, revoked, and then read one slot rewritten
 * under it (a revoked engine's lookups race the reuse: fs_slot_ready after
 * the read is how an engine notices).  The back-off alone bounds a
 * repeated long hold over time; this is for a host that wants it sooner.
 */

static void hot_pressure(struct fsd *d, uint64_t now)
{
	uint64_t minh = fsr_min_hold(d->core);
	if (minh == UINT64_MAX)
		return;
	uint64_t since = hold_superseded(d, minh);
	uint64_t pressure_ns = (uint64_t)fs_load_relaxed(&d->cfg.hold_pressure_ms) * 1000000u;
	if (!pressure_ns || !since || now <= since || now - since < pressure_ns)
		return;
	uint32_t worst = 0, worst_card = 0, pool = 0;
	for (uint32_t card = 0; card < d->cfg.cards; card++) {
		uint32_t pinned = 0, slot = 0;
		struct fsr_slot_info si;
		for (; fsr_slot_info(d->core, card, slot, &si) == 0; slot++)
			pinned += si.state == FSR_RETIRING && si.retire > minh;
		if (pinned * 8u >= slot && pinned > worst) {
			worst = pinned;
			worst_card = card;
			pool = slot;
		}
	}
	if (!worst)
		return;
	for (uint32_t row = 0; row < d->cfg.max_clients; row++) {
		struct fsd_client *c = &d->clients[row];
		if (!c->hot_active)
			continue;
		for (unsigned k = 0; k < FS_MAX_HOLDS; k++) {
			if (c->hold_seen[k] != minh)
				continue;
			fsd_log(FSD_WARN,
				"client %u (%s, pid %d): epoch %llu held %llu ms after it was superseded keeps %u "
				"of card %u's %u slots retired, revoking",
				row, c->name, (int)c->pid, (unsigned long long)minh,
				(unsigned long long)((now - since) / 1000000u), worst, worst_card, pool);
			fsd_count(&d->counters_daemon[FS_C_stale], 1);
			hot_finish(d, c, FS_DETACH_HOLD_TIMEOUT);
			return;
		}
	}
}

static void hot_liveness(struct fsd *d, uint64_t now)
{
	/* Relaxed loads: a reload (SIGHUP) stores new values from the loop. */
	uint64_t live_ns = (uint64_t)fs_load_relaxed(&d->cfg.liveness_ms) * 1000000u;
	uint64_t hold_ns = (uint64_t)fs_load_relaxed(&d->cfg.hold_timeout_ms) * 1000000u;
	for (uint32_t row = 0; row < d->cfg.max_clients; row++) {
		struct fsd_client *c = &d->clients[row];
		if (!c->hot_active)
			continue;
		/* `now` is this pass's start: a heartbeat written since is newer
		 * than it, and fresh.  (A client could write any value here; all
		 * it can do is keep itself attached, which its pidfd undoes when
		 * it dies.) */
		uint64_t hb = fs_load_relaxed(&c->hdr->heartbeat_ns);
		if (hb > now && hb - now > live_ns) {
			/* CLOCK_MONOTONIC is one clock for every process: no honest
			 * client is a liveness period ahead of it.  A client that
			 * writes the far future to stay attached forever is dropped. */
			fsd_log(FSD_WARN, "client %u (%s, pid %d): heartbeat from the future, dropping it",
				row, c->name, (int)c->pid);
			fsd_count(&d->counters_daemon[FS_C_bad_heartbeats], 1);
			fsd_count(&d->counters_daemon[FS_C_stale], 1);
			hot_finish(d, c, FS_DETACH_STALE);
			continue;
		}
		if (hb < now && now - hb > live_ns) {
			fsd_log(FSD_WARN, "client %u (%s, pid %d): heartbeat stale, dropping its holds", row,
				c->name, (int)c->pid);
			fsd_count(&d->counters_daemon[FS_C_stale], 1);
			hot_finish(d, c, FS_DETACH_STALE);
			continue;
		}
		/* A hold is too old when the epoch it names was superseded more
		 * than hold_timeout ago: a window that long is a hung or hostile
		 * engine.  (Re-acquiring an epoch that is still current, window
		 * after window, is normal and never times out.) */
		for (unsigned k = 0; k < FS_MAX_HOLDS; k++) {
			uint64_t since = hold_superseded(d, c->hold_seen[k]);
			if (since && now > since && now - since > hold_ns) { /* since may be after `now` */
				fsd_log(FSD_WARN,
					"client %u (%s, pid %d): epoch %llu held over %u ms, revoking", row,
					c->name, (int)c->pid, (unsigned long long)c->hold_seen[k],
					(unsigned)(hold_ns / 1000000u));
				fsd_count(&d->counters_daemon[FS_C_stale], 1);
				hot_finish(d, c, FS_DETACH_HOLD_TIMEOUT);
				break;
			}
		}
	}
}

static void hot_sleep(struct fsd *d, uint64_t timeout_ns)
{
	uint32_t *words[FS_FUTEX_WAITV_MAX];
	uint32_t expect[FS_FUTEX_WAITV_MAX];
	unsigned n = 0;
	uint64_t dev_poll_ns = (uint64_t)d->cfg.dev_poll_us * 1000u;
	words[n] = &d->hot_wake;
	expect[n++] = fs_load_acquire(&d->hot_wake);
	int pending = 0;
	pthread_mutex_lock(&d->done_lock);
	pending |= d->done_n > 0;
	pthread_mutex_unlock(&d->done_lock);
	pthread_mutex_lock(&d->cmd_lock);
	pending |= d->cmd_head != d->cmd_tail;
	pthread_mutex_unlock(&d->cmd_lock);
	/* Set every ring's NEED_WAKEUP, one barrier for all of them (a
	 * membarrier where the rings are asymmetric: fs_ring.h), then look. */
	int asym = 0;
	for (uint32_t row = 0; row < d->cfg.max_clients && !pending; row++) {
		struct fsd_client *c = &d->clients[row];
		if (!c->hot_active)
			continue;
		uint32_t seq;
		fs_ring_sleep_arm(&c->ring, &seq);
		asym |= (int)c->ring.asym;
		/* A GPU producer cannot wake us: look again soon. */
		if (fs_load_relaxed(&c->hdr->dev_armed) && timeout_ns > dev_poll_ns)
			timeout_ns = dev_poll_ns;
		words[n] = &c->ring.hdr->wake_seq;
		expect[n++] = seq;
	}
	if (!pending && fs_ring_sleep_fence(asym))
		pending = 1;
	for (uint32_t row = 0; row < d->cfg.max_clients && !pending; row++) {
		struct fsd_client *c = &d->clients[row];
		if (!c->hot_active)
			continue;
		if (fs_ring_sleep_check(&c->ring))
			pending = 1;
		/* The device ring has no futex word of its own: a host thread
		 * posting there kicks the host ring's (fs_ring_dev.h).  This
		 * seq_cst load follows the flags store above, as in
		 * fs_ring_sleep_check(). */
		if (__atomic_load_n(&c->dev_ring.hdr->tail, __ATOMIC_SEQ_CST) != c->dev_ring.head)
			pending = 1;
	}
	/* A release that raced with the flags above: its slots are free now. */
	if (!pending && hot_holds(d) > 0)
		pending = 1;
	if (!pending && !fs_load_relaxed(&d->hot_stop)) {
		fs_futex_waitv(words, expect, n, timeout_ns);
		fsd_count(&d->counters_daemon[FS_C_hot_wakeups], 1);
	}
	for (uint32_t row = 0; row < d->cfg.max_clients; row++)
		if (d->clients[row].hot_active)
			fs_ring_sleep_done(&d->clients[row].ring);
}

static uint64_t hot_inflight(struct fsd *d)
{
	uint64_t n = 0;
	for (uint32_t card = 0; card < d->cfg.cards; card++)
		n += fs_load_relaxed(&d->counters_card[(uint64_t)card * FS_N_CARD + FS_CC_loading]);
	return n;
}

void fsd_hot_first(struct fsd *d, struct fsd_hot_state *s)
{
	*s = (struct fsd_hot_state){0};
	/* Epoch 1, empty, at once: every acquire then holds a real epoch, and
	 * fs_lookup_live has a hold that protects what it finds. */
	hot_publish(d, &s->deferred);
}

int fsd_hot_pass(struct fsd *d, struct fsd_hot_state *s, uint64_t now)
{
	uint64_t publish_ns = (uint64_t)fs_load_relaxed(&d->cfg.publish_us) * 1000u; /* reloadable */
	uint64_t hb_ns = (uint64_t)d->cfg.heartbeat_ms * 1000000u;
	uint32_t work = 0;
	hot_apply_cmds(d);
	work += fsd_cards_apply(d); /* cards that went down (fsd_cards.c) */
	work += hot_drain_rings(d, now);
	work += hot_completions(d, now);
	work += hot_issue(d, now);
	int published = 0;
	if (fsr_dirty(d->core) && now - s->last_publish >= publish_ns) {
		published = hot_publish(d, &s->deferred);
		if (published)
			s->last_publish = now;
	}
	hot_reserve(d, s, now);
	/* Holds change without a record (a release), so read them on every
	 * pass: eight loads per client. */
	work += hot_holds(d);
	if (now - s->last_check >= HOT_CHECK_NS) {
		hot_holds(d);
		hot_liveness(d, now);
		hot_pressure(d, now);
		s->last_check = now;
	}
	if (now - s->last_hb >= hb_ns / 2) {
		fs_store_release(&d->dh->heartbeat_ns, now);
		s->last_hb = now;
	}
	return work || published;
}

/* The idle policy: how long to spin with nothing to do before sleeping.
 * At least spin_us; while work keeps arriving after idle gaps no longer
 * than spin_adapt_us (an engine's layers and windows), twice the running
 * mean of those gaps, so the next arrival usually finds the thread awake:
 * no futex wake-up on its path, no system call on the engine's.  A gap
 * longer than spin_adapt_us (a pause) leaves the mean alone; the spin
 * never exceeds spin_adapt_us, so an idle daemon costs what it did. */
static uint64_t hot_spin_ns(struct fsd *d, uint64_t gap_mean)
{
	uint64_t spin = (uint64_t)fs_load_relaxed(&d->cfg.spin_us) * 1000u;
	uint64_t adapt = (uint64_t)fs_load_relaxed(&d->cfg.spin_adapt_us) * 1000u;
	if (adapt > spin && gap_mean > 0) {
		uint64_t want = 2 * gap_mean;
		spin = want < spin ? spin : want > adapt ? adapt : want;
	}
	return spin;
}

static void *hot_main(void *arg)
{
	struct fsd *d = arg;
	uint64_t idle_since = 0, gap_mean = 0;
	struct fsd_hot_state st;

	fsd_hot_first(d, &st);
	while (!fs_load_relaxed(&d->hot_stop)) {
		/* Read each pass: a reload (SIGHUP) may have changed them.  Spin:
		 * idle this long, then sleep. */
		uint64_t publish_ns = (uint64_t)fs_load_relaxed(&d->cfg.publish_us) * 1000u;
		uint64_t now = fs_now_ns();
		if (fsd_hot_pass(d, &st, now)) {
			if (idle_since) { /* work after an idle gap: learn the rhythm */
				uint64_t gap = now - idle_since;
				if (gap <= (uint64_t)fs_load_relaxed(&d->cfg.spin_adapt_us) * 1000u)
					gap_mean = gap_mean ? (3 * gap_mean + gap) / 4 : gap;
			}
			idle_since = 0;
			continue;
		}
		if (idle_since == 0)
			idle_since = now;
		if (now - idle_since < hot_spin_ns(d, gap_mean)) {
			/* Past spin_us the spin is the adaptive part: give the core
			 * to anyone who wants it (an engine on a busy machine); on an
			 * idle one sched_yield returns at once. */
			if (now - idle_since >= (uint64_t)fs_load_relaxed(&d->cfg.spin_us) * 1000u)
				sched_yield();
			continue;
		}
		uint64_t timeout = HOT_CHECK_NS;
		if (d->backend->poll && hot_inflight(d))
			timeout = HOT_POLL_NS; /* completions are seen by looking */
		if (fsr_dirty(d->core) && !st.deferred) {
			uint64_t left = st.last_publish + publish_ns > now ?
						st.last_publish + publish_ns - now :
						0;
			timeout = left < timeout ? left : timeout;
		}
		if (timeout > 0) {
			hot_sleep(d, timeout);
			fsd_stamp_wake(fs_now_ns()); /* bench builds only (fsd_stamps.h) */
		}
		/* Still idle since idle_since: a wake-up that finds nothing (a
		 * timeout) sleeps again at once instead of spinning again. */
	}
	/* Leaving: every client learns it is on its own. */
	for (uint32_t row = 0; row < d->cfg.max_clients; row++)
		if (d->clients[row].hot_active)
			hot_finish(d, &d->clients[row], FS_DETACH_SHUTDOWN);
	return NULL;
}

int fsd_hot_start(struct fsd *d)
{
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
	fsd_hot_wake(d);
	pthread_join(d->hot, NULL);
	d->hot_running = 0;
}
