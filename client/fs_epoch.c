/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_epoch.c: acquire, release and lookup.  The protocol is in
 * proto/fs_regions.h; here it is, line by line.  No system call, no lock.
 */
#include <errno.h>
#include <string.h>

#include "fs_client_internal.h"

static void view_empty(struct fs_view *v)
{
	v->epoch = 0;
	v->att_ = NULL;
	v->tab_ = NULL;
	v->hold_ = -1;
}

struct fs_arena_map *fs_arena_get(const struct fs_client *c)
{
	for (;;) {
		struct fs_arena_map *m = __atomic_load_n(&c->arena_cur, __ATOMIC_SEQ_CST);
		if (!m)
			return NULL;
		__atomic_fetch_add(&m->pins, 1, __ATOMIC_SEQ_CST);
		/* Still current after the pin: the background thread reads the
		 * pins only after it moved c->arena_cur on (arena_reap), so it
		 * sees ours.  Otherwise it may be unmapped already: let it go. */
		if (__atomic_load_n(&c->arena_cur, __ATOMIC_SEQ_CST) == m)
			return m;
		__atomic_fetch_sub(&m->pins, 1, __ATOMIC_RELEASE);
	}
}

void fs_arena_put(struct fs_arena_map *m)
{
	if (m)
		__atomic_fetch_sub(&m->pins, 1, __ATOMIC_RELEASE);
}

/* A view with no table.  It pins the arena current now (kept in tab_,
 * which no lookup reads while att_ is NULL): the engine computes the
 * window from the arena, and a re-attach to another arena meanwhile must
 * not unmap the bytes it reads (fs_release lets it go). */
static void view_empty_pinned(const fs_client *c, struct fs_view *v)
{
	view_empty(v);
	v->tab_ = (const uint64_t *)(const void *)fs_arena_get(c);
}

static const uint64_t *buf_entries(const struct fs_att *a, uint32_t buf)
{
	const char *b = (const char *)a->dh + a->dh->off_epochs + (uint64_t)buf * a->dh->epoch_buf_bytes;
	return (const uint64_t *)(b + sizeof(struct fs_epoch_buf_hdr));
}

static const struct fs_epoch_buf_hdr *buf_hdr(const struct fs_att *a, uint32_t buf)
{
	return (const struct fs_epoch_buf_hdr *)((const char *)a->dh + a->dh->off_epochs +
						 (uint64_t)buf * a->dh->epoch_buf_bytes);
}

int fs_acquire(fs_client *c, struct fs_view *v)
{
	__atomic_fetch_add(&c->qs, 1, __ATOMIC_RELEASE); /* quiescent point */
	view_empty(v);
	struct fs_att *a = fs_load_acquire(&c->att);
	if (!a || fs_load_acquire(&a->dead) || fs_load_acquire(&a->dh->state) != FS_DAEMON_RUNNING ||
	    fs_load_acquire(&a->ch->state) != FS_CLIENT_ATTACHED) {
		view_empty_pinned(c, v);
		return 0; /* daemon gone or we were dropped: a view that misses everything */
	}
	if (a->hold_used == (1u << FS_MAX_HOLDS) - 1)
		return -EBUSY;
	int k = __builtin_ctz(~a->hold_used);
	uint64_t cur;
	for (;;) {
		cur = fs_load_acquire(&a->dh->current);
		if (cur == 0) {
			view_empty_pinned(c, v);
			return 0; /* nothing published yet */
		}
		fs_store_relaxed(&a->ch->holds[k], FS_CUR_EPOCH(cur));
		fs_smp_mb(); /* the hold store, before re-reading current */
		if (fs_load_acquire(&a->dh->current) == cur)
			break;
	}
	uint32_t buf = FS_CUR_BUF(cur);
	if (buf >= a->epoch_bufs || fs_load_acquire(&buf_hdr(a, buf)->epoch) != FS_CUR_EPOCH(cur)) {
		fs_store_release(&a->ch->holds[k], 0ull); /* cannot happen with a sane daemon */
		view_empty_pinned(c, v);
		return 0;
	}
	a->hold_used |= 1u << k;
	__atomic_fetch_add(&a->views, 1, __ATOMIC_ACQ_REL);
	v->epoch = FS_CUR_EPOCH(cur);
	v->att_ = a;
	v->tab_ = buf_entries(a, buf);
	v->hold_ = k;
	return 0;
}

void fs_release(fs_client *c, struct fs_view *v)
{
	(void)c;
	struct fs_att *a = (struct fs_att *)v->att_;
	if (a && v->hold_ >= 0 && v->hold_ < (int)FS_MAX_HOLDS) {
		fs_store_release(&a->ch->holds[v->hold_], 0ull);
		/* A slot may be waiting for this release (its grace period): if the
		 * daemon sleeps, wake it, as a post would.  One fence, and a system
		 * call only when the daemon is asleep. */
		fs_smp_mb();
		if (fs_unlikely(fs_load_relaxed(&a->prod.hdr->flags) & FS_RING_NEED_WAKEUP))
			fs_ring_wake(a->prod.hdr);
		a->hold_used &= ~(1u << v->hold_);
		__atomic_fetch_sub(&a->views, 1, __ATOMIC_ACQ_REL);
	} else if (!a && v->tab_) {
		fs_arena_put((struct fs_arena_map *)(uintptr_t)v->tab_); /* view_empty_pinned's */
	}
	view_empty(v);
}

