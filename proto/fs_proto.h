/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_proto.h: the typed records an engine posts to foresightd, and the
 * constants every shared layout agrees on.
 *
 * Everything in this directory describes bytes that cross a process
 * boundary.  Sizes and offsets are pinned with _Static_assert so that a
 * change that moves a byte fails to compile instead of corrupting a peer.
 * proto/README.md documents every field and its offset.
 */
#ifndef FS_PROTO_H
#define FS_PROTO_H

#include <stddef.h>
#include <stdint.h>

/* The layouts are C11; kernels include them from CUDA C++ as well. */
#if defined(__cplusplus) && !defined(_Static_assert)
#define _Static_assert static_assert
#endif

/* Bumped whenever any layout in proto/ changes incompatibly. */
#define FS_PROTO_VERSION 1u

/* Cache line size assumed by every shared layout (x86-64 and most arm64). */
#define FS_CACHELINE 64u

/* Record types.  0 is never valid so that zeroed memory is rejected. */
enum fs_rec_type {
	FS_REC_PREDICT = 1,   /* router-ahead (or other) prediction           */
	FS_REC_USAGE = 2,     /* an expert a layer actually used              */
	FS_REC_WIN_BEGIN = 3, /* a decode window starts                       */
	FS_REC_WIN_END = 4,   /* a decode window ends                         */
	FS_REC_TYPE_MAX = 4,
};

/* FS_REC_PREDICT: aux = horizon (bits 0..3, 1..15 layers ahead)
 *                     | source  (bits 4..7, enum fs_pred_source). */
enum fs_pred_source {
	FS_SRC_ROUTER_AHEAD = 0, /* next layers' routers on this layer's rows */
	FS_SRC_HOST = 1,         /* any host-side predictor of the engine     */
	FS_SRC_KERNEL = 2,       /* the router-ahead GPU kernel               */
	FS_SRC_MAX = 2,
};
#define FS_PRED_HORIZON_MAX 15u
#define FS_PRED_AUX(horizon, source) ((uint8_t)(((horizon)&0x0fu) | ((source) << 4)))
#define FS_PRED_HORIZON(aux) ((unsigned)(aux)&0x0fu)
#define FS_PRED_SOURCE(aux) ((unsigned)(aux) >> 4)

/* FS_REC_USAGE: aux = FS_USE_HIT (served from a slot) or FS_USE_MISS. */
enum fs_use { FS_USE_MISS = 0, FS_USE_HIT = 1 };

/* "no card": a usage served by the CPU path, a prediction for any card. */
#define FS_CARD_NONE 0xffffu

/*
 * One record: 16 bytes, four to a cache line.  Fixed size keeps the ring
 * free of padding records and lets a batch be one memcpy.
 *
 *   off size field
 *     0    1 type    enum fs_rec_type
 *     1    1 aux     PREDICT: horizon|source; USAGE: hit/miss; else 0
 *     2    2 layer   0..layers-1 (WIN_*: 0)
 *     4    2 expert  0..experts-1 (WIN_*: 0)
 *     6    2 card    card id or FS_CARD_NONE
 *     8    4 window  the engine's window number (serial arithmetic)
 *    12    4 value   PREDICT: score as IEEE-754 binary32 bits, finite, >= 0
 *                    USAGE: 0; WIN_BEGIN: tokens in the window;
 *                    WIN_END: 0
 */
struct fs_rec {
	uint8_t type;
	uint8_t aux;
	uint16_t layer;
	uint16_t expert;
	uint16_t card;
	uint32_t window;
	uint32_t value;
};

_Static_assert(sizeof(struct fs_rec) == 16, "fs_rec is 16 bytes");
_Static_assert(offsetof(struct fs_rec, type) == 0, "fs_rec.type");
_Static_assert(offsetof(struct fs_rec, aux) == 1, "fs_rec.aux");
_Static_assert(offsetof(struct fs_rec, layer) == 2, "fs_rec.layer");
_Static_assert(offsetof(struct fs_rec, expert) == 4, "fs_rec.expert");
_Static_assert(offsetof(struct fs_rec, card) == 6, "fs_rec.card");
_Static_assert(offsetof(struct fs_rec, window) == 8, "fs_rec.window");
_Static_assert(offsetof(struct fs_rec, value) == 12, "fs_rec.value");

#endif /* FS_PROTO_H */
