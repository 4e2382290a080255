/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Expert discovery on every preset of the fixture set (the naming of
 * qwen3moe, qwen3next, mixtral old and new, deepseek2, gpt-oss, gemma4),
 * the blob plan, --describe's JSON, and the files discovery refuses.
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "fsg_arena.h"
#include "fsg_describe.h"
#include "fsg_moe.h"
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

TestSuite(moe, .init = setup, .fini = teardown);

struct opened {
	struct fsg_file f;
	struct fsg_plan p;
	struct fsgw_model m;
};

static void open_fixture(const char *file, struct opened *o)
{
	struct fsgw_fixture fx[16];
	unsigned n = fsgw_fixtures(fx, 16);
	char path[160];
	struct fsg_err err;
	for (unsigned i = 0; i < n; i++) {
		if (strcmp(fx[i].file, file) != 0)
			continue;
		o->m = fx[i].m;
		tu_model(g_dir, file, &fx[i].m, path, sizeof(path));
		cr_assert_eq(fsg_open(&o->f, path, &err), 0, "%s", err.msg);
		cr_assert_eq(fsg_plan_build(&o->f, &o->p, &err), 0, "%s: %s", file, err.msg);
		return;
	}
	cr_assert_fail("no fixture %s", file);
}

static void close_fixture(struct opened *o)
{
	fsg_plan_free(&o->p);
	fsg_close(&o->f);
}

static const char *why(const struct opened *o, const char *tensor)
{
	for (uint32_t i = 0; i < o->p.nleft; i++)
		if (strcmp(o->f.t[o->p.left[i].tensor].name, tensor) == 0)
			return o->p.left[i].why;
	return NULL;
}

/* Parts of layer l, in blob order, as "gate.weight,up.weight,...". */
static void parts(const struct opened *o, uint32_t l, char *out, size_t n)
{
	out[0] = 0;
	for (uint32_t i = 0; i < o->p.layer[l].nparts; i++) {
		const struct fsg_part *pt = &o->p.layer[l].part[i];
		snprintf(out + strlen(out), n - strlen(out), "%s%s.%s", i ? "," : "", fsg_role_name(pt->role),
			 fsg_what_name(pt->what));
	}
}

/* Each part: aligned, sized as 1/E of its tensor (or the whole tensor),
 * followed inside the blob by its zero tail (FS_ARENA_PART_TAIL_ELEMS). */
static void check_blobs(const struct opened *o)
{
	uint64_t member = 0;
	for (uint32_t l = 0; l < o->p.layers; l++) {
		const struct fsg_layer *ly = &o->p.layer[l];
		uint64_t end = 0;
		for (uint32_t i = 0; i < ly->nparts; i++) {
			const struct fsg_part *pt = &ly->part[i];
			const struct fsg_tensor *t = &o->f.t[pt->tensor];
			cr_expect_eq(pt->blob_off % FS_ARENA_PART_ALIGN, 0u);
			cr_expect_geq(pt->blob_off, end, "parts and tails do not overlap");
			uint64_t tail = 0;
			if (pt->bytes == 0 || fsg_type(pt->type)->block <= 1 ||
			    fsg_row_bytes(pt->type, FS_ARENA_PART_TAIL_ELEMS, &tail) < 0)
				tail = 0;
			end = pt->blob_off + pt->bytes + tail;
			cr_expect_eq(pt->bytes, pt->split ? t->bytes : t->bytes / o->p.experts, "%s",
				     t->name);
			cr_expect_eq(pt->type, t->type);
			uint64_t row;
			cr_assert_eq(fsg_row_bytes(pt->type, pt->ne[0], &row), 0);
			cr_expect_eq(row * pt->ne[1], pt->bytes, "%s: shape x type = bytes", t->name);
			member += pt->bytes * o->p.experts;
		}
		cr_expect_eq(ly->blob_bytes, end);
	}
	cr_expect_eq(o->p.member_bytes, member);
}

