/* SPDX-License-Identifier: Apache-2.0 */
/*
 * End to end with a GGUF model: foresightd --model FILE --describe, and
 * foresightd --model FILE serving fs-demo-engine (every expert it reads,
 * from a slot or the arena, checked against the arena's checksum), the
 * model's dimensions in `fsctl stats`, the load counters, the refusal of an
 * arena that cannot be locked, the load's progress while it runs.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "fs_regions.h"

#include "foresight/foresight.h"
#include "fs_harness.h"
#include "fsg_moe.h"
#include "fsg_types.h"
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

/* A load slowed to take seconds (FORESIGHT_TEST_LOAD_MBPS): the control
 * socket is up from the start, `fsctl stats` shows the bytes loaded, the
 * rate and the time left growing and shrinking, ping and an attach without
 * partial_arena answer EAGAIN ("loading") until the arena is whole (one
 * with it is attached, told arena_loading), systemd hears STATUS= lines
 * with the percentage and EXTEND_TIMEOUT_USEC, then READY=1; afterwards the
 * demo engine reads every expert right. */
Test(gguf_e2e, stats_show_the_load_while_it_runs)
{
	char path[160], sock[200], log[200], nsock[100];
	struct fsgw_model m;
	char err[256];
	fsgw_model_defaults(&m, "qwen3moe");
	m.type = fsg_type_by_name("Q4_K");
	m.layers = 8, m.experts = 32, m.embd = 256, m.ff = 256; /* 8 x 3.5 MB */
	snprintf(path, sizeof(path), "%s/slow.gguf", g_dir);
	cr_assert_eq(fsgw_model_write(&m, path, err, sizeof(err)), 0, "%s", err);
	struct fsg_file f;
	struct fsg_plan p;
	plan_of(path, &f, &p);
	snprintf(sock, sizeof(sock), "%s/s.sock", g_dir);
	snprintf(log, sizeof(log), "%s/d.log", g_dir);
	snprintf(nsock, sizeof(nsock), "%s/notify.sock", g_dir);
	int nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", nsock);
	cr_assert_eq(bind(nfd, (struct sockaddr *)&sa, sizeof(sa)), 0);

	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setenv("NOTIFY_SOCKET", nsock, 1);
		setenv("FORESIGHT_TEST_LOAD_MBPS", "8", 1); /* about 3.5 s */
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 2);
		execl(FS_DAEMON_BIN, FS_DAEMON_BIN, "--socket", sock, "--model", path, "--allow-unlocked",
		      "--slots", "16", (char *)NULL);
		_exit(127);
	}
	unsigned partial = 0, attach_refused = 0, ping_refused = 0, some_layers = 0, partial_attach = 0;
	double last_layers = 0;
	double first_done = -1, last_done = -1, total = 0;
	int ready = 0;
	for (uint64_t end = fsh_now_ms() + 60000; fsh_now_ms() < end && !ready;) {
		usleep(50000);
		if (sh(0, "%s --socket %s stats --json 2>/dev/null", FSCTL_BIN, sock) != 0)
			continue; /* not up yet */
		cJSON *j = cJSON_Parse(g_out);
		cr_assert_not_null(j, "%s", g_out);
		const cJSON *dm = cJSON_GetObjectItem(j, "daemon");
		double done = jnum(dm, "arena_loaded_bytes"), bps = jnum(dm, "arena_load_bps"),
		       left = jnum(dm, "arena_load_left_ns"), layers = jnum(dm, "arena_layers_loaded");
		cr_expect_geq(layers, last_layers, "layers loaded only grow");
		last_layers = layers;
		if (layers > 0 && layers < p.layers)
			some_layers++;
		total = jnum(dm, "arena_bytes");
		cJSON_Delete(j);
		cr_expect_eq(total, (double)p.member_bytes);
		if (done > 0 && done < total) {
			partial++;
			cr_expect_geq(done, last_done, "progress only grows");
			if (first_done < 0)
				first_done = done;
			last_done = done;
			cr_expect_gt(bps, 0, "a rate while loading");
			cr_expect_gt(left, 0, "time left while loading");
			if (sh(1, "%s --socket %s ping", FSCTL_BIN, sock) != 0 &&
			    strstr(g_out, "loading the arena"))
				ping_refused++;
			char rep[512];
			if (fsh_request(sock, "{\"verb\":\"attach\",\"proto\":1}", rep, sizeof(rep)) == 0 &&
			    strstr(rep, "EAGAIN") && strstr(rep, "loading the arena"))
				attach_refused++;
			/* Once: a client that checks the layers' ready words is
			 * attached at once, and told the arena is loading. */
			char big[8192];
			if (!partial_attach &&
			    fsh_request(sock, "{\"verb\":\"attach\",\"proto\":1,\"partial_arena\":true}", big,
					sizeof(big)) == 0) {
				cJSON *a = cJSON_Parse(big);
				partial_attach = cJSON_IsTrue(cJSON_GetObjectItem(a, "ok")) &&
						 cJSON_IsTrue(cJSON_GetObjectItem(a, "arena_loading")) &&
						 jnum(a, "layers_loaded") < p.layers;
				cr_expect(partial_attach, "%s", big);
				cJSON_Delete(a);
				partial_attach = 1;
			}
		}
		ready = sh(0, "%s --socket %s ping 2>/dev/null", FSCTL_BIN, sock) == 0;
	}
	cr_assert(ready, "the daemon never became ready");
	cr_expect_geq(partial, 3u, "stats showed the load in progress %u times", partial);
	cr_expect_gt(last_done, first_done, "stats showed the load moving");
	cr_expect_gt(ping_refused, 0u, "ping said 'loading' while it loaded");
	cr_expect_gt(attach_refused, 0u, "attach answered EAGAIN while it loaded");
	cr_expect_gt(partial_attach, 0u, "an attach with partial_arena while it loaded");
	cr_expect_gt(some_layers, 0u, "stats showed some layers of %u loaded", p.layers);

	cr_assert_eq(sh(0, "%s --socket %s stats --json", FSCTL_BIN, sock), 0, "%s", g_out);
	cJSON *j = cJSON_Parse(g_out);
	const cJSON *dm = cJSON_GetObjectItem(j, "daemon");
	cr_expect_eq(jnum(dm, "arena_loaded_bytes"), (double)p.member_bytes);
	cr_expect_eq(jnum(dm, "arena_load_left_ns"), 0);
	cr_expect_eq(jnum(dm, "arena_layers_loaded"), p.layers);
	const cJSON *pg = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "model"), "arena_pages");
	cr_expect(cJSON_IsString(pg) &&
			  (strstr(pg->valuestring, "shmem, ") || strstr(pg->valuestring, "hugetlb: ")),
		  "model.arena_pages says which memory: %s",
		  cJSON_IsString(pg) ? pg->valuestring : "(absent)");
	cJSON_Delete(j);
	cr_expect_eq(sh(0, "%s --socket %s stats", FSCTL_BIN, sock), 0);
	cr_expect(strstr(g_out, "arena_load_bps") && strstr(g_out, "arena_load_left_ns"), "%s", g_out);
	int rc = sh(1, "%s --socket %s --windows 40 --quiet", DEMO_BIN, sock);
	cr_expect_eq(rc, 0, "%s", g_out);
	const char *v = strstr(g_out, "verified reads: ");
	unsigned long long verified = 0, mismatches = 1;
	cr_assert_not_null(v, "%s", g_out);
	cr_assert_eq(sscanf(v, "verified reads: %llu mismatches: %llu", &verified, &mismatches), 2);
	cr_expect_gt(verified, 0u);
	cr_expect_eq(mismatches, 0u, "%s", g_out);

	/* systemd's side: loading statuses with the percentage and the start
	 * timeout extended, then READY=1. */
	char msg[1024];
	unsigned loading = 0, extend = 0, ready_at = 0, n = 0;
	ssize_t got;
	while ((got = recv(nfd, msg, sizeof(msg) - 1, 0)) > 0) {
		msg[got] = 0;
		n++;
		if (strstr(msg, "STATUS=loading the arena: ") && strstr(msg, " %"))
			loading++;
		if (strstr(msg, "EXTEND_TIMEOUT_USEC="))
			extend++;
		if (strstr(msg, "READY=1") && !ready_at)
			ready_at = n;
	}
	cr_expect_geq(loading, 2u, "STATUS lines while loading: %u", loading);
	cr_expect_geq(extend, 2u, "EXTEND_TIMEOUT_USEC while loading: %u", extend);
	cr_expect_gt(ready_at, loading, "READY=1 after the loading statuses");
	close(nfd);
	kill(pid, SIGTERM);
	cr_expect_eq(fsh_wait(pid, 10000), 0);
	fsg_plan_free(&p);
	fsg_close(&f);
}

