/* SPDX-License-Identifier: Apache-2.0 */
/* fsd_backends_test.c: the backend table (fsd_backends.c) against the list
 * in proto (FS_BACKENDS): every backend this build has is found by its
 * row's name and carries that row's kind and name; a name not in the list
 * is no backend; the wire values of the kinds stay put. */
#include <criterion/criterion.h>
#include <string.h>

#include "fsd.h"
#include "fsd_backend.h"

Test(backends, every_row_by_name)
{
	unsigned built = 0;
	for (uint32_t k = 0; k < FS_N_BACKENDS; k++) {
		int known = 0;
		const struct fsd_backend *b = fsd_backend_find(fs_backend_name(k), &known);
		cr_assert_eq(known, 1, "%s", fs_backend_name(k));
		if (!b)
			continue; /* not built here (cuda without nvcc) */
		built++;
		cr_expect_eq(b->kind, k, "%s: kind %u", fs_backend_name(k), (unsigned)b->kind);
		cr_expect_str_eq(b->name, fs_backend_name(k));
		cr_expect_not_null(b->start);
		cr_expect_not_null(b->ops.submit);
	}
	cr_assert_geq(built, 1u, "no backend built");
	cr_assert_eq(fsd_backend_find("host", NULL), &fsd_backend_host);
#ifdef FSD_HAVE_CUDA
	cr_assert_eq(fsd_backend_find("cuda", NULL), &fsd_backend_cuda);
#else
	int known = 0;
	cr_assert_null(fsd_backend_find("cuda", &known));
	cr_assert_eq(known, 1);
#endif
}

Test(backends, unknown_names)
{
	const char *no[] = {"", "Host", "hos", "hostx", "gpu", "?"};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		int known = 1;
		cr_expect_null(fsd_backend_find(no[i], &known), "'%s'", no[i]);
		cr_expect_eq(known, 0, "'%s'", no[i]);
	}
	cr_expect_str_eq(fs_backend_name(FS_N_BACKENDS), "?");
}

Test(backends, lists)
{
	char all[64], built[64];
	fsd_backends_list(all, sizeof(all), 0);
	fsd_backends_list(built, sizeof(built), 1);
	cr_expect_str_eq(all, "host, cuda");
#ifdef FSD_HAVE_CUDA
	cr_expect_str_eq(built, "host, cuda");
#else
	cr_expect_str_eq(built, "host");
#endif
	char tiny[3];
	fsd_backends_list(tiny, sizeof(tiny), 0); /* truncated, terminated */
	cr_expect_eq(strlen(tiny), 2u);
}

/* On the wire (fs_card_desc.kind): engines built before a new backend
 * still read host as 0 and cuda as 1. */
Test(backends, wire_values)
{
	cr_expect_eq(FS_BACKEND_HOST, 0);
	cr_expect_eq(FS_BACKEND_CUDA, 1);
}
