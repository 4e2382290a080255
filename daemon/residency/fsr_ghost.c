/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_ghost.c: ghost lists, the experts each tier evicted lately.
 *
 * Per (card, layer, tier) a ring of the last FSR_GHOST experts the tier
 * evicted at that layer (fsr_slot_evict records them).  A miss on an
 * expert still in a tier's ghost list is a miss that tier would have
 * served had it been larger: ARC's signal (Megiddo and Modha, "ARC: A
 * Self-Tuning, Low Overhead Replacement Cache", FAST 2003) for moving a
 * slot from one tier to another.  What a ghost hit does to the sizes is
 * the tiers' policy (fsr_tiers.c); this file only remembers, and names no
 * tier.  Only the newest `len` entries count, `len` being about the
 * tier's own size there, as ARC keeps each ghost list about as long as
 * its list.
 */
#include "fsr_internal.h"

static uint16_t *ring(struct fsr_card *cd, uint32_t layer, unsigned tier)
{
	return cd->ghost + ((size_t)layer * FSR_NTIERS + tier) * FSR_GHOST;
}

void fsr_ghost_put(struct fsr_card *cd, uint32_t layer, unsigned tier, uint32_t expert)
{
	if (cd->ghost == NULL)
		return;
	uint8_t *h = &cd->ghost_head[layer * FSR_NTIERS + tier];
	ring(cd, layer, tier)[*h] = (uint16_t)expert;
	*h = (uint8_t)((*h + 1u) % FSR_GHOST);
}

int fsr_ghost_take(struct fsr_card *cd, uint32_t layer, unsigned tier, uint32_t expert, uint32_t len)
{
	if (cd->ghost == NULL)
		return 0;
	uint16_t *g = ring(cd, layer, tier);
	uint32_t h = cd->ghost_head[layer * FSR_NTIERS + tier];
	if (len > FSR_GHOST)
		len = FSR_GHOST;
	for (uint32_t i = 1; i <= len; i++) {
		uint32_t at = (h + FSR_GHOST - i) % FSR_GHOST;
		if (g[at] == expert) {
			g[at] = FSR_GHOST_EMPTY; /* counted once, as ARC moves it out */
			return 1;
		}
	}
	return 0;
}
