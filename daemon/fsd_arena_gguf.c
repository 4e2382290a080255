/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_arena_gguf.c: the expert arena from the model's own GGUF file
 * (--model FILE).  The GGUF code (daemon/gguf/) parses, plans and fills;
 * this file ties it to the daemon: the served model's dimensions come from
 * the file, the slot size is the largest expert blob, progress goes to the
 * log and to the arena_* counters, and an arena that cannot be locked
 * stops the daemon unless --allow-unlocked says otherwise.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fs_time.h"
#include "fsd.h"
#include "fsd_preflight.h"
#include "fsg_arena.h"
#include "fsg_describe.h"

struct fsd_gguf {
	struct fsg_file f;
	struct fsg_plan p;
	uint64_t last_log_ns;
};

static int plan(const char *path, struct fsd_gguf *g, struct fsg_layout *lo, struct fsg_err *err)
{
	int r = fsg_open(&g->f, path, err);
	if (r == 0 && (r = fsg_plan_build(&g->f, &g->p, err)) < 0)
		fsg_close(&g->f);
	if (r == 0 && lo && (r = fsg_layout_build(&g->p, lo, err)) < 0) {
		fsg_plan_free(&g->p);
		fsg_close(&g->f);
	}
	return r;
}

int fsd_arena_gguf_describe(const char *path)
{
	struct fsd_gguf g;
	struct fsg_layout lo;
	struct fsg_err err;
	if (plan(path, &g, &lo, &err) < 0) {
		fprintf(stderr, "foresightd: %s: %s\n", path, err.msg);
		return 1;
	}
	cJSON *j = fsg_describe(path, &g.f, &g.p, &lo);
	char *text = j ? cJSON_Print(j) : NULL;
	int rc = 0;
	if (text)
		printf("%s\n", text);
	else {
		fprintf(stderr, "foresightd: %s: out of memory\n", path);
		rc = 1;
	}
	cJSON_free(text);
	cJSON_Delete(j);
	fsg_layout_free(&lo);
	fsg_plan_free(&g.p);
	fsg_close(&g.f);
	return rc;
}

/* --check-config and the start's preflight: the file opens, parses and
 * plans as the start would (a truncated or foreign file fails here).  On
 * success msg says what it holds. */