/* SIGTERM during a (slowed) load: the loader threads stop after their job,
 * the daemon exits 0 at once, not after the load. */
Test(gguf_e2e, stops_during_the_load)
{
	char path[160], sock[200], log[200], err[256];
	struct fsgw_model m;
	fsgw_model_defaults(&m, "qwen3moe");
	m.type = fsg_type_by_name("Q4_K");
	m.layers = 8, m.experts = 32, m.embd = 256, m.ff = 256;
	snprintf(path, sizeof(path), "%s/slow.gguf", g_dir);
	cr_assert_eq(fsgw_model_write(&m, path, err, sizeof(err)), 0, "%s", err);
	snprintf(sock, sizeof(sock), "%s/s.sock", g_dir);
	snprintf(log, sizeof(log), "%s/d.log", g_dir);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setenv("FORESIGHT_TEST_LOAD_MBPS", "1", 1); /* about 28 s */
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 2);
		execl(FS_DAEMON_BIN, FS_DAEMON_BIN, "--socket", sock, "--model", path, "--allow-unlocked",
		      (char *)NULL);
		_exit(127);
	}
	int up = 0;
	for (uint64_t end = fsh_now_ms() + 20000; fsh_now_ms() < end && !up;) {
		usleep(50000);
		up = sh(0, "%s --socket %s stats --json 2>/dev/null", FSCTL_BIN, sock) == 0;
	}
	cr_assert(up, "the control socket never came up");
	uint64_t t = fsh_now_ms();
	kill(pid, SIGTERM);
	cr_expect_eq(fsh_wait(pid, 10000), 0);
	cr_expect_lt(fsh_now_ms() - t, 5000, "it stopped without finishing the load");
	cr_assert_gt(fsh_read_file(log, g_out, sizeof(g_out)), 0);
	cr_expect(strstr(g_out, "load cancelled") != NULL, "log: %s", g_out);
}

