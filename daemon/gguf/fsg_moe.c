/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsg_moe.c: expert discovery (which tensors are routed experts, sliced
 * how) and the blob plan of each MoE layer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_regions.h"
#include "fsg_moe.h"
#include "fsg_types.h"

#define NO_SRC UINT64_MAX

static const char *const role_names[] = {
	[FS_PART_GATE] = "gate", [FS_PART_UP] = "up", [FS_PART_DOWN] = "down", [FS_PART_GATE_UP] = "gate_up"};
static const char *const what_names[] = {
	[FS_PART_WEIGHT] = "weight", [FS_PART_BIAS] = "bias", [FS_PART_SCALE] = "scale"};

const char *fsg_role_name(uint32_t role)
{
	return role >= 1 && role <= FS_PART_GATE_UP ? role_names[role] : "?";
}

const char *fsg_what_name(uint32_t what)
{
	return what <= FS_PART_SCALE ? what_names[what] : "?";
}

enum kind { K_OTHER, K_STACKED, K_SPLIT };

struct name_info {
	enum kind kind;
	uint32_t blk;
	uint16_t role, what;
	uint32_t expert; /* K_SPLIT */
	const char *why; /* K_OTHER */
};

/* Up to 7 decimal digits: the number, or -1. */
static long digits(const char **s)
{
	long v = 0;
	int n = 0;
	while (**s >= '0' && **s <= '9' && n < 7) {
		v = v * 10 + (**s - '0');
		(*s)++;
		n++;
	}
	return n == 0 || (**s >= '0' && **s <= '9') ? -1 : v;
}

static void classify(const char *name, struct name_info *ni)
{
	memset(ni, 0, sizeof(*ni));
	ni->kind = K_OTHER;
	ni->why = "dense";
	const char *s = name;
	if (strncmp(s, "blk.", 4) != 0) {
		ni->why = "dense (outside the blocks)";
		return;
	}
	s += 4;
	long blk = digits(&s);
	if (blk < 0 || *s != '.')
		return;
	s++;
	ni->blk = (uint32_t)blk;
	/* Stacked: ffn_<role>_exps.<what>; gate_up is tried before gate. */
	static const uint16_t roles[] = {FS_PART_GATE_UP, FS_PART_GATE, FS_PART_UP, FS_PART_DOWN};
	for (unsigned r = 0; r < 4; r++) {
		for (uint16_t w = FS_PART_WEIGHT; w <= FS_PART_SCALE; w++) {
			char want[48];
			snprintf(want, sizeof(want), "ffn_%s_exps.%s", role_names[roles[r]], what_names[w]);
			if (strcmp(s, want) == 0) {
				ni->kind = K_STACKED;
				ni->role = roles[r];
				ni->what = w;
				return;
			}
		}
	}
	/* One tensor per expert: ffn_<role>.<E>.weight. */
	for (unsigned r = 1; r < 4; r++) {
		char pre[16];
		int n = snprintf(pre, sizeof(pre), "ffn_%s.", role_names[roles[r]]);
		if (strncmp(s, pre, (size_t)n) != 0)
			continue;
		const char *e = s + n;
		long x = digits(&e);
		if (x >= 0 && strcmp(e, ".weight") == 0) {
			ni->kind = K_SPLIT;
			ni->role = roles[r];
			ni->what = FS_PART_WEIGHT;
			ni->expert = (uint32_t)x;
			return;
		}
	}
	if (strstr(s, "_shexp"))
		ni->why = "shared expert";
	else if (strncmp(s, "ffn_gate_inp", 12) == 0)
		ni->why = "router";
	else if (strncmp(s, "exp_probs_b", 11) == 0)
		ni->why = "router bias";
	else if (strstr(s, "_exps"))
		ni->why = "per-expert tensor the arena does not carry";
}

/* Blob order: weights, then biases, then scales; in each, the order of
 * the computation: gate (or gate_up), up, down. */
static int part_rank(const struct fsg_part *p)
{
	static const int role_rank[] = {
		[FS_PART_GATE] = 0, [FS_PART_GATE_UP] = 1, [FS_PART_UP] = 2, [FS_PART_DOWN] = 3};
	return p->what * 4 + role_rank[p->role];
}

static int part_cmp(const void *a, const void *b)
{
	return part_rank(a) - part_rank(b);
}

