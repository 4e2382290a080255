/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the loadable-model writer without llama.cpp: valid blocks
 * (finite scales, values of the asked spread, every 6-bit scale in
 * range), sizes equal to ggml's row sizes (the route traces record the
 * bytes of real Qwen3/Gemma experts: our shapes must give the same), the
 * page pools, and a written model read back by our GGUF reader, its
 * tid2eid tables equal to the route.  llama.cpp running the models is
 * tools/gguf/llama_replay_test.sh.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsg_reader.h"
#include "fsg_types.h"
#include "fsgw_blocks.h"
#include "fsgw_llama.h"

static uint32_t T(const char *n)
{
	int t = fsg_type_by_name(n);
	cr_assert_geq(t, 0, "%s", n);
	return (uint32_t)t;
}

static float half_at(const uint8_t *p)
{
	return fsgw_half_to_float((uint16_t)(p[0] | p[1] << 8));
}

/* ggml's get_scale_min_k4. */
static void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
	if (j < 4) {
		*d = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
		*m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
	}
}

static const float kv_fp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* Dequantize one block (ggml-quants.c's dequantize_row_*, for the types
 * the writer makes); returns the number of values. */
static int dequant(uint32_t type, const uint8_t *p, float *y)
{
	if (type == T("Q8_0")) {
		for (int i = 0; i < 32; i++)
			y[i] = half_at(p) * (float)(int8_t)p[2 + i];
		return 32;
	}
	if (type == T("Q4_0")) {
		for (int i = 0; i < 16; i++) {
			y[i] = half_at(p) * (float)((p[2 + i] & 0xF) - 8);
			y[i + 16] = half_at(p) * (float)((p[2 + i] >> 4) - 8);
		}
		return 32;
	}
	if (type == T("Q5_0")) {
		uint32_t qh;
		memcpy(&qh, p + 2, 4);
		for (int i = 0; i < 16; i++) {
			int x0 = (p[6 + i] & 0xF) | (((qh >> i) & 1) << 4);
			int x1 = (p[6 + i] >> 4) | (((qh >> (i + 12)) & 0x10));
			y[i] = half_at(p) * (float)(x0 - 16);
			y[i + 16] = half_at(p) * (float)(x1 - 16);
		}
		return 32;
	}
	if (type == T("Q4_K")) {
		const float d = half_at(p), dmin = half_at(p + 2);
		const uint8_t *q = p + 16;
		int is = 0;
		float *o = y;
		for (int j = 0; j < 256; j += 64, q += 32, is += 2) {
			uint8_t sc, m;
			scale_min_k4(is, p + 4, &sc, &m);
			float d1 = d * sc, m1 = dmin * m;
			scale_min_k4(is + 1, p + 4, &sc, &m);
			float d2 = d * sc, m2 = dmin * m;
			for (int l = 0; l < 32; l++)
				*o++ = d1 * (float)(q[l] & 0xF) - m1;
			for (int l = 0; l < 32; l++)
				*o++ = d2 * (float)(q[l] >> 4) - m2;
		}
		return 256;
	}
	if (type == T("Q5_K")) {
		const float d = half_at(p), dmin = half_at(p + 2);
		const uint8_t *qh = p + 16, *ql = p + 48;
		int is = 0;
		uint8_t u1 = 1, u2 = 2;
		float *o = y;
		for (int j = 0; j < 256; j += 64, ql += 32, is += 2, u1 <<= 2, u2 <<= 2) {
			uint8_t sc, m;
			scale_min_k4(is, p + 4, &sc, &m);
			float d1 = d * sc, m1 = dmin * m;
			scale_min_k4(is + 1, p + 4, &sc, &m);
			float d2 = d * sc, m2 = dmin * m;
			for (int l = 0; l < 32; l++)
				*o++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
			for (int l = 0; l < 32; l++)
				*o++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
		}
		return 256;
	}
	if (type == T("Q6_K")) {
		const float d = half_at(p + 208);
		const uint8_t *ql = p, *qh = p + 128;
		const int8_t *sc = (const int8_t *)(p + 192);
		float *o = y;
		for (int n = 0; n < 256; n += 128, ql += 64, qh += 32, sc += 8, o += 128)
			for (int l = 0; l < 32; l++) {
				int is = l / 16;
				int q1 = (int)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
				int q2 = (int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
				int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
				int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
				o[l] = d * sc[is] * q1;
				o[l + 32] = d * sc[is + 2] * q2;
				o[l + 64] = d * sc[is + 4] * q3;
				o[l + 96] = d * sc[is + 6] * q4;
			}
		return 256;
	}
	if (type == T("MXFP4")) {
		const float s = ldexpf(1.0f, (int)p[0] - 128);
		for (int i = 0; i < 16; i++) {
			y[i] = kv_fp4[p[1 + i] & 0xF] * s;
			y[i + 16] = kv_fp4[p[1 + i] >> 4] * s;
		}
		return 32;
	}
	if (type == T("F16")) {
		y[0] = half_at(p);
		return 1;
	}
	memcpy(y, p, 4); /* F32 */
	return 1;
}

/* The block's scales: every fp16 one finite and > 0, the K types' 6-bit
 * mins no larger than what centres the codes. */
static void check_scales(uint32_t type, const uint8_t *p)
{
	if (type == T("Q4_K") || type == T("Q5_K")) {
		cr_assert(isfinite(half_at(p)) && half_at(p) > 0);
		cr_assert(isfinite(half_at(p + 2)) && half_at(p + 2) > 0);
		for (int j = 0; j < 8; j++) {
			uint8_t sc, m;
			scale_min_k4(j, p + 4, &sc, &m);
			cr_assert(sc >= 32 && sc <= 63, "sub-block %d scale %u", j, sc);
			cr_assert(m <= 63);
		}
	} else if (type == T("Q6_K")) {
		cr_assert(isfinite(half_at(p + 208)) && half_at(p + 208) > 0);
	} else if (type == T("MXFP4")) {
		cr_assert(p[0] >= 1 && p[0] <= 254);
	} else if (type != T("F32") && type != T("F16")) {
		cr_assert(isfinite(half_at(p)) && half_at(p) > 0);
	}
}

Test(blocks, every_type_valid_with_the_asked_spread)
{
	const char *names[] = {"F32", "F16", "Q4_0", "Q5_0", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "MXFP4"};
	const float sds[] = {0.0221f, 0.036f, 1.0f};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		for (size_t s = 0; s < 3; s++) {
			const uint32_t t = T(names[i]);
			const size_t bb = fsg_type(t)->block_bytes, n = 4096 / fsg_type(t)->block;
			uint8_t *buf = malloc(bb * n);
			float y[256];
			cr_assert(fsgw_blocks_supported(t));
			cr_assert_eq(fsgw_blocks(t, sds[s], 7 + s, buf, n), 0);
			double sum = 0, sq = 0;
			size_t cnt = 0;
			for (size_t b = 0; b < n; b++) {
				check_scales(t, buf + b * bb);
				int k = dequant(t, buf + b * bb, y);
				for (int j = 0; j < k; j++) {
					cr_assert(isfinite(y[j]), "%s block %zu value %d", names[i], b, j);
					sum += y[j];
					sq += (double)y[j] * y[j];
				}
				cnt += (size_t)k;
			}
			cr_assert_eq(cnt, 4096);
			double mean = sum / cnt, sd = sqrt(sq / cnt - mean * mean);
			cr_assert(fabs(mean) < 0.15 * sds[s], "%s: mean %g for sd %g", names[i], mean,
				  sds[s]);
			cr_assert(sd > 0.75 * sds[s] && sd < 1.33 * sds[s], "%s: sd %g, asked %g", names[i],
				  sd, sds[s]);
			free(buf);
		}
}

Test(blocks, rejects_unsupported_types_and_spreads)
{
	uint8_t buf[256];
	cr_assert_eq(fsgw_blocks(T("IQ2_XXS"), 0.1f, 1, buf, 1), -1);
	cr_assert_eq(fsgw_blocks(T("Q8_0"), 0.0f, 1, buf, 1), -1);
	cr_assert_eq(fsgw_blocks(T("Q8_0"), NAN, 1, buf, 1), -1);
	cr_assert_eq(fsgw_blocks(T("Q8_0"), 1e6f, 1, buf, 1), -1);
}

Test(blocks, half_conversion)
{
	const float v[] = {1.0f, -2.5f, 6.1035156e-05f, 1e-4f, 3e-6f, 65504.0f, 0.0f};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		float r = fsgw_half_to_float(fsgw_half(v[i]));
		cr_assert(fabsf(r - v[i]) <= fabsf(v[i]) * 1e-3f + 6e-8f, "%g -> %g", v[i], r);
	}
	cr_assert_eq(fsgw_half(1e6f), 0x7c00);
	cr_assert_eq(fsgw_half(1.0f), 0x3c00);
	cr_assert_eq(fsgw_half(1e-9f), 0);
}

