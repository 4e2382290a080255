/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd.h: foresightd's internal types, shared by the daemon's files.
 * Split by job: this file (the options, the log, the client table, the
 * daemon struct, the regions, the arena), fsd_loop.h (the loop thread: its
 * libuv and nng handles, the control and fd sockets, client attach and
 * reap, metrics, stats, sd_notify), fsd_hot.h (the hot thread, the host of
 * the hot engine daemon/engine/fse.h, and cards that go down),
 * fsd_backend.h (the copy backends).  Only fsd_loop.h brings in libuv and
 * nng: the hot thread's and the backends' files never see them.
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
 * reports the clients the engine dropped back through the loop's notice
 * hook (struct fsd's dropped_notice: main.c's uv_async).
 */
#ifndef FSD_H
#define FSD_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "fs_regions.h"
#include "fs_ring.h"
#include "fs_shm.h"

#define FSD_VERSION "0.1.0"
#include "fsd_options.h" /* struct fsd_config and its functions */

/* The layers' own headers, included by the files that use them (fsd.h
 * carries only the daemon's struct): fsd_backend.h (the backends),
 * fsd_hot.h (the hot thread, cards down), daemon/engine/fse.h (the hot
 * engine), daemon/residency/fsr.h (the core), fsd_loop.h (the loop). */
struct fs_arena_hdr;
struct fsd_backend;
struct fsd_gguf;
struct fse;
struct fsr;

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
	struct fsd_loop *lp;          /* the loop thread's handles (fsd_loop.h; main.c's) */
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
	/* The hot thread's notice to the loop: rows were dropped (main.c: a
	 * uv_async that runs fsd_clients_reap).  NULL: nobody hosts a loop
	 * (fuzz/hot_fuzz.c). */
	void (*dropped_notice)(struct fsd *d);

	/* hot thread */
	pthread_t hot;
	int hot_stop;
	int hot_running;

	/* backend */
	const struct fsd_backend *backend;
	void *backend_priv;

	/* control plane (its handles: lp) */
	int fdsock;
	int stopping;
	int loading; /* the arena is being filled: its layers are served as they land (layer_ready) */
	char arena_pages[160]; /* the arena's memory and why (fsctl stats: model.arena_pages) */
	uint32_t *layer_ready; /* [layers] in the daemon region: FS_LAYER_READY once the layer is in */
};

/* fsd_region.c */
int fsd_regions_create(struct fsd *d);
void fsd_regions_destroy(struct fsd *d);
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

static inline void fsd_count(uint64_t *ctr, uint64_t n)
{
	__atomic_fetch_add(ctr, n, __ATOMIC_RELAXED);
}

#endif /* FSD_H */
