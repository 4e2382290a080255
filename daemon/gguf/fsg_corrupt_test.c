/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Corrupt GGUF files: each gives -EBADMSG and a message naming the field
 * and the byte offset, never a crash.  The files are built byte by byte
 * with marks at the fields a test then breaks.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fsg_moe.h"
#include "fsg_reader.h"
#include "fsg_test_util.h"
#include "fsg_types.h"

struct bb {
	uint8_t *p;
	size_t n, cap;
	struct {
		const char *name;
		size_t at;
	} mark[64];
	unsigned nmark;
};

static void put(struct bb *b, const void *p, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 256;
		b->p = realloc(b->p, b->cap);
		cr_assert_not_null(b->p);
	}
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

static void u32(struct bb *b, uint32_t v)
{
	uint8_t x[4];
	tu_put_le(x, v, 4);
	put(b, x, 4);
}

static void u64(struct bb *b, uint64_t v)
{
	uint8_t x[8];
	tu_put_le(x, v, 8);
	put(b, x, 8);
}

static void str(struct bb *b, const char *s)
{
	u64(b, strlen(s));
	put(b, s, strlen(s));
}

static void mark(struct bb *b, const char *name)
{
	b->mark[b->nmark].name = name;
	b->mark[b->nmark++].at = b->n;
}

static size_t at(const struct bb *b, const char *name)
{
	for (unsigned i = 0; i < b->nmark; i++)
		if (strcmp(b->mark[i].name, name) == 0)
			return b->mark[i].at;
	cr_assert_fail("no mark %s", name);
	return 0;
}

enum extra { X_NONE, X_DEEP, X_DUP_KEY, X_ALIGN_U64, X_LONG_NAME };

/*
 * The base file: 4 kvs (architecture, alignment 32, a string array, a
 * bool), tensors "ta" (8 x F32 at 0) and "tb" (32x2 Q8_0 at 32), data,
 * padding.  `extra` adds one structural twist.
 */
static void build(struct bb *b, enum extra extra)
{
	memset(b, 0, sizeof(*b));
	mark(b, "magic");
	put(b, "GGUF", 4);
	mark(b, "version");
	u32(b, 3);
	mark(b, "n_tensors");
	u64(b, 2);
	mark(b, "n_kv");
	u64(b, extra == X_DEEP || extra == X_DUP_KEY ? 5 : 4);
	mark(b, "k0len");
	str(b, "general.architecture");
	mark(b, "k0type");
	u32(b, FSG_V_STR);
	str(b, "qwen3moe");
	mark(b, "k1");
	str(b, "general.alignment");
	if (extra == X_ALIGN_U64) {
		u32(b, FSG_V_U64);
		u64(b, 32);
	} else {
		u32(b, FSG_V_U32);
		mark(b, "align");
		u32(b, 32);
	}
	str(b, "test.arr");
	u32(b, FSG_V_ARR);
	mark(b, "arrelem");
	u32(b, FSG_V_STR);
	mark(b, "arrn");
	u64(b, 2);
	str(b, "x");
	str(b, "yz");
	str(b, "test.bool");
	u32(b, FSG_V_BOOL);
	mark(b, "bool");
	put(b, "\x01", 1);
	if (extra == X_DEEP) { /* 9 arrays deep */
		str(b, "test.deep");
		u32(b, FSG_V_ARR);
		for (int i = 0; i < 9; i++) {
			u32(b, i < 8 ? FSG_V_ARR : FSG_V_U8);
			u64(b, 1);
		}
		put(b, "\x05", 1);
	}
	if (extra == X_DUP_KEY) {
		str(b, "test.bool");
		u32(b, FSG_V_BOOL);
		put(b, "\x00", 1);
	}
	mark(b, "t0");
	/* GGML_MAX_NAME is 64 with the NUL: a 64-byte name is one too many. */
	str(b,
	    extra == X_LONG_NAME ? "blk.0.a_name_of_exactly_sixty_four_bytes_that_ggml_refuses.weigh" : "ta");
	mark(b, "t0nd");
	u32(b, 1);
	u64(b, 8);
	mark(b, "t0type");
	u32(b, 0);
	u64(b, 0);
	mark(b, "t1");
	str(b, "tb");
	mark(b, "t1nd");
	u32(b, 2);
	mark(b, "t1ne0");
	u64(b, 32);
	mark(b, "t1ne1");
	u64(b, 2);
	mark(b, "t1type");
	u32(b, 8);
	mark(b, "t1off");
	u64(b, 32);
	while (b->n % 32)
		put(b, "", 1);
	mark(b, "data");
	for (int i = 0; i < 100 + 28; i++)
		put(b, "\x5a", 1);
}

static int parse(const struct bb *b, size_t len, struct fsg_err *err)
{
	struct fsg_file f;
	memset(err, 0, sizeof(*err));
	int r = fsg_parse(&f, b->p, len, len, err);
	fsg_close(&f);
	return r;
}

