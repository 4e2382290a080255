/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_bound.h: the clairvoyant bound, what a policy that knows all of
 * the future routing could do with these slots and this bus.
 *
 * It knows every window's routing in advance; it evicts the resident
 * expert whose next use is furthest away (Belady); an expert that is not
 * resident when its layer runs is a hit if the bus, copying at its full
 * rate from the start of decode and never idle while there is work ahead,
 * can have landed it by then (copies in order of use: earliest deadline
 * first, which lands the most copies of one size in time), and a miss
 * otherwise, computed on the CPU at the model's miss cost.  Decode starts
 * with the slots holding the experts used soonest (the prefill time the
 * other policies spend loading their profile).  Every miss still costs
 * time, so a run is never faster than the zero-miss clock, and at a small
 * slot budget the bus, not the knowledge, sets the bound.
 *
 * The engine bench calls it with its own windows (any number of tokens
 * each); fs-replay calls it with windows of T tokens after the warm-up.
 */
#ifndef REPLAY_BOUND_H
#define REPLAY_BOUND_H

#include <stdint.h>

#include "replay.h"

struct replay_bound_in {
	const struct fs_trace *t;
	uint32_t nwin;         /* windows scored */
	const uint32_t *first; /* [nwin]: first decode token of each */
	const uint8_t *ntok;   /* [nwin]: its tokens (>= 1) */
	uint32_t slots;        /* slots of the one card */
	double intercept_ms;   /* time per window with no miss */
	double miss_ms;        /* per distinct miss per layer-window */
	double bus_gbps;       /* the link; <= 0: no limit */
	uint64_t expert_bytes; /* for layers whose size the trace does not record */
};

/* Fills out (policy "clairvoyant"): hits, misses, copies, bytes, the
 * clock.  0, -EINVAL for bad input, -ENOMEM. */
int replay_bound(const struct replay_bound_in *in, struct replay_result *out);

/* fs-replay's windows: T tokens each from window `warmup` on. */
int replay_bound_run(const struct replay_input *in, const struct replay_model *m, struct replay_result *out);

#endif /* REPLAY_BOUND_H */
