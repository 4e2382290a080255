/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsl_core.c: the provider's tables, epochs and claims (fsl.h).
 *
 * One device block holds a small header (the evaluation's window number,
 * which captured route kernels read) and one table per (layer, role) of
 * `experts` pointers.  Each evaluation fills a pinned copy of the block
 * from the epoch it holds and uploads it on the evaluation's stream before
 * the graph runs; stream order keeps an older evaluation's tables until it
 * is done.  The epoch stays held until the device passes the evaluation's
 * end mark: the slots it names are not reused while a kernel may read them.
 */
#include "fsl_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "foresight/foresight.h"

static __thread char g_err[512];

const char *fsl_error(void)
{
	return g_err;
}

int fsl_fail(int r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(g_err, sizeof(g_err), fmt, ap);
	va_end(ap);
	fprintf(stderr, "foresight-llama: %s\n", g_err);
	return r;
}

static const char *role_name(uint32_t role)
{
	static const char *const n[] = {"?", "gate", "up", "down", "gate_up"};
	return role <= ROLES ? n[role] : "?";
}

int fsl_parse_name(const char *name, uint32_t *layer, uint32_t *role)
{
	unsigned l = 0;
	int n = 0;
	if (!name || sscanf(name, "blk.%u.ffn_%n", &l, &n) != 1 || n == 0)
		return -1;
	static const struct {
		const char *tail;
		uint32_t role;
	} roles[] = {{"gate_up_exps.weight", FS_ROLE_GATE_UP},
		     {"gate_exps.weight", FS_ROLE_GATE},
		     {"up_exps.weight", FS_ROLE_UP},
		     {"down_exps.weight", FS_ROLE_DOWN}};
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		if (strcmp(name + n, roles[i].tail) == 0) {
			*layer = l;
			*role = roles[i].role;
			return 0;
		}
	return -1;
}

static uint64_t tables_off(const struct fsl *p, uint32_t layer, uint32_t role)
{
	return HDR_BYTES + ((uint64_t)layer * ROLES + (role - 1u)) * p->experts * sizeof(uint64_t);
}

static int wait_loaded(struct fsl *p)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	uint32_t said = UINT32_MAX;
	for (;;) {
		uint32_t in = 0;
		for (uint32_t l = 0; l < p->layers; l++)
			in += fs_layer_ready(p->c, l) == 1;
		if (in == p->layers)
			return 0;
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		double s = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
		if (s > p->o.wait_s)
			return fsl_fail(
				-ETIMEDOUT,
				"foresightd has loaded %u of %u layers after %u s (FORESIGHT_LLAMA_WAIT_S)",
				in, p->layers, p->o.wait_s);
		if (p->o.log && in != said) {
			fprintf(stderr,
				"foresight-llama: waiting for foresightd to load the model (%u of %u layers)\n",
				in, p->layers);
			said = in;
		}
		usleep(100 * 1000);
	}
}

static int map_arena(struct fsl *p)
{
	p->pin = fs_arena_pin(p->c);
	struct fs_arena_region reg;
	if (!p->pin || fs_arena_pin_region(p->pin, &reg) < 0)
		return fsl_fail(-ENOTCONN, "no arena to map (is foresightd serving a model?)");
	p->arena = reg.base;
	p->arena_bytes = reg.bytes;
	p->blob_off = calloc((size_t)p->layers * p->experts, sizeof(*p->blob_off));
	p->blob_bytes = calloc((size_t)p->layers * p->experts, sizeof(*p->blob_bytes));
	if (!p->blob_off || !p->blob_bytes)
		return fsl_fail(-ENOMEM, "out of memory");
	for (uint32_t l = 0; l < p->layers; l++)
		for (uint32_t e = 0; e < p->experts; e++) {
			struct fs_expert_blob b;
			int r = fs_arena_expert(p->c, l, e, &b);
			if (r < 0)
				return fsl_fail(r, "expert %u of layer %u: %s", e, l, fs_strerror(r));
			const uint8_t *d = b.data;
			if (d < p->arena || (uint64_t)(d - p->arena) > p->arena_bytes ||
			    b.bytes > p->arena_bytes - (uint64_t)(d - p->arena))
				return fsl_fail(
					-EAGAIN,
					"the arena changed while it was mapped (foresightd restarted?): retry");
			p->blob_off[(uint64_t)l * p->experts + e] = (uint64_t)(d - p->arena);
			p->blob_bytes[(uint64_t)l * p->experts + e] = b.bytes;
		}
	int r = p->gpu.map_host(p->gpu.ctx, p->arena, p->arena_bytes, &p->arena_dev);
	if (r < 0)
		return fsl_fail(r, "registering the arena (%.2f GiB) for reads in place failed: %s",
				(double)p->arena_bytes / (1 << 30), strerror(-r));
	return 0;
}

