/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsl_internal.h: the provider's state, shared by fsl_core.c (tables from
 * foresightd's epochs) and fsl_lru.c (the in-process LRU, for comparison).
 */
#ifndef FSL_INTERNAL_H
#define FSL_INTERNAL_H

#include "fsl.h"

#define ROLES 4u /* enum fs_part_role 1..4 */
#define HDR_BYTES 256u
#define CHECK_SAMPLE 4096u

struct fsl_hdr {
	uint32_t window;
	uint32_t card;
	uint32_t reserved[HDR_BYTES / 4 - 2];
};
_Static_assert(sizeof(struct fsl_hdr) == HDR_BYTES, "fsl_hdr");

struct fsl_part {
	uint64_t off;   /* in the blob */
	uint64_t bytes; /* one expert's slice */
	int claimed;
};

struct fsl_flight {
	struct fs_view v;
	uint32_t window;
	int busy;
};

struct fsl_lru;

struct fsl {
	fs_client *c;
	struct fsl_gpu gpu;
	struct fsl_opts o;
	uint32_t layers, experts, card;
	const void *pin;
	const uint8_t *arena;
	uint64_t arena_bytes, arena_dev;
	uint64_t *blob_off;    /* [layers * experts]: from the arena's start */
	struct fsl_part *part; /* [layers * ROLES] */
	uint64_t *layer_bytes; /* per expert, over the claimed roles */
	uint8_t *dev;          /* device block: header, then tables */
	uint64_t block_bytes;
	void *stage[FSL_INFLIGHT];
	struct fsl_flight fl[FSL_INFLIGHT];
	unsigned last; /* the flight of the newest begin */
	int open_eval; /* a begin without its end */
	uint32_t window;
	void *ring_desc;
	void *ctr_dev; /* struct fsl_counters */
	struct fsl_stats st;
	int said_device;
	uint64_t seq;        /* evaluations begun */
	uint64_t passed_seq; /* every evaluation up to this one is done (seq numbers from 1) */
	uint64_t fl_seq[FSL_INFLIGHT];
	uint64_t *blob_bytes; /* [layers * experts] */
	uint32_t *used;       /* host-mapped: per layer, the route kernel's bitmap (struct fsl_used) */
	void *used_dev;
	uint32_t used_words; /* per layer: 2 + bitmap words */
	struct fsl_lru *lru; /* the in-process LRU instead of foresightd's epochs, or NULL */
	uint8_t *stagebuf;   /* device: o.stage slots of stage_stride bytes (fsl_route.stage) */
	uint64_t stage_stride;
};

int fsl_fail(int r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* fsl_lru.c */
int fsl_lru_open(struct fsl *p, uint64_t mib);
/* Frees the LRU's host memory; its VRAM pool stays the runtime's, as the
 * provider's other device blocks do (fsl_close). */
void fsl_lru_close(struct fsl *p);
/* What the last evaluations used (the route kernel's bitmaps): the LRU's
 * order, and copies of what it lacks. */
void fsl_lru_learn(struct fsl *p);
/* The device address of (layer, expert)'s blob in the LRU's pool when its
 * copy has landed (the slot is then kept for evaluation seq), else 0. */
uint64_t fsl_lru_place(struct fsl *p, uint32_t layer, uint32_t expert, uint64_t seq);

#endif /* FSL_INTERNAL_H */
