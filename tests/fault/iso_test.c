/* SPDX-License-Identifier: Apache-2.0 */
/*
 * iso_test: one engine cannot take the tier from the others (issue 22).
 *
 * Each test starts a daemon, measures two honest engines alone (their hit
 * rate), then again beside one attack of tests/fault/fs_iso.c, and asks
 * that they keep at least 90 % of the hit rate they had alone, attach
 * within 1 s, and read no wrong byte; and that the daemon counted the
 * attack where it can.  Sizes from the environment (CI short; the long
 * figures in docs/results/reliability.md):
 *   FS_ISO_SECONDS  each phase's length                   (CI 2)
 *   FS_ISO_ROUNDS   alone/beside phases, alternated        (4, sanitized 2; tools/test.sh:
 *                   2, sanitized 1; a case with rounds of its own keeps them)
 *   FS_ISO_WARM     seconds the attack runs before the first (3 x FS_ISO_SECONDS)
 *   FS_ISO_SHARE    the bar, percent of the hit rate alone (CI 60, asserted in
 *                   the plain build only unless set: sanitized, too noisy; the issue's
 *                   bar, 90, is what the long runs use: on a loaded 2-core CI
 *                   machine a 3 s hit rate moves by more than 10 % between
 *                   two runs with no attack at all (the re-hold test measured
 *                   68 % and 73 % under a full ctest at a load of 10-20, 77-81 %
 *                   alone, against a 75 % bar), while the attacks took the honest
 *                   engines to 1.7-1.8 % of it before the defences (issue 22))
 *   FS_TEST_TIMING=1 the 1 s attach and ping bars (3 s sanitized); else 3 s (6 s)
 *   FS_ISO_RESTARTS daemon restarts without the fd store (CI 5)
 *   FS_ISO_LONG=1   the long runs of docs/results/reliability.md: the
 *                   defaults above become 10 s phases, 3 rounds, the 90 %
 *                   bar (asserted in every build) and 30 restarts; each
 *                   variable set beside it still wins.  The fd flood (eight
 *                   busy processes) is then also measured against a CPU-only
 *                   control of eight processes (FS_ISO_SPIN=1 asks for it
 *                   alone), and its bar is the 90 % times what the control
 *                   left: on 2 cores the control alone took 17 % (see
 *                   docs/results/reliability.md)
 *   FSH_KEEP=1      keep the test's directory (daemon log, engine outputs)
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fault_util.h"

#ifdef FS_FAULT_SANITIZED
#define SAN 1
#else
#define SAN 0
#endif

#define SMALL "--layers", "8", "--experts", "32", "--expert-bytes", "4096", "--slots", "48"

static int iso_long(void)
{
	return fault_env("FS_ISO_LONG", 0) != 0;
}

static unsigned secs(void)
{
	return (unsigned)fault_env("FS_ISO_SECONDS", iso_long() ? 10 : 2);
}

/* The honest engines' load: both read the same random set of 4 experts a
 * layer, changing every 20 windows (the tier holds 32 of its 48 slots
 * for it): the first window of a set misses, the rest hit once its copies
 * land, so the hit rate measures whether the tier can still take in new
 * experts, which is what every attack here is after. */
#define ISO_LOAD "churn=20", "seed=7"

/* Who runs the honest engines and the attackers: -1, the test's user
 * (foresightd's own, an admin); as root, the tests of shares run them as
 * two other users of the daemon's group (iso_users). */
static long honest_uid = -1, attack_uid = -1, users_gid = -1;
/* measure()'s rounds and warm-up when the test sets them (0: the defaults). */
static unsigned iso_rounds, iso_warm_set, iso_warm;
static unsigned iso_rounds_now(void);

struct honest {
	struct fault_engine r[2];
	long attach_ms[2]; /* spawn to "started" */
	double hit_rate;   /* both engines: hits / (hits + misses) */
};

/* Two honest engines for `s` seconds: their figures. */
static void run_honest(struct fdaemon *d, const char *tag, unsigned s, struct honest *h)
{
	char out[2][256], sec[32];
	pid_t p[2];
	snprintf(sec, sizeof(sec), "seconds=%u", s);
	uint64_t t0[2];
	for (int i = 0; i < 2; i++) {
		snprintf(out[i], sizeof(out[i]), "%s/%s-honest%d.out", d->h.dir, tag, i);
		t0[i] = fsh_now_ms();
		p[i] = fault_spawn(fsh_argv(FS_FAULT_ENGINE_BIN, "run", d->h.sock, sec, "rate=200", "k=4",
					    ISO_LOAD, NULL),
				   out[i], honest_uid, users_gid);
	}
	for (int i = 0; i < 2; i++) {
		h->attach_ms[i] = fault_wait_text(out[i], "started", 10000) == 0 ?
					  (long)(fsh_now_ms() - t0[i]) :
					  -1;
	}
	unsigned long long hits = 0, uses = 0;
	for (int i = 0; i < 2; i++) {
		int st = fsh_wait(p[i], (int)(s * 1000 + 20000));
		cr_expect_eq(st, 0, "%s: honest engine %d exit status %d", tag, i, st);
		memset(&h->r[i], 0, sizeof(h->r[i]));
		cr_assert_eq(fault_parse_engine(out[i], &h->r[i]), 0, "%s: no result line in %s", tag,
			     out[i]);
		hits += h->r[i].hits;
		uses += h->r[i].hits + h->r[i].misses;
	}
	h->hit_rate = uses ? (double)hits / (double)uses : 0;
}

/* Attacker `part` of `parts` (they split the work: fs_iso.c). */
static pid_t attack_part(struct fdaemon *d, const char *what, const char *out, unsigned s, const char *extra,
			 int part, int parts)
{
	char sec[32], pa[32], ps[32];
	snprintf(sec, sizeof(sec), "seconds=%u", s);
	snprintf(pa, sizeof(pa), "part=%d", part);
	snprintf(ps, sizeof(ps), "parts=%d", parts);
	return fault_spawn(fsh_argv(FS_FAULT_ENGINE_BIN, "iso", d->h.sock, what, sec, pa, ps, extra, NULL),
			   out, attack_uid, users_gid);
}

