/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The arena built from each fixture: header, index, part tables, every
 * part's bytes equal to the file's slice, checksums; progress; a file that
 * shrinks under the loader; an arena that cannot be locked.
 */
#include <criterion/criterion.h>
#include <errno.h>
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
		 * (one expert a job) and O_DIRECT (bounce buffer, aligned reads). */
		struct prog pr = {0};
		struct fsg_load_opts o = {.model = "m",
					  .lock = FSG_LOCK_NO,
					  .threads = k % 4,
					  .max_read = k % 2 ? 4096 : 0,
					  .chunk = k % 3 == 0 ? 4096 : 0,
					  .direct = (k / 2) % 2 ? FSG_DIRECT_ON : FSG_DIRECT_OFF,
					  .progress = on_progress,
					  .layer_done = on_layer,
					  .arg = &pr};
		struct fs_shm shm;
		struct fsg_load_result res;
		cr_assert_eq(fsg_arena_build(&f, &p, &o, &shm, &res, &err), 0, "%s: %s", fx[k].file, err.msg);
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
			cr_expect_eq(pr.layer_calls[l], 1u, "%s: layer %u reported done %u times", fx[k].file,
				     l, pr.layer_calls[l]);
		if (res.direct)
			cr_expect_geq(res.direct_bytes, p.member_bytes, "%s: O_DIRECT read it all",
				      fx[k].file);
		check_arena(&f, &p, &shm, fx[k].m.seed, fx[k].file);
		fs_shm_close(&shm);
		fsg_plan_free(&p);
		fsg_close(&f);
	}
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
