/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsgw_llama.c: MoE models llama.cpp loads (fsgw_llama.h).  What each
 * arch needs was read from llama.cpp's loader (src/models/qwen3moe.cpp,
 * openai-moe.cpp, llama-model.cpp load_hparams; commit 80fb11a): the keys
 * below, and exactly the tensors its load_arch_tensors creates (an extra
 * tensor fails the load: "wrong number of tensors").
 *
 * Values: norms are 1; every other weight has mean ~0 and standard
 * deviation 1/sqrt(fan-in) (the router: 2/sqrt(embd), so routing is not
 * flat), so activations stay near unit scale through any depth and the
 * logits are finite.  Quantized tensors come from page pools
 * (fsgw_blocks.h): a 17 GB model is written at disk speed.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsg_reader.h"
#include "fsg_types.h"
#include "fsgw.h"
#include "fsgw_blocks.h"
#include "fsgw_llama.h"

#define MAX_LAYERS 512u   /* LLAMA_MAX_LAYERS */
#define MAX_EXPERTS 1024u /* LLAMA_MAX_EXPERTS */
#define POOL_PAGES 64u
#define POOL_PAGE_BYTES ((size_t)64 << 10)
#define MAX_POOLS 24u

static uint32_t T(const char *name)
{
	return (uint32_t)fsg_type_by_name(name);
}

/* ---- shapes ------------------------------------------------------------ */

static const char shapes[] = "tiny qwen3-30b-a3b gemma-replay gpt-oss-20b gpt-oss-120b";

const char *fsgw_llama_shapes(void)
{
	return shapes;
}

int fsgw_llama_shape(struct fsgw_llama *m, const char *shape)
{
	static const struct {
		const char *shape, *arch;
		uint32_t layers, experts, used, embd, ff, vocab, heads, kv_heads, head_dim, ctx;
		const char *expert_type;
	} s[] = {
		/* tests: 4 x 16, rows short enough for a CPU run in a second */
		{"tiny", "qwen3moe", 4, 16, 4, 256, 128, 512, 4, 2, 64, 4096, "Q4_K"},
		/* Qwen3-30B-A3B (its config.json) */
		{"qwen3-30b-a3b", "qwen3moe", 48, 128, 8, 2048, 768, 151936, 32, 4, 128, 40960, "Q4_K"},
		/* Gemma-4-26B-A4B's expert tier (30 x 128, hidden 2816, expert FFN
		 * 704: one expert is 4,336,640 bytes with a Q8_0 down, 3,593,216
		 * with Q5_0, as the gemma route trace records) in a qwen3moe body:
		 * attention and the dense FFN beside gemma's experts are not gemma's */
		{"gemma-replay", "qwen3moe", 30, 128, 8, 2816, 704, 262144, 16, 8, 128, 32768, "Q4_K"},
		/* gpt-oss-20b / 120b: MXFP4 experts, 2880-wide rows */
		{"gpt-oss-20b", "gpt-oss", 24, 32, 4, 2880, 2880, 201088, 64, 8, 64, 131072, "MXFP4"},
		{"gpt-oss-120b", "gpt-oss", 36, 128, 4, 2880, 2880, 201088, 64, 8, 64, 131072, "MXFP4"},
	};
	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
		if (strcmp(shape, s[i].shape) != 0)
			continue;
		memset(m, 0, sizeof(*m));
		m->arch = s[i].arch;
		m->layers = s[i].layers;
		m->experts = s[i].experts;
		m->used = s[i].used;
		m->embd = s[i].embd;
		m->ff = s[i].ff;
		m->vocab = s[i].vocab;
		m->heads = s[i].heads;
		m->kv_heads = s[i].kv_heads;
		m->head_dim = s[i].head_dim;
		m->ctx = s[i].ctx;
		m->swa = 128;
		m->expert_type = (int)T(s[i].expert_type);
		m->down_type = -1;
		m->dense_type = (int)T("Q8_0");
		m->seed = 1;
		return 0;
	}
	return -1;
}

/* ---- sizes ------------------------------------------------------------- */