static pid_t attack(struct fdaemon *d, const char *what, const char *out, unsigned s, const char *extra)
{
	return attack_part(d, what, out, s, extra, 0, 1);
}

/* Attackers at once, at most (issue 33: five). */
#define MAX_ATT 8

/* How measure() starts attacker `part` of `parts` for `s` seconds: an
 * attack of fs_iso.c, or (slow_attack) an honest engine that is merely
 * slow.  It prints "attached" once it is. */
typedef pid_t (*spawn_fn)(struct fdaemon *d, const char *what, const char *out, unsigned s, const char *extra,
			  int part, int parts);
static spawn_fn iso_spawn = attack_part;

static const char *text(const char *path)
{
	static char buf[65536];
	if (fsh_read_file(path, buf, sizeof(buf)) < 0)
		buf[0] = 0;
	return buf;
}

/* The wall-clock bar for an attach or a ping beside an attack: the issue's
 * 1 s (sanitizers 3 s) with FS_TEST_TIMING=1, on a quiet machine; 3 s (6 s)
 * otherwise: a plain build's idle-connections ping took 1275 ms on this
 * 2-core box under a load of 15-18 and 14-26 ms alone. */
static long iso_bar_ms(void)
{
	return fault_timing_claims() ? (SAN ? 3000 : 1000) : (SAN ? 6000 : 3000);
}

/* The bar: beside the attack, the honest engines keep FS_ISO_SHARE % of
 * their solo hit rate, attach within iso_bar_ms(), read no wrong byte. */
/* What a CPU-only control (fs_iso.c spin: as many busy processes as the
 * attack has, never touching the daemon) left the honest engines of their
 * hit rate alone, when the test measured one; 0: none.  The bar is then
 * relative to it: on a machine with fewer cores than busy processes, what
 * an attack costs beyond its CPU is what the daemon can answer for. */
static double iso_control;

static void expect_unhurt(const char *attack, const struct honest *solo, const struct honest *with)
{
	double share = (double)fault_env("FS_ISO_SHARE", iso_long() ? 90 : 60) / 100.0;
	if (iso_control > 0 && iso_control < 1) {
		fprintf(stderr, "iso %s: the bar, %.0f %% of alone, times the control's %.0f %%\n", attack,
			100 * share, 100 * iso_control);
		share *= iso_control;
	}
	long attach_bar = iso_bar_ms();
	fprintf(stderr,
		"iso %s: honest hit rate alone %.1f %%, beside the attack %.1f %% (%.0f %% of alone); "
		"attach %ld/%ld ms\n",
		attack, 100 * solo->hit_rate, 100 * with->hit_rate,
		solo->hit_rate > 0 ? 100 * with->hit_rate / solo->hit_rate : 0.0, with->attach_ms[0],
		with->attach_ms[1]);
	/* Under a sanitizer the hit rate of one or two 2 s phases is noise
	 * (CI's ASan stage: 36-91 % alone across the tests of one run, an
	 * attack that does nothing at 73 %): the share is asserted in the
	 * plain build, which CI runs too, or when FS_ISO_SHARE asks for it;
	 * the sanitized builds, and a sanitized daemon (FS_TEST_DAEMON: CI's
	 * TSan stage), check the rest (attach, bytes, counters). */
	if ((!SAN && !getenv("FS_TEST_DAEMON")) || getenv("FS_ISO_SHARE") || iso_long()) {
		cr_expect_gt(solo->hit_rate, 0.2, "%s: the honest engines hit too little alone to judge",
			     attack);
		cr_expect_geq(with->hit_rate, share * solo->hit_rate,
			      "%s: honest hit rate %.3f beside the attack, %.3f alone", attack,
			      with->hit_rate, solo->hit_rate);
	}
	for (int i = 0; i < 2; i++) {
		cr_expect(with->attach_ms[i] >= 0 && with->attach_ms[i] <= attach_bar,
			  "%s: honest engine %d attached in %ld ms", attack, i, with->attach_ms[i]);
		cr_expect_eq(with->r[i].mismatches, 0, "%s: a wrong byte read", attack);
	}
}

/* Add one run's figures into a sum. */
static void honest_add(struct honest *sum, const struct honest *h)
{
	for (int i = 0; i < 2; i++) {
		sum->r[i].hits += h->r[i].hits;
		sum->r[i].misses += h->r[i].misses;
		sum->r[i].mismatches += h->r[i].mismatches;
		long a = h->attach_ms[i];
		if (a < 0 || sum->attach_ms[i] < 0)
			sum->attach_ms[i] = -1;
		else if (a > sum->attach_ms[i])
			sum->attach_ms[i] = a;
	}
	unsigned long long hits = sum->r[0].hits + sum->r[1].hits;
	unsigned long long uses = hits + sum->r[0].misses + sum->r[1].misses;
	sum->hit_rate = uses ? (double)hits / (double)uses : 0;
}

/*
 * The honest pair alone and beside the attack, alternated FS_ISO_ROUNDS
 * times (the machine's load drifts; alternating spreads it over both).
 * The attack runs only in its phases: `what` with `extra` (may be NULL),
 * `n_att` copies of it.  The attackers' outputs are <dir>/<what>-<round>-<i>.out.
 */
static int iso_att_status[MAX_ATT]; /* the last round's attackers' exit statuses */

