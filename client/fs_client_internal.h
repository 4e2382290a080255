/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_client_internal.h: libforesight-client's private types.
 *
 * An attachment (struct fs_att) is everything one attach to one daemon
 * instance gave us: the mapped regions and the ring.  The handle points at
 * the current attachment; when the daemon leaves, the background thread
 * retires it and (later) attaches anew.  A retired attachment stays mapped
 * while a view still uses it and until the engine thread has passed a
 * quiescent point (its next fs_acquire), so no engine call ever touches
 * unmapped memory.
 */
#ifndef FS_CLIENT_INTERNAL_H
#define FS_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <nng/nng.h>

#include "foresight/foresight.h"
#include "fs_arena.h"
#include "fs_rec.h"
#include "fs_regions.h"
#include "fs_ring.h"
#include "fs_ring_dev.h"
#include "fs_shm.h"

/* An arena mapping.  The current one is c->arena_cur.  A restarted daemon
 * that hands over the same memfd (the fd store) is recognised by inode and
 * mapped once; one that built a new arena makes this one retired
 * (c->arena_old, oldest first), and the background thread unmaps a retired
 * arena once nothing can still read it (arena_reap in fs_client.c):
 *  - no pin: fs_arena_pin, a view acquired while detached (it carries the
 *    arena current then), a library call reading it right now;
 *  - no attachment, current or retired, maps it (a view acquired while
 *    attached pins its attachment, and so its arena);
 *  - every arena retired before it is unmapped (a view pins the arena
 *    current at its acquire, and its holder may read every arena made
 *    current while it holds it: so they go in order);
 *  - an fs_acquire began after it was retired (pointers taken with no view
 *    held are valid until the handle's next fs_acquire).
 * The struct itself is kept for reuse (c->arena_spare) until
 * fs_client_close: a reader that loaded a stale c->arena_cur may still
 * touch its `pins` (fs_arena_get). */
struct fs_arena_map {
	struct fs_shm shm;
	const struct fs_arena_hdr *ah;
	const struct fs_arena_entry *idx;
	uint32_t layers, experts;
	uint64_t dev, ino;
	/* Bit l: layer l's experts are known to be in this arena (its ready
	 * word was seen FS_LAYER_READY; a word never goes back).  Kept here,
	 * not read from a daemon region, so that it outlives the attachment:
	 * a daemon that dies while loading leaves the layers it loaded. */
	uint64_t layer_in[FS_MAX_LAYERS / 64]; /* atomic */
	int pins;                              /* atomic: see above */
	uint64_t retired_qs;                   /* c->qs when it stopped being current */
	struct fs_arena_map *next;             /* in c->arena_old or c->arena_spare */
};

struct fs_att {
	struct fs_shm dshm, cshm;
	struct fs_arena_map *arena;
	struct fs_shm pool[FS_MAX_CARDS];
	const struct fs_daemon_hdr *dh;
	struct fs_client_hdr *ch;
	uint32_t cards, layers, experts, epoch_bufs;
	uint64_t instance;
	const uint32_t *ready[FS_MAX_CARDS];
	const uint32_t *layer_ready; /* [layers] in the daemon region, or NULL: every layer is in */
	int layers_all_in;           /* background thread's: every layer noted in (fs_arena_note_ready) */
	const uint8_t *pool_base[FS_MAX_CARDS]; /* host cards */
	void *dev_base[FS_MAX_CARDS];           /* CUDA cards: pool in this process */
	int dev_index[FS_MAX_CARDS];
	uint32_t slots[FS_MAX_CARDS];
	uint64_t slot_bytes[FS_MAX_CARDS];
	struct fs_card_info card_info[FS_MAX_CARDS];
	struct fs_ring_prod prod;
	struct fs_ring_hdr *dev_hdr; /* the device ring (fs_ring_dev.h) */
	uint32_t dev_log2e;
	int dev_registered; /* cshm is registered with CUDA: kept until close */
	uint64_t dev_addr;  /* the device ring's device address, once registered */
	uint32_t client_id;
	uint8_t token[16];
	int daemon_pidfd;    /* readable once the daemon process exits (-1: none) */
	uint32_t hold_used;  /* bitmap of ch->holds[] in use (engine thread) */
	int views;           /* views referencing this attachment (atomic) */
	int dead;            /* the daemon left or dropped us (atomic) */
	uint64_t retired_qs; /* c->qs when retired */
	struct fs_att *next;
};

struct fs_client {
	char socket[108];
	char name[48];
	char model[64];
	uint32_t ring_entries;
	int no_reattach;

