/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_clients.c: the client table, on the loop thread.  Attach creates a
 * client's region and a one-time token; the fd handshake (fsd_fdsock.c)
 * hands the regions over and gives the client to the hot thread; a pidfd
 * tells us the moment its process dies.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs_counters.h"
#include "fs_name.h"
#include "fs_time.h"
#include "fsd_hot.h"
#include "fsd_loop.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* attach -> fd handshake.  The library makes the handshake right after
 * the attach reply (microseconds; tens of ms on a loaded host): a row that
 * waits longer is a client that will not come, and it holds a row.  It was
 * 5 s, which let one process keep all 32 rows with 7 attaches a second. */
#define PENDING_TIMEOUT_NS 2000000000ull

static const char *reason_name(uint32_t r)
{
	switch (r) {
	case FS_DETACH_REQUESTED:
		return "detached on request";
	case FS_DETACH_DEAD:
		return "process exited";
	case FS_DETACH_STALE:
		return "heartbeat stale";
	case FS_DETACH_HOLD_TIMEOUT:
		return "epoch held too long";
	case FS_DETACH_SHUTDOWN:
		return "daemon stopping";
	case FS_DETACH_OVER_BUDGET:
		return "its user's holds kept more slots from reuse than its budget";
	default:
		return "unknown";
	}
}

struct fsd_client *fsd_client_by_row(struct fsd *d, uint32_t row)
{
	if (row >= d->cfg.max_clients || d->clients[row].phase == FSD_CL_FREE)
		return NULL;
	return &d->clients[row];
}

static void counters_row_reset(struct fsd *d, uint32_t row, const struct fsd_client *c)
{
	uint64_t *cc = d->counters_client + (uint64_t)row * FS_N_CLIENT;
	for (unsigned i = 0; i < FS_N_CLIENT; i++)
		fs_store_relaxed(&cc[i], 0);
	fs_store_relaxed(&cc[FS_CCL_pid], (uint64_t)c->pid);
	fs_store_relaxed(&cc[FS_CCL_uid], (uint64_t)c->uid);
}

static void set_active_bit(struct fsd *d, uint32_t row, int on)
{
	struct fs_counters_hdr *ch = (struct fs_counters_hdr *)((char *)d->dh + d->dh->off_counters);
	uint64_t bit = 1ull << row;
	fsd_metrics_client(d, row, on); /* the labels first: a scrape sees the bit, then reads them */
	if (on)
		__atomic_fetch_or(&ch->client_active, bit, __ATOMIC_RELEASE);
	else
		__atomic_fetch_and(&ch->client_active, ~bit, __ATOMIC_RELEASE);
}

static void row_free(struct fsd *d, struct fsd_client *c)
{
	set_active_bit(d, c->row, 0);
	fs_shm_close(&c->region);
	c->phase = FSD_CL_FREE;
}

/* A client's pidfd watch: struct fsd_loop's pidwatch (fsd_loop.h says why
 * apart from its row). */

static void watch_closed(uv_handle_t *h)
{
	struct fsd_pidwatch *w = h->data;
	close(w->fd);
	w->fd = -1;
	w->state = 0;
}

static void on_pidfd(uv_poll_t *h, int status, int events)
{
	(void)status;
	(void)events;
	struct fsd_pidwatch *w = h->data;
	struct fsd_client *c = w->c;
	struct fsd *d = h->loop->data;
	uv_poll_stop(h);
	if (!c || c->phase == FSD_CL_FREE || c->phase == FSD_CL_CLOSING)
		return;
	fsd_log(FSD_INFO, "client %u (%s, pid %d): process exited", c->row, c->name, (int)c->pid);
	fsd_count(&d->counters_daemon[FS_C_deaths], 1);
	fsd_client_detach(d, c, FS_DETACH_DEAD);
}

static void watch_start(struct fsd *d, struct fsd_client *c)
{
	c->pidw = NULL;
	int fd = (int)syscall(SYS_pidfd_open, c->pid, 0);
	if (fd < 0) {
		fsd_log(FSD_WARN,
			"pidfd_open(%d): %s: this client's death will be seen by its heartbeat only",
			(int)c->pid, strerror(errno));
		return;
	}
	for (size_t i = 0; i < sizeof(d->lp->pidwatch) / sizeof(d->lp->pidwatch[0]); i++) {
		struct fsd_pidwatch *w = &d->lp->pidwatch[i];
		if (w->state != 0)
			continue;
		w->fd = fd;
		w->c = c;
		w->state = 1;
		uv_poll_init(d->lp->loop, &w->poll, fd);
		w->poll.data = w;
		uv_poll_start(&w->poll, UV_READABLE, on_pidfd);
		c->pidw = w;
		return;
	}
	close(fd);
	fsd_log(FSD_WARN,
		"client %u (pid %d): no free pidfd watch: its death will be seen by its heartbeat only",
		c->row, (int)c->pid);
}

