/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of fs-demo-engine: its command line, a missing daemon, and end to
 * end against a real foresightd (tests/fs_harness): the engine's own
 * counts match `fsctl stats --json`, `fsctl clients` sees it while it runs,
 * the real qwen trace replays, and the run survives the daemon going away.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "fs_harness.h"

static char g_out[1 << 16];

/* Run a shell command line, stdout+stderr into out; exit status. */
static int sh(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sh(char *out, size_t cap, const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	strncat(cmd, " 2>&1", sizeof(cmd) - strlen(cmd) - 1);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

struct result {
	unsigned long long hits, misses, verified, mismatches;
};

/* The demo's two summary lines, wherever they are in its output. */
static int parse(const char *out, struct result *r)
{
	const char *a = strstr(out, "hits: "), *b = strstr(out, "verified reads: ");
	double rate;
	return a && b &&
			       sscanf(a, "hits: %llu misses: %llu hit rate: %lf%%", &r->hits, &r->misses,
				      &rate) == 3 &&
			       sscanf(b, "verified reads: %llu mismatches: %llu", &r->verified,
				      &r->mismatches) == 2 ?
		       0 :
		       -1;
}

static const char *last_line(const char *out)
{
	size_t n = strlen(out);
	while (n && out[n - 1] == '\n')
		n--;
	while (n && out[n - 1] != '\n')
		n--;
	return out + n;
}

static cJSON *stats_json(const struct fsh_daemon *d)
{
	static char buf[1 << 20];
	if (sh(buf, sizeof(buf), "%s --socket %s stats --json", FSCTL_BIN, d->sock) != 0)
		return NULL;
	return cJSON_Parse(buf);
}

static double jnum(const cJSON *o, const char *obj, const char *key)
{
	return cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(o, obj), key));
}

/* ---- no daemon needed ---------------------------------------------------- */

Test(demo, help_and_usage_errors)
{
	cr_expect_eq(sh(g_out, sizeof(g_out), "%s --help", DEMO_BIN), 0);
	cr_expect(strstr(g_out, "usage: fs-demo-engine") != NULL, "%s", g_out);
	cr_expect_eq(sh(g_out, sizeof(g_out), "%s --windows 0", DEMO_BIN), 2);
	cr_expect(strstr(g_out, "--windows '0'") != NULL, "%s", g_out);
	cr_expect_eq(sh(g_out, sizeof(g_out), "%s --predict psychic", DEMO_BIN), 2);
	cr_expect_eq(sh(g_out, sizeof(g_out), "%s --recall 1.5", DEMO_BIN), 2);
	cr_expect_eq(sh(g_out, sizeof(g_out), "%s --bogus 1", DEMO_BIN), 2);
	cr_expect_eq(sh(g_out, sizeof(g_out), "%s --windows", DEMO_BIN), 2);
}

Test(demo, no_daemon_exits_2)
{
	int rc = sh(g_out, sizeof(g_out), "%s --socket /tmp/fs-demo-test-nobody.sock --windows 3", DEMO_BIN);
	cr_expect_eq(rc, 2, "%s", g_out);
	cr_expect(strstr(g_out, "cannot attach to foresightd at /tmp/fs-demo-test-nobody.sock") != NULL, "%s",
		  g_out);
}

/* ---- against a real foresightd --------------------------------------------- */

Test(demo, counts_match_fsctl_stats, .timeout = 120)
{
	struct fsh_daemon d;
	cr_assert_eq(fsh_daemon_start(&d, NULL), 0, "foresightd did not start");
	int rc = sh(g_out, sizeof(g_out), "%s --socket %s --windows 100 --quiet", DEMO_BIN, d.sock);
	cr_expect_eq(rc, 0, "%s", g_out);
	struct result r;
	cr_assert_eq(parse(g_out, &r), 0, "output: %s", g_out);
	cr_expect(strncmp(last_line(g_out), "verified reads: ", 16) == 0, "last line: %s", last_line(g_out));
	cr_expect_eq(r.mismatches, 0);
	cr_expect_eq(r.verified, r.hits + r.misses);
	cr_expect_gt(r.hits, 0, "the oracle predictor should earn some hits: %s", g_out);

	/* The daemon counts what the engine counted (once its ring drained). */
	cJSON *s = NULL;
	for (int i = 0; i < 200; i++) {
		cJSON_Delete(s);
		s = stats_json(&d);
		cr_assert_not_null(s, "fsctl stats --json failed");
		if (jnum(s, "totals", "hits") == (double)r.hits &&
		    jnum(s, "totals", "misses") == (double)r.misses)
			break;
		usleep(10000);
	}
	cr_expect_eq(jnum(s, "totals", "hits"), (double)r.hits);
	cr_expect_eq(jnum(s, "totals", "misses"), (double)r.misses, "engine: %s", g_out);
	cr_expect_eq(jnum(s, "totals", "windows"), 100.0, "engine: %s", g_out);
	cr_expect_eq(jnum(s, "daemon", "bad_records"), 0.0);
	cJSON_Delete(s);
	/* and the text view renders a real reply */
	cr_expect_eq(sh(g_out, sizeof(g_out), "%s --socket %s stats", FSCTL_BIN, d.sock), 0, "%s", g_out);
	cr_expect(strstr(g_out, "# Cards") && strstr(g_out, "host0"), "%s", g_out);
	cr_expect_eq(fsh_daemon_stop(&d), 0);
}

