/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU tests of the CUDA backend: a real foresightd --backend cuda and real
 * engine processes.  Where no GPU exists every test prints a skip line.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define FS_GPU_NEED_CRITERION
#include "fs_gpu_need.h"
#include "fs_harness.h"

/* Skips only where no device exists; fails on a broken one (fs_gpu_need.h). */
static void need_gpu(void)
{
	FS_GPU_NEED(1);
}

/* 12 slots per layer: the auto sizes give no recency or predicted tier
 * under 16 (daemon/residency/fsr_core.c), and this test wants the churn of
 * copies for misses, so it names one slot of each (as before session 8). */
static const char *const small_pool[] = {"--backend",
					 "cuda",
					 "--slots",
					 "96",
					 "--layers",
					 "8",
					 "--experts",
					 "64",
					 "--expert-bytes",
					 "65536",
					 "--publish-us",
					 "0",
					 "--recency-slots",
					 "1",
					 "--predicted-slots",
					 "1",
					 NULL};

static int landings(const char *path, unsigned long *n, unsigned long *bad)
{
	char txt[512];
	if (fsh_read_file(path, txt, sizeof(txt)) < 0)
		return -1;
	const char *p = strstr(txt, "landings ");
	unsigned long kc = 0, kb = 0;
	return p &&
			       sscanf(p,
				      "landings %lu mismatches %lu kernel_checks %lu kernel_mismatches %lu",
				      n, bad, &kc, &kb) == 4 &&
			       kb == 0 ?
		       0 :
		       -1;
}

Test(gpu, two_engines_check_landings_under_churn, .timeout = 240)
{
	need_gpu();
	struct fsh_daemon d;
	cr_assert_eq(fsh_daemon_start(&d, small_pool), 0, "foresightd --backend cuda did not start");
	char o1[256], o2[256];
	snprintf(o1, sizeof(o1), "%s/a.out", d.dir);
	snprintf(o2, sizeof(o2), "%s/b.out", d.dir);
	char *a1[] = {(char *)FS_GPU_CHECK_BIN, (char *)"integrity", d.sock,
		      (char *)"50000",          (char *)"120",       NULL};
	char *a2[] = {(char *)FS_GPU_CHECK_BIN, (char *)"integrity", d.sock,
		      (char *)"50000",          (char *)"120",       NULL};
	pid_t p1 = fsh_spawn(a1, o1), p2 = fsh_spawn(a2, o2);
	cr_expect_eq(fsh_wait(p1, 200000), 0);
	cr_expect_eq(fsh_wait(p2, 200000), 0);
	unsigned long n1 = 0, b1 = 1, n2 = 0, b2 = 1;
	cr_assert_eq(landings(o1, &n1, &b1), 0);
	cr_assert_eq(landings(o2, &n2, &b2), 0);
	printf("gpu integrity: %lu + %lu landings checked, %lu mismatches\n", n1, n2, b1 + b2);
	cr_expect_eq(b1 + b2, 0);
	cr_expect_geq(n1 + n2, 100000);
	cr_expect_eq(fsh_daemon_stop(&d), 0);
}

Test(gpu, engine_killed_mid_run_and_daemon_stop_under_engines, .timeout = 120)
{
	need_gpu();
	struct fsh_daemon d;
	cr_assert_eq(fsh_daemon_start(&d, small_pool), 0);
	char o1[256], o2[256];
	snprintf(o1, sizeof(o1), "%s/a.out", d.dir);
	snprintf(o2, sizeof(o2), "%s/b.out", d.dir);
	char *a1[] = {(char *)FS_GPU_CHECK_BIN, (char *)"integrity", d.sock,
		      (char *)"100000000",      (char *)"30",        NULL};
	char *a2[] = {(char *)FS_GPU_CHECK_BIN, (char *)"integrity", d.sock,
		      (char *)"100000000",      (char *)"4",         NULL};
	pid_t victim = fsh_spawn(a1, o1), survivor = fsh_spawn(a2, o2);
	sleep(1);
	kill(victim, SIGKILL);
	waitpid(victim, NULL, 0);
	sleep(1);
	/* Stop the daemon while the survivor holds IPC handles and epochs: it
	 * must fall back to the CPU path and finish without a mismatch. */
	kill(d.pid, SIGTERM);
	cr_expect_eq(fsh_wait(d.pid, 20000), 0, "foresightd did not stop cleanly");
	d.pid = 0;
	cr_expect_eq(fsh_wait(survivor, 60000), 0, "the engine failed after the daemon left");
	unsigned long n = 0, b = 1;
	cr_assert_eq(landings(o2, &n, &b), 0);
	cr_expect_eq(b, 0);
	cr_expect_gt(n, 0);
	fsh_daemon_stop(&d);
}