uint32_t fsgw_llama_down_type(const struct fsgw_llama *m, uint32_t l)
{
	if (m->down_types)
		return m->down_types[l];
	if (m->down_type >= 0)
		return (uint32_t)m->down_type;
	if (m->ff % fsg_type((uint32_t)m->expert_type)->block == 0)
		return (uint32_t)m->expert_type;
	return T("Q8_0");
}

static uint64_t rows(uint32_t type, uint64_t ne0, uint64_t n)
{
	uint64_t b = 0;
	return fsg_row_bytes(type, ne0, &b) == 0 ? b * n : 0;
}

uint64_t fsgw_llama_expert_bytes(const struct fsgw_llama *m, uint32_t l)
{
	return 2 * rows((uint32_t)m->expert_type, m->embd, m->ff) +
	       rows(fsgw_llama_down_type(m, l), m->ff, m->embd);
}

int fsgw_llama_match_bytes(struct fsgw_llama *m, const uint64_t *bytes, char *err, size_t errlen)
{
	static const char *const cand[] = {"Q4_K", "Q5_K", "Q6_K", "Q8_0", "Q5_0", "Q4_0", "MXFP4", "F16"};
	const uint64_t gu = 2 * rows((uint32_t)m->expert_type, m->embd, m->ff);
	for (uint32_t l = 0; l < m->layers; l++) {
		int found = -1;
		for (size_t i = 0; i < sizeof(cand) / sizeof(cand[0]) && found < 0; i++) {
			uint64_t d = rows(T(cand[i]), m->ff, m->embd);
			if (d && gu + d == bytes[l])
				found = (int)T(cand[i]);
		}
		if (found < 0) {
			snprintf(
				err, errlen,
				"layer %u: no down type makes an expert %llu bytes (gate+up %s are %llu bytes; "
				"embd %u, ff %u)",
				l, (unsigned long long)bytes[l], fsg_type_name((uint32_t)m->expert_type),
				(unsigned long long)gu, m->embd, m->ff);
			return -1;
		}
		m->down_types[l] = (uint8_t)found;
	}
	return 0;
}

/* ---- tensor sources ------------------------------------------------------ */

enum src_kind { SRC_POOL, SRC_ONE, SRC_TID2EID };

struct src {
	enum src_kind kind;
	const struct fsgw_pool *pool;
	uint64_t key;
	const struct fs_trace *route; /* SRC_TID2EID */
	uint32_t layer;
};

struct gen {
	const struct fsgw_llama *m;
	struct fsgw w;
	struct fsgw_pool pools[MAX_POOLS];
	unsigned n_pools;
	struct src *src;
	size_t n_src, cap_src;
	int err;
};

static int fill(void *ctx, const struct fsgw_tensor *t, uint64_t from, uint8_t *dst, size_t n)
{
	const struct src *s = ctx;
	switch (s->kind) {
	case SRC_POOL:
		fsgw_pool_read(s->pool, s->key, from, dst, n);
		return 0;
	case SRC_ONE: /* F32 1.0: norms */
		for (size_t i = 0; i < n; i++) {
			static const uint8_t one[4] = {0x00, 0x00, 0x80, 0x3f};
			dst[i] = one[(from + i) % 4];
		}
		return 0;
	case SRC_TID2EID: { /* I32 [tokens][topk] */
		const uint32_t K = (uint32_t)t->ne[0];
		for (size_t i = 0; i < n; i++) {
			uint64_t e = (from + i) / 4;
			uint32_t v = fsgw_llama_route(s->route, (uint32_t)(e / K), s->layer,
						      (uint32_t)(e % K));
			dst[i] = (uint8_t)(v >> (8 * ((from + i) % 4)));
		}
		return 0;
	}
	}
	return -1;
}

static const struct fsgw_pool *pool(struct gen *g, uint32_t type, float sd)
{
	for (unsigned i = 0; i < g->n_pools; i++)
		if (g->pools[i].type == type && g->pools[i].sd == sd)
			return &g->pools[i];
	if (g->n_pools == MAX_POOLS)
		return NULL;
	uint64_t seed = g->m->seed * 0x9e3779b97f4a7c15ull + g->n_pools;
	if (fsgw_pool_init(&g->pools[g->n_pools], type, sd, seed, POOL_PAGES, POOL_PAGE_BYTES) < 0)
		return NULL;
	return &g->pools[g->n_pools++];
}