/* Break the base at a mark, expect an error whose message has `want`. */
static void expect_bad(struct bb *b, const char *want)
{
	struct fsg_err err;
	int r = parse(b, b->n, &err);
	cr_expect_eq(r, -EBADMSG, "expected an error about '%s', got %d", want, r);
	cr_expect(strstr(err.msg, want) != NULL, "'%s' not in: %s", want, err.msg);
	cr_expect(err.offset != FSG_NO_OFFSET && err.offset < b->n, "offset %llu: %s",
		  (unsigned long long)err.offset, err.msg);
	cr_expect(strstr(err.msg, "(at byte ") != NULL, "%s", err.msg);
}

static void patch(struct bb *b, const char *m, uint64_t v, unsigned bytes)
{
	tu_put_le(b->p + at(b, m), v, bytes);
}

/* Break the base built with `extra` at mark m + off (v, `bytes` wide). */
#define CASE(extra, m, off, v, bytes, want)                   \
	do {                                                  \
		struct bb b;                                  \
		build(&b, extra);                             \
		tu_put_le(b.p + at(&b, m) + (off), v, bytes); \
		expect_bad(&b, want);                         \
		free(b.p);                                    \
	} while (0)

/* The base built with `extra`, unbroken otherwise. */
#define CASE0(extra, want)            \
	do {                          \
		struct bb b;          \
		build(&b, extra);     \
		expect_bad(&b, want); \
		free(b.p);            \
	} while (0)

Test(corrupt, the_base_is_valid)
{
	struct bb b;
	struct fsg_file f;
	struct fsg_err err;
	build(&b, X_NONE);
	cr_assert_eq(fsg_parse(&f, b.p, b.n, b.n, &err), 0, "%s", err.msg);
	cr_expect_eq(f.n_tensors, 2u);
	cr_expect_eq(f.t[1].off, at(&b, "data") + 32);
	fsg_close(&f);
	free(b.p);
}

Test(corrupt, truncated_anywhere)
{
	struct bb b;
	build(&b, X_NONE);
	size_t data_end = at(&b, "data") + 100; /* what follows is padding */
	for (size_t cut = 0; cut < data_end; cut++) {
		struct fsg_err err;
		int r = parse(&b, cut, &err);
		cr_assert_eq(r, -EBADMSG, "cut at %zu: %d", cut, r);
		cr_assert(err.msg[0], "cut at %zu: no message", cut);
		cr_assert(strstr(err.msg, "truncated") || strstr(err.msg, "past the end") ||
				  strstr(err.msg, "ends before") || strstr(err.msg, "cannot fit"),
			  "cut at %zu: %s", cut, err.msg);
	}
	cr_expect_eq(parse(&b, data_end, &(struct fsg_err){0}), 0, "a file may end with the last tensor");
	free(b.p);
}

Test(corrupt, header)
{
	CASE(X_NONE, "magic", 0, 0x47554747, 4, "magic: not a GGUF file");
	CASE(X_NONE, "version", 0, 1, 4, "GGUF version 1");
	CASE(X_NONE, "version", 0, 4, 4, "version: 4");
	CASE(X_NONE, "version", 0, 0x03000000, 4, "big-endian");
	CASE(X_NONE, "n_tensors", 0, 1ull << 60, 8, "tensor_count");
	CASE(X_NONE, "n_kv", 0, 1ull << 60, 8, "kv_count");
	CASE(X_NONE, "n_kv", 0, UINT64_MAX, 8, "kv_count");
}

Test(corrupt, huge_counts_inside)
{
	CASE(X_NONE, "arrn", 0, 1ull << 61, 8, "array of");
	CASE(X_NONE, "arrn", 0, UINT64_MAX, 8, "array of");
	/* One more tensor than there is: the next info is read from the data. */
	struct bb b;
	struct fsg_err err;
	build(&b, X_NONE);
	patch(&b, "n_tensors", 3, 8);
	cr_expect_eq(parse(&b, b.n, &err), -EBADMSG);
	free(b.p);
}

Test(corrupt, bad_strings)
{
	CASE(X_NONE, "k0len", 0, 1ull << 62, 8, "string length");
	CASE(X_NONE, "k0len", 0, UINT64_MAX, 8, "string length");
	CASE(X_NONE, "k0len", 0, 0, 8, "key: empty");
	CASE(X_NONE, "k0len", 8 + 3, 0, 1, "not valid UTF-8");    /* a NUL in the key */
	CASE(X_NONE, "k0len", 8 + 3, 0xff, 1, "not valid UTF-8"); /* not UTF-8 */
	CASE(X_NONE, "k0len", 8 + 3, 0xc0, 1, "not valid UTF-8"); /* an overlong lead byte */
	CASE(X_NONE, "t0", 8, 0xe0, 1, "name: not valid UTF-8");
	CASE(X_NONE, "t0", 0, 0, 8, "name: empty");
	CASE(X_NONE, "t0", 0, 1ull << 40, 8, "string length");
	CASE0(X_LONG_NAME, "63 bytes at most");
}

