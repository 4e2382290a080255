/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_control_io.c: the control socket's transport.  nng REP over ipc://;
 * the requests are handled on the loop thread (fsd_control_reply, in
 * fsd_control.c), and no peer can make the loop wait (issue 22, attacks 4
 * and 6):
 *
 *  - Requests come in on CTL_CTXS nng contexts, each with its own aio: the
 *    receive completes on an nng thread, which queues the context for the
 *    loop (a uv_async); the loop computes the reply and hands it back with
 *    an asynchronous send, and returns.  The old loop sent each reply
 *    blocking, up to 200 ms for a peer that did not read: 20 such peers
 *    made ping take 3.8 s and an honest attach fail.
 *  - A reply not taken by its peer within CTL_SEND_MS is dropped, and so
 *    is a request that finds CTL_PER_PIPE requests of its connection (a
 *    process: CTL_PER_PID; a user other than root and foresightd's own:
 *    CTL_PER_UID) waiting for their replies (counted: replies_dropped).
 *    One peer holds at most that many of the contexts.
 *    The connection is left open (its process's connection cap bounds
 *    it): closing connections with replies in flight (nng_pipe_close) made
 *    nng 1.5.2 leak them, 13 000 sockets in 6 s of this attack.
 *  - Connections: at most CONNS_PER_PID a process and, for a user other
 *    than root and foresightd's own, CONNS_PER_UID; in all at most what the
 *    fd limit leaves (fsd_control_fd_budget); more are closed as they come
 *    (conns_refused).  Past half of that, connections idle for
 *    CONN_IDLE_NS are closed, the longest idle first (conns_reaped): the
 *    library's dialer reconnects when it next needs one.
 *  - The listener is checked every second (probe_tick): nng 1.5.2's stops
 *    taking connections for good once a peer leaves in the SP handshake
 *    (nng issue #1518, fixed after 1.5.2): one connect() and close() from
 *    any local process, or an engine killed -9 while it connected, left
 *    foresightd up, accepting connections and answering none, until it
 *    was restarted.  The loop dials its own socket; when that connection
 *    is not handed over within PROBE_DEADLINE_NS, the listener is closed
 *    and another one listens on the path (control_relistens; connections
 *    of the old one drop, and their dialers reconnect).
 */
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/transport/ipc/ipc.h>

#include "fs_counters.h"
#include "fs_time.h"
#include "fsd_control.h"
#include "fsd_loop.h"
#include "fsd_sockpath.h"

#define CTL_CTXS 64u
#define CTL_PER_PIPE 2u
#define CTL_PER_PID 8u
/* A user other than root and foresightd's own: a quarter of the contexts,
 * so several processes of one user cannot hold them all. */
#define CTL_PER_UID (CTL_CTXS / 4u)
#define CTL_SEND_MS 1000
#define CONNS_PER_PID 16u
#define CONNS_PER_UID 64u
#define CONNS_TABLE 4096u
#define CONN_IDLE_NS (60ull * 1000000000ull)
/* A handshake takes microseconds; a daemon under TSan on a loaded 2-core
 * machine, milliseconds: 3 s is no listener, not a slow one. */
#define PROBE_DEADLINE_NS (3ull * 1000000000ull)

enum { CTX_RECV = 1, CTX_LOOP, CTX_SEND };

struct fsd_ctl;

struct ctl_ctx {
	nng_ctx ctx;
	nng_aio *aio;
	struct fsd_ctl *ctl;  /* its owner */
	int state;            /* CTX_*: whose turn it is */
	nng_msg *msg;         /* the request, on its way to the loop */
	uint32_t pipe_id;     /* under lock: the connection it serves, while busy */
	uint64_t pid;         /* under lock: its peer's pid, while busy */
	uint64_t uid;         /* under lock: its peer's uid, while busy */
	int busy;             /* under lock: a request taken, its reply not yet sent */
	struct ctl_ctx *next; /* under lock: the loop's queue */
};

struct conn {
	uint32_t id;
	uint32_t uid;
	uint64_t pid;
	uint64_t last_ns; /* its last request (or its start) */
};

/*
 * The transport's state shared with nng's threads, d->lp->ctl.  On the
 * heap, not in struct fsd_loop (main's stack): when nng_close does not
 * return (fsd_control_stop), nng's threads may still run on_pipe and
 * on_ctx, which read it, after main has returned; it is then left
 * allocated on purpose.  The loop's own handles (the async, the reap
 * timer) are struct fsd_loop's: libuv closes them on a later loop turn.
 */
struct fsd_ctl {
	struct fsd *d;
	struct ctl_ctx ctxs[CTL_CTXS];
	unsigned n_ctxs;
	pthread_mutex_t lock;
	struct ctl_ctx *q_head, *q_tail; /* under lock */
	int closing;                     /* under lock: no more uv_async_send */
	struct conn conns[CONNS_TABLE];  /* under lock, [0, n_conns) */
	unsigned n_conns, conn_cap;      /* conn_cap: set before the first connection */
	uint64_t refused_logged_ns;      /* nng's threads, atomic: a refusal last logged */
	uint64_t dropped_logged_ns;      /* loop thread: a dropped request last logged */
	uint64_t self_pid;               /* getpid(): the probe's connections are this process's */
	uint64_t self_pipes;             /* nng's threads, atomic: connections of this process handed over */
	/* Loop thread: the listener and its probe (probe_tick). */
	nng_listener listener;
	int listening;
	nng_socket probe;
	int probe_open;
	nng_dialer probe_dialer;
	int probe_busy;
	uint64_t probe_seen, probe_t0;
	char url[160];
	nng_socket rep; /* the REP socket, for the stop's helper thread */
};

static int is_admin(uint64_t uid)
{
	return uid == 0 || uid == (uint64_t)geteuid();
}

/* ---- connections (nng's threads) ----------------------------------------- */

static struct conn *conn_find(struct fsd_ctl *t, uint32_t id)
{
	for (unsigned i = 0; i < t->n_conns; i++)
		if (t->conns[i].id == id)
			return &t->conns[i];
	return NULL;
}

static void on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct fsd_ctl *t = arg;
	uint32_t id = (uint32_t)nng_pipe_id(p);
	if (ev == NNG_PIPE_EV_REM_POST) {
		pthread_mutex_lock(&t->lock);
		struct conn *c = conn_find(t, id);
		if (c)
			*c = t->conns[--t->n_conns];
		pthread_mutex_unlock(&t->lock);
		return;
	}
	if (ev != NNG_PIPE_EV_ADD_PRE)
		return;
	uint64_t uid = UINT64_MAX, pid = 0;
	nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &uid);
	nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &pid);
	if (pid == t->self_pid) {
		/* The listener's probe got through (probe_tick).  Kept out of
		 * the caps: closed here, its dialer would redial, and the loop
		 * might close that one in its handshake. */
		__atomic_fetch_add(&t->self_pipes, 1, __ATOMIC_RELAXED);
		return;
	}
	unsigned of_pid = 0, of_uid = 0, all;
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < t->n_conns; i++) {
		of_pid += t->conns[i].pid == pid;
		of_uid += t->conns[i].uid == (uint32_t)uid;
	}
	int stop = t->closing; /* then the daemon region may be gone */
	int ok = !stop && t->n_conns < t->conn_cap && of_pid < CONNS_PER_PID &&
		 (is_admin(uid) || of_uid < CONNS_PER_UID);
	if (ok)
		t->conns[t->n_conns++] = (struct conn){
			.id = id, .uid = (uint32_t)uid, .pid = pid, .last_ns = fs_now_ns()};
	all = t->n_conns;
	unsigned cap = t->conn_cap;
	pthread_mutex_unlock(&t->lock);
	if (!ok && stop) {
		nng_pipe_close(p);
		return;
	}
	if (!ok) {
		uint64_t now = fs_now_ns();
		fsd_count(&t->d->counters_daemon[FS_C_conns_refused], 1);
		if (now - __atomic_load_n(&t->refused_logged_ns, __ATOMIC_RELAXED) > 1000000000ull) {
			__atomic_store_n(&t->refused_logged_ns, now, __ATOMIC_RELAXED);
			fsd_log(FSD_WARN,
				"control: closed a connection of pid %llu uid %llu: %u of its process, %u of its "
				"user, %u in all (limits %u, %u, %u)",
				(unsigned long long)pid, (unsigned long long)uid, of_pid, of_uid, all,
				CONNS_PER_PID, CONNS_PER_UID, cap);
		}
		nng_pipe_close(p);
	}
}