static void watch_stop(struct fsd_client *c)
{
	struct fsd_pidwatch *w = c->pidw;
	c->pidw = NULL;
	if (!w || w->state != 1)
		return;
	w->c = NULL;
	w->state = 2;
	uv_close((uv_handle_t *)&w->poll, watch_closed);
}

/* Finish a row on the loop thread once the hot thread no longer uses it. */
static void row_release(struct fsd *d, struct fsd_client *c)
{
	watch_stop(c);
	row_free(d, c);
}

/*
 * The hold budget is per user, over time: a client revoked for an
 * overlong hold, for pinning the epoch buffers, or because its user's
 * holds kept more slots from reuse than the user's budget (fse_holds.c),
 * bars its user: no client of that uid may attach for 4 x hold_timeout_ms
 * (or hold_pressure_ms when that is set and shorter), four times as long
 * at each further revocation, up to BACKOFF_MAX_NS; a user is forgotten
 * after BACKOFF_FORGET_NS without a revocation.  (A valid hold pins slots
 * for up to that limit each time; with the back-off that is at most a
 * fifth of the time at first, then a seventeenth, and so on.)  Per user,
 * not per process or name (issue 33): keyed on the uid with the pid or the
 * name, a fresh process under a fresh name attached at once after each
 * revocation, and kept the honest engine at 14 % of its hits for as long
 * as it ran.  The cost: one revoked engine bars every engine of its user;
 * engines that must not share that fate run as users of their own.  Root
 * and foresightd's own user (the admins, who can stop the daemon anyway)
 * are keyed as before, on the uid with the pid or the name, so a test or
 * an operator running everything as one admin is not barred wholesale.
 */
#define BACKOFF_MAX_NS (600ull * 1000000000ull)
#define BACKOFF_FORGET_NS (3600ull * 1000000000ull)

static int is_admin(uid_t uid);

static struct fsd_backoff *backoff_find(struct fsd *d, uid_t uid, pid_t pid, const char *name, uint64_t now)
{
	int per_user = !is_admin(uid);
	for (uint32_t i = 0; i < FSD_MAX_CLIENTS; i++) {
		struct fsd_backoff *b = &d->backoff[i];
		if (b->strikes && now - b->last_ns > BACKOFF_FORGET_NS)
			b->strikes = 0;
		if (b->strikes && b->uid == uid && (per_user || b->pid == pid || strcmp(b->name, name) == 0))
			return b;
	}
	return NULL;
}

static void backoff_strike(struct fsd *d, const struct fsd_client *c)
{
	uint64_t now = fs_now_ns();
	struct fsd_backoff *b = backoff_find(d, c->uid, c->pid, c->name, now);
	if (!b) { /* a free entry, or the one revoked longest ago */
		b = &d->backoff[0];
		for (uint32_t i = 0; i < FSD_MAX_CLIENTS && b->strikes; i++)
			if (!d->backoff[i].strikes || d->backoff[i].last_ns < b->last_ns)
				b = &d->backoff[i];
		memset(b, 0, sizeof(*b));
		b->uid = c->uid;
	}
	b->pid = c->pid;
	snprintf(b->name, sizeof(b->name), "%s", c->name);
	uint64_t base_ms = fs_load_relaxed(&d->cfg.hold_timeout_ms);
	uint64_t pressure_ms = fs_load_relaxed(&d->cfg.hold_pressure_ms);
	if (pressure_ms && pressure_ms < base_ms)
		base_ms = pressure_ms;
	uint64_t wait = 4ull * base_ms * 1000000ull;
	for (uint32_t i = 0; i < b->strikes && wait < BACKOFF_MAX_NS; i++)
		wait *= 4;
	wait = wait < BACKOFF_MAX_NS ? wait : BACKOFF_MAX_NS;
	b->strikes++;
	b->last_ns = now;
	b->until_ns = now + wait;
	fsd_log(FSD_WARN, "client %u (%s, pid %d, uid %d): revoked %u time(s); no attach %s for %llu ms",
		c->row, c->name, (int)c->pid, (int)c->uid, b->strikes,
		is_admin(c->uid) ? "by this process or name" : "by this user",
		(unsigned long long)(wait / 1000000u));
}