Test(moe, qwen3moe)
{
	struct opened o;
	char s[256];
	open_fixture("qwen3moe.gguf", &o);
	cr_expect_str_eq(o.p.arch, "qwen3moe");
	cr_expect_str_eq(o.p.name, "fixture-qwen3moe");
	cr_expect_eq(o.p.layers, 4u);
	cr_expect_eq(o.p.moe_layers, 4u);
	cr_expect_eq(o.p.experts, 8u);
	cr_expect_eq(o.p.experts_used, 2u);
	cr_expect_eq(o.p.experts_from_tensors, 0);
	for (uint32_t l = 0; l < 4; l++) {
		parts(&o, l, s, sizeof(s));
		cr_expect_str_eq(s, "gate.weight,up.weight,down.weight");
		cr_expect_eq(o.p.layer[l].part[0].ne[0], 256u);
		cr_expect_eq(o.p.layer[l].part[0].ne[1], 64u);
		cr_expect_eq(o.p.layer[l].part[2].ne[0], 64u);
		cr_expect_eq(o.p.layer[l].part[2].ne[1], 256u);
	}
	/* Mixed quant types: not every part has the same one. */
	cr_expect_neq(o.p.layer[0].part[0].type, o.p.layer[1].part[0].type);
	cr_expect_str_eq(why(&o, "blk.0.ffn_gate_inp.weight"), "router");
	cr_expect_str_eq(why(&o, "blk.2.attn_q.weight"), "dense");
	cr_expect_str_eq(why(&o, "token_embd.weight"), "dense (outside the blocks)");
	check_blobs(&o);
	close_fixture(&o);
}

Test(moe, qwen3next_shared_experts_are_left_out)
{
	struct opened o;
	char s[256];
	open_fixture("qwen3next.gguf", &o);
	cr_expect_eq(o.p.layers, 5u);
	cr_expect_eq(o.p.experts, 16u);
	cr_expect_eq(o.p.experts_used, 4u);
	parts(&o, 4, s, sizeof(s));
	cr_expect_str_eq(s, "gate.weight,up.weight,down.weight");
	cr_expect_str_eq(why(&o, "blk.3.ffn_down_shexp.weight"), "shared expert");
	cr_expect_str_eq(why(&o, "blk.3.ffn_gate_inp_shexp.weight"), "shared expert");
	check_blobs(&o);
	close_fixture(&o);
}

Test(moe, mixtral_stacked_and_one_tensor_per_expert)
{
	struct opened o;
	char s[256];
	open_fixture("mixtral.gguf", &o);
	cr_expect_str_eq(o.p.arch, "llama");
	cr_expect_eq(o.p.layers, 3u);
	check_blobs(&o);
	close_fixture(&o);

	open_fixture("mixtral-split.gguf", &o);
	cr_expect_str_eq(o.p.arch, "llama");
	cr_expect_eq(o.p.layers, 3u);
	cr_expect_eq(o.p.experts, 4u);
	parts(&o, 1, s, sizeof(s));
	cr_expect_str_eq(s, "gate.weight,up.weight,down.weight");
	const struct fsg_part *up = &o.p.layer[1].part[1];
	cr_assert_not_null(up->split);
	cr_expect_eq(fsg_part_src(up, 3), fsg_tensor_find(&o.f, "blk.1.ffn_up.3.weight")->off);
	check_blobs(&o);
	close_fixture(&o);
}

Test(moe, deepseek2_leading_dense_layer)
{
	struct opened o;
	open_fixture("deepseek2.gguf", &o);
	cr_expect_eq(o.p.layers, 4u);
	cr_expect_eq(o.p.moe_layers, 3u);
	cr_expect_eq(o.p.layer[0].nparts, 0u);
	cr_expect_eq(o.p.layer[0].blob_bytes, 0u);
	cr_expect_eq(o.p.experts_used, 3u);
	cr_expect_str_eq(why(&o, "blk.0.ffn_up.weight"), "dense");
	cr_expect_str_eq(why(&o, "blk.2.exp_probs_b.bias"), "router bias");
	cr_expect_str_eq(why(&o, "blk.2.ffn_up_shexp.weight"), "shared expert");
	check_blobs(&o);
	close_fixture(&o);
}

