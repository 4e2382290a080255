/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of fsctl against a fake foresightd: an nng REP socket in a thread on
 * a temporary ipc path that answers canned JSON.  fsctl itself runs as a
 * subprocess (FSCTL_BIN), as a user would run it; the renderers are also
 * called directly where exact content matters.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "fs_counters.h"
#include "fsctl.h"

#define N_LAYERS 12

enum mode { M_NORMAL, M_REFUSE, M_GARBAGE, M_SILENT };

static struct fake {
	nng_socket s;
	pthread_t th;
	char path[96];
	enum mode mode;
	atomic_int stop;
	pthread_mutex_t mu;
	char verbs[64][16];
	int nverbs;
	int bad_proto;     /* requests without "proto": 1 */
	int hostile_names; /* client 1's name and the model's carry terminal escapes */
} g_fake = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* A layer's distinct "predicted" value, to find its row in the output. */
static int layer_mark(int l)
{
	return 912345 + 1000 * l;
}

/* Hit rates in a scrambled order: layer 5 is the worst, layer 0 unused. */
static double layer_hit_rate(int l)
{
	return l == 0 ? 0.0 : (double)((l * 7 + 3) % N_LAYERS) / N_LAYERS;
}

static cJSON *stats_reply(void)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "ok", 1);
	cJSON_AddStringToObject(o, "version", "0.1.0");
	cJSON_AddNumberToObject(o, "pid", 123);
	cJSON_AddNumberToObject(o, "uptime_s", 12.3);
	cJSON_AddStringToObject(o, "backend", "host");
	cJSON_AddNumberToObject(o, "epoch", 42);
	cJSON *m = cJSON_AddObjectToObject(o, "model");
	cJSON_AddStringToObject(m, "name", g_fake.hostile_names ? "syn\x1b]0;title\x07" : "synthetic");
	cJSON_AddNumberToObject(m, "layers", N_LAYERS);
	cJSON_AddNumberToObject(m, "experts", 128);
	cJSON_AddNumberToObject(m, "experts_used", 8);
	cJSON_AddNumberToObject(m, "max_expert_bytes", 65536);
	cJSON_AddNumberToObject(m, "arena_bytes", 3.0 * (1 << 30));
	cJSON *d = cJSON_AddObjectToObject(o, "daemon");
	int v = 100;
#define X(name, help) cJSON_AddNumberToObject(d, #name, v++);
	FS_COUNTERS_DAEMON(X)
#undef X
	cJSON *t = cJSON_AddObjectToObject(o, "totals");
#define X(name, help) cJSON_AddNumberToObject(t, #name, v++);
	FS_COUNTERS_CARD(X)