static int find_card(struct fsl *p, uint32_t cards)
{
	for (uint32_t k = 0; k < cards; k++) {
		struct fs_card_info ci;
		if (fs_client_card(p->c, k, &ci) < 0 || ci.down)
			continue;
		if (p->gpu.host_slots ?
			    ci.kind == FS_CARD_HOST :
			    (ci.kind == FS_CARD_CUDA && fs_card_device(p->c, k) == p->gpu.device)) {
			p->card = k;
			return 0;
		}
	}
	return fsl_fail(-ENODEV, "foresightd serves no card on %s %d: its slots cannot be read here",
			p->gpu.host_slots ? "the host backend, device" : "CUDA device", p->gpu.device);
}

static int alloc_blocks(struct fsl *p)
{
	p->block_bytes = tables_off(p, p->layers, 1);
	int r = p->gpu.alloc_dev(p->gpu.ctx, p->block_bytes, (void **)&p->dev);
	for (unsigned k = 0; r == 0 && k < FSL_INFLIGHT; k++) {
		r = p->gpu.alloc_pinned(p->gpu.ctx, p->block_bytes, &p->stage[k]);
		if (r == 0)
			memset(p->stage[k], 0, p->block_bytes);
	}
	if (r == 0)
		r = p->gpu.alloc_dev(p->gpu.ctx, sizeof(struct fsl_counters), &p->ctr_dev);
	if (r == 0) {
		static const struct fsl_counters zero;
		r = p->gpu.upload(p->gpu.ctx, p->ctr_dev, &zero, sizeof(zero), NULL);
	}
	if (r == 0) {
		p->used_words = FSL_USED_WORDS(p->experts);
		uint64_t n = (uint64_t)p->layers * p->used_words * sizeof(uint32_t);
		r = p->gpu.alloc_mapped(p->gpu.ctx, n, (void **)&p->used, &p->used_dev);
		if (r == 0)
			memset(p->used, 0, n);
	}
	if (r == 0)
		r = p->gpu.ring(p->gpu.ctx, p->c, &p->ring_desc);
	if (r < 0)
		return fsl_fail(r, "allocating the provider's tables failed: %s", strerror(-r));
	return 0;
}