static void probe_tick(struct fsd *d, struct fsd_ctl *t);

/* Loop thread, every second: past half the budget, idle connections go;
 * the listener's probe. */
static void on_reap(uv_timer_t *h)
{
	struct fsd *d = h->loop->data;
	struct fsd_ctl *t = d->lp->ctl;
	uint32_t ids[64];
	unsigned n = 0;
	uint64_t now = fs_now_ns();
	pthread_mutex_lock(&t->lock);
	while (t->n_conns > t->conn_cap / 2 && n < 64) {
		struct conn *old = NULL;
		for (unsigned i = 0; i < t->n_conns; i++) {
			int picked = 0;
			for (unsigned k = 0; k < n; k++)
				picked |= ids[k] == t->conns[i].id;
			if (!picked && now - t->conns[i].last_ns > CONN_IDLE_NS &&
			    (!old || t->conns[i].last_ns < old->last_ns))
				old = &t->conns[i];
		}
		if (!old)
			break;
		ids[n++] = old->id;
		if (t->n_conns - n <= t->conn_cap / 2)
			break;
	}
	pthread_mutex_unlock(&t->lock);
	for (unsigned i = 0; i < n; i++) {
		nng_pipe p = NNG_PIPE_INITIALIZER;
		p.id = ids[i];
		nng_pipe_close(p);
		fsd_count(&d->counters_daemon[FS_C_conns_reaped], 1);
	}
	probe_tick(d, t);
}

