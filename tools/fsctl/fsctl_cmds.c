/* SPDX-License-Identifier: Apache-2.0 */
/* fsctl_cmds.c: the commands: their options, help and output. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "fs_counters.h"
#include "fs_ctl.h"
#include "fsctl.h"

int fsctl_parse(const char *name, const char *usage, const struct fs_opt *opts, unsigned n, int argc,
		char **argv, const char **pos, unsigned max_pos, unsigned *npos)
{
	char prog[48], hint[80];
	snprintf(prog, sizeof(prog), "fsctl %s", name);
	snprintf(hint, sizeof(hint), "(try 'fsctl %s --help')", name);
	const struct fs_opt_cmd cmd = {.prog = prog,
				       .usage = usage,
				       .opts = opts,
				       .n = n,
				       .pos = pos,
				       .max_pos = max_pos,
				       .npos = npos,
				       .hint = hint};
	int rc = fs_opt_parse(&cmd, argc, argv);
	return rc == FS_OPT_HELP ? -1 : rc < 0 ? FSCTL_USAGE : 0;
}

int fsctl_opt_seconds(void *dst, const char *val, char *err, size_t len)
{
	char *end;
	double s = strtod(val, &end);
	if (*end || !(s >= 0.01 && s <= 3600)) {
		snprintf(err, len, "give seconds, 0.01 to 3600");
		return -1;
	}
	*(double *)dst = s;
	return 0;
}

int fsctl_opt_count(void *dst, const char *val, char *err, size_t len)
{
	char *end;
	errno = 0;
	long n = strtol(val, &end, 10);
	if (*end || end == val || n < 1 || errno == ERANGE) { /* ERANGE: strtol said LONG_MAX */
		snprintf(err, len, "give a positive number, at most %ld", LONG_MAX);
		return -1;
	}
	*(long *)dst = n;
	return 0;
}

/* Commands whose only option is --json (*json set). */
static int json_only(const char *cmd, const char *usage, int argc, char **argv, int *json)
{
	*json = 0;
	const struct fs_opt opts[] = {FS_OPT_FLAG("json", 0, json, "the daemon's reply as JSON")};
	return fsctl_parse(cmd, usage, opts, FS_OPT_N(opts), argc, argv, NULL, 0, NULL);
}

/* --json: the daemon's reply minus "ok", pretty-printed. */
static void print_json(FILE *out, const cJSON *r)
{
	cJSON *copy = cJSON_Duplicate(r, 1);
	cJSON_DeleteItemFromObjectCaseSensitive(copy, "ok");
	char *txt = cJSON_Print(copy);
	if (txt)
		fprintf(out, "%s\n", txt);
	free(txt);
	cJSON_Delete(copy);
}

/* ---- ping ----------------------------------------------------------------- */

static const char ping_help[] = "usage: fsctl ping [--json]\n"
				"Check that foresightd answers; prints its version, pid and uptime.\n";

int fsctl_cmd_ping(const struct fsctl *g, int argc, char **argv)
{
	int json;
	int rc = json_only("ping", ping_help, argc, argv, &json);
	if (rc)
		return rc < 0 ? FSCTL_OK : rc;
	cJSON *r;
	if ((rc = fsctl_call_once(g, "ping", &r)))
		return rc;
	if (json)
		print_json(stdout, r);
	else
		fsctl_render_ping(stdout, r);
	cJSON_Delete(r);
	return FSCTL_OK;
}

/* ---- stats ---------------------------------------------------------------- */

static const char stats_help[] =
	"usage: fsctl stats [--json] [--layers all|N] [--watch [--interval S] [--count N]]\n"
	"Counters of foresightd: totals, per card, per layer, per client, daemon.\n";

struct stats_opts {
	int json, watch;
	double interval;
	long count; /* 0: until interrupted */
	struct fsctl_render_opts render;
};

/* --layers all|N */
static int layers_opt(void *dst, const char *val, char *err, size_t len)
{
	struct fsctl_render_opts *r = dst;
	char *end;
	if (strcasecmp(val, "all") == 0) {
		r->all_layers = 1;
		return 0;
	}
	long n = strtol(val, &end, 10);
	if (*end || n < 1 || n > 100000) {
		snprintf(err, len, "give 'all' or a positive number");
		return -1;
	}
	r->worst = (int)n;
	return 0;
}