Test(moe, gpt_oss_biases_ride_along)
{
	struct opened o;
	char s[256];
	open_fixture("gpt-oss.gguf", &o);
	cr_expect_str_eq(o.p.arch, "gpt-oss");
	parts(&o, 0, s, sizeof(s));
	cr_expect_str_eq(s, "gate.weight,up.weight,down.weight,gate.bias,up.bias,down.bias");
	const struct fsg_part *w = &o.p.layer[0].part[0], *b = &o.p.layer[0].part[5];
	cr_expect_eq(w->type, (uint32_t)fsg_type_by_name("MXFP4"));
	cr_expect_eq(b->ne[0], 256u);
	cr_expect_eq(b->ne[1], 1u);
	cr_expect_eq(b->bytes, 256u * 4);
	check_blobs(&o);
	close_fixture(&o);
}

Test(moe, gemma4_fused_gate_up_and_scale)
{
	struct opened o;
	char s[256];
	open_fixture("gemma4.gguf", &o);
	parts(&o, 2, s, sizeof(s));
	cr_expect_str_eq(s, "gate_up.weight,down.weight,down.scale");
	cr_expect_eq(o.p.layer[2].part[0].ne[1], 128u, "gate and up rows together");
	cr_expect_eq(o.p.layer[2].part[2].bytes, 4u);
	cr_expect_str_eq(why(&o, "blk.0.ffn_gate.weight"), "dense");
	cr_expect_str_eq(why(&o, "blk.0.ffn_gate_inp.scale"), "router");
	check_blobs(&o);
	close_fixture(&o);
}

Test(moe, expert_count_from_the_tensors)
{
	struct opened o;
	open_fixture("qwen3moe-nocount.gguf", &o);
	cr_expect_eq(o.p.experts_from_tensors, 1);
	cr_expect_eq(o.p.experts, 6u);
	cr_expect_eq(o.p.experts_used, 0u);
	close_fixture(&o);
}

Test(moe, describe_json)
{
	struct opened o;
	struct fsg_layout lo;
	struct fsg_err err;
	open_fixture("deepseek2.gguf", &o);
	cr_assert_eq(fsg_layout_build(&o.p, &lo, &err), 0);
	cJSON *j = fsg_describe("x.gguf", &o.f, &o.p, &lo);
	cr_assert_not_null(j);
	cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "layers")), 4);
	cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "moe_layers")), 3);
	cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "experts")), 8);
	cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "arena_bytes")), (double)lo.bytes);
	cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "expert_bytes")), 4);
	cr_expect_eq(cJSON_GetNumberValue(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "dense_layers"), 0)), 0);
	cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "left_out")), (int)o.p.nleft);
	cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(j, "architecture")), "deepseek2");
	cJSON_Delete(j);
	fsg_layout_free(&lo);
	close_fixture(&o);
}

/* ---- files discovery refuses ----------------------------------------------- */

struct tdesc {
	const char *name;
	const char *type;
	uint32_t n_dims;
	uint64_t ne[4];
};

static int plan_of(const char *arch, int count, int used, const struct tdesc *t, unsigned nt,
		   struct fsg_err *err)
{
	struct fsgw w;
	char path[160], key[96];
	snprintf(path, sizeof(path), "%s/custom.gguf", g_dir);
	fsgw_init(&w, 3, 0, 1);
	if (arch)
		fsgw_kv_str(&w, "general.architecture", arch);
	if (count >= 0) {
		snprintf(key, sizeof(key), "%s.expert_count", arch);
		fsgw_kv_u32(&w, key, (uint32_t)count);
	}
	if (used >= 0) {
		snprintf(key, sizeof(key), "%s.expert_used_count", arch);
		fsgw_kv_u32(&w, key, (uint32_t)used);
	}
	for (unsigned i = 0; i < nt; i++)
		cr_assert_eq(fsgw_tensor(&w, t[i].name, (uint32_t)fsg_type_by_name(t[i].type), t[i].n_dims,
					 t[i].ne),
			     0, "%s", w.err);
	cr_assert_eq(fsgw_write(&w, path), 0);
	fsgw_free(&w);
	struct fsg_file f;
	struct fsg_plan p;
	cr_assert_eq(fsg_open(&f, path, err), 0, "%s", err->msg);
	int r = fsg_plan_build(&f, &p, err);
	if (r == 0)
		fsg_plan_free(&p);
	fsg_close(&f);
	return r;
}

