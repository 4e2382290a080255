/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fse_cards.c: cards that go down, the one record of it.
 *
 * A card goes down when its backend finds it broken (the CUDA backend: a
 * failed cudaMemcpyAsync, a sticky error on one of its streams) or when an
 * admin takes it down (`fsctl card down N`).  Both call fse_card_down(),
 * from any thread: it records the card and the reason under the engine's
 * lock and wakes the engine, the residency core's only caller, which
 * applies it at the start of its next pass:
 *
 *  1. fse_cards_apply: the core drops the card (fsr_card_down: nothing of
 *     it in the working table, no copy to it again, its layers' homes to
 *     live cards) and the backend forgets its copies (card_down); the core
 *     marks itself dirty, so the next epoch goes out at once;
 *  2. fse_cards_published, right after that epoch is published: the card's
 *     bits leave peer_reach, then a release store of the header's
 *     cards_down.  An engine that sees the bit (acquire) and then acquires
 *     a view therefore holds an epoch that maps nothing to the card; the
 *     client library also answers every lookup on a card whose bit is set
 *     "not resident", whatever epoch the view holds.
 *
 * Backends keep no down flag of their own: the engine submits nothing to
 * a card reported down (fse_pass.c checks this word before each copy),
 * and a backend that asks reads fse_cards_down().  The grace period is
 * untouched: the card's slots leave the table as evicted slots do.  A card
 * stays down for the engine's life: nothing here clears a bit.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fse_internal.h"

int fse_card_down(struct fse *e, uint32_t card, const char *reason)
{
	if (card >= e->cfg.cards || card >= FS_MAX_CARDS)
		return -EINVAL;
	if (!reason || !*reason)
		reason = "no reason given";
	pthread_mutex_lock(&e->lock);
	uint32_t down = fs_load_relaxed(&e->cards_down);
	if (down >> card & 1u) {
		pthread_mutex_unlock(&e->lock);
		return -EALREADY;
	}
	snprintf(e->card_reason[card], sizeof(e->card_reason[card]), "%s", reason);
	fs_store_relaxed(&e->cards_down, down | 1u << card);
	pthread_mutex_unlock(&e->lock);
	fse_note(e, &(struct fse_notice){.kind = FSE_NOTE_CARD_DOWN, .card = card, .text = reason});
	fse_wake(e);
	return 0;
}

uint32_t fse_cards_down(const struct fse *e)
{
	return fs_load_relaxed(&e->cards_down);
}

uint32_t fse_cards_applied(const struct fse *e, uint32_t *unpub)
{
	if (unpub)
		*unpub = e->cards_unpub;
	return e->cards_applied;
}

unsigned fse_cards_apply(struct fse *e)
{
	uint32_t want = fs_load_relaxed(&e->cards_down), todo = want & ~e->cards_applied;
	if (!todo)
		return 0;
	unsigned n = 0;
	for (uint32_t c = 0; c < e->cfg.cards; c++) {
		if (!(todo >> c & 1u))
			continue;
		(void)fsr_card_down(e->core, c); /* -EALREADY cannot happen: applied once */
		if (e->cfg.backend.card_down)
			e->cfg.backend.card_down(e->cfg.backend.ctx, c);
		n++;
	}
	e->cards_applied |= todo;
	e->cards_unpub |= todo;
	return n;
}

void fse_cards_published(struct fse *e, uint64_t epoch)
{
	uint32_t m = e->cards_unpub;
	if (!m)
		return;
	e->cards_unpub = 0;
	struct fs_daemon_hdr *h = e->dh;
	for (uint32_t i = 0; i < e->cfg.cards; i++) {
		uint16_t r = fs_load_relaxed(&h->peer_reach[i]);
		fs_store_relaxed(&h->peer_reach[i], (uint16_t)(m >> i & 1u ? 0u : r & ~m));
	}
	fs_store_release(&h->cards_down, fs_load_relaxed(&h->cards_down) | m);
	pthread_mutex_lock(&e->lock);
	for (uint32_t i = 0; i < e->cfg.cards; i++)
		if (m >> i & 1u)
			e->card_down_epoch[i] = epoch;
	pthread_mutex_unlock(&e->lock);
	for (uint32_t i = 0; i < e->cfg.cards; i++)
		if (m >> i & 1u)
			fse_note(e,
				 &(struct fse_notice){.kind = FSE_NOTE_CARD_GONE, .card = i, .epoch = epoch});
}

int fse_card_state(struct fse *e, uint32_t card, char *reason, size_t len, uint64_t *epoch)
{
	if (card >= e->cfg.cards || card >= FS_MAX_CARDS)
		return 0;
	pthread_mutex_lock(&e->lock);
	int down = fs_load_relaxed(&e->cards_down) >> card & 1u;
	if (down && reason && len)
		snprintf(reason, len, "%s", e->card_reason[card]);
	if (epoch)
		*epoch = down ? e->card_down_epoch[card] : 0;
	pthread_mutex_unlock(&e->lock);
	return down;
}