#undef X
	cJSON_AddNumberToObject(t, "windows", 200);
	cJSON_AddNumberToObject(t, "hit_rate", 0.8765);
	cJSON_AddNumberToObject(t, "misses_per_layer_window", 1.25);
	cJSON_ReplaceItemInObject(t, "copied_bytes", cJSON_CreateNumber(1.5 * (1 << 30)));

	cJSON *cards = cJSON_AddArrayToObject(o, "cards");
	for (int i = 0; i < 2; i++) {
		cJSON *c = cJSON_CreateObject();
		char name[16];
		snprintf(name, sizeof(name), "host%d", i);
		cJSON_AddNumberToObject(c, "id", i);
		cJSON_AddStringToObject(c, "name", name);
		cJSON_AddNumberToObject(c, "slots", 64);
		cJSON_AddNumberToObject(c, "slot_bytes", 65536);
		cJSON_AddNumberToObject(c, "bus_gbps", 13.5);
#define X(name, help) cJSON_AddNumberToObject(c, #name, v++);
		FS_COUNTERS_CARD(X)
#undef X
		cJSON_ReplaceItemInObject(c, "bus_busy_ns", cJSON_CreateNumber(6.15e9)); /* 50 % of 12.3 s */
		cJSON_AddNumberToObject(c, "hit_rate", 0.5 + 0.25 * i);
		cJSON_AddStringToObject(c, "state", i ? "down" : "up");
		if (i) { /* host1 went down */
			cJSON_AddStringToObject(c, "down_reason", "taken down by an admin");
			cJSON_AddNumberToObject(c, "down_epoch", 41);
		}
		cJSON *reads = cJSON_AddArrayToObject(c, "reads");
		if (i == 0) /* host0 reads host1; host1 reads no other card */
			cJSON_AddItemToArray(reads, cJSON_CreateNumber(1));
		cJSON_AddItemToArray(cards, c);
	}
	cJSON *layers = cJSON_AddArrayToObject(o, "layers");
	for (int l = 0; l < N_LAYERS; l++) {
		cJSON *c = cJSON_CreateObject();
		cJSON_AddNumberToObject(c, "layer", l);
#define X(name, help) cJSON_AddNumberToObject(c, #name, 7);
		FS_COUNTERS_LAYER(X)
#undef X
		double h = layer_hit_rate(l);
		cJSON_ReplaceItemInObject(c, "hits", cJSON_CreateNumber(l ? 100 * h : 0));
		cJSON_ReplaceItemInObject(c, "misses", cJSON_CreateNumber(l ? 100 * (1 - h) : 0));
		cJSON_ReplaceItemInObject(c, "predicted", cJSON_CreateNumber(layer_mark(l)));
		cJSON_AddNumberToObject(c, "hit_rate", h);
		cJSON_AddNumberToObject(c, "misses_per_window", 0.5);
		cJSON_AddItemToArray(layers, c);
	}
	cJSON *clients = cJSON_AddArrayToObject(o, "clients");
	for (int i = 0; i < 2; i++) {
		cJSON *c = cJSON_CreateObject();
		cJSON_AddNumberToObject(c, "id", i);
		cJSON_AddStringToObject(c, "name",
					i ? (g_fake.hostile_names ? "py\x1b[31mRED\n<3>x" : "engine-b") :
					    "fs-demo-engine");
		cJSON_AddNumberToObject(c, "attached_s", 65.0);
#define X(name, help) cJSON_AddNumberToObject(c, #name, v++);
		FS_COUNTERS_CLIENT(X)
#undef X
		cJSON_AddNumberToObject(c, "hit_rate", 0.25);
		cJSON_AddItemToArray(clients, c);
	}
	return o;
}

static cJSON *answer(const char *verb, const cJSON *req)
{
	cJSON *o;
	if (strcmp(verb, "stats") == 0)
		return stats_reply();
	if (strcmp(verb, "clients") == 0) {
		cJSON *s = stats_reply();
		o = cJSON_CreateObject();
		cJSON_AddBoolToObject(o, "ok", 1);
		cJSON_AddItemToObject(o, "clients", cJSON_DetachItemFromObject(s, "clients"));
		cJSON_Delete(s);
		return o;
	}
	o = cJSON_CreateObject();
	if (strcmp(verb, "card") == 0) {
		/* card 1 is down already (the stats reply says so too) */
		int one = cJSON_GetNumberValue(cJSON_GetObjectItem(req, "card")) == 1;
		const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(req, "state"));
		cJSON_AddBoolToObject(o, "ok", !one && st && strcmp(st, "down") == 0);
		if (one) {
			cJSON_AddStringToObject(o, "error", "card: card 1 is already down (lost)");
			cJSON_AddStringToObject(o, "code", "EALREADY");
		} else {
			cJSON_AddStringToObject(o, "reason", "taken down by an admin");
		}
	} else if (strcmp(verb, "ping") == 0 || strcmp(verb, "shutdown") == 0) {
		cJSON_AddBoolToObject(o, "ok", 1);
		cJSON_AddStringToObject(o, "version", "0.1.0");
		cJSON_AddNumberToObject(o, "pid", 123);
		cJSON_AddNumberToObject(o, "uptime_s", 12.34);
	} else {
		cJSON_AddBoolToObject(o, "ok", 0);
		cJSON_AddStringToObject(o, "error", "unknown verb");
		cJSON_AddStringToObject(o, "code", "ENOSYS");
	}
	return o;
}