static struct src *new_src(struct gen *g)
{
	if (g->n_src == g->cap_src)
		return NULL; /* sized up front: the tensors keep pointers to their sources */
	struct src *s = &g->src[g->n_src++];
	memset(s, 0, sizeof(*s));
	return s;
}

static uint64_t name_key(uint64_t seed, const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull ^ seed;
	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	return h;
}

/* A tensor: sd > 0 random (pool), sd == 0 all ones (F32), sd < 0 the
 * route's tid2eid of layer l. */
static void tensor(struct gen *g, uint32_t type, float sd, uint32_t l, uint64_t a, uint64_t b, uint64_t c,
		   const char *fmt, ...) __attribute__((format(printf, 8, 9)));
static void tensor(struct gen *g, uint32_t type, float sd, uint32_t l, uint64_t a, uint64_t b, uint64_t c,
		   const char *fmt, ...)
{
	if (g->err)
		return;
	char name[64];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	struct src *s = new_src(g);
	if (!s) {
		snprintf(g->w.err, sizeof(g->w.err), "too many tensors");
		g->err = -1;
		return;
	}
	if (sd > 0) {
		s->kind = SRC_POOL;
		s->key = name_key(g->m->seed, name);
		s->pool = pool(g, type, sd);
		if (!s->pool) {
			snprintf(g->w.err, sizeof(g->w.err), "tensor %s: cannot make %s blocks (types: %s)",
				 name, fsg_type_name(type), fsgw_blocks_types());
			g->err = -1;
			return;
		}
	} else if (sd == 0) {
		s->kind = SRC_ONE;
	} else {
		s->kind = SRC_TID2EID;
		s->route = g->m->route;
		s->layer = l;
	}
	const uint64_t ne[3] = {a, b, c};
	uint32_t n_dims = c > 1 ? 3 : b > 1 ? 2 : 1;
	if (fsgw_tensor_src(&g->w, name, type, n_dims, ne, fill, s) < 0)
		g->err = -1;
}

/* ---- keys ------------------------------------------------------------------ */

static void kv_u32(struct gen *g, const char *k, uint32_t v)
{
	char key[96];
	snprintf(key, sizeof(key), "%s.%s", g->m->arch, k);
	fsgw_kv_u32(&g->w, key, v);
}

static void kv_f32(struct gen *g, const char *k, float v)
{
	char key[96];
	snprintf(key, sizeof(key), "%s.%s", g->m->arch, k);
	fsgw_key(&g->w, key, FSG_V_F32);
	fsgw_put_f32(&g->w, v);
}

static void keys(struct gen *g)
{
	const struct fsgw_llama *m = g->m;
	const int oss = strcmp(m->arch, "gpt-oss") == 0;
	char name[64];
	snprintf(name, sizeof(name), "fs-%s", m->arch);
	fsgw_kv_str(&g->w, "general.architecture", m->arch);
	fsgw_kv_str(&g->w, "general.name", m->name ? m->name : name);
	fsgw_kv_u32(&g->w, "general.quantization_version", 2);
	/* what llama.cpp prints as the model's type: LLAMA_FTYPE_MOSTLY_MXFP4_MOE (38), else Q4_K_M (15)
	 * for K-quant experts, Q8_0 (7) for the rest */
	fsgw_kv_u32(&g->w, "general.file_type",
		    m->expert_type == (int)T("MXFP4") ? 38 :
		    m->expert_type == (int)T("Q8_0")  ? 7 :
							15);
	kv_u32(g, "block_count", m->layers);
	kv_u32(g, "context_length", m->ctx);
	kv_u32(g, "embedding_length", m->embd);
	kv_u32(g, "feed_forward_length", m->ff * m->used);
	kv_u32(g, "expert_feed_forward_length", m->ff);
	kv_u32(g, "expert_count", m->experts);
	kv_u32(g, "expert_used_count", m->used);
	kv_u32(g, "attention.head_count", m->heads);
	kv_u32(g, "attention.head_count_kv", m->kv_heads);
	kv_u32(g, "attention.key_length", m->head_dim);
	kv_u32(g, "attention.value_length", m->head_dim);
	kv_f32(g, "attention.layer_norm_rms_epsilon", oss ? 1e-5f : 1e-6f);
	kv_f32(g, "rope.freq_base", oss ? 150000.0f : 1000000.0f);
	if (oss)
		kv_u32(g, "attention.sliding_window", m->swa);
	kv_u32(g, "vocab_size", m->vocab);
	/* no tokenizer: llama.cpp makes vocab_size dummy tokens */
	fsgw_kv_str(&g->w, "tokenizer.ggml.model", "no_vocab");
}

