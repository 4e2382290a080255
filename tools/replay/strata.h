/* SPDX-License-Identifier: Apache-2.0 */
/*
 * strata.h: the `strata-adapt` peer's rules, one owner for both of its
 * runs: fs-replay's (replay_strata.c, on the virtual clock) and
 * fs-engine-bench's (bench/engine/eb_pool.c, on a GPU or the host).  Our
 * reading of Strata's adapt (its --adapt-every and --adapt-swaps; the seed
 * discussion, background/foresight-discussion.md, section 2: "a mimic of
 * the static profile plus your adapt rules"):
 *
 *  - start: the static profile's slots (the hottest experts by profile
 *    count), resident before decode; the scores seeded with the profile
 *    scaled to the scores' steady-state mass (strata_seed);
 *  - every STRATA_EVERY windows: score = decay x score + the token uses
 *    since the last adapt (strata_decay); then the best-scored experts not
 *    resident (score >= 1) replace the worst-scored resident ones while the
 *    newcomer scores higher, at most STRATA_SWAPS (strata_swaps);
 *  - a swap's victim leaves at once; its newcomer crosses the bus and is a
 *    hit only once landed (the caller's: each run has its own bus).
 */
#ifndef FS_STRATA_H
#define FS_STRATA_H

#include <stddef.h>
#include <stdint.h>

#define STRATA_EVERY 4u  /* windows between adaptations */
#define STRATA_DECAY 0.7 /* the scores' decay per adaptation */
#define STRATA_SWAPS 96u /* swaps per adaptation at most */

/* scores[i] = profile[i] scaled so that they sum to the decayed scores'
 * steady-state mass: every adaptation's token uses (every x tokens per
 * window x top-k x layers) / (1 - decay). */
void strata_seed(float *score, const uint32_t *profile, size_t n, uint32_t every, uint32_t tokens_per_window,
		 uint32_t topk, uint32_t layers, double decay);

/* score = decay x score + uses; the uses start again from 0. */
void strata_decay(float *score, float *uses, size_t n, double decay);

/* What an expert is at an adaptation. */
enum strata_state {
	STRATA_OUT,  /* not resident: a candidate when its score is >= 1 */
	STRATA_IN,   /* resident and landed: a victim */
	STRATA_BUSY, /* neither (its copy in flight, or not this card's) */
};

struct strata_ranked {
	float score;
	uint32_t idx;
};

/* One adaptation's swaps over n experts: the candidates best first, the
 * victims worst first (ties by index), paired while the candidate scores
 * higher; swap(ctx, in, out) makes one (0: done and counted, 1: skipped,
 * not counted, < 0: an error, returned at once) until max_swaps are done.
 * cand and vict: scratch of n each.  Returns the swaps made, or swap's
 * error. */
int strata_swaps(const float *score, size_t n, enum strata_state (*state)(void *ctx, size_t i),
		 int (*swap)(void *ctx, uint32_t in, uint32_t out), void *ctx, uint32_t max_swaps,
		 struct strata_ranked *cand, struct strata_ranked *vict);

#endif /* FS_STRATA_H */