int fsl_open(struct fsl **out, const struct fsl_opts *o, const struct fsl_gpu *gpu)
{
	g_err[0] = '\0';
	struct fsl *p = calloc(1, sizeof(*p));
	if (!p)
		return fsl_fail(-ENOMEM, "out of memory");
	p->gpu = *gpu;
	p->o = *o;
	struct fs_client_opts co = {
		.socket_path = o->socket, .name = o->name ? o->name : "llama.cpp", .ring_entries = 8192};
	int r = fs_client_open(&p->c, &co);
	if (r < 0) {
		fsl_fail(r, "cannot attach to foresightd: %s", fs_open_error());
		free(p);
		return r;
	}
	struct fs_model_info mi;
	r = fs_client_model(p->c, &mi);
	if (r == 0 && mi.layers * (uint64_t)mi.experts == 0)
		r = fsl_fail(-EINVAL, "foresightd serves a model of %u layers x %u experts", mi.layers,
			     mi.experts);
	if (r == 0) {
		p->layers = mi.layers;
		p->experts = mi.experts;
		p->part = calloc((size_t)p->layers * ROLES, sizeof(*p->part));
		p->layer_bytes = calloc(p->layers, sizeof(*p->layer_bytes));
		if (!p->part || !p->layer_bytes)
			r = fsl_fail(-ENOMEM, "out of memory");
	}
	if (r == 0)
		r = find_card(p, mi.cards);
	if (r == 0)
		r = wait_loaded(p);
	if (r == 0)
		r = map_arena(p);
	if (r == 0)
		r = alloc_blocks(p);
	if (r == 0 && o->lru_mib)
		r = fsl_lru_open(p, o->lru_mib);
	if (r == 0 && o->stage) {
		uint64_t max = 0;
		for (uint64_t i = 0; i < (uint64_t)p->layers * p->experts; i++)
			max = p->blob_bytes[i] > max ? p->blob_bytes[i] : max;
		p->stage_stride = (max + 255u) & ~(uint64_t)255u;
		if (o->stage > FSL_STAGE_MAX_IDS)
			r = fsl_fail(-EINVAL, "staging %u experts a layer: at most %d", o->stage,
				     FSL_STAGE_MAX_IDS);
		else if (p->gpu.alloc_dev(p->gpu.ctx, o->stage * p->stage_stride, (void **)&p->stagebuf) < 0)
			r = fsl_fail(-ENOMEM, "allocating the staging buffer (%u x %llu bytes) failed",
				     o->stage, (unsigned long long)p->stage_stride);
	}
	if (r < 0) {
		fsl_close(p);
		return r;
	}
	if (o->log)
		fprintf(stderr,
			"foresight-llama: attached to foresightd (%s: %u layers x %u experts), card %u, arena %.2f GiB "
			"read in place\n",
			mi.model, p->layers, p->experts, p->card, (double)p->arena_bytes / (1 << 30));
	*out = p;
	return 0;
}

void fsl_close(struct fsl *p)
{
	if (!p)
		return;
	for (unsigned k = 0; k < FSL_INFLIGHT; k++)
		if (p->fl[k].busy) {
			p->gpu.wait(p->gpu.ctx, k);
			fs_release(p->c, &p->fl[k].v);
		}
	/* The device memory and the arena's registration belong to the
	 * runtime until the process ends: a kernel may still name them. */
	if (p->c) {
		if (p->pin)
			fs_arena_unpin(p->c, p->pin);
		fs_client_close(p->c);
	}
	free(p->blob_off);
	free(p->blob_bytes);
	fsl_lru_close(p);
	free(p->part);
	free(p->layer_bytes);
	free(p);
}

const void *const *fsl_claim(struct fsl *p, int device, const char *name, int type, const int64_t *ne,
			     const size_t *nb)
{
	uint32_t layer, role;
	if (p->gpu.device >= 0 && device != p->gpu.device) {
		fsl_fail(-ENODEV, "%s: on CUDA device %d; this provider serves device %d only", name, device,
			 p->gpu.device);
		return NULL;
	}
	if (fsl_parse_name(name, &layer, &role) < 0) {
		fsl_fail(-EINVAL, "%s: not an expert weight (blk.N.ffn_{gate,up,down,gate_up}_exps.weight)",
			 name);
		return NULL;
	}
	if (layer >= p->layers || ne[2] != (int64_t)p->experts || ne[3] != 1) {
		fsl_fail(-EINVAL,
			 "%s: %" PRId64 " experts in layer %u; foresightd serves %u layers x %u experts",
			 name, ne[2], layer, p->layers, p->experts);
		return NULL;
	}
	struct fs_expert_part parts[12];
	int n = fs_arena_expert_parts(p->c, layer, 0, parts, 12);
	const struct fs_expert_part *pt = NULL;
	for (int i = 0; i < n && i < 12; i++)
		if (parts[i].role == role && parts[i].what == FS_WHAT_WEIGHT)
			pt = &parts[i];
	if (!pt) {
		fsl_fail(-ENOENT, "%s: foresightd's arena has no %s weight for layer %u", name,
			 role_name(role), layer);
		return NULL;
	}
	if (pt->ggml_type != (uint32_t)type || pt->ne[0] != (uint64_t)ne[0] || pt->ne[1] != (uint64_t)ne[1] ||
	    pt->bytes != (uint64_t)nb[2]) {
		fsl_fail(-EINVAL,
			 "%s: llama.cpp has type %d, %" PRId64 "x%" PRId64
			 " per expert (%zu bytes); foresightd's arena "
			 "has type %u, %" PRIu64 "x%" PRIu64 " (%" PRIu64
			 " bytes): is it serving this model file?",
			 name, type, ne[0], ne[1], nb[2], pt->ggml_type, pt->ne[0], pt->ne[1], pt->bytes);
		return NULL;
	}
	struct fsl_part *q = &p->part[(uint64_t)layer * ROLES + role - 1];
	if (!q->claimed)
		p->layer_bytes[layer] += pt->bytes;
	*q = (struct fsl_part){.off = pt->offset, .bytes = pt->bytes, .claimed = 1};
	return (const void *const *)(p->dev + tables_off(p, layer, role));
}

