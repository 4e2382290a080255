/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsg_cursor.h: a bounded little-endian cursor over the head of a GGUF
 * file.  Nothing is read without checking that it is there: a read past the
 * end of the file is an error naming the field; a read past the end of the
 * buffer of a file that goes on is reported as "need more" (-EAGAIN) so the
 * caller can read more of the file and parse again.
 */
#ifndef FSG_CURSOR_H
#define FSG_CURSOR_H

#include <stdint.h>

#include "fsg_err.h"

/* A string inside the buffer (not NUL-terminated). */
struct fsg_str {
	const char *p;
	uint64_t len;
};

struct fsg_cur {
	const uint8_t *buf;
	uint64_t len;       /* bytes of buf */
	uint64_t file_size; /* bytes of the whole file (>= len) */
	uint64_t pos;
	char ctx[160]; /* what is being read ("kv 3 'general.name'"), prefixed to errors */
	struct fsg_err *err;
};

void fsg_cur_init(struct fsg_cur *c, const void *buf, uint64_t len, uint64_t file_size, struct fsg_err *err);
/* Fail at the cursor's position (or at `at`) with the context prefixed. */
int fsg_cur_fail(struct fsg_cur *c, uint64_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Make n bytes at the cursor available: 0, -EAGAIN (more of the file is
 * needed) or -EBADMSG (the file ends first; `field` names what was read). */
int fsg_cur_need(struct fsg_cur *c, uint64_t n, const char *field);
int fsg_cur_u8(struct fsg_cur *c, const char *field, uint8_t *v);
int fsg_cur_u32(struct fsg_cur *c, const char *field, uint32_t *v);
int fsg_cur_u64(struct fsg_cur *c, const char *field, uint64_t *v);
/* n raw bytes: *p points into the buffer. */
int fsg_cur_bytes(struct fsg_cur *c, const char *field, uint64_t n, const uint8_t **p);
/* A GGUF string: u64 length, then that many bytes. */
int fsg_cur_str(struct fsg_cur *c, const char *field, struct fsg_str *s);
/* Bytes left in the file after the cursor. */
static inline uint64_t fsg_cur_left(const struct fsg_cur *c)
{
	return c->file_size - c->pos;
}

/* Little-endian loads from a buffer already checked to hold them. */
static inline uint32_t fsg_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t fsg_le64(const uint8_t *p)
{
	return (uint64_t)fsg_le32(p) | (uint64_t)fsg_le32(p + 4) << 32;
}

#endif /* FSG_CURSOR_H */
