/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsgw_models.c: small MoE models in the tensor and key naming of the
 * architectures the arena must understand (as llama.cpp's converters write
 * them), with every metadata value type, nested arrays, and quant types
 * that change from layer to layer and part to part.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fsg_reader.h"
#include "fsg_types.h"
#include "fsgw.h"

static const char *const archs = "qwen3moe qwen3next mixtral mixtral-split deepseek2 gpt-oss gemma4";

const char *fsgw_model_archs(void)
{
	return archs;
}

void fsgw_model_defaults(struct fsgw_model *m, const char *arch)
{
	memset(m, 0, sizeof(*m));
	m->arch = arch;
	m->layers = 4;
	m->experts = 8;
	m->used = 2;
	m->embd = 256;
	m->ff = 64;
	m->version = 3;
	m->seed = 1;
	m->type = -1;
}

/* The types "mixed" cycles through: any type whose block divides the row. */
static uint32_t pick(uint64_t ne0, unsigned k)
{
	static const char *const names[] = {
		"Q4_K",  "Q8_0", "Q6_K",    "Q4_0", "Q5_K",  "MXFP4",  "IQ4_XS",  "F16",  "Q3_K",  "Q5_0",
		"Q2_K",  "BF16", "IQ2_XXS", "Q4_1", "IQ3_S", "IQ4_NL", "IQ1_M",   "Q5_1", "TQ1_0", "NVFP4",
		"TQ2_0", "Q8_1", "IQ2_XS",  "Q2_0", "IQ2_S", "Q1_0",   "IQ3_XXS", "F32",  "IQ1_S", "Q8_K"};
	const unsigned n = sizeof(names) / sizeof(names[0]);
	for (unsigned i = 0; i < n; i++) {
		int t = fsg_type_by_name(names[(k + i) % n]);
		if (t >= 0 && ne0 % fsg_type((uint32_t)t)->block == 0)
			return (uint32_t)t;
	}
	return 0; /* F32 holds any row */
}

static uint32_t T(const char *name)
{
	return (uint32_t)fsg_type_by_name(name);
}