static int parse_stats(int argc, char **argv, struct stats_opts *o)
{
	*o = (struct stats_opts){.interval = 1.0};
	const struct fs_opt opts[] = {
		FS_OPT_FLAG("json", 0, &o->json, "the daemon's reply as JSON (pretty-printed)"),
		FS_OPT_FN("layers", "all|N", &o->render, layers_opt,
			  "list every layer, or the N worst by hit rate (default: the 8 worst)"),
		FS_OPT_FLAG("watch", 0, &o->watch,
			    "every interval: the screen of fsctl top (rates per second); with --json the "
			    "reply each interval (no escapes either way when not a terminal)"),
		FSCTL_OPT_INTERVAL(&o->interval, "seconds between redraws (default 1, may be fractional)"),
		FSCTL_OPT_COUNT(&o->count, "stop after N redraws (implies --watch)"),
	};
	int rc = fsctl_parse("stats", stats_help, opts, FS_OPT_N(opts), argc, argv, NULL, 0, NULL);
	if (rc == 0 && o->count)
		o->watch = 1;
	return rc;
}

/* One view of a stats reply, to out. */
static void show_stats(FILE *out, const cJSON *r, const struct stats_opts *o)
{
	if (o->json) {
		print_json(out, r);
	} else {
		fsctl_render_stats(out, r, &o->render);
	}
}

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

/* Sleep, returning early when Ctrl-C arrives (no SA_RESTART). */
static void pause_for(double seconds)
{
	struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
	while (!g_stop && nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int watch(const struct fsctl *g, const struct stats_opts *o)
{
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	struct fsctl_conn *c;
	int rc = fsctl_connect(g, &c);
	if (rc)
		return rc;
	for (long n = 1; !g_stop; n++) {
		cJSON *r;
		if ((rc = fsctl_call(c, "stats", &r)))
			break;
		/* Compose the frame first and write it at once: no flicker. */
		char *frame = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&frame, &len);
		if (!f) {
			cJSON_Delete(r);
			rc = FSCTL_DOWN;
			break;
		}
		time_t now = time(NULL);
		struct tm tm;
		char clock[16] = "";
		if (localtime_r(&now, &tm))
			strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
		fprintf(f, "fsctl stats --watch --json  every %.2gs  %s\n", o->interval, clock);
		show_stats(f, r, o);
		fclose(f);
		fwrite(frame, 1, len, stdout);
		fflush(stdout);
		free(frame);
		cJSON_Delete(r);
		if (o->count && n >= o->count)
			break;
		pause_for(o->interval);
	}
	fsctl_disconnect(c);
	return rc;
}

int fsctl_cmd_stats(const struct fsctl *g, int argc, char **argv)
{
	struct stats_opts o;
	int rc = parse_stats(argc, argv, &o);
	if (rc)
		return rc < 0 ? FSCTL_OK : rc;
	if (o.watch && !o.json)
		return fsctl_top_run(g, o.interval, o.count); /* rates, and no escapes into a pipe */
	if (o.watch)
		return watch(g, &o);
	cJSON *r;
	if ((rc = fsctl_call_once(g, "stats", &r)))
		return rc;
	show_stats(stdout, r, &o);
	cJSON_Delete(r);
	return FSCTL_OK;
}

/* ---- clients -------------------------------------------------------------- */

static const char clients_help[] =
	"usage: fsctl clients [--json]\n"
	"The engines attached to foresightd: id, name, pid, uid, time attached and\n"
	"their counters (windows, hits, misses, hit rate, holds, ...).\n";

int fsctl_cmd_clients(const struct fsctl *g, int argc, char **argv)
{
	int json;
	int rc = json_only("clients", clients_help, argc, argv, &json);
	if (rc)
		return rc < 0 ? FSCTL_OK : rc;
	cJSON *r;
	if ((rc = fsctl_call_once(g, "clients", &r)))
		return rc;
	if (json)
		print_json(stdout, r);
	else
		fsctl_render_clients(stdout, r, 0);
	cJSON_Delete(r);
	return FSCTL_OK;
}

/* ---- profile -------------------------------------------------------------- */

static const char profile_help[] =
	"usage: fsctl profile save FILE | fsctl profile load FILE\n"
	"save: write the static tier's use counts (decayed, per layer and expert)\n"
	"to FILE.  load (admin): seed the static tier from FILE; the daemon then\n"
	"copies each layer's hottest experts in the background.  FILE is text:\n"
	"'foresight-profile 1 LAYERS EXPERTS', then LAYERS lines of EXPERTS counts.\n";

static int profile_save(const struct fsctl *g, const char *path)
{
	cJSON *req = fs_ctl_request("profile"), *r = NULL;
	cJSON_AddStringToObject(req, "action", "save");
	struct fsctl_conn *c;
	int rc = fsctl_connect(g, &c);
	if (rc == 0) {
		rc = fsctl_call_req(c, req, &r);
		fsctl_disconnect(c);
	}
	cJSON_Delete(req);
	if (rc)
		return rc;
	const cJSON *counts = cJSON_GetObjectItemCaseSensitive(r, "counts");
	double layers = fsctl_num(r, "layers"), experts = fsctl_num(r, "experts");
	if (!cJSON_IsArray(counts) || layers < 1 || experts < 1 ||
	    (double)cJSON_GetArraySize(counts) != layers * experts) {
		fprintf(stderr, "fsctl: profile save: malformed reply\n");
		cJSON_Delete(r);
		return FSCTL_DOWN;
	}
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "fsctl: %s: %s\n", path, strerror(errno));
		cJSON_Delete(r);
		return FSCTL_USAGE;
	}
	fprintf(f, "foresight-profile 1 %.0f %.0f\n", layers, experts);
	long i = 0;
	for (const cJSON *x = counts->child; x; x = x->next, i++)
		fprintf(f, "%.0f%c", x->valuedouble, (i + 1) % (long)experts ? ' ' : '\n');
	int bad = fclose(f) != 0;
	cJSON_Delete(r);
	if (bad) {
		fprintf(stderr, "fsctl: %s: write failed\n", path);
		return FSCTL_USAGE;
	}
	printf("profile of %.0f layers x %.0f experts saved to %s\n", layers, experts, path);
	return FSCTL_OK;
}

