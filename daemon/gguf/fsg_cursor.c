/* SPDX-License-Identifier: Apache-2.0 */
#include "fsg_cursor.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void fsg_cur_init(struct fsg_cur *c, const void *buf, uint64_t len, uint64_t file_size, struct fsg_err *err)
{
	memset(c, 0, sizeof(*c));
	c->buf = buf;
	c->len = len < file_size ? len : file_size;
	c->file_size = file_size;
	c->err = err;
}

int fsg_cur_fail(struct fsg_cur *c, uint64_t at, const char *fmt, ...)
{
	char what[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (c->ctx[0])
		return fsg_fail(c->err, at, "%s: %s", c->ctx, what);
	return fsg_fail(c->err, at, "%s", what);
}

int fsg_cur_need(struct fsg_cur *c, uint64_t n, const char *field)
{
	/* pos <= len <= file_size always holds, so the subtractions cannot wrap. */
	if (n <= c->len - c->pos)
		return 0;
	if (n <= c->file_size - c->pos)
		return -EAGAIN;
	return fsg_cur_fail(c, c->pos, "%s: needs %llu bytes, the file has %llu left (truncated?)", field,
			    (unsigned long long)n, (unsigned long long)(c->file_size - c->pos));
}

int fsg_cur_u8(struct fsg_cur *c, const char *field, uint8_t *v)
{
	int r = fsg_cur_need(c, 1, field);
	if (r < 0)
		return r;
	*v = c->buf[c->pos++];
	return 0;
}

int fsg_cur_u32(struct fsg_cur *c, const char *field, uint32_t *v)
{
	int r = fsg_cur_need(c, 4, field);
	if (r < 0)
		return r;
	*v = fsg_le32(c->buf + c->pos);
	c->pos += 4;
	return 0;
}

int fsg_cur_u64(struct fsg_cur *c, const char *field, uint64_t *v)
{
	int r = fsg_cur_need(c, 8, field);
	if (r < 0)
		return r;
	*v = fsg_le64(c->buf + c->pos);
	c->pos += 8;
	return 0;
}

int fsg_cur_bytes(struct fsg_cur *c, const char *field, uint64_t n, const uint8_t **p)
{
	int r = fsg_cur_need(c, n, field);
	if (r < 0)
		return r;
	*p = c->buf + c->pos;
	c->pos += n;
	return 0;
}

int fsg_cur_str(struct fsg_cur *c, const char *field, struct fsg_str *s)
{
	uint64_t at = c->pos, n;
	int r = fsg_cur_u64(c, field, &n);
	if (r < 0)
		return r;
	if (n > fsg_cur_left(c)) {
		uint64_t left = fsg_cur_left(c);
		c->pos = at;
		return fsg_cur_fail(c, at,
				    "%s: string length %llu runs past the end of the file (%llu bytes left)",
				    field, (unsigned long long)n, (unsigned long long)left);
	}
	const uint8_t *p;
	if ((r = fsg_cur_bytes(c, field, n, &p)) < 0) {
		c->pos = at;
		return r;
	}
	s->p = (const char *)p;
	s->len = n;
	return 0;
}
