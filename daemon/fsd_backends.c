/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_backends.c: the backends as a table, generated from FS_BACKENDS
 * (proto/fs_regions.h), which also names them and numbers their cards'
 * kind: row NAME's entry is its file's fsd_backend_<name>.  A backend this
 * build lacks is a stub without `start` (found by name, not built).
 * Nothing else in the daemon picks a backend by name or kind.
 */
#include <stdio.h>
#include <string.h>

#include "fsd.h"
#include "fsd_backend.h"

#define ROW(A, NAME, name) [FS_BACKEND_##NAME] = &fsd_backend_##name,
static const struct fsd_backend *const table[FS_N_BACKENDS] = {FS_BACKENDS(ROW, ~)};
#undef ROW

static int built(uint32_t k)
{
	return table[k]->start != NULL;
}

const struct fsd_backend *fsd_backend_find(const char *name, int *known)
{
	for (uint32_t k = 0; k < FS_N_BACKENDS; k++)
		if (strcmp(fs_backend_name(k), name) == 0) {
			if (known)
				*known = 1;
			return built(k) ? table[k] : NULL;
		}
	if (known)
		*known = 0;
	return NULL;
}

void fsd_backends_list(char *buf, size_t len, int only_built)
{
	size_t n = 0;
	if (len)
		buf[0] = 0;
	for (uint32_t k = 0; k < FS_N_BACKENDS; k++) {
		if (only_built && !built(k))
			continue;
		int w = snprintf(buf + n, len > n ? len - n : 0, "%s%s", n ? ", " : "", fs_backend_name(k));
		if (w > 0)
			n += (size_t)w;
	}
}
