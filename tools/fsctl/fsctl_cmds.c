/* SPDX-License-Identifier: Apache-2.0 */
/* fsctl_cmds.c: the commands: their options, help and output. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "fsctl.h"

static int is_help(const char *a)
{
	return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

static int usage_error(const char *cmd, const char *fmt, const char *arg)
{
	fprintf(stderr, "fsctl %s: ", cmd);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (try 'fsctl %s --help')\n", cmd);
	return FSCTL_USAGE;
}

/* Commands without options: only --help. */
static int no_options(const char *cmd, const char *help, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (is_help(argv[i])) {
			fputs(help, stdout);
			return -1;
		}
		return usage_error(cmd, "unexpected argument '%s'", argv[i]);
	}
	return 0;
}

/* ---- ping ----------------------------------------------------------------- */

static const char ping_help[] = "usage: fsctl ping\n"
				"Check that foresightd answers; prints its version, pid and uptime.\n";

int fsctl_cmd_ping(const struct fsctl *g, int argc, char **argv)
{
	int rc = no_options("ping", ping_help, argc, argv);
	if (rc)
		return rc < 0 ? FSCTL_OK : rc;
	cJSON *r;
	if ((rc = fsctl_call_once(g, "ping", &r)))
		return rc;
	fsctl_render_ping(stdout, r);
	cJSON_Delete(r);
	return FSCTL_OK;
}

/* ---- stats ---------------------------------------------------------------- */

static const char stats_help[] =
	"usage: fsctl stats [--json] [--layers all|N] [--watch [--interval S] [--count N]]\n"
	"Counters of foresightd: totals, per card, per layer, per client, daemon.\n"
	"  --json          the daemon's reply as JSON (pretty-printed)\n"
	"  --layers all    list every layer (default: the 8 worst by hit rate)\n"
	"  --layers N      list the N worst layers\n"
	"  --watch         redraw every interval like top, until Ctrl-C\n"
	"  --interval S    seconds between redraws (default 1, may be fractional)\n"
	"  --count N       stop after N redraws (implies --watch)\n";

struct stats_opts {
	int json, watch;
	double interval;
	long count; /* 0: until interrupted */
	struct fsctl_render_opts render;
};

static int parse_stats(int argc, char **argv, struct stats_opts *o)
{
	*o = (struct stats_opts){.interval = 1.0};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		char *end;
		if (is_help(a)) {
			fputs(stats_help, stdout);
			return -1;
		} else if (strcmp(a, "--json") == 0) {
			o->json = 1;
		} else if (strcmp(a, "--watch") == 0) {
			o->watch = 1;
		} else if (strcmp(a, "--interval") == 0 && i + 1 < argc) {
			o->interval = strtod(argv[++i], &end);
			if (*end || !(o->interval >= 0.01 && o->interval <= 3600))
				return usage_error("stats", "--interval '%s': give seconds, 0.01 to 3600",
						   argv[i]);
		} else if (strcmp(a, "--count") == 0 && i + 1 < argc) {
			o->count = strtol(argv[++i], &end, 10);
			if (*end || o->count < 1)
				return usage_error("stats", "--count '%s': give a positive number", argv[i]);
			o->watch = 1;
		} else if (strcmp(a, "--layers") == 0 && i + 1 < argc) {
			const char *v = argv[++i];
			if (strcasecmp(v, "all") == 0) {
				o->render.all_layers = 1;
			} else {
				long n = strtol(v, &end, 10);
				if (*end || n < 1 || n > 100000)
					return usage_error(
						"stats", "--layers '%s': give 'all' or a positive number", v);
				o->render.worst = (int)n;
			}
		} else {
			return usage_error("stats", "unknown or incomplete option '%s'", a);
		}
	}
	return 0;
}

/* One view of a stats reply, to out. */
static void show_stats(FILE *out, const cJSON *r, const struct stats_opts *o)
{
	if (o->json) {
		cJSON *copy = cJSON_Duplicate(r, 1);
		cJSON_DeleteItemFromObjectCaseSensitive(copy, "ok");
		char *txt = cJSON_Print(copy);
		if (txt)
			fprintf(out, "%s\n", txt);
		free(txt);
		cJSON_Delete(copy);
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
		fprintf(f, "\033[H\033[2J");
		fprintf(f, "fsctl stats --watch  every %.2gs  %s  (Ctrl-C quits)\n\n", o->interval, clock);
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
	"usage: fsctl clients\n"
	"The engines attached to foresightd: id, name, pid, uid, time attached and\n"
	"their counters (windows, hits, misses, hit rate, holds, ...).\n";

int fsctl_cmd_clients(const struct fsctl *g, int argc, char **argv)
{
	int rc = no_options("clients", clients_help, argc, argv);
	if (rc)
		return rc < 0 ? FSCTL_OK : rc;
	cJSON *r;
	if ((rc = fsctl_call_once(g, "clients", &r)))
		return rc;
	fsctl_render_clients(stdout, r, 0);
	cJSON_Delete(r);
	return FSCTL_OK;
}

/* ---- shutdown ------------------------------------------------------------- */

static const char shutdown_help[] = "usage: fsctl shutdown\n"
				    "Stop foresightd (admin: root or foresightd's own user).  Engines keep\n"
				    "running on their CPU path and re-attach when a daemon comes back.\n";

int fsctl_cmd_shutdown(const struct fsctl *g, int argc, char **argv)
{
	int rc = no_options("shutdown", shutdown_help, argc, argv);
	if (rc)
		return rc < 0 ? FSCTL_OK : rc;
	cJSON *r;
	if ((rc = fsctl_call_once(g, "shutdown", &r)))
		return rc;
	printf("foresightd at %s is shutting down\n", g->socket);
	cJSON_Delete(r);
	return FSCTL_OK;
}