/* ---- tensors ------------------------------------------------------------------ */

static float fan(uint64_t n)
{
	return 1.0f / sqrtf((float)n);
}

static void layer(struct gen *g, uint32_t l)
{
	const struct fsgw_llama *m = g->m;
	const int oss = strcmp(m->arch, "gpt-oss") == 0;
	const uint64_t D = m->embd, F = m->ff, E = m->experts, Q = (uint64_t)m->heads * m->head_dim,
		       KV = (uint64_t)m->kv_heads * m->head_dim;
	const uint32_t dt = (uint32_t)m->dense_type, xt = (uint32_t)m->expert_type, f32 = T("F32");
	const float bias = 0.01f;
	tensor(g, f32, 0, l, D, 1, 1, "blk.%u.attn_norm.weight", l);
	tensor(g, dt, fan(D), l, D, Q, 1, "blk.%u.attn_q.weight", l);
	tensor(g, dt, fan(D), l, D, KV, 1, "blk.%u.attn_k.weight", l);
	tensor(g, dt, fan(D), l, D, KV, 1, "blk.%u.attn_v.weight", l);
	tensor(g, dt, fan(Q), l, Q, D, 1, "blk.%u.attn_output.weight", l);
	if (oss) {
		tensor(g, f32, bias, l, Q, 1, 1, "blk.%u.attn_q.bias", l);
		tensor(g, f32, bias, l, KV, 1, 1, "blk.%u.attn_k.bias", l);
		tensor(g, f32, bias, l, KV, 1, 1, "blk.%u.attn_v.bias", l);
		tensor(g, f32, bias, l, D, 1, 1, "blk.%u.attn_output.bias", l);
		tensor(g, f32, 1.0f, l, m->heads, 1, 1, "blk.%u.attn_sinks.weight", l);
		tensor(g, f32, 0, l, D, 1, 1, "blk.%u.post_attention_norm.weight", l);
	} else {
		tensor(g, f32, 0, l, m->head_dim, 1, 1, "blk.%u.attn_q_norm.weight", l);
		tensor(g, f32, 0, l, m->head_dim, 1, 1, "blk.%u.attn_k_norm.weight", l);
		tensor(g, f32, 0, l, D, 1, 1, "blk.%u.ffn_norm.weight", l);
	}
	tensor(g, f32, 2.0f * fan(D), l, D, E, 1, "blk.%u.ffn_gate_inp.weight", l);
	tensor(g, xt, fan(D), l, D, F, E, "blk.%u.ffn_gate_exps.weight", l);
	tensor(g, xt, fan(D), l, D, F, E, "blk.%u.ffn_up_exps.weight", l);
	tensor(g, fsgw_llama_down_type(m, l), fan(F), l, F, D, E, "blk.%u.ffn_down_exps.weight", l);
	if (oss) {
		tensor(g, f32, bias, l, E, 1, 1, "blk.%u.ffn_gate_inp.bias", l);
		tensor(g, f32, bias, l, F, E, 1, "blk.%u.ffn_gate_exps.bias", l);
		tensor(g, f32, bias, l, F, E, 1, "blk.%u.ffn_up_exps.bias", l);
		tensor(g, f32, bias, l, D, E, 1, "blk.%u.ffn_down_exps.bias", l);
	}
	if (m->route) /* I32 [n_expert_used, n_vocab], as DeepSeek-V4's hash layers */
		tensor(g, T("I32"), -1, l, m->used, m->vocab, 1, "blk.%u.ffn_gate_tid2eid.weight", l);
}

