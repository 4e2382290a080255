/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_fdsock.c: the fd socket.  Hands a client its memfds (SCM_RIGHTS) once
 * the control plane has admitted it; see proto/fs_fdproto.h.  Everything is
 * non-blocking on the loop thread.
 *
 * Who may hold a connection (issue 22, attack 5: a connect flood used to
 * push every honest handshake out, 248 of 248 attaches failed, because a
 * full table dropped its oldest connection, the honest one): only a
 * process with an attach waiting for its handshake, and no more
 * connections than it has such attaches (SO_PEERCRED at accept).  Anyone
 * else is answered EACCES and closed at once (counted: refused).  Those
 * attaches are capped per process and user (fsd_clients.c), so the table
 * holds every connection that may exist; a connection that has not sent
 * its request FDSOCK_IDLE_NS after it came is closed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fs_counters.h"
#include "fs_fdpass.h"
#include "fs_fdproto.h"
#include "fs_time.h"
#include "fsd_loop.h"
#include "fsd_sockpath.h"

#define FDSOCK_IDLE_NS 2000000000ull

static void conn_closed(uv_handle_t *h)
{
	struct fsd_fdconn *fc = h->data;
	close(fc->fd);
	fc->fd = -1;
	fc->used = 0;
}

static void conn_close(struct fsd_fdconn *fc)
{
	if (fc->used == 1) {
		fc->used = 2;
		uv_close((uv_handle_t *)&fc->poll, conn_closed);
	}
}

