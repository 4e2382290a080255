/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_cards.c: the daemon's cards that go down.
 *
 * A card goes down when its backend finds it broken (the CUDA backend: a
 * failed cudaMemcpyAsync, a sticky error on one of its streams; it calls
 * the engine's card_down callback) or when an admin takes it down (`fsctl card down N`, the `card` verb: to drain it, or
 * to emulate a lost card on hardware that must not be reset).  The one
 * record of it is the hot engine's (daemon/engine/fse_cards.c: what
 * happens, in which order, and what engines see); this file is the
 * daemon's door to it.
 *
 * The daemon neither reuses nor frees the card's memory (the pool stays
 * allocated until exit).  After a real loss or reset that memory may be
 * gone already: an engine that reads a slot of the card through an epoch
 * from before sees its own CUDA call fail, in its own context (its
 * kernels on that card fail anyway); that is the engine's to handle, by
 * recomputing from the arena.  A card stays down until the daemon
 * restarts: nothing clears it.  Every card may go down; engines then run
 * every expert on the CPU path.
 */
#include <errno.h>

#include "fsd.h"
#include "fsd_hot.h"
#include "fse.h"

int fsd_card_down(struct fsd *d, uint32_t card, const char *reason)
{
	if (!d->eng)
		return card >= d->cfg.cards ? -EINVAL : -EAGAIN;
	return fse_card_down(d->eng, card, reason);
}

int fsd_card_state(struct fsd *d, uint32_t card, char *reason, size_t len, uint64_t *epoch)
{
	if (!d->eng) {
		if (epoch)
			*epoch = 0;
		return 0;
	}
	return fse_card_state(d->eng, card, reason, len, epoch);
}

struct down_arg {
	uint32_t card;
	const char *reason;
};

/* On the hot thread (fsd_hot_call): the request, applied at once. */
static int down_on_hot(struct fsd *d, void *p)
{
	const struct down_arg *a = p;
	int r = fse_card_down(d->eng, a->card, a->reason);
	if (r == 0)
		fse_cards_apply(d->eng);
	return r;
}

int fsd_card_down_sync(struct fsd *d, uint32_t card, const char *reason)
{
	struct down_arg a = {card, reason};
	return fsd_hot_call(d, down_on_hot, &a);
}