/* ---- requests and replies ------------------------------------------------ */

static void ctx_recv(struct ctl_ctx *c)
{
	c->state = CTX_RECV;
	nng_aio_set_timeout(c->aio, NNG_DURATION_INFINITE);
	nng_ctx_recv(c->ctx, c->aio);
}

static void ctx_done(struct ctl_ctx *c)
{
	pthread_mutex_lock(&c->ctl->lock);
	c->busy = 0;
	int stop = c->ctl->closing;
	pthread_mutex_unlock(&c->ctl->lock);
	if (!stop)
		ctx_recv(c);
}

/* nng's thread: a request arrived, or a reply went (or did not). */
static void on_ctx(void *arg)
{
	struct ctl_ctx *c = arg;
	struct fsd_ctl *t = c->ctl;
	int r = nng_aio_result(c->aio);
	if (c->state == CTX_SEND) {
		if (r != 0) {
			nng_msg *m = nng_aio_get_msg(c->aio);
			if (m)
				nng_msg_free(m);
			nng_pipe p = NNG_PIPE_INITIALIZER;
			pthread_mutex_lock(&t->lock);
			p.id = c->pipe_id;
			int stop = t->closing; /* then the daemon region may be gone */
			pthread_mutex_unlock(&t->lock);
			if (!stop && r != NNG_ECLOSED && p.id > 0) {
				/* Its peer does not read: the reply goes. */
				fsd_count(&t->d->counters_daemon[FS_C_replies_dropped], 1);
			}
		}
		ctx_done(c);
		return;
	}
	if (r != 0) {
		if (r == NNG_ECLOSED)
			return;
		ctx_done(c);
		return;
	}
	nng_msg *m = nng_aio_get_msg(c->aio);
	uint32_t pid_ = (uint32_t)nng_pipe_id(nng_msg_get_pipe(m));
	uint64_t peer = 0, peer_uid = UINT64_MAX;
	nng_pipe_get_uint64(nng_msg_get_pipe(m), NNG_OPT_IPC_PEER_PID, &peer);
	nng_pipe_get_uint64(nng_msg_get_pipe(m), NNG_OPT_IPC_PEER_UID, &peer_uid);
	c->msg = m;
	c->state = CTX_LOOP;
	pthread_mutex_lock(&t->lock);
	c->busy = 1;
	c->pipe_id = pid_;
	c->pid = peer;
	c->uid = peer_uid;
	struct conn *cn = conn_find(t, pid_);
	if (cn)
		cn->last_ns = fs_now_ns();
	c->next = NULL;
	if (t->q_tail)
		t->q_tail->next = c;
	else
		t->q_head = c;
	t->q_tail = c;
	if (!t->closing)
		uv_async_send(&t->d->lp->ctl_async);
	pthread_mutex_unlock(&t->lock);
}