static int profile_load(const struct fsctl *g, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "fsctl: %s: %s\n", path, strerror(errno));
		return FSCTL_USAGE;
	}
	unsigned ver, layers, experts;
	if (fscanf(f, "foresight-profile %u %u %u", &ver, &layers, &experts) != 3 || ver != 1 ||
	    layers == 0 || experts == 0 || (uint64_t)layers * experts > (1u << 24)) {
		fprintf(stderr, "fsctl: %s: not a foresight profile (first line 'foresight-profile 1 L E')\n",
			path);
		fclose(f);
		return FSCTL_USAGE;
	}
	cJSON *req = fs_ctl_request("profile");
	cJSON_AddStringToObject(req, "action", "load");
	cJSON_AddNumberToObject(req, "layers", layers);
	cJSON_AddNumberToObject(req, "experts", experts);
	cJSON *arr = cJSON_AddArrayToObject(req, "counts");
	for (uint64_t i = 0; i < (uint64_t)layers * experts; i++) {
		unsigned long v;
		if (fscanf(f, "%lu", &v) != 1 || v > 0xffffffffUL) {
			fprintf(stderr, "fsctl: %s: count %llu missing or out of range\n", path,
				(unsigned long long)i);
			fclose(f);
			cJSON_Delete(req);
			return FSCTL_USAGE;
		}
		cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)v));
	}
	fclose(f);
	struct fsctl_conn *c;
	cJSON *r = NULL;
	int rc = fsctl_connect(g, &c);
	if (rc == 0) {
		rc = fsctl_call_req(c, req, &r);
		fsctl_disconnect(c);
	}
	cJSON_Delete(req);
	cJSON_Delete(r);
	if (rc == 0)
		printf("profile of %u layers x %u experts loaded from %s\n", layers, experts, path);
	return rc;
}

int fsctl_cmd_profile(const struct fsctl *g, int argc, char **argv)
{
	const char *pos[2];
	unsigned npos = 0;
	int rc = fsctl_parse("profile", profile_help, NULL, 0, argc, argv, pos, 2, &npos);
	if (rc) {
		if (rc > 0) /* a usage error shows the usage too */
			fputs(profile_help, stderr);
		return rc < 0 ? FSCTL_OK : rc;
	}
	if (npos != 2 || (strcmp(pos[0], "save") && strcmp(pos[0], "load"))) {
		fputs(profile_help, stderr);
		return FSCTL_USAGE;
	}
	return strcmp(pos[0], "save") == 0 ? profile_save(g, pos[1]) : profile_load(g, pos[1]);
}

/* ---- card ----------------------------------------------------------------- */

static const char card_help[] =
	"usage: fsctl card down N [--json]\n"
	"Take card N down (admin: root or foresightd's own user): its slots leave\n"
	"the tier, engines stop reading them from the next epoch on and compute\n"
	"those experts on another card or the CPU path; the other cards keep\n"
	"serving.  To drain a card, or to emulate a lost one on hardware that must\n"
	"not be reset.  A card that is down stays down until foresightd restarts.\n"
	"Refused: a card that does not exist (ENOENT), one already down (EALREADY).\n";

