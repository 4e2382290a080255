/* SPDX-License-Identifier: Apache-2.0 */
/* fs_hex.h: bytes <-> lower-case hex, for tokens and IPC handles in JSON. */
#ifndef FS_HEX_H
#define FS_HEX_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* out must hold 2 * n + 1 chars. */
static inline void fs_hex_encode(const void *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const uint8_t *b = (const uint8_t *)in;
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = 0;
}

static inline int fs_hex_nibble(char c)
{
	return c >= '0' && c <= '9' ? c - '0' :
	       c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 :
				      -1;
}

/* Exactly 2 * n hex digits into n bytes: 0, or -1 (nothing trusted). */
static inline int fs_hex_decode(const char *s, void *out, size_t n)
{
	if (!s || strlen(s) != 2 * n)
		return -1;
	uint8_t *b = (uint8_t *)out;
	for (size_t i = 0; i < n; i++) {
		int hi = fs_hex_nibble(s[2 * i]), lo = fs_hex_nibble(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		b[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

#endif /* FS_HEX_H */
