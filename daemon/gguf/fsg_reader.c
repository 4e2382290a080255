/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsg_reader.c: parse and check the head of a GGUF file (header, metadata,
 * tensor infos) and the placement of every tensor in the data section.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsg_reader.h"
#include "fsg_types.h"
#include "fsg_value.h"

/* Append one element to a growing array: memory follows what the file
 * really holds, never what a count claims. */
static int grow(void **arr, uint64_t n, uint64_t *cap, size_t elem)
{
	if (n < *cap)
		return 0;
	uint64_t nc = *cap ? *cap * 2 : 16;
	void *p = realloc(*arr, (size_t)(nc * elem));
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = nc;
	return 0;
}

/* Names must be text: valid UTF-8 without NUL (keys and tensor names are
 * printed in errors, logs and JSON). */
static int utf8_ok(const char *s, uint64_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	for (uint64_t i = 0; i < n;) {
		unsigned c = p[i], k;
		uint32_t cp;
		if (c == 0)
			return 0;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			k = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			k = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			k = 3;
			cp = c & 0x07;
		} else {
			return 0;
		}
		if (n - i <= k)
			return 0;
		for (unsigned j = 1; j <= k; j++) {
			if ((p[i + j] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (p[i + j] & 0x3f);
		}
		if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += k + 1;
	}
	return 1;
}

static int header(struct fsg_file *f, struct fsg_cur *c)
{
	const uint8_t *magic;
	int r;
	snprintf(c->ctx, sizeof(c->ctx), "header");
	if ((r = fsg_cur_bytes(c, "magic", 4, &magic)) < 0)
		return r;
	if (memcmp(magic, "GGUF", 4) != 0)
		return fsg_cur_fail(c, 0,
				    "magic: not a GGUF file (starts with %02x %02x %02x %02x, not \"GGUF\")",
				    magic[0], magic[1], magic[2], magic[3]);
	if ((r = fsg_cur_u32(c, "version", &f->version)) < 0)
		return r;
	uint32_t v = f->version, sw = __builtin_bswap32(v);
	if ((v & 0xffffu) == 0 && sw >= 1 && sw <= 3)
		return fsg_cur_fail(c, 4,
				    "version: a big-endian GGUF file (version %u byte-swapped); only "
				    "little-endian files are supported",
				    sw);
	if (v == 1)
		return fsg_cur_fail(c, 4,
				    "version: GGUF version 1 (32-bit counts) is not supported; convert the "
				    "file with a current llama.cpp");
	if (v != 2 && v != 3)
		return fsg_cur_fail(c, 4, "version: %u is not a GGUF version this reader knows (2, 3)", v);
	return 0;
}

static int keys_cmp(const void *a, const void *b)
{
	const struct fsg_kv *x = *(const struct fsg_kv *const *)a, *y = *(const struct fsg_kv *const *)b;
	uint64_t n = x->key.len < y->key.len ? x->key.len : y->key.len;
	int r = memcmp(x->key.p, y->key.p, (size_t)n);
	if (r)
		return r;
	if (x->key.len != y->key.len)
		return x->key.len < y->key.len ? -1 : 1;
	return x->at < y->at ? -1 : 1;
}

static int metadata(struct fsg_file *f, struct fsg_cur *c, uint64_t n_kv)
{
	uint64_t cap = 0;
	int r;
	for (uint64_t i = 0; i < n_kv; i++) {
		struct fsg_kv kv = {.at = c->pos};
		snprintf(c->ctx, sizeof(c->ctx), "kv %llu", (unsigned long long)i);
		if ((r = fsg_cur_str(c, "key", &kv.key)) < 0)
			return r;
		if (kv.key.len == 0 || kv.key.len > 65535 || !utf8_ok(kv.key.p, kv.key.len))
			return fsg_cur_fail(c, kv.at, "key: %s",
					    kv.key.len == 0    ? "empty" :
					    kv.key.len > 65535 ? "longer than 65535 bytes" :
								 "not valid UTF-8 text (or holds a NUL)");
		snprintf(c->ctx, sizeof(c->ctx), "kv %llu '%.*s'", (unsigned long long)i,
			 (int)(kv.key.len < 96 ? kv.key.len : 96), kv.key.p);
		uint32_t type;
		if ((r = fsg_cur_u32(c, "value type", &type)) < 0)
			return r;
		if ((r = fsg_val_decode(c, type, 0, &kv.val)) < 0)
			return r;
		if ((r = grow((void **)&f->kv, f->n_kv, &cap, sizeof(kv))) < 0)
			return r;
		f->kv[f->n_kv++] = kv;
	}
	/* Duplicate keys: which one would a reader believe? */
	if (f->n_kv > 1) {
		const struct fsg_kv **ix = malloc((size_t)f->n_kv * sizeof(*ix));
		if (!ix)
			return -ENOMEM;
		for (uint64_t i = 0; i < f->n_kv; i++)
			ix[i] = &f->kv[i];
		qsort(ix, (size_t)f->n_kv, sizeof(*ix), keys_cmp);
		for (uint64_t i = 1; i < f->n_kv; i++) {
			if (ix[i]->key.len == ix[i - 1]->key.len &&
			    memcmp(ix[i]->key.p, ix[i - 1]->key.p, (size_t)ix[i]->key.len) == 0) {
				const struct fsg_kv *d = ix[i];
				free(ix);
				c->ctx[0] = 0;
				return fsg_cur_fail(c, d->at, "kv '%.*s': the key appears twice",
						    (int)(d->key.len < 96 ? d->key.len : 96), d->key.p);
			}
		}
		free(ix);
	}
	return 0;
}

/* general.alignment: a u32 power of two (ggml refuses anything else). */
static int alignment(struct fsg_file *f, struct fsg_cur *c)
{
	const struct fsg_kv *kv = fsg_kv_find(f, "general.alignment");
	f->alignment = FSG_DEFAULT_ALIGNMENT;
	if (!kv)
		return 0;
	c->ctx[0] = 0;
	if (kv->val.type != FSG_V_U32)
		return fsg_cur_fail(c, kv->at, "general.alignment: has type %s, must be u32",
				    fsg_vtype_name(kv->val.type));
	uint32_t a = fsg_le32(f->head + kv->val.off);
	if (a == 0 || (a & (a - 1)) != 0 || a > FSG_MAX_ALIGNMENT)
		return fsg_cur_fail(c, kv->val.off, "general.alignment: %u is not a power of two in 1..2^30",
				    a);
	f->alignment = a;
	return 0;
}

static int tensor_info(struct fsg_file *f, struct fsg_cur *c, uint64_t i, struct fsg_tensor *t)
{
	struct fsg_str name;
	int r;
	memset(t, 0, sizeof(*t));
	t->at = c->pos;
	snprintf(c->ctx, sizeof(c->ctx), "tensor %llu", (unsigned long long)i);
	if ((r = fsg_cur_str(c, "name", &name)) < 0)
		return r;
	if (name.len == 0 || name.len >= FSG_MAX_NAME || !utf8_ok(name.p, name.len))
		return fsg_cur_fail(c, t->at, "name: %s",
				    name.len == 0            ? "empty" :
				    name.len >= FSG_MAX_NAME ? "63 bytes at most (GGML_MAX_NAME)" :
							       "not valid UTF-8 text (or holds a NUL)");
	memcpy(t->name, name.p, (size_t)name.len);
	snprintf(c->ctx, sizeof(c->ctx), "tensor %llu '%s'", (unsigned long long)i, t->name);
	if ((r = fsg_cur_u32(c, "n_dims", &t->n_dims)) < 0)
		return r;
	if (t->n_dims < 1 || t->n_dims > FSG_MAX_DIMS)
		return fsg_cur_fail(c, c->pos - 4, "n_dims: %u, must be 1..%u", t->n_dims, FSG_MAX_DIMS);
	uint64_t elems = 1;
	for (uint32_t d = 0; d < FSG_MAX_DIMS; d++) {
		t->ne[d] = 1;
		if (d >= t->n_dims)
			continue;
		if ((r = fsg_cur_u64(c, "ne", &t->ne[d])) < 0)
			return r;
		/* ggml keeps dimensions in int64_t: anything larger is a lie. */
		if (t->ne[d] > (uint64_t)INT64_MAX || (t->ne[d] && elems > (uint64_t)INT64_MAX / t->ne[d]))
			return fsg_cur_fail(c, c->pos - 8, "ne[%u] = %llu: the element count overflows", d,
					    (unsigned long long)t->ne[d]);
		elems *= t->ne[d];
	}
	if ((r = fsg_cur_u32(c, "type", &t->type)) < 0)
		return r;
	const struct fsg_type_info *ti = fsg_type(t->type);
	if (!ti || !ti->block)
		return fsg_cur_fail(c, c->pos - 4, "type: %u (%s) is not a ggml type this reader can size",
				    t->type, fsg_type_name(t->type));
	uint64_t row;
	r = fsg_row_bytes(t->type, t->ne[0], &row);
	if (r == -EDOM)
		return fsg_cur_fail(c, c->pos - 4,
				    "ne[0] = %llu is not a multiple of %s's block of %u elements",
				    (unsigned long long)t->ne[0], ti->name, ti->block);
	t->bytes = row;
	for (uint32_t d = 1; r == 0 && d < FSG_MAX_DIMS; d++) {
		if (t->ne[d] && t->bytes > UINT64_MAX / t->ne[d])
			r = -EOVERFLOW;
		else
			t->bytes *= t->ne[d];
	}
	if (r < 0)
		return fsg_cur_fail(c, c->pos - 4, "size: the tensor's byte count overflows");
	if ((r = fsg_cur_u64(c, "offset", &t->rel_off)) < 0)
		return r;
	if (t->rel_off % f->alignment != 0)
		return fsg_cur_fail(c, c->pos - 8, "offset: %llu is not a multiple of general.alignment %u",
				    (unsigned long long)t->rel_off, f->alignment);
	return 0;
}

static int by_offset(const void *a, const void *b)
{
	const struct fsg_tensor *x = *(const struct fsg_tensor *const *)a,
				*y = *(const struct fsg_tensor *const *)b;
	if (x->rel_off != y->rel_off)
		return x->rel_off < y->rel_off ? -1 : 1;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? -1 : 1;
	return x->at < y->at ? -1 : 1;
}

static int by_name(const void *a, const void *b)
{
	const struct fsg_tensor *x = *(const struct fsg_tensor *const *)a,
				*y = *(const struct fsg_tensor *const *)b;
	int r = strcmp(x->name, y->name);
	return r ? r : (x->at < y->at ? -1 : 1);
}

/* Every tensor inside the data section, none overlapping another, no name
 * twice. */
static int placement(struct fsg_file *f, struct fsg_cur *c)
{
	c->ctx[0] = 0;
	if (f->n_tensors == 0)
		return 0;
	/* The data section starts at the next multiple of the alignment. */
	uint64_t pad = (f->alignment - f->info_end % f->alignment) % f->alignment;
	if (pad > f->file_size - f->info_end)
		return fsg_cur_fail(c, f->info_end,
				    "data section: the file ends before the padding to %u bytes",
				    f->alignment);
	f->data_off = f->info_end + pad;
	uint64_t data = f->file_size - f->data_off;
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		struct fsg_tensor *t = &f->t[i];
		if (t->rel_off > data || data - t->rel_off < t->bytes)
			return fsg_cur_fail(
				c, t->at,
				"tensor '%s': %llu bytes at data offset %llu run past the end of the file "
				"(the data section holds %llu bytes)",
				t->name, (unsigned long long)t->bytes, (unsigned long long)t->rel_off,
				(unsigned long long)data);
		t->off = f->data_off + t->rel_off;
	}
	const struct fsg_tensor **ix = malloc((size_t)f->n_tensors * sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	for (uint64_t i = 0; i < f->n_tensors; i++)
		ix[i] = &f->t[i];
	int r = 0;
	qsort(ix, (size_t)f->n_tensors, sizeof(*ix), by_offset);
	for (uint64_t i = 1; i < f->n_tensors && r == 0; i++) {
		const struct fsg_tensor *a = ix[i - 1], *b = ix[i];
		if (a->bytes && b->bytes && a->rel_off + a->bytes > b->rel_off)
			r = fsg_cur_fail(
				c, b->at, "tensor '%s': data [%llu, %llu) overlaps tensor '%s' [%llu, %llu)",
				b->name, (unsigned long long)b->rel_off,
				(unsigned long long)(b->rel_off + b->bytes), a->name,
				(unsigned long long)a->rel_off, (unsigned long long)(a->rel_off + a->bytes));
	}
	qsort(ix, (size_t)f->n_tensors, sizeof(*ix), by_name);
	for (uint64_t i = 1; i < f->n_tensors && r == 0; i++)
		if (strcmp(ix[i - 1]->name, ix[i]->name) == 0)
			r = fsg_cur_fail(c, ix[i]->at, "tensor '%s': the name appears twice", ix[i]->name);
	free(ix);
	return r;
}

/* Parse into f, whose fd and owned buffer (fsg_open's) are kept. */
static int parse(struct fsg_file *f, const void *buf, uint64_t len, uint64_t file_size, struct fsg_err *err)
{
	struct fsg_cur c;
	uint64_t n_tensors, n_kv, cap = 0;
	int r;
	free(f->kv);
	free(f->t);
	f->kv = NULL;
	f->t = NULL;
	f->n_kv = f->n_tensors = 0;
	f->head = buf;
	f->head_len = len < file_size ? len : file_size;
	f->file_size = file_size;
	fsg_cur_init(&c, buf, len, file_size, err);
	if ((r = header(f, &c)) < 0)
		goto fail;
	if ((r = fsg_cur_u64(&c, "tensor_count", &n_tensors)) < 0 ||
	    (r = fsg_cur_u64(&c, "kv_count", &n_kv)) < 0)
		goto fail;
	/* Each kv takes >= 13 bytes (key length, type, a u8), each tensor info
	 * >= 32 (name length, a 1-byte name, n_dims, one ne, type, offset). */
	if (n_kv > fsg_cur_left(&c) / 13) {
		r = fsg_cur_fail(&c, 16, "kv_count: %llu entries cannot fit in the %llu bytes left",
				 (unsigned long long)n_kv, (unsigned long long)fsg_cur_left(&c));
		goto fail;
	}
	if (n_tensors > fsg_cur_left(&c) / 32) {
		r = fsg_cur_fail(&c, 8, "tensor_count: %llu tensors cannot fit in the %llu bytes left",
				 (unsigned long long)n_tensors, (unsigned long long)fsg_cur_left(&c));
		goto fail;
	}
	if ((r = metadata(f, &c, n_kv)) < 0 || (r = alignment(f, &c)) < 0)
		goto fail;
	for (uint64_t i = 0; i < n_tensors; i++) {
		if ((r = grow((void **)&f->t, f->n_tensors, &cap, sizeof(*f->t))) < 0)
			goto fail;
		if ((r = tensor_info(f, &c, i, &f->t[f->n_tensors])) < 0)
			goto fail;
		f->n_tensors++;
	}
	f->info_end = c.pos;
	f->data_off = c.pos;
	if ((r = placement(f, &c)) < 0)
		goto fail;
	return 0;
fail:
	if (r == -ENOMEM)
		fsg_fail_errno(err, r, "out of memory while reading the GGUF head");
	free(f->kv);
	free(f->t);
	f->kv = NULL;
	f->t = NULL;
	f->n_kv = f->n_tensors = 0;
	return r;
}

int fsg_parse(struct fsg_file *f, const void *buf, uint64_t len, uint64_t file_size, struct fsg_err *err)
{
	memset(f, 0, sizeof(*f));
	f->fd = -1;
	return parse(f, buf, len, file_size, err);
}

int fsg_open(struct fsg_file *f, const char *path, struct fsg_err *err)
{
	memset(f, 0, sizeof(*f));
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0)
		return fsg_fail_errno(err, -errno, "%s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(f->fd, &st) < 0) {
		int e = -errno;
		fsg_close(f);
		return fsg_fail_errno(err, e, "%s: %s", path, strerror(-e));
	}
	if (!S_ISREG(st.st_mode)) {
		fsg_close(f);
		return fsg_fail_errno(err, -EINVAL, "%s: not a regular file", path);
	}
	uint64_t size = (uint64_t)st.st_size;
	/* Most heads (vocabulary included) fit in a few MiB: read 4 MiB, and
	 * twice as much each time the parse says it needs more. */
	uint64_t want = 4u << 20;
	for (;;) {
		if (want > size)
			want = size;
		void *nb = realloc(f->owned, want ? (size_t)want : 1);
		if (!nb) {
			fsg_close(f);
			return fsg_fail_errno(err, -ENOMEM, "%s: out of memory for a %llu-byte head", path,
					      (unsigned long long)want);
		}
		f->owned = nb;
		uint64_t got = 0;
		while (got < want) {
			ssize_t n = pread(f->fd, (char *)nb + got, (size_t)(want - got), (off_t)got);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				int e = n < 0 ? -errno : -EIO;
				fsg_close(f);
				return fsg_fail_errno(err, e, "%s: read failed at byte %llu: %s", path,
						      (unsigned long long)got,
						      n < 0 ? strerror(-e) : "file shrank");
			}
			got += (uint64_t)n;
		}
		int r = parse(f, nb, want, size, err);
		if (r == -EAGAIN && want < size) {
			want = want > size / 2 ? size : want * 2;
			continue;
		}
		if (r < 0) {
			fsg_close(f);
			return r == -EAGAIN ? -EBADMSG : r;
		}
		return 0;
	}
}