static void measure(struct fdaemon *d, const char *what, const char *extra, int n_att, struct honest *solo,
		    struct honest *with)
{
	unsigned s = secs(), rounds = iso_rounds_now();
	memset(solo, 0, sizeof(*solo));
	memset(with, 0, sizeof(*with));
	/* The attack runs a phase alone first: the bar is for an attack that
	 * goes on, and the daemon's answer to one that repeats (the back-off)
	 * grows with it. */
	unsigned warm = (unsigned)fault_env("FS_ISO_WARM", iso_warm_set ? iso_warm : 3 * s);
	pid_t w[MAX_ATT];
	for (int i = 0; i < n_att && i < MAX_ATT && warm; i++) {
		char wout[256];
		snprintf(wout, sizeof(wout), "%s/%s-warm-%d.out", d->h.dir, what, i);
		w[i] = iso_spawn(d, what, wout, warm, extra, i, n_att);
	}
	for (int i = 0; i < n_att && i < MAX_ATT && warm; i++)
		fsh_wait(w[i], (int)(warm * 1000 + 20000));
	for (unsigned r = 0; r < rounds; r++) {
		struct honest h;
		run_honest(d, "solo", s, &h);
		honest_add(solo, &h);
		pid_t a[MAX_ATT];
		char out[MAX_ATT][256];
		for (int i = 0; i < n_att && i < MAX_ATT; i++) {
			snprintf(out[i], sizeof(out[i]), "%s/%s-%u-%d.out", d->h.dir, what, r, i);
			a[i] = iso_spawn(d, what, out[i], s + 2, extra, i, n_att);
		}
		for (int i = 0; i < n_att && i < MAX_ATT; i++)
			cr_assert_eq(fault_wait_text(out[i], "attached", 10000), 0,
				     "%s: the attacker never started: %s", what, text(out[i]));
		usleep(300000); /* the attack takes hold */
		run_honest(d, what, s, &h);
		honest_add(with, &h);
		for (int i = 0; i < n_att && i < MAX_ATT; i++) {
			int st = fsh_wait(a[i], 30000);
			iso_att_status[i] = st;
			fprintf(stderr, "%s", text(out[i]));
		}
	}
}

/*
 * SIGTERM -> exit, after the attack (issue 33): the stop is bounded
 * whatever the control connections did.  After the no-read flood a
 * foresightd waited in nng_close() 30-60 s and more (the probe's close,
 * before the listener's).  The bar: 2 s (sanitized 4 s) with
 * FS_TEST_TIMING=1, else 10 s, which a hang still fails.
 */
static void iso_stop(struct fdaemon *d, const char *what)
{
	long bar = fault_timing_claims() ? (SAN ? 4000 : 2000) : 10000;
	uint64_t t0 = fsh_now_ms();
	kill(d->h.pid, SIGTERM);
	int st = fsh_wait(d->h.pid, (int)bar); /* -1: still up at the bar, killed */
	long ms = (long)(fsh_now_ms() - t0);
	d->h.pid = 0;
	fprintf(stderr, "iso %s: SIGTERM -> exit in %ld ms (status %d)\n", what, ms, st);
	if (st != 0)
		fault_print_tail("foresightd's log", d->h.log, 3000);
	cr_expect_eq(st, 0, "%s: foresightd did not stop within %ld ms of SIGTERM (status %d)", what, bar,
		     st);
	fd_stop(d);
}

/* ---- 8: log forging through the attach name ------------------------------ */

Test(iso, a_name_cannot_forge_a_log_line_or_a_reply, .timeout = 60)
{
	struct fdaemon d;
	cr_assert_eq(fd_init(&d, 0), 0);
	const char *extra[] = {SMALL, NULL};
	cr_assert_geq(fd_start(&d, extra, 0), 0, "foresightd did not start");
	char out[256];
	snprintf(out, sizeof(out), "%s/name.out", d.h.dir);
	pid_t a = attack(&d, "name", out, 1, NULL);
	cr_assert_eq(fault_wait_text(out, "attached", 10000), 0, "the attacker never attached: %s",
		     text(out));
	cJSON *s = fault_stats(d.h.sock);
	cr_assert_not_null(s);
	const cJSON *cl = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(s, "clients"), 0);
	const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cl, "name");
	cr_assert(cJSON_IsString(nm), "no client name in stats");
	for (const unsigned char *p = (const unsigned char *)nm->valuestring; *p; p++)
		cr_expect(*p >= 0x20 && *p < 0x7f, "stats name has byte 0x%02x", *p);
	cr_expect_leq(strlen(nm->valuestring), 47, "stats name of %zu bytes", strlen(nm->valuestring));
	cr_expect_eq(fault_num(s, "daemon", "bad_names"), 1.0, "the escaped name was not counted once");
	cJSON_Delete(s);
	fsh_wait(a, 10000);
	fault_wait_text(d.h.log, "process exited", 5000);
	/* Every line of the log is the daemon's: "<N>foresightd: ...". */
	const char *log = text(d.h.log);
	unsigned lines = 0, foreign = 0;
	for (const char *l = log; *l;) {
		const char *e = strchr(l, '\n');
		size_t n = e ? (size_t)(e - l) : strlen(l);
		if (n > 0) {
			lines++;
			if (!(n > 16 && l[0] == '<' && l[2] == '>' &&
			      strncmp(l + 3, "foresightd: ", 12) == 0)) {
				foreign++;
				fprintf(stderr, "iso name: a line the daemon did not start: %.*s\n", (int)n,
					l);
			}
		}
		l += n + (e ? 1 : 0);
	}
	cr_expect_gt(lines, 0);
	cr_expect_eq(foreign, 0, "%u forged log lines", foreign);
	cr_expect_not_null(strstr(log, "x\\x0a<3>forged by a client"), "the escaped name is not in the log");
	iso_stop(&d, "a_name_cannot_forge_a_log_line_or_a_reply");
}

/* ---- 1: a hold naming a long-superseded epoch ----------------------------- */

Test(iso, a_stale_hold_does_not_pin_reclaim, .timeout = 300)
{
	struct fdaemon d;
	cr_assert_eq(fd_init(&d, 0), 0);
	const char *extra[] = {SMALL, NULL};
	cr_assert_geq(fd_start(&d, extra, 0), 0, "foresightd did not start");
	struct honest solo, with;
	measure(&d, "stale-hold", NULL, 1, &solo, &with);
	expect_unhurt("stale-hold", &solo, &with);
	cJSON *st = fault_stats(d.h.sock);
	double bh = fault_num(st, "daemon", "bad_holds");
	cJSON_Delete(st);
	cr_expect_geq(bh, 1.0, "the stale hold was not counted");
	iso_stop(&d, "a_stale_hold_does_not_pin_reclaim");
}

/* ---- 2: the hold budget is the client's, over time ------------------------ */