static void reply(const char *body)
{
	nng_send(g_fake.s, (void *)body, strlen(body), 0);
}

static void *fake_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&g_fake.stop)) {
		char *buf;
		size_t len;
		if (nng_recv(g_fake.s, &buf, &len, NNG_FLAG_ALLOC) != 0)
			continue; /* receive timeout: look at stop again */
		cJSON *req = cJSON_ParseWithLength(buf, len);
		nng_free(buf, len);
		const char *verb = cJSON_GetStringValue(cJSON_GetObjectItem(req, "verb"));
		pthread_mutex_lock(&g_fake.mu);
		if (g_fake.nverbs < 64)
			snprintf(g_fake.verbs[g_fake.nverbs++], 16, "%s", verb ? verb : "?");
		if (cJSON_GetNumberValue(cJSON_GetObjectItem(req, "proto")) != 1)
			g_fake.bad_proto++;
		pthread_mutex_unlock(&g_fake.mu);
		if (g_fake.mode == M_REFUSE) {
			reply("{\"ok\":false,\"error\":\"refused: uid 1000 is not root\",\"code\":\"EACCES\"}");
		} else if (g_fake.mode == M_GARBAGE) {
			reply("this is not json");
		} else if (g_fake.mode == M_NORMAL) {
			cJSON *r = answer(verb ? verb : "", req);
			char *txt = cJSON_PrintUnformatted(r);
			reply(txt);
			free(txt);
			cJSON_Delete(r);
		} /* M_SILENT: never answer */
		cJSON_Delete(req);
	}
	return NULL;
}

static void start_fake(enum mode mode)
{
	char url[128];
	snprintf(g_fake.path, sizeof(g_fake.path), "/tmp/fsctl-test-%d.sock", (int)getpid());
	snprintf(url, sizeof(url), "ipc://%s", g_fake.path);
	unlink(g_fake.path);
	g_fake.mode = mode;
	cr_assert_eq(nng_rep0_open(&g_fake.s), 0);
	nng_socket_set_ms(g_fake.s, NNG_OPT_RECVTIMEO, 50);
	cr_assert_eq(nng_listen(g_fake.s, url, NULL, 0), 0, "listen on %s", url);
	cr_assert_eq(pthread_create(&g_fake.th, NULL, fake_main, NULL), 0);
}

static void stop_fake(void)
{
	atomic_store(&g_fake.stop, 1);
	pthread_join(g_fake.th, NULL);
	nng_close(g_fake.s);
	unlink(g_fake.path);
}

static int count_verb(const char *verb)
{
	int n = 0;
	pthread_mutex_lock(&g_fake.mu);
	for (int i = 0; i < g_fake.nverbs; i++)
		n += strcmp(g_fake.verbs[i], verb) == 0;
	pthread_mutex_unlock(&g_fake.mu);
	return n;
}

