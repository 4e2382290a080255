/* SPDX-License-Identifier: Apache-2.0 */
/* fsctl.h: the pieces of fsctl, split so the tests can call the renderers
 * directly while the binary stays a thin main(). */
#ifndef FSCTL_H
#define FSCTL_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "fs_opt.h"

/* Exit statuses (fsctl --help lists them). */
enum {
	FSCTL_OK = 0,
	FSCTL_DOWN = 1,    /* not running, no answer, or a reply we cannot read */
	FSCTL_USAGE = 2,   /* bad command line */
	FSCTL_REFUSED = 3, /* the daemon answered {"ok": false} */
};

#define FSCTL_TIMEOUT_MS 3000

/* ---- a command's options (fsctl_cmds.c, common/fs_opt) ------------------- */

/* Parse a command's argv (argv[0]: its name) against its rows: 0 to run,
 * -1 when --help was printed (exit FSCTL_OK), FSCTL_USAGE after the error
 * ("fsctl NAME: ... (try 'fsctl NAME --help')").  pos/max_pos: its
 * positional arguments (NULL, 0: none). */
int fsctl_parse(const char *name, const char *usage, const struct fs_opt *opts, unsigned n, int argc,
		char **argv, const char **pos, unsigned max_pos, unsigned *npos);
/* The values of --interval S (seconds, 0.01 to 3600; a double) and --count
 * N (at least 1; a long): fsctl top and fsctl stats --watch take both. */
int fsctl_opt_seconds(void *dst, const char *val, char *err, size_t len);
int fsctl_opt_count(void *dst, const char *val, char *err, size_t len);
#define FSCTL_OPT_INTERVAL(d, h) FS_OPT_FN("interval", "S", 1 ? (d) : (double *)0, fsctl_opt_seconds, h)
#define FSCTL_OPT_COUNT(d, h) FS_OPT_FN("count", "N", 1 ? (d) : (long *)0, fsctl_opt_count, h)

struct fsctl {
	const char *socket; /* resolved: --socket, $FORESIGHT_SOCKET, default */
	int timeout_ms;
};

/* ---- talking to the daemon (fsctl_rpc.c) --------------------------------- */

struct fsctl_conn;
/* Connect; on failure print why on stderr and return the exit status. */
int fsctl_connect(const struct fsctl *g, struct fsctl_conn **out);
/* One request {"verb": verb, "proto": 1}; 0 with *reply set, or an exit
 * status after printing the reason ("refused: ..." and the like). */
int fsctl_call(struct fsctl_conn *c, const char *verb, cJSON **reply);
/* The same with a request the caller built (fs_ctl_request + fields). */
int fsctl_call_req(struct fsctl_conn *c, const cJSON *req, cJSON **reply);
void fsctl_disconnect(struct fsctl_conn *c);
/* Every string value in o made printable ASCII (fs_name_safe); the calls
 * above apply it to each reply. */
void fsctl_safe_strings(cJSON *o);
/* connect + call + disconnect */
int fsctl_call_once(const struct fsctl *g, const char *verb, cJSON **reply);

/* ---- formatting (fsctl_fmt.c) -------------------------------------------- */

/* "0 B", "512 B", "1.5 KiB", "3.0 GiB" */
void fsctl_fmt_bytes(char *buf, size_t len, double bytes);
/* A count or rate in at most width characters where it fits as it is
 * ("0", "3.5", "11613"), else in units of 1000 ("11.6k", "352k", "4.2M"):
 * at most 5 characters for any value (fsctl top's columns and totals). */
void fsctl_fmt_count(char *buf, size_t len, double v, int width);
/* "42s", "3m07s", "2h05m", "3d04h" */
void fsctl_fmt_duration(char *buf, size_t len, double seconds);
double fsctl_num(const cJSON *obj, const char *key); /* 0 when absent */
const char *fsctl_str(const cJSON *obj, const char *key, const char *dflt);

/* ---- tables (fsctl_table.c) ---------------------------------------------- */

enum fsctl_fmt {
	FSCTL_INT,   /* integer count */
	FSCTL_STR,   /* string (or a number printed as is) */
	FSCTL_PCT,   /* ratio 0..1 shown as "97.3" */
	FSCTL_BYTES, /* human units */
	FSCTL_FIX2,  /* two decimals */
	FSCTL_SECS,  /* a duration in seconds, human units */
	FSCTL_BUSY,  /* nanoseconds busy, as % of the daemon's uptime */
};

#define FSCTL_MAX_COLS 64

struct fsctl_col {
	const char *key;   /* JSON key of each row object */
	const char *title; /* column header */
	enum fsctl_fmt fmt;
};

struct fsctl_table {
	struct fsctl_col col[FSCTL_MAX_COLS];
	int n;
	double uptime_s; /* for FSCTL_BUSY */
};

void fsctl_table_col(struct fsctl_table *t, const char *key, const char *title, enum fsctl_fmt fmt);
/* Columns for a counter list: one per name, in list order, with the
 * derived ones placed after the counter they explain. */
void fsctl_table_counter(struct fsctl_table *t, const char *name);
/* Print rows (JSON objects), columns sized to their widest cell. */
void fsctl_table_print(FILE *out, const struct fsctl_table *t, const cJSON *const *rows, int nrows);

/* ---- what the commands print (fsctl_render.c) ---------------------------- */

#define FSCTL_LAYERS_WORST 8

struct fsctl_render_opts {
	int all_layers; /* every layer ... */
	int worst;      /* ... or this many worst (0: FSCTL_LAYERS_WORST) */
};

/* The text view of a stats reply (INFO-like sections and tables). */
void fsctl_render_stats(FILE *out, const cJSON *stats, const struct fsctl_render_opts *o);
/* The clients table of a "clients" or "stats" reply. */
void fsctl_render_clients(FILE *out, const cJSON *reply, double uptime_s);
/* "foresightd VERSION pid N up Xs" */
void fsctl_render_ping(FILE *out, const cJSON *reply);

/* ---- commands (fsctl_cmds.c) --------------------------------------------- */

int fsctl_cmd_ping(const struct fsctl *g, int argc, char **argv);
int fsctl_cmd_stats(const struct fsctl *g, int argc, char **argv);
int fsctl_cmd_clients(const struct fsctl *g, int argc, char **argv);
int fsctl_cmd_profile(const struct fsctl *g, int argc, char **argv);
int fsctl_cmd_card(const struct fsctl *g, int argc, char **argv);
int fsctl_cmd_shutdown(const struct fsctl *g, int argc, char **argv);
int fsctl_cmd_counters(const struct fsctl *g, int argc, char **argv);
int fsctl_cmd_top(const struct fsctl *g, int argc, char **argv); /* fsctl_top.c */
/* The top loop: a frame every interval until q, Ctrl-C or count frames. */
int fsctl_top_run(const struct fsctl *g, double interval, long count);

#endif /* FSCTL_H */
