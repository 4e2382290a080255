/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The arena built from each fixture: header, index, part tables, every
 * part's bytes equal to the file's slice, checksums; progress; a file that
 * shrinks under the loader; an arena that cannot be locked.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs_arena.h"
#include "fsg_arena.h"
#include "fsg_test_util.h"
#include "fsg_types.h"

static char g_dir[64];

static void setup(void)
{
	tu_tmpdir(g_dir, sizeof(g_dir));
}

static void teardown(void)
{
	tu_rmdir(g_dir);
}

TestSuite(arena, .init = setup, .fini = teardown);

struct prog {
	unsigned calls;
	uint64_t done, total;
	unsigned layer_calls[64]; /* atomic: layer_done per layer (from loader threads) */
	unsigned layer_late;      /* atomic: layer_done for a layer >= 64 */
};

static void on_layer(void *arg, uint32_t layer)
{
	struct prog *p = arg;
	if (layer < 64)
		__atomic_add_fetch(&p->layer_calls[layer], 1, __ATOMIC_RELAXED);
	else
		__atomic_add_fetch(&p->layer_late, 1, __ATOMIC_RELAXED);
}

static void on_progress(void *arg, uint64_t done, uint64_t total, uint64_t ns)
{
	struct prog *p = arg;
	(void)ns;
	cr_assert_leq(done, total);
	cr_assert_geq(done, p->done, "progress only grows");
	p->calls++;
	p->done = done;
	p->total = total;
}

/* Expected bytes of expert e's slice of a part. */
static void expected(const struct fsg_file *f, const struct fsg_part *pt, uint32_t layer, uint32_t e,
		     uint64_t seed, uint8_t *out)
{
	if (pt->split) {
		char name[64];
		snprintf(name, sizeof(name), "blk.%u.ffn_%s.%u.weight", layer, fsg_role_name(pt->role), e);
		fsgw_fill(seed, name, 0, out, (size_t)pt->bytes);
	} else {
		fsgw_fill(seed, f->t[pt->tensor].name, (uint64_t)e * pt->bytes, out, (size_t)pt->bytes);
	}
}

/* The bytes of a blob's page-rounded span that no part covers are zeros
 * (the write fill assembles blobs in a reused buffer). */
static void check_gaps(const struct fsg_layer *ly, const uint8_t *blob, uint64_t bytes, const char *what,
		       uint32_t l, uint32_t e)
{
	uint64_t span = (bytes + FS_ARENA_ALIGN - 1) / FS_ARENA_ALIGN * FS_ARENA_ALIGN;
	for (uint64_t i = 0; i < span; i++) {
		int covered = 0;
		for (uint32_t k = 0; k < ly->nparts && !covered; k++)
			covered = i >= ly->part[k].blob_off && i < ly->part[k].blob_off + ly->part[k].bytes;
		if (!covered && blob[i] != 0)
			cr_assert_fail("%s: layer %u expert %u: byte %llu is in no part and not 0", what, l,
				       e, (unsigned long long)i);
		if (!covered) /* skip ahead to the next part: the bytes between are all gap */
			continue;
		for (uint32_t k = 0; k < ly->nparts; k++)
			if (i >= ly->part[k].blob_off && i < ly->part[k].blob_off + ly->part[k].bytes)
				i = ly->part[k].blob_off + ly->part[k].bytes - 1;
	}
}

