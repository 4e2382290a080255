/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_trace_bin.c: the compact binary trace (.fstrace), so that replays do
 * not re-parse megabytes of CSV.  All integers little-endian.
 *
 *   off  size  field
 *     0     8  magic "FSTRACE\n" (the newline catches text-mode mangling)
 *     8     4  version (1)
 *    12     4  header_bytes (256; a reader skips what it does not know)
 *    16     4  layers
 *    20     4  experts
 *    24     4  topk
 *    28     4  tokens (decode)
 *    32     4  prefill_tokens
 *    36     4  reserved, 0
 *    40     8  seed (synthetic traces; else 0)
 *    48   128  model, NUL-padded
 *   176    32  arch, NUL-padded
 *   208    48  reserved, 0
 *   256        uint64 expert_bytes[layers]
 *              uint16 decode[tokens][layers][topk]
 *              uint16 prefill[prefill_tokens][layers][topk] (0xffff: none)
 *   end-8   8  FNV-1a 64 of every byte before it
 *
 * The reader trusts nothing: the size implied by the header must equal the
 * file's size before anything is allocated, the checksum must match, and
 * every expert is bounds-checked.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_trace.h"
#include "fs_trace_int.h"

#define BIN_MAGIC "FSTRACE\n"
#define BIN_VERSION 1u
#define BIN_HEADER 256u
#define BIN_HEADER_MAX 65536u

/* FNV-1a 64, the same function as the arena's checksum (fs_arena.h); kept
 * here so that the trace library needs nothing from proto/. */
