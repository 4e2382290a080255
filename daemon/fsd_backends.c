/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_backends.c: the backends as a table, one line each, in the order of
 * FS_BACKENDS (proto/fs_regions.h), which also names them and numbers
 * their cards' kind.  A backend is its file (fsd_backend_<name>.c: a
 * struct fsd_backend) and its line here; nothing else in the daemon picks
 * one by name.
 */
#include <stdio.h>
#include <string.h>

#include "fsd.h"

#define FSD_BACKEND_OPS_host (&fsd_backend_host)
#ifdef FSD_HAVE_CUDA
#define FSD_BACKEND_OPS_cuda (&fsd_backend_cuda)
#else
#define FSD_BACKEND_OPS_cuda NULL /* needs nvcc at build time */
#endif

#define ROW(A, NAME, name) [FS_BACKEND_##NAME] = FSD_BACKEND_OPS_##name,
static const struct fsd_backend *const table[FS_N_BACKENDS] = {FS_BACKENDS(ROW, ~)};
#undef ROW

const struct fsd_backend *fsd_backend_find(const char *name, int *known)
{
	for (uint32_t k = 0; k < FS_N_BACKENDS; k++)
		if (strcmp(fs_backend_name(k), name) == 0) {
			if (known)
				*known = 1;
			return table[k];
		}
	if (known)
		*known = 0;
	return NULL;
}

void fsd_backends_list(char *buf, size_t len, int built)
{
	size_t n = 0;
	if (len)
		buf[0] = 0;
	for (uint32_t k = 0; k < FS_N_BACKENDS; k++) {
		if (built && !table[k])
			continue;
		int w = snprintf(buf + n, len > n ? len - n : 0, "%s%s", n ? ", " : "", fs_backend_name(k));
		if (w > 0)
			n += (size_t)w;
	}
}