/* Run fsctl with args (shell words); stdout+stderr into out.  Exit status. */
static int fsctl(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fsctl(char *out, size_t cap, const char *fmt, ...)
{
	char args[512], cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", FSCTL_BIN, args);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char g_out[1 << 16];

/* ---- talking to a daemon -------------------------------------------------- */

Test(fsctl, ping)
{
	start_fake(M_NORMAL);
	int rc = fsctl(g_out, sizeof(g_out), "--socket %s ping", g_fake.path);
	cr_expect_eq(rc, 0, "%s", g_out);
	cr_expect_str_eq(g_out, "foresightd 0.1.0 pid 123 up 12.3s\n");
	cr_expect_eq(count_verb("ping"), 1);
	cr_expect_eq(g_fake.bad_proto, 0, "every request carries proto 1");
	stop_fake();
}

Test(fsctl, socket_from_environment)
{
	start_fake(M_NORMAL);
	char args[256];
	snprintf(args, sizeof(args), "ping");
	cr_assert_eq(setenv("FORESIGHT_SOCKET", g_fake.path, 1), 0);
	int rc = fsctl(g_out, sizeof(g_out), "%s", args);
	cr_expect_eq(rc, 0, "%s", g_out);
	cr_expect(strstr(g_out, "foresightd 0.1.0") != NULL, "%s", g_out);
	/* --socket wins over the environment */
	cr_assert_eq(setenv("FORESIGHT_SOCKET", "/nonexistent/x.sock", 1), 0);
	cr_expect_eq(fsctl(g_out, sizeof(g_out), "ping --socket %s", g_fake.path), 0, "%s", g_out);
	unsetenv("FORESIGHT_SOCKET");
	stop_fake();
}

Test(fsctl, stats_text_shows_every_counter)
{
	start_fake(M_NORMAL);
	int rc = fsctl(g_out, sizeof(g_out), "--socket %s stats --layers all", g_fake.path);
	cr_assert_eq(rc, 0, "%s", g_out);
	const char *sections[] = {"# Totals", "# Cards", "# Layers", "# Clients", "# Daemon"};
	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
		cr_expect(strstr(g_out, sections[i]) != NULL, "no %s in:\n%s", sections[i], g_out);
	cr_expect(strstr(g_out, "foresightd 0.1.0  pid 123") != NULL, "%s", g_out);
	cr_expect(strstr(g_out, "backend host  epoch 42") != NULL, "%s", g_out);
	cr_expect(strstr(g_out, "model synthetic: 12 layers x 128 experts, top-8") != NULL, "%s", g_out);
	cr_expect(strstr(g_out, "arena 3.0 GiB") != NULL, "%s", g_out);
	/* every counter name of every list is somewhere in the text (the
	 * card counter "bus_busy_ns" is shown as bus%) */
#define X(name, help) cr_expect(strstr(g_out, #name) != NULL, "daemon counter %s missing", #name);
	FS_COUNTERS_DAEMON(X)
	FS_COUNTERS_LAYER(X)
	FS_COUNTERS_CLIENT(X)
#undef X
#define X(name, help)                                                                                       \
	cr_expect(strstr(g_out, #name) != NULL || !strcmp(#name, "bus_busy_ns"), "card counter %s missing", \
		  #name);
	FS_COUNTERS_CARD(X)
#undef X
	cr_expect(strstr(g_out, "copied_bytes") && strstr(g_out, "bus%"), "%s", g_out);
	cr_expect(strstr(g_out, "hit_rate                 87.65 %") != NULL, "totals hit rate:\n%s", g_out);
	cr_expect(strstr(g_out, "1.5 GiB") != NULL, "bytes in human units:\n%s", g_out);
	cr_expect(strstr(g_out, "50.0") != NULL, "bus busy 50 %% of uptime:\n%s", g_out);
	cr_expect(strstr(g_out, "fs-demo-engine") && strstr(g_out, "engine-b"), "%s", g_out);
	cr_expect(strstr(g_out, "# Peer reach") != NULL, "%s", g_out);
	cr_expect(strstr(g_out, "host0        reads host1\n") != NULL, "peer reach of host0:\n%s", g_out);
	cr_expect(strstr(g_out, "host1        reads no other card") != NULL, "peer reach of host1:\n%s",
		  g_out);
	cr_expect(strstr(g_out, "state") != NULL, "a state column:\n%s", g_out);
	cr_expect(strstr(g_out, "host1        down since epoch 41: taken down by an admin\n") != NULL,
		  "why host1 is down:\n%s", g_out);
	cr_expect(strstr(g_out, "host0        down") == NULL, "%s", g_out);
	for (int l = 0; l < N_LAYERS; l++) {
		char mark[16];
		snprintf(mark, sizeof(mark), "%d", layer_mark(l));
		cr_expect(strstr(g_out, mark) != NULL, "--layers all: layer %d missing", l);
	}
	stop_fake();
}

Test(fsctl, stats_json_is_the_reply_minus_ok)
{
	start_fake(M_NORMAL);
	cr_assert_eq(fsctl(g_out, sizeof(g_out), "--socket %s stats --json", g_fake.path), 0, "%s", g_out);
	cJSON *o = cJSON_Parse(g_out);
	cr_assert(cJSON_IsObject(o), "not JSON:\n%s", g_out);
	cr_expect_null(cJSON_GetObjectItem(o, "ok"));
	cr_expect(cJSON_IsObject(cJSON_GetObjectItem(o, "daemon")));
	cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(o, "layers")), N_LAYERS);
	cr_expect(strchr(g_out, '\n') != strrchr(g_out, '\n'), "pretty-printed");
	cJSON_Delete(o);
	stop_fake();
}

/* Issue 21: --watch into a pipe repeated running totals behind clear-screen
 * escapes; now it prints the frames of `fsctl top` (rates), no escape. */
Test(fsctl, stats_watch_into_a_pipe_has_rates_and_no_escapes)
{
	start_fake(M_NORMAL);
	int rc = fsctl(g_out, sizeof(g_out), "--socket %s stats --watch --interval 0.05 --count 3",
		       g_fake.path);
	cr_expect_eq(rc, 0, "%s", g_out);
	cr_expect_null(strchr(g_out, '\033'), "an escape in a pipe:\n%s", g_out);
	int frames = 0;
	for (const char *p = g_out; (p = strstr(p, "hits/s")); p++)
		frames++;
	cr_expect_geq(frames, 3, "three frames with rates:\n%s", g_out);
	cr_expect_eq(count_verb("stats"), 3);
	stop_fake();
}

/* `fsctl top` not on a terminal: 80x24 unless $COLUMNS/$LINES say more; no
 * line wider, no more lines, no escape. */
Test(fsctl, top_frame_fits_80x24_and_grows)
{
	start_fake(M_NORMAL);
	cr_assert_eq(fsctl(g_out, sizeof(g_out), "--socket %s top --count 1", g_fake.path), 0, "%s", g_out);
	int lines = 0, widest = 0, w = 0;
	for (const char *p = g_out; *p; p++, w++)
		if (*p == '\n') {
			lines++;
			widest = w > widest ? w : widest;
			w = -1;
		}
	cr_expect_leq(widest, 80, "a line wider than 80:\n%s", g_out);
	cr_expect_leq(lines, 25, "more than 24 lines (and the frame's blank line):\n%s", g_out);
	cr_expect_null(strchr(g_out, '\033'), "%s", g_out);
	cr_expect(strstr(g_out, "CARDS (2)") && strstr(g_out, "CLIENTS (2)") && strstr(g_out, "WORST LAYERS"),
		  "%s", g_out);
	cr_expect(strstr(g_out, "hits/s") && strstr(g_out, "bus%") && strstr(g_out, "win/s"), "%s", g_out);
	/* 200 columns: the wider columns appear */
	cr_assert_eq(fsctl(g_out, sizeof(g_out), "--socket %s top --count 1 | COLUMNS=200 LINES=50 cat",
			   g_fake.path),
		     0, "%s", g_out);
	setenv("COLUMNS", "200", 1);
	setenv("LINES", "50", 1);
	cr_assert_eq(fsctl(g_out, sizeof(g_out), "--socket %s top --count 1", g_fake.path), 0, "%s", g_out);
	unsetenv("COLUMNS");
	unsetenv("LINES");
	cr_expect(strstr(g_out, "tlate/s") && strstr(g_out, "dev/s"), "200 columns show more:\n%s", g_out);
	stop_fake();
}

/* Issue 21, problem 4: whatever a daemon sends, fsctl prints no control
 * byte (defence in depth: the daemon escapes names at attach). */
Test(fsctl, hostile_strings_are_escaped_in_every_view)
{
	g_fake.hostile_names = 1;
	start_fake(M_NORMAL);
	const char *views[] = {"clients", "stats", "stats --layers all", "top --count 1"};
	for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++) {
		cr_assert_eq(fsctl(g_out, sizeof(g_out), "--socket %s %s", g_fake.path, views[i]), 0, "%s",
			     g_out);
		for (const char *p = g_out; *p; p++)
			cr_expect((unsigned char)*p >= 0x20 || *p == '\n',
				  "fsctl %s printed byte 0x%02x:\n%s", views[i], (unsigned char)*p, g_out);
		if (i < 2)
			cr_expect(strstr(g_out, "py\\x1b[31mRED") != NULL, "fsctl %s: the name escaped:\n%s",
				  views[i], g_out);
	}
	stop_fake();
	g_fake.hostile_names = 0;
}

/* --json on every verb that prints. */
Test(fsctl, json_for_ping_clients_and_card)
{
	start_fake(M_NORMAL);
	const char *verbs[] = {"ping --json", "clients --json", "card down 0 --json"};
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
		cr_assert_eq(fsctl(g_out, sizeof(g_out), "--socket %s %s", g_fake.path, verbs[i]), 0, "%s",
			     g_out);
		cJSON *o = cJSON_Parse(g_out);
		cr_expect(cJSON_IsObject(o), "fsctl %s: not JSON:\n%s", verbs[i], g_out);
		cr_expect_null(cJSON_GetObjectItem(o, "ok"));
		cJSON_Delete(o);
	}
	stop_fake();
}

