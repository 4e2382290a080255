/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd.h: foresightd's internal types, shared by the daemon's files.
 *
 * Threads and who owns what:
 *  - the loop thread (libuv): control socket, fd socket, pidfds, signals,
 *    timers.  Owns the client table's control fields (pid, uid, pidfd).
 *  - the hot thread (fsd_hot.c): reads every client ring, drives the
 *    residency core, issues copies, publishes epochs, reads holds, checks
 *    liveness.  Owns the residency core and each client's ring consumer.
 *  - one copy thread per card (the backend): moves arena bytes into slots
 *    and flips ready words.
 * The loop thread hands clients to the hot thread and asks it to drop them
 * through a small command queue (fsd->cmd_*); the hot thread reports the
 * clients it dropped back through a uv_async.
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
#include "fsr.h"

#define FSD_VERSION "0.1.0"
#include "fsd_options.h" /* struct fsd_config and its functions */

/* ---- logging (sd-daemon priority prefixes, for journald) ------------- */
extern int fsd_log_level;
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

	/* hot thread */
	int hot_active;
	struct fs_client_hdr *hdr;
	struct fs_ring_cons ring;
	struct fs_ring_cons dev_ring;     /* its GPU kernels' ring (fs_ring_dev.h) */
	uint64_t hold_seen[FS_MAX_HOLDS]; /* last values read, bad ones as 0 */
	uint64_t hold_bad[FS_MAX_HOLDS];  /* the bad value a word last had (counted once) */
	uint64_t first_epoch;             /* current when it was added: it can hold no older */
	uint32_t newest_window;
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

/* hot-thread commands from the loop thread */
enum fsd_cmd_type { FSD_CMD_ADD = 1, FSD_CMD_DROP = 2, FSD_CMD_CALL = 3 };
struct fsd_call; /* fsd_hot_call: a function the hot thread runs for the loop */
struct fsd_cmd {
	enum fsd_cmd_type type;
	uint32_t row;
	uint32_t reason; /* enum fs_detach_reason */
	struct fsd_call *call;
};
#define FSD_CMDQ 256u

/* copy completions from the backend to the hot thread */
struct fsd_done {
	uint32_t card, slot, gen;
	uint64_t busy_ns;
	uint64_t bytes;
};

/* ---- the backend ------------------------------------------------------ */
struct fsd;
struct fsd_backend {
	const char *name;
	enum fs_backend_kind kind; /* its row of FS_BACKENDS (proto/fs_regions.h) */
	/* Before the regions exist: discover cards, size pools (may be NULL). */
	int (*probe)(struct fsd *d);
	int (*start)(struct fsd *d);
	/* Queue one copy.  The backend stores ready word 0 before the copy and
	 * gen after it, then reports it with fsd_copy_landed(). */
	void (*submit)(struct fsd *d, const struct fsr_copy *cp);
	/* Hot thread: completions noticed since the last call (may be NULL:
	 * the backend then reports through fsd_copy_landed). */
	unsigned (*poll)(struct fsd *d, struct fsd_done *out, unsigned max);
	/* Hot thread: `card` went down (fsd_cards.c): drop its queued copies,
	 * forget those in flight; none is submitted to it again (may be NULL). */
	void (*card_down)(struct fsd *d, uint32_t card);
	void (*stop)(struct fsd *d);
};
/* fsd_backends.c: the backend named `name`, or NULL: *known (may be NULL)
 * says whether the name is a backend at all (1: it is, but this build does
 * not have it).  fsd_backends_list: the names, comma-separated (built: only
 * those this build has). */
const struct fsd_backend *fsd_backend_find(const char *name, int *known);
void fsd_backends_list(char *buf, size_t len, int built);
extern const struct fsd_backend fsd_backend_host;
#ifdef FSD_HAVE_CUDA
extern const struct fsd_backend fsd_backend_cuda;
const char *fsd_cuda_card_pci(struct fsd *d, uint32_t card);
int fsd_cuda_card_ipc(struct fsd *d, uint32_t card, char *hex, size_t len);
#endif
/* Record when a copy into (card, slot) was issued (the issued_ns array). */
void fsd_issued(struct fsd *d, uint32_t card, uint32_t slot, uint64_t now);
void fsd_copy_landed(struct fsd *d, const struct fsd_done *done);

/* ---- the daemon ------------------------------------------------------- */
struct fsd {
	struct fsd_config cfg;
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

	/* epoch buffers (daemon's own record of what each holds) */
	uint64_t buf_epoch[FS_MAX_EPOCH_BUFS];
	uint64_t buf_superseded_ns[FS_MAX_EPOCH_BUFS]; /* when its epoch stopped being current */
	uint32_t cur_buf;