Test(iso, a_client_revoked_for_a_long_hold_backs_off, .timeout = 300)
{
	struct fdaemon d;
	cr_assert_eq(fd_init(&d, 0), 0);
	/* Back-off 4 s, 16, 64, ...; 1 s, not less: an honest engine on a host
	 * at load 20 was seen to hold one epoch longer than 300 ms. */
	const char *extra[] = {SMALL, "--hold-timeout-ms", "1000", NULL};
	cr_assert_geq(fd_start(&d, extra, 0), 0, "foresightd did not start");
	struct honest solo, with;
	/* The claim is that the back-off grows (4 s, 16 s, ...): four rounds
	 * in every build, so that it has.  In the first two the attacker still
	 * gets one 1 s hold each (its log: "attached 1.3 s of 4 s"), in the
	 * last two none; a sanitized build's default two rounds measured only
	 * the first two: 64-75 % of alone, against 79-93 % over four.  A
	 * sanitized build asserts no share (FS_ISO_SHARE), only the refusal
	 * below, which the first round's re-attach already meets: there
	 * FS_ISO_ROUNDS wins (CI's asan stage: 1), as in every other case. */
	iso_rounds = SAN ? 0 : 4;
	measure(&d, "rehold", NULL, 1, &solo, &with);
	iso_rounds = 0;
	expect_unhurt("rehold", &solo, &with);
	cJSON *st = fault_stats(d.h.sock);
	double refused = fault_num(st, "daemon", "backoff_refused");
	cJSON_Delete(st);
	cr_expect_geq(refused, 1.0, "no re-attach was refused for the back-off");
	iso_stop(&d, "a_client_revoked_for_a_long_hold_backs_off");
}

Test(iso, a_client_holding_every_buffer_does_not_stop_publication, .timeout = 300)
{
	struct fdaemon d;
	cr_assert_eq(fd_init(&d, 0), 0);
	/* 4 epoch buffers and holds that never time out: the attacker, holding
	 * 3 epochs, holds every buffer but the current one.  Only the reserve
	 * can let publication go on. */
	const char *extra[] = {SMALL, "--epoch-bufs", "4", "--hold-timeout-ms", "600000", NULL};
	cr_assert_geq(fd_start(&d, extra, 0), 0, "foresightd did not start");
	cJSON *st = fault_stats(d.h.sock);
	double stale0 = fault_num(st, "daemon", "stale");
	cJSON_Delete(st);
	struct honest solo, with;
	measure(&d, "rehold", "holds=3", 1, &solo, &with);
	expect_unhurt("hold-every-buffer", &solo, &with);
	st = fault_stats(d.h.sock);
	double stale = fault_num(st, "daemon", "stale") - stale0;
	double refused = fault_num(st, "daemon", "backoff_refused");
	cJSON_Delete(st);
	cr_expect_geq(stale, 1.0, "the client holding every buffer was never revoked");
	cr_expect_geq(refused, 1.0, "it was never refused for its back-off");
	iso_stop(&d, "a_client_holding_every_buffer_does_not_stop_publication");
}

/* ---- 9: a bad word counted once, not once per pass ----------------------- */

Test(iso, a_bad_hold_is_counted_once, .timeout = 60)
{
	struct fdaemon d;
	cr_assert_eq(fd_init(&d, 0), 0);
	const char *extra[] = {SMALL, NULL};
	cr_assert_geq(fd_start(&d, extra, 0), 0, "foresightd did not start");
	char out[256];
	snprintf(out, sizeof(out), "%s/flip.out", d.h.dir);
	/* An honest engine beside it keeps the hot thread busy: many passes. */
	char hout[256];
	snprintf(hout, sizeof(hout), "%s/busy.out", d.h.dir);
	pid_t h = fault_spawn(
		fsh_argv(FS_FAULT_ENGINE_BIN, "run", d.h.sock, "seconds=3", "rate=0", "k=4", NULL), hout, -1,
		-1);
	pid_t a = attack(&d, "flip-hold", out, 2, NULL);
	cr_assert_eq(fsh_wait(a, 20000), 0, "the attacker failed: %s", text(out));
	fsh_wait(h, 20000);
	fprintf(stderr, "%s", text(out));
	cr_expect_not_null(strstr(text(out), "bad_holds +1\n"), "one bad word, counted: %s", text(out));
	iso_stop(&d, "a_bad_hold_is_counted_once");
}

/* ---- 3, 5: shares of the client table and of the fd socket ---------------- */

/* As root: the daemon serves group nogroup (or nobody) with sockets 0660;
 * the attacker is uid 65534, the honest engines uid 65533, both in that
 * group: two members, neither an admin.  Otherwise everyone is this user,
 * foresightd's own, whose share is the whole table: only the per-process
 * caps apply, and the attack is one process.  Returns the attacker
 * processes to use. */
static int iso_users(struct fdaemon *d, const char **extra_group, size_t n)
{
	if (geteuid() != 0)
		return 1;
	/* The test's main thread is the only one looking groups up. */
	// cppcheck-suppress getgrnamCalled
	struct group *g = getgrnam("nogroup");
	if (!g) {
		// cppcheck-suppress getgrnamCalled
		g = getgrnam("nobody");
	}
	if (!g)
		return 1;
	static char gname[64];
	snprintf(gname, sizeof(gname), "%s", g->gr_name);
	extra_group[n] = "--group";
	extra_group[n + 1] = gname;
	extra_group[n + 2] = "--socket-mode";
	extra_group[n + 3] = "0660";
	extra_group[n + 4] = NULL;
	chmod(d->h.dir, 0755);
	users_gid = (long)g->gr_gid;
	attack_uid = 65534;
	honest_uid = 65533;
	return 4;
}

static void iso_users_done(void)
{
	honest_uid = attack_uid = users_gid = -1;
	iso_rounds = iso_warm_set = iso_warm = 0;
}

Test(iso, one_member_cannot_take_every_client_row, .timeout = 300)
{
	struct fdaemon d;
	cr_assert_eq(fd_init(&d, 0), 0);
	const char *extra[16] = {SMALL};
	int parts = iso_users(&d, extra, 8);
	cr_assert_geq(fd_start(&d, extra, 0), 0, "foresightd did not start");
	iso_rounds = (unsigned)(SAN ? 1 : 2);
	iso_warm_set = 1;
	iso_warm = 3; /* the half-open rows of the warm-up expire (2 s) while it runs */
	/* Each attacker process keeps 3 whole rows and floods half-open ones:
	 * with 4 processes, 12 rows, so the user's share (16) leaves it
	 * half-open rows to hold, and they expire while it runs. */
	struct honest solo, with;
	measure(&d, "rows", "keep=3", parts, &solo, &with);
	expect_unhurt("rows", &solo, &with);
	cJSON *st = fault_stats(d.h.sock);
	double capped = fault_num(st, "daemon", "attach_capped");
	double expired = fault_num(st, "daemon", "pending_expired");
	cJSON_Delete(st);
	fprintf(stderr,
		"iso rows: %d attacker process(es) as uid %ld: attach_capped %.0f, pending_expired %.0f\n",
		parts, attack_uid, capped, expired);
	cr_expect_geq(capped, 1.0, "no attach was capped");
	cr_expect_geq(expired, 1.0, "no half-open row expired");
	iso_users_done();
	iso_stop(&d, "one_member_cannot_take_every_client_row");
}

