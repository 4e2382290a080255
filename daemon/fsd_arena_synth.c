/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_arena_synth.c: the synthetic expert arena, used until a model file is
 * given: deterministic bytes per (layer, expert) so that any reader can
 * check what it got against the index checksum.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "fs_arena.h"
#include "fsd.h"
#include "fsg_arena.h"

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void fsd_arena_synth_fill(uint8_t *dst, uint64_t bytes, uint64_t seed, uint32_t layer, uint32_t expert)
{
	uint64_t s = seed ^ ((uint64_t)layer << 32) ^ expert ^ 0x5851f42d4c957f2dull;
	uint64_t i = 0;
	for (; i + 8 <= bytes; i += 8) {
		uint64_t v = splitmix64(&s);
		memcpy(dst + i, &v, 8);
	}
	if (i < bytes) {
		uint64_t v = splitmix64(&s);
		memcpy(dst + i, &v, (size_t)(bytes - i));
	}
}

int fsd_arena_synth_create(struct fsd *d)
{
	const struct fsd_config *c = &d->cfg;
	uint64_t n = (uint64_t)c->layers * c->experts;
	uint64_t blob = (c->expert_bytes + FS_ARENA_ALIGN - 1) / FS_ARENA_ALIGN * FS_ARENA_ALIGN;
	uint64_t off_index = sizeof(struct fs_arena_hdr);
	uint64_t off_data = (off_index + n * sizeof(struct fs_arena_entry) + FS_ARENA_ALIGN - 1) /
			    FS_ARENA_ALIGN * FS_ARENA_ALIGN;
	uint64_t total = off_data + n * blob;
	d->slot_bytes = blob;
	/* A restart under systemd: the arena this start would build may be in
	 * the fd store (fsd_arena_keep.c). */
	struct fsd_arena_want want = {
		.source = FS_ARENA_SYNTHETIC,
		.layers = c->layers,
		.experts = c->experts,
		.experts_used = c->experts_used,
		.arena_bytes = fs_page_round((size_t)total),
		.max_expert_bytes = c->expert_bytes,
		.off_index = off_index,
		.off_data = off_data,
		.seed = c->seed,
		.model = c->model,
	};
	int r = fsd_arena_keep_take(d, &want);
	if (r != 0)
		return r < 0 ? r : 0;
	r = fs_shm_create(&d->arena_shm, "foresight-arena", total);
	if (r < 0)
		return r;
	/* Huge pages where shmem_enabled gives them, as a model's arena
	 * (fsg_load.c): fewer faults filling it, fewer TLB misses reading it. */
	(void)madvise(d->arena_shm.base, d->arena_shm.bytes, MADV_HUGEPAGE);
	struct fs_arena_hdr *h = d->arena_shm.base;
	d->arena = h;
	h->magic = FS_ARENA_MAGIC;
	h->version = FS_PROTO_VERSION;
	h->arena_bytes = d->arena_shm.bytes;
	h->source = FS_ARENA_SYNTHETIC;
	h->layers = c->layers;
	h->experts = c->experts;
	h->experts_used = c->experts_used;
	h->off_index = off_index;
	h->off_data = off_data;
	h->max_expert_bytes = c->expert_bytes;
	h->seed = c->seed;
	snprintf(h->model, sizeof(h->model), "%s", c->model);
	struct fs_arena_entry *e = (struct fs_arena_entry *)((char *)h + off_index);
	for (uint32_t l = 0; l < c->layers; l++) {
		for (uint32_t x = 0; x < c->experts; x++) {
			uint64_t i = (uint64_t)l * c->experts + x;
			uint8_t *p = (uint8_t *)h + off_data + i * blob;
			fsd_arena_synth_fill(p, c->expert_bytes, c->seed, l, x);
			e[i].offset = off_data + i * blob;
			e[i].bytes = c->expert_bytes;
			e[i].checksum = fs_fnv1a64(p, c->expert_bytes);
		}
	}
	d->slot_bytes = blob;
	/* The arena is what engines compute misses from: keep it in RAM. */
	if (mlock(d->arena_shm.base, d->arena_shm.bytes) < 0)
		fsd_log(FSD_WARN,
			"arena: mlock of %zu bytes failed (%s): raise LimitMEMLOCK or grant CAP_IPC_LOCK; "
			"continuing unlocked",
			d->arena_shm.bytes, strerror(errno));
	d->arena_ro_fd = fs_shm_ro_fd(&d->arena_shm);
	if (d->arena_ro_fd < 0)
		return d->arena_ro_fd;
	/* Which pages, as the model arena says it (fsd_arena_gguf.c): the
	 * synthetic arena is shmem asking for huge pages, never hugetlb. */
	char thp[96];
	int huge = fsg_shmem_thp(thp, sizeof(thp));
	snprintf(d->arena_pages, sizeof(d->arena_pages), "shmem, %s pages (%s)", huge ? "2 MiB" : "4 KiB",
		 thp);
	fsd_log(FSD_INFO, "arena: synthetic, %u layers x %u experts x %llu bytes = %.1f MiB of %s", c->layers,
		c->experts, (unsigned long long)c->expert_bytes, (double)d->arena_shm.bytes / 1048576.0,
		d->arena_pages);
	return 0;
}
