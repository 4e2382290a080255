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
 *    the daemon returns (how long arena bytes stay mapped then: "the
 *    arena" below).
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
#define FS_CLIENT_VERSION_MINOR \
	7 /* 2: fs_card_info.down (cards that go down); 3: fs_layer_ready; \
					     4: fs_arena_pin, arenas unmapped after a restart; \
					     5: fs_client_redials; \
					     6: fs_arena_pin_region; \
					     7: fs_card_info.kind replaces is_cuda */

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

/* A card's backend (fs_card_info.kind): the daemon's row of its backend
 * list, the value on the wire.  Later daemons may add kinds: compare with
 * these, do not assume the list is closed. */
#define FS_CARD_HOST 0u /* stand-in card: its slots are host memory (fs_slot.host) */
#define FS_CARD_CUDA 1u /* a GPU: its slots are device memory (fs_slot.device) */

struct fs_card_info {
	uint32_t id;
	uint32_t slots;
	uint64_t slot_bytes;
	/* FS_CARD_HOST, FS_CARD_CUDA, ...  Was `int is_cuda` before library
	 * version 0.7, at the same place and size: for these two kinds the
	 * value is the one is_cuda had (0, 1). */
	uint32_t kind;
	char name[40];
	/* 1 once the card is down (lost, reset, or taken down by an admin:
	 * `fsctl card down`) until the daemon restarts: every lookup of it
	 * answers "not resident" and no card reads it (fs_card_reach); 0 up.
	 * Read live from the daemon region at each fs_client_card call.  (Was
	 * padding before library version 0.2: the struct's size is unchanged.) */
	uint32_t down;
};

/* Connect, check the protocol version, attach.  *out is set on success. */
FS_API int fs_client_open(fs_client **out, const struct fs_client_opts *opts);
/* Detach and free everything.  Views must have been released. */
FS_API void fs_client_close(fs_client *c);

FS_API const char *fs_strerror(int err);
/* Message of the last failure on this handle (never NULL). */
FS_API const char *fs_client_last_error(const fs_client *c);

FS_API int fs_client_model(const fs_client *c, struct fs_model_info *out);
/* The card's description and whether it is down now. */
FS_API int fs_client_card(const fs_client *c, uint32_t card, struct fs_card_info *out);
/* 1 while attached to a live daemon, 0 otherwise. */
FS_API int fs_client_attached(fs_client *c);
/* Times this handle has attached (1 after open; +1 per re-attach). */
FS_API uint64_t fs_client_attach_count(const fs_client *c);
/* Times this handle replaced its control socket's dialer since it opened:
 * once per request that found no connection to send on for its whole
 * timeout (a re-attach try's hello, 500 ms; fs_client_stats_json, 2 s),
 * because nng 1.5.2's dialer stops for good after a reset in its
 * handshake.  0 for a handle whose daemon never went; it grows about
 * twice a second while no daemon listens (each re-attach try) and stays
 * put while attached.  The daemon shows it as the client's `redials`
 * counter (fsctl clients, stats, /metrics). */
FS_API uint64_t fs_client_redials(const fs_client *c);

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

/* ---- the device ring (GPU kernels post; proto/fs_ring_dev.h) --------- */

/* Let this handle's CUDA kernels post records (the router-ahead kernel,
 * foresight/router_ahead.h): registers the client region with the CUDA
 * runtime (dlopen'ed, as for the slot pools) and returns in *desc the
 * device address of the ring's descriptor, valid in every context of the
 * process until fs_client_close, across daemon restarts.  Launches that
 * post must be serialised (one stream).  Synchronise them before
 * fs_client_close.  -ENOSYS without a CUDA runtime. */
FS_API int fs_dev_ring_enable(fs_client *c, void **desc);
/* Post one prediction through the device ring from the CPU, the way the
 * kernel does (source FS_SOURCE_KERNEL).  For tests and for a second host
 * producer; never mix it with kernels posting on the same handle. */
FS_API int fs_dev_ring_post_predict(fs_client *c, uint32_t window, uint32_t layer, uint32_t expert,
				    uint32_t card, float score, unsigned horizon);
/* Device-ring records dropped: ring full, or posted while detached. */
FS_API uint64_t fs_dev_ring_dropped(const fs_client *c);

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
 * hold slots are taken.  Never fails because the daemon is gone: the view
 * is then empty (epoch 0, every lookup misses) but still keeps the arena
 * readable (see "the arena" below), so fs_release every view that
 * fs_acquire returned 0 for, an empty one too. */
FS_API int fs_acquire(fs_client *c, struct fs_view *v);
FS_API void fs_release(fs_client *c, struct fs_view *v);
/* 1 and *out filled when the held epoch maps (card, layer, expert) to a
 * slot whose bytes have landed and the card is not down; 0 otherwise
 * (compute it from the arena). */
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

/* ---- several cards: one tier and the peer path ---------------------- */
/*
 * The daemon keeps one expert tier across the cards that can read each
 * other's memory: an expert is on at most one of them (docs/ARCHITECTURE.md,
 * "Cards and the peer path").  An engine running on card A uses an expert
 * held on card B by reading B's slot directly, through a device pointer
 * valid in A's CUDA context (B's pool opened in A's context with peer
 * access).  Cards are the daemon's card ids (fs_client_card); an engine
 * names the card its layer runs on as `from`, and the pointer is valid in
 * that card's device's primary context (the runtime API's context, which
 * is what engines use).  The same epoch contract covers peer reads: the
 * engine holds the view while it reads, as for a local slot.
 *
 * A card that goes down (fs_card_info.down) is out of all of it: every
 * epoch the daemon publishes after the loss maps nothing to it, lookups of
 * it answer "not resident" (whatever epoch the view holds) and no card
 * reaches it.  Pointers already handed out stay valid while the view is
 * held when the card was only taken down; after a real loss or reset the
 * memory behind them may be gone, and a kernel reading it fails in the
 * engine's own context: recompute those experts from the arena.
 */
enum fs_place_kind {
	FS_PLACE_MISS = 0,        /* on no card: compute it from the arena (CPU path) */
	FS_PLACE_LOCAL = 1,       /* on `from` itself */
	FS_PLACE_PEER = 2,        /* on another card that `from` reads */
	FS_PLACE_UNREACHABLE = 3, /* on another card `from` cannot read (no peer access,
				     or fs_peer_open not called or failed): the CPU path */
};

struct fs_place {
	uint32_t kind; /* enum fs_place_kind (also the return value) */
	uint32_t card; /* the card holding it (LOCAL, PEER, UNREACHABLE) */
	uint32_t slot;
	uint32_t gen;
	const void *host; /* host backend: the slot's bytes in this process (LOCAL, PEER) */
	void *device;     /* CUDA backend: the slot as `from`'s device reads it (LOCAL, PEER) */
	uint64_t bytes;   /* the expert's size */
};

/* The cards whose slots an engine on `card` can read, as the daemon found
 * them (bit j: card j; the card's own bit is set): CUDA peer access, or
 * every card on the host backend, less the cards that are down.  0 while
 * detached, for a bad card, or for a card that is down. */
FS_API uint32_t fs_card_reach(const fs_client *c, uint32_t card);
/* Make the cards that `card` reaches readable from `card`'s device in this
 * process: opens each of their pools in that device's context with peer
 * access.  Makes CUDA calls: call it once at set-up per card the engine
 * runs layers on, from the thread that makes the per-layer calls, never
 * per layer.  Remembered: pools of a daemon attached later are opened too.
 * Returns the bitmask of cards readable from `card` now (its own bit
 * included; the host backend needs no opening), or a negative errno
 * (-ENOTCONN while detached, -EINVAL for a bad card, -ENODEV for a card
 * that is down).  Mappings of a card that goes down later are kept (a
 * kernel may still be reading them) but never handed out again. */
FS_API int fs_peer_open(fs_client *c, uint32_t card);
/* Where an engine on card `from` finds (layer, expert) in the held view:
 * returns the kind (FS_PLACE_*) and fills *out.  LOCAL and PEER: out->device
 * (CUDA) or out->host (host backend) is readable now and stays unchanged
 * while the view is held.  MISS and UNREACHABLE: use fs_arena_expert.
 * Never a card that is down; MISS for every expert when `from` is down.  No
 * CUDA call, no system call, no lock. */
FS_API int fs_lookup_from(const fs_client *c, const struct fs_view *v, uint32_t from, uint32_t layer,
			  uint32_t expert, struct fs_place *out);

/* ---- the arena (CPU path) ------------------------------------------- */
/*
 * How long arena bytes stay mapped (fs_expert_blob.data, and what
 * fs_arena_expert_parts describes).  A daemon restarted under systemd takes
 * its arena over from the fd store: the engines' mapping is the new
 * daemon's arena, nothing changes.  A daemon started by hand (or one whose
 * fd store was lost) builds a new arena; when the library re-attaches to it,
 * fs_arena_expert answers from the new one, and the old one is unmapped
 * once nothing may still read it, so restarts cost no memory.  Arena bytes
 * obtained
 *  - while a view is held stay valid until that view is released (every
 *    view: one acquired while the daemon was gone too);
 *  - with no view held stay valid until the handle's next fs_acquire;
 *  - while an fs_arena_pin is held stay valid until that pin is released;
 * and every arena stays mapped until fs_client_close for a handle that
 * never calls fs_acquire.  A handle keeps an old arena only while one of
 * these may still read it: an engine that releases its views keeps none a
 * window after the re-attach.  (Before library version 0.4 every arena
 * stayed mapped until fs_client_close.)
 */
struct fs_expert_blob {
	const void *data; /* read-only; valid as the rule above says */
	uint64_t bytes;
	uint64_t checksum; /* FNV-1a 64 of the bytes */
};
/* The expert's bytes in the arena: 0 and *out filled; -EAGAIN while its
 * layer is not in the arena yet (the daemon is still loading the model and
 * serves it layer by layer, layer 0 first: compute the expert from the
 * engine's own copy of the model, e.g. its mapping of the file, and ask
 * again for a later token); -EINVAL out of range; -ENOTCONN before any
 * attach.  A layer once in stays in, also after the daemon is gone.  The
 * library's background thread notes the layers the daemon has loaded once
 * per period (100 ms), so a layer is seen in up to that long after it
 * landed; any thread may call this (no lock, no system call). */
FS_API int fs_arena_expert(const fs_client *c, uint32_t layer, uint32_t expert, struct fs_expert_blob *out);
/* Keep the arena that fs_arena_expert answers from now, and every arena
 * after it, mapped until fs_arena_unpin: for arena bytes kept beyond a
 * window (tensors over the arena, a cudaHostRegister of it, a binding's
 * exported buffers).  A pin held across restarts without the fd store
 * keeps one arena per restart: release it when the bytes are let go.
 * Returns an opaque pin, or NULL before any attach.  No lock, no system
 * call; any thread. */
FS_API const void *fs_arena_pin(fs_client *c);
FS_API void fs_arena_unpin(fs_client *c, const void *pin);
/* The arena a pin keeps mapped, as one read-only mapping of `bytes` from
 * `base`, where fs_arena_expert's blobs lie while that arena is the
 * current one: for an engine that registers the whole arena with its GPU
 * runtime once (cudaHostRegister, read-only and mapped) so kernels read
 * misses in place.  0, or -EINVAL for a NULL pin. */
struct fs_arena_region {
	const void *base;
	uint64_t bytes;
};
FS_API int fs_arena_pin_region(const void *pin, struct fs_arena_region *out);
/* 1 when the layer's experts are in the arena (fs_arena_expert answers),
 * 0 while it loads, or a negative errno as fs_arena_expert.  Lookups of a
 * layer not in answer "miss": the daemon copies none of its experts. */
FS_API int fs_layer_ready(const fs_client *c, uint32_t layer);
/* FNV-1a 64, the arena's checksum function. */
FS_API uint64_t fs_checksum(const void *p, size_t n);

/* What each part of an expert's blob is (a GGUF arena; see proto/fs_arena.h):
 * a 2-D slice of one model tensor, ne[0] elements per row, ne[1] rows. */
enum fs_part_role { FS_ROLE_GATE = 1, FS_ROLE_UP = 2, FS_ROLE_DOWN = 3, FS_ROLE_GATE_UP = 4 };
enum fs_part_what { FS_WHAT_WEIGHT = 0, FS_WHAT_BIAS = 1, FS_WHAT_SCALE = 2 };
struct fs_expert_part {
	uint16_t role;      /* enum fs_part_role */
	uint16_t what;      /* enum fs_part_what */
	uint32_t ggml_type; /* ggml's enum ggml_type (0 F32, 1 F16, 30 BF16, ...) */
	uint64_t offset;    /* from the blob's start (a multiple of 256) */
	uint64_t bytes;
	uint64_t ne[2];
};

/* ---- for bindings and tools (never on a per-layer path) -------------- */

/* An expert's parts, in blob order: fills out[0..min(count, max)) and
 * returns count (at most 12); 0 for a synthetic arena or a dense layer;
 * -EINVAL for a layer or expert out of range. */
FS_API int fs_arena_expert_parts(const fs_client *c, uint32_t layer, uint32_t expert,
				 struct fs_expert_part *out, unsigned max);
/* The daemon's `stats` reply (proto/README.md) as JSON text, like snprintf:
 * returns its length (call again with a larger buffer when >= len) or a
 * negative errno (message in fs_client_last_error).  One control round
 * trip (at most 2 s when the daemon is gone). */
FS_API int fs_client_stats_json(fs_client *c, char *buf, size_t len);
/* The CUDA device (this process's numbering) whose memory a card's
 * fs_slot.device pointers point into; -ENODEV for a host card,
 * -ENOTCONN while detached. */
FS_API int fs_card_device(const fs_client *c, uint32_t card);
/* Why the last fs_client_open on this thread failed ("" after a success):
 * the handle, and its fs_client_last_error, are gone by then. */
FS_API const char *fs_open_error(void);

#ifdef __cplusplus
}
#endif

#endif /* FORESIGHT_H */