static uint64_t fnv1a64(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* Bytes of the body (after the header, before the checksum); 0 on overflow. */
static uint64_t body_bytes(uint64_t layers, uint64_t topk, uint64_t tokens, uint64_t prefill)
{
	/* layers <= 4096 and topk <= 64 keep every product below 2^63. */
	return 8 * layers + 2 * (tokens + prefill) * layers * topk;
}

int fs_trace_write_bin(const struct fs_trace *t, const char *path, char *err, size_t errlen)
{
	uint64_t body = body_bytes(t->layers, t->topk, t->tokens, t->prefill_tokens);
	size_t total = BIN_HEADER + (size_t)body + 8;
	unsigned char *buf = calloc(1, total);
	if (!buf)
		return fs_trace_fail(err, errlen, -ENOMEM, "%s: out of memory (%zu bytes)", path, total);

	unsigned char *h = buf;
	memcpy(h, BIN_MAGIC, 8);
	put32(h + 8, BIN_VERSION);
	put32(h + 12, BIN_HEADER);
	put32(h + 16, t->layers);
	put32(h + 20, t->experts);
	put32(h + 24, t->topk);
	put32(h + 28, t->tokens);
	put32(h + 32, t->prefill_tokens);
	put64(h + 40, t->seed);
	memcpy(h + 48, t->model, strnlen(t->model, 127));
	memcpy(h + 176, t->arch, strnlen(t->arch, 31));

	unsigned char *p = buf + BIN_HEADER;
	for (uint32_t l = 0; l < t->layers; l++, p += 8)
		put64(p, t->expert_bytes[l]);
	size_t nd = (size_t)t->tokens * t->layers * t->topk,
	       np = (size_t)t->prefill_tokens * t->layers * t->topk;
	for (size_t i = 0; i < nd; i++, p += 2)
		p[0] = (unsigned char)t->decode[i], p[1] = (unsigned char)(t->decode[i] >> 8);
	for (size_t i = 0; i < np; i++, p += 2)
		p[0] = (unsigned char)t->prefill[i], p[1] = (unsigned char)(t->prefill[i] >> 8);
	put64(p, fnv1a64(buf, total - 8));

	int rc = 0;
	FILE *f = fopen(path, "wb");
	if (!f)
		rc = fs_trace_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
	else {
		size_t w = fwrite(buf, 1, total, f);
		int e = (w != total || fflush(f)) ? errno : 0;
		if (fclose(f) && !e)
			e = errno;
		if (w != total || e)
			rc = fs_trace_fail(err, errlen, -(e ? e : EIO), "%s: write failed: %s", path,
					   strerror(e ? e : EIO));
	}
	free(buf);
	return rc;
}

/* Read the whole file, refusing anything above `limit` bytes. */
static int slurp(const char *path, uint64_t limit, unsigned char **out, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return fs_trace_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
	int rc = 0;
	long size = -1;
	if (fseek(f, 0, SEEK_END) == 0)
		size = ftell(f);
	if (size < 0 || fseek(f, 0, SEEK_SET) != 0)
		rc = fs_trace_fail(err, errlen, -EIO, "%s: cannot size the file", path);
	else if ((uint64_t)size > limit)
		rc = fs_trace_fail(err, errlen, -EINVAL, "%s: %ld bytes, the header implies %llu", path, size,
				   (unsigned long long)limit);
	unsigned char *buf = NULL;
	if (!rc && !(buf = malloc((size_t)size + 1)))
		rc = fs_trace_fail(err, errlen, -ENOMEM, "%s: out of memory", path);
	if (!rc && fread(buf, 1, (size_t)size, f) != (size_t)size)
		rc = fs_trace_fail(err, errlen, -EIO, "%s: short read", path);
	fclose(f);
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	*len = (size_t)size;
	return 0;
}

/* The fixed header, validated; returns the total size it implies. */
static int read_header(const char *path, char *err, size_t errlen, uint32_t dims[5], uint32_t *hdr,
		       uint64_t *total)
{
	unsigned char h[BIN_HEADER];
	FILE *f = fopen(path, "rb");
	if (!f)
		return fs_trace_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
	size_t n = fread(h, 1, sizeof(h), f);
	fclose(f);
	if (n < 16 || memcmp(h, BIN_MAGIC, 8) != 0)
		return fs_trace_fail(err, errlen, -EINVAL, "%s: not an .fstrace file (bad magic)", path);
	if (get32(h + 8) != BIN_VERSION)
		return fs_trace_fail(err, errlen, -EINVAL, "%s: .fstrace version %u, this reader knows %u",
				     path, get32(h + 8), BIN_VERSION);
	*hdr = get32(h + 12);
	if (n < BIN_HEADER || *hdr < BIN_HEADER || *hdr > BIN_HEADER_MAX)
		return fs_trace_fail(err, errlen, -EINVAL, "%s: truncated or bad header (%zu bytes, says %u)",
				     path, n, *hdr);
	for (int i = 0; i < 5; i++)
		dims[i] = get32(h + 16 + 4 * i);
	const char *msg;
	if (fs_trace_check_dims(dims[0], dims[1], dims[2], &msg))
		return fs_trace_fail(err, errlen, -EINVAL, "%s: %u layers x %u experts, top-%u: %s", path,
				     dims[0], dims[1], dims[2], msg);
	if (!dims[3])
		return fs_trace_fail(err, errlen, -EINVAL, "%s: no decode tokens", path);
	*total = *hdr + body_bytes(dims[0], dims[2], dims[3], dims[4]) + 8;
	return 0;
}

/* Every expert in range; decode cells complete and without repeats. */
static int check_experts(const struct fs_trace *t, const char *path, char *err, size_t errlen)
{
	for (uint32_t tok = 0; tok < t->tokens; tok++)
		for (uint32_t l = 0; l < t->layers; l++) {
			const uint16_t *e = fs_trace_token(t, tok, l);
			for (uint32_t k = 0; k < t->topk; k++) {
				if (e[k] >= t->experts)
					return fs_trace_fail(
						err, errlen, -EINVAL,
						"%s: decode token %u layer %u: expert %u out of range (%u)",
						path, tok, l, e[k], t->experts);
				for (uint32_t j = 0; j < k; j++)
					if (e[j] == e[k])
						return fs_trace_fail(
							err, errlen, -EINVAL,
							"%s: decode token %u layer %u: expert %u twice", path,
							tok, l, e[k]);
			}
		}
	size_t np = (size_t)t->prefill_tokens * t->layers * t->topk;
	for (size_t i = 0; i < np; i++)
		if (t->prefill[i] >= t->experts && t->prefill[i] != FS_TRACE_NONE)
			return fs_trace_fail(err, errlen, -EINVAL,
					     "%s: prefill entry %zu: expert %u out of range", path, i,
					     t->prefill[i]);
	return 0;
}

int fs_trace_read_bin(struct fs_trace *t, const char *path, char *err, size_t errlen)
{
	/* initialised: the compiler cannot see that failures return < 0 */
	uint32_t d[5] = {0}, hdr = 0;
	uint64_t total = 0;
	memset(t, 0, sizeof(*t));
	int rc = read_header(path, err, errlen, d, &hdr, &total);
	if (rc)
		return rc;
	unsigned char *buf = NULL;
	size_t len = 0;
	if ((rc = slurp(path, total, &buf, &len, err, errlen)))
		return rc;
	if (len != total) {
		free(buf);
		return fs_trace_fail(err, errlen, -EINVAL,
				     "%s: %zu bytes, the header implies %llu (truncated?)", path, len,
				     (unsigned long long)total);
	}
	if (get64(buf + len - 8) != fnv1a64(buf, len - 8)) {
		free(buf);
		return fs_trace_fail(err, errlen, -EINVAL, "%s: checksum mismatch (corrupt file)", path);
	}
	if ((rc = fs_trace_alloc(t, d[0], d[1], d[2], d[3], d[4]))) {
		free(buf);
		return fs_trace_fail(err, errlen, rc, "%s: cannot hold the trace", path);
	}
	t->seed = get64(buf + 40);
	memcpy(t->model, buf + 48, 127);
	memcpy(t->arch, buf + 176, 31);
	const unsigned char *p = buf + hdr;
	for (uint32_t l = 0; l < t->layers; l++, p += 8)
		t->expert_bytes[l] = get64(p);
	size_t nd = (size_t)t->tokens * t->layers * t->topk,
	       np = (size_t)t->prefill_tokens * t->layers * t->topk;
	for (size_t i = 0; i < nd; i++, p += 2)
		t->decode[i] = (uint16_t)(p[0] | p[1] << 8);
	for (size_t i = 0; i < np; i++, p += 2)
		t->prefill[i] = (uint16_t)(p[0] | p[1] << 8);
	free(buf);
	if ((rc = check_experts(t, path, err, errlen)))
		fs_trace_free(t);
	return rc;
}
