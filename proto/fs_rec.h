/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_rec.h: what a valid record is, decided in one place.
 *
 * Every side that makes or takes a record asks these functions: the client
 * library before it posts (client/fs_post.c, client/fs_dev_ring.c), the
 * ring consumer for the structure (fs_ring_consume), and the daemon's hot
 * thread for the model's bounds (daemon/fsd_hot.c).  So a record the
 * client accepts is a record the daemon accepts, for the same model.
 *
 * Plain C (no libm: the score is judged from its bits, so -ffast-math or a
 * CUDA build cannot change the answer); included from C, C++ and CUDA.
 */
#ifndef FS_REC_H
#define FS_REC_H

#include <stdint.h>
#include <string.h>

#include "fs_proto.h"

/* The bounds a record is checked against: the served model and cards. */
struct fs_rec_model {
	uint32_t layers, experts, cards;
};

/* Structure alone (no model): type known, aux in range for the type. */
static inline int fs_rec_valid(const struct fs_rec *r)
{
	switch (r->type) {
	case FS_REC_PREDICT:
		return FS_PRED_HORIZON(r->aux) >= 1 && FS_PRED_SOURCE(r->aux) <= FS_SRC_MAX;
	case FS_REC_USAGE:
		return r->aux <= FS_USE_HIT;
	case FS_REC_WIN_BEGIN:
	case FS_REC_WIN_END:
		return r->aux == 0;
	default:
		return 0;
	}
}

/* A PREDICT score (binary32 bits): finite and >= 0 (-0 counts as 0).
 * NaN, +Inf, -Inf and every negative number are out. */
static inline int fs_rec_score_ok(uint32_t bits)
{
	if ((bits & 0x7f800000u) == 0x7f800000u) /* Inf or NaN */
		return 0;
	return !(bits & 0x80000000u) || bits == 0x80000000u;
}

/* The fields the model bounds: layer, expert and card (FS_CARD_NONE is
 * any card), and a PREDICT's score.  Window records carry none of these. */
static inline int fs_rec_fits(const struct fs_rec *r, const struct fs_rec_model *m)
{
	if (r->type == FS_REC_WIN_BEGIN || r->type == FS_REC_WIN_END)
		return 1;
	if (r->layer >= m->layers || r->expert >= m->experts)
		return 0;
	if (r->card != FS_CARD_NONE && r->card >= m->cards)
		return 0;
	return r->type != FS_REC_PREDICT || fs_rec_score_ok(r->value);
}

/* The whole check: structure, then the model's bounds. */
static inline int fs_rec_check(const struct fs_rec *r, const struct fs_rec_model *m)
{
	return fs_rec_valid(r) && fs_rec_fits(r, m);
}

#endif /* FS_REC_H */