/* The (layer, role) a table pointer names, or -1. */
static int table_of(const struct fsl *p, const void *const *table, uint32_t *layer, uint32_t *role)
{
	const uint8_t *t = (const uint8_t *)table;
	if (t < p->dev + HDR_BYTES || t >= p->dev + p->block_bytes)
		return -1;
	uint64_t i = (uint64_t)(t - p->dev - HDR_BYTES) / (p->experts * sizeof(uint64_t));
	*layer = (uint32_t)(i / ROLES);
	*role = (uint32_t)(i % ROLES) + 1u;
	return p->part[i].claimed ? 0 : -1;
}

/* Compare data, the weight's bytes [offset, offset + size), with the arena:
 * each expert slice it covers, where `mode` looks (1: its first and last
 * CHECK_SAMPLE bytes; 2: all). */
int fsl_check(struct fsl *p, const void *const *table, const void *data, size_t offset, size_t size)
{
	uint32_t layer, role;
	if (table_of(p, table, &layer, &role) < 0)
		return fsl_fail(-EINVAL, "a check of a weight the provider never claimed");
	if (p->o.check == 0)
		return 0;
	const struct fsl_part *q = &p->part[(uint64_t)layer * ROLES + role - 1];
	const uint8_t *d = data;
	for (uint64_t pos = offset; pos < offset + size;) {
		uint64_t e = pos / q->bytes, in = pos % q->bytes;
		uint64_t end = (e + 1) * q->bytes < offset + size ? q->bytes : offset + size - e * q->bytes;
		if (e >= p->experts)
			return fsl_fail(-EINVAL, "blk.%u.ffn_%s_exps.weight: bytes past its %u experts",
					layer, role_name(role), p->experts);
		const uint8_t *a = p->arena + p->blob_off[(uint64_t)layer * p->experts + e] + q->off;
		/* the ranges of this slice to compare: all, or the two ends */
		uint64_t r[2][2] = {{in, end}, {end, end}};
		if (p->o.check == 1) {
			uint64_t h = CHECK_SAMPLE < q->bytes ? CHECK_SAMPLE : q->bytes;
			r[0][0] = in > h ? h : in, r[0][1] = end < h ? end : h;
			r[1][0] = in > q->bytes - h ? in : q->bytes - h, r[1][1] = end;
		}
		for (int k = 0; k < 2; k++)
			if (r[k][0] < r[k][1]) {
				if (memcmp(d + (e * q->bytes + r[k][0] - offset), a + r[k][0],
					   r[k][1] - r[k][0]) != 0)
					return fsl_fail(
						-EBADMSG,
						"blk.%u.ffn_%s_exps.weight, expert %" PRIu64
						": the model file's bytes differ from foresightd's arena (is it "
						"serving another file?)",
						layer, role_name(role), e);
				p->st.check_bytes += r[k][1] - r[k][0];
			}
		pos = e * q->bytes + end;
	}
	return 0;
}

