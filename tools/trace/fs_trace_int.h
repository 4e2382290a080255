/* SPDX-License-Identifier: Apache-2.0 */
/* fs_trace_int.h: helpers shared by the fs_trace sources (not installed). */
#ifndef FS_TRACE_INT_H
#define FS_TRACE_INT_H

#include <stddef.h>

#include "fs_trace.h"

/* Format a message into err (if any) and return code: `return fs_trace_fail(
 * err, len, -EINVAL, "...")` keeps every failure path one line. */
int fs_trace_fail(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The bounds every loader checks; msg gets what is wrong. */
int fs_trace_check_dims(uint32_t layers, uint32_t experts, uint32_t topk, const char **msg);

/* Sort a small array of experts ascending and drop repeats; returns the
 * new length. */
uint32_t fs_trace_sort_unique(uint16_t *v, uint32_t n);

#endif /* FS_TRACE_INT_H */
