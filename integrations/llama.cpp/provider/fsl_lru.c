/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsl_lru.c: the in-process per-layer LRU, the best cache an engine could
 * add alone (llama.cpp PR 27861's shape: a VRAM pool split evenly between
 * the layers, each kept in least-recently-used order), here so that the
 * benchmark compares foresightd with it on the same kernels, the same
 * in-place reads of misses and the same bytes of VRAM.
 *
 * After each evaluation the route kernel leaves the experts every layer
 * used (struct fsl_used); the next evaluation's begin moves them to the
 * front of their layer and copies in those the layer lacks, on the
 * provider's own copy stream, over the least recently used slot that no
 * evaluation still in flight may read.  A slot is in a table only once its
 * copy has landed.  Nothing is prefetched: a miss is read in place when it
 * happens, and copied for next time.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsl_internal.h"

struct lru_slot {
	uint64_t dev;   /* its bytes on the device */
	uint64_t stamp; /* last use (p->seq at the use), 0: free */
	uint64_t kept;  /* the last evaluation whose table named it */
	int32_t expert; /* -1: free */
	int pending;    /* its copy has not landed yet */
};

struct fsl_lru {
	uint32_t per_layer; /* slots of each layer */
	uint64_t slot_bytes;
	uint32_t *seen;         /* [layers]: the window of the bitmap last read */
	int32_t *slot_of;       /* [layers * experts]: its slot (index in the layer's), or -1 */
	struct lru_slot slot[]; /* [layers * per_layer] */
};

int fsl_lru_open(struct fsl *p, uint64_t mib)
{
	uint64_t max = 0;
	uint32_t moe = 0;
	for (uint32_t l = 0; l < p->layers; l++) {
		uint64_t lmax = 0;
		for (uint32_t e = 0; e < p->experts; e++)
			if (p->blob_bytes[(uint64_t)l * p->experts + e] > lmax)
				lmax = p->blob_bytes[(uint64_t)l * p->experts + e];
		moe += lmax > 0;
		max = lmax > max ? lmax : max;
	}
	if (!moe)
		return fsl_fail(-EINVAL, "the LRU: the model has no experts");
	uint64_t slot_bytes = (max + 255u) & ~(uint64_t)255u;
	uint64_t total = (mib << 20) / slot_bytes;
	uint32_t per = (uint32_t)(total / moe);
	if (per == 0)
		return fsl_fail(-EINVAL, "the LRU: %llu MiB holds %llu experts of %u layers: not one a layer",
				(unsigned long long)mib, (unsigned long long)total, moe);
	if (per > p->experts)
		per = p->experts;
	size_t n = (size_t)p->layers * per;
	struct fsl_lru *u = calloc(1, sizeof(*u) + n * sizeof(u->slot[0]));
	if (!u)
		return fsl_fail(-ENOMEM, "out of memory");
	u->per_layer = per;
	u->slot_bytes = slot_bytes;
	u->seen = calloc(p->layers, sizeof(*u->seen));
	u->slot_of = malloc((size_t)p->layers * p->experts * sizeof(*u->slot_of));
	void *pool = NULL;
	int r = u->seen && u->slot_of ? p->gpu.alloc_dev(p->gpu.ctx, n * slot_bytes, &pool) : -ENOMEM;
	if (r < 0) {
		free(u->seen);
		free(u->slot_of);
		free(u);
		return fsl_fail(r, "the LRU: allocating %llu MiB of VRAM failed", (unsigned long long)mib);
	}
	for (size_t i = 0; i < (size_t)p->layers * p->experts; i++)
		u->slot_of[i] = -1;
	for (size_t i = 0; i < n; i++)
		u->slot[i] = (struct lru_slot){.dev = (uint64_t)(uintptr_t)pool + i * slot_bytes,
					       .expert = -1};
	p->lru = u;
	if (p->o.log)
		fprintf(stderr,
			"foresight-llama: an in-process LRU of %u experts per layer (%llu MiB), not foresightd's tier\n",
			per, (unsigned long long)mib);
	return 0;
}

void fsl_lru_close(struct fsl *p)
{
	struct fsl_lru *u = p->lru;
	if (!u)
		return;
	free(u->seen);
	free(u->slot_of);
	free(u);
	p->lru = NULL;
}

/* The layer's slot to fill: a free one, else the least recently used that
 * no evaluation in flight may read and whose own copy has landed; -1 when
 * every slot is busy (the expert is then read in place again next time). */
static int victim(struct fsl *p, struct lru_slot *s, uint32_t n)
{
	int best = -1;
	for (uint32_t i = 0; i < n; i++) {
		if (s[i].expert < 0)
			return (int)i;
		if (s[i].kept > p->passed_seq || s[i].pending)
			continue;
		if (best < 0 || s[i].stamp < s[best].stamp)
			best = (int)i;
	}
	return best;
}

void fsl_lru_learn(struct fsl *p)
{
	struct fsl_lru *u = p->lru;
	/* Only after every evaluation so far is done: the bitmaps are then the
	 * newest evaluation's, whole (in decode, llama.cpp waits for each
	 * token, so this is every time). */
	if (p->passed_seq + 1 < p->seq)
		return;
	for (uint32_t l = 0; l < p->layers; l++) {
		const volatile uint32_t *w = p->used + (uint64_t)l * p->used_words;
		uint32_t win = w[FSL_USED_WINDOW];
		if (win == 0 || win == u->seen[l])
			continue;
		u->seen[l] = win;
		struct lru_slot *s = &u->slot[(uint64_t)l * u->per_layer];
		int32_t *slot_of = &u->slot_of[(uint64_t)l * p->experts];
		for (uint32_t e = 0; e < p->experts; e++) {
			if (!(w[FSL_USED_BITS + e / 32] >> (e % 32) & 1u))
				continue;
			if (slot_of[e] >= 0) {
				s[slot_of[e]].stamp = p->seq;
				continue;
			}
			int v = victim(p, s, u->per_layer);
			if (v < 0)
				continue;
			if (s[v].expert >= 0)
				slot_of[s[v].expert] = -1;
			uint64_t i = (uint64_t)l * p->experts + e;
			s[v] = (struct lru_slot){
				.dev = s[v].dev, .stamp = p->seq, .expert = (int32_t)e, .pending = 1};
			slot_of[e] = v;
			if (p->gpu.copy_in(p->gpu.ctx, (void *)(uintptr_t)s[v].dev, p->arena + p->blob_off[i],
					   p->blob_bytes[i],
					   (uint32_t)((uint64_t)l * u->per_layer + (uint32_t)v)) < 0) {
				slot_of[e] = -1;
				s[v].expert = -1;
			}
		}
	}
}

uint64_t fsl_lru_place(struct fsl *p, uint32_t layer, uint32_t expert, uint64_t seq)
{
	struct fsl_lru *u = p->lru;
	int32_t v = u->slot_of[(uint64_t)layer * p->experts + expert];
	if (v < 0)
		return 0;
	uint32_t k = layer * u->per_layer + (uint32_t)v;
	struct lru_slot *s = &u->slot[k];
	if (s->pending) {
		if (p->gpu.copy_done(p->gpu.ctx, k) != 1)
			return 0;
		s->pending = 0;
	}
	s->kept = seq;
	return s->dev;
}