/*
 * Fair shares of the client table (issue 22, attack 3).  One member of the
 * group once took all 32 rows with attaches that never made the fd
 * handshake.  Now:
 *  - a process holds at most FSD_ROWS_PER_PID rows, of them at most
 *    FSD_PENDING_PER_PID waiting for their handshake;
 *  - a user other than root and foresightd's own (an "admin") holds at most
 *    half the rows (max_clients / 2, at least 1), at most FSD_PENDING_PER_UID
 *    of them waiting, and no user but an admin takes the last
 *    fsd_rows_reserved() rows;
 *  - a half-open row expires PENDING_TIMEOUT_NS after its attach;
 *  - when no row is free, an attach takes the newest half-open row of the
 *    user with the most half-open rows (two at least, more than the asker
 *    has), not the oldest: a flood evicts the flooder's own, never an
 *    honest engine's that is a few ms from its handshake.
 * Each refusal and eviction is counted (attach_capped).  The cost: more
 * than max_clients / 2 engines under one non-admin user need a larger
 * max_clients (64 at most).
 */
static int is_admin(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

uint32_t fsd_rows_reserved(const struct fsd *d)
{
	uint32_t r = d->cfg.max_clients / 8;
	return r < 1 ? (d->cfg.max_clients > 1 ? 1 : 0) : r;
}

uint32_t fsd_rows_per_uid(const struct fsd *d)
{
	uint32_t r = d->cfg.max_clients / 2;
	return r ? r : 1;
}

static int row_for(struct fsd *d, pid_t pid, uid_t uid, uint32_t *out, char *err, size_t errlen)
{
	uint32_t n = d->cfg.max_clients, pid_rows = 0, pid_pend = 0, uid_rows = 0, uid_pend = 0;
	uint32_t free_rows = 0, free_row = n;
	for (uint32_t i = 0; i < n; i++) {
		const struct fsd_client *c = &d->clients[i];
		if (c->phase == FSD_CL_FREE) {
			free_rows++;
			if (free_row == n)
				free_row = i;
			continue;
		}
		int pend = c->phase == FSD_CL_PENDING;
		if (c->pid == pid) {
			pid_rows++;
			pid_pend += pend;
		}
		if (c->uid == uid) {
			uid_rows++;
			uid_pend += pend;
		}
	}
	int admin = is_admin(uid);
	const char *why = NULL;
	char buf[160];
	if (pid_pend >= FSD_PENDING_PER_PID) {
		snprintf(buf, sizeof(buf), "pid %d already has %u attaches waiting for their fd handshake",
			 (int)pid, pid_pend);
		why = buf;
	} else if (pid_rows >= FSD_ROWS_PER_PID) {
		snprintf(buf, sizeof(buf), "pid %d already holds %u client rows (at most %u a process)",
			 (int)pid, pid_rows, FSD_ROWS_PER_PID);
		why = buf;
	} else if (!admin && uid_pend >= FSD_PENDING_PER_UID) {
		snprintf(buf, sizeof(buf), "uid %d already has %u attaches waiting for their fd handshake",
			 (int)uid, uid_pend);
		why = buf;
	} else if (!admin && uid_rows >= fsd_rows_per_uid(d)) {
		snprintf(buf, sizeof(buf),
			 "uid %d already holds %u client rows (at most max_clients / 2 = %u a user)",
			 (int)uid, uid_rows, fsd_rows_per_uid(d));
		why = buf;
	}
	if (why) {
		fsd_count(&d->counters_daemon[FS_C_attach_capped], 1);
		snprintf(err, errlen, "too many clients of this %s: %s",
			 pid_rows >= FSD_ROWS_PER_PID || pid_pend >= FSD_PENDING_PER_PID ? "process" : "user",
			 why);
		return -EBUSY;
	}
	/* The last rows are the admins'. */
	if (free_row < n && (admin || free_rows > fsd_rows_reserved(d))) {
		*out = free_row;
		return 0;
	}
	/* None free for this asker: the newest half-open row of the user with
	 * the most of them, when that is another user with two or more. */
	uint32_t pend_of[FSD_MAX_CLIENTS] = {0}, worst = n, worst_pend = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct fsd_client *c = &d->clients[i];
		if (c->phase != FSD_CL_PENDING || c->uid == uid)
			continue;
		for (uint32_t j = 0; j < n; j++) /* count per user, at its first row */
			if (d->clients[j].phase == FSD_CL_PENDING && d->clients[j].uid == c->uid)
				pend_of[i]++;
		if (pend_of[i] > worst_pend ||
		    (pend_of[i] == worst_pend && worst < n && c->attach_ns > d->clients[worst].attach_ns)) {
			worst = i;
			worst_pend = pend_of[i];
		}
	}
	if (worst < n && worst_pend >= 2 && worst_pend > uid_pend) {
		struct fsd_client *v = &d->clients[worst];
		fsd_count(&d->counters_daemon[FS_C_attach_capped], 1);
		fsd_log(FSD_WARN,
			"client %u (%s, pid %d, uid %d): half-open row taken for pid %d (uid %d): that user has %u "
			"attaches waiting for their fd handshake",
			v->row, v->name, (int)v->pid, (int)v->uid, (int)pid, (int)uid, worst_pend);
		fsd_client_detach(d, v, FS_DETACH_REQUESTED);
		*out = worst; /* a pending row is freed at once */
		return 0;
	}
	fsd_count(&d->counters_daemon[FS_C_attach_capped], 1);
	if (free_row < n)
		snprintf(err, errlen,
			 "too many clients: the last %u of max_clients %u are for root and foresightd's user",
			 fsd_rows_reserved(d), n);
	else
		snprintf(err, errlen, "too many clients (max_clients %u)", n);
	return -EBUSY;
}