void fsg_close(struct fsg_file *f)
{
	free(f->kv);
	free(f->t);
	free(f->owned);
	if (f->fd >= 0)
		close(f->fd);
	memset(f, 0, sizeof(*f));
	f->fd = -1;
}

const struct fsg_kv *fsg_kv_find(const struct fsg_file *f, const char *key)
{
	size_t n = strlen(key);
	for (uint64_t i = 0; i < f->n_kv; i++)
		if (f->kv[i].key.len == n && memcmp(f->kv[i].key.p, key, n) == 0)
			return &f->kv[i];
	return NULL;
}

const struct fsg_tensor *fsg_tensor_find(const struct fsg_file *f, const char *name)
{
	for (uint64_t i = 0; i < f->n_tensors; i++)
		if (strcmp(f->t[i].name, name) == 0)
			return &f->t[i];
	return NULL;
}

int fsg_get_uint(const struct fsg_file *f, const char *key, uint64_t *out)
{
	const struct fsg_kv *kv = fsg_kv_find(f, key);
	return kv ? fsg_val_uint(f, &kv->val, out) : -ENOENT;
}

int fsg_get_str(const struct fsg_file *f, const char *key, struct fsg_str *out)
{
	const struct fsg_kv *kv = fsg_kv_find(f, key);
	return kv ? fsg_val_str(f, &kv->val, out) : -ENOENT;
}