Test(fsctl, clients_table)
{
	start_fake(M_NORMAL);
	cr_assert_eq(fsctl(g_out, sizeof(g_out), "--socket %s clients", g_fake.path), 0, "%s", g_out);
	const char *cols[] = {"id",      "name", "pid",    "uid",  "attached",
			      "windows", "hits", "misses", "hit%", "holds"};
	for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
		cr_expect(strstr(g_out, cols[i]) != NULL, "no column %s:\n%s", cols[i], g_out);
	cr_expect(strstr(g_out, "fs-demo-engine") && strstr(g_out, "engine-b"), "%s", g_out);
	cr_expect(strstr(g_out, "1m05s") != NULL, "attached 65 s:\n%s", g_out);
	cr_expect(strstr(g_out, "25.0") != NULL, "hit rate 25 %%:\n%s", g_out);
	cr_expect_eq(count_verb("clients"), 1);
	stop_fake();
}

Test(fsctl, shutdown_sends_the_admin_verb)
{
	start_fake(M_NORMAL);
	cr_expect_eq(fsctl(g_out, sizeof(g_out), "shutdown --socket %s", g_fake.path), 0, "%s", g_out);
	cr_expect(strstr(g_out, "shutting down") != NULL, "%s", g_out);
	cr_expect_eq(count_verb("shutdown"), 1);
	stop_fake();
}