Test(iso, a_connect_flood_on_the_fd_socket_locks_out_no_attach, .timeout = 300)
{
	struct fdaemon d;
	cr_assert_eq(fd_init(&d, 0), 0);
	const char *extra[] = {SMALL, NULL};
	cr_assert_geq(fd_start(&d, extra, 0), 0, "foresightd did not start");
	iso_rounds = (unsigned)(SAN ? 1 : 2);
	iso_warm_set = 1;
	iso_warm = 0;
	cJSON *st = fault_stats(d.h.sock);
	double refused0 = fault_num(st, "daemon", "refused");
	cJSON_Delete(st);
	struct honest solo, with;
	measure(&d, "fd-flood", "procs=4", 2, &solo, &with); /* eight flooding processes */
	if (iso_long() || getenv("FS_ISO_SPIN")) {
		/* The control: eight processes that only burn CPU (fs_iso.c spin),
		 * what any eight busy processes cost the honest engines on this
		 * machine's cores, whatever the daemon does. */
		struct honest ssolo, swith;
		measure(&d, "spin", "procs=4", 2, &ssolo, &swith);
		fprintf(stderr,
			"iso fd-flood: control, eight busy processes that never touch the daemon: honest hit rate "
			"alone %.1f %%, beside them %.1f %% (%.0f %% of alone)\n",
			100 * ssolo.hit_rate, 100 * swith.hit_rate,
			ssolo.hit_rate > 0 ? 100 * swith.hit_rate / ssolo.hit_rate : 0.0);
		iso_control = ssolo.hit_rate > 0 ? swith.hit_rate / ssolo.hit_rate : 0;
	}
	expect_unhurt("fd-flood", &solo, &with);
	iso_control = 0;
	st = fault_stats(d.h.sock);
	double refused = fault_num(st, "daemon", "refused") - refused0;
	cJSON_Delete(st);
	cr_expect_geq(refused, 100.0, "the flood's connections were not refused and counted (%.0f)", refused);
	iso_users_done();
	iso_stop(&d, "a_connect_flood_on_the_fd_socket_locks_out_no_attach");
}

/* ---- 4, 6: the control loop and its connections --------------------------- */

/* The slowest ping an attacker saw ("ping max N ms") over its outputs of
 * measure()'s rounds; -1 when one failed or none was printed. */
static long ping_max(struct fdaemon *d, const char *what, unsigned rounds)
{
	long worst = -1;
	for (unsigned r = 0; r < rounds; r++) {
		char out[256];
		snprintf(out, sizeof(out), "%s/%s-%u-0.out", d->h.dir, what, r);
		const char *p = strstr(text(out), "ping max ");
		if (!p)
			return -1;
		long ms = strtol(p + 9, NULL, 10);
		if (ms < 0)
			return -1;
		if (ms > worst)
			worst = ms;
	}
	return worst;
}

static void conns_attack(const char *what, const char *counter)
{
	struct fdaemon d;
	cr_assert_eq(fd_init(&d, 0), 0);
	const char *extra[] = {SMALL, NULL};
	/* The daemon starts with systemd's default soft fd limit, 1024 (the
	 * hard one as it is): 2000 idle connections once exhausted it. */
	struct rlimit rl0, rl;
	int lowered = getrlimit(RLIMIT_NOFILE, &rl0) == 0 && rl0.rlim_cur > 1024;
	if (lowered) {
		rl = rl0;
		rl.rlim_cur = 1024;
		lowered = setrlimit(RLIMIT_NOFILE, &rl) == 0;
	}
	long started = fd_start(&d, extra, 0);
	if (lowered)
		setrlimit(RLIMIT_NOFILE, &rl0);
	cr_assert_geq(started, 0, "foresightd did not start");
	iso_rounds = (unsigned)(SAN ? 1 : 2);
	iso_warm_set = 1;
	iso_warm = 0;
	struct honest solo, with;
	measure(&d, what, NULL, 1, &solo, &with);
	expect_unhurt(what, &solo, &with);
	long worst = ping_max(&d, what, iso_rounds_now()); /* FS_ISO_ROUNDS wins, as in measure() */
	long bar = iso_bar_ms();
	cJSON *st = fault_stats(d.h.sock);
	double n = fault_num(st, "daemon", counter);
	cJSON_Delete(st);
	fprintf(stderr, "iso %s: slowest ping during the attack %ld ms; %s %.0f\n", what, worst, counter, n);
	cr_expect(worst >= 0 && worst <= bar, "%s: a ping failed or took %ld ms (bar %ld)", what, worst, bar);
	cr_expect_geq(n, 1.0, "%s: %s did not count the attack", what, counter);
	iso_users_done();
	iso_stop(&d, what);
}

Test(iso, a_client_that_never_reads_its_replies_stalls_nothing, .timeout = 300)
{
	conns_attack("no-read", "replies_dropped");
}

Test(iso, thousands_of_idle_connections_exhaust_nothing, .timeout = 300)
{
	conns_attack("idle-conns", "conns_refused");
}

/* ---- 7: daemon restarts without the fd store cost engines no memory ------ */

/* The mappings of foresightd's arena memfd and the open fds of a process;
 * -1 each when it cannot be read. */
static void proc_mem(pid_t pid, int *arena_maps, int *fds)
{
	char path[64], line[512];
	*arena_maps = *fds = -1;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	int n = 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "/memfd:foresight-arena") != NULL;
	fclose(f);
	*arena_maps = n;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return;
	n = 0;
	// cppcheck-suppress readdirCalled ; one thread reads this directory
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		n += e->d_name[0] != '.';
	closedir(d);
	*fds = n;
}

