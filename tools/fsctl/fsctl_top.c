/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsctl_top.c: `fsctl top`, one screen of rates, as top and varnishstat
 * show them.  Every interval one stats reply; each figure on the screen is
 * a rate per second over the interval (the difference of two replies,
 * divided by the daemon's own uptime difference), or a level (slots, holds).
 * The screen fits 80x24 and grows with the window: wider adds columns (in
 * the order of the tables below), taller adds client and layer rows.  `?`
 * shows a line of help per column.  Not a terminal: the same frames, with
 * no escape sequence at all, one after another.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "fs_tiers.h"
#include "fsctl.h"

/* ---- columns --------------------------------------------------------------- */

enum cval {
	V_STR,   /* the row's string `key` */
	V_NUM,   /* the row's number `key`, a level */
	V_RATE,  /* d(key)/dt per second */
	V_MBS,   /* d(key)/dt / 1e6 (bytes: MB/s) */
	V_BUSY,  /* d(key)/(dt * 1e9) * 100: ns busy as % of the interval */
	V_HIT,   /* d(hits) / d(hits + misses) * 100 over the interval */
	V_SLOTS, /* "resident/slots" */
};

struct tcol {
	const char *title;
	int width;
	enum cval v;
	const char *key;
	const char *help;
};

static const struct tcol card_cols[] = {
	{"card", 8, V_STR, "name", "the card (host0, cuda0, ...)"},
	{"state", 5, V_STR, "state", "up: serving; down: out of the tier until a restart"},
	{"hit%", 6, V_HIT, NULL, "expert uses served from this card's slots, % of its uses in the interval"},
	{"hits/s", 8, V_RATE, "hits", "expert uses served from the card's slots, per second"},
	{"miss/s", 8, V_RATE, "misses", "expert uses on the card served by the CPU path, per second"},
	{"copy/s", 7, V_RATE, "copied", "copies landed in the card's slots, per second"},
	{"MB/s", 7, V_MBS, "copied_bytes", "bytes copied into the card's slots, 1e6 per second"},
	{"bus%", 5, V_BUSY, "bus_busy_ns", "time the copy path was busy, % of the interval"},
	{"late/s", 7, V_RATE, "late", "uses that missed while their copy was in flight, per second"},
	{"resident", 10, V_SLOTS, "resident", "slots holding a landed expert / the card's slots"},
	{"drop/s", 7, V_RATE, "dropped",
	 "predictions and wants dropped (duplicate, no slot, stale), per second"},
	{"evict/s", 8, V_RATE, "evicted", "slots evicted, per second"},
	{"llate/s", 8, V_RATE, "landed_late", "copies that landed after their deadline, per second"},
	{"tlate/s", 8, V_RATE, "too_late",
	 "wants not copied: the bus could not land them in time, per second"},
	{"pred/s", 8, V_RATE, "predicted", "predictions received for the card, per second"},
/* One column per tier, from the tier list (proto/fs_tiers.h): its gauge. */
// clang-format off
#define TIER_COL(A, NAME, name, ...) \
	{#name, (int)sizeof(#name), V_NUM, "tier_" #name, "slots of the " #name " tier (landed or loading)"},
	FS_TIERS(TIER_COL, 0)
#undef TIER_COL
	// clang-format on
	{"loading", 8, V_NUM, "loading", "slots with a copy in flight"},
};

static const struct tcol client_cols[] = {
	{"id", 3, V_NUM, "id", "the client's row in the daemon's table (reused after a detach)"},
	{"name", 16, V_STR, "name", "the name the engine gave at attach (escaped to printable ASCII)"},
	{"pid", 8, V_NUM, "pid", "the engine's process id"},
	{"uid", 6, V_NUM, "uid", "the engine's user id"},
	{"win/s", 7, V_RATE, "windows", "decode windows ended, per second (about tokens per second)"},
	{"hits/s", 8, V_RATE, "hits", "its expert uses served from slots, per second"},
	{"miss/s", 8, V_RATE, "misses", "its expert uses served by the CPU path, per second"},
	{"hit%", 6, V_HIT, NULL, "its uses served from slots, % over the interval"},
	{"holds", 5, V_NUM, "holds", "epochs it holds now"},
	{"pred/s", 8, V_RATE, "predicted", "predictions it posted, per second"},
	{"rec/s", 8, V_RATE, "records", "records consumed from its ring, per second"},
	{"full/s", 7, V_RATE, "ring_full", "posts its ring refused (it was full), per second"},
	{"dev/s", 7, V_RATE, "dev_records", "records consumed from its device ring, per second"},
	{"bad/s", 6, V_RATE, "bad_records", "its records rejected, per second"},
};

static const struct tcol layer_cols[] = {
	{"layer", 5, V_NUM, "layer", "the MoE layer"},
	{"hit%", 6, V_HIT, NULL, "the layer's uses served from slots, % over the interval (worst first)"},
	{"hits/s", 8, V_RATE, "hits", "the layer's uses served from slots, per second"},
	{"miss/s", 8, V_RATE, "misses", "the layer's uses served by the CPU path, per second"},
	{"late/s", 7, V_RATE, "late", "uses that missed while their copy was in flight, per second"},
	{"copy/s", 7, V_RATE, "copied", "copies landed for the layer, per second"},
	{"pred/s", 8, V_RATE, "predicted", "predictions for the layer, per second"},
	{"llate/s", 8, V_RATE, "landed_late",
	 "copies for the layer that landed after their deadline, per second"},
};

#define NCOLS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- one frame --------------------------------------------------------------- */

struct frame {
	char **line;
	int n, cap, width;
};

static void put_line(struct frame *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_line(struct frame *f, const char *fmt, ...)
{
	if (f->n == f->cap) {
		int cap = f->cap ? f->cap * 2 : 64;
		char **nl = realloc(f->line, (size_t)cap * sizeof(*nl));
		if (!nl)
			return;
		f->line = nl;
		f->cap = cap;
	}
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if ((int)strlen(buf) > f->width)
		buf[f->width] = 0; /* never wider than the window */
	f->line[f->n++] = strdup(buf);
}

static void ffree(struct frame *f)
{
	for (int i = 0; i < f->n; i++)
		free(f->line[i]);
	free(f->line);
	*f = (struct frame){0};
}

static const cJSON *row_like(const cJSON *prev, const char *arrkey, const cJSON *row)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(prev, arrkey), *it;
	/* A client row is the same client only with the same id, pid and name:
	 * ids are reused after a detach. */
	int client = strcmp(arrkey, "clients") == 0;
	const char *idkey = strcmp(arrkey, "layers") == 0 ? "layer" : "id";
	cJSON_ArrayForEach(it, a)
	{
		if (fsctl_num(it, idkey) != fsctl_num(row, idkey))
			continue;
		if (client && (fsctl_num(it, "pid") != fsctl_num(row, "pid") ||
			       strcmp(fsctl_str(it, "name", ""), fsctl_str(row, "name", "")) != 0))
			continue;
		return it;
	}
	return NULL;
}

/* A counter's rise over the interval (a counter that went back, as after a
 * daemon restart, counts from 0). */
static double delta(const cJSON *cur, const cJSON *prev, const char *key)
{
	double c = fsctl_num(cur, key), p = prev ? fsctl_num(prev, key) : 0;
	return c >= p ? c - p : c;
}

static double hit_pct(const cJSON *cur, const cJSON *prev, int *none)
{
	double h = delta(cur, prev, "hits"), m = delta(cur, prev, "misses");
	*none = h + m <= 0;
	return *none ? 0 : 100.0 * h / (h + m);
}

/* A number as fmt prints it where that fits the column, else in units of
 * 1000 (fsctl_fmt_count): a cell never cuts a number. */
static void num(char *out, size_t len, const char *fmt, double v, int width)
{
	snprintf(out, len, fmt, v);
	if ((int)strlen(out) > width)
		fsctl_fmt_count(out, len, v, width);
}

static void cell(char *out, size_t len, const struct tcol *c, const cJSON *cur, const cJSON *prev, double dt)
{
	int none;
	double v;
	switch (c->v) {
	case V_STR:
		snprintf(out, len, "%s", fsctl_str(cur, c->key, "-"));
		return;
	case V_NUM:
		num(out, len, "%.0f", fsctl_num(cur, c->key), c->width);
		return;
	case V_SLOTS: {
		char r[16], n[16];
		snprintf(out, len, "%.0f/%.0f", fsctl_num(cur, "resident"), fsctl_num(cur, "slots"));
		if ((int)strlen(out) > c->width) {
			fsctl_fmt_count(r, sizeof(r), fsctl_num(cur, "resident"), 5);
			fsctl_fmt_count(n, sizeof(n), fsctl_num(cur, "slots"), 5);
			snprintf(out, len, "%s/%s", r, n);
		}
		return;
	}
	case V_HIT:
		v = hit_pct(cur, prev, &none);
		if (none)
			snprintf(out, len, "-");
		else
			snprintf(out, len, "%.1f", v);
		return;
	case V_BUSY:
		num(out, len, "%.1f", dt > 0 ? 100.0 * delta(cur, prev, c->key) / (dt * 1e9) : 0.0, c->width);
		return;
	case V_MBS:
		num(out, len, "%.1f", dt > 0 ? delta(cur, prev, c->key) / dt / 1e6 : 0.0, c->width);
		return;
	case V_RATE:
		fsctl_fmt_count(out, len, dt > 0 ? delta(cur, prev, c->key) / dt : 0.0, c->width);
		return;
	}
}

/* How many of cols fit in width (always the first two). */
static int fit_cols(const struct tcol *cols, int ncols, int width)
{
	int w = 0, n = 0;
	for (; n < ncols; n++) {
		w += (n ? 1 : 0) + cols[n].width;
		if (w > width && n >= 2)
			break;
	}
	return n;
}

static void table(struct frame *f, const struct tcol *cols, int ncols, const cJSON *const *rows,
		  const cJSON *const *prevs, int nrows, double dt)
{
	char line[1024], c[64];
	int k = fit_cols(cols, ncols, f->width), at = 0;
	for (int j = 0; j < k; j++)
		at += snprintf(line + at, sizeof(line) - (size_t)at,
			       cols[j].v == V_STR || !j ? (j ? " %-*s" : "%-*s") : " %*s", cols[j].width,
			       cols[j].title);
	put_line(f, "%s", line);
	for (int i = 0; i < nrows; i++) {
		at = 0;
		for (int j = 0; j < k; j++) {
			cell(c, sizeof(c), &cols[j], rows[i], prevs[i], dt);
			if ((int)strlen(c) > cols[j].width) /* a long name: cut, marked */
				snprintf(c + cols[j].width - 1, sizeof(c) - (size_t)cols[j].width + 1, "~");
			at += snprintf(line + at, sizeof(line) - (size_t)at,
				       cols[j].v == V_STR ? (j ? " %-*s" : "%-*s") : (j ? " %*s" : "%*s"),
				       cols[j].width, c);
			if (at >= (int)sizeof(line))
				at = (int)sizeof(line) - 1;
		}
		put_line(f, "%s", line);
	}
}

static const cJSON **rows_of(const cJSON *r, const char *key, int *n)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(r, key), *it;
	int cap = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
	const cJSON **rows = calloc((size_t)cap + 1, sizeof(*rows));
	*n = 0;
	if (rows && cap)
		cJSON_ArrayForEach(it, a) if (cJSON_IsObject(it) && *n < cap) rows[(*n)++] = it;
	return rows;
}

struct lrow {
	const cJSON *cur, *prev;
	double hit, uses;
};

static int by_worst(const void *a, const void *b)
{
	const struct lrow *x = a, *y = b;
	if ((x->uses > 0) != (y->uses > 0))
		return x->uses > 0 ? -1 : 1;
	if (x->hit != y->hit)
		return x->hit < y->hit ? -1 : 1;
	return fsctl_num(x->cur, "layer") < fsctl_num(y->cur, "layer") ? -1 : 1;
}

/* The totals line: its numbers in at most 5 characters each (11.6k), the
 * fields two spaces apart, one where that is too wide, and the last rates
 * left out where even that is (a narrow window): the interval always ends
 * it, whole, since put_line would cut it. */
static void totals_line(struct frame *f, double hits, double misses, double copies, double mbs, double late,
			double d, const char *over, double dt)
{
	char v[6][16], t[16], tail[48], line[256];
	if (hits + misses > 0)
		snprintf(v[0], sizeof(v[0]), "%.1f%%", 100.0 * hits / (hits + misses));
	else
		snprintf(v[0], sizeof(v[0]), "-");
	fsctl_fmt_count(v[1], sizeof(v[1]), hits / d, 5);
	fsctl_fmt_count(v[2], sizeof(v[2]), misses / d, 5);
	fsctl_fmt_count(v[3], sizeof(v[3]), copies, 5);
	num(v[4], sizeof(v[4]), "%.1f", mbs, 5);
	fsctl_fmt_count(v[5], sizeof(v[5]), late, 5);
	static const char *const name[6] = {"hit", "hits/s", "miss/s", "copy/s", "MB/s", "late/s"};
	num(t, sizeof(t), "%.1f", dt, 7);
	snprintf(tail, sizeof(tail), "%s %ss", over, t);
	for (int k = 6; k >= 1; k--)
		for (int sep = 2; sep >= 1; sep--) {
			int at = 0;
			for (int i = 0; i < k; i++)
				at += snprintf(line + at, sizeof(line) - (size_t)at, "%*s%s %s", i ? sep : 0,
					       "", name[i], v[i]);
			snprintf(line + at, sizeof(line) - (size_t)at, "%*s%s", sep, "", tail);
			if ((int)strlen(line) <= f->width || k == 1) {
				put_line(f, "%s", line);
				return;
			}
		}
}

/* The frame of one interval: cur and prev are stats replies (prev may be
 * NULL: then rates are averages since the daemon started). */
static void fsctl_top_frame(struct frame *f, const cJSON *cur, const cJSON *prev, int width, int height,
			    double interval, int help, int tty)
{
	*f = (struct frame){.width = width};
	double up = fsctl_num(cur, "uptime_s");
	double dt = prev ? up - fsctl_num(prev, "uptime_s") : up;
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(cur, "model");
	char ups[32], clock[16] = "";
	fsctl_fmt_duration(ups, sizeof(ups), up);
	time_t now = time(NULL);
	struct tm tm;
	if (localtime_r(&now, &tm))
		strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
	put_line(f, "foresightd %s pid %.0f up %s  %s  %s %.0fx%.0f top-%.0f  %s",
		 fsctl_str(cur, "version", "?"), fsctl_num(cur, "pid"), ups, fsctl_str(cur, "backend", "?"),
		 fsctl_str(m, "name", "?"), fsctl_num(m, "layers"), fsctl_num(m, "experts"),
		 fsctl_num(m, "experts_used"), clock);
	if (help) {
		put_line(f, "%s", "");
		put_line(
			f, "%s",
			"fsctl top: rates per second over the last interval (the first frame: since start).");
		const struct {
			const char *name;
			const struct tcol *c;
			int n;
		} t[] = {{"cards", card_cols, NCOLS(card_cols)},
			 {"clients", client_cols, NCOLS(client_cols)},
			 {"layers (worst hit rate first)", layer_cols, NCOLS(layer_cols)}};
		for (int i = 0; i < 3; i++) {
			put_line(f, "%s:", t[i].name);
			int k = fit_cols(t[i].c, t[i].n, width);
			for (int j = 0; j < k; j++)
				put_line(f, "  %-9s %s", t[i].c[j].title, t[i].c[j].help);
		}
		put_line(f, "%s", "(wider windows show more columns; fsctl(1) explains every counter)");
		put_line(f, "%s", tty ? "? back  q quit" : "");
		return;
	}
	/* totals over every card */
	int nc, ncl, nl;
	const cJSON **cards = rows_of(cur, "cards", &nc);
	const cJSON **clients = rows_of(cur, "clients", &ncl);
	const cJSON **layers = rows_of(cur, "layers", &nl);
	if (!cards || !clients || !layers) {
		free(cards);
		free(clients);
		free(layers);
		return;
	}
	const cJSON **cprev = calloc((size_t)nc + 1, sizeof(*cprev));
	const cJSON **clprev = calloc((size_t)ncl + 1, sizeof(*clprev));
	struct lrow *lr = calloc((size_t)nl + 1, sizeof(*lr));
	if (!cprev || !clprev || !lr)
		goto out;
	double hits = 0, misses = 0, copies = 0, bytes = 0, late = 0;
	for (int i = 0; i < nc; i++) {
		cprev[i] = row_like(prev, "cards", cards[i]);
		hits += delta(cards[i], cprev[i], "hits");
		misses += delta(cards[i], cprev[i], "misses");
		copies += delta(cards[i], cprev[i], "copied");
		bytes += delta(cards[i], cprev[i], "copied_bytes");
		late += delta(cards[i], cprev[i], "late");
	}
	double d = dt > 0 ? dt : 1;
	totals_line(f, hits, misses, copies / d, bytes / d / 1e6, late / d, d, prev ? "over" : "since start,",
		    dt);
	for (int i = 0; i < ncl; i++)
		clprev[i] = row_like(prev, "clients", clients[i]);
	for (int i = 0; i < nl; i++) {
		int none;
		lr[i].cur = layers[i];
		lr[i].prev = row_like(prev, "layers", layers[i]);
		lr[i].hit = hit_pct(layers[i], lr[i].prev, &none);
		lr[i].uses = none ? 0 : 1;
	}
	qsort(lr, (size_t)nl, sizeof(*lr), by_worst);

	/* Rows: 2 header lines, then three tables with a blank line and a
	 * title line each, and the status line on a terminal. */
	int fixed = 2 + 3 * 2 + (tty ? 1 : 0);
	int room = height - fixed;
	int show_cards = nc < room - 2 ? nc : room - 2 > 1 ? room - 2 : 1;
	room -= show_cards;
	int show_clients = ncl < (room + 1) / 2 ? ncl : (room + 1) / 2 - 1; /* -1: the "+N more" line */
	if (show_clients < 1 && ncl)
		show_clients = 1;
	room -= (show_clients ? show_clients : 1) + (show_clients < ncl);
	int show_layers = nl < room ? nl : room > 1 ? room : 1;

	put_line(f, "CARDS (%d)", nc);
	table(f, card_cols, NCOLS(card_cols), cards, cprev, show_cards, dt);
	put_line(f, "CLIENTS (%d)", ncl);
	if (ncl) {
		table(f, client_cols, NCOLS(client_cols), clients, clprev, show_clients, dt);
		if (show_clients < ncl) /* say what is not shown */
			put_line(f, "(+%d more clients: a taller window shows them)", ncl - show_clients);
	} else {
		put_line(f, "%s", "no clients attached");
	}
	put_line(f, "WORST LAYERS (%d of %d, lowest hit rate over the interval first)", show_layers, nl);
	{
		const cJSON **lc = calloc((size_t)show_layers + 1, sizeof(*lc)),
			    **lp = calloc((size_t)show_layers + 1, sizeof(*lp));
		if (lc && lp) {
			for (int i = 0; i < show_layers; i++) {
				lc[i] = lr[i].cur;
				lp[i] = lr[i].prev;
			}
			table(f, layer_cols, NCOLS(layer_cols), lc, lp, show_layers, dt);
		}
		free(lc);
		free(lp);
	}
	if (tty) {
		while (f->n < height - 1)
			put_line(f, "%s", "");
		put_line(f, "? help  q quit  every %.2gs", interval);
	}
out:
	free(cprev);
	free(clprev);
	free(lr);
	free(cards);
	free(clients);
	free(layers);
}

/* ---- the loop ---------------------------------------------------------------- */

static volatile sig_atomic_t top_stop, top_resized;
static struct termios saved_tio;
static int tio_saved;

static void on_stop(int sig)
{
	(void)sig;
	top_stop = 1;
}

static void on_winch(int sig)
{
	(void)sig;
	top_resized = 1;
}

static void restore_tty(void)
{
	if (tio_saved) {
		tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
		tio_saved = 0;
	}
}

static void size_of(int tty, int *w, int *h)
{
	struct winsize ws;
	*w = 80;
	*h = 24;
	if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
		*w = ws.ws_col;
		*h = ws.ws_row;
		return;
	}
	const char *c = getenv("COLUMNS"), *l = getenv("LINES");
	if (c && atoi(c) >= 40)
		*w = atoi(c);
	if (l && atoi(l) >= 10)
		*h = atoi(l);
}

