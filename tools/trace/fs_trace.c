/* SPDX-License-Identifier: Apache-2.0 */
/* fs_trace.c: trace storage, windows, the iterator and statistics. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_trace.h"
#include "fs_trace_int.h"

int fs_trace_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

int fs_trace_check_dims(uint32_t layers, uint32_t experts, uint32_t topk, const char **msg)
{
	if (layers < 1 || layers > FS_TRACE_MAX_LAYERS)
		*msg = "layers must be 1..4096";
	else if (experts < 1 || experts > FS_TRACE_MAX_EXPERTS)
		*msg = "experts must be 1..65535";
	else if (topk < 1 || topk > FS_TRACE_MAX_TOPK || topk > experts)
		*msg = "top-k must be 1..64 and at most the number of experts";
	else
		return 0;
	return -EINVAL;
}

static int cmp_u16(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

uint32_t fs_trace_sort_unique(uint16_t *v, uint32_t n)
{
	if (n < 2)
		return n;
	qsort(v, n, sizeof(*v), cmp_u16);
	uint32_t k = 1;
	for (uint32_t i = 1; i < n; i++)
		if (v[i] != v[k - 1])
			v[k++] = v[i];
	return k;
}

/* Entries of `tokens` tokens, or 0 with errno-style failure on overflow. */
static int entries(uint32_t tokens, uint32_t layers, uint32_t topk, size_t *out)
{
	size_t per = (size_t)layers * topk;
	if (tokens && per > SIZE_MAX / sizeof(uint16_t) / tokens)
		return -ENOMEM;
	*out = per * tokens;
	return 0;
}

int fs_trace_alloc(struct fs_trace *t, uint32_t layers, uint32_t experts, uint32_t topk, uint32_t tokens,
		   uint32_t prefill_tokens)
{
	const char *msg;
	memset(t, 0, sizeof(*t));
	if (fs_trace_check_dims(layers, experts, topk, &msg))
		return -EINVAL;
	size_t nd, np;
	if (entries(tokens, layers, topk, &nd) || entries(prefill_tokens, layers, topk, &np))
		return -ENOMEM;
	t->layers = layers;
	t->experts = experts;
	t->topk = topk;
	t->tokens = tokens;
	t->prefill_tokens = prefill_tokens;
	t->expert_bytes = calloc(layers, sizeof(uint64_t));
	/* +1: a zero-token trace still gets distinct non-NULL arrays. */
	t->decode = malloc((nd + 1) * sizeof(uint16_t));
	t->prefill = malloc((np + 1) * sizeof(uint16_t));
	if (!t->expert_bytes || !t->decode || !t->prefill) {
		fs_trace_free(t);
		return -ENOMEM;
	}
	/* 0xff bytes make every uint16 FS_TRACE_NONE. */
	memset(t->decode, 0xff, (nd + 1) * sizeof(uint16_t));
	memset(t->prefill, 0xff, (np + 1) * sizeof(uint16_t));
	return 0;
}

void fs_trace_free(struct fs_trace *t)
{
	free(t->expert_bytes);
	free(t->decode);
	free(t->prefill);
	memset(t, 0, sizeof(*t));
}

int fs_trace_load(struct fs_trace *t, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return fs_trace_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
	char magic[8] = {0};
	size_t n = fread(magic, 1, sizeof(magic), f);
	fclose(f);
	if (n == sizeof(magic) && memcmp(magic, "FSTRACE\n", 8) == 0)
		return fs_trace_read_bin(t, path, err, errlen);
	return fs_trace_load_csv(t, path, err, errlen);
}

/* ---- windows ------------------------------------------------------------ */

uint32_t fs_trace_windows(const struct fs_trace *t, uint32_t tokens_per_window)
{
	if (!tokens_per_window)
		return 0;
	return (uint32_t)(((uint64_t)t->tokens + tokens_per_window - 1) / tokens_per_window);
}

int fs_trace_iter_init(struct fs_trace_iter *it, const struct fs_trace *t, uint32_t tokens_per_window)
{
	memset(it, 0, sizeof(*it));
	if (!tokens_per_window || !t->layers || !t->topk)
		return -EINVAL;
	/* A window never holds more tokens than the trace has. */
	uint32_t per = tokens_per_window < t->tokens ? tokens_per_window : (t->tokens ? t->tokens : 1);
	uint64_t cap = (uint64_t)per * t->topk;
	if (cap > UINT32_MAX)
		return -ENOMEM;
	it->t = t;
	it->tokens_per_window = tokens_per_window;
	it->n_windows = fs_trace_windows(t, tokens_per_window);
	it->cap = (uint32_t)cap;
	it->buf = malloc((size_t)t->layers * it->cap * sizeof(uint16_t));
	it->count = calloc(t->layers, sizeof(uint32_t));
	if (!it->buf || !it->count) {
		fs_trace_iter_free(it);
		return -ENOMEM;
	}
	return 0;
}

