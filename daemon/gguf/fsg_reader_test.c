/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Round trips of the GGUF reader: files written by fs_gguf_writer (every
 * preset of the fixture set, v2 and v3, odd alignments) read back with the
 * same tensors, placements, bytes and metadata values.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>

#include "fsg_reader.h"
#include "fsg_test_util.h"
#include "fsg_types.h"
#include "fsgw.h"

/* A hand-built file: the writer's own tensor list is what we compare. */
Test(reader, tensors_round_trip)
{
	char dir[64], path[128];
	tu_tmpdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/rt.gguf", dir);
	static const uint32_t aligns[] = {0, 1, 8, 64, 4096};
	for (unsigned v = 2; v <= 3; v++) {
		for (unsigned a = 0; a < sizeof(aligns) / sizeof(aligns[0]); a++) {
			struct fsgw w;
			fsgw_init(&w, v, aligns[a], 7 + a);
			fsgw_kv_str(&w, "general.architecture", "test");
			const uint64_t ne1[] = {7}, ne2[] = {256, 3}, ne3[] = {64, 5, 4},
				       ne4[] = {32, 2, 3, 2};
			cr_assert_eq(fsgw_tensor(&w, "odd", 0, 1, ne1), 0);
			cr_assert_eq(fsgw_tensor(&w, "q4k", (uint32_t)fsg_type_by_name("Q4_K"), 2, ne2), 0);
			cr_assert_eq(fsgw_tensor(&w, "mx", (uint32_t)fsg_type_by_name("MXFP4"), 3, ne3), 0);
			cr_assert_eq(fsgw_tensor(&w, "four", (uint32_t)fsg_type_by_name("Q8_0"), 4, ne4), 0);
			cr_assert_eq(fsgw_tensor(&w, "empty", 1, 2, (const uint64_t[]){0, 4}), 0);
			cr_assert_eq(fsgw_write(&w, path), 0, "%s", w.err);

			struct fsg_file f;
			struct fsg_err err;
			cr_assert_eq(fsg_open(&f, path, &err), 0, "v%u align %u: %s", v, aligns[a], err.msg);
			cr_expect_eq(f.version, v);
			cr_expect_eq(f.alignment, aligns[a] ? aligns[a] : 32u);
			cr_expect_eq(f.data_off % f.alignment, 0u);
			cr_assert_eq(f.n_tensors, w.n_t);
			size_t len;
			uint8_t *all = tu_slurp(path, &len);
			for (uint64_t i = 0; i < w.n_t; i++) {
				const struct fsg_tensor *t = &f.t[i];
				cr_expect_str_eq(t->name, w.t[i].name);
				cr_expect_eq(t->type, w.t[i].type);
				cr_expect_eq(t->n_dims, w.t[i].n_dims);
				for (int d = 0; d < 4; d++)
					cr_expect_eq(t->ne[d], w.t[i].ne[d], "%s ne[%d]", t->name, d);
				cr_expect_eq(t->rel_off, w.t[i].rel_off);
				cr_expect_eq(t->bytes, w.t[i].bytes, "%s bytes", t->name);
				cr_expect_eq(t->off, f.data_off + t->rel_off);
				uint8_t *want = malloc(t->bytes + 1);
				fsgw_fill(7 + a, t->name, 0, want, (size_t)t->bytes);
				cr_expect(memcmp(all + t->off, want, (size_t)t->bytes) == 0, "%s: data",
					  t->name);
				free(want);
			}
			free(all);
			cr_expect_eq(fsg_tensor_find(&f, "mx")->bytes, 64u / 32 * 17 * 5 * 4);
			cr_expect_null(fsg_tensor_find(&f, "nope"));
			fsg_close(&f);
			fsgw_free(&w);
		}
	}
	tu_rmdir(dir);
}

static const struct fsg_kv *kv(const struct fsg_file *f, const char *key)
{
	const struct fsg_kv *k = fsg_kv_find(f, key);
	cr_assert_not_null(k, "%s missing", key);
	return k;
}