Test(fsctl, card_down_sends_the_verb_and_reports_refusals)
{
	start_fake(M_NORMAL);
	cr_expect_eq(fsctl(g_out, sizeof(g_out), "--socket %s card down 0", g_fake.path), 0, "%s", g_out);
	cr_expect(strstr(g_out, "card 0 is down: taken down by an admin (until foresightd restarts)") != NULL,
		  "%s", g_out);
	cr_expect_eq(count_verb("card"), 1);
	int rc = fsctl(g_out, sizeof(g_out), "--socket %s card down 1", g_fake.path);
	cr_expect_eq(rc, FSCTL_REFUSED, "%s", g_out);
	cr_expect(strstr(g_out, "card 1 is already down (lost) (EALREADY)") != NULL, "%s", g_out);
	const char *bad[] = {"card",        "card down",    "card up 1",
			     "card down x", "card down -1", "card down 1 2"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(fsctl(g_out, sizeof(g_out), "--socket %s %s", g_fake.path, bad[i]), FSCTL_USAGE,
			     "'%s': %s", bad[i], g_out);
		cr_expect(strstr(g_out, "usage: fsctl card down N") != NULL, "%s", g_out);
	}
	cr_expect_eq(count_verb("card"), 2, "usage errors send nothing");
	stop_fake();
}

/* ---- failures --------------------------------------------------------------- */

Test(fsctl, daemon_absent)
{
	const char *path = "/tmp/fsctl-test-nobody-here.sock";
	unlink(path);
	int rc = fsctl(g_out, sizeof(g_out), "--socket %s ping", path);
	cr_expect_neq(rc, 0);
	cr_expect_eq(rc, FSCTL_DOWN);
	cr_expect(strstr(g_out, "foresightd is not running at /tmp/fsctl-test-nobody-here.sock (connect:") !=
			  NULL,
		  "%s", g_out);
	rc = fsctl(g_out, sizeof(g_out), "--socket %s stats --watch --count 2", path);
	cr_expect_eq(rc, FSCTL_DOWN, "%s", g_out);
}