static void check_arena(const struct fsg_file *f, const struct fsg_plan *p, const struct fs_shm *shm,
			uint64_t seed, const char *what)
{
	const struct fs_arena_hdr *h = shm->base;
	cr_assert_eq(h->magic, FS_ARENA_MAGIC);
	cr_expect_eq(h->version, FS_PROTO_VERSION);
	cr_expect_eq(h->source, (uint32_t)FS_ARENA_GGUF);
	cr_expect_eq(h->arena_bytes, shm->bytes);
	cr_expect_eq(h->layers, p->layers);
	cr_expect_eq(h->experts, p->experts);
	cr_expect_eq(h->experts_used, p->experts_used);
	cr_expect_eq(h->max_expert_bytes, p->max_blob);
	cr_expect_eq(h->off_data % FS_ARENA_ALIGN, 0u);
	const struct fs_arena_entry *idx = (const void *)((const char *)h + h->off_index);
	uint8_t *buf = malloc(p->max_blob + 1);
	for (uint32_t l = 0; l < p->layers; l++) {
		const struct fsg_layer *ly = &p->layer[l];
		for (uint32_t e = 0; e < p->experts; e++) {
			const struct fs_arena_entry *en = &idx[(uint64_t)l * p->experts + e];
			const uint8_t *blob = (const uint8_t *)h + en->offset;
			cr_assert_leq(en->offset + en->bytes, shm->bytes);
			cr_expect_eq(en->offset % FS_ARENA_ALIGN, 0u);
			cr_expect_eq(en->bytes, ly->blob_bytes);
			cr_expect(fs_arena_parts_ok(h, shm->bytes, en), "%s: layer %u expert %u", what, l, e);
			cr_expect_eq(en->checksum, fs_fnv1a64(blob, (size_t)en->bytes), "%s: checksum %u/%u",
				     what, l, e);
			check_gaps(ly, blob, en->bytes, what, l, e);
			if (!ly->nparts) {
				cr_expect_eq(en->parts, 0u);
				continue;
			}
			const struct fs_arena_parts *pp = (const void *)((const char *)h + en->parts);
			cr_assert_eq(pp->count, ly->nparts);
			for (uint32_t i = 0; i < ly->nparts; i++) {
				const struct fsg_part *pt = &ly->part[i];
				cr_expect_eq(pp->part[i].role, pt->role);
				cr_expect_eq(pp->part[i].what, pt->what);
				cr_expect_eq(pp->part[i].ggml_type, pt->type);
				cr_expect_eq(pp->part[i].offset, pt->blob_off);
				cr_expect_eq(pp->part[i].ne[0], pt->ne[0]);
				cr_expect_eq(pp->part[i].ne[1], pt->ne[1]);
				expected(f, pt, l, e, seed, buf);
				cr_assert(memcmp(blob + pt->blob_off, buf, (size_t)pt->bytes) == 0,
					  "%s: layer %u expert %u part %u: wrong bytes", what, l, e, i);
			}
		}
	}
	free(buf);
}

Test(arena, every_fixture, .timeout = 120)
{
	struct fsgw_fixture fx[16];
	unsigned n = fsgw_fixtures(fx, 16);
	for (unsigned k = 0; k < n; k++) {
		char path[160];
		struct fsg_file f;
		struct fsg_plan p;
		struct fsg_err err;
		tu_model(g_dir, fx[k].file, &fx[k].m, path, sizeof(path));
		cr_assert_eq(fsg_open(&f, path, &err), 0, "%s", err.msg);
		cr_assert_eq(fsg_plan_build(&f, &p, &err), 0, "%s", err.msg);
		/* Vary threads, read size (tiny reads split parts), job size
		 * (one expert a job) and O_DIRECT (bounce buffer, aligned reads);
		 * each both ways: into the mapping and written into the memfd. */
		for (int fill = FSG_FILL_MAP; fill <= FSG_FILL_WRITE; fill++) {
			struct prog pr = {0};
			struct fsg_load_opts o = {.model = "m",
						  .lock = FSG_LOCK_NO,
						  .threads = k % 4,
						  .max_read = k % 2 ? 4096 : 0,
						  .chunk = k % 3 == 0 ? 4096 : 0,
						  .direct = (k / 2) % 2 ? FSG_DIRECT_ON : FSG_DIRECT_OFF,
						  .pages = FSG_PAGES_SHMEM,
						  .fill = fill,
						  .progress = on_progress,
						  .layer_done = on_layer,
						  .arg = &pr};
			struct fs_shm shm;
			struct fsg_load_result res;
			cr_assert_eq(fsg_arena_build(&f, &p, &o, &shm, &res, &err), 0, "%s: %s", fx[k].file,
				     err.msg);
			cr_expect_str_eq(((struct fs_arena_hdr *)shm.base)->model, "m");
			cr_expect_eq(res.bytes_read, p.member_bytes);
			cr_expect_geq(pr.calls, 1u);
			cr_expect_eq(pr.done, p.member_bytes, "the last report says done");
			cr_expect_eq(pr.total, p.member_bytes);
			if (o.max_read == 4096)
				cr_expect_geq(res.read_calls, p.member_bytes / 4096);
			cr_assert_leq(p.layers, 64u);
			cr_expect_eq(pr.layer_late, 0u);
			for (uint32_t l = 0; l < p.layers; l++)
				cr_expect_eq(pr.layer_calls[l], 1u, "%s: layer %u reported done %u times",
					     fx[k].file, l, pr.layer_calls[l]);
			if (res.direct)
				cr_expect_geq(res.direct_bytes, p.member_bytes, "%s: O_DIRECT read it all",
					      fx[k].file);
			cr_expect_eq(res.fill, fill, "%s: filled as asked", fx[k].file);
			cr_expect_eq(res.hugetlb, 0);
			check_arena(&f, &p, &shm, fx[k].m.seed, fx[k].file);
			fs_shm_close(&shm);
		}
		fsg_plan_free(&p);
		fsg_close(&f);
	}
}