static int expert_count(const struct fsg_file *f, struct fsg_plan *p, struct fsg_err *err)
{
	char key[96];
	uint64_t v;
	const struct fsg_kv *kv;
	snprintf(key, sizeof(key), "%s.expert_count", p->arch);
	if ((kv = fsg_kv_find(f, key)) == NULL) {
		p->experts_from_tensors = 1;
	} else if (fsg_val_uint(f, &kv->val, &v) < 0 || v == 0 || v > FS_MAX_EXPERTS) {
		return fsg_fail(err, kv->val.off, "%s: must be an integer in 1..%u", key, FS_MAX_EXPERTS);
	} else {
		p->experts = (uint32_t)v;
	}
	snprintf(key, sizeof(key), "%s.expert_used_count", p->arch);
	if ((kv = fsg_kv_find(f, key)) != NULL) {
		if (fsg_val_uint(f, &kv->val, &v) < 0 || v > FS_MAX_EXPERTS)
			return fsg_fail(err, kv->val.off, "%s: must be an integer in 0..%u", key,
					FS_MAX_EXPERTS);
		p->experts_used = (uint32_t)v;
	}
	return 0;
}

/* Pass 1: the number of layers, and the expert count where the metadata
 * lacks it (every expert tensor must agree). */
static int survey(const struct fsg_file *f, struct fsg_plan *p, struct fsg_err *err)
{
	uint32_t stacked = 0, split = 0, max_blk = 0, members = 0;
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		const struct fsg_tensor *t = &f->t[i];
		struct name_info ni;
		classify(t->name, &ni);
		if (ni.kind == K_OTHER)
			continue;
		if (ni.blk >= FS_MAX_LAYERS)
			return fsg_fail(err, t->at, "tensor '%s': block %u, at most %u layers are supported",
					t->name, ni.blk, FS_MAX_LAYERS);
		uint64_t e = ni.kind == K_STACKED ? t->ne[t->n_dims - 1] : (uint64_t)ni.expert + 1;
		if (e == 0 || e > FS_MAX_EXPERTS)
			return fsg_fail(err, t->at, "tensor '%s': %llu experts, must be 1..%u", t->name,
					(unsigned long long)e, FS_MAX_EXPERTS);
		if (ni.kind == K_STACKED) {
			if (stacked && stacked != e)
				return fsg_fail(err, t->at,
						"tensor '%s': %llu experts in its last dimension, other "
						"expert tensors have %u",
						t->name, (unsigned long long)e, stacked);
			stacked = (uint32_t)e;
		} else if (e > split) {
			split = (uint32_t)e;
		}
		if (ni.blk + 1 > max_blk)
			max_blk = ni.blk + 1;
		members++;
	}
	if (!members)
		return fsg_fail(err, FSG_NO_OFFSET,
				"no routed expert tensors (blk.N.ffn_{gate,up,down}_exps.weight or "
				"blk.N.ffn_{gate,up,down}.E.weight) in %llu tensors: not a MoE model?",
				(unsigned long long)f->n_tensors);
	/* One tensor per expert: the highest expert number + 1 (a gap is
	 * reported as a missing tensor later). */
	if (p->experts_from_tensors)
		p->experts = stacked ? stacked : split;
	p->layers = max_blk;
	return 0;
}

static struct fsg_part *find_part(struct fsg_layer *l, uint16_t role, uint16_t what)
{
	for (uint32_t i = 0; i < l->nparts; i++)
		if (l->part[i].role == role && l->part[i].what == what)
			return &l->part[i];
	return NULL;
}

static int add_stacked(const struct fsg_file *f, struct fsg_plan *p, uint32_t ti, const struct name_info *ni,
		       struct fsg_err *err)
{
	const struct fsg_tensor *t = &f->t[ti];
	struct fsg_layer *l = &p->layer[ni->blk];
	if (t->ne[t->n_dims - 1] != p->experts)
		return fsg_fail(err, t->at,
				"tensor '%s': %llu experts in its last dimension, %s.expert_count says %u",
				t->name, (unsigned long long)t->ne[t->n_dims - 1], p->arch, p->experts);
	if (t->n_dims > 3)
		return fsg_fail(err, t->at, "tensor '%s': %u dimensions, an expert tensor has at most 3",
				t->name, t->n_dims);
	if (t->n_dims == 1 && fsg_type(t->type)->block != 1)
		return fsg_fail(err, t->at,
				"tensor '%s': one value per expert in %s, whose blocks span experts", t->name,
				fsg_type_name(t->type));
	if (find_part(l, ni->role, ni->what))
		return fsg_fail(err, t->at, "tensor '%s': block %u has its experts' %s %s twice", t->name,
				ni->blk, fsg_role_name(ni->role), fsg_what_name(ni->what));
	struct fsg_part *pt = &l->part[l->nparts++];
	pt->role = ni->role;
	pt->what = ni->what;
	pt->type = t->type;
	pt->ne[0] = t->n_dims >= 2 ? t->ne[0] : 1;
	pt->ne[1] = t->n_dims == 3 ? t->ne[1] : 1;
	pt->bytes = t->bytes / p->experts; /* exact: the expert is the outermost dimension */
	pt->src = t->off;
	pt->tensor = ti;
	return 0;
}