/* The model file's bytes of expert x's blob part by part, against `blob`:
 * 1 when every part matches. */
static int blob_is_file(int fd, const struct fsg_plan *p, uint32_t l, uint32_t x, const uint8_t *blob,
			uint8_t *buf)
{
	const struct fsg_layer *ly = &p->layer[l];
	for (uint32_t i = 0; i < ly->nparts; i++) {
		const struct fsg_part *pt = &ly->part[i];
		if (pread(fd, buf, pt->bytes, (off_t)fsg_part_src(pt, x)) != (ssize_t)pt->bytes ||
		    memcmp(blob + pt->blob_off, buf, pt->bytes) != 0)
			return 0;
	}
	return 1;
}

/* Served while it loads (FORESIGHT_TEST_LOAD_MBPS slows the load to
 * seconds): the library attaches at once; a layer's experts answer
 * -EAGAIN until the layer is in, then the model file's bytes (never zero
 * or stale ones), as do the slots its lookups find; lookups hit only in
 * layers that are in, and start hitting before the load ends; a layer in
 * stays in; uses of layers still loading are counted, not acted on. */
Test(gguf_e2e, served_while_it_loads)
{
	char path[160], sock[200], log[200], err[256];
	struct fsgw_model m;
	fsgw_model_defaults(&m, "qwen3moe");
	m.type = fsg_type_by_name("Q4_K");
	m.layers = 8, m.experts = 32, m.embd = 256, m.ff = 256; /* 8 x 3.5 MB */
	snprintf(path, sizeof(path), "%s/slow.gguf", g_dir);
	cr_assert_eq(fsgw_model_write(&m, path, err, sizeof(err)), 0, "%s", err);
	struct fsg_file f;
	struct fsg_plan p;
	plan_of(path, &f, &p);
	snprintf(sock, sizeof(sock), "%s/s.sock", g_dir);
	snprintf(log, sizeof(log), "%s/d.log", g_dir);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setenv("FORESIGHT_TEST_LOAD_MBPS", "8", 1); /* about 3.5 s */
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 2);
		execl(FS_DAEMON_BIN, FS_DAEMON_BIN, "--socket", sock, "--model", path, "--allow-unlocked",
		      "--slots", "64", (char *)NULL);
		_exit(127);
	}
	fs_client *c = NULL;
	struct fs_client_opts o = {.socket_path = sock, .name = "early", .no_reattach = 1};
	for (uint64_t end = fsh_now_ms() + 20000; fsh_now_ms() < end && !c;)
		if (fs_client_open(&c, &o) < 0)
			usleep(20000);
	cr_assert_not_null(c, "no attach during the load: %s", fs_open_error());
	struct fs_model_info mi;
	fs_client_model(c, &mi);
	cr_assert_eq(mi.layers, p.layers);
	cr_assert_eq(mi.experts, p.experts);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	uint8_t *buf = malloc(p.max_blob);
	cr_assert_not_null(buf);
	int in[FS_MAX_LAYERS] = {0}, checked[FS_MAX_LAYERS] = {0};
	unsigned partial = 0, eagain = 0, bad = 0, hits = 0, early_hits = 0, wrong_hits = 0;
	uint32_t nin = 0;
	for (uint32_t w = 1; nin < p.layers || w < 8; w++) {
		cr_assert_lt(w, 20000u, "the load never finished");
		struct fs_view v;
		fs_window_begin(c, w, 1);
		cr_assert_eq(fs_acquire(c, &v), 0);
		uint32_t now_in = 0;
		for (uint32_t l = 0; l < p.layers; l++) {
			int r = fs_layer_ready(c, l);
			cr_assert(r == 0 || r == 1, "fs_layer_ready %d", r);
			cr_expect(r || !in[l], "layer %u was in and is not now", l);
			in[l] = r;
			now_in += (uint32_t)r;
			for (uint32_t x = 0; x < p.experts; x++) {
				struct fs_expert_blob b;
				int rc = fs_arena_expert(c, l, x, &b);
				if (!r) {
					cr_expect_eq(rc, -EAGAIN, "layer %u not in: %d", l, rc);
					eagain += rc == -EAGAIN;
					continue;
				}
				cr_assert_eq(rc, 0, "layer %u in: %d", l, rc);
				if (checked[l])
					continue;
				/* Once per layer, as soon as it is in: every byte is the file's. */
				if (!blob_is_file(fd, &p, l, x, b.data, buf) ||
				    fs_checksum(b.data, b.bytes) != b.checksum)
					bad++;
			}
			checked[l] |= r;
			/* Four experts of every layer predicted, loaded or not; the
			 * slots the view holds for them checked like the arena. */
			for (uint32_t x = 0; x < 4; x++) {
				struct fs_slot s;
				if (fs_lookup(c, &v, 0, l, x, &s)) {
					hits++;
					wrong_hits += fs_layer_ready(c, l) != 1;
					early_hits += nin < p.layers;
					if (!blob_is_file(fd, &p, l, x, s.host, buf))
						bad++;
					fs_post_usage(c, w, l, x, 0, 1);
				} else {
					fs_post_usage(c, w, l, x, 0, 0);
				}
				fs_post_predict(c, w + 1, l, x, 0, 1.0f, 1, FS_SOURCE_HOST);
			}
		}
		fs_window_end(c, w);
		fs_release(c, &v);
		partial += now_in > 0 && now_in < p.layers;
		nin = now_in;
		usleep(20000);
	}
	cr_expect_eq(bad, 0u, "bytes that are not the file's");
	cr_expect_eq(wrong_hits, 0u, "lookups that hit in a layer not in");
	cr_expect_gt(eagain, 0u, "experts of layers not in answered EAGAIN");
	cr_expect_geq(partial, 2u, "rounds with some layers in, not all: %u", partial);
	cr_expect_gt(early_hits, 0u, "hits before the load ended (%u hits in all)", hits);
	for (uint32_t l = 0; l < p.layers; l++)
		cr_expect(checked[l], "layer %u checked", l);
	cr_assert_eq(sh(0, "%s --socket %s stats --json", FSCTL_BIN, sock), 0, "%s", g_out);
	cJSON *j = cJSON_Parse(g_out);
	cr_assert_not_null(j);
	const cJSON *dm = cJSON_GetObjectItem(j, "daemon");
	cr_expect_gt(jnum(dm, "arena_unloaded_recs"), 0, "uses and predictions of layers loading counted");
	cr_expect_eq(jnum(dm, "arena_layers_loaded"), p.layers);
	cJSON_Delete(j);
	free(buf);
	close(fd);
	fs_client_close(c);
	kill(pid, SIGTERM);
	cr_expect_eq(fsh_wait(pid, 10000), 0);
	fsg_plan_free(&p);
	fsg_close(&f);
}