static long wait_attached(const char *sock, int n, int timeout_ms)
{
	uint64_t t0 = fsh_now_ms();
	do {
		if (fault_clients(sock) == n)
			return (long)(fsh_now_ms() - t0);
		usleep(5000);
	} while (fsh_now_ms() < t0 + (uint64_t)timeout_ms);
	return -1;
}

/*
 * Point 7: the daemon is restarted by hand, without the fd store (killed
 * -9, or stopped), so each new daemon builds a new arena.  Engine 0 holds
 * its windows' views one window longer (lag=1, a pipelining engine) and
 * re-reads the arena bytes of the window before across each restart; its
 * arena mappings and fds must come back to what they were before the first
 * restart (the old arena unmapped, its fd closed): they are polled with a
 * generous deadline, never timed; a second thread of it reads the arena
 * flat out under fs_arena_pin meanwhile (reader=1).  Engine 1 holds an fs_arena_pin on the
 * first arena and reads it every window: it must keep every arena
 * (foresight.h's rule for a pin) and read no wrong byte either.
 * FS_ISO_RESTARTS restarts (CI 5; docs/results/reliability.md: 30).
 */
Test(iso, daemon_restarts_without_the_fd_store_cost_engines_no_memory, .timeout = 600)
{
	unsigned restarts = (unsigned)fault_env("FS_ISO_RESTARTS", iso_long() ? 30 : 5);
	struct fdaemon d;
	cr_assert_eq(fd_init(&d, 0), 0); /* no notify socket: no fd store */
	const char *extra[] = {SMALL, NULL};
	cr_assert_geq(fd_start(&d, extra, 0), 0, "foresightd did not start");
	char out[2][256];
	pid_t e[2];
	const char *mode[2] = {"lag=1", "pin=1"};
	for (int i = 0; i < 2; i++) {
		snprintf(out[i], sizeof(out[i]), "%s/restart-engine%d.out", d.h.dir, i);
		e[i] = fault_spawn(fsh_argv(FS_FAULT_ENGINE_BIN, "run", d.h.sock, "rate=200", "k=4",
					    "churn=20", mode[i], NULL),
				   out[i], -1, -1);
		cr_assert_eq(fault_wait_text(out[i], "started", 20000), 0, "engine %d did not start: %s", i,
			     text(out[i]));
	}
	cr_assert_geq(wait_attached(d.h.sock, 2, 20000), 0, "the engines did not attach");
	int maps0[2], fds0[2];
	for (int i = 0; i < 2; i++) {
		proc_mem(e[i], &maps0[i], &fds0[i]);
		cr_assert_gt(maps0[i], 0, "engine %d maps no arena", i);
		cr_assert_gt(fds0[i], 0);
	}
	int worst_maps = maps0[0], worst_fds = fds0[0];
	long worst_back = 0, worst_flat = 0;
	for (unsigned r = 0; r < restarts; r++) {
		if (r % 2 == 0) {
			cr_assert_eq(fd_kill9(&d), 0);
		} else { /* a clean stop: the engines see STOPPING */
			kill(d.h.pid, SIGTERM);
			cr_assert_geq(fsh_wait(d.h.pid, 20000), 0, "round %u: the daemon did not stop", r);
			d.h.pid = 0;
		}
		usleep(100000); /* the engines run on the CPU path meanwhile */
		for (int i = 0; i < 2; i++)
			cr_assert_eq(kill(e[i], 0), 0, "round %u: engine %d died with the daemon", r, i);
		long up = fd_start(&d, extra, 0);
		if (up < 0)
			fault_print_tail("foresightd's log", d.h.log, 6000);
		cr_assert_geq(up, 0, "round %u: foresightd did not start again (its log above)", r);
		long back = wait_attached(d.h.sock, 2, 30000);
		if (back < 0) {
			for (int i = 0; i < 2; i++)
				fault_print_tail(i ? "engine 1 (pin=1)" : "engine 0 (lag=1)", out[i], 1500);
			fault_print_tail("foresightd's log", d.h.log, 6000);
		}
		cr_assert_geq(back, 0,
			      "round %u: the engines did not re-attach within 30 s (their output and the "
			      "daemon's log above)",
			      r);
		worst_back = back > worst_back ? back : worst_back;
		/* Engine 0 lets the old arena go within a window or two of the
		 * re-attach; a loaded machine may take seconds: poll, 30 s. */
		uint64_t t0 = fsh_now_ms();
		int maps, fds;
		for (;;) {
			proc_mem(e[0], &maps, &fds);
			worst_maps = maps > worst_maps ? maps : worst_maps;
			worst_fds = fds > worst_fds ? fds : worst_fds;
			if ((maps <= maps0[0] && fds <= fds0[0]) || fsh_now_ms() > t0 + 30000)
				break;
			usleep(20000);
		}
		long flat = (long)(fsh_now_ms() - t0);
		worst_flat = flat > worst_flat ? flat : worst_flat;
		cr_expect_leq(maps, maps0[0], "round %u: engine 0 maps the arena %d times (%d before)", r,
			      maps, maps0[0]);
		cr_expect_leq(fds, fds0[0], "round %u: engine 0 has %d fds (%d before)", r, fds, fds0[0]);
		int pmaps, pfds;
		proc_mem(e[1], &pmaps, &pfds);
		cr_expect_geq(pmaps, maps0[1] * (int)(r + 2),
			      "round %u: the pinned engine maps %d arena ranges, not every arena (%d each)",
			      r, pmaps, maps0[1]);
		fprintf(stderr,
			"iso restart %u: engines back %ld ms after ready; engine 0: %d arena maps, %d fds after "
			"%ld ms (%d, %d before); pinned engine 1: %d maps, %d fds\n",
			r, back, maps, fds, flat, maps0[0], fds0[0], pmaps, pfds);
	}
	for (int i = 0; i < 2; i++) {
		struct fault_engine res;
		kill(e[i], SIGTERM);
		int st = fsh_wait(e[i], 20000);
		cr_expect_eq(st, 0, "engine %d exit status %d: %s", i, st, text(out[i]));
		cr_assert_eq(fault_parse_engine(out[i], &res), 0, "no result line in %s", out[i]);
		cr_expect_eq(res.mismatches, 0, "engine %d read a wrong byte", i);
		cr_expect_eq(res.attaches, restarts + 1ull, "engine %d attached %llu times", i, res.attaches);
		fprintf(stderr, "iso restart: engine %d: %llu windows, %llu verified, %llu mismatches\n", i,
			res.windows, res.verified, res.mismatches);
	}
	fprintf(stderr,
		"iso restarts: %u without the fd store: engine 0 at most %d arena maps and %d fds (%d and %d "
		"before), flat again within %ld ms of the re-attach; engines back within %ld ms\n",
		restarts, worst_maps, worst_fds, maps0[0], fds0[0], worst_flat, worst_back);
	iso_stop(&d, "daemon_restarts_without_the_fd_store_cost_engines_no_memory");
}