static int add_split(const struct fsg_file *f, struct fsg_plan *p, uint32_t ti, const struct name_info *ni,
		     struct fsg_err *err)
{
	const struct fsg_tensor *t = &f->t[ti];
	struct fsg_layer *l = &p->layer[ni->blk];
	if (ni->expert >= p->experts)
		return fsg_fail(err, t->at, "tensor '%s': expert %u, %s.expert_count says %u", t->name,
				ni->expert, p->arch, p->experts);
	if (t->n_dims > 2)
		return fsg_fail(err, t->at, "tensor '%s': %u dimensions, one expert's matrix has at most 2",
				t->name, t->n_dims);
	struct fsg_part *pt = find_part(l, ni->role, ni->what);
	if (pt && !pt->split)
		return fsg_fail(err, t->at,
				"tensor '%s': block %u has its experts' %s both stacked and one per expert",
				t->name, ni->blk, fsg_role_name(ni->role));
	if (!pt) {
		pt = &l->part[l->nparts++];
		pt->role = ni->role;
		pt->what = ni->what;
		pt->type = t->type;
		pt->ne[0] = t->ne[0];
		pt->ne[1] = t->ne[1];
		pt->bytes = t->bytes;
		pt->tensor = ti;
		pt->split = malloc(p->experts * sizeof(*pt->split));
		if (!pt->split)
			return -ENOMEM;
		for (uint32_t e = 0; e < p->experts; e++)
			pt->split[e] = NO_SRC;
	} else if (pt->type != t->type || pt->ne[0] != t->ne[0] || pt->ne[1] != t->ne[1]) {
		const struct fsg_tensor *first = &f->t[pt->tensor];
		return fsg_fail(err, t->at, "tensor '%s': type %s, shape %llux%llu; '%s' has %s, %llux%llu",
				t->name, fsg_type_name(t->type), (unsigned long long)t->ne[0],
				(unsigned long long)t->ne[1], first->name, fsg_type_name(pt->type),
				(unsigned long long)pt->ne[0], (unsigned long long)pt->ne[1]);
	}
	pt->split[ni->expert] = t->off;
	return 0;
}

/* A layer's parts complete and consistent; lay out its blob. */
static int finish_layer(struct fsg_plan *p, uint32_t blk, struct fsg_err *err)
{
	struct fsg_layer *l = &p->layer[blk];
	if (!l->nparts)
		return 0;
	int weights = 0;
	for (uint32_t i = 0; i < l->nparts; i++) {
		const struct fsg_part *pt = &l->part[i];
		weights += pt->what == FS_PART_WEIGHT;
		for (uint32_t e = 0; pt->split && e < p->experts; e++)
			if (pt->split[e] == NO_SRC)
				return fsg_fail(err, FSG_NO_OFFSET,
						"blk.%u.ffn_%s.%u.weight: missing (%u experts)", blk,
						fsg_role_name(pt->role), e, p->experts);
	}
	if (!weights)
		return fsg_fail(err, FSG_NO_OFFSET,
				"block %u: per-expert biases or scales without expert weights", blk);
	if (find_part(l, FS_PART_GATE_UP, FS_PART_WEIGHT) &&
	    (find_part(l, FS_PART_GATE, FS_PART_WEIGHT) || find_part(l, FS_PART_UP, FS_PART_WEIGHT)))
		return fsg_fail(err, FSG_NO_OFFSET,
				"block %u: both a fused gate_up and a separate gate or up", blk);
	qsort(l->part, l->nparts, sizeof(l->part[0]), part_cmp);
	uint64_t off = 0;
	for (uint32_t i = 0; i < l->nparts; i++) {
		struct fsg_part *pt = &l->part[i];
		off = (off + FS_ARENA_PART_ALIGN - 1) / FS_ARENA_PART_ALIGN * FS_ARENA_PART_ALIGN;
		pt->blob_off = off;
		/* The zero tail (FS_ARENA_PART_TAIL_ELEMS) of a quantized part:
		 * a kernel that reads a slot or the arena in place (llama.cpp's
		 * MMQ) may read that far past a row's end, as it may past a
		 * tensor's end in llama.cpp, where the tensor is padded with
		 * zeros.  The blob's gaps are zero (a fresh memfd; the write fill
		 * zeroes them), so reserving the bytes is all it takes, and a
		 * slot copy carries them.  Float parts get none: nothing tiles
		 * them past a row, and an engine may read gate and up as one
		 * matrix when they are adjacent (examples/torch). */
		uint64_t tail = 0;
		const struct fsg_type_info *ti = fsg_type(pt->type);
		if (pt->bytes == 0 || !ti || ti->block <= 1 ||
		    fsg_row_bytes(pt->type, FS_ARENA_PART_TAIL_ELEMS, &tail) < 0)
			tail = 0;
		if (pt->bytes > UINT64_MAX / 4 - off || tail > UINT64_MAX / 4)
			return fsg_fail(err, FSG_NO_OFFSET, "block %u: the expert blob's size overflows",
					blk);
		off += pt->bytes + tail;
		p->member_bytes += pt->bytes * p->experts; /* each slice is <= the file: no overflow */
	}
	l->blob_bytes = off;
	if (off > p->max_blob)
		p->max_blob = off;
	p->moe_layers++;
	return 0;
}

