/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_arena.h: the expert arena, a memfd the daemon fills and every client
 * maps read-only.  One contiguous blob per (layer, expert), each starting on
 * an FS_ARENA_ALIGN boundary so a slot copy is one aligned transfer.
 *
 *   0                     struct fs_arena_hdr
 *   off_index             struct fs_arena_entry[layers * experts]
 *                         (row-major: entry = layer * experts + expert)
 *   off_data              blobs
 *
 * The checksum is FNV-1a 64 over the blob's bytes: engines and tests verify
 * what they read from a slot against it.
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
	uint64_t seed;         /* synthetic: generator seed */
	char model[64];        /* model name, NUL-terminated */
};
_Static_assert(sizeof(struct fs_arena_hdr) == 2 * FS_CACHELINE, "arena header is 2 lines");

struct fs_arena_entry {
	uint64_t offset;   /* from the start of the arena, FS_ARENA_ALIGN aligned */
	uint64_t bytes;    /* blob size */
	uint64_t checksum; /* FNV-1a 64 of the blob */
	uint64_t reserved; /* per-part types/shapes arrive with the GGUF arena */
};
_Static_assert(sizeof(struct fs_arena_entry) == 32, "fs_arena_entry");

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