static void handle_one(struct fsd *d, struct ctl_ctx *c)
{
	nng_msg *m = c->msg;
	c->msg = NULL;
	nng_pipe p = nng_msg_get_pipe(m);
	unsigned of_pipe = 0, of_pid = 0, of_uid = 0;
	struct fsd_ctl *t = c->ctl;
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < t->n_ctxs; i++) {
		const struct ctl_ctx *o = &t->ctxs[i];
		if (!o->busy || o == c)
			continue;
		of_pipe += o->pipe_id == c->pipe_id;
		of_pid += o->pid == c->pid;
		of_uid += o->uid == c->uid;
	}
	pthread_mutex_unlock(&t->lock);
	if (of_pipe >= CTL_PER_PIPE || of_pid >= CTL_PER_PID ||
	    (!is_admin(c->uid) && of_uid >= CTL_PER_UID)) {
		/* Requests piled up behind replies it does not read. */
		uint64_t now = fs_now_ns();
		if (now - t->dropped_logged_ns > 1000000000ull) {
			t->dropped_logged_ns = now;
			fsd_log(FSD_WARN,
				"control: dropped a request of pid %llu: %u requests of its connection (%u of its "
				"process, %u of its user) wait for replies not read",
				(unsigned long long)c->pid, of_pipe, of_pid, of_uid);
		}
		fsd_count(&d->counters_daemon[FS_C_replies_dropped], 1);
		nng_msg_free(m);
		ctx_done(c);
		return;
	}
	struct fsd_peer pe = {0};
	pe.have = nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &pe.uid) == 0 &&
		  nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_GID, &pe.gid) == 0 &&
		  nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &pe.pid) == 0;
	char *txt = fsd_control_reply(d, nng_msg_body(m), nng_msg_len(m), &pe);
	nng_msg_clear(m);
	if (!txt || nng_msg_append(m, txt, strlen(txt)) != 0) {
		free(txt);
		nng_msg_free(m);
		ctx_done(c);
		return;
	}
	free(txt);
	c->state = CTX_SEND;
	nng_aio_set_msg(c->aio, m);
	nng_aio_set_timeout(c->aio, CTL_SEND_MS);
	nng_ctx_send(c->ctx, c->aio); /* on_ctx hears how it went */
}

static void on_async(uv_async_t *h)
{
	struct fsd *d = h->loop->data;
	struct fsd_ctl *t = d->lp->ctl;
	for (;;) {
		pthread_mutex_lock(&t->lock);
		struct ctl_ctx *c = t->q_head;
		if (c) {
			t->q_head = c->next;
			if (!t->q_head)
				t->q_tail = NULL;
		}
		pthread_mutex_unlock(&t->lock);
		if (!c)
			return;
		handle_one(d, c);
	}
}

/* ---- the fd budget -------------------------------------------------------- */

/*
 * The soft fd limit is raised to the hard one (systemd's default soft limit
 * is 1024; 2000 idle connections once left no fd for an attach), and the
 * connection budget is what remains after the fds the rest needs: the
 * regions, 3 per client row (its region, pidfd, fd-socket connection),
 * the fd socket's table, and 64 to spare (logs, /proc, metrics, CUDA).
 */
static unsigned fd_budget(const struct fsd *d, rlim_t soft)
{
	uint64_t need = 64u + 16u + 3ull * d->cfg.max_clients + 2ull * FS_MAX_CARDS + FSD_MAX_CLIENTS + 16u;
	uint64_t left = soft > need ? (uint64_t)soft - need : 0;
	if (left > CONNS_TABLE)
		left = CONNS_TABLE;
	return (unsigned)left;
}

