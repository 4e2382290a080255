/* SPDX-License-Identifier: Apache-2.0 */
/* replay_bus.h: one card's virtual bus and the engine's ready words
 * (replay_bus.c): fs-replay's backend under the hot engine (fse.h). */
#ifndef REPLAY_BUS_H
#define REPLAY_BUS_H

#include <stdint.h>

#include "fse.h"
#include "fsr.h"

struct replay_flight {
	struct fsr_copy cp;
	uint64_t start, done; /* virtual ns: on the link, bytes in */
	uint64_t bytes;
};

struct replay_bus {
	double bytes_per_ns; /* the link; 0: copies land at once */
	uint32_t delay;      /* windows before a cross-window copy is usable (0: when landed) */
	uint64_t free_at;
	struct replay_flight *q; /* FIFO, done times non-decreasing */
	uint32_t cap, head, n;
	uint32_t nslots;
	uint32_t *issued;   /* [slots]: gen of the newest copy into the slot */
	uint32_t *ready;    /* [slots]: the ready word: gen the engine may use, 0 none */
	uint32_t *pend_win; /* [slots]: landed, usable from this window on (0: none) */
	uint32_t *pend_gen; /* [slots]: the gen that landed */
	uint32_t *pend;     /* slots with a pending landing */
	uint32_t npend;
	uint64_t submitted;
};

int replay_bus_init(struct replay_bus *b, uint32_t slots, uint32_t cap, double gbps, uint32_t delay);
void replay_bus_free(struct replay_bus *b);
/* Hand a copy (the engine's: its length is cp->bytes) to the bus at `now`
 * (the slot's ready word goes to 0 first, as the backend's does).
 * -ENOBUFS when the queue is full. */
int replay_bus_submit(struct replay_bus *b, const struct fse_copy *cp, uint64_t now);
/* The copies done by `now`, at most max, into out (each with the virtual
 * time its bytes were in); returns how many. */
unsigned replay_bus_land(struct replay_bus *b, uint64_t now, uint32_t window, struct fse_done *out,
			 unsigned max);
/* The card went down: forget every copy queued or in flight. */
void replay_bus_drop(struct replay_bus *b);
/* A new window: landings held back by the landing delay become usable. */
void replay_bus_window(struct replay_bus *b, uint32_t window);
/* The engine's check of a ready word. */
static inline int replay_bus_ready(const struct replay_bus *b, uint32_t slot, uint32_t gen)
{
	return slot < b->nslots && gen != 0 && b->ready[slot] == gen;
}

#endif /* REPLAY_BUS_H */
