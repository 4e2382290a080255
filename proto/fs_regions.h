/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_regions.h: the shared-memory regions between foresightd and engines.
 *
 *  daemon region  one per daemon, created by it, mapped READ-ONLY by every
 *                 client: header, card table, epoch buffers, ready words,
 *                 counters.
 *  client region  one per attached engine, created by the daemon, mapped
 *                 read-write by that engine alone: header, holds, heartbeat,
 *                 its ring(s).  The daemon trusts nothing in it.
 *  arena          the experts' bytes (proto/fs_arena.h), read-only to clients.
 *  slot pools     one per card; on the host backend a memfd the clients map
 *                 read-only, on the CUDA backend device memory (IPC handle).
 *
 * All regions are memfds handed to the client over the fd socket with
 * SCM_RIGHTS, never named in a file system (docs/ARCHITECTURE.md says why).
 * Every region starts with magic + version + its own size, and lists the
 * offsets of its parts, so a reader checks the version before it trusts
 * anything else (as Aeron's cnc.dat does).
 *
 * Epochs (the consistency contract, docs/ARCHITECTURE.md has the proofs):
 *  - An epoch is an immutable table per card: entry[card][layer][expert] is
 *    FS_ENTRY_NONE or FS_ENTRY(slot, gen).  An entry is usable when the
 *    slot's ready word equals gen (the copy has landed).
 *  - `current` = FS_CUR(epoch, buf): the newest epoch and the buffer that
 *    holds it.  A buffer is rewritten only when its epoch is neither current
 *    nor held by any live client.
 *  - Acquire (client): c = load_acquire(current); holds[k] = epoch(c);
 *    fs_smp_mb(); if load_acquire(current) != c, retry.
 *    Publish (daemon): fill a free buffer, store_release(buf.epoch),
 *    store_release(current); fs_smp_mb(); only then read the holds.
 *    Either the daemon sees the hold or the client sees the newer current.
 *  - A slot removed from the table in epoch U is rewritten only once every
 *    live client's holds are >= U (the grace period), or hold only epochs
 *    whose tables, and the newer ones the client may read (its reach),
 *    never mapped it.
 *  - Holds are checked when read: a word that changed must name the
 *    epoch current when the daemon last read the holds, or a newer one
 *    (what an acquire stores), in a buffer; anything else is refused
 *    (fs_hold_refusal) while the word keeps that value.
 *  - Reach (fs_lookup_live): before reading the newest table, epoch E,
 *    through an older hold, the client stores reach = E (once per E),
 *    fs_smp_mb(), and reads only if `current` is still E.  Either the
 *    daemon sees the reach or the client sees a newer epoch, as for an
 *    acquire.  A client's holds pin only the slots of the tables between
 *    its oldest hold and max(newest hold, reach); reach 0 (a library that
 *    does not store it) pins every slot retired after its oldest hold.
 */
#ifndef FS_REGIONS_H
#define FS_REGIONS_H

#include <stddef.h>
#include <stdint.h>

#include "fs_proto.h"

#define FS_DAEMON_MAGIC 0x52445346u /* "FSDR" */
#define FS_CLIENT_MAGIC 0x52435346u /* "FSCR" */

#define FS_MAX_CARDS 16u
#define FS_MAX_LAYERS 1024u
#define FS_MAX_EXPERTS 4096u
#define FS_MAX_HOLDS 8u /* epochs one client may hold at once (pipelined windows) */
#define FS_MAX_EPOCH_BUFS 64u

/* daemon state word */
enum fs_daemon_state {
	FS_DAEMON_STARTING = 1,
	FS_DAEMON_RUNNING = 2,
	FS_DAEMON_STOPPING = 3, /* graceful exit: clients fall back to the CPU path */
};

/* ---- epoch table entries --------------------------------------------- */
#define FS_ENTRY_NONE 0ull
#define FS_ENTRY(slot, gen) (((uint64_t)(gen) << 32) | (uint64_t)((uint32_t)(slot) + 1u))
#define FS_ENTRY_SLOT(e) ((uint32_t)(e)-1u)
#define FS_ENTRY_GEN(e) ((uint32_t)((e) >> 32))

/* current = epoch << 8 | buffer index; 0 = nothing published yet */
#define FS_CUR(epoch, buf) (((uint64_t)(epoch) << 8) | (uint64_t)(buf))
#define FS_CUR_EPOCH(c) ((c) >> 8)
#define FS_CUR_BUF(c) ((uint32_t)((c)&0xffu))

/* A ready word: the generation whose bytes are in the slot; 0 = none. */
#define FS_GEN_NONE 0u

/* Each card's ready words (uint32_t[slots]) are followed, at the next cache
 * line, by uint64_t issued_ns[slots]: CLOCK_MONOTONIC when the daemon issued
 * the latest copy into that slot (telemetry: post-to-issue latency). */
#define FS_ISSUED_OFFSET(slots) (((uint64_t)(slots)*4u + FS_CACHELINE - 1u) / FS_CACHELINE * FS_CACHELINE)

/* The backends, one row each: X(A, NAME, name).  A card's kind
 * (fs_card_desc.kind) is its backend's enum fs_backend_kind value; the
 * daemon's table of their code is daemon/fsd_backends.c.  The values are on
 * the wire: a new backend goes at the end. */
#define FS_BACKENDS(X, A)                                                         \
	X(A, HOST, host) /* stand-in cards: slot pools in memfds, copy threads */ \
	X(A, CUDA, cuda) /* GPUs: pools in device memory, copy streams */
#define FS_BACKEND_ENUM_ROW(A, NAME, name) FS_BACKEND_##NAME,
enum fs_backend_kind { FS_BACKENDS(FS_BACKEND_ENUM_ROW, ~) FS_N_BACKENDS };
#undef FS_BACKEND_ENUM_ROW
_Static_assert(FS_BACKEND_HOST == 0 && FS_BACKEND_CUDA == 1, "backend kinds are on the wire");

/* "host", "cuda"; "?" for a kind this build does not know. */
static inline const char *fs_backend_name(uint32_t kind)
{
#define FS_BACKEND_NAME_ROW(A, NAME, name) #name,
	static const char *const names[FS_N_BACKENDS] = {FS_BACKENDS(FS_BACKEND_NAME_ROW, ~)};
#undef FS_BACKEND_NAME_ROW
	return kind < FS_N_BACKENDS ? names[kind] : "?";
}

struct fs_card_desc {
	uint32_t id;         /* daemon's card id (not assumed a local index) */
	uint32_t slots;      /* slots in this card's pool */
	uint64_t slot_bytes; /* bytes per slot (>= largest expert) */
	uint64_t pool_bytes; /* slots * slot_bytes, rounded to pages */
	uint32_t fd_index;   /* index of its pool fd in the attach fd list;
			       UINT32_MAX for CUDA cards (IPC handle instead) */
	uint32_t kind;       /* enum fs_backend_kind: 0 host, 1 cuda */
	char name[40];       /* "host0", "NVIDIA H200 (0000:1b:00.0)" */
};
_Static_assert(sizeof(struct fs_card_desc) == 72, "fs_card_desc");

struct fs_epoch_buf_hdr {
	uint64_t epoch; /* epoch this buffer holds; 0 while being written */
	uint64_t pad[7];
	/* followed by cards * layers * experts uint64_t entries */
};
_Static_assert(sizeof(struct fs_epoch_buf_hdr) == FS_CACHELINE, "epoch buf hdr is one line");

struct fs_daemon_hdr {
	/* line 0-3: immutable after the daemon sets state RUNNING */
	uint32_t magic;
	uint32_t version;      /* FS_PROTO_VERSION */
	uint64_t region_bytes; /* size of the whole region */
	uint64_t instance;     /* random per daemon start: a restart changes it */
	uint32_t cards;
	uint32_t layers;
	uint32_t experts;
	uint32_t epoch_bufs;
	uint64_t epoch_buf_bytes; /* header + entries, cache-line rounded */
	uint64_t off_cards;       /* struct fs_card_desc[cards] */
	uint64_t off_epochs;      /* epoch_bufs x epoch_buf_bytes */
	uint64_t off_ready;       /* per card: uint32_t ready[slots] then
				     uint64_t issued_ns[slots] (FS_ISSUED_OFFSET),
				     each card's part on a cache line */
	uint64_t off_ready_card[FS_MAX_CARDS];
	uint64_t off_counters; /* struct fs_counters_hdr + arrays (fs_counters.h) */
	uint64_t counters_bytes;
	uint32_t max_clients;
	/* Which card reads which: bit j of peer_reach[i] = an engine on card i
	 * can read card j's slots directly (CUDA: cudaDeviceCanAccessPeer, so
	 * P2P over NVLink or PCIe; host backend: every card, the pools are host
	 * memory; the daemon's `peer` setting off: only its own).  Bit i of
	 * entry i is set for every card served.  All zero (a daemon before
	 * this field): no card reads another.  The one field of lines 0-3 that
	 * changes while RUNNING: when a card goes down its entry becomes 0 and
	 * its bit leaves every other entry (bits are only ever cleared; read
	 * it with relaxed loads), just before cards_down says so. */
	uint16_t peer_reach[FS_MAX_CARDS];
	uint32_t pad0;
	/* line 4: dynamic, written by the daemon */
	uint32_t state; /* enum fs_daemon_state */
	uint32_t pad1;
	uint64_t heartbeat_ns; /* CLOCK_MONOTONIC, refreshed every heartbeat_ms */
	uint64_t current;      /* FS_CUR(epoch, buf) */
	uint32_t heartbeat_ms; /* refresh period; stale after 10 periods */
	/* Bit i: card i is down (lost, reset, or taken down by an admin) until
	 * the daemon restarts; never cleared.  Stored (release) only after an
	 * epoch that maps nothing to the card was published: a client that
	 * sees the bit (acquire) and then acquires holds such an epoch.
	 * Lookups on a card whose bit is set answer "not resident" whatever
	 * the view.  0 (a daemon before this field): no card down. */
	uint32_t cards_down;
	/* The arena's per-layer ready words: uint32_t[layers] at this offset
	 * (cache-line aligned), set once at creation.  Word l is
	 * FS_LAYER_READY once every expert of layer l is in the arena (its
	 * bytes and its index entry: the daemon stores the word with release
	 * after them); anything else: not yet (read it with acquire).  A word
	 * only ever goes from 0 to FS_LAYER_READY.  0 (a daemon before this
	 * field, which served only a whole arena): every layer is in. */
	uint64_t off_layer_ready;
	uint32_t pad2[6];
};
_Static_assert(sizeof(struct fs_daemon_hdr) == 5 * FS_CACHELINE, "daemon header is 5 lines");
_Static_assert(offsetof(struct fs_daemon_hdr, state) == 4 * FS_CACHELINE, "dynamic part on line 4");
_Static_assert(offsetof(struct fs_daemon_hdr, peer_reach) == 3 * FS_CACHELINE + 28,
	       "peer_reach where pad0 was");
_Static_assert(offsetof(struct fs_daemon_hdr, cards_down) == 4 * FS_CACHELINE + 28,
	       "cards_down where pad2 began");
_Static_assert(offsetof(struct fs_daemon_hdr, off_layer_ready) == 4 * FS_CACHELINE + 32,
	       "off_layer_ready where pad2 began");

/* A layer's ready word (off_layer_ready): its experts are in the arena.
 * Not 1, so that a stray small value is not taken for it. */
#define FS_LAYER_READY 0x59445246u /* "FRDY" */

/* Whether a daemon region of `size` bytes may be trusted with its layer
 * ready words: 1 (off 0 included: none, every layer in), 0 (reject the
 * region).  `off` and `layers` are the header's, read once by the caller. */
static inline int fs_layer_ready_ok(uint64_t off, uint32_t layers, uint64_t size)
{
	if (off == 0)
		return 1;
	return off % FS_CACHELINE == 0 && off >= sizeof(struct fs_daemon_hdr) && off <= size &&
	       (uint64_t)layers * sizeof(uint32_t) <= size - off;
}

/* ---- client region ---------------------------------------------------- */

enum fs_client_state {
	FS_CLIENT_ATTACHED = 1,
	FS_CLIENT_DETACHED = 2, /* the daemon dropped this client (dead, stale, revoked) */
};

struct fs_client_hdr {
	/* line 0: written by the daemon at attach, then never again */
	uint32_t magic;
	uint32_t version;
	uint64_t region_bytes;
	uint32_t client_id;
	uint32_t ring_entries;
	uint64_t off_ring; /* struct fs_ring_hdr + records */
	uint64_t ring_bytes;
	uint64_t instance;       /* the daemon instance this region belongs to */
	uint64_t off_dev_ring;   /* the device ring (struct fs_ring_hdr + records):
				    the engine's GPU kernels post here; 0: none */
	uint64_t dev_ring_bytes; /* (proto/fs_ring_dev.h) */
	/* line 1: daemon-written state (the client may scribble on it: harmless) */
	uint32_t state;         /* enum fs_client_state */
	uint32_t reason;        /* why detached: enum fs_detach_reason */
	uint32_t holds_refused; /* hold words refused: named no epoch this client acquired */
	uint32_t refused_why;   /* the latest refusal: enum fs_hold_refusal */
	uint64_t refused_epoch; /* the value that hold word had */
	uint32_t pad1[10];
	/* line 2: client-written liveness */
	uint64_t heartbeat_ns; /* CLOCK_MONOTONIC, refreshed on every acquire */
	uint64_t posted;       /* records posted (client's own count) */
	uint64_t ring_full;    /* posts refused because the ring was full */
	uint64_t dev_armed;    /* nonzero while kernels may post to the device
				  ring: a GPU cannot wake the daemon, so it
				  polls that ring (dev_poll_us) instead of
				  sleeping on it */
	uint64_t redials;      /* control dialers the handle replaced since it
				  opened (fs_client_redials; across attaches) */
	uint64_t reach;        /* the newest epoch whose table it read through a
				  hold (fs_lookup_live); 0: it does not say
				  (see "Reach" above) */
	uint64_t pad2[2];
	/* line 3: epochs held, 0 = free; read by the daemon after each publish */
	uint64_t holds[FS_MAX_HOLDS];
};
_Static_assert(sizeof(struct fs_client_hdr) == 4 * FS_CACHELINE, "client header is 4 lines");
_Static_assert(offsetof(struct fs_client_hdr, holds) == 3 * FS_CACHELINE, "holds on line 3");
_Static_assert(offsetof(struct fs_client_hdr, off_dev_ring) == 48, "off_dev_ring on line 0");
_Static_assert(offsetof(struct fs_client_hdr, dev_armed) == 2 * FS_CACHELINE + 24, "dev_armed on line 2");
_Static_assert(offsetof(struct fs_client_hdr, redials) == 2 * FS_CACHELINE + 32, "redials on line 2");
_Static_assert(offsetof(struct fs_client_hdr, reach) == 2 * FS_CACHELINE + 40, "reach where pad2 began");
_Static_assert(offsetof(struct fs_client_hdr, refused_epoch) == FS_CACHELINE + 16, "refused_epoch in pad1");

enum fs_detach_reason {
	FS_DETACH_NONE = 0,
	FS_DETACH_REQUESTED = 1,    /* the client asked */
	FS_DETACH_DEAD = 2,         /* its process exited */
	FS_DETACH_STALE = 3,        /* heartbeat older than the liveness timeout */
	FS_DETACH_HOLD_TIMEOUT = 4, /* an epoch held longer than hold_timeout */
	FS_DETACH_SHUTDOWN = 5,     /* the daemon is stopping */
	FS_DETACH_OVER_BUDGET = 6,  /* its user's holds kept more slots from reuse than its budget */
};

/* Why the daemon refused a hold word (fs_client_hdr.refused_why).  A
 * refused hold protects nothing: the daemon reads it as 0 while the word
 * keeps that value.  An acquire preempted between its load of `current`
 * and its hold store can be refused once; its re-check of `current` then
 * retries, so an engine never reads through a refused hold. */
enum fs_hold_refusal {
	FS_HOLD_REFUSED_NONE = 0,
	FS_HOLD_NO_BUFFER = 1,     /* no epoch buffer holds it (long superseded, or never published) */
	FS_HOLD_NOT_CURRENT = 2,   /* superseded before the word took it: never acquired */
	FS_HOLD_BEFORE_ATTACH = 3, /* published before this client attached */
};

#endif /* FS_REGIONS_H */