static void fd_limit_check(struct fsd *d, unsigned *cap)
{
	unsigned conn_cap;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		*cap = 256;
		fsd_log(FSD_WARN, "control: getrlimit(RLIMIT_NOFILE): %s; serving up to %u connections",
			strerror(errno), *cap);
		return;
	}
	rlim_t soft0 = rl.rlim_cur;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			rl.rlim_cur = soft0;
	}
	conn_cap = fd_budget(d, rl.rlim_cur);
	unsigned want = d->cfg.max_clients + 16u;
	fsd_log(conn_cap < want ? FSD_WARN : FSD_INFO,
		"fd limit %llu (soft was %llu, hard %llu): %u client rows and up to %u control connections "
		"(%u a process, %u a user other than root and foresightd's)%s",
		(unsigned long long)rl.rlim_cur, (unsigned long long)soft0, (unsigned long long)rl.rlim_max,
		d->cfg.max_clients, conn_cap, CONNS_PER_PID, CONNS_PER_UID,
		conn_cap < want ? ": too few for the clients; raise LimitNOFILE (ulimit -n)" : "");
	*cap = conn_cap < 16 ? 16 : conn_cap;
}

/* ---- the listener and its probe ------------------------------------------ */

/* Listen on the control path: the listener, its mode, its group. */
static int listen_start(struct fsd *d, struct fsd_ctl *t)
{
	int r;
	/* fsd_sock_claim (main.c) holds the lock and cleared a stale socket. */
	if ((r = nng_listener_create(&t->listener, d->lp->rep, t->url)) != 0)
		goto fail;
	if ((r = nng_listener_set_int(t->listener, NNG_OPT_IPC_PERMISSIONS, (int)d->cfg.socket_mode)) != 0 ||
	    (r = nng_listener_start(t->listener, 0)) != 0) {
		/* Created, not listening: closed here, or each retry of
		 * relisten() would leak one. */
		nng_listener_close(t->listener);
		goto fail;
	}
	t->listening = 1;
	fsd_sock_bound(&d->cfg, FSD_SOCK_CONTROL);
	if (d->cfg.group[0]) {
		/* Only the loop thread looks groups up: getgrnam's static buffer is safe. */
		// cppcheck-suppress getgrnamCalled
		struct group *g = getgrnam(d->cfg.group);
		if (!g) {
			fsd_log(FSD_ERR, "control: group '%s' does not exist", d->cfg.group);
			return -ENOENT;
		}
		if (chown(d->cfg.socket_path, (uid_t)-1, g->gr_gid) < 0 ||
		    chown(d->cfg.fd_socket_path, (uid_t)-1, g->gr_gid) < 0)
			fsd_log(FSD_WARN, "control: chgrp of the sockets to '%s' failed: %s", d->cfg.group,
				strerror(errno));
	}
	return 0;
fail:
	fsd_log(FSD_ERR, "control: cannot listen on %s: %s", t->url, nng_strerror(r));
	return -EIO;
}

/* The listener takes no connection any more: another one on the path.
 * Closing the old one closes its connections (and nng removes the socket
 * file, which the new one binds again). */
static void relisten(struct fsd *d, struct fsd_ctl *t)
{
	if (t->listening)
		fsd_log(FSD_WARN,
			"control: the listener on %s took no connection for %llu s (nng 1.5.2 stops after a "
			"peer leaves in the handshake); listening anew",
			t->url, (unsigned long long)(PROBE_DEADLINE_NS / 1000000000ull));
	if (t->listening)
		nng_listener_close(t->listener);
	t->listening = 0;
	fsd_sock_unlink(&d->cfg, FSD_SOCK_CONTROL); /* if nng left it */
	if (listen_start(d, t) == 0) {
		/* Counts listeners that started: a failed try is retried at
		 * the next probe and logged by listen_start(). */
		fsd_count(&d->counters_daemon[FS_C_control_relistens], 1);
		return;
	}
	fsd_log(FSD_ERR, "control: no listener on %s: engines cannot attach; trying again in %llu s", t->url,
		(unsigned long long)(PROBE_DEADLINE_NS / 1000000000ull));
}

/*
 * Loop thread, every second.  A connection of the daemon's own to its
 * socket must be handed over (on_pipe counts it) within PROBE_DEADLINE_NS,
 * or the listener is replaced.  The probe is closed only once handed over
 * (or with the listener it never reached): closing it in the handshake
 * would be the very thing that stops nng 1.5.2's listener.
 */