int fsd_client_attach(struct fsd *d, pid_t pid, uid_t uid, gid_t gid, const char *name, uint32_t ring_entries,
		      struct fsd_client **out, char *err, size_t errlen)
{
	char safe[FS_NAME_MAX + 1];
	size_t escaped = fs_name_safe(safe, sizeof(safe), name);
	uint64_t now = fs_now_ns();
	struct fsd_backoff *bo = backoff_find(d, uid, pid, safe, now);
	if (bo && now < bo->until_ns) {
		fsd_count(&d->counters_daemon[FS_C_backoff_refused], 1);
		snprintf(err, errlen,
			 "%s revoked %u time(s) for holding epochs too long or pinning more slots than its "
			 "budget; attach again in %llu ms",
			 is_admin(uid) ? "this process or name was" : "a client of this user was",
			 bo->strikes, (unsigned long long)((bo->until_ns - now + 999999u) / 1000000u));
		return -EAGAIN;
	}
	uint32_t row;
	int r = row_for(d, pid, uid, &row, err, errlen);
	if (r < 0)
		return r;
	if (ring_entries == 0)
		ring_entries = d->cfg.ring_entries;
	if (ring_entries < FS_RING_MIN_ENTRIES || ring_entries > FS_RING_MAX_ENTRIES ||
	    (ring_entries & (ring_entries - 1))) {
		snprintf(err, errlen, "ring_entries %u: need a power of two in %u..%u", ring_entries,
			 FS_RING_MIN_ENTRIES, FS_RING_MAX_ENTRIES);
		return -EINVAL;
	}
	struct fsd_client *c = &d->clients[row];
	memset(c, 0, sizeof(*c));
	c->row = row;
	c->pid = pid;
	c->uid = uid;
	c->gid = gid;
	c->serial = ++d->next_serial;
	/* The name goes to log lines, replies and metrics: printable ASCII only,
	 * capped (fs_name.h), once, here. */
	_Static_assert(sizeof(c->name) == sizeof(safe), "a row holds a safe name");
	memcpy(c->name, safe, sizeof(safe));
	if (escaped > 0) {
		fsd_count(&d->counters_daemon[FS_C_bad_names], 1);
		fsd_log(FSD_WARN, "client %u (pid %d, uid %d): name escaped or cut to \"%s\"", row, (int)pid,
			(int)uid, c->name);
	}

	/* Host ring, then the device ring on its own page: an engine registers
	 * that part with CUDA for its kernels (fs_ring_dev.h). */
	uint64_t off_ring = sizeof(struct fs_client_hdr);
	uint64_t off_dev = fs_page_round((size_t)(off_ring + fs_ring_bytes(ring_entries)));
	uint64_t bytes = off_dev + fs_ring_bytes(ring_entries);
	r = fs_shm_create(&c->region, "foresight-client", (size_t)bytes);
	if (r < 0) {
		snprintf(err, errlen, "cannot create client region: %s", strerror(-r));
		return r;
	}
	struct fs_client_hdr *h = c->region.base;
	h->magic = FS_CLIENT_MAGIC;
	h->version = FS_PROTO_VERSION;
	h->region_bytes = c->region.bytes;
	h->client_id = row;
	h->ring_entries = ring_entries;
	h->off_ring = off_ring;
	h->ring_bytes = fs_ring_bytes(ring_entries);
	h->off_dev_ring = off_dev;
	h->dev_ring_bytes = fs_ring_bytes(ring_entries);
	h->instance = d->instance;
	/* ATTACHED is set by the hot thread once the core counts this client's
	 * holds: an acquire before that could not protect its slots. */
	h->state = 0;
	h->heartbeat_ns = fs_now_ns();
	r = fs_ring_format(&c->ring, (char *)h + off_ring, (size_t)h->ring_bytes, ring_entries);
	if (r == 0)
		r = fs_ring_format(&c->dev_ring, (char *)h + off_dev, (size_t)h->dev_ring_bytes,
				   ring_entries);
	if (r < 0) {
		fs_shm_close(&c->region);
		snprintf(err, errlen, "cannot format ring: %s", strerror(-r));
		return r;
	}
	if (getrandom(c->token, sizeof(c->token), 0) != (ssize_t)sizeof(c->token)) {
		fs_shm_close(&c->region);
		snprintf(err, errlen, "getrandom failed");
		return -EIO;
	}
	c->attach_ns = fs_now_ns();
	c->pending_deadline_ns = c->attach_ns + PENDING_TIMEOUT_NS;
	c->phase = FSD_CL_PENDING;

