/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr.h: the residency core.  Decides which (layer, expert) lives in which
 * slot of which card, publishes that as numbered epochs, and keeps every
 * slot that a held epoch may map untouched (the grace period).
 *
 * Plain C: no I/O, no CUDA, no threads, no clock of its own.  The daemon
 * drives it from its hot thread; fs-replay drives the very same code on a
 * virtual clock.  Not thread-safe: one caller at a time.
 *
 * Slot life cycle (per card):
 *
 *   FREE --take_copies--> LOADING --copy_done--> RESIDENT --evict--> RETIRING
 *    ^                                                                   |
 *    +------ reclaim: retire epoch published and every hold >= it -------+
 *
 * A LOADING or RESIDENT slot is in the table (FS_ENTRY(slot, gen)); a
 * RETIRING slot left the table in epoch `retire` (the first published epoch
 * that does not map it) and is rewritten only after reclaim.
 *
 * Inputs are trusted to be in bounds: the daemon validates every record
 * (layer < layers, expert < experts, card < cards or FS_CARD_NONE) before it
 * calls fsr_record().  Hold values are NOT trusted (they come from client
 * memory): impossible ones are ignored and counted.
 */
#ifndef FSR_H
#define FSR_H

#include <stdint.h>

#include "fs_proto.h"
#include "fs_regions.h"

#define FSR_NONE UINT32_MAX

struct fsr;

/* Where the core writes its telemetry (fs_counters.h rows).  Any pointer may
 * be NULL: the core then keeps the counts privately. */
struct fsr_counters {
	uint64_t *daemon; /* [FS_N_DAEMON] */
	uint64_t *card;   /* [cards][FS_N_CARD] */
	uint64_t *layer;  /* [layers][FS_N_LAYER] */
	uint64_t *client; /* [max_clients][FS_N_CLIENT] */
};

struct fsr_config {
	uint32_t cards;                /* 1..FS_MAX_CARDS */
	uint32_t slots[FS_MAX_CARDS];  /* slots per card, >= 1 */
	uint32_t layers;               /* 1..FS_MAX_LAYERS */
	uint32_t experts;              /* 1..FS_MAX_EXPERTS */
	uint32_t max_clients;          /* 1..64 */
	uint32_t max_inflight;         /* copies in flight per card (default 32) */
	uint32_t want_max_age;         /* windows a wanted expert stays wanted (default 2) */
	const uint64_t *expert_bytes;  /* [layers * experts], or NULL: uniform_bytes */
	uint64_t uniform_bytes;
	struct fsr_counters counters;
};

/* One copy for the backend to perform: arena blob (layer, expert) -> slot. */
struct fsr_copy {
	uint32_t card;
	uint32_t slot;
	uint32_t gen;
	uint32_t layer;
	uint32_t expert;
	uint64_t bytes;
};

/* Fill in defaults for fields left 0; then fsr_create() validates. */
void fsr_config_defaults(struct fsr_config *cfg);
/* NULL with errno EINVAL (bad config) or ENOMEM. */
struct fsr *fsr_create(const struct fsr_config *cfg);
void fsr_destroy(struct fsr *r);

/* Clients are rows 0..max_clients-1 (the daemon's client table index). */
int fsr_client_add(struct fsr *r, uint32_t client);    /* 0, -EINVAL, -EEXIST */
void fsr_client_remove(struct fsr *r, uint32_t client); /* drops its holds */
/* The client's holds as read from its region after the latest publish.
 * Zero entries are free; values above the published epoch are ignored and
 * counted in bad_holds.  Returns how many were ignored. */
unsigned fsr_client_holds(struct fsr *r, uint32_t client, const uint64_t holds[FS_MAX_HOLDS]);

/* One validated record from a client's ring, at time now_ns. */
void fsr_record(struct fsr *r, uint32_t client, const struct fs_rec *rec, uint64_t now_ns);

/* Up to max copies for `card`; their slots become LOADING with a new gen.
 * The backend must store ready word 0 before the copy and gen after it. */
unsigned fsr_take_copies(struct fsr *r, uint32_t card, struct fsr_copy *out, unsigned max,
			 uint64_t now_ns);
/* The copy into (card, slot) with gen has landed: LOADING -> RESIDENT. */
void fsr_copy_done(struct fsr *r, uint32_t card, uint32_t slot, uint32_t gen, uint64_t now_ns);

/* Epochs. */
int fsr_dirty(const struct fsr *r); /* the table changed since the last publish */
/* Write the table to publish next: cards * layers * experts entries,
 * entries[(card * layers + layer) * experts + expert]. */
void fsr_fill(const struct fsr *r, uint64_t *entries);
/* Mark the filled table as published; returns its epoch number (1, 2, ...).
 * Call it right after fsr_fill(), with no call in between that changes the
 * table: a slot evicted in between would be in the published table yet be
 * retired as if it were not. */
uint64_t fsr_publish(struct fsr *r);
uint64_t fsr_epoch(const struct fsr *r); /* last published, 0 = none */
/* Nonzero when any live client holds `epoch`. */
int fsr_epoch_held(const struct fsr *r, uint64_t epoch);
/* Free every RETIRING slot whose grace period is over.  Call after the
 * holds read following a publish were passed in.  Returns slots freed.
 * A slot retired in epoch U is freed once U is published and every live
 * client's holds, passed in after U was published, are 0 or >= U: a live
 * client whose holds were last passed in before that publish, or never
 * since it was added, keeps it RETIRING. */
unsigned fsr_reclaim(struct fsr *r);

/* Introspection for telemetry and tests. */
enum fsr_slot_state { FSR_FREE = 0, FSR_LOADING, FSR_RESIDENT, FSR_RETIRING };
struct fsr_slot_info {
	enum fsr_slot_state state;
	uint32_t gen;
	uint32_t layer, expert; /* valid unless FREE */
	uint64_t retire;        /* RETIRING: first epoch without it */
};
int fsr_slot_info(const struct fsr *r, uint32_t card, uint32_t slot, struct fsr_slot_info *out);
/* Slot of (layer, expert) on card in the working table, or FSR_NONE. */
uint32_t fsr_lookup(const struct fsr *r, uint32_t card, uint32_t layer, uint32_t expert);
/* Lowest epoch any live client holds, or UINT64_MAX when none is held. */
uint64_t fsr_min_hold(const struct fsr *r);
/* Check the core's internal consistency (lists, counts, table, want
 * queues, gauges): 0 when sound, else minus the source line of the first
 * failed check.  O(slots + cards * layers * experts): tests and debugging. */
int fsr_check(const struct fsr *r);

#endif /* FSR_H */