static void probe_tick(struct fsd *d, struct fsd_ctl *t)
{
	if (!t->probe_open || d->stopping)
		return;
	uint64_t now = fs_now_ns(), seen = __atomic_load_n(&t->self_pipes, __ATOMIC_RELAXED);
	if (t->probe_busy) {
		if (seen != t->probe_seen) {
			nng_dialer_close(t->probe_dialer);
			t->probe_busy = 0;
		} else if (now - t->probe_t0 > PROBE_DEADLINE_NS) {
			/* The probe first: closed after, it might redial the new
			 * listener and be closed in that handshake. */
			nng_dialer_close(t->probe_dialer);
			t->probe_busy = 0;
			relisten(d, t);
		}
		return;
	}
	t->probe_seen = seen;
	if (nng_dialer_create(&t->probe_dialer, t->probe, t->url) != 0)
		return;
	if (nng_dialer_start(t->probe_dialer, NNG_FLAG_NONBLOCK) != 0) {
		nng_dialer_close(t->probe_dialer);
		return;
	}
	t->probe_busy = 1;
	t->probe_t0 = now;
}

/* ---- start and stop ------------------------------------------------------- */

int fsd_control_start(struct fsd *d)
{
	int r;
	struct fsd_ctl *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->d = d;
	t->self_pid = (uint64_t)getpid();
	pthread_mutex_init(&t->lock, NULL);
	d->lp->ctl = t;
	fd_limit_check(d, &t->conn_cap);
	snprintf(t->url, sizeof(t->url), "ipc://%s", d->cfg.socket_path);
	const char *url = t->url;
	if ((r = nng_rep0_open(&d->lp->rep)) != 0) {
		fsd_log(FSD_ERR, "control: nng_rep0_open: %s", nng_strerror(r));
		return -EIO;
	}
	d->lp->rep_open = 1;
	/* Up to twice the limit arrives here and is refused with a reply (and
	 * counted); nng closes the connection of anything larger. */
	nng_socket_set_size(d->lp->rep, NNG_OPT_RECVMAXSZ, FSD_CONTROL_RECV_MAX);
	/* A second daemon on the same socket must fail, not steal it: probe first. */
	nng_socket probe;
	if (nng_req0_open(&probe) == 0) {
		if (nng_dial(probe, url, NULL, 0) == 0) {
			nng_close(probe);
			fsd_log(FSD_ERR, "control: another foresightd is already listening on %s",
				d->cfg.socket_path);
			return -EADDRINUSE;
		}
		nng_close(probe);
	}
	nng_pipe_notify(d->lp->rep, NNG_PIPE_EV_ADD_PRE, on_pipe, t);
	nng_pipe_notify(d->lp->rep, NNG_PIPE_EV_REM_POST, on_pipe, t);
	uv_async_init(d->lp->loop, &d->lp->ctl_async, on_async);
	uv_timer_init(d->lp->loop, &d->lp->ctl_reap);
	uv_timer_start(&d->lp->ctl_reap, on_reap, 1000, 1000);
	d->lp->ctl_handles_on = 1;
	for (t->n_ctxs = 0; t->n_ctxs < CTL_CTXS; t->n_ctxs++) {
		struct ctl_ctx *c = &t->ctxs[t->n_ctxs];
		c->ctl = t;
		if (nng_ctx_open(&c->ctx, d->lp->rep) != 0)
			break;
		if (nng_aio_alloc(&c->aio, on_ctx, c) != 0) {
			nng_ctx_close(c->ctx);
			break;
		}
	}
	if (t->n_ctxs == 0) {
		fsd_log(FSD_ERR, "control: no nng context");
		return -EIO;
	}
	for (unsigned i = 0; i < t->n_ctxs; i++)
		ctx_recv(&t->ctxs[i]);
	if ((r = listen_start(d, t)) < 0)
		return r;
	/* The listener's probe (probe_tick); none, no check, and a warning. */
	if (nng_req0_open(&t->probe) == 0) {
		t->probe_open = 1;
		nng_socket_set_ms(t->probe, NNG_OPT_RECONNMINT, 100);
		nng_socket_set_ms(t->probe, NNG_OPT_RECONNMAXT, 1000);
	} else {
		fsd_log(FSD_WARN,
			"control: no socket for the listener's probe: a stuck listener goes unnoticed");
	}
	fsd_log(FSD_INFO, "control: listening on %s (mode %04o)", url, d->cfg.socket_mode);
	return 0;
}

