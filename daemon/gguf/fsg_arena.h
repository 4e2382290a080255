/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsg_arena.h: the expert arena built from a GGUF file (proto/fs_arena.h
 * is the layout): lay it out from a plan, then fill a sealed memfd by
 * streaming the file's expert bytes into their blobs, checksumming each
 * blob on worker threads as soon as its last part has landed.
 */
#ifndef FSG_ARENA_H
#define FSG_ARENA_H

#include <stdint.h>

#include "fs_shm.h"
#include "fsg_moe.h"
#include "fsg_reader.h"

struct fsg_layout {
	uint64_t off_index; /* struct fs_arena_entry[layers * experts] */
	uint64_t off_parts; /* struct fs_arena_parts[layers] */
	uint64_t off_data;
	uint64_t bytes;       /* the whole arena */
	uint64_t *layer_base; /* [layers]: offset of the layer's expert 0 */
	uint64_t *stride;     /* [layers]: blob_bytes rounded up to FS_ARENA_ALIGN */
};

/* 0, -EOVERFLOW (err filled) or -ENOMEM. */
int fsg_layout_build(const struct fsg_plan *p, struct fsg_layout *lo, struct fsg_err *err);
void fsg_layout_free(struct fsg_layout *lo);
/* Write the header, the index (checksums of nothing: fsg_arena_build
 * fills them) and the part tables into an arena of arena_bytes. */
void fsg_layout_write(const struct fsg_plan *p, const struct fsg_layout *lo, void *base, uint64_t arena_bytes,
		      const char *model);
static inline uint64_t fsg_layout_blob(const struct fsg_layout *lo, uint32_t layer, uint32_t expert)
{
	return lo->layer_base[layer] + (uint64_t)expert * lo->stride[layer];
}

enum fsg_lock {
	FSG_LOCK_NO = 0,   /* leave it pageable */
	FSG_LOCK_MUST = 1, /* lock it, or fail */
	FSG_LOCK_TRY = 2,  /* lock it; when that fails, say why in res->lock_err and go on */
};

struct fsg_load_opts {
	const char *model; /* the arena header's model name */
	int lock;          /* enum fsg_lock: mlock the arena before filling it? */
	unsigned threads;  /* checksum threads; 0: one per CPU but one, 1..8 */
	uint64_t max_read; /* bytes per read call; 0: 64 MiB */
	/* Called from the loading thread about every 100 ms and once at the
	 * end (done == total), with the bytes read so far. */
	void (*progress)(void *arg, uint64_t done, uint64_t total, uint64_t elapsed_ns);
	void *arg;
};

struct fsg_load_result {
	uint64_t bytes_read;
	uint64_t read_calls;
	uint64_t ns;             /* the whole build: lock, read, checksums */
	int locked;              /* mlock succeeded */
	int lock_failed;         /* FSG_LOCK_MUST: the build failed because mlock did */
	struct fsg_err lock_err; /* FSG_LOCK_TRY: why it did not */
	unsigned threads;
};

/* Create the arena memfd (sealed against resizing, mapped read-write in
 * *shm) and fill it from f (opened with fsg_open).  On failure nothing is
 * left behind: 0, or -errno with err filled (an mlock failure is -EPERM or
 * -ENOMEM and its message names RLIMIT_MEMLOCK and CAP_IPC_LOCK). */
int fsg_arena_build(const struct fsg_file *f, const struct fsg_plan *p, const struct fsg_load_opts *o,
		    struct fs_shm *shm, struct fsg_load_result *res, struct fsg_err *err);

/* FNV-1a 64 of four buffers of n bytes at once, continuing from h[0..3]
 * (FS_FNV64_OFFSET to start): what the checksum threads run. */
void fsg_fnv1a64_4(const uint8_t *const p[4], uint64_t n, uint64_t h[4]);

#endif /* FSG_ARENA_H */