Test(fsctl, refusal)
{
	start_fake(M_REFUSE);
	int rc = fsctl(g_out, sizeof(g_out), "--socket %s shutdown", g_fake.path);
	cr_expect_eq(rc, FSCTL_REFUSED, "%s", g_out);
	cr_expect(strstr(g_out, "refused: uid 1000 is not root (EACCES)") != NULL, "%s", g_out);
	cr_expect(strstr(g_out, "refused: refused") == NULL, "said twice: %s", g_out);
	stop_fake();
}

Test(fsctl, garbage_reply)
{
	start_fake(M_GARBAGE);
	int rc = fsctl(g_out, sizeof(g_out), "--socket %s stats", g_fake.path);
	cr_expect_eq(rc, FSCTL_DOWN, "%s", g_out);
	cr_expect(strstr(g_out, "not a JSON object") != NULL, "%s", g_out);
	stop_fake();
}

Test(fsctl, no_reply_times_out)
{
	start_fake(M_SILENT);
	int rc = fsctl(g_out, sizeof(g_out), "--socket %s --timeout 200 ping", g_fake.path);
	cr_expect_eq(rc, FSCTL_DOWN, "%s", g_out);
	cr_expect(strstr(g_out, "no reply") != NULL, "%s", g_out);
	stop_fake();
}

Test(fsctl, help_and_usage)
{
	cr_expect_eq(fsctl(g_out, sizeof(g_out), "--help"), 0);
	cr_expect(strstr(g_out, "usage: fsctl") && strstr(g_out, "Exit status"), "%s", g_out);
	cr_expect_eq(fsctl(g_out, sizeof(g_out), "help"), 0);
	const char *cmds[] = {"ping", "stats", "clients", "card", "shutdown"};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		/* --help never needs a daemon */
		cr_expect_eq(fsctl(g_out, sizeof(g_out), "--socket /nonexistent %s --help", cmds[i]), 0, "%s",
			     cmds[i]);
		cr_expect(strstr(g_out, "usage: fsctl ") != NULL, "%s --help: %s", cmds[i], g_out);
	}
	cr_expect_eq(fsctl(g_out, sizeof(g_out), "%s", ""), FSCTL_USAGE);
	cr_expect_eq(fsctl(g_out, sizeof(g_out), "frobnicate"), FSCTL_USAGE);
	cr_expect(strstr(g_out, "unknown command 'frobnicate'") != NULL, "%s", g_out);
	cr_expect_eq(fsctl(g_out, sizeof(g_out), "--bogus ping"), FSCTL_USAGE);
	cr_expect_eq(fsctl(g_out, sizeof(g_out), "ping extra"), FSCTL_USAGE);
	cr_expect_eq(fsctl(g_out, sizeof(g_out), "stats --interval abc"), FSCTL_USAGE);
	cr_expect_eq(fsctl(g_out, sizeof(g_out), "stats --layers none"), FSCTL_USAGE);
	cr_expect_eq(fsctl(g_out, sizeof(g_out), "--timeout 0 ping"), FSCTL_USAGE);
	/* A count past LONG_MAX is refused, not clamped to it by strtol. */
	const char *counts[] = {"stats --count 99999999999999999999", "top --count 99999999999999999999",
				"stats --count 0", "top --count -3"};
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		cr_expect_eq(fsctl(g_out, sizeof(g_out), "--socket /nonexistent %s", counts[i]), FSCTL_USAGE,
			     "%s: %s", counts[i], g_out);
		cr_expect(strstr(g_out, "give a positive number, at most") != NULL, "%s: %s", counts[i],
			  g_out);
	}
}

/* ---- rendering, called directly ----------------------------------------------- */

static char *render(const cJSON *r, const struct fsctl_render_opts *o)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cr_assert_not_null(f);
	fsctl_render_stats(f, r, o);
	fclose(f);
	return buf;
}