/* Jobs are a multiple of four experts (the checksum's four streams) where
 * the layer has four; the last job of a layer may hold one, two or three:
 * each blob's checksum must still be its own (the remainder reuses the
 * four-stream hash with a blob repeated, whose extra result is dropped). */
Test(arena, jobs_with_one_two_or_three_experts_left)
{
	for (uint32_t experts = 5; experts <= 7; experts++) {
		struct fsgw_model m;
		char path[160], name[32];
		struct fsg_file f;
		struct fsg_plan p;
		struct fsg_err err;
		fsgw_model_defaults(&m, "qwen3moe");
		m.experts = experts;
		m.used = 2;
		m.layers = 2;
		m.seed = 40 + experts;
		snprintf(name, sizeof(name), "left%u.gguf", experts);
		tu_model(g_dir, name, &m, path, sizeof(path));
		cr_assert_eq(fsg_open(&f, path, &err), 0, "%s", err.msg);
		cr_assert_eq(fsg_plan_build(&f, &p, &err), 0, "%s", err.msg);
		for (int k = 0; k < 2; k++) { /* jobs of four, then one job a layer */
			struct fsg_load_opts o = {.lock = FSG_LOCK_NO,
						  .threads = 2,
						  .chunk = k ? 0 : 4096,
						  .pages = FSG_PAGES_SHMEM};
			struct fs_shm shm;
			struct fsg_load_result res;
			cr_assert_eq(fsg_arena_build(&f, &p, &o, &shm, &res, &err), 0, "%s", err.msg);
			check_arena(&f, &p, &shm, m.seed, name);
			fs_shm_close(&shm);
		}
		fsg_plan_free(&p);
		fsg_close(&f);
	}
}

/* The daemon's default read (auto) is buffered; a file mostly out of the
 * page cache is read ahead of the jobs (POSIX_FADV_WILLNEED), a cached one
 * is not, and either way every blob and checksum is right.  Where the file
 * system keeps the pages (tmpfs ignores POSIX_FADV_DONTNEED) only the
 * cached case can be seen. */
Test(arena, auto_reads_buffered_and_ahead_when_cold)
{
	struct fsgw_model m;
	char path[160];
	struct fsg_file f;
	struct fsg_plan p;
	struct fsg_err err;
	fsgw_model_defaults(&m, "qwen3moe");
	m.experts = 16;
	m.layers = 3;
	m.seed = 77;
	tu_model(g_dir, "cold.gguf", &m, path, sizeof(path));
	cr_assert_eq(fsg_open(&f, path, &err), 0, "%s", err.msg);
	cr_assert_eq(fsg_plan_build(&f, &p, &err), 0, "%s", err.msg);
	for (int cold = 0; cold < 2; cold++) {
		if (cold) {
			cr_assert_eq(fdatasync(f.fd), 0);
			(void)posix_fadvise(f.fd, 0, 0, POSIX_FADV_DONTNEED);
		}
		struct fsg_load_opts o = {
			.lock = FSG_LOCK_NO, .threads = 2, .chunk = 4096, .pages = FSG_PAGES_SHMEM};
		struct fs_shm shm;
		struct fsg_load_result res;
		cr_assert_eq(fsg_arena_build(&f, &p, &o, &shm, &res, &err), 0, "%s", err.msg);
		cr_expect_eq(res.direct, 0, "auto never opens O_DIRECT");
		if (res.cached >= 0.5)
			cr_expect_eq(res.readahead, 0u, "cached %.2f: no readahead", res.cached);
		else
			cr_expect_gt(res.readahead, 0u, "cached %.2f: read ahead", res.cached);
		check_arena(&f, &p, &shm, m.seed, "cold.gguf");
		fs_shm_close(&shm);
	}
	fsg_plan_free(&p);
	fsg_close(&f);
}