Test(pool, pages_are_whole_blocks_deterministic_and_keyed)
{
	struct fsgw_pool p;
	const uint32_t t = T("Q4_K");
	cr_assert_eq(fsgw_pool_init(&p, t, 0.02f, 3, 8, 1000), 0);
	cr_assert_eq(p.page_bytes, 6 * 144); /* 1000 bytes: 6 whole blocks */
	const size_t n = 20 * p.page_bytes + 77;
	uint8_t *a = malloc(n), *b = malloc(n), *c = malloc(n);
	fsgw_pool_read(&p, 42, 0, a, n);
	/* any split reads the same stream */
	fsgw_pool_read(&p, 42, 0, b, 500);
	fsgw_pool_read(&p, 42, 500, b + 500, n - 500);
	cr_assert_arr_eq(a, b, n);
	/* another key (another tensor, or an expert further on) differs */
	fsgw_pool_read(&p, 43, 0, c, n);
	cr_assert(memcmp(a, c, n) != 0);
	/* every block of the stream is valid */
	for (size_t blk = 0; blk + 144 <= n; blk += 144)
		check_scales(t, a + blk);
	free(a);
	free(b);
	free(c);
	fsgw_pool_free(&p);
	cr_assert_eq(fsgw_pool_init(&p, T("IQ2_XXS"), 0.02f, 3, 8, 1000), -1);
}

