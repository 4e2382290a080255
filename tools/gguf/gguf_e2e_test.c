/* SPDX-License-Identifier: Apache-2.0 */
/*
 * End to end with a GGUF model: foresightd --model FILE --describe, and
 * foresightd --model FILE serving fs-demo-engine (every expert it reads,
 * from a slot or the arena, checked against the arena's checksum), the
 * model's dimensions in `fsctl stats`, the load counters, the refusal of an
 * arena that cannot be locked.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "fs_harness.h"
#include "fsg_moe.h"
#include "fsgw.h"

static char g_dir[64];
static char g_out[1 << 18];

static void setup(void)
{
	snprintf(g_dir, sizeof(g_dir), "/tmp/fs-gguf-e2e-XXXXXX");
	cr_assert_not_null(mkdtemp(g_dir));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
	cr_expect_eq(system(cmd), 0);
}

TestSuite(gguf_e2e, .init = setup, .fini = teardown, .timeout = 180);

/* Run a shell command line, stdout (and stderr when `both`) into g_out. */
static int sh(int both, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sh(int both, const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (both)
		strncat(cmd, " 2>&1", sizeof(cmd) - strlen(cmd) - 1);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	size_t n = fread(g_out, 1, sizeof(g_out) - 1, p);
	g_out[n] = '\0';
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void fixture(const char *file, char *path, size_t n, struct fsgw_model *out)
{
	struct fsgw_fixture fx[16];
	unsigned k = fsgw_fixtures(fx, 16);
	char err[256];
	for (unsigned i = 0; i < k; i++) {
		if (strcmp(fx[i].file, file) != 0)
			continue;
		snprintf(path, n, "%s/%s", g_dir, file);
		cr_assert_eq(fsgw_model_write(&fx[i].m, path, err, sizeof(err)), 0, "%s", err);
		if (out)
			*out = fx[i].m;
		return;
	}
	cr_assert_fail("no fixture %s", file);
}

static double jnum(const cJSON *o, const char *key)
{
	return cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

/* What our own library plans for the file (the daemon must agree). */
static void plan_of(const char *path, struct fsg_file *f, struct fsg_plan *p)
{
	struct fsg_err err;
	cr_assert_eq(fsg_open(f, path, &err), 0, "%s", err.msg);
	cr_assert_eq(fsg_plan_build(f, p, &err), 0, "%s", err.msg);
}

Test(gguf_e2e, describe)
{
	char path[160];
	struct fsg_file f;
	struct fsg_plan p;
	fixture("deepseek2.gguf", path, sizeof(path), NULL);
	plan_of(path, &f, &p);
	cr_assert_eq(sh(0, "%s --model %s --describe", FS_DAEMON_BIN, path), 0, "%s", g_out);
	cJSON *j = cJSON_Parse(g_out);
	cr_assert_not_null(j, "not JSON: %s", g_out);
	cr_expect_eq(jnum(j, "layers"), p.layers);
	cr_expect_eq(jnum(j, "experts"), p.experts);
	cr_expect_eq(jnum(j, "experts_used"), p.experts_used);
	cr_expect_eq(jnum(j, "max_expert_bytes"), (double)p.max_blob);
	cr_expect_gt(jnum(j, "arena_bytes"), (double)p.member_bytes);
	const cJSON *eb = cJSON_GetObjectItem(j, "expert_bytes");
	cr_assert_eq(cJSON_GetArraySize(eb), (int)p.layers);
	for (uint32_t l = 0; l < p.layers; l++)
		cr_expect_eq(cJSON_GetNumberValue(cJSON_GetArrayItem(eb, (int)l)),
			     (double)p.layer[l].blob_bytes);
	const cJSON *left = cJSON_GetObjectItem(j, "left_out");
	cr_expect_eq(cJSON_GetArraySize(left), (int)p.nleft);
	int shexp = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, left)
		shexp += strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(it, "why")), "shared expert") == 0;
	cr_expect_eq(shexp, 3 * 3, "3 MoE layers x gate, up, down shared experts");
	cJSON_Delete(j);
	fsg_plan_free(&p);
	fsg_close(&f);
}

Test(gguf_e2e, describe_a_bad_file_fails)
{
	char path[160], bad[200];
	fixture("qwen3moe.gguf", path, sizeof(path), NULL);
	snprintf(bad, sizeof(bad), "%s/bad.gguf", g_dir);
	cr_assert_eq(sh(1, "head -c 1000 %s > %s", path, bad), 0);
	int rc = sh(1, "%s --model %s --describe", FS_DAEMON_BIN, bad);
	cr_expect_eq(rc, 1, "%s", g_out);
	cr_expect(strstr(g_out, bad) && strstr(g_out, "(at byte "), "%s", g_out);
	rc = sh(1, "%s --model %s/none.gguf --describe", FS_DAEMON_BIN, g_dir);
	cr_expect_eq(rc, 1, "%s", g_out);
	cr_expect(strstr(g_out, "No such file") != NULL, "%s", g_out);
	rc = sh(1, "%s --describe", FS_DAEMON_BIN);
	cr_expect_eq(rc, 2, "%s", g_out);
	cr_expect(strstr(g_out, "--describe needs --model") != NULL, "%s", g_out);
	/* Serving it fails the same way, before any socket exists. */
	rc = sh(1, "%s --socket %s/s.sock --model %s", FS_DAEMON_BIN, g_dir, bad);
	cr_expect_eq(rc, 1, "%s", g_out);
	cr_expect(strstr(g_out, "(at byte ") != NULL, "%s", g_out);
}

