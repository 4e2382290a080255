/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_cards.c: cards that go down.
 *
 * A card goes down when its backend finds it broken (the CUDA backend: a
 * failed cudaMemcpyAsync, a sticky error on one of its streams) or when an
 * admin takes it down (`fsctl card down N`, the `card` verb: to drain it, or
 * to emulate a lost card on hardware that must not be reset).  Both go
 * through fsd_card_down(), callable from any thread: it records the card
 * and the reason under cmd_lock and wakes the hot thread, the residency
 * core's only caller, which applies it at the start of its next pass:
 *
 *  1. fsd_cards_apply: the core drops the card (fsr_card_down: nothing of
 *     it in the working table, no copy to it again, its layers' homes to
 *     live cards) and the backend forgets its copies (backend->card_down);
 *     the core marks itself dirty, so the next epoch goes out at once;
 *  2. fsd_cards_published, right after that epoch is published: the card's
 *     bits leave peer_reach, then a release store of the header's
 *     cards_down.  An engine that sees the bit (acquire) and then acquires
 *     a view therefore holds an epoch that maps nothing to the card; the
 *     client library also answers every lookup on a card whose bit is set
 *     "not resident", whatever epoch the view holds.
 *
 * The grace period is untouched: the card's slots leave the table as
 * evicted slots do, and readers holding an older epoch keep their window.
 * The daemon neither reuses nor frees the card's memory (the pool stays
 * allocated until exit).  After a real loss or reset that memory may be
 * gone already: an engine that reads a slot of the card through an epoch
 * from before sees its own CUDA call fail, in its own context (its
 * kernels on that card fail anyway); that is the engine's to handle, by
 * recomputing from the arena.  A card stays down until the daemon
 * restarts: nothing here clears a bit.  Every card may go down; engines
 * then run every expert on the CPU path.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fsd.h"

int fsd_card_down(struct fsd *d, uint32_t card, const char *reason)
{
	if (card >= d->cfg.cards || card >= FS_MAX_CARDS)
		return -EINVAL;
	if (!reason || !*reason)
		reason = "no reason given";
	pthread_mutex_lock(&d->cmd_lock);
	uint32_t down = fs_load_relaxed(&d->cards_down);
	if (down >> card & 1u) {
		pthread_mutex_unlock(&d->cmd_lock);
		return -EALREADY;
	}
	snprintf(d->card_reason[card], sizeof(d->card_reason[card]), "%s", reason);
	fs_store_relaxed(&d->cards_down, down | 1u << card);
	pthread_mutex_unlock(&d->cmd_lock);
	fsd_log(FSD_ERR,
		"card %u is down: %s; engines get none of its slots from the next epoch on, its copies are "
		"abandoned, and it stays down until foresightd restarts",
		card, reason);
	fsd_hot_wake(d);
	return 0;
}

unsigned fsd_cards_apply(struct fsd *d)
{
	uint32_t want = fs_load_relaxed(&d->cards_down), todo = want & ~d->cards_applied;
	if (!todo)
		return 0;
	unsigned n = 0;
	for (uint32_t c = 0; c < d->cfg.cards; c++) {
		if (!(todo >> c & 1u))
			continue;
		(void)fsr_card_down(d->core, c); /* -EALREADY cannot happen: applied once */
		if (d->backend->card_down)
			d->backend->card_down(d, c);
		n++;
	}
	d->cards_applied |= todo;
	d->cards_unpub |= todo;
	return n;
}

void fsd_cards_published(struct fsd *d, uint64_t epoch)
{
	uint32_t m = d->cards_unpub;
	if (!m)
		return;
	d->cards_unpub = 0;
	struct fs_daemon_hdr *h = d->dh;
	for (uint32_t i = 0; i < d->cfg.cards; i++) {
		uint16_t r = fs_load_relaxed(&h->peer_reach[i]);
		fs_store_relaxed(&h->peer_reach[i], (uint16_t)(m >> i & 1u ? 0u : r & ~m));
	}
	fs_store_release(&h->cards_down, fs_load_relaxed(&h->cards_down) | m);
	pthread_mutex_lock(&d->cmd_lock);
	for (uint32_t i = 0; i < d->cfg.cards; i++)
		if (m >> i & 1u)
			d->card_down_epoch[i] = epoch;
	pthread_mutex_unlock(&d->cmd_lock);
	for (uint32_t i = 0; i < d->cfg.cards; i++)
		if (m >> i & 1u)
			fsd_log(FSD_INFO, "card %u: epoch %llu is the first without it; engines see it down",
				i, (unsigned long long)epoch);
}

int fsd_card_state(struct fsd *d, uint32_t card, char *reason, size_t len, uint64_t *epoch)
{
	if (card >= d->cfg.cards || card >= FS_MAX_CARDS)
		return 0;
	pthread_mutex_lock(&d->cmd_lock);
	int down = fs_load_relaxed(&d->cards_down) >> card & 1u;
	if (down && reason && len)
		snprintf(reason, len, "%s", d->card_reason[card]);
	if (epoch)
		*epoch = down ? d->card_down_epoch[card] : 0;
	pthread_mutex_unlock(&d->cmd_lock);
	return down;
}

struct down_arg {
	uint32_t card;
	const char *reason;
};

/* On the hot thread (fsd_hot_call): the request, applied at once. */
static int down_on_hot(struct fsd *d, void *p)
{
	const struct down_arg *a = p;
	int r = fsd_card_down(d, a->card, a->reason);
	if (r == 0)
		fsd_cards_apply(d);
	return r;
}

int fsd_card_down_sync(struct fsd *d, uint32_t card, const char *reason)
{
	struct down_arg a = {card, reason};
	return fsd_hot_call(d, down_on_hot, &a);
}