/*
 * Everything nng is closed on a helper thread, and the stop waits for it
 * at most CTL_STOP_NS: nng_close() waits for every pipe and aio of the
 * socket, and nng 1.5.2 was seen waiting there for good.  After a flood of
 * requests whose replies were never read (issue 33), the probe's own
 * nng_close() (the loop's dialer to its listener) did not return for 30-60
 * s and more, before the listener's close was even tried: the old 2 s
 * bound covered only that one.  A daemon that is stopping must stop
 * whatever its peers do (the clients see it go either way, and exit
 * closes every socket), so the probe, the contexts and the listener go in
 * one bounded step.
 */
#define CTL_STOP_NS 1000000000ull

static void *close_nng(void *arg)
{
	struct fsd_ctl *t = arg;
	if (t->probe_open)
		nng_close(t->probe); /* its connection is the loop's own */
	/* The contexts' operations end here (their callbacks see `closing`
	 * and arm nothing more), before nng_close waits for them. */
	for (unsigned i = 0; i < t->n_ctxs; i++)
		nng_aio_stop(t->ctxs[i].aio);
	nng_close(t->rep);
	return NULL;
}

void fsd_control_stop(struct fsd *d)
{
	struct fsd_ctl *t = d->lp->ctl;
	if (!d->lp->rep_open) { /* nng never had it (a start that failed early) */
		if (t) {
			pthread_mutex_destroy(&t->lock);
			free(t);
			d->lp->ctl = NULL;
		}
		return;
	}
	pthread_mutex_lock(&t->lock);
	t->closing = 1;
	pthread_mutex_unlock(&t->lock);
	if (d->lp->ctl_handles_on) {
		uv_close((uv_handle_t *)&d->lp->ctl_async, NULL);
		uv_timer_stop(&d->lp->ctl_reap);
		uv_close((uv_handle_t *)&d->lp->ctl_reap, NULL);
		d->lp->ctl_handles_on = 0;
	}
	/* No new engine finds a socket that will not answer. */
	fsd_sock_unlink(&d->cfg, FSD_SOCK_CONTROL);
	/* The socket by value: the helper may outlive main's frame (d->lp). */
	t->rep = d->lp->rep;
	pthread_t closer;
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_nsec += (long)(CTL_STOP_NS % 1000000000ull);
	dl.tv_sec += (time_t)(CTL_STOP_NS / 1000000000ull) + dl.tv_nsec / 1000000000L;
	dl.tv_nsec %= 1000000000L;
	int closed = 0;
	if (pthread_create(&closer, NULL, close_nng, t) != 0) {
		close_nng(t);
		closed = 1;
	} else if (pthread_timedjoin_np(closer, NULL, &dl) != 0) {
		fsd_log(FSD_WARN, "control: nng did not close within %llu ms; stopping without it",
			(unsigned long long)(CTL_STOP_NS / 1000000u));
		pthread_detach(closer);
	} else {
		closed = 1;
	}
	d->lp->rep_open = 0;
	d->lp->ctl = NULL;
	if (!closed)
		return; /* the contexts may still be nng's: leave them, and t with them */
	t->probe_open = t->probe_busy = 0;
	/* Every aio has completed (ECLOSED); requests the loop never took. */
	for (unsigned i = 0; i < t->n_ctxs; i++) {
		nng_aio_stop(t->ctxs[i].aio);
		if (t->ctxs[i].state == CTX_LOOP && t->ctxs[i].msg)
			nng_msg_free(t->ctxs[i].msg);
		t->ctxs[i].msg = NULL;
		nng_aio_free(t->ctxs[i].aio);
		t->ctxs[i].aio = NULL;
	}
	pthread_mutex_destroy(&t->lock);
	free(t);
}