Test(demo, fsctl_clients_sees_a_running_engine, .timeout = 120)
{
	struct fsh_daemon d;
	cr_assert_eq(fsh_daemon_start(&d, NULL), 0, "foresightd did not start");
	char out[256];
	snprintf(out, sizeof(out), "%s/demo.out", d.dir);
	char *argv[] = {DEMO_BIN,      "--socket", d.sock,   "--windows",       "400",
			"--window-us", "5000",     "--name", "demo-under-test", "--predict",
			"recency",     "--quiet",  NULL};
	pid_t pid = fsh_spawn(argv, out);
	int seen = 0;
	for (int i = 0; i < 300 && !seen; i++) {
		if (sh(g_out, sizeof(g_out), "%s --socket %s clients", FSCTL_BIN, d.sock) == 0)
			seen = strstr(g_out, "demo-under-test") != NULL;
		usleep(10000);
	}
	cr_expect(seen, "fsctl clients never listed the engine: %s", g_out);
	cr_expect_eq(fsh_wait(pid, 60000), 0);
	cr_expect_eq(fsh_daemon_stop(&d), 0);
}

Test(demo, replays_the_real_qwen_trace, .timeout = 120)
{
	char path[512];
	struct stat st;
	snprintf(path, sizeof(path), "%s/qwen.route.csv", FS_ROUTE_TRACES_DIR);
	if (stat(path, &st) != 0)
		cr_skip_test(
			"real traces absent (%s): ../shared/data/route-traces is not beside this checkout",
			path);
	struct fsh_daemon d;
	const char *extra[] = {"--layers",       "48",   "--experts", "128", "--experts-used", "6",
			       "--expert-bytes", "4096", NULL};
	cr_assert_eq(fsh_daemon_start(&d, extra), 0, "foresightd did not start");
	int rc = sh(g_out, sizeof(g_out), "%s --socket %s --trace %s --windows 128 --predict recency",
		    DEMO_BIN, d.sock, path);
	cr_expect_eq(rc, 0, "%s", g_out);
	struct result r;
	cr_assert_eq(parse(g_out, &r), 0, "output: %s", g_out);
	cr_expect_eq(r.mismatches, 0);
	cr_expect_eq(r.hits + r.misses, 128ull * 48 * 6,
		     "one token per window: top-6 distinct experts per layer");
	/* a trace bigger than the served model is refused up front */
	fsh_daemon_stop(&d);
	cr_assert_eq(fsh_daemon_start(&d, NULL), 0);
	rc = sh(g_out, sizeof(g_out), "%s --socket %s --trace %s --windows 3", DEMO_BIN, d.sock, path);
	cr_expect_eq(rc, 2, "%s", g_out);
	cr_expect(strstr(g_out, "the trace has 48 layers x 128 experts but foresightd serves") != NULL, "%s",
		  g_out);
	cr_expect_eq(fsh_daemon_stop(&d), 0);
}

Test(demo, keeps_going_when_the_daemon_goes_away, .timeout = 120)
{
	struct fsh_daemon d;
	cr_assert_eq(fsh_daemon_start(&d, NULL), 0, "foresightd did not start");
	char out[256]; /* outside d.dir, which fsh_daemon_stop removes */
	snprintf(out, sizeof(out), "/tmp/fs-demo-test-%d.out", (int)getpid());
	char *argv[] = {DEMO_BIN, "--socket", d.sock, "--windows", "300", "--window-us", "10000", NULL};
	pid_t pid = fsh_spawn(argv, out);
	usleep(800000);
	cr_expect_eq(fsh_daemon_stop(&d), 0);
	int rc = fsh_wait(pid, 60000);
	char text[1 << 14];
	cr_assert_geq(fsh_read_file(out, text, sizeof(text)), 0);
	unlink(out);
	cr_expect_eq(rc, 0, "exit %d: %s", rc, text);
	struct result r;
	cr_assert_eq(parse(text, &r), 0, "output: %s", text);
	cr_expect_eq(r.mismatches, 0, "%s", text);
	cr_expect_eq(r.verified, 300ull * 16 * 8, "every read verified, daemon or not: %s", text);
	cr_expect(strstr(text, "went away") != NULL, "%s", text);
}
