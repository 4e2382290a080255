/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_internal.h: the residency core's private data and the calls its
 * files make to one another.  Nothing outside daemon/residency/ includes it.
 *
 * Per card:
 *   slot[]     state, gen, (layer, expert), retire epoch, list links
 *   free list  FREE slots, a stack linked through slot.next
 *   LRU list   RESIDENT slots, doubly linked, oldest at lru_old
 *   retiring   RETIRING slots in eviction order, linked through slot.next;
 *              retire epochs never decrease along it (retire = published+1
 *              at eviction and `published` only grows), so reclaim pops
 *              from its head
 *   slot_of[]  (layer * experts + expert) -> slot or FSR_NONE: the working
 *              table, LOADING and RESIDENT slots only
 *   wants      bounded FIFO ring of experts to copy in, with a `wanted`
 *              byte per (layer, expert) so an expert is queued once
 */
#ifndef FSR_INTERNAL_H
#define FSR_INTERNAL_H

#include <stdint.h>

#include "fs_atomic.h"
#include "fs_counters.h"
#include "fsr.h"

/* Calls between the core's files: kept out of a shared library's exports. */
#define FSR_INTERNAL __attribute__((visibility("hidden")))

#define FSR_MAX_CLIENTS 64u
#define FSR_WANTS_MIN 1024u
/* take_copies looks at most this many LRU entries past the ones it needs
 * for an unprotected victim before it evicts protected ones. */
#define FSR_EVICT_SCAN_EXTRA 64u

struct fsr_slot {
	uint64_t retire; /* RETIRING: first epoch that does not map it */
	uint32_t gen;    /* bumped on every load, never FS_GEN_NONE */
	uint32_t layer;  /* valid unless FREE */
	uint32_t expert;
	uint32_t prev;        /* RESIDENT: LRU neighbours (FSR_NONE at the ends) */
	uint32_t next;        /* RESIDENT: LRU; FREE, RETIRING: next in its list */
	uint32_t prot_window; /* the window of prot_client when last loaded/touched */
	uint32_t prot_client; /* FSR_NONE: not protected */
	uint8_t state;        /* enum fsr_slot_state */
};

struct fsr_want {
	uint32_t idx;    /* layer * experts + expert */
	uint32_t window; /* the window of the record that wanted it */
	uint32_t client; /* its client row, FSR_NONE when none */
};

struct fsr_card {
	struct fsr_slot *slot;
	uint32_t nslots;
	uint32_t *slot_of; /* [layers * experts] */
	uint8_t *wanted;   /* [layers * experts] */
	struct fsr_want *wq;
	uint32_t wq_cap, wq_head, wq_len;
	uint32_t free_head, nfree;
	uint32_t lru_old, lru_new, nresident;
	uint32_t ret_head, ret_tail, nretiring;
	uint32_t nloading;
	uint64_t *ctr; /* this card's row of card counters */
};

struct fsr_client {
	uint64_t holds[FS_MAX_HOLDS]; /* accepted holds, 0 = free */
	uint64_t holds_seen;          /* published epoch when holds were last passed in */
	uint32_t newest_window;       /* newest window seen (serial arithmetic) */
	uint8_t live;
	uint8_t window_seen;
};

struct fsr {
	uint32_t cards, layers, experts, max_clients;
	uint32_t max_inflight, want_max_age;
	uint64_t uniform_bytes;
	uint64_t *expert_bytes; /* own copy, or NULL */
	uint64_t published;     /* last published epoch, 0 = none */
	int dirty;
	uint16_t *home; /* [layers]: card that last reported a use of the layer */
	struct fsr_card card[FS_MAX_CARDS];
	struct fsr_client client[FSR_MAX_CLIENTS];
	uint64_t *c_daemon; /* [FS_N_DAEMON] */
	uint64_t *c_card;   /* [cards][FS_N_CARD] */
	uint64_t *c_layer;  /* [layers][FS_N_LAYER] */
	uint64_t *c_client; /* [max_clients][FS_N_CLIENT] */
	uint64_t *c_priv;   /* backing store for the rows the caller left NULL */
};

/* Counters: one writer (the core), readers anywhere, so a relaxed load and
 * store suffice and no locked instruction is needed. */
static inline void fsr_ctr_add(uint64_t *c, uint64_t v)
{
	fs_store_relaxed(c, fs_load_relaxed(c) + v);
}

static inline void fsr_ctr_set(uint64_t *c, uint64_t v)
{
	fs_store_relaxed(c, v);
}

static inline uint64_t *fsr_layer_ctr(struct fsr *r, uint32_t layer)
{
	return r->c_layer + (uint64_t)layer * FS_N_LAYER;
}

/* NULL when the record carries no usable client row. */
static inline uint64_t *fsr_client_ctr(struct fsr *r, uint32_t client)
{
	return client < r->max_clients ? r->c_client + (uint64_t)client * FS_N_CLIENT : NULL;
}

static inline uint32_t fsr_idx(const struct fsr *r, uint32_t layer, uint32_t expert)
{
	return layer * r->experts + expert;
}

/* fsr_slots.c: slot life cycle and the LRU list. */
FSR_INTERNAL void fsr_gauges(struct fsr_card *cd);
FSR_INTERNAL void fsr_lru_touch(struct fsr_card *cd, uint32_t s);
FSR_INTERNAL void fsr_slot_protect(struct fsr *r, struct fsr_slot *sl, uint32_t client);
FSR_INTERNAL int fsr_slot_protected(const struct fsr *r, const struct fsr_slot *sl);
FSR_INTERNAL uint32_t fsr_slot_load(struct fsr *r, uint32_t card, uint32_t idx, uint32_t client);
FSR_INTERNAL void fsr_slot_evict(struct fsr *r, uint32_t card, uint32_t s);
FSR_INTERNAL unsigned fsr_slots_reclaim(struct fsr *r, uint32_t card, uint64_t upto);

/* fsr_wants.c: the per-card want queue. */
FSR_INTERNAL void fsr_want_push(struct fsr *r, uint32_t card, const struct fsr_want *w);
FSR_INTERNAL int fsr_want_pop(struct fsr_card *cd, struct fsr_want *w);
FSR_INTERNAL void fsr_want_unpop(struct fsr_card *cd, const struct fsr_want *w);
FSR_INTERNAL int fsr_want_stale(const struct fsr *r, const struct fsr_want *w);

#endif /* FSR_INTERNAL_H */
