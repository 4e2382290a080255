/* SPDX-License-Identifier: Apache-2.0 */
/*
 * card_test.c: a card lost mid-run (issue #12, "Safety").  A real foresightd
 * on the host backend with two cards sharing one tier, two engines
 * (`fs-fault-engine peer`, one per card) reading experts across the cards
 * and checking every byte against the arena; half way, card 1 is taken down
 * with the control verb (what the CUDA backend does by itself when a card
 * fails).  Then: no lookup returns card 1 in an epoch from the first one
 * without it on, every read still verifies, both engines finish with the
 * right output, the daemon stays up, stats say card 1 is down and why, and
 * card 0 keeps copying.  And the verb's refusals: a card that does not
 * exist, one already down, malformed requests, each with its code and
 * counted once.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault_util.h"

#ifdef FS_FAULT_SANITIZED
#define SAN 1
#else
#define SAN 0
#endif

/* 4 layers x 32 experts on 2 cards of 24 slots: layers 0, 1 live on card
 * 0, 2, 3 on card 1; the engines' sets change every few windows, so copies
 * keep going.  A slowish emulated bus keeps copies in flight. */
static const char *const opts[] = {"--backend",    "host", "--cards",        "2",    "--layers", "4",
				   "--experts",    "32",   "--expert-bytes", "8192", "--slots",  "24",
				   "--publish-us", "0",    "--bus-gbps",     "2",    NULL};

static struct fsh_daemon D;

struct engine_out {
	unsigned long long windows, local, peer, unreachable, miss, verified, mismatches, torn, violations,
		after;
	unsigned seen_down;
	char output[32], expected[32];
	unsigned long long last_epoch[2];
};

static int parse_engine(const char *path, struct engine_out *e)
{
	static char buf[4096];
	if (fsh_read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	const char *l = strstr(buf, "windows ");
	if (!l)
		return -1;
	int n = sscanf(
		l,
		"windows %llu local %llu peer %llu unreachable %llu miss %llu verified %llu mismatches "
		"%llu torn %llu violations %llu seen_down %x windows_after_down %llu output %31s "
		"expected %31s last_epoch %llu %llu",
		&e->windows, &e->local, &e->peer, &e->unreachable, &e->miss, &e->verified, &e->mismatches,
		&e->torn, &e->violations, &e->seen_down, &e->after, e->output, e->expected, &e->last_epoch[0],
		&e->last_epoch[1]);
	return n == 15 ? 0 : -1;
}

/* A control request; the reply parsed (the caller frees). */
static cJSON *request(const char *json)
{
	static char buf[1 << 16];
	cr_assert_eq(fsh_request(D.sock, json, buf, sizeof(buf)), 0, "no reply to %s", json);
	cJSON *o = cJSON_Parse(buf);
	cr_assert_not_null(o, "not JSON: %s", buf);
	return o;
}

static const cJSON *card_of(const cJSON *stats, int i)
{
	return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(stats, "cards"), i);
}

static double card_num(const cJSON *stats, int i, const char *key)
{
	return fault_num(card_of(stats, i), NULL, key);
}

static const char *card_str(const cJSON *stats, int i, const char *key)
{
	const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(card_of(stats, i), key));
	return s ? s : "";
}

static pid_t engine(int card, unsigned seed, const char *out)
{
	char sock[160], c[16], s[16];
	snprintf(sock, sizeof(sock), "%s", D.sock);
	snprintf(c, sizeof(c), "card=%d", card);
	snprintf(s, sizeof(s), "seed=%u", seed);
	char *const argv[] = {(char *)FS_FAULT_ENGINE_BIN,
			      (char *)"peer",
			      sock,
			      c,
			      (char *)"windows=600",
			      (char *)"rate=200",
			      (char *)"k=4",
			      (char *)"churn=3",
			      s,
			      NULL};
	pid_t pid = fsh_spawn(argv, out);
	cr_assert_gt(pid, 0);
	return pid;
}