int fsctl_cmd_card(const struct fsctl *g, int argc, char **argv)
{
	int json = 0;
	const char *pos[2];
	unsigned npos = 0;
	const struct fs_opt opts[] = {FS_OPT_FLAG("json", 0, &json, "the daemon's reply as JSON")};
	int rc = fsctl_parse("card", card_help, opts, FS_OPT_N(opts), argc, argv, pos, 2, &npos);
	if (rc) {
		if (rc > 0) /* a usage error shows the usage too */
			fputs(card_help, stderr);
		return rc < 0 ? FSCTL_OK : rc;
	}
	char *end = NULL;
	long n = npos == 2 ? strtol(pos[1], &end, 10) : -1;
	if (npos != 2 || strcmp(pos[0], "down") != 0 || !end || *end || end == pos[1] || n < 0 || n > 65535) {
		fputs(card_help, stderr);
		return FSCTL_USAGE;
	}
	cJSON *req = fs_ctl_request("card"), *r = NULL;
	if (!req)
		return FSCTL_DOWN;
	cJSON_AddNumberToObject(req, "card", (double)n);
	cJSON_AddStringToObject(req, "state", "down");
	struct fsctl_conn *c;
	rc = fsctl_connect(g, &c);
	if (rc == 0) {
		rc = fsctl_call_req(c, req, &r);
		fsctl_disconnect(c);
	}
	cJSON_Delete(req);
	if (rc == 0 && json)
		print_json(stdout, r);
	else if (rc == 0)
		printf("card %ld is down: %s (until foresightd restarts)\n", n, fsctl_str(r, "reason", "?"));
	cJSON_Delete(r);
	return rc;
}

/* ---- shutdown ------------------------------------------------------------- */

static const char shutdown_help[] = "usage: fsctl shutdown [--json]\n"
				    "Stop foresightd (admin: root or foresightd's own user).  Engines keep\n"
				    "running on their CPU path and re-attach when a daemon comes back.\n";

int fsctl_cmd_shutdown(const struct fsctl *g, int argc, char **argv)
{
	int json;
	int rc = json_only("shutdown", shutdown_help, argc, argv, &json);
	if (rc)
		return rc < 0 ? FSCTL_OK : rc;
	cJSON *r;
	if ((rc = fsctl_call_once(g, "shutdown", &r)))
		return rc;
	if (json)
		print_json(stdout, r);
	else
		printf("foresightd at %s is shutting down\n", g->socket);
	cJSON_Delete(r);
	return FSCTL_OK;
}

/* ---- counters ------------------------------------------------------------- */

static const char counters_help[] =
	"usage: fsctl counters [--scdoc]\n"
	"What every counter means: the daemon's, each card's, each layer's and each\n"
	"client's (proto/fs_counters.h, the one list that feeds fsctl, the stats\n"
	"reply and the metrics).  Needs no daemon.\n";

/* scdoc: * and _ format, \ escapes. */
static void scdoc_put(const char *s)
{
	for (; *s; s++) {
		if (*s == '*' || *s == '_' || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
}

static void counter_line(int scdoc, const char *name, const char *help)
{
	if (scdoc) {
		putchar('*');
		scdoc_put(name);
		printf("*\n\t");
		scdoc_put(help);
		printf(".\n\n");
	} else {
		printf("  %-20s %s\n", name, help);
	}
}

int fsctl_cmd_counters(const struct fsctl *g, int argc, char **argv)
{
	(void)g;
	int scdoc = 0;
	const struct fs_opt opts[] = {FS_OPT_FLAG(
		"scdoc", 0, &scdoc, "as scdoc(5) text (the COUNTERS section of fsctl(1) is built from it)")};
	int rc = fsctl_parse("counters", counters_help, opts, FS_OPT_N(opts), argc, argv, NULL, 0, NULL);
	if (rc)
		return rc < 0 ? FSCTL_OK : rc;
	static const char *const intro[] = {
		"Daemon counters (the stats reply's daemon object; metrics foresight_NAME)",
		"Card counters (each card: cards[]; summed: totals; metrics foresight_card_NAME{card})",
		"Layer counters (each MoE layer, all cards: layers[]; metrics foresight_layer_NAME{layer})",
		"Client counters (each attached engine: clients[]; metrics foresight_client_NAME{client,name})",
	};
	for (int s = 0; s < 4; s++) {
		if (scdoc)
			printf("## %s\n\n", intro[s]);
		else
			printf("%s%s:\n", s ? "\n" : "", intro[s]);
#define X(name, help) counter_line(scdoc, #name, help);
		if (s == 0) {
			FS_COUNTERS_DAEMON(X)
		} else if (s == 1) {
			FS_COUNTERS_CARD(X)
		} else if (s == 2) {
			FS_COUNTERS_LAYER(X)
		} else {
			FS_COUNTERS_CLIENT(X)
		}
#undef X
	}
	return FSCTL_OK;
}