Test(arena, a_file_that_shrinks_is_an_error)
{
	struct fsgw_model m;
	char path[160];
	struct fsg_file f;
	struct fsg_plan p;
	struct fsg_err err;
	fsgw_model_defaults(&m, "qwen3moe");
	tu_model(g_dir, "s.gguf", &m, path, sizeof(path));
	cr_assert_eq(fsg_open(&f, path, &err), 0);
	cr_assert_eq(fsg_plan_build(&f, &p, &err), 0);
	cr_assert_eq(truncate(path, (off_t)(f.data_off + 4096)), 0);
	for (int direct = FSG_DIRECT_OFF; direct <= FSG_DIRECT_ON; direct++) {
		struct fsg_load_opts o = {.lock = FSG_LOCK_NO, .direct = direct};
		struct fs_shm shm;
		struct fsg_load_result res;
		cr_expect_eq(fsg_arena_build(&f, &p, &o, &shm, &res, &err), -EIO, "direct %d", direct);
		cr_expect(strstr(err.msg, "the file ended early") != NULL, "%s", err.msg);
		cr_expect_eq(shm.fd, -1, "nothing left behind");
		cr_expect_null(shm.base);
	}
	fsg_plan_free(&p);
	fsg_close(&f);
}

/* Root ignores RLIMIT_MEMLOCK: drop CAP_IPC_LOCK for this (forked) test. */
static void drop_ipc_lock(void)
{
	struct __user_cap_header_struct hd = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[2];
	cr_assert_eq(syscall(SYS_capget, &hd, d), 0);
	d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	d[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
	cr_assert_eq(syscall(SYS_capset, &hd, d), 0);
}

Test(arena, an_arena_that_cannot_be_locked)
{
	if (TU_SANITIZED) {
		teardown(); /* a skipped test may not get its .fini */
		cr_skip_test("a sanitizer's mlock() does nothing and succeeds");
	}
	struct fsgw_model m;
	char path[160];
	struct fsg_file f;
	struct fsg_plan p;
	struct fsg_err err;
	fsgw_model_defaults(&m, "qwen3moe");
	tu_model(g_dir, "l.gguf", &m, path, sizeof(path));
	cr_assert_eq(fsg_open(&f, path, &err), 0);
	cr_assert_eq(fsg_plan_build(&f, &p, &err), 0);
	drop_ipc_lock();
	struct rlimit rl;
	cr_assert_eq(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
	rl.rlim_cur = 4096;
	cr_assert_eq(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
	struct fs_shm shm;
	struct fsg_load_result res;
	struct fsg_load_opts o = {.lock = FSG_LOCK_MUST};
	int r = fsg_arena_build(&f, &p, &o, &shm, &res, &err);
	cr_expect(r == -ENOMEM || r == -EPERM || r == -EAGAIN, "%d", r);
	cr_expect_eq(res.lock_failed, 1);
	cr_expect(strstr(err.msg, "RLIMIT_MEMLOCK") && strstr(err.msg, "LimitMEMLOCK") &&
			  strstr(err.msg, "CAP_IPC_LOCK"),
		  "%s", err.msg);
	cr_expect_eq(res.bytes_read, 0u, "it fails before reading the file");

	o.lock = FSG_LOCK_TRY;
	cr_assert_eq(fsg_arena_build(&f, &p, &o, &shm, &res, &err), 0, "%s", err.msg);
	cr_expect_eq(res.locked, 0);
	cr_expect(strstr(res.lock_err.msg, "LimitMEMLOCK") != NULL, "%s", res.lock_err.msg);
	check_arena(&f, &p, &shm, m.seed, "unlocked");
	fs_shm_close(&shm);
	fsg_plan_free(&p);
	fsg_close(&f);
}

/* The free hugetlb pool (/proc/meminfo): bytes of free huge pages, page size. */
static uint64_t hugetlb_free(uint64_t *size)
{
	FILE *f = fopen("/proc/meminfo", "r");
	uint64_t nfree;
	fsg_hugetlb_pool_parse(f, size, &nfree);
	if (f)
		fclose(f);
	return nfree * *size;
}

/* Pages another mapping reserved (HugePages_Rsvd) are in HugePages_Free but
 * not free for the arena: counted as free, auto chose hugetlb, the
 * reservation failed and the arena fell back to shmem. */
Test(arena, hugetlb_pool_leaves_out_reserved_pages)
{
	static const char text[] = "MemTotal:       1000 kB\n"
				   "HugePages_Total:       8\n"
				   "HugePages_Free:        8\n"
				   "HugePages_Rsvd:        6\n"
				   "HugePages_Surp:        0\n"
				   "Hugepagesize:       2048 kB\n";
	FILE *f = fmemopen((void *)text, sizeof(text) - 1, "r");
	cr_assert(f);
	uint64_t size = 1, nfree = 1;
	fsg_hugetlb_pool_parse(f, &size, &nfree);
	fclose(f);
	cr_expect_eq(size, 2048ull * 1024);
	cr_expect_eq(nfree, 2, "8 free less 6 reserved: %llu", (unsigned long long)nfree);
	fsg_hugetlb_pool_parse(NULL, &size, &nfree);
	cr_expect_eq(size, 0);
	cr_expect_eq(nfree, 0);
}

/* Hugetlb pages: with a pool that holds the arena (vm.nr_hugepages), auto
 * and "hugetlb" take them, the arena is whole huge pages, its bytes are
 * right and a client's read-only fd maps it; without one, auto falls back
 * to shmem and says why, and "hugetlb" fails naming vm.nr_hugepages. */
Test(arena, hugetlb_pages_or_a_fallback_that_says_so, .timeout = 60)
{
	struct fsgw_model m;
	char path[160];
	struct fsg_file f;
	struct fsg_plan p;
	struct fsg_err err;
	fsgw_model_defaults(&m, "qwen3moe");
	tu_model(g_dir, "h.gguf", &m, path, sizeof(path));
	cr_assert_eq(fsg_open(&f, path, &err), 0);
	cr_assert_eq(fsg_plan_build(&f, &p, &err), 0);
	struct fsg_layout lo;
	cr_assert_eq(fsg_layout_build(&p, &lo, &err), 0);
	uint64_t hsz, room = hugetlb_free(&hsz);
	int pool = hsz && room >= (lo.bytes + hsz - 1) / hsz * hsz;
	fsg_layout_free(&lo);
	for (int pages = FSG_PAGES_AUTO; pages <= FSG_PAGES_HUGETLB; pages += 2) {
		struct fsg_load_opts o = {.model = "h", .lock = FSG_LOCK_NO, .pages = pages};
		struct fs_shm shm;
		struct fsg_load_result res;
		int r = fsg_arena_build(&f, &p, &o, &shm, &res, &err);
		if (!pool && pages == FSG_PAGES_HUGETLB) {
			cr_expect_lt(r, 0);
			cr_expect(strstr(err.msg, "vm.nr_hugepages") != NULL, "%s", err.msg);
			cr_expect_eq(shm.fd, -1, "nothing left behind");
			continue;
		}
		cr_assert_eq(r, 0, "pages %d: %s", pages, err.msg);
		/* auto takes the pool only where shmem gets no huge pages */
		char why[96];
		int want = pool && (pages == FSG_PAGES_HUGETLB || !fsg_shmem_thp(why, sizeof(why)));
		cr_expect_eq(res.hugetlb, want, "pages %d: %s", pages, res.pages_why);
		cr_expect(strstr(res.pages_why, want ? "hugetlb" : "shmem") != NULL, "%s", res.pages_why);
		if (want) {
			cr_expect_eq(shm.bytes % hsz, 0u);
			cr_expect_eq(res.fill, FSG_FILL_MAP, "hugetlbfs has no write()");
		}
		check_arena(&f, &p, &shm, m.seed, res.pages_why);
		/* What a client maps: the read-only fd, at the file's size. */
		int ro = fs_shm_ro_fd(&shm);
		cr_assert_geq(ro, 0);
		struct fs_shm c;
		cr_assert_eq(fs_shm_map_fd(&c, ro, sizeof(struct fs_arena_hdr), 0), 0);
		cr_expect_eq(c.bytes, shm.bytes);
		cr_expect_eq(memcmp(c.base, shm.base, shm.bytes), 0);
		fs_shm_close(&c);
		fs_shm_close(&shm);
	}
	fsg_plan_free(&p);
	fsg_close(&f);
}