static void reply_status(int fd, int status)
{
	struct fs_fd_reply rep = {.magic = FS_FD_MAGIC, .status = status, .nfds = 0};
	(void)!send(fd, &rep, sizeof(rep), MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void handle_request(struct fsd *d, int fd)
{
	struct fs_fd_request req;
	ssize_t n = recv(fd, &req, sizeof(req), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return; /* spurious wake-up; the caller closes only on a full request */
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (n != (ssize_t)sizeof(req) || req.magic != FS_FD_MAGIC || req.version != FS_PROTO_VERSION ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		fsd_count(&d->counters_daemon[FS_C_bad_requests], 1);
		reply_status(fd, -EPROTO);
		return;
	}
	struct fsd_client *c = fsd_client_by_row(d, req.client_id);
	if (!c || c->phase != FSD_CL_PENDING || c->pid != cred.pid ||
	    memcmp(c->token, req.token, sizeof(req.token)) != 0) {
		fsd_log(FSD_WARN,
			"fd socket: refused pid %d uid %d for client %u (no such pending attach, wrong pid "
			"or token)",
			(int)cred.pid, (int)cred.uid, req.client_id);
		fsd_count(&d->counters_daemon[FS_C_refused], 1);
		reply_status(fd, -EACCES);
		return;
	}
	int fds[3 + FS_MAX_CARDS];
	unsigned nf = 0;
	fds[nf++] = d->daemon_ro_fd;
	fds[nf++] = c->region.fd;
	fds[nf++] = d->arena_ro_fd;
	for (uint32_t i = 0; i < d->cfg.cards; i++)
		if (d->pool_ro_fd[i] >= 0) /* host cards; CUDA pools go by IPC handle */
			fds[nf++] = d->pool_ro_fd[i];
	struct fs_fd_reply rep = {.magic = FS_FD_MAGIC, .status = 0, .nfds = nf};
	int r = fs_fd_send(fd, &rep, sizeof(rep), fds, nf);
	if (r < 0) {
		fsd_log(FSD_WARN, "fd socket: sending fds to pid %d failed: %s", (int)cred.pid, strerror(-r));
		fsd_client_detach(d, c, FS_DETACH_REQUESTED);
		return;
	}
	fsd_client_activate(d, c);
}

static void on_conn(uv_poll_t *h, int status, int events)
{
	(void)events;
	struct fsd_fdconn *fc = h->data;
	if (status == 0)
		handle_request(fc->d, fc->fd);
	conn_close(fc);
}

static void refuse(struct fsd *d, int fd, const struct ucred *cr, const char *why)
{
	static uint64_t logged_ns;
	uint64_t now = fs_now_ns();
	fsd_count(&d->counters_daemon[FS_C_refused], 1);
	if (now - logged_ns > 1000000000ull) { /* a flood: one line a second */
		logged_ns = now;
		fsd_log(FSD_WARN, "fd socket: refused a connection of pid %d uid %d: %s",
			cr ? (int)cr->pid : -1, cr ? (int)cr->uid : -1, why);
	}
	reply_status(fd, -EACCES);
	close(fd);
}

static void on_listen(uv_poll_t *h, int status, int events)
{
	(void)events;
	struct fsd *d = h->loop->data;
	if (status < 0)
		return;
	for (;;) {
		int fd = accept4(d->fdsock, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct ucred cr;
		socklen_t len = sizeof(cr);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
			refuse(d, fd, NULL, "no peer credentials");
			continue;
		}
		unsigned want = fsd_clients_pending_of(d, cr.pid), have = 0;
		struct fsd_fdconn *fc = NULL;
		for (unsigned i = 0; i < FSD_FDSOCK_CONNS; i++) {
			if (!d->lp->fdconns[i].used && !fc)
				fc = &d->lp->fdconns[i];
			have += d->lp->fdconns[i].used == 1 && d->lp->fdconns[i].pid == cr.pid;
		}
		if (want == 0) {
			refuse(d, fd, &cr, "no attach of that process waits for its fd handshake");
			continue;
		}
		if (have >= want) {
			refuse(d, fd, &cr, "as many connections as its waiting attaches already");
			continue;
		}
		if (!fc) {
			refuse(d, fd, &cr, "every connection slot in use");
			continue;
		}
		fc->fd = fd;
		fc->used = 1;
		fc->pid = cr.pid;
		fc->since = fs_now_ns();
		fc->d = d;
		uv_poll_init(d->lp->loop, &fc->poll, fd);
		fc->poll.data = fc;
		uv_poll_start(&fc->poll, UV_READABLE, on_conn);
	}
}

/* A connection that did not send its request in time goes. */
static void on_idle_timer(uv_timer_t *t)
{
	struct fsd *d = t->loop->data;
	uint64_t now = fs_now_ns();
	for (unsigned i = 0; i < FSD_FDSOCK_CONNS; i++)
		if (d->lp->fdconns[i].used == 1 && now - d->lp->fdconns[i].since > FDSOCK_IDLE_NS) {
			fsd_count(&d->counters_daemon[FS_C_refused], 1);
			conn_close(&d->lp->fdconns[i]);
		}
}

int fsd_fdsock_start(struct fsd *d)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(d->cfg.fd_socket_path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, d->cfg.fd_socket_path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* fsd_sock_claim (main.c) holds the lock and cleared a stale socket. */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	fsd_sock_bound(&d->cfg, FSD_SOCK_FD);
	if (chmod(d->cfg.fd_socket_path, d->cfg.socket_mode) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	d->fdsock = fd;
	for (unsigned i = 0; i < FSD_FDSOCK_CONNS; i++)
		d->lp->fdconns[i].fd = -1;
	uv_timer_init(d->lp->loop, &d->lp->fdsock_idle);
	uv_timer_start(&d->lp->fdsock_idle, on_idle_timer, 250, 250);
	d->lp->fdsock_idle_on = 1;
	uv_poll_init(d->lp->loop, &d->lp->fdsock_poll, fd);
	uv_poll_start(&d->lp->fdsock_poll, UV_READABLE, on_listen);
	return 0;
}

void fsd_fdsock_stop(struct fsd *d)
{
	if (d->fdsock < 0)
		return;
	uv_poll_stop(&d->lp->fdsock_poll);
	uv_close((uv_handle_t *)&d->lp->fdsock_poll, NULL);
	if (d->lp->fdsock_idle_on) {
		uv_timer_stop(&d->lp->fdsock_idle);
		uv_close((uv_handle_t *)&d->lp->fdsock_idle, NULL);
		d->lp->fdsock_idle_on = 0;
	}
	for (unsigned i = 0; i < FSD_FDSOCK_CONNS; i++)
		conn_close(&d->lp->fdconns[i]);
	close(d->fdsock);
	fsd_sock_unlink(&d->cfg, FSD_SOCK_FD);
	d->fdsock = -1;
}