int fs_trace_iter_seek(struct fs_trace_iter *it, uint32_t w)
{
	const struct fs_trace *t = it->t;
	if (!t || w >= it->n_windows)
		return 0;
	uint64_t first = (uint64_t)w * it->tokens_per_window;
	uint64_t end = first + it->tokens_per_window;
	if (end > t->tokens)
		end = t->tokens;
	it->window = w;
	it->first_token = (uint32_t)first;
	it->n_tokens = (uint32_t)(end - first);
	it->next = w + 1;
	for (uint32_t l = 0; l < t->layers; l++) {
		uint16_t *dst = it->buf + (size_t)l * it->cap;
		uint32_t n = 0;
		for (uint32_t tok = it->first_token; tok < end; tok++) {
			memcpy(dst + n, fs_trace_token(t, tok, l), t->topk * sizeof(uint16_t));
			n += t->topk;
		}
		it->count[l] = fs_trace_sort_unique(dst, n);
	}
	return 1;
}

int fs_trace_iter_next(struct fs_trace_iter *it)
{
	return fs_trace_iter_seek(it, it->next);
}

uint32_t fs_trace_iter_experts(const struct fs_trace_iter *it, uint32_t layer, const uint16_t **experts)
{
	if (!it->t || layer >= it->t->layers) {
		*experts = NULL;
		return 0;
	}
	*experts = it->buf + (size_t)layer * it->cap;
	return it->count[layer];
}

void fs_trace_iter_free(struct fs_trace_iter *it)
{
	free(it->buf);
	free(it->count);
	memset(it, 0, sizeof(*it));
}

/* ---- statistics --------------------------------------------------------- */

static int cmp_u64_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x < y) - (x > y);
}

/* Share of a layer's uses taken by its 10 % most used experts. */
static void top_decile(const struct fs_trace *t, uint64_t *cnt, uint64_t *top, uint64_t *all)
{
	uint32_t decile = (t->experts + 9) / 10;
	for (uint32_t l = 0; l < t->layers; l++) {
		memset(cnt, 0, t->experts * sizeof(*cnt));
		for (uint32_t tok = 0; tok < t->tokens; tok++) {
			const uint16_t *e = fs_trace_token(t, tok, l);
			for (uint32_t k = 0; k < t->topk; k++)
				cnt[e[k]]++;
		}
		qsort(cnt, t->experts, sizeof(*cnt), cmp_u64_desc);
		for (uint32_t i = 0; i < t->experts; i++) {
			*all += cnt[i];
			if (i < decile)
				*top += cnt[i];
		}
	}
}

/* Experts of token tok at layer l also used by token tok-1 there. */
static uint32_t overlap(const struct fs_trace *t, uint32_t tok, uint32_t l)
{
	const uint16_t *a = fs_trace_token(t, tok, l), *b = fs_trace_token(t, tok - 1, l);
	uint32_t n = 0;
	for (uint32_t i = 0; i < t->topk; i++)
		for (uint32_t j = 0; j < t->topk; j++)
			if (a[i] == b[j]) {
				n++;
				break;
			}
	return n;
}

int fs_trace_stats(const struct fs_trace *t, uint32_t tokens_per_window, struct fs_trace_stats *out)
{
	memset(out, 0, sizeof(*out));
	struct fs_trace_iter it;
	int rc = fs_trace_iter_init(&it, t, tokens_per_window);
	if (rc)
		return rc;
	uint64_t *cnt = malloc(t->experts * sizeof(uint64_t));
	if (!cnt) {
		fs_trace_iter_free(&it);
		return -ENOMEM;
	}
	out->uses = (uint64_t)t->tokens * t->layers * t->topk;

	uint64_t same = 0;
	for (uint32_t tok = 1; tok < t->tokens; tok++)
		for (uint32_t l = 0; l < t->layers; l++)
			same += overlap(t, tok, l);
	if (t->tokens > 1)
		out->reuse = (double)same / ((double)(t->tokens - 1) * t->layers * t->topk);

	uint64_t top = 0, all = 0;
	top_decile(t, cnt, &top, &all);
	out->top_decile_share = all ? (double)top / (double)all : 0.0;

	uint64_t distinct = 0, cells = 0;
	while (fs_trace_iter_next(&it)) {
		for (uint32_t l = 0; l < t->layers; l++)
			distinct += it.count[l];
		cells += t->layers;
	}
	out->distinct_per_window = cells ? (double)distinct / (double)cells : 0.0;

	free(cnt);
	fs_trace_iter_free(&it);
	return 0;
}