int fsd_arena_gguf_check(const char *path, char *msg, size_t len)
{
	struct fsd_gguf g;
	struct fsg_layout lo;
	struct fsg_err err;
	if (plan(path, &g, &lo, &err) < 0) {
		snprintf(msg, len, "%s", err.msg);
		return -1;
	}
	snprintf(msg, len, "GGUF %s, %u layers x %u experts, top-%u, %.3f GB of experts", g.p.arch,
		 g.p.layers, g.p.experts, g.p.experts_used, (double)g.p.member_bytes / 1e9);
	fsg_layout_free(&lo);
	fsg_plan_free(&g.p);
	fsg_close(&g.f);
	return 0;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

int fsd_arena_gguf_open(struct fsd *d)
{
	struct fsd_config *c = &d->cfg;
	struct fsg_err err;
	struct fsd_gguf *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	int r = plan(c->model_path, g, NULL, &err);
	if (r < 0) {
		fsd_log(FSD_ERR, "model %s: %s", c->model_path, err.msg);
		free(g);
		return r;
	}
	const struct fsg_plan *p = &g->p;
	if ((uint64_t)p->layers * p->experts * c->cards > (1ull << 26)) {
		fsd_log(FSD_ERR,
			"model %s: %u cards x %u layers x %u experts: too large for the epoch tables",
			c->model_path, c->cards, p->layers, p->experts);
		fsg_plan_free(&g->p);
		fsg_close(&g->f);
		free(g);
		return -E2BIG;
	}
	d->expert_bytes = malloc((size_t)p->layers * p->experts * sizeof(*d->expert_bytes));
	if (!d->expert_bytes) {
		fsg_plan_free(&g->p);
		fsg_close(&g->f);
		free(g);
		return -ENOMEM;
	}
	for (uint32_t l = 0; l < p->layers; l++)
		for (uint32_t x = 0; x < p->experts; x++)
			d->expert_bytes[(uint64_t)l * p->experts + x] = p->layer[l].blob_bytes;
	d->gguf = g;
	c->layers = p->layers;
	c->experts = p->experts;
	c->experts_used = p->experts_used;
	c->expert_bytes = p->max_blob;
	/* A slot holds the largest blob, in whole pages (aligned copies). */
	d->slot_bytes = (p->max_blob + FS_ARENA_ALIGN - 1) / FS_ARENA_ALIGN * FS_ARENA_ALIGN;
	if (strcmp(c->model, "synthetic") == 0) /* no --model-name: the file names it */
		snprintf(c->model, sizeof(c->model), "%.*s", (int)sizeof(c->model) - 1,
			 p->name[0] ? p->name : base_name(c->model_path));
	fsd_log(FSD_INFO,
		"model %s: %s '%s', %u layers (%u with experts) x %u experts, top-%u, expert blobs <= %.2f MiB, "
		"%.3f GB of experts to load; %u tensors (%.3f GB) left out (dense, shared experts, routers)",
		c->model_path, p->arch, c->model, p->layers, p->moe_layers, p->experts, p->experts_used,
		(double)p->max_blob / 1048576.0, (double)p->member_bytes / 1e9, p->nleft,
		(double)p->left_bytes / 1e9);
	return 0;
}

static void progress(void *arg, uint64_t done, uint64_t total, uint64_t ns)
{
	struct fsd *d = arg;
	uint64_t *ctr = d->counters_daemon;
	__atomic_store_n(&ctr[FS_C_arena_loaded_bytes], done, __ATOMIC_RELAXED);
	__atomic_store_n(&ctr[FS_C_arena_bytes], total, __ATOMIC_RELAXED);
	__atomic_store_n(&ctr[FS_C_arena_load_ns], ns, __ATOMIC_RELAXED);
	/* A log line a second is plenty for a load of minutes. */
	if (done < total && ns - d->gguf->last_log_ns < 1000000000ull)
		return;
	d->gguf->last_log_ns = ns;
	fsd_log(FSD_INFO, "arena: loading %.0f %% at %.1f GB/s (%.2f of %.2f GB)",
		total ? 100.0 * (double)done / (double)total : 100.0, ns ? (double)done / (double)ns : 0.0,
		(double)done / 1e9, (double)total / 1e9);
}

int fsd_arena_gguf_load(struct fsd *d)
{
	struct fsd_gguf *g = d->gguf;
	struct fsg_err err;
	struct fsg_load_result res;
	struct fsg_load_opts o = {
		.model = d->cfg.model,
		.lock = d->cfg.allow_unlocked ? FSG_LOCK_TRY : FSG_LOCK_MUST,
		.progress = progress,
		.arg = d,
	};
	__atomic_store_n(&d->counters_daemon[FS_C_arena_bytes], g->p.member_bytes, __ATOMIC_RELAXED);
	/* A restart under systemd: this file's arena may be in the fd store
	 * (fsd_arena_keep.c); then no byte of the file is read again. */
	uint64_t identity = fsd_arena_file_identity(d->cfg.model_path);
	struct fsg_layout lo;
	if (identity && fsg_layout_build(&g->p, &lo, &err) == 0) {
		struct fsd_arena_want want = {
			.source = FS_ARENA_GGUF,
			.layers = g->p.layers,
			.experts = g->p.experts,
			.experts_used = g->p.experts_used,
			.arena_bytes = fs_page_round((size_t)lo.bytes),
			.max_expert_bytes = g->p.max_blob,
			.off_index = lo.off_index,
			.off_data = lo.off_data,
			.seed = identity,
			.model = d->cfg.model,
			.must_lock = !d->cfg.allow_unlocked,
		};
		fsg_layout_free(&lo);
		int k = fsd_arena_keep_take(d, &want);
		if (k != 0)
			return k < 0 ? k : 0;
	}
	int r = fsg_arena_build(&g->f, &g->p, &o, &d->arena_shm, &res, &err);
	if (r < 0) {
		if (res.lock_failed)
			fsd_log(FSD_ERR,
				"arena: %s; or start foresightd with --allow-unlocked to serve it unlocked",
				err.msg);
		else
			fsd_log(FSD_ERR, "arena: %s", err.msg);
		return r;
	}
	if (!res.locked)
		fsd_log(FSD_WARN, "arena: NOT locked in memory (--allow-unlocked): %s", res.lock_err.msg);
	d->arena = d->arena_shm.base;
	/* The model file's identity: what a restart checks a kept arena against. */
	d->arena->seed = identity;
	d->arena_ro_fd = fs_shm_ro_fd(&d->arena_shm);
	if (d->arena_ro_fd < 0)
		return d->arena_ro_fd;
	fsd_log(FSD_INFO,
		"arena: loaded %.3f GB in %.2f s (%.2f GB/s, %llu reads, %u checksum threads), %.1f MiB, %s",
		(double)res.bytes_read / 1e9, (double)res.ns / 1e9,
		res.ns ? (double)res.bytes_read / (double)res.ns : 0.0, (unsigned long long)res.read_calls,
		res.threads, (double)d->arena_shm.bytes / 1048576.0, res.locked ? "locked" : "unlocked");
	return 0;
}

void fsd_arena_gguf_close(struct fsd *d)
{
	if (!d->gguf)
		return;
	fsg_plan_free(&d->gguf->p);
	fsg_close(&d->gguf->f);
	free(d->gguf);
	d->gguf = NULL;
	free(d->expert_bytes);
	d->expert_bytes = NULL;
}