	/* residency core (hot thread only) */
	struct fsr *core;

	/* cards that went down (fsd_cards.c) */
	uint32_t cards_down;                    /* bit i: card i is down; set under cmd_lock, read relaxed */
	uint32_t cards_applied;                 /* hot thread: those the core has dropped */
	uint32_t cards_unpub;                   /* hot thread: dropped, not yet in the daemon header */
	uint64_t card_down_epoch[FS_MAX_CARDS]; /* under cmd_lock: first epoch without it, 0 until then */
	char card_reason[FS_MAX_CARDS][128];    /* under cmd_lock */

	/* clients */
	struct fsd_client clients[FSD_MAX_CLIENTS];
	struct fsd_backoff backoff[FSD_MAX_CLIENTS]; /* loop thread */
	uint64_t next_serial;
	pthread_mutex_t cmd_lock;
	struct fsd_cmd cmdq[FSD_CMDQ];
	uint32_t cmd_head, cmd_tail;
	uint32_t dropped_rows[FSD_MAX_CLIENTS]; /* hot -> loop: rows finished */
	uint32_t dropped_reason[FSD_MAX_CLIENTS];
	uint32_t n_dropped;
	uv_async_t dropped_async;

	/* completions */
	pthread_mutex_t done_lock;
	struct fsd_done *doneq;
	uint32_t done_n, done_cap;

	/* hot thread */
	pthread_t hot;
	uint32_t hot_wake; /* futex word: bumped to wake the hot thread */
	int hot_stop;
	int hot_running;

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
	uint32_t *layer_ready; /* [layers] in the daemon region: FS_LAYER_READY once the layer is in */
};

/* fsd_region.c */
int fsd_regions_create(struct fsd *d);
void fsd_regions_destroy(struct fsd *d);
uint64_t *fsd_epoch_entries(struct fsd *d, uint32_t buf);
struct fs_epoch_buf_hdr *fsd_epoch_buf(struct fsd *d, uint32_t buf);
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

/* fsd_hot.c */
int fsd_hot_start(struct fsd *d);
/* One pass of the hot loop at `now`, without sleeping (the hot thread runs
 * these; fuzz/hot_fuzz.c drives them against a hostile client region).
 * fsd_hot_first: before the first pass (publishes epoch 1).  Returns
 * nonzero when the pass did work. */
struct fsd_hot_state {
	uint64_t last_publish, last_check, last_hb;
	int deferred;
	uint64_t deferred_since; /* when publication last found every buffer held */
};
void fsd_hot_first(struct fsd *d, struct fsd_hot_state *s);
int fsd_hot_pass(struct fsd *d, struct fsd_hot_state *s, uint64_t now);
void fsd_hot_stop(struct fsd *d);
void fsd_hot_wake(struct fsd *d);
int fsd_hot_cmd(struct fsd *d, enum fsd_cmd_type type, uint32_t row, uint32_t reason);
/* Run fn(d, arg) on the hot thread (the residency core's only caller) and
 * wait for it, at most 2 s.  For rare admin verbs: the loop blocks meanwhile.
 * Returns fn's result, or -ETIMEDOUT / -EAGAIN. */
int fsd_hot_call(struct fsd *d, int (*fn)(struct fsd *d, void *arg), void *arg);

/* fsd_cards.c: cards that go down (lost, reset, or taken down by an
 * admin) and stay down until a restart.  fsd_card_down, from any thread
 * (a backend that finds the card broken, the control verb): record it and
 * the reason, log it, wake the hot thread; 0, -EINVAL (no such card) or
 * -EALREADY.  The hot thread applies it at its next pass (fsd_cards_apply:
 * the core drops the card, the backend its copies) and, once the next
 * epoch is out, tells engines (fsd_cards_published: peer_reach, then the
 * header's cards_down).  fsd_card_down_sync (loop thread): the same through
 * fsd_hot_call, returning once the core dropped the card (or -ETIMEDOUT).
 * fsd_card_state: 1 (down, its reason and first epoch without it) or 0. */
int fsd_card_down(struct fsd *d, uint32_t card, const char *reason);
int fsd_card_down_sync(struct fsd *d, uint32_t card, const char *reason);
unsigned fsd_cards_apply(struct fsd *d);
void fsd_cards_published(struct fsd *d, uint64_t epoch);
int fsd_card_state(struct fsd *d, uint32_t card, char *reason, size_t len, uint64_t *epoch);

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
