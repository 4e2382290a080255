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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fs_arena.h"
#include "fs_counters.h"
#include "fs_time.h"
#include "fsd_loop.h"
#include "fsd_preflight.h"
#include "fsg_arena.h"
#include "fsg_describe.h"

struct fsd_gguf {
	struct fsg_file f;
	struct fsg_plan p;
	uint64_t last_log_ns;
	uint64_t identity;
	struct fsg_load_result res;
	/* The fill, on its own thread while the loop serves the control
	 * socket: done() runs on the loop thread through `async`. */
	pthread_t th;
	int th_running, cancel, r;
	struct fsg_err err;
	uv_async_t async;
	void (*done)(struct fsd *d, int r);
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
int fsd_arena_gguf_check(const char *path, char *msg, size_t len, uint64_t *arena_bytes, uint64_t *slot_bytes)
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
	*arena_bytes = lo.bytes;
	*slot_bytes = (g.p.max_blob + FS_ARENA_ALIGN - 1) / FS_ARENA_ALIGN *
		      FS_ARENA_ALIGN; /* as the start */
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
	uint64_t bps = ns ? (uint64_t)((double)done * 1e9 / (double)ns) : 0;
	uint64_t left = bps && total > done ? (uint64_t)((double)(total - done) * 1e9 / (double)bps) : 0;
	__atomic_store_n(&ctr[FS_C_arena_loaded_bytes], done, __ATOMIC_RELAXED);
	__atomic_store_n(&ctr[FS_C_arena_bytes], total, __ATOMIC_RELAXED);
	__atomic_store_n(&ctr[FS_C_arena_load_ns], ns, __ATOMIC_RELAXED);
	__atomic_store_n(&ctr[FS_C_arena_load_bps], bps, __ATOMIC_RELAXED);
	__atomic_store_n(&ctr[FS_C_arena_load_left_ns], left, __ATOMIC_RELAXED);
	/* A log line and a systemd status a second are plenty for a load of
	 * minutes. */
	if (done < total && ns - d->gguf->last_log_ns < 1000000000ull)
		return;
	d->gguf->last_log_ns = ns;
	double pct = total ? 100.0 * (double)done / (double)total : 100.0;
	fsd_log(FSD_INFO, "arena: loading %.0f %% at %.1f GB/s (%.2f of %.2f GB, %.0f s left)", pct,
		(double)bps / 1e9, (double)done / 1e9, (double)total / 1e9, (double)left / 1e9);
	/* EXTEND_TIMEOUT_USEC: as long as the load moves, systemd's start
	 * timeout never trips, however large the model. */
	char st[256];
	snprintf(st, sizeof(st),
		 "STATUS=loading the arena: %.0f %% (%.2f of %.2f GB at %.1f GB/s, %.0f s left)\n"
		 "EXTEND_TIMEOUT_USEC=%llu",
		 pct, (double)done / 1e9, (double)total / 1e9, (double)bps / 1e9, (double)left / 1e9,
		 (unsigned long long)FSD_LOAD_EXTEND_USEC);
	fsd_notify(st);
}

/* From any loader thread, once per layer (dense layers at the start),
 * after the layer's bytes and checksums are written: the release store
 * publishes them to the engines (fs_arena_expert) and to the residency
 * core, which serves the layer from then on. */
static void layer_done(void *arg, uint32_t layer)
{
	struct fsd *d = arg;
	if (layer < d->cfg.layers)
		fs_store_release(&d->layer_ready[layer], FS_LAYER_READY);
	__atomic_add_fetch(&d->counters_daemon[FS_C_arena_layers_loaded], 1, __ATOMIC_RELAXED);
}

/* A restart under systemd: this file's arena may be in the fd store
 * (fsd_arena_keep.c); then no byte of the file is read again. */
static int take_kept(struct fsd *d)
{
	struct fsd_gguf *g = d->gguf;
	struct fsg_err err;
	struct fsg_layout lo;
	if (!g->identity || fsg_layout_build(&g->p, &lo, &err) < 0)
		return 0;
	struct fsd_arena_want want = {
		.source = FS_ARENA_GGUF,
		.layers = g->p.layers,
		.experts = g->p.experts,
		.experts_used = g->p.experts_used,
		.arena_bytes = fs_page_round((size_t)lo.bytes),
		.max_expert_bytes = g->p.max_blob,
		.off_index = lo.off_index,
		.off_data = lo.off_data,
		.seed = g->identity,
		.model = d->cfg.model,
		.must_lock = !d->cfg.allow_unlocked,
	};
	fsg_layout_free(&lo);
	return fsd_arena_keep_take(d, &want);
}

static struct fsg_load_opts load_opts(struct fsd *d)
{
	/* A test hook: a load slowed to this many MB/s takes seconds, so a
	 * test can watch its progress (tools/gguf/gguf_e2e_test.c). */
	const char *mbps = getenv("FORESIGHT_TEST_LOAD_MBPS");
	return (struct fsg_load_opts){
		.max_bps = mbps ? strtoull(mbps, NULL, 10) * 1000000ull : 0,
		.model = d->cfg.model,
		.lock = d->cfg.allow_unlocked ? FSG_LOCK_TRY : FSG_LOCK_MUST,
		.progress = progress,
		.layer_done = layer_done,
		.arg = d,
		.cancel = &d->gguf->cancel,
	};
}

