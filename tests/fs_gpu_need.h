/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_gpu_need(n): may a GPU test run here?  One rule for every GPU test and
 * GPU smoke (tests skip only where no device exists, and fail on a broken
 * one):
 *   - cudaGetDeviceCount succeeds with >= n devices: run (returns 0);
 *   - no device (cudaErrorNoDevice, or success with fewer than n), or no
 *     driver at all (the runtime cannot load libcuda.so.1 and no
 *     /proc/driver/nvidia exists): skip (returns 77, prints a SKIP line);
 *   - any other error (a driver too old, a device that fails to initialise,
 *     libcuda present but unusable): fail (returns 1, prints FAIL).
 * FS_REQUIRE_GPU=N (the GPU machine's scripts set it) promises N devices:
 * a skip of a test needing n <= N devices becomes a failure.  A test that
 * needs more devices than promised (the 2-card peer test on a 1-GPU run
 * with FS_REQUIRE_GPU=1) still skips.
 *
 * Call it in a process that will not fork a CUDA user afterwards (the
 * runtime does not survive fork): inside a criterion test (each runs in its
 * own worker) or at the top of a bench's main.  In criterion tests use
 * FS_GPU_NEED(n), which turns 77 into cr_skip_test (the binary then exits 77
 * through tests/fs_skip_report.c) and 1 into a failed assertion.
 */
#ifndef FS_GPU_NEED_H
#define FS_GPU_NEED_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

static inline int fs_gpu_no_driver(void)
{
	if (access("/proc/driver/nvidia/version", F_OK) == 0)
		return 0;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h) {
		dlclose(h);
		return 0;
	}
	return 1;
}

/* 0: run; 77: skip (why filled); 1: fail (why filled). */
static inline int fs_gpu_need_why(int need, char *why, size_t len)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	int skip;
	if (e == cudaSuccess && n >= need)
		return 0;
	if (e == cudaSuccess || e == cudaErrorNoDevice) {
		skip = 1;
		snprintf(why, len, "needs %d CUDA device%s, found %d", need, need > 1 ? "s" : "",
			 e == cudaSuccess ? n : 0);
	} else if (e == cudaErrorInsufficientDriver && fs_gpu_no_driver()) {
		skip = 1;
		snprintf(why, len, "no CUDA driver (no libcuda.so.1, no /proc/driver/nvidia)");
	} else {
		snprintf(why, len, "cudaGetDeviceCount: %s (%d): a broken GPU machine, not a missing one",
			 cudaGetErrorString(e), (int)e);
		return 1;
	}
	const char *req = getenv("FS_REQUIRE_GPU");
	int promised = req && *req ? atoi(req) : 0;
	if (skip && promised >= need) {
		size_t l = strlen(why);
		snprintf(why + l, len - l, " (FS_REQUIRE_GPU=%d: a skip is a failure)", promised);
		return 1;
	}
	return 77;
}

static inline int fs_gpu_need_print(int need, const char *what)
{
	char why[256];
	int rc = fs_gpu_need_why(need, why, sizeof(why));
	if (rc == 77)
		printf("SKIP: %s: %s\n", what, why);
	else if (rc)
		fprintf(stderr, "FAIL: %s: %s\n", what, why);
	fflush(stdout);
	return rc;
}

#ifdef FS_GPU_NEED_CRITERION
#include <criterion/criterion.h>
#define FS_GPU_NEED(n)                                                 \
	do {                                                           \
		char why_[256];                                        \
		int rc_ = fs_gpu_need_why((n), why_, sizeof(why_));    \
		if (rc_ == 77)                                         \
			cr_skip_test("%s", why_);                      \
		cr_assert_eq(rc_, 0, "GPU test cannot run: %s", why_); \
	} while (0)
#endif

#endif
