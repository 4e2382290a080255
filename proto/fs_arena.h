/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_arena.h: the expert arena, a memfd the daemon fills and every client
 * maps read-only.  One contiguous blob per (layer, expert), each starting on
 * an FS_ARENA_ALIGN boundary so a slot copy is one aligned transfer.
 *
 *   0                     struct fs_arena_hdr
 *   off_index             struct fs_arena_entry[layers * experts]
 *                         (row-major: entry = layer * experts + expert)
 *   (GGUF arena)          struct fs_arena_parts, one per MoE layer
 *   off_data              blobs
 *
 * The checksum is FNV-1a 64 over the blob's bytes: engines and tests verify
 * what they read from a slot against it.
 *
 * A blob repacked from a GGUF file is its expert's slices of the layer's
 * expert tensors, back to back: the weights [gate | up | down] (or
 * [gate_up | down] where the model fuses gate and up), then any per-expert
 * biases and scales, each part starting on an FS_ARENA_PART_ALIGN boundary
 * of the blob, a quantized one followed by a zero tail
 * (FS_ARENA_PART_TAIL_ELEMS).  Entry.parts locates the table that says
 * which part is which (ggml type, shape, offset in the blob); the experts of
 * one layer share one table.  A layer without experts (a dense layer of a
 * MoE model) has entries of 0 bytes and no table.
 */
#ifndef FS_ARENA_H
#define FS_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "fs_proto.h"

#define FS_ARENA_MAGIC 0x41525346u /* "FSRA" */
#define FS_ARENA_ALIGN 4096u

enum fs_arena_source {
	FS_ARENA_SYNTHETIC = 1, /* deterministic bytes, sized by flags */
	FS_ARENA_GGUF = 2,      /* repacked from a model file */
};

struct fs_arena_hdr {
	uint32_t magic;
	uint32_t version;     /* FS_PROTO_VERSION */
	uint64_t arena_bytes; /* size of the whole memfd */
	uint32_t source;      /* enum fs_arena_source */
	uint32_t layers;
	uint32_t experts;
	uint32_t experts_used; /* top-k of the model (0 if unknown) */
	uint64_t off_index;
	uint64_t off_data;
	uint64_t max_expert_bytes;
	uint64_t seed;  /* synthetic: generator seed; GGUF: the model file's identity
			   (FNV-1a 64 of path, size, mtime, inode, device: what a
			   restart checks a kept arena against, fsd_arena_keep.c) */
	char model[64]; /* model name, NUL-terminated */
};
_Static_assert(sizeof(struct fs_arena_hdr) == 2 * FS_CACHELINE, "arena header is 2 lines");

struct fs_arena_entry {
	uint64_t offset;   /* from the start of the arena, FS_ARENA_ALIGN aligned */
	uint64_t bytes;    /* blob size */
	uint64_t checksum; /* FNV-1a 64 of the blob */
	uint64_t parts;    /* offset of this blob's struct fs_arena_parts from the
			    * start of the arena; 0: none (synthetic arena, dense layer) */
};
_Static_assert(sizeof(struct fs_arena_entry) == 32, "fs_arena_entry");

/* What a part of a blob is: which projection, and which of its tensors. */
enum fs_arena_role {
	FS_PART_GATE = 1,
	FS_PART_UP = 2,
	FS_PART_DOWN = 3,
	FS_PART_GATE_UP = 4, /* gate and up fused in one tensor (rows: gate, then up) */
};
enum fs_arena_what {
	FS_PART_WEIGHT = 0, /* ffn_*_exps.weight */
	FS_PART_BIAS = 1,   /* ffn_*_exps.bias (gpt-oss) */
	FS_PART_SCALE = 2,  /* ffn_*_exps.scale (gemma4) */
};

#define FS_ARENA_PART_ALIGN 256u /* a part's offset in its blob (CUDA's allocation alignment) */
/* Every quantized part of a GGUF blob is followed by at least the bytes of
 * this many of its elements, zero, inside the blob (float parts are not):
 * llama.cpp's MMQ kernels may read up to one 512-element tile past a row's
 * end (ggml pads each tensor for it), and a kernel reading a part in place
 * must find zeros there, not the next part or a stale slot
 * (integrations/llama.cpp). */
#define FS_ARENA_PART_TAIL_ELEMS 512u
#define FS_ARENA_MAX_PARTS 12u /* 4 roles x (weight, bias, scale) */

/* One part of an expert's blob: a 2-D slice of one GGUF tensor, in ggml's
 * order (ne[0] elements per row, the fastest-moving index; ne[1] rows). */
struct fs_arena_part {
	uint16_t role;      /* enum fs_arena_role */
	uint16_t what;      /* enum fs_arena_what */
	uint32_t ggml_type; /* ggml's enum ggml_type, as in the GGUF file */
	uint64_t offset;    /* from the blob's start, FS_ARENA_PART_ALIGN aligned */
	uint64_t bytes;
	uint64_t ne[2];
};
_Static_assert(sizeof(struct fs_arena_part) == 40, "fs_arena_part");

struct fs_arena_parts {
	uint32_t count; /* parts in use, <= FS_ARENA_MAX_PARTS, in blob order */
	uint32_t reserved;
	struct fs_arena_part part[FS_ARENA_MAX_PARTS];
};
_Static_assert(sizeof(struct fs_arena_parts) == 8 + 40 * FS_ARENA_MAX_PARTS, "fs_arena_parts");

/* Whether entry e's part table (if any) lies inside an arena of
 * arena_bytes and every part inside the blob: what a reader checks before
 * it trusts a part. */
static inline int fs_arena_parts_ok(const struct fs_arena_hdr *h, uint64_t arena_bytes,
				    const struct fs_arena_entry *e)
{
	if (e->parts == 0)
		return 1;
	if (e->parts % 8 != 0 || e->parts < sizeof(*h) || e->parts > arena_bytes ||
	    arena_bytes - e->parts < sizeof(struct fs_arena_parts))
		return 0;
	const struct fs_arena_parts *p = (const struct fs_arena_parts *)((const char *)h + e->parts);
	if (p->count > FS_ARENA_MAX_PARTS)
		return 0;
	for (uint32_t i = 0; i < p->count; i++)
		if (p->part[i].offset > e->bytes || e->bytes - p->part[i].offset < p->part[i].bytes)
			return 0;
	return 1;
}

#define FS_FNV64_OFFSET 0xcbf29ce484222325ull
#define FS_FNV64_PRIME 0x100000001b3ull

static inline uint64_t fs_fnv1a64(const void *p, size_t n)
{
	const unsigned char *b = (const unsigned char *)p;
	uint64_t h = FS_FNV64_OFFSET;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= FS_FNV64_PRIME;
	}
	return h;
}

#endif /* FS_ARENA_H */
