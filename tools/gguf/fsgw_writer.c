/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsgw_writer.c: a GGUF writer (little-endian, versions 2 and 3) for
 * fixtures: metadata is encoded as it is added; tensor data is generated
 * while the file is written, so a multi-GB file needs no memory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsg_reader.h"
#include "fsg_types.h"
#include "fsgw.h"

void fsgw_init(struct fsgw *w, uint32_t version, uint32_t alignment, uint64_t seed)
{
	memset(w, 0, sizeof(*w));
	w->version = version;
	w->alignment = alignment ? alignment : FSG_DEFAULT_ALIGNMENT;
	w->seed = seed;
	if (alignment) {
		fsgw_key(w, "general.alignment", FSG_V_U32);
		fsgw_put_u32(w, alignment);
	}
}

void fsgw_free(struct fsgw *w)
{
	free(w->kv);
	free(w->t);
	memset(w, 0, sizeof(*w));
}

static void put(struct fsgw *w, const void *p, size_t n)
{
	if (w->oom || n == 0)
		return;
	if (w->kv_len + n > w->kv_cap) {
		size_t cap = w->kv_cap ? w->kv_cap : 4096;
		while (cap < w->kv_len + n)
			cap *= 2;
		uint8_t *b = realloc(w->kv, cap);
		if (!b) {
			w->oom = 1;
			return;
		}
		w->kv = b;
		w->kv_cap = cap;
	}
	memcpy(w->kv + w->kv_len, p, n);
	w->kv_len += n;
}

void fsgw_put_u8(struct fsgw *w, uint8_t v)
{
	put(w, &v, 1);
}

void fsgw_put_u16(struct fsgw *w, uint16_t v)
{
	uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
	put(w, b, 2);
}

void fsgw_put_u32(struct fsgw *w, uint32_t v)
{
	uint8_t b[4];
	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	put(w, b, 4);
}

void fsgw_put_u64(struct fsgw *w, uint64_t v)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	put(w, b, 8);
}

void fsgw_put_f32(struct fsgw *w, float v)
{
	uint32_t u;
	memcpy(&u, &v, 4);
	fsgw_put_u32(w, u);
}

void fsgw_put_f64(struct fsgw *w, double v)
{
	uint64_t u;
	memcpy(&u, &v, 8);
	fsgw_put_u64(w, u);
}

void fsgw_put_str(struct fsgw *w, const char *s)
{
	size_t n = strlen(s);
	fsgw_put_u64(w, n);
	put(w, s, n);
}

void fsgw_put_arr(struct fsgw *w, uint32_t elem_type, uint64_t n)
{
	fsgw_put_u32(w, elem_type);
	fsgw_put_u64(w, n);
}

void fsgw_key(struct fsgw *w, const char *key, uint32_t type)
{
	fsgw_put_str(w, key);
	fsgw_put_u32(w, type);
	w->n_kv++;
}

void fsgw_kv_u32(struct fsgw *w, const char *key, uint32_t v)
{
	fsgw_key(w, key, FSG_V_U32);
	fsgw_put_u32(w, v);
}

void fsgw_kv_str(struct fsgw *w, const char *key, const char *s)
{
	fsgw_key(w, key, FSG_V_STR);
	fsgw_put_str(w, s);
}

int fsgw_tensor(struct fsgw *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne)
{
	return fsgw_tensor_src(w, name, type, n_dims, ne, NULL, NULL);
}

int fsgw_tensor_src(struct fsgw *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne,
		    fsgw_fill_fn fill, void *ctx)
{
	if (strlen(name) >= sizeof(w->t[0].name) || n_dims < 1 || n_dims > 4) {
		snprintf(w->err, sizeof(w->err), "tensor %s: bad name or n_dims", name);
		return -1;
	}
	uint64_t bytes;
	if (fsg_row_bytes(type, ne[0], &bytes) < 0) {
		snprintf(w->err, sizeof(w->err), "tensor %s: type %s cannot hold rows of %llu", name,
			 fsg_type_name(type), (unsigned long long)ne[0]);
		return -1;
	}
	for (uint32_t d = 1; d < n_dims; d++)
		bytes *= ne[d];
	if (w->n_t == w->t_cap) {
		uint64_t cap = w->t_cap ? w->t_cap * 2 : 64;
		struct fsgw_tensor *t = realloc(w->t, (size_t)cap * sizeof(*t));
		if (!t) {
			snprintf(w->err, sizeof(w->err), "out of memory");
			return -1;
		}
		w->t = t;
		w->t_cap = cap;
	}
	struct fsgw_tensor *t = &w->t[w->n_t++];
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->n_dims = n_dims;
	t->type = type;
	for (uint32_t d = 0; d < 4; d++)
		t->ne[d] = d < n_dims ? ne[d] : 1;
	t->bytes = bytes;
	t->fill = fill;
	t->fill_ctx = ctx;
	t->rel_off = (w->data_bytes + w->alignment - 1) / w->alignment * w->alignment;
	w->data_bytes = t->rel_off + bytes;
	return 0;
}