	/* Death is seen through the pidfd the moment the process exits. */
	watch_start(d, c);
	counters_row_reset(d, row, c);
	set_active_bit(d, row, 1);
	*out = c;
	return 0;
}

/* The fd handshake succeeded: the hot thread takes over. */
int fsd_client_activate(struct fsd *d, struct fsd_client *c)
{
	c->phase = FSD_CL_ACTIVE;
	fsd_count(&d->counters_daemon[FS_C_attaches], 1);
	fsd_log(FSD_INFO, "client %u (%s, pid %d, uid %d) attached", c->row, c->name, (int)c->pid,
		(int)c->uid);
	return fsd_hot_add(d, c->row);
}

void fsd_client_detach(struct fsd *d, struct fsd_client *c, uint32_t reason)
{
	if (c->phase == FSD_CL_ACTIVE) {
		/* The hot thread drops it and reports back (fsd_clients_reap). */
		c->phase = FSD_CL_CLOSING;
		if (fsd_hot_drop(d, c->row, reason) < 0)
			fsd_log(FSD_ERR, "client %u: hot thread command queue full", c->row);
		return;
	}
	if (c->phase == FSD_CL_PENDING) {
		fsd_log(FSD_INFO, "client %u (%s, pid %d): %s before its fd handshake", c->row, c->name,
			(int)c->pid, reason_name(reason));
		row_release(d, c);
	}
}

void fsd_clients_reap(struct fsd *d)
{
	uint32_t rows[FSD_MAX_CLIENTS], reasons[FSD_MAX_CLIENTS], n;
	pthread_mutex_lock(&d->drop_lock);
	n = d->n_dropped;
	memcpy(rows, d->dropped_rows, n * sizeof(rows[0]));
	memcpy(reasons, d->dropped_reason, n * sizeof(reasons[0]));
	d->n_dropped = 0;
	pthread_mutex_unlock(&d->drop_lock);
	for (uint32_t i = 0; i < n; i++) {
		struct fsd_client *c = &d->clients[rows[i]];
		if (c->phase == FSD_CL_FREE)
			continue;
		fsd_count(&d->counters_daemon[FS_C_detaches], 1);
		fsd_log(FSD_INFO, "client %u (%s, pid %d): %s; holds dropped", c->row, c->name, (int)c->pid,
			reason_name(reasons[i]));
		if (reasons[i] == FS_DETACH_HOLD_TIMEOUT || reasons[i] == FS_DETACH_OVER_BUDGET)
			backoff_strike(d, c);
		row_release(d, c);
	}
}

unsigned fsd_clients_pending_of(const struct fsd *d, pid_t pid)
{
	unsigned n = 0;
	for (uint32_t row = 0; row < d->cfg.max_clients; row++)
		n += d->clients[row].phase == FSD_CL_PENDING && d->clients[row].pid == pid;
	return n;
}

void fsd_clients_expire_pending(struct fsd *d, uint64_t now)
{
	for (uint32_t row = 0; row < d->cfg.max_clients; row++) {
		struct fsd_client *c = &d->clients[row];
		if (c->phase == FSD_CL_PENDING && now > c->pending_deadline_ns) {
			fsd_log(FSD_WARN,
				"client %u (%s, pid %d, uid %d): no fd handshake within %llu ms, dropped",
				row, c->name, (int)c->pid, (int)c->uid,
				(unsigned long long)(PENDING_TIMEOUT_NS / 1000000u));
			fsd_count(&d->counters_daemon[FS_C_pending_expired], 1);
			row_release(d, c);
		}
	}
}
