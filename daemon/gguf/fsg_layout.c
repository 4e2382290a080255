/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsg_layout.c: where everything goes in a GGUF arena, and writing its
 * header, index and part tables (the blobs and checksums are fsg_load.c's).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_arena.h"
#include "fsg_arena.h"

static int round_up(uint64_t x, uint64_t a, uint64_t *out)
{
	if (x > UINT64_MAX - (a - 1))
		return -EOVERFLOW;
	*out = (x + a - 1) / a * a;
	return 0;
}

int fsg_layout_build(const struct fsg_plan *p, struct fsg_layout *lo, struct fsg_err *err)
{
	memset(lo, 0, sizeof(*lo));
	lo->layer_base = calloc(p->layers ? p->layers : 1, sizeof(*lo->layer_base));
	lo->stride = calloc(p->layers ? p->layers : 1, sizeof(*lo->stride));
	if (!lo->layer_base || !lo->stride) {
		fsg_layout_free(lo);
		return fsg_fail_errno(err, -ENOMEM, "out of memory laying out the arena");
	}
	/* layers <= FS_MAX_LAYERS and experts <= FS_MAX_EXPERTS (the plan
	 * checked): the index and the part tables cannot overflow. */
	uint64_t n = (uint64_t)p->layers * p->experts;
	lo->off_index = sizeof(struct fs_arena_hdr);
	int r = round_up(lo->off_index + n * sizeof(struct fs_arena_entry), FS_CACHELINE, &lo->off_parts);
	if (r == 0)
		r = round_up(lo->off_parts + (uint64_t)p->layers * sizeof(struct fs_arena_parts),
			     FS_ARENA_ALIGN, &lo->off_data);
	uint64_t off = lo->off_data;
	for (uint32_t l = 0; r == 0 && l < p->layers; l++) {
		r = round_up(p->layer[l].blob_bytes, FS_ARENA_ALIGN, &lo->stride[l]);
		lo->layer_base[l] = off;
		if (r == 0 && lo->stride[l] > (UINT64_MAX - off) / p->experts)
			r = -EOVERFLOW;
		if (r == 0)
			off += lo->stride[l] * p->experts;
	}
	if (r < 0) {
		fsg_layout_free(lo);
		return fsg_fail_errno(err, r, "the arena's size overflows 64 bits");
	}
	lo->bytes = off;
	return 0;
}

void fsg_layout_free(struct fsg_layout *lo)
{
	free(lo->layer_base);
	free(lo->stride);
	memset(lo, 0, sizeof(*lo));
}

/* Header, index (checksums 0 for now) and part tables. */
void fsg_layout_write(const struct fsg_plan *p, const struct fsg_layout *lo, void *base, uint64_t arena_bytes,
		      const char *model)
{
	struct fs_arena_hdr *h = base;
	h->magic = FS_ARENA_MAGIC;
	h->version = FS_PROTO_VERSION;
	h->arena_bytes = arena_bytes;
	h->source = FS_ARENA_GGUF;
	h->layers = p->layers;
	h->experts = p->experts;
	h->experts_used = p->experts_used;
	h->off_index = lo->off_index;
	h->off_data = lo->off_data;
	h->max_expert_bytes = p->max_blob;
	h->seed = 0;
	snprintf(h->model, sizeof(h->model), "%s", model ? model : p->name);
	struct fs_arena_entry *e = (struct fs_arena_entry *)((char *)base + lo->off_index);
	for (uint32_t l = 0; l < p->layers; l++) {
		const struct fsg_layer *ly = &p->layer[l];
		uint64_t parts = lo->off_parts + (uint64_t)l * sizeof(struct fs_arena_parts);
		struct fs_arena_parts *pt = (struct fs_arena_parts *)((char *)base + parts);
		pt->count = ly->nparts;
		for (uint32_t i = 0; i < ly->nparts; i++) {
			pt->part[i] = (struct fs_arena_part){
				.role = ly->part[i].role,
				.what = ly->part[i].what,
				.ggml_type = ly->part[i].type,
				.offset = ly->part[i].blob_off,
				.bytes = ly->part[i].bytes,
				.ne = {ly->part[i].ne[0], ly->part[i].ne[1]},
			};
		}
		for (uint32_t x = 0; x < p->experts; x++) {
			struct fs_arena_entry *en = &e[(uint64_t)l * p->experts + x];
			/* A dense layer's experts are empty blobs at the start of
			 * the data (in bounds, checksum of nothing). */
			en->offset = ly->nparts ? fsg_layout_blob(lo, l, x) : lo->off_data;
			en->bytes = ly->blob_bytes;
			en->checksum = FS_FNV64_OFFSET; /* FNV-1a of no bytes */
			en->parts = ly->nparts ? parts : 0;
		}
	}
}