int fsd_arena_gguf_begin(struct fsd *d)
{
	struct fsd_gguf *g = d->gguf;
	struct fsg_err err;
	__atomic_store_n(&d->counters_daemon[FS_C_arena_bytes], g->p.member_bytes, __ATOMIC_RELAXED);
	g->identity = fsd_arena_file_identity(d->cfg.model_path);
	int k = take_kept(d);
	if (k != 0)
		return k;
	struct fsg_load_opts o = load_opts(d);
	/* The memfd, its layout and the lock (checked for the whole arena
	 * now: a start that cannot lock fails in a second). */
	int r = fsg_arena_create(&g->p, &o, &d->arena_shm, &g->res, &err);
	if (r < 0) {
		if (g->res.lock_failed)
			fsd_log(FSD_ERR,
				"arena: %s; or start foresightd with --allow-unlocked to serve it unlocked",
				err.msg);
		else
			fsd_log(FSD_ERR, "arena: %s", err.msg);
		return r;
	}
	if (!g->res.locked)
		fsd_log(FSD_WARN, "arena: NOT locked in memory (--allow-unlocked): %s", g->res.lock_err.msg);
	/* The memory the load's speed depends on (fsg_load.c): shmem with 2 MiB
	 * pages where shmem_enabled allows, else hugetlb pages when
	 * vm.nr_hugepages holds the arena, else shmem with 4 KiB pages. */
	fsd_log(FSD_INFO, "arena: %.1f MiB of %s", (double)d->arena_shm.bytes / 1048576.0, g->res.pages_why);
	snprintf(d->arena_pages, sizeof(d->arena_pages), "%s", g->res.pages_why);
	if (!g->res.hugetlb && !g->res.thp)
		fsd_log(FSD_INFO,
			"arena: 4 KiB pages load warm at about a third of the rate of shmem's 2 MiB pages "
			"(docs/results/arena.md): 'advise' in /sys/kernel/mm/transparent_hugepage/shmem_enabled "
			"(the unit sets it when it is 'never') gives the arena 2 MiB pages");
	d->arena = d->arena_shm.base;
	/* The model file's identity: what a restart checks a kept arena against. */
	d->arena->seed = g->identity;
	d->arena_ro_fd = fs_shm_ro_fd(&d->arena_shm);
	return d->arena_ro_fd < 0 ? d->arena_ro_fd : 0;
}

static void *fill_thread(void *arg)
{
	struct fsd *d = arg;
	struct fsd_gguf *g = d->gguf;
	struct fsg_load_opts o = load_opts(d);
	g->r = fsg_arena_fill(&g->f, &g->p, &o, &d->arena_shm, &g->res, &g->err);
	uv_async_send(&g->async);
	return NULL;
}

static void on_filled(uv_async_t *h)
{
	struct fsd *d = h->loop->data;
	struct fsd_gguf *g = d->gguf;
	if (!g->th_running)
		return;
	pthread_join(g->th, NULL);
	g->th_running = 0;
	int r = g->r;
	const struct fsg_load_result *res = &g->res;
	if (r == -ECANCELED)
		fsd_log(FSD_INFO, "arena: load cancelled");
	else if (r < 0)
		fsd_log(FSD_ERR, "arena: %s", g->err.msg);
	else
		fsd_log(FSD_INFO,
			"arena: loaded %.3f GB in %.2f s (%.2f GB/s, %llu reads%s, %u loader threads, %s; %.0f %% of "
			"the file was cached), %.1f MiB, %s",
			(double)res->bytes_read / 1e9, (double)res->ns / 1e9,
			res->ns ? (double)res->bytes_read / (double)res->ns : 0.0,
			(unsigned long long)res->read_calls,
			res->direct    ? " O_DIRECT" :
			res->readahead ? ", read ahead" :
					 "",
			res->threads,
			res->fill == FSG_FILL_WRITE ? "written into the memfd" : "read into the mapping",
			res->cached >= 0 ? 100.0 * res->cached : 0.0, (double)d->arena_shm.bytes / 1048576.0,
			res->locked ? "locked" : "unlocked");
	__atomic_store_n(&d->counters_daemon[FS_C_arena_load_left_ns], 0, __ATOMIC_RELAXED);
	g->done(d, r);
}

int fsd_arena_gguf_fill_start(struct fsd *d, void (*done)(struct fsd *d, int r))
{
	struct fsd_gguf *g = d->gguf;
	g->done = done;
	int r = uv_async_init(d->lp->loop, &g->async, on_filled);
	if (r < 0)
		return r;
	if ((r = pthread_create(&g->th, NULL, fill_thread, d)) != 0) {
		uv_close((uv_handle_t *)&g->async, NULL);
		return -r;
	}
	g->th_running = 1;
	return 0;
}

void fsd_arena_gguf_cancel(struct fsd *d)
{
	struct fsd_gguf *g = d->gguf;
	if (!g || !g->th_running)
		return;
	__atomic_store_n(&g->cancel, 1, __ATOMIC_RELAXED);
	pthread_join(g->th, NULL);
	g->th_running = 0;
	fsd_log(FSD_INFO, "arena: load cancelled at %.0f %%",
		g->p.member_bytes ? 100.0 * (double)g->res.bytes_read / (double)g->p.member_bytes : 0.0);
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