/* The evaluation in flight k is done: release its epoch, end its window. */
static void retire(struct fsl *p, unsigned k)
{
	/* One stream: when this evaluation is done, so is every earlier one. */
	if (p->fl_seq[k] > p->passed_seq)
		p->passed_seq = p->fl_seq[k];
	fs_release(p->c, &p->fl[k].v);
	fs_window_end(p->c, p->fl[k].window);
	p->fl[k].busy = 0;
}

static void fill(struct fsl *p, uint8_t *block, const struct fs_view *v)
{
	struct fsl_hdr *h = (struct fsl_hdr *)block;
	h->window = p->window;
	h->card = p->card;
	uint64_t slots = 0, arena = 0;
	for (uint32_t l = 0; l < p->layers; l++) {
		if (!p->layer_bytes[l])
			continue;
		for (uint32_t e = 0; e < p->experts; e++) {
			struct fs_place pl;
			uint64_t base = 0;
			int local;
			if (p->lru) {
				base = fsl_lru_place(p, l, e, p->seq);
				local = base != 0;
			} else {
				local = v->epoch &&
					fs_lookup_from(p->c, v, p->card, l, e, &pl) == FS_PLACE_LOCAL &&
					(p->gpu.host_slots ? pl.host != NULL : pl.device != NULL);
				if (local)
					base = (uint64_t)(uintptr_t)(p->gpu.host_slots ?
									     (const void *)pl.host :
									     pl.device);
			}
			if (!local)
				base = p->arena_dev + p->blob_off[(uint64_t)l * p->experts + e];
			slots += local;
			arena += !local;
			for (uint32_t r = 1; r <= ROLES; r++) {
				const struct fsl_part *q = &p->part[(uint64_t)l * ROLES + r - 1];
				if (q->claimed)
					((uint64_t *)(block + tables_off(p, l, r)))[e] = base + q->off;
			}
		}
	}
	p->st.slot_entries += slots;
	p->st.arena_entries += arena;
}