static void draw(const cJSON *cur, const cJSON *prev, double interval, int help, int tty)
{
	int w, h;
	size_of(tty, &w, &h);
	if (w > 1000)
		w = 1000;
	struct frame f;
	fsctl_top_frame(&f, cur, prev, w, h, interval, help, tty);
	/* Composed first, written at once: no flicker. */
	char *out = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&out, &len);
	if (!m) {
		ffree(&f);
		return;
	}
	if (tty)
		fputs("\033[H", m);
	int n = tty && f.n > h ? h : f.n;
	for (int i = 0; i < n; i++)
		fprintf(m, "%s%s%s", f.line[i], tty ? "\033[K" : "", i + 1 < n || !tty ? "\n" : "");
	fputs(tty ? "\033[J" : "\n", m);
	fclose(m);
	fwrite(out, 1, len, stdout);
	fflush(stdout);
	free(out);
	ffree(&f);
}

int fsctl_top_run(const struct fsctl *g, double interval, long count)
{
	int tty = isatty(STDOUT_FILENO);
	int keys = tty && isatty(STDIN_FILENO);
	struct sigaction sa = {.sa_handler = on_stop};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_winch;
	sigaction(SIGWINCH, &sa, NULL);
	struct fsctl_conn *c;
	int rc = fsctl_connect(g, &c);
	if (rc)
		return rc;
	if (keys && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
		struct termios raw = saved_tio;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		tio_saved = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
		atexit(restore_tty);
	}
	if (tty)
		fputs("\033[?1049h\033[?25l", stdout); /* the alternate screen, no cursor */
	cJSON *prev = NULL, *cur = NULL;
	int help = 0;
	for (long n = 1; !top_stop; n++) {
		cJSON *r;
		if ((rc = fsctl_call(c, "stats", &r)))
			break;
		cJSON_Delete(prev);
		prev = cur;
		cur = r;
		draw(cur, prev, interval, help, tty);
		if (count && n >= count)
			break;
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (;;) {
			struct timespec t1;
			clock_gettime(CLOCK_MONOTONIC, &t1);
			double left = interval - (double)(t1.tv_sec - t0.tv_sec) -
				      (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
			if (left <= 0 || top_stop)
				break;
			struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
			int pr = poll(&p, keys ? 1 : 0, (int)ceil(left * 1000));
			if (pr < 0 && errno == EINTR) {
				if (top_resized) {
					top_resized = 0;
					draw(cur, prev, interval, help, tty);
				}
				continue;
			}
			if (pr > 0) {
				char ch;
				if (read(STDIN_FILENO, &ch, 1) == 1) {
					if (ch == 'q' || ch == 'Q')
						top_stop = 1;
					else if (ch == '?' || ch == 'h')
						help = !help;
					if (!top_stop)
						draw(cur, prev, interval, help, tty);
				} else {
					keys = 0; /* stdin closed */
				}
			}
		}
	}
	if (tty)
		fputs("\033[?25h\033[?1049l", stdout);
	fflush(stdout);
	restore_tty();
	cJSON_Delete(prev);
	cJSON_Delete(cur);
	fsctl_disconnect(c);
	return rc;
}

static const char top_help[] = "usage: fsctl top [--interval S] [--count N]\n"
			       "One screen of rates like top(1): per card, per client and the worst layers\n"
			       "by hit rate, each a rate per second over the last interval (the first\n"
			       "frame: averages since the daemon started).  Fits 80x24; a wider window\n"
			       "shows more columns, a taller one more clients and layers.  Keys: ? the\n"
			       "columns' help, q quit.  Not a terminal: the same frames, plain text.\n";

int fsctl_cmd_top(const struct fsctl *g, int argc, char **argv)
{
	double interval = 1.0;
	long count = 0;
	const struct fs_opt opts[] = {
		FSCTL_OPT_INTERVAL(&interval, "seconds between frames (default 1, may be fractional)"),
		FSCTL_OPT_COUNT(&count, "stop after N frames"),
	};
	int rc = fsctl_parse("top", top_help, opts, FS_OPT_N(opts), argc, argv, NULL, 0, NULL);
	if (rc)
		return rc < 0 ? FSCTL_OK : rc;
	return fsctl_top_run(g, interval, count);
}