Test(card, lost_mid_run_engines_fall_back_and_the_other_card_serves, .timeout = 240)
{
	cr_assert_eq(fsh_daemon_start(&D, opts), 0, "foresightd did not start");
	char out0[200], out1[200];
	snprintf(out0, sizeof(out0), "%s/e0.out", D.dir);
	snprintf(out1, sizeof(out1), "%s/e1.out", D.dir);
	pid_t e0 = engine(0, 11, out0), e1 = engine(1, 22, out1);

	/* Let both run a quarter of their windows, reading across the cards. */
	cr_assert_geq(fault_wait_counter(D.sock, "windows", 300, 60000), 300, "the engines did not run");
	cJSON *before = fault_stats(D.sock);
	cr_assert_not_null(before);
	cr_assert_str_eq(card_str(before, 1, "state"), "up");
	cr_assert_eq(card_num(before, 1, "up"), 1);
	cr_assert_gt(card_num(before, 1, "copied"), 0, "card 1 served before it went down");
	cJSON_Delete(before);

	cJSON *r = request("{\"verb\":\"card\",\"proto\":1,\"card\":1,\"state\":\"down\"}");
	cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")), "card down refused");
	cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(r, "state")), "down");
	cJSON_Delete(r);
	cJSON *at = fault_stats(D.sock);
	double copied0 = card_num(at, 0, "copied"), copied1 = card_num(at, 1, "copied");
	cJSON_Delete(at);

	int rc0 = fsh_wait(e0, 120000), rc1 = fsh_wait(e1, 120000);
	struct engine_out a, b;
	cr_assert_eq(parse_engine(out0, &a), 0, "engine 0 printed no summary");
	cr_assert_eq(parse_engine(out1, &b), 0, "engine 1 printed no summary");
	cr_expect_eq(rc0, 0, "engine 0 exited %d", rc0);
	cr_expect_eq(rc1, 0, "engine 1 exited %d", rc1);

	cJSON *s = fault_stats(D.sock);
	cr_assert_not_null(s, "the daemon stopped answering");
	uint64_t down_epoch = (uint64_t)card_num(s, 1, "down_epoch");
	cr_expect_str_eq(card_str(s, 1, "state"), "down");
	cr_expect(strstr(card_str(s, 1, "down_reason"), "admin") != NULL, "reason: %s",
		  card_str(s, 1, "down_reason"));
	cr_expect_gt(down_epoch, 0, "the first epoch without card 1 was published");
	cr_expect_eq(card_num(s, 1, "up"), 0);
	cr_expect_eq(card_num(s, 0, "up"), 1);
	cr_expect_eq(card_num(s, 1, "resident") + card_num(s, 1, "loading"), 0, "card 1 holds nothing");
	cr_expect_eq(card_num(s, 1, "copied"), copied1, "nothing landed on card 1 after it went down");
	cr_expect_gt(card_num(s, 0, "copied"), copied0, "card 0 kept copying");
	cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(
			     cJSON_GetArrayItem(cJSON_GetObjectItem(s, "cards"), 0), "reads")),
		     0, "card 0 reads no card that is down");

	const struct engine_out *e[2] = {&a, &b};
	for (int i = 0; i < 2; i++) {
		cr_expect_eq(e[i]->windows, 600, "engine %d: %llu windows", i, e[i]->windows);
		cr_expect_eq(e[i]->mismatches, 0, "engine %d: wrong bytes", i);
		cr_expect_eq(e[i]->violations, 0,
			     "engine %d: a lookup returned card 1 after it was seen down", i);
		cr_expect_str_eq(e[i]->output, e[i]->expected, "engine %d: wrong output", i);
		cr_expect_eq(e[i]->seen_down, 0x2u, "engine %d saw card 1 down", i);
		cr_expect_gt(e[i]->after, 0, "engine %d: windows after the loss", i);
		cr_expect_lt(e[i]->windows - e[i]->after, e[i]->windows, "engine %d: windows before the loss",
			     i);
		cr_expect_lt(e[i]->last_epoch[1], down_epoch,
			     "engine %d read card 1 in epoch %llu, the first without it is %llu", i,
			     e[i]->last_epoch[1], (unsigned long long)down_epoch);
	}
	/* The engine on card 0 kept reading card 0; the one on card 1 is on
	 * the CPU path (its card is gone: fs_lookup_from answers MISS). */
	cr_expect_gt(a.last_epoch[0], down_epoch, "engine 0 kept reading card 0");
	cr_expect_gt(b.miss, 0);
	cr_expect_gt(a.peer, 0, "engine 0 read card 1's slots before the loss (the peer path)");
	cr_expect_gt(a.miss, 0);
	cr_expect_gt(b.local + b.peer, 0, "engine 1 read slots before the loss");

	/* fsctl stats says so too. */
	char txt[1 << 16];
	char *const fsctl[] = {(char *)FSCTL_BIN, (char *)"--socket", D.sock, (char *)"stats", NULL};
	cr_expect_eq(fsh_run(fsctl, txt, sizeof(txt), 10000), 0);
	cr_expect(strstr(txt, "host1        down since epoch") != NULL, "fsctl stats:\n%s", txt);
	cJSON_Delete(s);
	cr_expect_eq(kill(D.pid, 0), 0, "the daemon is alive");
	cr_expect_eq(fsh_daemon_stop(&D), 0, "the daemon stops cleanly");
}