Test(reader, every_metadata_type)
{
	char dir[64], path[128];
	struct fsgw_model m;
	tu_tmpdir(dir, sizeof(dir));
	fsgw_model_defaults(&m, "qwen3moe");
	tu_model(dir, "m.gguf", &m, path, sizeof(path));
	struct fsg_file f;
	struct fsg_err err;
	cr_assert_eq(fsg_open(&f, path, &err), 0, "%s", err.msg);
	int64_t i;
	uint64_t u;
	double d;
	int b;
	struct fsg_str s;
	cr_expect(fsg_val_uint(&f, &kv(&f, "fixture.u8")->val, &u) == 0 && u == 200);
	cr_expect(fsg_val_int(&f, &kv(&f, "fixture.i8")->val, &i) == 0 && i == -5);
	cr_expect(fsg_val_uint(&f, &kv(&f, "fixture.u16")->val, &u) == 0 && u == 60000);
	cr_expect(fsg_val_int(&f, &kv(&f, "fixture.i16")->val, &i) == 0 && i == -30000);
	cr_expect(fsg_val_uint(&f, &kv(&f, "fixture.u32")->val, &u) == 0 && u == 4000000000u);
	cr_expect(fsg_val_int(&f, &kv(&f, "fixture.i32")->val, &i) == 0 && i == -2000000000);
	cr_expect(fsg_val_float(&f, &kv(&f, "fixture.f32")->val, &d) == 0 && d == 1.5);
	cr_expect(fsg_val_bool(&f, &kv(&f, "fixture.bool")->val, &b) == 0 && b == 1);
	cr_expect(fsg_val_uint(&f, &kv(&f, "fixture.u64")->val, &u) == 0 && u == 9223372036854775813ull);
	cr_expect_eq(fsg_val_int(&f, &kv(&f, "fixture.u64")->val, &i), -EINVAL, "does not fit an int64");
	cr_expect(fsg_val_int(&f, &kv(&f, "fixture.i64")->val, &i) == 0 && i == -1099511627776ll);
	cr_expect_eq(fsg_val_uint(&f, &kv(&f, "fixture.i64")->val, &u), -EINVAL, "negative");
	cr_expect(fsg_val_float(&f, &kv(&f, "fixture.f64")->val, &d) == 0 && d == 2.25);
	cr_assert_eq(fsg_val_str(&f, &kv(&f, "fixture.str")->val, &s), 0);
	cr_expect(s.len == 13 && memcmp(s.p, "fixture \xc3\xa9t\xc3\xa9", 13) == 0);
	cr_expect_eq(fsg_val_str(&f, &kv(&f, "fixture.u8")->val, &s), -EINVAL, "not a string");

	const struct fsg_val *e = &kv(&f, "fixture.empty")->val;
	cr_expect(e->type == FSG_V_ARR && e->elem_type == FSG_V_U8 && e->n == 0);
	const struct fsg_val *bo = &kv(&f, "fixture.bools")->val;
	struct fsg_val x;
	cr_assert_eq(bo->n, 3u);
	cr_expect(fsg_val_at(&f, bo, 1, &x) == 0 && fsg_val_bool(&f, &x, &b) == 0 && b == 0);
	cr_expect(fsg_val_at(&f, bo, 2, &x) == 0 && fsg_val_bool(&f, &x, &b) == 0 && b == 1);
	cr_expect_eq(fsg_val_at(&f, bo, 3, &x), -EINVAL);

	/* [[1, 2], [3], []] */
	const struct fsg_val *n = &kv(&f, "fixture.nested")->val;
	struct fsg_val inner, el;
	cr_assert(n->type == FSG_V_ARR && n->elem_type == FSG_V_ARR && n->n == 3);
	cr_assert_eq(fsg_val_at(&f, n, 1, &inner), 0);
	cr_expect(inner.type == FSG_V_ARR && inner.elem_type == FSG_V_U16 && inner.n == 1);
	cr_expect(fsg_val_at(&f, &inner, 0, &el) == 0 && fsg_val_uint(&f, &el, &u) == 0 && u == 3);
	cr_assert_eq(fsg_val_at(&f, n, 0, &inner), 0);
	cr_expect(fsg_val_at(&f, &inner, 1, &el) == 0 && fsg_val_uint(&f, &el, &u) == 0 && u == 2);
	cr_assert_eq(fsg_val_at(&f, n, 2, &inner), 0);
	cr_expect_eq(inner.n, 0u);
	/* [["a", "bc"], ["d"]] */
	const struct fsg_val *ns = &kv(&f, "fixture.nested_str")->val;
	cr_assert_eq(fsg_val_at(&f, ns, 0, &inner), 0);
	cr_expect(fsg_val_at(&f, &inner, 1, &el) == 0 && fsg_val_str(&f, &el, &s) == 0 && s.len == 2 &&
		  memcmp(s.p, "bc", 2) == 0);
	cr_assert_eq(fsg_val_at(&f, ns, 1, &inner), 0);
	cr_expect(fsg_val_at(&f, &inner, 0, &el) == 0 && fsg_val_str(&f, &el, &s) == 0 && s.len == 1 &&
		  *s.p == 'd');
	/* [[[-7]]] */
	const struct fsg_val *dp = &kv(&f, "fixture.deep")->val;
	struct fsg_val l1, l2, l3;
	cr_assert(fsg_val_at(&f, dp, 0, &l1) == 0 && fsg_val_at(&f, &l1, 0, &l2) == 0 &&
		  fsg_val_at(&f, &l2, 0, &l3) == 0);
	cr_expect(fsg_val_int(&f, &l3, &i) == 0 && i == -7);
	/* The vocabulary: strings of varying length. */
	const struct fsg_val *tok = &kv(&f, "tokenizer.ggml.tokens")->val;
	cr_assert_eq(tok->n, 32u);
	cr_expect(fsg_val_at(&f, tok, 10, &el) == 0 && fsg_val_str(&f, &el, &s) == 0 && s.len == 7 &&
		  memcmp(s.p, "\xc4\xa0tok10", 7) == 0);
	cr_expect(fsg_val_at(&f, tok, 30, &el) == 0 && fsg_val_str(&f, &el, &s) == 0 && s.len == 5 &&
		  memcmp(s.p, "tok30", 5) == 0);
	cr_expect(fsg_get_uint(&f, "qwen3moe.expert_count", &u) == 0 && u == 8);
	cr_expect_eq(fsg_get_uint(&f, "no.such.key", &u), -ENOENT);
	cr_expect(fsg_get_str(&f, "general.architecture", &s) == 0 && s.len == 8);
	fsg_close(&f);
	tu_rmdir(dir);
}