static int tensor(struct fsgw *w, uint32_t type, uint32_t n_dims, uint64_t a, uint64_t b, uint64_t c,
		  const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static int tensor(struct fsgw *w, uint32_t type, uint32_t n_dims, uint64_t a, uint64_t b, uint64_t c,
		  const char *fmt, ...)
{
	char name[64];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	const uint64_t ne[3] = {a, b, c};
	return fsgw_tensor(w, name, type, n_dims, ne);
}

/* Every value type, arrays of strings, bools and nothing, nested arrays. */
static void metadata_zoo(struct fsgw *w)
{
	fsgw_key(w, "fixture.u8", FSG_V_U8);
	fsgw_put_u8(w, 200);
	fsgw_key(w, "fixture.i8", FSG_V_I8);
	fsgw_put_u8(w, (uint8_t)-5);
	fsgw_key(w, "fixture.u16", FSG_V_U16);
	fsgw_put_u16(w, 60000);
	fsgw_key(w, "fixture.i16", FSG_V_I16);
	fsgw_put_u16(w, (uint16_t)-30000);
	fsgw_key(w, "fixture.u32", FSG_V_U32);
	fsgw_put_u32(w, 4000000000u);
	fsgw_key(w, "fixture.i32", FSG_V_I32);
	fsgw_put_u32(w, (uint32_t)-2000000000);
	fsgw_key(w, "fixture.f32", FSG_V_F32);
	fsgw_put_f32(w, 1.5f);
	fsgw_key(w, "fixture.bool", FSG_V_BOOL);
	fsgw_put_u8(w, 1);
	fsgw_kv_str(w, "fixture.str", "fixture \xc3\xa9t\xc3\xa9");
	fsgw_key(w, "fixture.u64", FSG_V_U64);
	fsgw_put_u64(w, 9223372036854775813ull);
	fsgw_key(w, "fixture.i64", FSG_V_I64);
	fsgw_put_u64(w, (uint64_t)-1099511627776ll);
	fsgw_key(w, "fixture.f64", FSG_V_F64);
	fsgw_put_f64(w, 2.25);
	fsgw_key(w, "fixture.empty", FSG_V_ARR);
	fsgw_put_arr(w, FSG_V_U8, 0);
	fsgw_key(w, "fixture.bools", FSG_V_ARR);
	fsgw_put_arr(w, FSG_V_BOOL, 3);
	fsgw_put_u8(w, 1);
	fsgw_put_u8(w, 0);
	fsgw_put_u8(w, 1);
	/* [[1, 2], [3], []] */
	fsgw_key(w, "fixture.nested", FSG_V_ARR);
	fsgw_put_arr(w, FSG_V_ARR, 3);
	fsgw_put_arr(w, FSG_V_U16, 2);
	fsgw_put_u16(w, 1);
	fsgw_put_u16(w, 2);
	fsgw_put_arr(w, FSG_V_U16, 1);
	fsgw_put_u16(w, 3);
	fsgw_put_arr(w, FSG_V_U16, 0);
	/* [["a", "bc"], ["d"]] */
	fsgw_key(w, "fixture.nested_str", FSG_V_ARR);
	fsgw_put_arr(w, FSG_V_ARR, 2);
	fsgw_put_arr(w, FSG_V_STR, 2);
	fsgw_put_str(w, "a");
	fsgw_put_str(w, "bc");
	fsgw_put_arr(w, FSG_V_STR, 1);
	fsgw_put_str(w, "d");
	/* [[[-7]]] */
	fsgw_key(w, "fixture.deep", FSG_V_ARR);
	fsgw_put_arr(w, FSG_V_ARR, 1);
	fsgw_put_arr(w, FSG_V_ARR, 1);
	fsgw_put_arr(w, FSG_V_I8, 1);
	fsgw_put_u8(w, (uint8_t)-7);
}

static void tokenizer(struct fsgw *w, unsigned vocab)
{
	char tok[32];
	fsgw_kv_str(w, "tokenizer.ggml.model", "gpt2");
	fsgw_key(w, "tokenizer.ggml.tokens", FSG_V_ARR);
	fsgw_put_arr(w, FSG_V_STR, vocab);
	for (unsigned i = 0; i < vocab; i++) {
		snprintf(tok, sizeof(tok), i % 7 == 3 ? "\xc4\xa0tok%u" : "tok%u", i);
		fsgw_put_str(w, tok);
	}
	fsgw_key(w, "tokenizer.ggml.scores", FSG_V_ARR);
	fsgw_put_arr(w, FSG_V_F32, vocab);
	for (unsigned i = 0; i < vocab; i++)
		fsgw_put_f32(w, -(float)i);
	fsgw_key(w, "tokenizer.ggml.token_type", FSG_V_ARR);
	fsgw_put_arr(w, FSG_V_I32, vocab);
	for (unsigned i = 0; i < vocab; i++)
		fsgw_put_u32(w, i < 2 ? 3 : 1);
	fsgw_kv_u32(w, "tokenizer.ggml.bos_token_id", 0);
}

static const char *gguf_arch(const char *preset)
{
	return strncmp(preset, "mixtral", 7) == 0 ? "llama" : preset;
}

static void model_metadata(struct fsgw *w, const struct fsgw_model *m, const char *arch)
{
	char key[96], name[64];
	fsgw_kv_str(w, "general.architecture", arch);
	snprintf(name, sizeof(name), "fixture-%s", m->arch);
	fsgw_kv_str(w, "general.name", m->name ? m->name : name);
	fsgw_kv_u32(w, "general.file_type", 15);
	fsgw_kv_u32(w, "general.quantization_version", 2);
#define ARCH_U32(k, v)                                     \
	do {                                               \
		snprintf(key, sizeof(key), "%s." k, arch); \
		fsgw_kv_u32(w, key, v);                    \
	} while (0)
	ARCH_U32("block_count", m->layers);
	ARCH_U32("context_length", 4096);
	ARCH_U32("embedding_length", m->embd);
	ARCH_U32("feed_forward_length", m->ff * 4);
	ARCH_U32("attention.head_count", 4);
	ARCH_U32("expert_feed_forward_length", m->ff);
	if (!m->no_metadata_counts) {
		ARCH_U32("expert_count", m->experts);
		ARCH_U32("expert_used_count", m->used);
	}
	if (strcmp(arch, "deepseek2") == 0) {
		ARCH_U32("leading_dense_block_count", 1);
		ARCH_U32("expert_shared_count", 1);
	}
	if (strcmp(arch, "qwen3next") == 0)
		ARCH_U32("expert_shared_feed_forward_length", m->ff);
#undef ARCH_U32
}

/* One block's routed experts, in the preset's naming. */
static int experts(struct fsgw *w, const struct fsgw_model *m, uint32_t l)
{
	const uint64_t E = m->experts, D = m->embd, F = m->ff;
	int r = 0;
	unsigned k = l * 3;
#define TY(ne0, i) (m->type >= 0 ? (uint32_t)m->type : pick(ne0, k + (i)))
	if (strcmp(m->arch, "mixtral-split") == 0) {
		for (uint32_t e = 0; e < E && r == 0; e++) {
			r |= tensor(w, TY(D, 0), 2, D, F, 1, "blk.%u.ffn_gate.%u.weight", l, e);
			r |= tensor(w, TY(D, 1), 2, D, F, 1, "blk.%u.ffn_up.%u.weight", l, e);
			r |= tensor(w, TY(F, 2), 2, F, D, 1, "blk.%u.ffn_down.%u.weight", l, e);
		}
		return r;
	}
	if (strcmp(m->arch, "gemma4") == 0) {
		r |= tensor(w, TY(D, 0), 3, D, 2 * F, E, "blk.%u.ffn_gate_up_exps.weight", l);
		r |= tensor(w, TY(F, 2), 3, F, D, E, "blk.%u.ffn_down_exps.weight", l);
		r |= tensor(w, T("F32"), 1, E, 1, 1, "blk.%u.ffn_down_exps.scale", l);
		return r;
	}
	uint32_t gt = TY(D, 0), ut = TY(D, 1), dt = TY(F, 2);
	if (strcmp(m->arch, "gpt-oss") == 0 && m->type < 0)
		gt = ut = dt = T("MXFP4");
	r |= tensor(w, gt, 3, D, F, E, "blk.%u.ffn_gate_exps.weight", l);
	r |= tensor(w, ut, 3, D, F, E, "blk.%u.ffn_up_exps.weight", l);
	r |= tensor(w, dt, 3, F, D, E, "blk.%u.ffn_down_exps.weight", l);
	if (strcmp(m->arch, "gpt-oss") == 0) {
		r |= tensor(w, T("F32"), 2, F, E, 1, "blk.%u.ffn_gate_exps.bias", l);
		r |= tensor(w, T("F32"), 2, F, E, 1, "blk.%u.ffn_up_exps.bias", l);
		r |= tensor(w, T("F32"), 2, D, E, 1, "blk.%u.ffn_down_exps.bias", l);
	}
#undef TY
	return r;
}

static int block(struct fsgw *w, const struct fsgw_model *m, uint32_t l)
{
	const uint64_t E = m->experts, D = m->embd, F = m->ff;
	const char *a = m->arch;
	int r = 0;
	r |= tensor(w, T("F32"), 1, D, 1, 1, "blk.%u.attn_norm.weight", l);
	r |= tensor(w, T("Q8_0"), 2, D, D, 1, "blk.%u.attn_q.weight", l);
	r |= tensor(w, T("F16"), 2, D, D, 1, "blk.%u.attn_output.weight", l);
	r |= tensor(w, T("F32"), 1, D, 1, 1, "blk.%u.ffn_norm.weight", l);
	if (strcmp(a, "deepseek2") == 0 && l == 0) { /* leading_dense_block_count = 1 */
		r |= tensor(w, T("Q8_0"), 2, D, 2 * F, 1, "blk.%u.ffn_gate.weight", l);
		r |= tensor(w, T("Q8_0"), 2, D, 2 * F, 1, "blk.%u.ffn_up.weight", l);
		r |= tensor(w, T("Q8_0"), 2, 2 * F, D, 1, "blk.%u.ffn_down.weight", l);
		return r;
	}
	r |= tensor(w, T("F32"), 2, D, E, 1, "blk.%u.ffn_gate_inp.weight", l);
	if (strcmp(a, "gemma4") == 0) { /* a dense FFN beside the experts */
		r |= tensor(w, T("F32"), 1, D, 1, 1, "blk.%u.ffn_gate_inp.scale", l);
		r |= tensor(w, T("Q8_0"), 2, D, F, 1, "blk.%u.ffn_gate.weight", l);
		r |= tensor(w, T("Q8_0"), 2, D, F, 1, "blk.%u.ffn_up.weight", l);
		r |= tensor(w, T("Q8_0"), 2, F, D, 1, "blk.%u.ffn_down.weight", l);
	}
	if (strcmp(a, "deepseek2") == 0)
		r |= tensor(w, T("F32"), 1, E, 1, 1, "blk.%u.exp_probs_b.bias", l);
	r |= experts(w, m, l);
	if (strcmp(a, "qwen3next") == 0 || strcmp(a, "deepseek2") == 0) {
		if (strcmp(a, "qwen3next") == 0)
			r |= tensor(w, T("F32"), 1, D, 1, 1, "blk.%u.ffn_gate_inp_shexp.weight", l);
		r |= tensor(w, T("Q8_0"), 2, D, F, 1, "blk.%u.ffn_gate_shexp.weight", l);
		r |= tensor(w, T("Q8_0"), 2, D, F, 1, "blk.%u.ffn_up_shexp.weight", l);
		r |= tensor(w, T("Q8_0"), 2, F, D, 1, "blk.%u.ffn_down_shexp.weight", l);
	}
	return r;
}

int fsgw_model_write(const struct fsgw_model *m, const char *path, char *err, size_t errlen)
{
	if (!m->arch || !strstr(archs, m->arch) || strchr(m->arch, ' ') || !m->layers || !m->experts ||
	    m->used > m->experts || (m->version != 2 && m->version != 3) || m->embd % 32 || m->ff % 32 ||
	    (m->alignment & (m->alignment - 1))) {
		snprintf(err, errlen,
			 "bad model spec (arch one of: %s; layers, experts >= 1; used <= experts; "
			 "version 2 or 3; embd, ff multiples of 32; alignment a power of two)",
			 archs);
		return -1;
	}
	struct fsgw w;
	const char *arch = gguf_arch(m->arch);
	const uint64_t D = m->embd, V = 32;
	fsgw_init(&w, m->version, m->alignment, m->seed);
	model_metadata(&w, m, arch);
	tokenizer(&w, (unsigned)V);
	metadata_zoo(&w);
	int r = 0;
	r |= tensor(&w, T("Q8_0"), 2, D, V, 1, "token_embd.weight");
	r |= tensor(&w, T("F32"), 1, 7, 1, 1, "rope_freqs.weight"); /* 28 bytes: padding matters */
	for (uint32_t l = 0; l < m->layers && r == 0; l++)
		r |= block(&w, m, l);
	r |= tensor(&w, T("F32"), 1, D, 1, 1, "output_norm.weight");
	r |= tensor(&w, T("Q8_0"), 2, D, V, 1, "output.weight");
	if (r == 0)
		r = fsgw_write(&w, path);
	if (r != 0)
		snprintf(err, errlen, "%s", w.err[0] ? w.err : "cannot build the model");
	fsgw_free(&w);
	return r ? -1 : 0;
}

unsigned fsgw_fixtures(struct fsgw_fixture *out, unsigned max)
{
	static const struct {
		const char *file, *arch;
		uint32_t version, alignment, layers, experts, used;
		int no_counts;
	} set[] = {
		{"qwen3moe.gguf", "qwen3moe", 3, 0, 4, 8, 2, 0},
		{"qwen3next.gguf", "qwen3next", 3, 64, 5, 16, 4, 0},
		{"mixtral.gguf", "mixtral", 2, 0, 3, 8, 2, 0},
		{"mixtral-split.gguf", "mixtral-split", 2, 8, 3, 4, 2, 0},
		{"deepseek2.gguf", "deepseek2", 3, 1, 4, 8, 3, 0},
		{"gpt-oss.gguf", "gpt-oss", 3, 256, 3, 8, 2, 0},
		{"gemma4.gguf", "gemma4", 3, 4096, 3, 4, 2, 0},
		{"qwen3moe-nocount.gguf", "qwen3moe", 2, 16, 2, 6, 2, 1},
	};
	unsigned n = 0;
	for (unsigned i = 0; i < sizeof(set) / sizeof(set[0]) && n < max; i++, n++) {
		out[n].file = set[i].file;
		fsgw_model_defaults(&out[n].m, set[i].arch);
		out[n].m.version = set[i].version;
		out[n].m.alignment = set[i].alignment;
		out[n].m.layers = set[i].layers;
		out[n].m.experts = set[i].experts;
		out[n].m.used = set[i].used;
		out[n].m.no_metadata_counts = set[i].no_counts;
		out[n].m.seed = 100 + i;
	}
	return n;
}