static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void fsgw_fill(uint64_t seed, const char *name, uint64_t from, uint8_t *dst, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ seed;
	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	/* Counter-based: byte i is byte i%8 of mix(h + i/8), so any range can
	 * be produced on its own. */
	for (size_t i = 0; i < n;) {
		uint64_t pos = from + i, v = mix(h + (pos / 8) * 0x9e3779b97f4a7c15ull);
		unsigned k = (unsigned)(pos % 8);
		if (k == 0 && n - i >= 8) {
			memcpy(dst + i, &v, 8);
			i += 8;
			continue;
		}
		for (; k < 8 && i < n; k++, i++)
			dst[i] = (uint8_t)(v >> (8 * k));
	}
}

static int zeros(FILE *f, uint64_t n)
{
	static const uint8_t z[4096];
	while (n) {
		size_t k = n < sizeof(z) ? (size_t)n : sizeof(z);
		if (fwrite(z, 1, k, f) != k)
			return -1;
		n -= k;
	}
	return 0;
}

/* Tensor bytes are generated and written this many at a time. */
#define CHUNK ((size_t)4 << 20)

int fsgw_write(struct fsgw *w, const char *path)
{
	if (w->oom) {
		snprintf(w->err, sizeof(w->err), "out of memory building the metadata");
		return -1;
	}
	/* The head: header, metadata, tensor infos. */
	struct fsgw head;
	memset(&head, 0, sizeof(head));
	put(&head, "GGUF", 4);
	fsgw_put_u32(&head, w->version);
	fsgw_put_u64(&head, w->n_t);
	fsgw_put_u64(&head, w->n_kv);
	put(&head, w->kv, w->kv_len);
	for (uint64_t i = 0; i < w->n_t; i++) {
		const struct fsgw_tensor *t = &w->t[i];
		fsgw_put_str(&head, t->name);
		fsgw_put_u32(&head, t->n_dims);
		for (uint32_t d = 0; d < t->n_dims; d++)
			fsgw_put_u64(&head, t->ne[d]);
		fsgw_put_u32(&head, t->type);
		fsgw_put_u64(&head, t->rel_off);
	}
	FILE *f = fopen(path, "wb");
	uint8_t *buf = malloc(CHUNK);
	int rc = -1;
	if (!f || !buf || head.oom) {
		snprintf(w->err, sizeof(w->err), "%s: %s", path, f ? "out of memory" : strerror(errno));
		goto out;
	}
	uint64_t pad = (w->alignment - head.kv_len % w->alignment) % w->alignment;
	if (fwrite(head.kv, 1, head.kv_len, f) != head.kv_len || zeros(f, pad) < 0)
		goto io;
	uint64_t at = 0;
	for (uint64_t i = 0; i < w->n_t; i++) {
		const struct fsgw_tensor *t = &w->t[i];
		if (zeros(f, t->rel_off - at) < 0)
			goto io;
		for (uint64_t done = 0; done < t->bytes;) {
			size_t k = t->bytes - done < CHUNK ? (size_t)(t->bytes - done) : CHUNK;
			if (!t->fill)
				fsgw_fill(w->seed, t->name, done, buf, k);
			else if (t->fill(t->fill_ctx, t, done, buf, k) < 0) {
				snprintf(w->err, sizeof(w->err), "%s: cannot generate tensor %s", path,
					 t->name);
				goto out;
			}
			if (fwrite(buf, 1, k, f) != k)
				goto io;
			done += k;
		}
		at = t->rel_off + t->bytes;
	}
	if (fflush(f) != 0)
		goto io;
	rc = 0;
	goto out;
io:
	snprintf(w->err, sizeof(w->err), "%s: write failed: %s", path, strerror(errno));
out:
	if (f && fclose(f) != 0 && rc == 0) {
		snprintf(w->err, sizeof(w->err), "%s: %s", path, strerror(errno));
		rc = -1;
	}
	free(buf);
	fsgw_free(&head);
	return rc;
}
