/* SPDX-License-Identifier: Apache-2.0 */
/* replay_bus.h: the virtual bus and the engine's ready words (replay_bus.c). */
#ifndef REPLAY_BUS_H
#define REPLAY_BUS_H

#include <stdint.h>

#include "fsr.h"

struct replay_flight {
	struct fsr_copy cp;
	uint64_t done; /* virtual ns when its bytes are in */
};

struct replay_bus {
	double bytes_per_ns; /* the link; 0: copies land at once */
	uint32_t delay;      /* windows before a cross-window copy is usable */
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
/* Hand a copy to the bus at `now` (the slot's ready word goes to 0 first,
 * as the backend's does).  -ENOBUFS when the queue is full. */
int replay_bus_submit(struct replay_bus *b, const struct fsr_copy *cp, uint64_t now);
/* Land every copy done by `now` in the core; returns how many. */
unsigned replay_bus_land(struct replay_bus *b, struct fsr *r, uint64_t now, uint32_t window);
/* A new window: landings held back by the landing delay become usable. */
void replay_bus_window(struct replay_bus *b, uint32_t window);
/* The engine's check of a ready word. */
static inline int replay_bus_ready(const struct replay_bus *b, uint32_t slot, uint32_t gen)
{
	return slot < b->nslots && gen != 0 && b->ready[slot] == gen;
}

#endif /* REPLAY_BUS_H */