/* ---- issue 33: one tier, shared safely ------------------------------------ */

/* What the holder attacks of fs_iso.c said, summed over measure()'s rounds
 * (their last line: "iso WHAT: A attaches, V revoked, R refused (...), ...,
 * holds refused T (told in its region)"). */
struct holder_tally {
	unsigned attaches, revoked, refused, told, lines;
};

static void holder_tally(struct fdaemon *d, const char *what, const char *printed, unsigned rounds, int n_att,
			 struct holder_tally *t)
{
	memset(t, 0, sizeof(*t));
	char tag[64];
	snprintf(tag, sizeof(tag), "iso %s: ", printed);
	for (unsigned r = 0; r < rounds; r++) {
		for (int i = 0; i < n_att; i++) {
			char out[256];
			snprintf(out, sizeof(out), "%s/%s-%u-%d.out", d->h.dir, what, r, i);
			const char *p = text(out), *line = NULL;
			for (const char *q = strstr(p, tag); q; q = strstr(q + 1, tag))
				if (strstr(q, " attaches, "))
					line = q;
			unsigned a, v, f, told = 0;
			if (!line || sscanf(line + strlen(tag), "%u attaches, %u revoked, %u refused", &a, &v,
					    &f) != 3)
				continue;
			const char *h = strstr(line, "holds refused ");
			if (h)
				told = (unsigned)strtoul(h + 14, NULL, 10);
			t->attaches += a;
			t->revoked += v;
			t->refused += f;
			t->told += told;
			t->lines++;
		}
	}
}

/* FS_ISO_ROUNDS sizes every case but one that sets rounds of its own
 * (iso_rounds: its claim needs them, a_client_revoked...'s back-off grows
 * over 4); FS_ISO_LONG=1: 3 everywhere unless FS_ISO_ROUNDS says. */
static unsigned iso_rounds_now(void)
{
	if (iso_long())
		return (unsigned)fault_env("FS_ISO_ROUNDS", 3);
	if (iso_rounds)
		return iso_rounds;
	return (unsigned)fault_env("FS_ISO_ROUNDS", SAN ? 2 : 4);
}

/*
 * A hold word naming an epoch in no buffer (2 past the current one), or
 * the oldest one a buffer still holds (superseded long ago: never
 * acquired), five attackers at once.  Refused when read, at once, and the
 * attackers told so in their regions; never honoured, so never revoked
 * either.  Before: the future epoch counted from its publish on and was
 * honoured for the hold timeout (the honest engine at 10.5 % of its hits),
 * the old one was taken as a valid hold and its holder revoked.
 */
static void not_acquired(const char *what)
{
	struct fdaemon d;
	cr_assert_eq(fd_init(&d, 0), 0);
	const char *extra[16] = {SMALL};
	iso_users(&d, extra, 8);
	cr_assert_geq(fd_start(&d, extra, 0), 0, "foresightd did not start");
	iso_rounds = 2;
	struct honest solo, with;
	measure(&d, what, NULL, 5, &solo, &with);
	expect_unhurt(what, &solo, &with);
	struct holder_tally t;
	holder_tally(&d, what, what, iso_rounds_now(), 5, &t);
	cJSON *st = fault_stats(d.h.sock);
	double bad = fault_num(st, "daemon", "bad_holds"), over = fault_num(st, "daemon", "over_budget");
	double stale = fault_num(st, "daemon", "stale");
	cJSON_Delete(st);
	fprintf(stderr, "iso %s: %u attaches, %u revoked, told %u refusals; bad_holds %.0f, stale %.0f\n",
		what, t.attaches, t.revoked, t.told, bad, stale);
	cr_expect_gt(t.lines, 0, "%s: no attacker summary", what);
	cr_expect_geq(t.told, 1.0, "%s: the attackers were never told their holds were refused", what);
	cr_expect_eq(t.revoked, 0, "%s: a refused hold came to count: its holder was revoked %u times", what,
		     t.revoked);
	cr_expect_geq(bad, 1.0, "%s: no refusal counted (bad_holds)", what);
	cr_expect_eq(over, 0.0, "%s: a refused hold pinned slots (over_budget %.0f)", what, over);
	cr_expect_eq(stale, 0.0, "%s: a refused hold was honoured until a timeout (stale %.0f)", what, stale);
	iso_users_done();
	iso_stop(&d, what);
}

Test(iso, a_hold_on_an_epoch_in_no_buffer_is_refused_at_once, .timeout = 300)
{
	not_acquired("future-hold");
}

Test(iso, a_hold_on_an_epoch_never_acquired_is_refused_at_once, .timeout = 300)
{
	not_acquired("old-hold");
}

/*
 * Five processes of one user hold epochs and never let go (rehold: each
 * holds every epoch e with e % 5 == its part, up to `extra`'s holds=N), or
 * each attachment comes from a fresh process under a fresh name (fresh=1).
 * The user's pinned slots pass its budget (its share of a card's slots)
 * within a few evictions: revoked at once once its hold has pinned past
 * the grace (over_budget), long before the hold timeout (10 s), and the
 * user is barred, whatever process or name comes next (backoff_refused).  Two users are needed: as root only.
 * Before: the hold was honoured for 10 s, and the bar, keyed on the pid or
 * the name, let every fresh process attach at once.
 */
