/* SPDX-License-Identifier: Apache-2.0 */
/* fsr_epoch.c: the working table as a publishable epoch. */
#include "fsr_internal.h"

int fsr_dirty(const struct fsr *r)
{
	return r->dirty;
}

void fsr_fill(const struct fsr *r, uint64_t *entries)
{
	size_t n = (size_t)r->layers * r->experts;
	for (uint32_t c = 0; c < r->cards; c++) {
		const struct fsr_card *cd = &r->card[c];
		uint64_t *e = entries + (size_t)c * n;
		for (size_t i = 0; i < n; i++) {
			uint32_t s = cd->slot_of[i];
			e[i] = s == FSR_NONE ? FS_ENTRY_NONE : FS_ENTRY(s, cd->slot[s].gen);
		}
	}
}

uint64_t fsr_publish(struct fsr *r)
{
	/* The daemon counts FS_C_epochs where it stores `current`. */
	r->published++;
	r->dirty = 0;
	r->reclaim_more = 1; /* retirements of this epoch may be free already */
	return r->published;
}

uint64_t fsr_epoch(const struct fsr *r)
{
	return r->published;
}