static int slot_from_entry(const struct fs_att *a, uint32_t card, uint32_t layer, uint32_t expert, uint64_t e,
			   struct fs_slot *out)
{
	if (e == FS_ENTRY_NONE)
		return 0;
	/* A card that is down (lost, reset, drained): never handed out again,
	 * even through a view from before the epoch that dropped it.  The
	 * table is what guarantees it for newer views; this bit closes the
	 * window for older ones.  One load of a line `current` shares. */
	if (fs_unlikely(fs_load_relaxed(&a->dh->cards_down) >> card & 1u))
		return 0;
	uint32_t slot = FS_ENTRY_SLOT(e), gen = FS_ENTRY_GEN(e);
	if (slot >= a->slots[card] || gen == FS_GEN_NONE)
		return 0;
	if (fs_load_acquire(&a->ready[card][slot]) != gen)
		return 0; /* still loading */
	if (out) {
		const struct fs_arena_entry *ae = &a->arena->idx[(uint64_t)layer * a->experts + expert];
		out->card = card;
		out->slot = slot;
		out->gen = gen;
		uint64_t off = (uint64_t)slot * a->slot_bytes[card];
		out->host = a->pool_base[card] ? a->pool_base[card] + off : NULL;
		out->device = a->dev_base[card] ? (char *)a->dev_base[card] + off : NULL;
		out->bytes = ae->bytes < a->slot_bytes[card] ? ae->bytes : a->slot_bytes[card];
	}
	/* A slot of a layer means its bytes are in the arena: note it now (a
	 * view pins this attachment, so its ready words may be read), so
	 * fs_layer_ready and fs_arena_expert never lag a hit. */
	(void)fs_arena_layer_in(a, a->arena, layer);
	return 1;
}

int fs_lookup(const fs_client *c, const struct fs_view *v, uint32_t card, uint32_t layer, uint32_t expert,
	      struct fs_slot *out)
{
	(void)c;
	const struct fs_att *a = v->att_;
	if (!a || v->epoch == 0 || card >= a->cards || layer >= a->layers || expert >= a->experts)
		return 0;
	/* Dropped by the daemon (e.g. a hold revoked after hold_timeout_ms): our
	 * holds no longer protect anything, so nothing is resident for us. */
	if (fs_unlikely(fs_load_acquire(&a->ch->state) != FS_CLIENT_ATTACHED))
		return 0;
	uint64_t e = fs_load_relaxed(&v->tab_[((uint64_t)card * a->layers + layer) * a->experts + expert]);
	return slot_from_entry(a, card, layer, expert, e, out);
}

/*
 * The newest table, through an older hold: its slots are kept for us only
 * once the daemon knows we may read it (our reach, fs_regions.h).  Store
 * the reach (once per epoch), fence, and read only if `current` is still
 * that epoch: either the daemon's next read of our holds sees the reach, or
 * we see the newer epoch and try again with it.  The buffer's seqlock then
 * says whether it was rewritten meanwhile.  0: no such table to read.
 */
