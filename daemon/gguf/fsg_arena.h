/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsg_arena.h: the expert arena built from a GGUF file (proto/fs_arena.h
 * is the layout): lay it out from a plan, then fill a sealed memfd from
 * the file on loader threads, each reading, copying and checksumming its
 * own jobs of a few MiB (fsg_load.c says why).
 */
#ifndef FSG_ARENA_H
#define FSG_ARENA_H

#include <stdio.h>
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

enum fsg_direct {
	FSG_DIRECT_AUTO = 0, /* the daemon's choice: through the page cache (fsg_load.c says why) */
	FSG_DIRECT_OFF = 1,  /* through the page cache */
	FSG_DIRECT_ON = 2,   /* O_DIRECT where the file system allows it */
};

/* What memory the arena is (fsg_load.c: why and how it was measured). */
enum fsg_pages {
	FSG_PAGES_AUTO = 0,    /* shmem when shmem_enabled gives it 2 MiB pages, else hugetlb when the
				  free pool holds the whole arena, else shmem (4 KiB pages) */
	FSG_PAGES_SHMEM = 1,   /* shmem: 4 KiB pages, or 2 MiB where shmem_enabled gives them */
	FSG_PAGES_HUGETLB = 2, /* hugetlb pages (vm.nr_hugepages), or fail */
};

/* How the blobs get into it. */
enum fsg_fill {
	FSG_FILL_AUTO = 0,  /* map (the write fill serialises on the file's lock: fsg_load.c) */
	FSG_FILL_MAP = 1,   /* populate the mapping (allocate, zero, lock), read the file into it */
	FSG_FILL_WRITE = 2, /* read into a thread's buffer, pwrite it into the memfd (no zeroing, no
			       page faults), then map and lock the pages (shmem only) */
};

struct fsg_load_opts {
	const char *model; /* the arena header's model name */
	int lock;          /* enum fsg_lock: lock the arena (on fault, as it fills)? */
	unsigned threads;  /* loader threads (read, copy, checksum); 0: one per CPU but one, <= 16; <= 64 */
	uint64_t max_read; /* bytes per read call; 0: 64 MiB */
	uint64_t chunk;    /* bytes of blobs per job (one thread's unit); 0: 8 MiB */
	int direct;        /* enum fsg_direct */
	uint64_t max_bps;  /* 0, or a rate not to exceed (bytes/s: tests make a load last seconds) */
	int pages;         /* enum fsg_pages */
	int fill;          /* enum fsg_fill */
	int no_readahead;  /* buffered: no POSIX_FADV_WILLNEED ahead of the jobs (a bench's comparison) */
	/* Called from the calling thread about every 100 ms and once at the
	 * end (done == total), with the bytes landed and checksummed so far. */
	void (*progress)(void *arg, uint64_t done, uint64_t total, uint64_t elapsed_ns);
	/* Called once per layer when every blob of it is in the arena with its
	 * checksum (layers without experts: at the start), from any loader
	 * thread (so it must be thread-safe); may be NULL. */
	void (*layer_done)(void *arg, uint32_t layer);
	void *arg;
	/* When not NULL and set (any thread, atomically), the loader threads
	 * stop after their current job and the fill returns -ECANCELED. */
	const int *cancel;
};

struct fsg_load_result {
	uint64_t bytes_read;
	uint64_t read_calls;
	uint64_t ns;             /* fill: reads and checksums; build: the whole build */
	int locked;              /* mlock succeeded */
	int lock_failed;         /* FSG_LOCK_MUST: the build failed because mlock did */
	struct fsg_err lock_err; /* FSG_LOCK_TRY: why it did not */
	unsigned threads;        /* loader threads that ran */
	int direct;              /* read with O_DIRECT */
	uint64_t direct_bytes;   /* bytes read with O_DIRECT (aligned supersets) */
	double cached;           /* share of the file in the page cache at the start (mincore), -1: unknown */
	uint64_t readahead;      /* buffered, less than half cached: jobs read ahead (WILLNEED); 0: none */
	int hugetlb;             /* the arena is in hugetlb pages */
	int thp;                 /* shmem_enabled lets MADV_HUGEPAGE shmem have 2 MiB pages */
	int fill;                /* FSG_FILL_MAP or FSG_FILL_WRITE: how it was filled */
	char pages_why[160];     /* the memory chosen and why (hugetlb pool, shmem_enabled) */
};

/* The default huge page size and the hugetlb pages free for a new
 * reservation (HugePages_Free less HugePages_Rsvd) from /proc/meminfo's
 * text; 0 and 0 where there are none (f may be NULL). */
void fsg_hugetlb_pool_parse(FILE *f, uint64_t *size, uint64_t *free_pages);

/* 1 when a MADV_HUGEPAGE shmem mapping gets 2 MiB pages here (the kernel's
 * shmem_enabled settings), else 0; why: the settings, for the log. */
int fsg_shmem_thp(char *why, size_t n);

/* Create the arena memfd (sealed against resizing, mapped read-write in
 * *shm) and fill it from f (opened with fsg_open).  On failure nothing is
 * left behind: 0, or -errno with err filled (an mlock failure is -EPERM or
 * -ENOMEM and its message names RLIMIT_MEMLOCK and CAP_IPC_LOCK).
 * = fsg_arena_create + fsg_arena_fill, for a caller that serves while it
 * fills (the daemon: the control socket is up during the load). */
int fsg_arena_create(const struct fsg_plan *p, const struct fsg_load_opts *o, struct fs_shm *shm,
		     struct fsg_load_result *res, struct fsg_err *err);
/* Fill an arena that fsg_arena_create made for the same plan: 0, or -errno
 * with err filled; the arena stays (the caller closes it). */
int fsg_arena_fill(const struct fsg_file *f, const struct fsg_plan *p, const struct fsg_load_opts *o,
		   struct fs_shm *shm, struct fsg_load_result *res, struct fsg_err *err);
int fsg_arena_build(const struct fsg_file *f, const struct fsg_plan *p, const struct fsg_load_opts *o,
		    struct fs_shm *shm, struct fsg_load_result *res, struct fsg_err *err);

/* FNV-1a 64 of four buffers of n bytes at once, continuing from h[0..3]
 * (FS_FNV64_OFFSET to start): what the checksum threads run. */
void fsg_fnv1a64_4(const uint8_t *const p[4], uint64_t n, uint64_t h[4]);

#endif /* FSG_ARENA_H */
