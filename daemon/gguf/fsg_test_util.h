/* SPDX-License-Identifier: Apache-2.0 */
/* fsg_test_util.h: helpers shared by the GGUF tests (header-only). */
#ifndef FSG_TEST_UTIL_H
#define FSG_TEST_UTIL_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsgw.h"

/* A fresh directory under /tmp; removed by tu_rmdir. */
static inline void tu_tmpdir(char *dir, size_t n)
{
	snprintf(dir, n, "/tmp/fsg-test-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static inline void tu_rmdir(const char *dir)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

/* A whole file into malloc'd memory. */
static inline uint8_t *tu_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
	cr_assert_not_null(b);
	cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return b;
}

static inline void tu_spit(const char *path, const void *b, size_t n)
{
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fwrite(b, 1, n, f), n);
	cr_assert_eq(fclose(f), 0);
}

/* Write the model m into dir/name; path out. */
static inline void tu_model(const char *dir, const char *name, const struct fsgw_model *m, char *path,
			    size_t n)
{
	char err[256];
	snprintf(path, n, "%s/%s", dir, name);
	cr_assert_eq(fsgw_model_write(m, path, err, sizeof(err)), 0, "%s: %s", path, err);
}

/* The sanitizers' mlock() does nothing and succeeds: a test that needs a
 * real lock failure cannot run under them. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TU_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TU_SANITIZED 1
#endif
#endif
#ifndef TU_SANITIZED
#define TU_SANITIZED 0
#endif

static inline void tu_put_le(uint8_t *p, uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

#endif /* FSG_TEST_UTIL_H */
