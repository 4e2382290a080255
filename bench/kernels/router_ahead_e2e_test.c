/* SPDX-License-Identifier: Apache-2.0 */
/*
 * End to end on a GPU: foresightd --backend cuda, an engine process whose
 * router-ahead kernel posts into its device ring (fs-bench-ra e2e): the
 * records arrive in the daemon with no host thread of the engine involved,
 * and the daemon copies predicted experts.  fs-bench-ra exits non-zero when
 * a launch's records did not arrive within 200 ms or fewer records arrived
 * than were posted.  Without a GPU it prints a skip line.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#define FS_GPU_NEED_CRITERION
#include "fs_gpu_need.h"
#include "fs_harness.h"

Test(router_ahead_e2e, kernel_records_reach_the_daemon, .timeout = 180)
{
	FS_GPU_NEED(1); /* skips only where no device exists (fs_gpu_need.h) */
	static const char *const args[] = {
		"--backend",      "cuda",   "--slots",           "512", "--layers", "16", "--experts", "64",
		"--expert-bytes", "262144", "--predicted-slots", "16",  NULL};
	struct fsh_daemon d;
	cr_assert_eq(fsh_daemon_start(&d, args), 0, "foresightd --backend cuda did not start");
	char out[256], txt[4096];
	snprintf(out, sizeof(out), "%s/e2e.out", d.dir);
	char *argv[] = {(char *)FS_BENCH_RA_BIN, (char *)"e2e", d.sock, (char *)"50", NULL};
	int rc = fsh_wait(fsh_spawn(argv, out), 120000);
	fsh_read_file(out, txt, sizeof(txt));
	fprintf(stderr, "%s", txt);
	cr_assert_eq(rc, 0, "fs-bench-ra e2e failed (%d): %s", rc, txt);
	cr_assert(strstr(txt, "launch -> daemon consumed the records"), "%s", txt);
	cr_assert_eq(fsh_daemon_stop(&d), 0);
}
