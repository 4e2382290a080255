/* SPDX-License-Identifier: Apache-2.0 */
/* fsd_log.c: log lines on stderr with sd-daemon priority prefixes ("<6>"),
 * so journald keeps the levels and a terminal still reads well. */
#include <stdarg.h>
#include <stdio.h>

#include "fsd.h"

/* Written by a reload (SIGHUP, loop thread) while any thread logs. */
int fsd_log_level = FSD_INFO;

void fsd_log(int prio, const char *fmt, ...)
{
	if (prio > __atomic_load_n(&fsd_log_level, __ATOMIC_RELAXED))
		return;
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "<%d>foresightd: %s\n", prio, line);
}