	nng_socket req;
	nng_dialer dialer; /* req's, replaced when a re-attach finds no connection (fs_client.c) */
	int req_open;
	pthread_mutex_t ctl_lock; /* the REQ socket: open/close vs. background */
	uint64_t redials;         /* dialers replaced (atomic) */
	int hello_unsent;         /* ctl_lock: the last hello found no connection to send on */

	struct fs_att *att;               /* current attachment or NULL (atomic pointer) */
	struct fs_att *retired;           /* background thread only */
	struct fs_arena_map *arena_cur;   /* the one fs_arena_expert reads (atomic) */
	struct fs_arena_map *arena_old;   /* retired, still mapped, oldest first (background thread) */
	struct fs_arena_map *arena_spare; /* unmapped, for the next arena (background thread) */
	uint64_t arenas_unmapped;         /* retired arenas unmapped so far (atomic) */
	uint64_t qs;                      /* engine quiescent-state counter (atomic) */
	uint64_t attach_count;            /* atomic */
	uint64_t dropped;                 /* atomic */

	struct fs_model_info model_info;

	/* device posting (fs_dev_ring.c); dev_lock orders enable against the
	 * background thread's re-attach */
	pthread_mutex_t dev_lock;
	struct fs_dev_desc *dev_desc; /* pinned, device-mapped; NULL until enabled */
	void *dev_desc_dev;           /* its device address */
	struct fs_dev_keep *dev_keep; /* regions registered with CUDA, unmapped at close */

	pthread_t bg;
	int bg_started;
	int bg_stop;
	uint32_t bg_wake; /* futex word for a prompt stop */

	/* Last failure, from the engine's threads or the background thread's
	 * re-attach tries: written and read under err_lock. */
	pthread_mutex_t err_lock;
	char err[256];
};

/* fs_epoch.c: whether `layer` of the attachment's arena is in (caches
 * what it sees in a->arena->layer_in); note_ready: every layer whose word
 * is ready now, at attach. */
int fs_arena_layer_in(const struct fs_att *a, struct fs_arena_map *m, uint32_t layer);
/* Turn the daemon's ready words into the arena map's bits (the background
 * thread and attach: the only callers that hold the attachment); 1 once
 * every layer is in. */
int fs_arena_note_ready(const struct fs_att *a);
/* fs_epoch.c: the current arena, pinned (NULL before any attach), and
 * its release: what every reader of c->arena_cur goes through.  Lock-free:
 * two atomic adds. */
struct fs_arena_map *fs_arena_get(const struct fs_client *c);
void fs_arena_put(struct fs_arena_map *m);
/* fs_attach.c */
int fs_att_create(struct fs_client *c, struct fs_att **out);
void fs_att_destroy(struct fs_client *c, struct fs_att *a, int detach);
/* fs_cuda.c: CUDA pools through a dlopen'ed runtime (attach/detach only) */
int fs_cuda_open_pool(const char *ipc_hex, const char *pci, void **dev_ptr, int *dev, char *err, size_t len);
void fs_cuda_close_pool(void *dev_ptr);
int fs_cuda_pinned_alloc(size_t bytes, void **host, void **dev, char *err, size_t len);
void fs_cuda_pinned_free(void *host);
int fs_cuda_register(void *p, size_t bytes, void **dev, char *err, size_t len);
void fs_cuda_unregister(void *p);
/* fs_post.c: a record checked as the daemon checks it (proto/fs_rec.h):
 * against the attachment's model, or (arg_check, before one is known)
 * its structure and score alone.  0 or -EINVAL. */
int fs_rec_post_check(const struct fs_att *a, const struct fs_rec *r);
int fs_rec_arg_check(const struct fs_rec *r);
/* fs_dev_ring.c: the device ring of an attachment (called by fs_att_*) */
int fs_dev_att_create(struct fs_client *c, struct fs_att *a);
int fs_dev_att_destroy(struct fs_client *c, struct fs_att *a);
int fs_dev_sync(struct fs_client *c); /* point the descriptor at c->att */
void fs_dev_close(struct fs_client *c);
/* fs_attach.c: unmap an arena no one reads and keep its struct for the
 * next one (the background thread, or a failed attach's own new arena) */
void fs_arena_unmap(struct fs_client *c, struct fs_arena_map *m);
/* fs_client.c */
void fs_set_error(const struct fs_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* fs_query.c: the message fs_open_error() returns on this thread */
void fs_note_open_error(const char *msg);

#endif /* FS_CLIENT_INTERNAL_H */
