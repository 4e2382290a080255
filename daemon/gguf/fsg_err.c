/* SPDX-License-Identifier: Apache-2.0 */
#include "fsg_err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void vfill(struct fsg_err *e, uint64_t offset, const char *fmt, va_list ap)
{
	e->offset = offset;
	int n = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	if (n < 0)
		n = 0;
	size_t len = (size_t)n < sizeof(e->msg) ? (size_t)n : sizeof(e->msg) - 1;
	if (offset != FSG_NO_OFFSET)
		snprintf(e->msg + len, sizeof(e->msg) - len, " (at byte %llu)", (unsigned long long)offset);
}

int fsg_fail(struct fsg_err *e, uint64_t offset, const char *fmt, ...)
{
	if (e) {
		va_list ap;
		va_start(ap, fmt);
		vfill(e, offset, fmt, ap);
		va_end(ap);
	}
	return -EBADMSG;
}

int fsg_fail_errno(struct fsg_err *e, int neg_errno, const char *fmt, ...)
{
	if (e) {
		va_list ap;
		va_start(ap, fmt);
		vfill(e, FSG_NO_OFFSET, fmt, ap);
		va_end(ap);
	}
	return neg_errno;
}