Test(corrupt, bad_values)
{
	CASE(X_NONE, "k0type", 0, 13, 4, "value type 13");
	CASE(X_NONE, "k0type", 0, 0xffffffff, 4, "not a GGUF value type");
	CASE(X_NONE, "arrelem", 0, 99, 4, "array element type 99");
	CASE(X_NONE, "bool", 0, 2, 1, "neither 0 nor 1");
	CASE0(X_DEEP, "nested more than 8");
	CASE0(X_DUP_KEY, "'test.bool': the key appears twice");
}

Test(corrupt, bad_alignment)
{
	CASE(X_NONE, "align", 0, 0, 4, "general.alignment: 0 is not a power of two");
	CASE(X_NONE, "align", 0, 3, 4, "general.alignment: 3");
	CASE(X_NONE, "align", 0, 48, 4, "general.alignment: 48");
	CASE(X_NONE, "align", 0, 1u << 31, 4, "general.alignment");
	CASE0(X_ALIGN_U64, "general.alignment: has type u64, must be u32");
	CASE(X_NONE, "t1off", 0, 16, 8, "offset: 16 is not a multiple of general.alignment 32");
}

Test(corrupt, bad_tensor_infos)
{
	CASE(X_NONE, "t0nd", 0, 0, 4, "n_dims: 0");
	CASE(X_NONE, "t0nd", 0, 5, 4, "n_dims: 5");
	CASE(X_NONE, "t0type", 0, 99, 4, "type: 99 (unknown)");
	CASE(X_NONE, "t0type", 0, 31, 4, "Q4_0_4_4 (removed)");
	CASE(X_NONE, "t1ne0", 0, 33, 8, "ne[0] = 33 is not a multiple of Q8_0's block of 32");
	CASE(X_NONE, "t1ne1", 0, 1ull << 62, 8, "overflows");
	CASE(X_NONE, "t1ne0", 0, 1ull << 63, 8, "overflows");
}

Test(corrupt, overlapping_or_outside_tensors)
{
	CASE(X_NONE, "t1off", 0, 0, 8, "'tb': data [0, 68) overlaps tensor 'ta' [0, 32)");
	CASE(X_NONE, "t1off", 0, 1ull << 40, 8, "run past the end of the file");
	CASE(X_NONE, "t1off", 0, 0xffffffffffffffe0ull, 8, "run past the end of the file");
	CASE(X_NONE, "t1ne1", 0, 1000, 8, "run past the end of the file");
	CASE(X_NONE, "t1", 9, 'a', 1, "'ta': the name appears twice");
}

/* Random damage to valid files: an error or a success, never a crash, and
 * what parses can be planned. */
Test(corrupt, random_damage, .timeout = 120)
{
	char dir[64], path[128];
	struct fsgw_fixture fx[16];
	unsigned n = fsgw_fixtures(fx, 16);
	tu_tmpdir(dir, sizeof(dir));
	uint64_t s = 0x1234567;
	unsigned ok = 0, bad = 0;
	for (unsigned k = 0; k < n; k++) {
		tu_model(dir, fx[k].file, &fx[k].m, path, sizeof(path));
		size_t len;
		uint8_t *orig = tu_slurp(path, &len);
		struct fsg_file f;
		struct fsg_err err;
		cr_assert_eq(fsg_parse(&f, orig, len, len, &err), 0);
		size_t head = (size_t)f.info_end + 64;
		fsg_close(&f);
		uint8_t *b = malloc(len);
		for (int it = 0; it < 300; it++) {
			memcpy(b, orig, len);
			int flips = 1 + (int)(s % 4);
			for (int j = 0; j < flips; j++) {
				s = s * 6364136223846793005ull + 1442695040888963407ull;
				b[(s >> 20) % head] ^= (uint8_t)(1u << ((s >> 8) % 8));
			}
			size_t l = (s >> 40) % 5 == 0 ? (size_t)((s >> 12) % len) : len;
			int r = fsg_parse(&f, b, l, l, &err);
			cr_assert(r == 0 || r == -EBADMSG, "%s iteration %d: %d", fx[k].file, it, r);
			if (r == 0) {
				struct fsg_plan p;
				int q = fsg_plan_build(&f, &p, &err);
				cr_assert(q == 0 || q == -EBADMSG, "plan: %d", q);
				if (q == 0)
					fsg_plan_free(&p);
				ok++;
			} else {
				cr_assert(err.msg[0]);
				bad++;
			}
			fsg_close(&f);
		}
		free(b);
		free(orig);
	}
	cr_log_info("random damage: %u parsed, %u refused", ok, bad);
	cr_expect_gt(bad, 0u);
	tu_rmdir(dir);
}