static const uint64_t *live_table(const struct fs_att *a, uint64_t *ep_out,
				  const struct fs_epoch_buf_hdr **bh_out)
{
	for (int tries = 0; tries < 4; tries++) {
		uint64_t cur = fs_load_acquire(&a->dh->current);
		uint64_t ep = FS_CUR_EPOCH(cur);
		uint64_t r = fs_load_relaxed(&a->ch->reach);
		if (r < ep) {
			/* A maximum (two threads of one handle must not lower it). */
			while (r < ep && !__atomic_compare_exchange_n(&a->ch->reach, &r, ep, 0,
								      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
				;
			fs_smp_mb(); /* the reach store, before re-reading current */
			if (fs_load_acquire(&a->dh->current) != cur)
				continue;
		}
		uint32_t buf = FS_CUR_BUF(cur);
		if (buf >= a->epoch_bufs)
			return NULL;
		*ep_out = ep;
		*bh_out = buf_hdr(a, buf);
		return buf_entries(a, buf);
	}
	return NULL;
}

int fs_lookup_live(const fs_client *c, const struct fs_view *v, uint32_t card, uint32_t layer,
		   uint32_t expert, struct fs_slot *out)
{
	if (fs_lookup(c, v, card, layer, expert, out))
		return 1;
	const struct fs_att *a = v->att_;
	if (!a || v->epoch == 0 || card >= a->cards || layer >= a->layers || expert >= a->experts)
		return 0;
	/* The newest table maps only slots retired, if ever, after it: our hold
	 * of an older epoch, with our reach, keeps them from being rewritten.
	 * Seqlock read. */
	uint64_t ep;
	const struct fs_epoch_buf_hdr *bh;
	const uint64_t *tab = live_table(a, &ep, &bh);
	if (!tab || fs_load_acquire(&bh->epoch) != ep || ep < v->epoch)
		return 0;
	uint64_t e = fs_load_relaxed(&tab[((uint64_t)card * a->layers + layer) * a->experts + expert]);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (fs_load_relaxed(&bh->epoch) != ep)
		return 0; /* rewritten under us: treat as a miss */
	return slot_from_entry(a, card, layer, expert, e, out);
}

int fs_slot_ready(const fs_client *c, const struct fs_slot *s)
{
	const struct fs_att *a = fs_load_acquire(&c->att);
	if (!a || s->card >= a->cards || s->slot >= a->slots[s->card])
		return 0;
	return fs_load_acquire(&a->ready[s->card][s->slot]) == s->gen;
}

uint64_t fs_slot_issued_ns(const fs_client *c, const struct fs_slot *s)
{
	const struct fs_att *a = fs_load_acquire(&c->att);
	if (!a || s->card >= a->cards || s->slot >= a->slots[s->card])
		return 0;
	const uint64_t *issued = (const uint64_t *)((const char *)a->ready[s->card] +
						    FS_ISSUED_OFFSET(a->slots[s->card]));
	return fs_load_relaxed(&issued[s->slot]);
}

const uint32_t *fs_card_ready_words(const fs_client *c, uint32_t card)
{
	const struct fs_att *a = fs_load_acquire(&c->att);
	return a && card < a->cards ? a->ready[card] : NULL;
}

int fs_arena_layer_in(const struct fs_att *a, struct fs_arena_map *m, uint32_t layer)
{
	if (layer >= FS_MAX_LAYERS) /* layer_in's size, whatever a header said */
		return 0;
	uint64_t bit = 1ull << (layer % 64);
	if (fs_load_acquire(&m->layer_in[layer / 64]) & bit)
		return 1;
	/* Not seen in yet: ask the daemon that fills this arena.  Its word is
	 * FS_LAYER_READY or the layer is not in (0 while loading; any other
	 * value is not trusted either).  No daemon (or another arena's): not
	 * known to be in. */
	if (!a || a->arena != m)
		return 0;
	if (a->layer_ready && fs_load_acquire(&a->layer_ready[layer]) != FS_LAYER_READY)
		return 0;
	__atomic_fetch_or(&m->layer_in[layer / 64], bit, __ATOMIC_RELEASE);
	return 1;
}

int fs_arena_note_ready(const struct fs_att *a)
{
	int all = 1;
	for (uint32_t l = 0; a->arena && l < a->layers && l < a->arena->layers; l++)
		all &= fs_arena_layer_in(a, a->arena, l);
	return all;
}

int fs_layer_ready(const fs_client *c, uint32_t layer)
{
	struct fs_arena_map *m = fs_arena_get(c);
	if (!m)
		return -ENOTCONN;
	/* Only the bits: the attachment (and the daemon region its ready words
	 * are in) may be retired and unmapped under a thread that holds no
	 * view; the background thread turns the words into bits
	 * (fs_arena_note_ready, every period while a layer is not in). */
	int r = layer >= m->layers ? -EINVAL : fs_arena_layer_in(NULL, m, layer);
	fs_arena_put(m);
	return r;
}

int fs_arena_expert(const fs_client *c, uint32_t layer, uint32_t expert, struct fs_expert_blob *out)
{
	/* Pinned while we read it; the bytes stay mapped as foresight.h says
	 * (the view held, or until the next fs_acquire, or fs_arena_pin). */
	struct fs_arena_map *m = fs_arena_get(c);
	if (!m)
		return -ENOTCONN;
	int r = 0;
	if (layer >= m->layers || expert >= m->experts)
		r = -EINVAL;
	/* A layer still loading: the bytes are not there yet (the engine
	 * serves it from its own copy of the model). */
	else if (!fs_arena_layer_in(NULL, m, layer)) /* the bits only: see fs_layer_ready */
		r = -EAGAIN;
	if (r == 0) {
		const struct fs_arena_entry *e = &m->idx[(uint64_t)layer * m->experts + expert];
		out->data = (const uint8_t *)m->ah + e->offset;
		out->bytes = e->bytes;
		out->checksum = e->checksum;
	}
	fs_arena_put(m);
	return r;
}

const void *fs_arena_pin(fs_client *c)
{
	return c ? fs_arena_get(c) : NULL;
}

void fs_arena_unpin(fs_client *c, const void *pin)
{
	(void)c;
	fs_arena_put((struct fs_arena_map *)(uintptr_t)pin);
}

int fs_arena_pin_region(const void *pin, struct fs_arena_region *out)
{
	const struct fs_arena_map *m = pin;
	if (!m || !out)
		return -EINVAL;
	out->base = m->ah;
	out->bytes = m->shm.bytes;
	return 0;
}

uint64_t fs_checksum(const void *p, size_t n)
{
	return fs_fnv1a64(p, n);
}
