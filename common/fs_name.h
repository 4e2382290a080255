/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_name.h: a name that came from a client, made safe to print.
 *
 * A client chooses its `name` at attach; the daemon puts it in log lines,
 * in `stats`/`clients` replies and in metrics, and fsctl prints those.  A
 * name with a newline and "<3>" would start a journal line of its own at
 * error priority (log forging); one with terminal escapes would rewrite an
 * operator's screen.  So a name is reduced once, at attach, to printable
 * ASCII: bytes 0x20..0x7e stay, every other byte becomes "\xNN".  The
 * result is capped without splitting an escape, and a name that is empty or
 * only spaces becomes "engine".  A safe name is its own safe form, so fsctl
 * may apply this again to whatever a daemon of any version sent.  ('\' is
 * kept as it is, for that reason: a client may name itself "a\x0a", which
 * then reads like an escape; that misleads no parser, since no byte of a
 * safe name ends a line or a field.)
 */
#ifndef FS_NAME_H
#define FS_NAME_H

#include <stddef.h>

/* Longest safe name the daemon keeps (its row holds FS_NAME_MAX + 1). */
#define FS_NAME_MAX 47

/* Write the safe form of src (NUL-terminated, any bytes; NULL is empty)
 * into dst of cap bytes (cap >= 8), always NUL-terminated.  Returns the
 * number of bytes of src that had to be escaped or were cut off (0: src
 * was printed as it is). */
size_t fs_name_safe(char *dst, size_t cap, const char *src);

/* 1 when c needs no escape in a safe name. */
static inline int fs_name_plain(unsigned char c)
{
	return c >= 0x20 && c <= 0x7e;
}

#endif /* FS_NAME_H */