#define REFUSED(arch, count, used, want, ...)                                                               \
	do {                                                                                                \
		const struct tdesc t_[] = {__VA_ARGS__};                                                    \
		struct fsg_err e_;                                                                          \
		int r_ = plan_of(arch, count, used, t_, sizeof(t_) / sizeof(t_[0]), &e_);                   \
		cr_expect_eq(r_, -EBADMSG, "expected '%s'", want);                                          \
		cr_expect(r_ != -EBADMSG || strstr(e_.msg, want) != NULL, "'%s' not in: %s", want, e_.msg); \
	} while (0)

Test(moe, refused)
{
	REFUSED("qwen3moe", 16, 2, "8 experts in its last dimension, qwen3moe.expert_count says 16",
		{"blk.0.ffn_up_exps.weight", "Q8_0", 3, {32, 4, 8}});
	REFUSED("qwen3moe", -1, -1, "other expert tensors have 8",
		{"blk.0.ffn_up_exps.weight", "Q8_0", 3, {32, 4, 8}},
		{"blk.0.ffn_down_exps.weight", "Q8_0", 3, {32, 4, 4}});
	REFUSED("llama", 3, 2, "blk.0.ffn_up.1.weight: missing", {"blk.0.ffn_up.0.weight", "F16", 2, {32, 4}},
		{"blk.0.ffn_up.2.weight", "F16", 2, {32, 4}});
	REFUSED("llama", 2, 2, "type F32", {"blk.0.ffn_up.0.weight", "F16", 2, {32, 4}},
		{"blk.0.ffn_up.1.weight", "F32", 2, {32, 4}});
	REFUSED("gemma4", 4, 2, "both a fused gate_up and a separate",
		{"blk.0.ffn_gate_up_exps.weight", "Q8_0", 3, {32, 8, 4}},
		{"blk.0.ffn_gate_exps.weight", "Q8_0", 3, {32, 4, 4}});
	REFUSED(NULL, -1, -1, "general.architecture: missing",
		{"blk.0.ffn_up_exps.weight", "Q8_0", 3, {32, 4, 8}});
	REFUSED("llama", -1, -1, "not a MoE model", {"blk.0.ffn_up.weight", "Q8_0", 2, {32, 4}},
		{"output.weight", "Q8_0", 2, {32, 4}});
	REFUSED("qwen3moe", 8, 9, "qwen3moe.expert_used_count 9 exceeds the 8 experts",
		{"blk.0.ffn_up_exps.weight", "Q8_0", 3, {32, 4, 8}});
	REFUSED("gpt-oss", 8, 2, "without expert weights", {"blk.0.ffn_up_exps.bias", "F32", 2, {32, 8}});
	REFUSED("qwen3moe", 8, 2, "an expert tensor has at most 3",
		{"blk.0.ffn_up_exps.weight", "Q8_0", 4, {32, 4, 2, 8}});
	REFUSED("qwen3moe", 8, 2, "at most 1024 layers",
		{"blk.5000.ffn_up_exps.weight", "Q8_0", 3, {32, 4, 8}});
	REFUSED("qwen3moe", 0, 2, "qwen3moe.expert_count: must be an integer in 1..4096",
		{"blk.0.ffn_up_exps.weight", "Q8_0", 3, {32, 4, 8}});
	REFUSED("gemma4", 32, 2, "one value per expert in Q8_0",
		{"blk.0.ffn_down_exps.weight", "Q8_0", 3, {32, 4, 32}},
		{"blk.0.ffn_down_exps.scale", "Q8_0", 1, {32}});
	REFUSED("qwen3moe", 8, 2, "hold no bytes", {"blk.0.ffn_up_exps.weight", "Q8_0", 3, {32, 0, 8}});
}

Test(moe, unknown_per_expert_tensors_are_reported)
{
	const struct tdesc t[] = {{"blk.0.ffn_up_exps.weight", "Q8_0", 3, {32, 4, 8}},
				  {"blk.0.ffn_norm_exps.weight", "F32", 2, {32, 8}}};
	struct fsg_err e;
	cr_expect_eq(plan_of("qwen3moe", 8, 2, t, 2, &e), 0, "%s", e.msg);
}