Test(fsctl, layers_default_to_the_worst_eight)
{
	cJSON *r = stats_reply();
	struct fsctl_render_opts o = {0};
	char *txt = render(r, &o);
	cr_expect(strstr(txt, "the 8 worst of 12 by hit rate (--layers all") != NULL, "%s", txt);
	/* layer 0 has no uses: never "worst"; of the rest the 8 lowest rates */
	int shown = 0;
	for (int l = 0; l < N_LAYERS; l++) {
		char mark[16];
		snprintf(mark, sizeof(mark), "%d", layer_mark(l));
		int rank = 0; /* layers with uses and a lower hit rate */
		for (int k = 1; k < N_LAYERS; k++)
			rank += layer_hit_rate(k) < layer_hit_rate(l);
		int expect = l != 0 && rank < 8;
		cr_expect_eq(strstr(txt, mark) != NULL, expect, "layer %d (rate %.2f) shown=%d", l,
			     layer_hit_rate(l), !expect);
		shown += expect;
	}
	cr_expect_eq(shown, 8);
	free(txt);
	o.worst = 3;
	txt = render(r, &o);
	cr_expect(strstr(txt, "the 3 worst of 12") != NULL, "%s", txt);
	free(txt);
	cJSON_Delete(r);
}

Test(fsctl, render_tolerates_missing_fields)
{
	cJSON *r = cJSON_Parse("{\"ok\":true,\"layers\":[{\"layer\":0}],\"cards\":[{}],\"clients\":[]}");
	struct fsctl_render_opts o = {0};
	char *txt = render(r, &o);
	cr_expect(strstr(txt, "foresightd ?") != NULL, "%s", txt);
	cr_expect(strstr(txt, "(no clients attached)") != NULL, "%s", txt);
	free(txt);
	cJSON_Delete(r);
}

Test(fsctl, formatting)
{
	char b[32];
	fsctl_fmt_bytes(b, sizeof(b), 0);
	cr_expect_str_eq(b, "0 B");
	fsctl_fmt_bytes(b, sizeof(b), 1023);
	cr_expect_str_eq(b, "1023 B");
	fsctl_fmt_bytes(b, sizeof(b), 1536);
	cr_expect_str_eq(b, "1.5 KiB");
	fsctl_fmt_bytes(b, sizeof(b), 3.0 * (1ull << 40));
	cr_expect_str_eq(b, "3.0 TiB");
	fsctl_fmt_duration(b, sizeof(b), 12.34);
	cr_expect_str_eq(b, "12.3s");
	fsctl_fmt_duration(b, sizeof(b), 187);
	cr_expect_str_eq(b, "3m07s");
	fsctl_fmt_duration(b, sizeof(b), 7500);
	cr_expect_str_eq(b, "2h05m");
	fsctl_fmt_duration(b, sizeof(b), 3 * 86400 + 4 * 3600);
	cr_expect_str_eq(b, "3d04h");
}

/* fsctl top: a number never overflows its column or the totals line
 * (at 80 columns the totals were cut at "over 0." once miss/s reached five
 * digits): as it is where it fits, else "11.6k", at most 5 characters. */
Test(fsctl, counts_fit_their_width_at_any_magnitude)
{
	char b[32];
	const struct {
		double v;
		int width;
		const char *want;
	} t[] = {{0, 5, "0"},        {3.46, 5, "3.5"},    {214, 5, "214"},     {11613, 5, "11613"},
		 {11613, 4, "12k"},  {123456, 5, "123k"}, {999499, 5, "999k"}, {999500, 5, "1.0M"},
		 {4.2e9, 8, "4.2G"}, {-5, 5, "0"},        {1e30, 5, "1000E"}};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		fsctl_fmt_count(b, sizeof(b), t[i].v, t[i].width);
		cr_expect_str_eq(b, t[i].want, "%g in %d", t[i].v, t[i].width);
	}
	for (double v = 0.05; v < 1e22; v *= 1.37) {
		fsctl_fmt_count(b, sizeof(b), v, 5);
		cr_expect_leq(strlen(b), 5, "%g gave '%s'", v, b);
	}
}
