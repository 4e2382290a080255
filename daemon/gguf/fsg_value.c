/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsg_value.c: GGUF metadata values: checking one as it is parsed (bounds,
 * element types, nesting, bools), then decoding it on demand.
 */
#include <errno.h>
#include <string.h>

#include "fsg_reader.h"
#include "fsg_value.h"

/* Encoded size of the fixed-size types; 0 for strings and arrays. */
static const uint8_t fixed_size[FSG_V_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *fsg_vtype_name(uint32_t type)
{
	static const char *const names[FSG_V_COUNT] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
						       "bool", "string", "array", "u64", "i64", "f64"};
	return type < FSG_V_COUNT ? names[type] : "unknown";
}

/* The least a value of this type can take in the file. */
static uint64_t min_size(uint32_t type)
{
	if (fixed_size[type])
		return fixed_size[type];
	return type == FSG_V_STR ? 8 : 12; /* string: its length; array: type and count */
}

int fsg_val_decode(struct fsg_cur *c, uint32_t type, unsigned depth, struct fsg_val *v)
{
	int r;
	memset(v, 0, sizeof(*v));
	v->type = type;
	v->off = c->pos;
	if (type >= FSG_V_COUNT)
		return fsg_cur_fail(c, c->pos, "value type %u is not a GGUF value type (0..12)", type);
	if (fixed_size[type]) {
		const uint8_t *p;
		if ((r = fsg_cur_bytes(c, "value", fixed_size[type], &p)) < 0)
			return r;
		if (type == FSG_V_BOOL && *p > 1)
			return fsg_cur_fail(c, v->off, "bool value %u is neither 0 nor 1", *p);
	} else if (type == FSG_V_STR) {
		struct fsg_str s;
		if ((r = fsg_cur_str(c, "string value", &s)) < 0)
			return r;
	} else {
		if (depth >= FSG_MAX_DEPTH)
			return fsg_cur_fail(c, c->pos, "arrays nested more than %u deep", FSG_MAX_DEPTH);
		uint32_t et;
		uint64_t n;
		if ((r = fsg_cur_u32(c, "array element type", &et)) < 0)
			return r;
		if (et >= FSG_V_COUNT)
			return fsg_cur_fail(c, c->pos - 4,
					    "array element type %u is not a GGUF value type (0..12)", et);
		if ((r = fsg_cur_u64(c, "array length", &n)) < 0)
			return r;
		/* Bound the count by the bytes left before doing anything n times. */
		uint64_t left = fsg_cur_left(c), least = min_size(et);
		if (n > left / least)
			return fsg_cur_fail(
				c, c->pos - 8,
				"array of %llu %s elements cannot fit in the %llu bytes left (%llu bytes "
				"each at least)",
				(unsigned long long)n, fsg_vtype_name(et), (unsigned long long)left,
				(unsigned long long)least);
		v->elem_type = et;
		v->n = n;
		v->first = c->pos;
		if (fixed_size[et]) {
			const uint8_t *p;
			if ((r = fsg_cur_bytes(c, "array elements", n * fixed_size[et], &p)) < 0)
				return r;
			for (uint64_t i = 0; et == FSG_V_BOOL && i < n; i++)
				if (p[i] > 1)
					return fsg_cur_fail(c, v->first + i,
							    "bool element %llu is %u, neither 0 nor 1",
							    (unsigned long long)i, p[i]);
		} else {
			for (uint64_t i = 0; i < n; i++) {
				struct fsg_val e;
				if ((r = fsg_val_decode(c, et, depth + 1, &e)) < 0)
					return r;
			}
		}
	}
	v->bytes = c->pos - v->off;
	return 0;
}

/* The value's bytes, which a successful parse guarantees lie in the head. */
static const uint8_t *at(const struct fsg_file *f, const struct fsg_val *v)
{
	if (v->off > f->head_len || f->head_len - v->off < v->bytes)
		return NULL;
	return f->head + v->off;
}

int fsg_val_int(const struct fsg_file *f, const struct fsg_val *v, int64_t *out)
{
	const uint8_t *p = at(f, v);
	if (!p)
		return -EINVAL;
	switch (v->type) {
	case FSG_V_U8:
		*out = p[0];
		return 0;
	case FSG_V_I8:
		*out = (int8_t)p[0];
		return 0;
	case FSG_V_U16:
		*out = (uint16_t)(p[0] | p[1] << 8);
		return 0;
	case FSG_V_I16:
		*out = (int16_t)(uint16_t)(p[0] | p[1] << 8);
		return 0;
	case FSG_V_U32:
		*out = fsg_le32(p);
		return 0;
	case FSG_V_I32:
		*out = (int32_t)fsg_le32(p);
		return 0;
	case FSG_V_U64:
		if (fsg_le64(p) > (uint64_t)INT64_MAX)
			return -EINVAL;
		*out = (int64_t)fsg_le64(p);
		return 0;
	case FSG_V_I64:
		*out = (int64_t)fsg_le64(p);
		return 0;
	default:
		return -EINVAL;
	}
}

int fsg_val_uint(const struct fsg_file *f, const struct fsg_val *v, uint64_t *out)
{
	const uint8_t *p = at(f, v);
	if (p && v->type == FSG_V_U64) {
		*out = fsg_le64(p);
		return 0;
	}
	int64_t i;
	int r = fsg_val_int(f, v, &i);
	if (r < 0 || i < 0)
		return -EINVAL;
	*out = (uint64_t)i;
	return 0;
}

int fsg_val_float(const struct fsg_file *f, const struct fsg_val *v, double *out)
{
	const uint8_t *p = at(f, v);
	if (!p)
		return -EINVAL;
	if (v->type == FSG_V_F32) {
		uint32_t u = fsg_le32(p);
		float x;
		memcpy(&x, &u, 4);
		*out = x;
		return 0;
	}
	if (v->type == FSG_V_F64) {
		uint64_t u = fsg_le64(p);
		memcpy(out, &u, 8);
		return 0;
	}
	return -EINVAL;
}

int fsg_val_bool(const struct fsg_file *f, const struct fsg_val *v, int *out)
{
	const uint8_t *p = at(f, v);
	if (!p || v->type != FSG_V_BOOL)
		return -EINVAL;
	*out = p[0] != 0;
	return 0;
}

int fsg_val_str(const struct fsg_file *f, const struct fsg_val *v, struct fsg_str *out)
{
	const uint8_t *p = at(f, v);
	if (!p || v->type != FSG_V_STR || v->bytes < 8)
		return -EINVAL;
	out->len = fsg_le64(p);
	if (out->len != v->bytes - 8)
		return -EINVAL;
	out->p = (const char *)p + 8;
	return 0;
}

int fsg_val_at(const struct fsg_file *f, const struct fsg_val *arr, uint64_t i, struct fsg_val *out)
{
	if (arr->type != FSG_V_ARR || i >= arr->n || !at(f, arr))
		return -EINVAL;
	uint32_t et = arr->elem_type;
	if (fixed_size[et]) {
		memset(out, 0, sizeof(*out));
		out->type = et;
		out->off = arr->first + i * fixed_size[et];
		out->bytes = fixed_size[et];
		return 0;
	}
	/* Strings and arrays vary in size: walk from the first element. */
	struct fsg_cur c;
	fsg_cur_init(&c, f->head, arr->off + arr->bytes, arr->off + arr->bytes, NULL);
	c.pos = arr->first;
	for (uint64_t k = 0;; k++) {
		if (fsg_val_decode(&c, et, 1, out) < 0)
			return -EINVAL;
		if (k == i)
			return 0;
	}
}
