/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd.h: foresightd's internal types, shared by the daemon's files.
 * Split by job: this file (the options, the log, the loop thread's client
 * table, the daemon struct, the regions), fsd_hot.h (the hot thread, the
 * host of the hot engine daemon/engine/fse.h, and cards that go down),
 * fsd_backend.h (the copy backends).
 *
 * Threads and who owns what:
 *  - the loop thread (libuv): control socket, fd socket, pidfds, signals,
 *    timers.  Owns the client table (pid, uid, pidfd, region).
 *  - the hot thread (fsd_hot.c): runs the hot engine (fse_pass: every
 *    client ring, the residency core, copies, epochs, holds, liveness).
 *    The engine owns the residency core's calls, each client's ring
 *    consumer once handed over, the epoch buffers and the card-down record.
 *  - one copy thread per card (the host backend): moves arena bytes into
 *    slots and flips ready words.
 * The loop thread hands clients to the engine and asks it to drop them
 * through the engine's command queue (fsd_hot_add/drop); the hot thread
 * reports the clients the engine dropped back through a uv_async.
 */
#ifndef FSD_H
#define FSD_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include <nng/nng.h>

#include "fs_arena.h"
#include "fs_counters.h"
#include "fs_regions.h"
#include "fs_ring.h"
#include "fs_shm.h"
#include "fsd_backend.h"
#include "fsd_hot.h"
#include "fse.h"
#include "fsr.h"

#define FSD_VERSION "0.1.0"
#include "fsd_options.h" /* struct fsd_config and its functions */
_Static_assert(FSD_MAX_CLIENTS <= FSE_MAX_CLIENTS, "the hot engine has a row for every client");

/* ---- logging (sd-daemon priority prefixes, for journald) ------------- */
/* The level is the running settings' log_level (struct fsd's cfg: a
 * reload writes it on the loop thread while any thread logs); main points
 * the log at it once the settings are read, FSD_INFO until then. */
void fsd_log_level_at(const int *level);
void fsd_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define FSD_ERR 3
#define FSD_WARN 4
#define FSD_INFO 6
#define FSD_DEBUG 7

/* ---- clients ---------------------------------------------------------- */

enum fsd_client_phase {
	FSD_CL_FREE = 0,
	FSD_CL_PENDING, /* attach answered, waiting for the fd handshake */
	FSD_CL_ACTIVE,  /* handed to the hot thread */
	FSD_CL_CLOSING, /* hot thread asked to drop it */
};

struct fsd_client {
	/* loop thread */
	enum fsd_client_phase phase;
	uint32_t row;
	uint64_t serial; /* unique per attach, never reused */
	pid_t pid;
	uid_t uid;
	gid_t gid;
	uint8_t token[16];
	uint64_t attach_ns;
	uint64_t pending_deadline_ns;
	struct fsd_pidwatch *pidw; /* its pidfd's watch (fsd_clients.c), NULL: none */
	char name[48];
	struct fs_shm region; /* its client region (daemon maps read-write) */
	/* its rings' consumers as formatted: the engine takes a copy at add */
	struct fs_ring_cons ring;
	struct fs_ring_cons dev_ring; /* its GPU kernels' ring (fs_ring_dev.h) */
};

/* A client revoked for an overlong hold backs off before it may attach
 * again (fsd_clients.c): by identity, not by attachment.  Under slot
 * pressure a hold is overlong hold_pressure_ms after its epoch was
 * superseded (fsd_hot.c, hot_pressure); otherwise after hold_timeout_ms. */
struct fsd_backoff {
	uid_t uid;
	pid_t pid;
	char name[48];     /* the name it last attached under (the log) */
	uint32_t strikes;  /* revocations so far; 0: entry free */
	uint64_t until_ns; /* attaches refused until then */
	uint64_t last_ns;  /* the last revocation */
};

/* ---- the daemon ------------------------------------------------------- */
struct fsd {
	struct fsd_config cfg;
	struct fsd_settings settings; /* how cfg was read: a reload reads it again so */
	uv_loop_t *loop;
	uint64_t start_ns;
	uint64_t instance;

	/* regions */
	struct fs_shm daemon_shm;
	int daemon_ro_fd;
	struct fs_daemon_hdr *dh;
	uint64_t *counters_daemon, *counters_card, *counters_layer, *counters_client;
	struct fs_shm arena_shm;
	int arena_ro_fd;
	struct fs_arena_hdr *arena;
	struct fs_shm pool_shm[FS_MAX_CARDS];
	int pool_ro_fd[FS_MAX_CARDS];
	uint64_t slot_bytes;
	struct fsd_gguf *gguf;  /* --model: the parsed file and its plan */
	uint64_t *expert_bytes; /* --model: [layers * experts] blob sizes (residency core) */

	/* residency core (the engine's thread only) */
	struct fsr *core;
	/* the hot engine (daemon/engine/fse.h): epoch buffers, client rings,
	 * the card-down record; NULL until the arena is in (fsd_hot_init) */
	struct fse *eng;