/* Every fixture of the set parses, each tensor's bytes are where it says. */
Test(reader, fixture_set)
{
	char dir[64], path[128];
	struct fsgw_fixture fx[16];
	unsigned n = fsgw_fixtures(fx, 16);
	cr_assert_geq(n, 7u);
	tu_tmpdir(dir, sizeof(dir));
	for (unsigned k = 0; k < n; k++) {
		tu_model(dir, fx[k].file, &fx[k].m, path, sizeof(path));
		struct fsg_file f;
		struct fsg_err err;
		cr_assert_eq(fsg_open(&f, path, &err), 0, "%s: %s", fx[k].file, err.msg);
		cr_expect_eq(f.version, fx[k].m.version);
		cr_expect_eq(f.alignment, fx[k].m.alignment ? fx[k].m.alignment : 32u);
		size_t len;
		uint8_t *all = tu_slurp(path, &len);
		cr_expect_eq(f.file_size, len);
		for (uint64_t i = 0; i < f.n_tensors; i++) {
			const struct fsg_tensor *t = &f.t[i];
			uint8_t *want = malloc(t->bytes + 1);
			fsgw_fill(fx[k].m.seed, t->name, 0, want, (size_t)t->bytes);
			cr_expect(memcmp(all + t->off, want, (size_t)t->bytes) == 0, "%s %s", fx[k].file,
				  t->name);
			cr_expect_eq(t->off % f.alignment, 0u);
			free(want);
		}
		free(all);
		fsg_close(&f);
	}
	tu_rmdir(dir);
}

/* Parsing from a buffer that holds only part of the head asks for more. */
Test(reader, short_buffer_asks_for_more)
{
	char dir[64], path[128];
	struct fsgw_model m;
	tu_tmpdir(dir, sizeof(dir));
	fsgw_model_defaults(&m, "mixtral");
	tu_model(dir, "m.gguf", &m, path, sizeof(path));
	size_t len;
	uint8_t *b = tu_slurp(path, &len);
	struct fsg_file f;
	struct fsg_err err;
	cr_assert_eq(fsg_parse(&f, b, len, len, &err), 0, "%s", err.msg);
	uint64_t head = f.info_end;
	fsg_close(&f);
	for (uint64_t cut = 0; cut < head; cut += 97)
		cr_expect_eq(fsg_parse(&f, b, cut, len, &err), -EAGAIN, "cut %llu", (unsigned long long)cut);
	cr_expect_eq(fsg_parse(&f, b, head, len, &err), 0, "the head is enough: %s", err.msg);
	fsg_close(&f);
	free(b);
	tu_rmdir(dir);
}

Test(reader, open_errors)
{
	struct fsg_file f;
	struct fsg_err err;
	cr_expect_eq(fsg_open(&f, "/nonexistent/x.gguf", &err), -ENOENT);
	cr_expect(strstr(err.msg, "/nonexistent/x.gguf") != NULL, "%s", err.msg);
	cr_expect_eq(fsg_open(&f, "/tmp", &err), -EINVAL);
	cr_expect(strstr(err.msg, "not a regular file") != NULL, "%s", err.msg);
}
