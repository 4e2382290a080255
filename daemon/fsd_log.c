/* SPDX-License-Identifier: Apache-2.0 */
/* fsd_log.c: log lines on stderr with sd-daemon priority prefixes ("<6>"),
 * so journald keeps the levels and a terminal still reads well.
 *
 * One call is one line: a control byte in the formatted text (a newline,
 * a carriage return, an escape) is written as "\xNN", so nothing that
 * reached a log line (a client's name, a path, an error) can start a line
 * of its own with a priority prefix of its choosing.  Client names are made
 * safe at attach already (fs_name.h); this is the writer's own guarantee. */
#include <stdarg.h>
#include <stdio.h>

#include "fsd.h"

/* Where the level is: struct fsd's cfg.log_level (fsd.h). */
static const int *level_at;

void fsd_log_level_at(const int *level)
{
	__atomic_store_n(&level_at, level, __ATOMIC_RELEASE);
}

void fsd_log(int prio, const char *fmt, ...)
{
	const int *at = __atomic_load_n(&level_at, __ATOMIC_ACQUIRE);
	if (prio > (at ? __atomic_load_n(at, __ATOMIC_RELAXED) : FSD_INFO))
		return;
	static const char hex[] = "0123456789abcdef";
	char line[1024], out[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)line; *p && o + 5 < sizeof(out); p++) {
		if (*p >= 0x20 && *p != 0x7f) {
			out[o++] = (char)*p;
		} else if (*p == '\t') {
			out[o++] = ' ';
		} else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	out[o] = 0;
	fprintf(stderr, "<%d>foresightd: %s\n", prio, out);
}
