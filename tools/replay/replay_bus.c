/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_bus.c: the virtual bus of one card and the ready words the engine
 * reads: fs-replay's backend under the hot engine (daemon/engine/fse.h).
 * Copies go over the link one after another at its full speed (the core
 * plans with its share of it); a copy's bytes are in at `done`
 * (bytes / GB/s after it got the link, common/fs_pace.h), and the engine
 * tells the core then (fse_done.at: fsr_copy_done at that virtual time).
 *
 * The landing delay: a copy wanted for a later window (recency, static)
 * becomes usable no earlier than `delay` windows after the window that
 * wanted it, however fast the bus is, modelling a slower path from a miss
 * to a usable slot (the discussion measured its ring on a path that landed
 * 2-3 windows late).  Predicted copies and the profile's fill are usable
 * as soon as their bytes are in.  Delay 0 (--delay 0, the agreement
 * test's): every copy is usable as soon as its bytes are in, as on
 * foresightd's host backend.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs_pace.h"
#include "replay_bus.h"

int replay_bus_init(struct replay_bus *b, uint32_t slots, uint32_t cap, double gbps, uint32_t delay)
{
	memset(b, 0, sizeof(*b));
	b->bytes_per_ns = gbps;
	b->delay = delay;
	b->cap = cap;
	b->nslots = slots;
	b->q = calloc(cap, sizeof(*b->q));
	b->issued = calloc(slots, sizeof(uint32_t));
	b->ready = calloc(slots, sizeof(uint32_t));
	b->pend_win = calloc(slots, sizeof(uint32_t));
	b->pend_gen = calloc(slots, sizeof(uint32_t));
	/* A slot is reused at most once a window (the grace period), so a
	 * cancelled entry and a new one fit in twice the slots. */
	b->pend = calloc(2 * (size_t)slots, sizeof(uint32_t));
	if (!b->q || !b->issued || !b->ready || !b->pend_win || !b->pend_gen || !b->pend) {
		replay_bus_free(b);
		return -ENOMEM;
	}
	return 0;
}

void replay_bus_free(struct replay_bus *b)
{
	free(b->q);
	free(b->issued);
	free(b->ready);
	free(b->pend_win);
	free(b->pend_gen);
	free(b->pend);
	memset(b, 0, sizeof(*b));
}

int replay_bus_submit(struct replay_bus *b, const struct fse_copy *cp, uint64_t now)
{
	if (b->n == b->cap || cp->slot >= b->nslots)
		return -ENOBUFS;
	uint64_t start;
	uint64_t done = fs_pace_copy(&b->free_at, now, cp->bytes, b->bytes_per_ns, &start);
	b->ready[cp->slot] = 0;
	b->issued[cp->slot] = cp->gen;
	b->pend_win[cp->slot] = 0; /* a landing still held back is for the old bytes */
	b->q[(b->head + b->n) % b->cap] = (struct replay_flight){cp->core, start, done, cp->bytes};
	b->n++;
	b->submitted++;
	return 0;
}

static int delayed(const struct fsr_copy *cp)
{
	return cp->deadline_ns != UINT64_MAX && !fsr_tier_speculative(cp->tier);
}

unsigned replay_bus_land(struct replay_bus *b, uint64_t now, uint32_t window, struct fse_done *out,
			 unsigned max)
{
	unsigned n = 0;
	while (n < max && b->n > 0 && b->q[b->head].done <= now) {
		const struct replay_flight *f = &b->q[b->head];
		out[n] = (struct fse_done){.card = f->cp.card,
					   .slot = f->cp.slot,
					   .gen = f->cp.gen,
					   .busy_ns = f->done - f->start,
					   .bytes = f->bytes,
					   .at = f->done}; /* 0 only at virtual 0, = now */
		uint32_t usable = f->cp.window + b->delay;
		if (b->delay && delayed(&f->cp) && (int32_t)(usable - window) > 0) {
			if (b->pend_win[f->cp.slot] == 0 && b->npend < 2 * b->nslots)
				b->pend[b->npend++] = f->cp.slot;
			b->pend_win[f->cp.slot] = usable ? usable : 1;
			b->pend_gen[f->cp.slot] = f->cp.gen;
		} else {
			b->ready[f->cp.slot] = f->cp.gen;
		}
		b->head = (b->head + 1) % b->cap;
		b->n--;
		n++;
	}
	return n;
}

void replay_bus_window(struct replay_bus *b, uint32_t window)
{
	for (uint32_t i = 0; i < b->npend;) {
		uint32_t s = b->pend[i];
		if (b->pend_win[s] != 0 && (int32_t)(b->pend_win[s] - window) > 0) {
			i++;
			continue;
		}
		if (b->pend_win[s] != 0 && b->issued[s] == b->pend_gen[s])
			b->ready[s] = b->pend_gen[s];
		b->pend_win[s] = 0; /* usable now, or cancelled by a newer copy */
		b->pend[i] = b->pend[--b->npend];
	}
}

void replay_bus_drop(struct replay_bus *b)
{
	b->head = 0;
	b->n = 0;
	b->npend = 0;
	for (uint32_t s = 0; s < b->nslots; s++) {
		b->pend_win[s] = 0;
		b->ready[s] = 0;
	}
}
