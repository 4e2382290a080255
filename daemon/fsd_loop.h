/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_loop.h: foresightd's loop thread (libuv), the part of the daemon
 * split off fsd.h because it alone needs libuv and nng: its handles (the
 * loop, signals, the timer, the control socket, the fd socket's poll, the
 * hot thread's notice async), the clients' attach and reap, the fd and
 * control sockets, metrics and the stats reply.  The hot thread's files
 * (fsd_hot.c, fsd_cards.c, the engine) and the backends include fsd.h and
 * fsd_hot.h only: the hot thread talks to the loop through struct fsd's
 * dropped_notice, which main.c points at a uv_async.
 */
#ifndef FSD_LOOP_H
#define FSD_LOOP_H

#include <uv.h>

#include <nng/nng.h>

#include "fsd.h"

/* A connection to the fd socket (fsd_fdsock.c), waiting for its handshake. */
#define FSD_FDSOCK_CONNS (FSD_MAX_CLIENTS + 16u)
struct fsd_fdconn {
	uv_poll_t poll;
	int fd;
	int used; /* 0 free, 1 open, 2 closing */
	pid_t pid;
	uint64_t since;
	struct fsd *d;
};

/*
 * A client's pidfd watch (fsd_clients.c).  It lives outside the client's
 * row: a row is free for the next attach the moment it is released, while
 * libuv closes the old watch (uv_close finishes on a later loop turn).
 * Twice the rows: a watch being closed for each row in use at most.  At
 * exit close_walk in main.c closes those still open.
 */
struct fsd_pidwatch {
	uv_poll_t poll;
	int fd;
	int state; /* 0 free, 1 watching, 2 closing */
	struct fsd_client *c;
};

struct fsd_ctl; /* fsd_control_io.c: the transport's state shared with nng's threads */

/* Owned by main.c (its stack), reached as d->lp; the loop's data is d. */
struct fsd_loop {
	uv_loop_t *loop;
	uv_async_t dropped_async; /* the hot thread's dropped_notice: fsd_clients_reap */
	uv_signal_t sig_term, sig_int, sig_hup;
	uv_timer_t timer;
	uv_poll_t fdsock_poll;                       /* fsd_fdsock.c: the listening socket, */
	struct fsd_fdconn fdconns[FSD_FDSOCK_CONNS]; /* its connections, */
	uv_timer_t fdsock_idle;                      /* the timer that closes idle ones */
	int fdsock_idle_on;
	nng_socket rep; /* fsd_control_io.c: the control socket, */
	int rep_open;
	struct fsd_ctl *ctl;  /* its contexts and connections (on the heap: fsd_control_io.c says why), */
	uv_async_t ctl_async; /* the nng threads' requests, for the loop, */
	uv_timer_t ctl_reap;  /* the timer that closes idle connections */
	int ctl_handles_on;
	struct fsd_pidwatch pidwatch[2 * FSD_MAX_CLIENTS]; /* fsd_clients.c */
};

/* fsd_clients.c */
int fsd_client_attach(struct fsd *d, pid_t pid, uid_t uid, gid_t gid, const char *name, uint32_t ring_entries,
		      struct fsd_client **out, char *err, size_t errlen);
int fsd_client_activate(struct fsd *d, struct fsd_client *c);
void fsd_client_detach(struct fsd *d, struct fsd_client *c, uint32_t reason);
void fsd_clients_reap(struct fsd *d); /* loop thread: finish rows the hot thread dropped */
void fsd_clients_expire_pending(struct fsd *d, uint64_t now);
/* Fair shares of the client table (fsd_clients.c says why). */
#define FSD_ROWS_PER_PID 8u
#define FSD_PENDING_PER_PID 2u
#define FSD_PENDING_PER_UID 4u
uint32_t fsd_rows_reserved(const struct fsd *d); /* the last rows, for root and foresightd's user */
uint32_t fsd_rows_per_uid(const struct fsd *d);  /* a non-admin user's share */
/* Does pid have an attach waiting for its fd handshake? (fsd_fdsock.c) */
unsigned fsd_clients_pending_of(const struct fsd *d, pid_t pid);
struct fsd_client *fsd_client_by_row(struct fsd *d, uint32_t row);

/* fsd_fdsock.c */
int fsd_fdsock_start(struct fsd *d);
void fsd_fdsock_stop(struct fsd *d);

/* fsd_control_io.c */
int fsd_control_start(struct fsd *d);
void fsd_control_stop(struct fsd *d);
void fsd_request_stop(struct fsd *d, const char *why);

/* fsd_metrics.c: GET /metrics (Prometheus text 0.0.4) on nng's HTTP server.
 * fsd_metrics_url checks a metrics_listen value ("IP:PORT", "[IPv6]:PORT";
 * loopback only unless allow_remote) and makes the server URL: 0, or -1 with
 * a message in err.  fsd_metrics_start (loop thread) serves at `listen`
 * ("" = off), replacing the running endpoint only once the new one is up:
 * 0, or a negative errno with the old one kept.  fsd_metrics_stop: before
 * the daemon region goes away; no scrape reads it afterwards. */
int fsd_metrics_url(const char *listen, int allow_remote, char *url, size_t len, char *err, size_t errlen);
int fsd_metrics_start(struct fsd *d, const char *listen, int allow_remote);
void fsd_metrics_stop(struct fsd *d);
/* Loop thread, as a client row comes into use (on) or leaves it: the labels
 * (name, pid, uid) the metrics give its series. */
void fsd_metrics_client(struct fsd *d, uint32_t row, int on);

/* fsd_stats.c: the stats reply, built from the counter X-macros */
struct cJSON;
struct cJSON *fsd_stats_json(struct fsd *d);
struct cJSON *fsd_clients_json(struct fsd *d);

#endif /* FSD_LOOP_H */
