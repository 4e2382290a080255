/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsl_stage.h: which of a layer's missed experts are staged, decided the
 * same way by the copy kernel (every block), by the route kernel that then
 * points the tables at the copies, and by the host stand-in: the distinct
 * experts of the layer's ids, in id order, whose poster-role entry is in
 * the arena, the first stage_cap of them.  The tables are read before any
 * is changed (the copy kernel changes none; the route kernel patches after
 * it has read them), so every caller sees the same list.
 */
#ifndef FSL_STAGE_H
#define FSL_STAGE_H

#include <stdint.h>

#include "fsl.h"

#ifdef __CUDACC__
#define FSL_HD __host__ __device__
#else
#define FSL_HD
#endif

static FSL_HD inline int fsl_in_arena(const struct fsl_route *r, const void *p)
{
	uint64_t a = (uint64_t)(uintptr_t)p;
	return a >= r->arena_dev && a < r->arena_dev + r->arena_bytes;
}

/* The staged experts into list[0..n), n returned (0 when staging is off or
 * the layer has too many ids). */
static FSL_HD inline uint32_t fsl_stage_list(const struct fsl_route *r, uint32_t *list)
{
	const int64_t n = r->n_used * r->n_tokens;
	uint32_t k = 0;
	if (!r->stage || r->stage_cap == 0 || n > FSL_STAGE_MAX_IDS)
		return 0;
	for (int64_t t = 0; t < n && k < r->stage_cap; t++) {
		const int32_t e = r->ids[t % r->n_used + (t / r->n_used) * r->ids_stride];
		if (e < 0 || (uint32_t)e >= r->experts || !fsl_in_arena(r, r->table[e]))
			continue;
		uint32_t m = 0;
		while (m < k && list[m] != (uint32_t)e)
			m++;
		if (m == k)
			list[k++] = (uint32_t)e;
	}
	return k;
}

/* Where staged expert m's blob starts in the arena (the poster entry less
 * its part's offset). */
static FSL_HD inline const uint8_t *fsl_stage_src(const struct fsl_route *r, uint32_t e)
{
	return (const uint8_t *)r->table[e] - r->part_off[r->poster_role - 1];
}

#endif /* FSL_STAGE_H */