void fsl_begin(struct fsl *p, int device, void *stream)
{
	if (p->gpu.device >= 0 && device != p->gpu.device) {
		if (!p->said_device++)
			fsl_fail(-ENODEV, "a graph on CUDA device %d: this provider serves device %d only",
				 device, p->gpu.device);
		return;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* Let go of every evaluation the device is done with. */
	for (unsigned j = 0; j < FSL_INFLIGHT; j++)
		if (p->fl[j].busy && p->gpu.passed(p->gpu.ctx, j) == 1)
			retire(p, j);
	unsigned k = (p->last + (p->st.windows ? 1u : 0u)) % FSL_INFLIGHT;
	if (p->fl[k].busy) { /* FSL_INFLIGHT evaluations queued: wait for the oldest */
		p->gpu.wait(p->gpu.ctx, k);
		p->st.waits++;
		retire(p, k);
	}
	struct fsl_flight *f = &p->fl[k];
	p->fl_seq[k] = ++p->seq;
	if (p->lru) {
		fsl_lru_learn(p);
		memset(&f->v, 0, sizeof(f->v)); /* no epoch: the LRU's own slots */
	} else {
		if (fs_acquire(p->c, &f->v) < 0) /* cannot be: at most FSL_INFLIGHT < FS_MAX_HOLDS views */
			memset(&f->v, 0, sizeof(f->v));
		p->st.empty_views += f->v.epoch == 0;
	}
	fill(p, p->stage[k], &f->v);
	p->gpu.upload(p->gpu.ctx, p->dev, p->stage[k], p->block_bytes, stream);
	fs_window_begin(p->c, p->window, 1);
	f->window = p->window++;
	f->busy = 1;
	p->last = k;
	p->open_eval = 1;
	p->st.windows++;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	p->st.begin_ns += (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)t1.tv_nsec -
			  (uint64_t)t0.tv_nsec;
}

void fsl_end(struct fsl *p, int device, void *stream)
{
	if ((p->gpu.device >= 0 && device != p->gpu.device) || !p->open_eval)
		return;
	p->gpu.mark(p->gpu.ctx, p->last, stream);
	p->open_eval = 0;
}

void fsl_route_layer(struct fsl *p, const void *const *table, const int32_t *ids, int64_t n_used,
		     int64_t n_tokens, int64_t ids_stride, void *stream)
{
	uint32_t layer, role;
	if (table_of(p, table, &layer, &role) < 0)
		return;
	/* One post per layer: from the up projection (fused or not), which
	 * every gated FFN has, else from whatever role there is. */
	const struct fsl_part *q = &p->part[(uint64_t)layer * ROLES];
	uint32_t poster = q[FS_ROLE_GATE_UP - 1].claimed ? FS_ROLE_GATE_UP :
			  q[FS_ROLE_UP - 1].claimed      ? FS_ROLE_UP :
			  q[FS_ROLE_DOWN - 1].claimed    ? FS_ROLE_DOWN :
							   FS_ROLE_GATE;
	if (role != poster)
		return;
	struct fsl_route r = {
		.ring_desc = p->ring_desc,
		.window = (const uint32_t *)p->dev,
		.counters = p->ctr_dev,
		.table = table,
		.arena_dev = p->arena_dev,
		.arena_bytes = p->arena_bytes,
		.expert_bytes = p->layer_bytes[layer],
		.ids = ids,
		.used = (uint32_t *)p->used_dev + (uint64_t)layer * p->used_words,
		.n_used = n_used,
		.n_tokens = n_tokens,
		.ids_stride = ids_stride,
		.layer = layer,
		.experts = p->experts,
		.card = p->card,
		.post = !p->lru, /* the LRU baseline posts nothing: foresightd only serves its arena */
		.stage = p->stagebuf,
		.stage_cap = p->stagebuf ? p->o.stage : 0,
		.stage_stride = p->stage_stride,
		.blob_bytes = p->blob_bytes[(uint64_t)layer * p->experts],
		.poster_role = poster,
	};
	for (uint32_t k = 0; k < ROLES; k++)
		if (q[k].claimed) {
			r.tables[k] = (void **)(p->dev + tables_off(p, layer, k + 1));
			r.part_off[k] = q[k].off;
		}
	p->gpu.route(p->gpu.ctx, &r, stream);
}

void fsl_stats(struct fsl *p, struct fsl_stats *out)
{
	*out = p->st;
	if (p->gpu.download(p->gpu.ctx, &out->dev, p->ctr_dev, sizeof(out->dev)) < 0)
		memset(&out->dev, 0, sizeof(out->dev));
}

int fsl_stats_json(struct fsl *p, char *buf, size_t len)
{
	struct fsl_stats s;
	fsl_stats(p, &s);
	return snprintf(buf, len,
			"{\"windows\":%" PRIu64 ",\"empty_views\":%" PRIu64 ",\"slot_entries\":%" PRIu64
			",\"arena_entries\":%" PRIu64 ",\"waits\":%" PRIu64 ",\"check_bytes\":%" PRIu64
			",\"begin_ns\":%" PRIu64 ",\"uses\":%" PRIu64 ",\"hits\":%" PRIu64
			",\"miss_bytes\":%" PRIu64 ",\"token_uses\":%" PRIu64 ",\"token_hits\":%" PRIu64
			",\"posted\":%" PRIu64 ",\"staged\":%" PRIu64 ",\"staged_bytes\":%" PRIu64
			",\"dropped\":%" PRIu64 ",\"attaches\":%" PRIu64 "}",
			s.windows, s.empty_views, s.slot_entries, s.arena_entries, s.waits, s.check_bytes,
			s.begin_ns, s.dev.uses, s.dev.hits, s.dev.miss_bytes, s.dev.token_uses,
			s.dev.token_hits, s.dev.posted, s.dev.staged, s.dev.staged_bytes,
			fs_client_dropped(p->c) + fs_dev_ring_dropped(p->c), fs_client_attach_count(p->c));
}
