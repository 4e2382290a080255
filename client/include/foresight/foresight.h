/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libforesight-client: the API an inference engine links to share an expert
 * tier with foresightd.
 *
 * Conventions (one for the whole library):
 *  - Functions return 0 (or a count) on success and a negative errno value on
 *    failure (-EPROTO, -EACCES, -ENOBUFS, ...).  fs_strerror() names a code;
 *    fs_client_last_error() gives the full message of the last failure on a
 *    handle ("daemon speaks protocol 2, this library 1").
 *  - The per-layer and per-window calls (fs_post_*, fs_window_*, fs_acquire,
 *    fs_release, fs_lookup*) make no CUDA call and never block in the
 *    kernel: at most one futex wake when the daemon sleeps.  Engines call
 *    them from threads a GPU may be spinning on.  They are meant for one
 *    thread at a time per handle (the ring has one producer): serialise
 *    them if several threads post.
 *  - When the daemon is gone, posts are dropped (counted), every acquired
 *    view answers "miss", and the arena stays readable: the engine computes
 *    on the CPU path and carries on.  A background thread re-attaches when
 *    the daemon returns.
 */
#ifndef FORESIGHT_H
#define FORESIGHT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FS_API __attribute__((visibility("default")))
#else
#define FS_API
#endif

#define FS_CLIENT_VERSION_MAJOR 0
#define FS_CLIENT_VERSION_MINOR 1

/* Default control socket; FORESIGHT_SOCKET in the environment overrides it. */
#define FS_DEFAULT_SOCKET "/run/foresight/control.sock"

typedef struct fs_client fs_client;

struct fs_client_opts {
	const char *socket_path; /* NULL: $FORESIGHT_SOCKET, else FS_DEFAULT_SOCKET */
	const char *name;        /* shown by `fsctl clients`; NULL: program name */
	const char *model;       /* model the engine runs; NULL: whatever is served */
	uint32_t ring_entries;   /* 0: daemon default (power of two) */
	int no_reattach;         /* 1: do not re-attach after the daemon restarts */
};

/* What the daemon serves (valid after fs_client_open). */
struct fs_model_info {
	uint32_t layers;
	uint32_t experts;
	uint32_t experts_used; /* top-k, 0 if unknown */
	uint32_t cards;
	uint64_t max_expert_bytes;
	char model[64];
};

struct fs_card_info {
	uint32_t id;
	uint32_t slots;
	uint64_t slot_bytes;
	int is_cuda;
	char name[40];
};

/* Connect, check the protocol version, attach.  *out is set on success. */
FS_API int fs_client_open(fs_client **out, const struct fs_client_opts *opts);
/* Detach and free everything.  Views must have been released. */
FS_API void fs_client_close(fs_client *c);

FS_API const char *fs_strerror(int err);
/* Message of the last failure on this handle (never NULL). */
FS_API const char *fs_client_last_error(const fs_client *c);

FS_API int fs_client_model(const fs_client *c, struct fs_model_info *out);
FS_API int fs_client_card(const fs_client *c, uint32_t card, struct fs_card_info *out);
/* 1 while attached to a live daemon, 0 otherwise. */
FS_API int fs_client_attached(fs_client *c);
/* Times this handle has attached (1 after open; +1 per re-attach). */
FS_API uint64_t fs_client_attach_count(const fs_client *c);

/* ---- posting (the ring) --------------------------------------------- */

/* Prediction: `expert` of `layer` will be wanted on `card` (FS_ANY_CARD:
 * where the layer runs), `horizon` layers ahead (1..15), score >= 0. */
#define FS_ANY_CARD 0xffffu
enum fs_source { FS_SOURCE_ROUTER_AHEAD = 0, FS_SOURCE_HOST = 1, FS_SOURCE_KERNEL = 2 };
FS_API int fs_post_predict(fs_client *c, uint32_t window, uint32_t layer, uint32_t expert, uint32_t card,
			   float score, unsigned horizon, enum fs_source src);
/* Usage: the layer used `expert`; hit = 1 if served from a slot. */
FS_API int fs_post_usage(fs_client *c, uint32_t window, uint32_t layer, uint32_t expert, uint32_t card,
			 int hit);
FS_API int fs_window_begin(fs_client *c, uint32_t window, uint32_t tokens);
FS_API int fs_window_end(fs_client *c, uint32_t window);
/* Posts that failed because the ring was full or the daemon was gone. */
FS_API uint64_t fs_client_dropped(const fs_client *c);

/* ---- epochs --------------------------------------------------------- */

/* A held residency epoch.  Treat the fields as private. */
struct fs_view {
	uint64_t epoch; /* 0: no table (daemon gone): every lookup misses */
	const void *att_;
	const uint64_t *tab_;
	int hold_;
};

/* The slot an expert occupies, as seen through a view. */
struct fs_slot {
	uint32_t card;
	uint32_t slot;
	uint32_t gen;
	const void *host; /* host backend: the slot's bytes in this process */
	void *device;     /* CUDA backend: device pointer in this process */
	uint64_t bytes;   /* the expert's size */
};

/* Hold the newest epoch for one window (an engine pipelining windows holds
 * one per window in flight, at most 8).  Returns 0, or -EBUSY when all
 * hold slots are taken.  Never fails because the daemon is gone. */
FS_API int fs_acquire(fs_client *c, struct fs_view *v);
FS_API void fs_release(fs_client *c, struct fs_view *v);
/* 1 and *out filled when the held epoch maps (card, layer, expert) to a
 * slot whose bytes have landed; 0 otherwise (compute it from the arena). */
FS_API int fs_lookup(const fs_client *c, const struct fs_view *v, uint32_t card, uint32_t layer,
		     uint32_t expert, struct fs_slot *out);
/* Like fs_lookup, but also finds copies that landed after the view was
 * acquired (residency only grows within a window). */
FS_API int fs_lookup_live(const fs_client *c, const struct fs_view *v, uint32_t card, uint32_t layer,
			  uint32_t expert, struct fs_slot *out);
/* Nonzero when the slot still carries gen (bytes unchanged). */
FS_API int fs_slot_ready(const fs_client *c, const struct fs_slot *s);
/* Telemetry: CLOCK_MONOTONIC ns at which the daemon issued the latest copy
 * into this slot (0 if unknown).  Compare with fs_now-style stamps taken
 * before posting a prediction to measure post -> issue latency. */
FS_API uint64_t fs_slot_issued_ns(const fs_client *c, const struct fs_slot *s);
/* The card's ready words (uint32_t[slots], read-only host memory): an
 * engine may register them (cudaHostRegister, read-only) so its kernels can
 * test a slot with fs_slot_ready_dev() from kernels/fs_ready.cuh. */
FS_API const uint32_t *fs_card_ready_words(const fs_client *c, uint32_t card);

/* ---- the arena (CPU path) ------------------------------------------- */

struct fs_expert_blob {
	const void *data; /* read-only, valid until fs_client_close */
	uint64_t bytes;
	uint64_t checksum; /* FNV-1a 64 of the bytes */
};
FS_API int fs_arena_expert(const fs_client *c, uint32_t layer, uint32_t expert, struct fs_expert_blob *out);
/* FNV-1a 64, the arena's checksum function. */
FS_API uint64_t fs_checksum(const void *p, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* FORESIGHT_H */