/* One request, its `ok` and its code (or "" when ok). */
static int ask(const char *json, char *code, size_t len)
{
	cJSON *o = request(json);
	int ok = cJSON_IsTrue(cJSON_GetObjectItem(o, "ok"));
	const char *c = cJSON_GetStringValue(cJSON_GetObjectItem(o, "code"));
	snprintf(code, len, "%s", c ? c : "");
	cJSON_Delete(o);
	return ok;
}

static double daemon_counter(const char *key)
{
	cJSON *s = fault_stats(D.sock);
	double v = fault_num(s, "daemon", key);
	cJSON_Delete(s);
	return v;
}

Test(card, the_verb_refuses_bad_cards_states_and_a_second_down, .timeout = 120)
{
	cr_assert_eq(fsh_daemon_start(&D, opts), 0, "foresightd did not start");
	double refused = daemon_counter("refused"), bad = daemon_counter("bad_requests");
	char code[32];
	static const struct {
		const char *req, *code;
	} cases[] = {
		{"{\"verb\":\"card\",\"proto\":1,\"card\":2,\"state\":\"down\"}", "ENOENT"},
		{"{\"verb\":\"card\",\"proto\":1,\"card\":99,\"state\":\"down\"}", "ENOENT"},
		{"{\"verb\":\"card\",\"proto\":1,\"card\":\"1\",\"state\":\"down\"}", "EINVAL"},
		{"{\"verb\":\"card\",\"proto\":1,\"card\":-1,\"state\":\"down\"}", "EINVAL"},
		{"{\"verb\":\"card\",\"proto\":1,\"card\":0.5,\"state\":\"down\"}", "EINVAL"},
		{"{\"verb\":\"card\",\"proto\":1,\"card\":1,\"state\":\"up\"}", "EINVAL"},
		{"{\"verb\":\"card\",\"proto\":1,\"card\":1}", "EINVAL"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_expect(!ask(cases[i].req, code, sizeof(code)), "accepted: %s", cases[i].req);
		cr_expect_str_eq(code, cases[i].code, "%s", cases[i].req);
	}
	cr_expect(ask("{\"verb\":\"card\",\"proto\":1,\"card\":1,\"state\":\"down\"}", code, sizeof(code)));
	cr_expect(!ask("{\"verb\":\"card\",\"proto\":1,\"card\":1,\"state\":\"down\"}", code, sizeof(code)));
	cr_expect_str_eq(code, "EALREADY", "a second down of the same card");
	cr_expect_eq(daemon_counter("refused") - refused, 3, "ENOENT x2 and EALREADY counted as refusals");
	cr_expect_eq(daemon_counter("bad_requests") - bad, 5, "the malformed ones counted as bad requests");

	/* fsctl: the same refusal, exit status 3 with the code; a bad card too. */
	char txt[4096];
	char *const again[] = {(char *)FSCTL_BIN, (char *)"--socket", D.sock, (char *)"card",
			       (char *)"down",    (char *)"1",        NULL};
	int rc = fsh_run(again, txt, sizeof(txt), 10000);
	cr_expect_eq(rc, 3, "fsctl card down 1 again: %d", rc);
	char *const none[] = {(char *)FSCTL_BIN, (char *)"--socket", D.sock, (char *)"card",
			      (char *)"down",    (char *)"5",        NULL};
	cr_expect_eq(fsh_run(none, txt, sizeof(txt), 10000), 3);
	/* The last live card may go too: every expert on the CPU path. */
	char *const last[] = {(char *)FSCTL_BIN, (char *)"--socket", D.sock, (char *)"card",
			      (char *)"down",    (char *)"0",        NULL};
	cr_expect_eq(fsh_run(last, txt, sizeof(txt), 10000), 0);
	cr_expect(strstr(txt, "card 0 is down") != NULL, "%s", txt);
	char out[200];
	snprintf(out, sizeof(out), "%s/e.out", D.dir);
	char *const eng[] = {(char *)FS_FAULT_ENGINE_BIN, (char *)"peer",   D.sock, (char *)"card=0",
			     (char *)"windows=40",        (char *)"rate=0", NULL};
	pid_t pid = fsh_spawn(eng, out);
	cr_expect_eq(fsh_wait(pid, 60000), 0, "an engine with every card down runs on the CPU path");
	struct engine_out e;
	cr_assert_eq(parse_engine(out, &e), 0);
	cr_expect_eq(e.local + e.peer, 0);
	cr_expect_eq(e.miss, 40ull * 4 * 4);
	cr_expect_eq(e.seen_down, 0x3u);
	cr_expect_str_eq(e.output, e.expected);
	(void)SAN;
	cr_expect_eq(fsh_daemon_stop(&D), 0, "the daemon stops cleanly");
}
