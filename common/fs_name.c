/* SPDX-License-Identifier: Apache-2.0 */
/* fs_name.c: client names reduced to printable ASCII (fs_name.h). */
#include "fs_name.h"

#include <string.h>

size_t fs_name_safe(char *dst, size_t cap, const char *src)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)(src ? src : "");
	size_t o = 0, changed = 0;
	if (cap == 0)
		return strlen((const char *)s);
	for (; *s; s++) {
		int plain = fs_name_plain(*s);
		size_t n = plain ? 1 : 4;
		if (o + n > cap - 1) {
			changed += strlen((const char *)s); /* cut: an escape is never split */
			break;
		}
		if (plain) {
			dst[o] = (char)*s;
		} else {
			dst[o] = '\\';
			dst[o + 1] = 'x';
			dst[o + 2] = hex[*s >> 4];
			dst[o + 3] = hex[*s & 15];
			changed++;
		}
		o += n;
	}
	size_t k = 0;
	while (k < o && dst[k] == ' ')
		k++;
	if (k == o) { /* empty or only spaces: no name */
		static const char def[] = "engine";
		o = sizeof(def) - 1 < cap - 1 ? sizeof(def) - 1 : cap - 1;
		memcpy(dst, def, o);
	}
	dst[o] = 0;
	return changed;
}