static void over_budget(const char *label, const char *extra_att)
{
	if (geteuid() != 0)
		cr_skip_test("needs root: the budget and the bar are per user, and here every engine would "
			     "be this one user, an admin");
	struct fdaemon d;
	cr_assert_eq(fd_init(&d, 0), 0);
	/* A grace of 200 ms, not the default 1 s (for an honest window on a
	 * host loaded past its cores): the phases here are 2 s. */
	const char *extra[16] = {SMALL, "--pin-grace-ms", "200"};
	iso_users(&d, extra, 10);
	cr_assert_geq(fd_start(&d, extra, 0), 0, "foresightd did not start");
	iso_rounds = 2;
	struct honest solo, with;
	measure(&d, "rehold", extra_att, 5, &solo, &with);
	expect_unhurt(label, &solo, &with);
	struct holder_tally t;
	holder_tally(&d, "rehold", "rehold", iso_rounds_now(), 5, &t);
	cJSON *st = fault_stats(d.h.sock);
	double over = fault_num(st, "daemon", "over_budget"),
	       refused = fault_num(st, "daemon", "backoff_refused");
	cJSON_Delete(st);
	fprintf(stderr,
		"iso %s: over_budget %.0f, backoff_refused %.0f; attackers: %u attaches, %u revoked, %u "
		"refused\n",
		label, over, refused, t.attaches, t.revoked, t.refused);
	cr_expect_geq(over, 1.0, "%s: no holder revoked for its user's budget", label);
	cr_expect_geq(refused, 1.0, "%s: the user was never barred", label);
	cr_expect_geq(t.refused, 1.0, "%s: every attach after a revocation got through", label);
	/* In the measured rounds, after the warm-up's revocations: barred. */
	cr_expect_leq(t.attaches, 5u, "%s: %u attaches in the measured rounds, the user barred", label,
		      t.attaches);
	iso_users_done();
	iso_stop(&d, label);
}

Test(iso, a_user_pinning_past_its_budget_is_revoked_at_once_and_barred, .timeout = 300)
{
	over_budget("pin-8", "holds=8");
}

Test(iso, a_fresh_process_under_a_fresh_name_is_still_barred_per_user, .timeout = 300)
{
	over_budget("fresh", "fresh=1");
}

/* An honest engine that is merely slow: fs-demo-engine holding each
 * window's epoch 20 ms (--hold-us), its reads spread over it, every byte
 * verified; long enough for the phase. */
static pid_t slow_engine(struct fdaemon *d, const char *what, const char *out, unsigned s, const char *extra,
			 int part, int parts)
{
	(void)what;
	(void)extra;
	(void)parts;
	char name[32], windows[32];
	snprintf(name, sizeof(name), "slow-%d", part);
	snprintf(windows, sizeof(windows), "%u", 40u * s); /* at least 20 ms each */
	/* One user may have 4 attaches waiting for their fd handshake
	 * (fsd_clients.c): engines started together come 100 ms apart. */
	if (part > 0)
		usleep(100000);
	return fault_spawn(fsh_argv(FS_DEMO_ENGINE_BIN, "--socket", d->h.sock, "--name", name, "--windows",
				    windows, "--hold-us", "20000", "--skew", "1.2", "--topk", "2", NULL),
			   out, attack_uid, users_gid);
}

/*
 * Five honest engines holding each epoch 20 ms beside the two fast ones
 * (96 slots a card):
 * never revoked (one attach each, over_budget 0, stale 0), never wrong
 * (each exits 0: every byte verified), and they cost the fast ones little:
 * their holds pin only the slots of the tables they read (fs_lookup), and
 * slots evicted after their epochs go to the fast engines at once
 * (freed_past_holds).  Before, each 20 ms hold kept every slot evicted
 * meanwhile: fs-demo-engine beside one fell from 69 % to 53 % of hits.
 */
Test(iso, a_slow_honest_engine_is_never_revoked_never_wrong_and_costs_little, .timeout = 300)
{
	struct fdaemon d;
	cr_assert_eq(fd_init(&d, 0), 0);
	/* Twice SMALL's slots: five slow engines beside two churning fast
	 * ones on 48 slots a card pinned 20-30 of them for the fast ones, past
	 * the slow user's share (24), on a loaded host; 96 keeps what they
	 * cost inside their share, which is what this test is about. */
	const char *extra[16] = {"--layers",       "8",    "--experts", "32",
				 "--expert-bytes", "4096", "--slots",   "96"};
	iso_users(&d, extra, 8);
	cr_assert_geq(fd_start(&d, extra, 0), 0, "foresightd did not start");
	iso_rounds = 2;
	iso_spawn = slow_engine;
	struct honest solo, with;
	measure(&d, "slow", NULL, 5, &solo, &with);
	iso_spawn = attack_part;
	expect_unhurt("slow", &solo, &with);
	unsigned rounds = iso_rounds_now(), outputs = 0;
	for (unsigned r = 0; r < rounds; r++) {
		for (int i = 0; i < 5; i++) {
			char out[256];
			snprintf(out, sizeof(out), "%s/slow-%u-%d.out", d.h.dir, r, i);
			const char *p = text(out);
			outputs++;
			cr_expect_not_null(strstr(p, "attaches: 1 "),
					   "slow engine %d, round %u: re-attached: %s", i, r, p);
			cr_expect_not_null(strstr(p, "mismatches: 0"),
					   "slow engine %d, round %u: a wrong byte: %s", i, r, p);
		}
	}
	for (int i = 0; i < 5; i++)
		cr_expect_eq(iso_att_status[i], 0, "slow engine %d exit status %d", i, iso_att_status[i]);
	cJSON *st = fault_stats(d.h.sock);
	double over = fault_num(st, "daemon", "over_budget"), stale = fault_num(st, "daemon", "stale");
	double past = fault_num(st, "totals", "freed_past_holds");
	cJSON_Delete(st);
	fprintf(stderr,
		"iso slow: %u slow-engine runs; over_budget %.0f, stale %.0f, freed_past_holds %.0f\n",
		outputs, over, stale, past);
	cr_expect_eq(over, 0.0, "a slow honest engine was revoked for its budget");
	cr_expect_eq(stale, 0.0, "a slow honest engine was revoked (stale or hold timeout)");
	cr_expect_geq(past, 1.0, "no slot evicted after a slow engine's epoch was reused before its release");
	iso_users_done();
	iso_stop(&d, "slow");
}