static int check(const struct fsgw_llama *m, char *err, size_t errlen)
{
	if (!m->arch || (strcmp(m->arch, "qwen3moe") != 0 && strcmp(m->arch, "gpt-oss") != 0)) {
		snprintf(err, errlen, "arch %s: qwen3moe or gpt-oss", m->arch ? m->arch : "(none)");
		return -1;
	}
	if (!m->layers || m->layers > MAX_LAYERS || !m->experts || m->experts > MAX_EXPERTS || !m->used ||
	    m->used > m->experts || !m->embd || !m->ff || !m->vocab || !m->heads || !m->kv_heads ||
	    m->heads % m->kv_heads || !m->head_dim || !m->ctx) {
		snprintf(err, errlen,
			 "bad shape: layers 1..%u, experts 1..%u, used 1..experts, heads a multiple of "
			 "kv_heads, every size >= 1",
			 MAX_LAYERS, MAX_EXPERTS);
		return -1;
	}
	const int types[] = {m->expert_type, m->dense_type, m->down_type};
	for (size_t i = 0; i < 3; i++)
		if (!(i == 2 && types[i] < 0) &&
		    (types[i] < 0 || !fsgw_blocks_supported((uint32_t)types[i]))) {
			snprintf(err, errlen, "type %s: the writer makes %s",
				 types[i] < 0 ? "(none)" : fsg_type_name((uint32_t)types[i]),
				 fsgw_blocks_types());
			return -1;
		}
	const struct fs_trace *r = m->route;
	if (!r)
		return 0;
	if (r->layers < m->layers || r->topk != m->used || r->tokens == 0) {
		snprintf(err, errlen,
			 "route: %u layers x top-%u, %u decode tokens; the model needs >= %u layers, top-%u "
			 "(expert_used_count), >= 1 token",
			 r->layers, r->topk, r->tokens, m->layers, m->used);
		return -1;
	}
	for (uint32_t t = 0; t < r->tokens; t++)
		for (uint32_t l = 0; l < m->layers; l++)
			for (uint32_t k = 0; k < r->topk; k++)
				if (fs_trace_token(r, t, l)[k] >= m->experts) {
					snprintf(err, errlen,
						 "route: token %u layer %u routes to expert %u of %u", t, l,
						 fs_trace_token(r, t, l)[k], m->experts);
					return -1;
				}
	return 0;
}

static int build(struct gen *g)
{
	const struct fsgw_llama *m = g->m;
	const uint64_t D = m->embd;
	keys(g);
	tensor(g, (uint32_t)m->dense_type, 1.0f, 0, D, m->vocab, 1, "token_embd.weight");
	for (uint32_t l = 0; l < m->layers; l++)
		layer(g, l);
	tensor(g, T("F32"), 0, 0, D, 1, 1, "output_norm.weight");
	tensor(g, (uint32_t)m->dense_type, fan(D), 0, D, m->vocab, 1, "output.weight");
	return g->err;
}

static void gen_free(struct gen *g)
{
	for (unsigned i = 0; i < g->n_pools; i++)
		fsgw_pool_free(&g->pools[i]);
	free(g->src);
	fsgw_free(&g->w);
}

static int gen_init(struct gen *g, const struct fsgw_llama *m)
{
	memset(g, 0, sizeof(*g));
	g->m = m;
	fsgw_init(&g->w, 3, 0, m->seed);
	g->cap_src = (size_t)m->layers * 24 + 8;
	g->src = calloc(g->cap_src, sizeof(*g->src));
	return g->src ? 0 : -ENOMEM;
}

uint64_t fsgw_llama_data_bytes(const struct fsgw_llama *m)
{
	struct gen g;
	char err[256];
	uint64_t n = 0;
	if (check(m, err, sizeof(err)) == 0 && gen_init(&g, m) == 0) {
		if (build(&g) == 0)
			n = g.w.data_bytes;
		gen_free(&g);
	}
	return n;
}

int fsgw_llama_write(const struct fsgw_llama *m, const char *path, char *err, size_t errlen)
{
	if (check(m, err, errlen) < 0)
		return -1;
	struct gen g;
	if (gen_init(&g, m) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int r = build(&g);
	if (r == 0)
		r = fsgw_write(&g.w, path);
	if (r != 0)
		snprintf(err, errlen, "%s", g.w.err[0] ? g.w.err : "cannot build the model");
	gen_free(&g);
	return r ? -1 : 0;
}