/* Serve a fixture, run the demo engine against it, compare the stats. */
static void serve(const char *file)
{
	char path[160];
	struct fsg_file f;
	struct fsg_plan p;
	struct fsh_daemon d;
	fixture(file, path, sizeof(path), NULL);
	plan_of(path, &f, &p);
	const char *extra[] = {"--model", path, "--allow-unlocked", "--slots", "16", NULL};
	cr_assert_eq(fsh_daemon_start(&d, extra), 0, "foresightd --model %s did not start", file);

	int rc = sh(1, "%s --socket %s --windows 60 --quiet", DEMO_BIN, d.sock);
	cr_expect_eq(rc, 0, "%s: %s", file, g_out);
	unsigned long long verified = 0, mismatches = 1;
	const char *v = strstr(g_out, "verified reads: ");
	cr_assert_not_null(v, "%s", g_out);
	cr_assert_eq(sscanf(v, "verified reads: %llu mismatches: %llu", &verified, &mismatches), 2);
	cr_expect_gt(verified, 0u);
	cr_expect_eq(mismatches, 0u, "%s: %s", file, g_out);

	cr_assert_eq(sh(0, "%s --socket %s stats --json", FSCTL_BIN, d.sock), 0, "%s", g_out);
	cJSON *j = cJSON_Parse(g_out);
	cr_assert_not_null(j);
	const cJSON *m = cJSON_GetObjectItem(j, "model"), *dm = cJSON_GetObjectItem(j, "daemon");
	cr_expect_eq(jnum(m, "layers"), p.layers);
	cr_expect_eq(jnum(m, "experts"), p.experts);
	cr_expect_eq(jnum(m, "experts_used"), p.experts_used);
	cr_expect_eq(jnum(m, "max_expert_bytes"), (double)p.max_blob);
	cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(m, "name")), p.name);
	cr_expect_eq(jnum(dm, "arena_loaded_bytes"), (double)p.member_bytes);
	cr_expect_eq(jnum(dm, "arena_bytes"), (double)p.member_bytes);
	cr_expect_gt(jnum(dm, "arena_load_ns"), 0);
	const cJSON *card = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "cards"), 0);
	cr_expect_eq(jnum(card, "slot_bytes"), (double)((p.max_blob + 4095) / 4096 * 4096));
	cJSON_Delete(j);
	cr_expect_eq(sh(0, "%s --socket %s stats", FSCTL_BIN, d.sock), 0);
	cr_expect(strstr(g_out, "arena_loaded_bytes") != NULL, "%s", g_out);

	long n = fsh_read_file(d.log, g_out, sizeof(g_out)); /* stop removes it */
	cr_expect_gt(n, 0);
	cr_expect(strstr(g_out, "arena: loaded ") != NULL, "log: %s", g_out);
	cr_expect(strstr(g_out, p.arch) != NULL, "log: %s", g_out);
	cr_expect_eq(fsh_daemon_stop(&d), 0);
	fsg_plan_free(&p);
	fsg_close(&f);
}

Test(gguf_e2e, serves_qwen3moe)
{
	serve("qwen3moe.gguf");
}

Test(gguf_e2e, serves_deepseek2_with_a_dense_layer)
{
	serve("deepseek2.gguf");
}

Test(gguf_e2e, serves_gpt_oss)
{
	serve("gpt-oss.gguf");
}

Test(gguf_e2e, serves_mixtral_one_tensor_per_expert)
{
	serve("mixtral-split.gguf");
}

/* Without CAP_IPC_LOCK and with a small RLIMIT_MEMLOCK the daemon refuses
 * to serve an arena it cannot lock, and says what to change. */
Test(gguf_e2e, refuses_an_unlockable_arena)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* foresightd is built as this test is: its mlock() would be the
	 * sanitizer's, which does nothing and succeeds. */
	teardown(); /* a skipped test may not get its .fini */
	cr_skip_test("a sanitizer's mlock() does nothing and succeeds");
#endif
	char path[160], sock[200], log[200];
	fixture("qwen3next.gguf", path, sizeof(path), NULL);
	snprintf(sock, sizeof(sock), "%s/s.sock", g_dir);
	snprintf(log, sizeof(log), "%s/d.log", g_dir);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* Root's capabilities after exec come from the bounding set. */
		prctl(PR_CAPBSET_DROP, CAP_IPC_LOCK, 0, 0, 0);
		struct rlimit rl;
		getrlimit(RLIMIT_MEMLOCK, &rl);
		rl.rlim_cur = 65536;
		setrlimit(RLIMIT_MEMLOCK, &rl);
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 2);
		execl(FS_DAEMON_BIN, FS_DAEMON_BIN, "--socket", sock, "--model", path, (char *)NULL);
		_exit(127);
	}
	int st = fsh_wait(pid, 30000);
	cr_expect_eq(st, 1, "foresightd should exit 1, got %d", st);
	cr_assert_gt(fsh_read_file(log, g_out, sizeof(g_out)), 0);
	cr_expect(strstr(g_out, "LimitMEMLOCK") && strstr(g_out, "CAP_IPC_LOCK") &&
			  strstr(g_out, "--allow-unlocked"),
		  "log: %s", g_out);
	cr_expect_eq(access(sock, F_OK), -1, "no socket was created");
}