Test(sizes, row_bytes_are_ggml_s)
{
	uint64_t b;
	/* ggml_row_size: ne0 / block * type_size */
	cr_assert_eq(fsg_row_bytes(T("Q4_K"), 2048, &b), 0);
	cr_assert_eq(b, 8 * 144);
	cr_assert_eq(fsg_row_bytes(T("Q6_K"), 768, &b), 0);
	cr_assert_eq(b, 3 * 210);
	cr_assert_eq(fsg_row_bytes(T("Q8_0"), 704, &b), 0);
	cr_assert_eq(b, 22 * 34);
	cr_assert_eq(fsg_row_bytes(T("MXFP4"), 2880, &b), 0);
	cr_assert_eq(b, 90 * 17);
	cr_assert_lt(fsg_row_bytes(T("Q4_K"), 704, &b), 0);
}

/* The route traces were recorded from real GGUFs (Qwen3-30B-A3B Q4_K_M,
 * Gemma-4-26B-A4B Q4_K_M): one expert's bytes per layer.  Our shapes with
 * the matching down type must give exactly those. */
Test(sizes, shapes_give_the_recorded_expert_bytes)
{
	struct fsgw_llama m;
	char err[256];
	cr_assert_eq(fsgw_llama_shape(&m, "qwen3-30b-a3b"), 0);
	cr_assert_eq(fsgw_llama_expert_bytes(&m, 0), 2654208); /* Q4_K down */
	uint8_t down[48];
	uint64_t want[48];
	for (int l = 0; l < 48; l++)
		want[l] = l % 2 ? 3059712 : 2654208; /* the qwen trace's two sizes */
	m.down_types = down;
	cr_assert_eq(fsgw_llama_match_bytes(&m, want, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(down[0], T("Q4_K"));
	cr_assert_eq(down[1], T("Q6_K"));
	cr_assert_eq(fsgw_llama_shape(&m, "gemma-replay"), 0);
	for (int l = 0; l < 30; l++)
		want[l] = l % 2 ? 4336640 : 3593216;
	m.down_types = down;
	cr_assert_eq(fsgw_llama_match_bytes(&m, want, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(down[0], T("Q5_0"));
	cr_assert_eq(down[1], T("Q8_0"));
	want[3] = 1234;
	cr_assert_eq(fsgw_llama_match_bytes(&m, want, err, sizeof(err)), -1);
	cr_assert(strstr(err, "layer 3"), "%s", err);
	/* the full Qwen3 model: 48 x 128 experts of 2.53 MiB, + attention,
	 * embeddings, output: as LLAMA.md's 16.1 GiB stock model */
	cr_assert_eq(fsgw_llama_shape(&m, "qwen3-30b-a3b"), 0);
	uint64_t total = fsgw_llama_data_bytes(&m);
	cr_assert(total > 48ull * 128 * 2654208 && total < 48ull * 128 * 2654208 + (2ull << 30), "%llu",
		  (unsigned long long)total);
}

static struct fsg_file open_model(const char *path)
{
	struct fsg_file f;
	struct fsg_err e;
	cr_assert_eq(fsg_open(&f, path, &e), 0);
	return f;
}

static void read_at(const char *path, uint64_t off, void *dst, size_t n)
{
	FILE *fp = fopen(path, "rb");
	cr_assert_not_null(fp);
	cr_assert_eq(fseek(fp, (long)off, SEEK_SET), 0);
	cr_assert_eq(fread(dst, 1, n, fp), n);
	fclose(fp);
}

Test(model, tiny_model_has_every_tensor_and_its_route)
{
	char path[] = "/tmp/fsgw_llama_test.XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	close(fd);
	struct fs_trace tr;
	struct fs_trace_gen g;
	char err[FS_TRACE_ERRLEN];
	fs_trace_gen_defaults(&g);
	g.layers = 6; /* more layers than the model: it replays the first 4 */
	g.experts = 16;
	g.topk = 3;
	g.windows = 37;
	cr_assert_eq(fs_trace_generate(&tr, &g, err, sizeof(err)), 0, "%s", err);
	struct fsgw_llama m;
	cr_assert_eq(fsgw_llama_shape(&m, "tiny"), 0);
	m.route = &tr;
	cr_assert_eq(fsgw_llama_write(&m, path, err, sizeof(err)), -1, "top-4 model, top-3 route");
	m.used = 3;
	cr_assert_eq(fsgw_llama_write(&m, path, err, sizeof(err)), 0, "%s", err);
	struct fsg_file f = open_model(path);
	/* qwen3moe's loader: 3 globals + 12 per layer, + tid2eid */
	cr_assert_eq(f.n_tensors, 3 + 4 * 13);
	const char *need[] = {"token_embd.weight",         "output_norm.weight",        "output.weight",
			      "blk.3.attn_q_norm.weight",  "blk.3.attn_k_norm.weight",  "blk.0.attn_v.weight",
			      "blk.2.ffn_gate_inp.weight", "blk.1.ffn_down_exps.weight"};
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		cr_assert_not_null(fsg_tensor_find(&f, need[i]), "%s", need[i]);
	uint64_t v;
	struct fsg_str s;
	cr_assert_eq(fsg_get_uint(&f, "qwen3moe.expert_used_count", &v), 0);
	cr_assert_eq(v, 3);
	cr_assert_eq(fsg_get_uint(&f, "qwen3moe.vocab_size", &v), 0);
	cr_assert_eq(v, 512);
	cr_assert_eq(fsg_get_str(&f, "tokenizer.ggml.model", &s), 0);
	cr_assert(s.len == 8 && memcmp(s.p, "no_vocab", 8) == 0);
	/* norms are ones */
	const struct fsg_tensor *nt = fsg_tensor_find(&f, "blk.0.ffn_norm.weight");
	float ones[256];
	read_at(path, nt->off, ones, sizeof(ones));
	for (int i = 0; i < 256; i++)
		cr_assert_eq(ones[i], 1.0f);
	/* tid2eid: [3, 512] I32, token t = the trace's token t mod 37 */
	for (uint32_t l = 0; l < 4; l++) {
		char name[64];
		snprintf(name, sizeof(name), "blk.%u.ffn_gate_tid2eid.weight", l);
		const struct fsg_tensor *t = fsg_tensor_find(&f, name);
		cr_assert_not_null(t, "%s", name);
		cr_assert(t->type == T("I32") && t->ne[0] == 3 && t->ne[1] == 512);
		int32_t *ids = malloc(t->bytes);
		read_at(path, t->off, ids, t->bytes);
		for (uint32_t tok = 0; tok < 512; tok++)
			for (uint32_t k = 0; k < 3; k++)
				cr_assert_eq(ids[tok * 3 + k], fs_trace_token(&tr, tok % 37, l)[k]);
		free(ids);
	}
	/* expert blocks are valid everywhere, and experts differ */
	const struct fsg_tensor *x = fsg_tensor_find(&f, "blk.2.ffn_up_exps.weight");
	cr_assert(x->type == T("Q4_K") && x->ne[2] == 16);
	uint8_t *e = malloc(x->bytes);
	read_at(path, x->off, e, x->bytes);
	for (uint64_t b = 0; b < x->bytes; b += 144)
		check_scales(x->type, e + b);
	const uint64_t per = x->bytes / 16;
	for (int k = 1; k < 16; k++)
		cr_assert(memcmp(e, e + k * per, per) != 0, "expert %d = expert 0", k);
	free(e);
	fsg_close(&f);
	fs_trace_free(&tr);
	unlink(path);
}

Test(model, gpt_oss_tensors)
{
	char path[] = "/tmp/fsgw_llama_test.XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	close(fd);
	struct fsgw_llama m;
	char err[256];
	cr_assert_eq(fsgw_llama_shape(&m, "gpt-oss-20b"), 0);
	m.layers = 2;
	m.experts = 4;
	m.embd = 64;
	m.ff = 64;
	m.vocab = 100;
	m.heads = 4;
	m.kv_heads = 2;
	m.head_dim = 16;
	cr_assert_eq(fsgw_llama_write(&m, path, err, sizeof(err)), 0, "%s", err);
	struct fsg_file f = open_model(path);
	/* openai-moe's loader: 3 globals + 19 per layer */
	cr_assert_eq(f.n_tensors, 3 + 2 * 19);
	const char *need[] = {"blk.1.attn_sinks.weight", "blk.1.post_attention_norm.weight",
			      "blk.0.ffn_gate_exps.bias", "blk.0.ffn_gate_inp.bias",
			      "blk.0.attn_output.bias"};
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		cr_assert_not_null(fsg_tensor_find(&f, need[i]), "%s", need[i]);
	cr_assert_eq(fsg_tensor_find(&f, "blk.0.ffn_down_exps.weight")->type, T("MXFP4"));
	uint64_t v;
	cr_assert_eq(fsg_get_uint(&f, "gpt-oss.attention.sliding_window", &v), 0);
	fsg_close(&f);
	unlink(path);
}

Test(model, bad_specs_are_refused)
{
	struct fsgw_llama m;
	char err[256];
	cr_assert_eq(fsgw_llama_shape(&m, "nope"), -1);
	cr_assert_eq(fsgw_llama_shape(&m, "tiny"), 0);
	m.embd = 100; /* not whole Q4_K blocks */
	cr_assert_eq(fsgw_llama_write(&m, "/tmp/never-written.gguf", err, sizeof(err)), -1);
	cr_assert(strstr(err, "Q4_K") || strstr(err, "Q8_0"), "%s", err);
	cr_assert_eq(access("/tmp/never-written.gguf", F_OK), -1);
	cr_assert_eq(fsgw_llama_shape(&m, "tiny"), 0);
	m.expert_type = (int)T("IQ2_XXS");
	cr_assert_eq(fsgw_llama_write(&m, "/tmp/never-written.gguf", err, sizeof(err)), -1);
	cr_assert_eq(fsgw_llama_shape(&m, "tiny"), 0);
	m.kv_heads = 3;
	cr_assert_eq(fsgw_llama_write(&m, "/tmp/never-written.gguf", err, sizeof(err)), -1);
}