	/* clients */
	struct fsd_client clients[FSD_MAX_CLIENTS];
	struct fsd_backoff backoff[FSD_MAX_CLIENTS]; /* loop thread */
	uint64_t next_serial;
	pthread_mutex_t drop_lock;              /* the dropped rows below */
	uint32_t dropped_rows[FSD_MAX_CLIENTS]; /* hot -> loop: rows finished */
	uint32_t dropped_reason[FSD_MAX_CLIENTS];
	uint32_t n_dropped;
	uv_async_t dropped_async;

	/* hot thread */
	pthread_t hot;
	int hot_stop;
	int hot_running;
	uint64_t hot_pass_ns; /* the start of the pass now running (fsd_stamps.h) */

	/* backend */
	const struct fsd_backend *backend;
	void *backend_priv;

	/* control plane */
	nng_socket rep;
	int rep_open;
	int fdsock;
	uv_poll_t fdsock_poll;
	uv_signal_t sig_term, sig_int, sig_hup;
	uv_timer_t timer;
	int stopping;
	int loading; /* the arena is being filled: its layers are served as they land (layer_ready) */
	char arena_pages[160]; /* the arena's memory and why (fsctl stats: model.arena_pages) */
	uint32_t *layer_ready; /* [layers] in the daemon region: FS_LAYER_READY once the layer is in */
};

/* fsd_region.c */
int fsd_regions_create(struct fsd *d);
void fsd_regions_destroy(struct fsd *d);
static inline uint64_t *fsd_epoch_entries(struct fsd *d, uint32_t buf)
{
	return fse_epoch_entries(d->dh, buf);
}
uint32_t *fsd_ready(struct fsd *d, uint32_t card);
uint64_t *fsd_issued_ns(struct fsd *d, uint32_t card);

/* fsd_arena_gguf.c: the arena from a GGUF model file (--model).  open:
 * parse and plan (sets the model's layers, experts, top-k, slot_bytes). */
int fsd_arena_gguf_open(struct fsd *d);
/* begin: the arena memfd, its layout and lock (or a kept one: 1, nothing
 * to load); fill_start: fill it on a thread, then done(d, 0 or -errno) on
 * the loop thread; cancel: stop a fill and wait for its thread. */
int fsd_arena_gguf_begin(struct fsd *d);
int fsd_arena_gguf_fill_start(struct fsd *d, void (*done)(struct fsd *d, int r));
void fsd_arena_gguf_cancel(struct fsd *d);
/* EXTEND_TIMEOUT_USEC sent with each load status (about one a second). */
#define FSD_LOAD_EXTEND_USEC 30000000ull
void fsd_arena_gguf_close(struct fsd *d);
/* --describe: the plan of `path` as JSON on stdout; 0, or 1 with the error
 * on stderr. */
int fsd_arena_gguf_describe(const char *path);

/* fsd_arena_keep.c: the arena across restarts through systemd's fd store.
 * take: reuse a kept arena (LISTEN_FDS, named "arena") that matches `want`:
 * 1 taken (d->arena, arena_shm, arena_ro_fd set), 0 none (build it), -errno.
 * store: hand the arena memfd to the fd store (FDSTORE=1; no-op outside
 * systemd) and set the arena_reused counter. */
struct fsd_arena_want {
	uint32_t source; /* enum fs_arena_source */
	uint32_t layers, experts, experts_used;
	uint64_t arena_bytes, max_expert_bytes, off_index, off_data;
	uint64_t seed; /* synthetic: the seed; GGUF: fsd_arena_file_identity() */
	const char *model;
	int must_lock; /* an mlock failure is fatal */
};
int fsd_arena_keep_take(struct fsd *d, const struct fsd_arena_want *want);
void fsd_arena_keep_store(struct fsd *d);
uint64_t fsd_arena_file_identity(const char *path);

/* fsd_arena_synth.c */
int fsd_arena_synth_create(struct fsd *d);
void fsd_arena_synth_fill(uint8_t *dst, uint64_t bytes, uint64_t seed, uint32_t layer, uint32_t expert);

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

/* fsd_notify.c: sd_notify(3) without libsystemd.  Sends `state` ("READY=1",
 * "STATUS=...", "STOPPING=1", "WATCHDOG=1", newline-separated) to
 * $NOTIFY_SOCKET: 1 sent, 0 no $NOTIFY_SOCKET, -errno on failure. */
int fsd_notify(const char *state);
/* The same with fds attached (SCM_RIGHTS), at most FSD_NOTIFY_MAX_FDS:
 * "FDSTORE=1\nFDNAME=arena" puts them in the service's fd store. */
#define FSD_NOTIFY_MAX_FDS 8u
int fsd_notify_fds(const char *state, const int *fds, unsigned nfds);
/* $WATCHDOG_USEC when it is meant for this process ($WATCHDOG_PID), else 0. */
uint64_t fsd_notify_watchdog_usec(void);

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

static inline void fsd_count(uint64_t *ctr, uint64_t n)
{
	__atomic_fetch_add(ctr, n, __ATOMIC_RELAXED);
}

#endif /* FSD_H */
