/* SPDX-License-Identifier: Apache-2.0 */
/* fs_post.c: records into the ring.  No system call unless the daemon
 * sleeps (one futex wake), no lock, no allocation. */
#include <errno.h>
#include <string.h>

#include "fs_client_internal.h"

/* The record checked as the daemon checks it (proto/fs_rec.h) against
 * the attachment's model: a record that would be counted bad there is
 * refused here, with -EINVAL, and never reaches the ring. */
int fs_rec_post_check(const struct fs_att *a, const struct fs_rec *r)
{
	struct fs_rec_model m = {a->layers, a->experts, a->cards};
	return fs_rec_check(r, &m) ? 0 : -EINVAL;
}

/* Before any attachment: what the record alone can tell (structure, the
 * score); the model's bounds wait for an attachment. */
int fs_rec_arg_check(const struct fs_rec *r)
{
	struct fs_rec_model any = {0x10000u, 0x10000u, 0x10000u};
	return fs_rec_check(r, &any) ? 0 : -EINVAL;
}

static int post(fs_client *c, const struct fs_rec *r)
{
	if (fs_unlikely(fs_rec_arg_check(r) != 0))
		return -EINVAL;
	struct fs_att *a = fs_load_acquire(&c->att);
	if (fs_unlikely(!a || fs_load_relaxed(&a->dead))) {
		__atomic_fetch_add(&c->dropped, 1, __ATOMIC_RELAXED);
		return -ENOTCONN;
	}
	if (fs_unlikely(fs_rec_post_check(a, r) != 0))
		return -EINVAL;
	int rc = fs_ring_post(&a->prod, r);
	if (fs_unlikely(rc < 0)) {
		__atomic_fetch_add(&c->dropped, 1, __ATOMIC_RELAXED);
		fs_store_relaxed(&a->ch->ring_full, fs_load_relaxed(&a->ch->ring_full) + 1);
		return rc;
	}
	fs_store_relaxed(&a->ch->posted, fs_load_relaxed(&a->ch->posted) + 1);
	return 0;
}

int fs_post_predict(fs_client *c, uint32_t window, uint32_t layer, uint32_t expert, uint32_t card,
		    float score, unsigned horizon, enum fs_source src)
{
	/* What does not fit the record's fields; the rest is fs_rec_check's. */
	if (layer > 0xffff || expert > 0xffff || card > 0xffff || horizon > FS_PRED_HORIZON_MAX ||
	    (unsigned)src > FS_SRC_MAX)
		return -EINVAL;
	struct fs_rec r = {.type = FS_REC_PREDICT,
			   .aux = FS_PRED_AUX(horizon, (unsigned)src),
			   .layer = (uint16_t)layer,
			   .expert = (uint16_t)expert,
			   .card = (uint16_t)card,
			   .window = window};
	memcpy(&r.value, &score, sizeof(score));
	return post(c, &r);
}

int fs_post_usage(fs_client *c, uint32_t window, uint32_t layer, uint32_t expert, uint32_t card, int hit)
{
	if (layer > 0xffff || expert > 0xffff || card > 0xffff)
		return -EINVAL;
	struct fs_rec r = {.type = FS_REC_USAGE,
			   .aux = hit ? FS_USE_HIT : FS_USE_MISS,
			   .layer = (uint16_t)layer,
			   .expert = (uint16_t)expert,
			   .card = (uint16_t)card,
			   .window = window};
	return post(c, &r);
}

int fs_window_begin(fs_client *c, uint32_t window, uint32_t tokens)
{
	struct fs_rec r = {.type = FS_REC_WIN_BEGIN, .card = FS_CARD_NONE, .window = window, .value = tokens};
	return post(c, &r);
}

int fs_window_end(fs_client *c, uint32_t window)
{
	struct fs_rec r = {.type = FS_REC_WIN_END, .card = FS_CARD_NONE, .window = window};
	return post(c, &r);
}
