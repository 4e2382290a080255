/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fse.h: the hot engine (fs_engine).  The hot pass of foresightd as a
 * library with no libuv, no nng and no clock of its own (the host passes
 * `now`, or a clock function): one pass
 *   1. takes clients in and out and runs the host's calls (a command queue),
 *   2. applies cards that went down (the one record of card-down state),
 *   3. drains every client ring (host and device), checking each record
 *      against the model (proto/fs_rec.h),
 *   4. feeds copy completions to the residency core,
 *   5. hands new copies to the backend, each with its final length and
 *      source offset (the one place a copy's size is decided),
 *   6. publishes an epoch when the table changed (at most one per
 *      publish_us), then, after a full fence, reads every hold and
 *      reclaims slots, and hands the copies that waited for them to the
 *      backend at once (5 again),
 *   7. checks liveness, hold ages, each user's budget of pinned slots
 *      (fse_holds.c) and the epoch buffers' reserve.
 * fse_sleep() parks the calling thread on every ring and the engine's wake
 * word at once.  The host (foresightd's hot thread, daemon/fsd_hot.c; the
 * simulator fs-replay, tools/replay/replay_run.c) owns the thread, the
 * clock, the regions' memory and the backend; the engine tells it what
 * happened through one notice callback.
 *
 * Threads: every function is for the thread that runs the passes, except
 * fse_cmd, fse_call, fse_copy_landed, fse_card_down, fse_card_state,
 * fse_wake (any thread).
 */
#ifndef FSE_H
#define FSE_H

#include <stddef.h>
#include <stdint.h>

#include "fs_arena.h"
#include "fs_counters.h"
#include "fs_regions.h"
#include "fs_ring.h"
#include "fsr.h"

#define FSE_MAX_CLIENTS 64u
#define FSE_CMDQ 256u

/* A copy as the engine hands it to a backend: `bytes` bytes from arena
 * offset `src` into `slot` of `card`, then ready word `gen`.  `bytes` is
 * the core's size (the blob's) bounded by the slot: a backend copies
 * exactly this many.  `core` is the core's record of it (window, deadline,
 * tier), for a backend that models what a copy is for (fs-replay's). */
struct fse_copy {
	uint32_t card, slot, gen;
	uint64_t src, bytes;
	struct fsr_copy core;
};

/* A copy that landed.  `at`: when its bytes were in, if the backend knows
 * (a virtual clock); 0: when the engine takes it in. */
struct fse_done {
	uint32_t card, slot, gen;
	uint64_t busy_ns; /* the link's busy time for it (the card's bus_busy_ns) */
	uint64_t bytes;
	uint64_t at;
};

/* What a backend may tell the engine, from any thread: the engine hands
 * these to its backend once (bind), before any copy.  landed: a copy's
 * bytes and ready word are in (a backend without poll reports each copy
 * so); card_down: the backend found the card broken (as fse_card_down,
 * with its reason); cards_down: the cards down now, reported or applied
 * (bit i: card i), so a backend stops work for them at once.  A backend
 * calls only these: it never names its host or the engine's thread. */
struct fse_backend_cb {
	void *ctx;
	void (*landed)(void *ctx, const struct fse_done *done);
	int (*card_down)(void *ctx, uint32_t card, const char *reason);
	uint32_t (*cards_down)(void *ctx);
};

/* The one backend interface (foresightd's backends, daemon/fsd_backend.h,
 * are these ops plus their start and stop; fs-replay's virtual bus is one
 * too).  ctx: the backend's own state.  bind (may be NULL): the engine's
 * callbacks, once, at fse_create.  submit: queue one copy (the backend
 * stores ready word 0 before the bytes and gen after them) and report it
 * landed later, through poll or the landed callback.  poll (may be NULL):
 * completions noticed since the last call.  card_down (may be NULL): the
 * card went down; drop its queued copies and forget those in flight:
 * nothing is submitted to it again. */
struct fse_backend {
	void *ctx;
	void (*bind)(void *ctx, const struct fse_backend_cb *cb);
	void (*submit)(void *ctx, const struct fse_copy *cp);
	unsigned (*poll)(void *ctx, struct fse_done *out, unsigned max);
	void (*card_down)(void *ctx, uint32_t card);
};

/* What the engine tells its host. */
enum fse_notice_kind {
	FSE_NOTE_LOG = 1,   /* prio (3 err .. 7 debug), text */
	FSE_NOTE_DROPPED,   /* client `row` was dropped for `reason` (enum fs_detach_reason) */
	FSE_NOTE_CARD_DOWN, /* card went down (reported; any thread): text is the reason */
	FSE_NOTE_CARD_GONE, /* card: `epoch` is the first without it; engines see it down */
};
struct fse_notice {
	enum fse_notice_kind kind;
	int prio;
	uint32_t row, reason, card;
	uint64_t epoch;
	const char *text;
};

/* Settings a host may change while the engine runs (a reload): read with
 * relaxed loads on each pass through these words, which the host owns. */
struct fse_live {
	const uint32_t *publish_us;       /* at most one publish per this interval */
	const uint32_t *liveness_ms;      /* a client heartbeat older than this: dropped */
	const uint32_t *hold_timeout_ms;  /* one epoch held longer than this: revoked */
	const uint32_t *hold_pressure_ms; /* ... or this, when it pins an eighth of a pool (0: off) */
	const uint32_t *dev_poll_us;      /* fse_sleep: longest sleep while a device ring is armed */
	const uint32_t *pin_share_pct;    /* a user's holds may keep this % of its share of a card's
					     slots from reuse; past it, revoked at once (0: off) ... */
	const uint32_t *pin_grace_ms;     /* ... once the hold has pinned this long (fse_holds.c) */
};

struct fse_config {
	uint32_t cards, layers, experts;
	uint32_t max_clients; /* rows, <= FSE_MAX_CLIENTS */
	uint32_t epoch_bufs;
	uint32_t heartbeat_ms;                    /* the daemon header's heartbeat period */
	uint64_t slot_bytes;                      /* bounds every copy (memory's sake) */
	struct fs_daemon_hdr *dh;                 /* the daemon region (laid out: fse_region_*) */
	const struct fs_arena_entry *arena_index; /* copies' source offsets; NULL: 0 */
	struct fsr *core;                         /* the residency core (the engine is its only caller) */
	struct fsr_counters ctr;                  /* the region's counters (daemon, card, layer, client) */
	struct fse_backend backend;
	void (*notice)(void *host, const struct fse_notice *n);
	void *host;
	uint64_t (*clock)(void *host); /* NULL: CLOCK_MONOTONIC (fs_now_ns) */
	struct fse_live live;
};

struct fse;
struct fse *fse_create(const struct fse_config *cfg); /* NULL: errno */
void fse_destroy(struct fse *e);

/* One client row handed to the engine: its region's header and the two
 * ring consumers as formatted (fs_ring_format).  pid and name are for the
 * log only; uid is its user, whose budget of pinned slots it shares. */
struct fse_client_in {
	struct fs_client_hdr *hdr;
	struct fs_ring_cons ring, dev_ring;
	int pid;
	uint32_t uid; /* whose budget its holds count against (fse_holds.c) */
	char name[48];
};

/* Commands (any thread): add a client (row), drop it (row, reason).  The
 * engine applies them at its next pass.  0 or -EAGAIN (queue full). */
int fse_cmd_add(struct fse *e, uint32_t row, const struct fse_client_in *in);
int fse_cmd_drop(struct fse *e, uint32_t row, uint32_t reason);
/* Run fn(arg) on the engine's thread at its next pass and wait for it, at
 * most `timeout_ms`.  Returns fn's result, -ETIMEDOUT or -EAGAIN. */
int fse_call(struct fse *e, int (*fn)(void *arg), void *arg, unsigned timeout_ms);
/* A copy landed (any thread; or the backend's poll). */
void fse_copy_landed(struct fse *e, const struct fse_done *done);
/* Card `card` goes down (any thread: a backend that finds it broken, an
 * admin): recorded with its reason and applied at the next pass (the core
 * drops the card, the backend its copies); once the next epoch is out the
 * daemon header says so.  0, -EINVAL (no such card) or -EALREADY.  It
 * stays down for the engine's life. */
int fse_card_down(struct fse *e, uint32_t card, const char *reason);
/* Down cards now (bit i: card i), reported or applied.  fse_cards_applied
 * (engine's thread): those the core has dropped; *unpub (may be NULL):
 * of those, the ones the daemon header does not show yet. */
uint32_t fse_cards_down(const struct fse *e);
uint32_t fse_cards_applied(const struct fse *e, uint32_t *unpub);
/* 1 (down: its reason and the first epoch without it, 0 until published)
 * or 0. */
int fse_card_state(struct fse *e, uint32_t card, char *reason, size_t len, uint64_t *epoch);
/* Engine's thread: apply the cards reported down now (also done by each
 * pass).  Returns how many. */
unsigned fse_cards_apply(struct fse *e);
void fse_wake(struct fse *e);

/* The passes.  fse_first: before the first pass (publishes epoch 1, empty).
 * fse_pass: one pass at `now`; nonzero when it did work.  fse_sleep: with
 * nothing to do, park on every ring and the wake word for at most
 * timeout_ns (0: return at once).  fse_stop_clients: every client learns
 * it is on its own (reason) before the host goes. */
void fse_first(struct fse *e);
int fse_pass(struct fse *e, uint64_t now);
void fse_sleep(struct fse *e, uint64_t timeout_ns, const int *stop);
void fse_stop_clients(struct fse *e, uint32_t reason);

/* For the host's idle policy: copies in flight (the cards' loading gauge),
 * and how long until a table waiting to be published may go out
 * (UINT64_MAX: none waits). */
uint64_t fse_inflight(const struct fse *e);
uint64_t fse_publish_in(const struct fse *e, uint64_t now);
int fse_client_active(const struct fse *e, uint32_t row);

/* The daemon region's layout (fse_region.c: the one place it is decided;
 * foresightd's fsd_region.c and fs-replay both lay out with it).  dims:
 * what sizes it; slots 0 leaves out the ready words, counters 0 the
 * counters.  fse_region_format writes the header's dimensions and offsets
 * into zeroed memory of at least layout.bytes (64-byte aligned). */
struct fse_region_dims {
	uint32_t cards, layers, experts, epoch_bufs;
	uint32_t slots;       /* per card: its ready words and issued_ns; 0: none */
	uint32_t max_clients; /* the counters' client rows */
	int counters;         /* 1: the counters (proto/fs_counters.h) */
};
struct fse_region_layout {
	uint64_t off_cards, off_epochs, epoch_buf_bytes, off_ready, off_ready_card[FS_MAX_CARDS];
	uint64_t off_layer_ready, off_counters, counters_bytes;
	uint64_t bytes; /* the whole region */
};
void fse_region_layout(const struct fse_region_dims *dm, struct fse_region_layout *l);
void fse_region_format(struct fs_daemon_hdr *dh, const struct fse_region_dims *dm,
		       const struct fse_region_layout *l, uint64_t region_bytes);
/* A daemon region as the engine needs it (fs-replay, tests): no ready
 * words, no counters (their hosts keep those).  fse_region_bytes: its
 * size; fse_region_init: format zeroed memory of that size; every card
 * reads every card (peer_reach). */
size_t fse_region_bytes(uint32_t cards, uint32_t layers, uint32_t experts, uint32_t epoch_bufs);
void fse_region_init(struct fs_daemon_hdr *dh, uint32_t cards, uint32_t layers, uint32_t experts,
		     uint32_t epoch_bufs);
/* The epoch buffer `buf`'s header and entries. */
struct fs_epoch_buf_hdr *fse_epoch_buf(struct fs_daemon_hdr *dh, uint32_t buf);
static inline uint64_t *fse_epoch_entries(struct fs_daemon_hdr *dh, uint32_t buf)
{
	return (uint64_t *)(fse_epoch_buf(dh, buf) + 1);
}

static inline void fse_count(uint64_t *ctr, uint64_t n)
{
	__atomic_fetch_add(ctr, n, __ATOMIC_RELAXED);
}

#endif /* FSE_H */