int fsg_plan_build(const struct fsg_file *f, struct fsg_plan *p, struct fsg_err *err)
{
	struct fsg_str s;
	int r;
	memset(p, 0, sizeof(*p));
	r = fsg_get_str(f, "general.architecture", &s);
	if (r < 0 || s.len == 0 || s.len >= sizeof(p->arch) || memchr(s.p, 0, (size_t)s.len)) {
		const struct fsg_kv *kv = fsg_kv_find(f, "general.architecture");
		return fsg_fail(err, kv ? kv->at : FSG_NO_OFFSET, "general.architecture: %s",
				kv ? "must be a string of 1..63 bytes" :
				     "missing (it names the expert keys)");
	}
	memcpy(p->arch, s.p, (size_t)s.len);
	if (fsg_get_str(f, "general.name", &s) == 0) {
		size_t n = s.len < sizeof(p->name) - 1 ? (size_t)s.len : sizeof(p->name) - 1;
		memcpy(p->name, s.p, n);
		for (size_t i = 0; i < n; i++) /* a name for logs and JSON: printable ASCII */
			if ((unsigned char)p->name[i] < 0x20 || (unsigned char)p->name[i] > 0x7e)
				p->name[i] = '_';
	}
	if ((r = expert_count(f, p, err)) < 0 || (r = survey(f, p, err)) < 0)
		goto fail;
	if (p->experts_used > p->experts) {
		r = fsg_fail(err, FSG_NO_OFFSET, "%s.expert_used_count %u exceeds the %u experts", p->arch,
			     p->experts_used, p->experts);
		goto fail;
	}
	p->layer = calloc(p->layers, sizeof(*p->layer));
	p->left = calloc(f->n_tensors ? f->n_tensors : 1, sizeof(*p->left));
	if (!p->layer || !p->left) {
		r = fsg_fail_errno(err, -ENOMEM, "out of memory planning the arena");
		goto fail;
	}
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		struct name_info ni;
		classify(f->t[i].name, &ni);
		if (ni.kind == K_STACKED)
			r = add_stacked(f, p, (uint32_t)i, &ni, err);
		else if (ni.kind == K_SPLIT)
			r = add_split(f, p, (uint32_t)i, &ni, err);
		else {
			p->left[p->nleft++] = (struct fsg_left){(uint32_t)i, ni.why};
			p->left_bytes += f->t[i].bytes;
		}
		if (r == -ENOMEM)
			fsg_fail_errno(err, r, "out of memory planning the arena");
		if (r < 0)
			goto fail;
	}
	for (uint32_t l = 0; l < p->layers; l++)
		if ((r = finish_layer(p, l, err)) < 0)
			goto fail;
	if (p->max_blob == 0) { /* a slot of 0 bytes would be no slot */
		r = fsg_fail(err, FSG_NO_OFFSET, "the expert tensors hold no bytes (a dimension is 0)");
		goto fail;
	}
	return 0;
fail:
	fsg_plan_free(p);
	return r;
}

void fsg_plan_free(struct fsg_plan *p)
{
	for (uint32_t l = 0; p->layer && l < p->layers; l++)
		for (uint32_t i = 0; i < p->layer[l].nparts; i++)
			free(p->layer[l].part[i].split);
	free(p->layer);
	free(p->left);
	memset(p, 0, sizeof(*p));
}
