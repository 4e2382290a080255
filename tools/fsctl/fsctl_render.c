/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsctl_render.c: the text views of the daemon's replies.  Layout after
 * redis INFO and top: a header line, then "# Section" blocks of
 * "key: value" lines or tables.  Columns come from the counter X-macro
 * lists (proto/fs_counters.h); the JSON keys are the counter names.
 */
#include <stdlib.h>
#include <string.h>

#include "fs_counters.h"
#include "fsctl.h"

static const cJSON *arr(const cJSON *o, const char *key)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsArray(a) ? a : NULL;
}

/* The objects of a JSON array as a C array (caller frees). */
static const cJSON **rows_of(const cJSON *a, int *n)
{
	*n = 0;
	int cap = a ? cJSON_GetArraySize(a) : 0;
	const cJSON **rows = calloc((size_t)(cap > 0 ? cap : 1), sizeof(*rows));
	const cJSON *it;
	if (!rows)
		return NULL;
	cJSON_ArrayForEach(it, a) if (cJSON_IsObject(it)) rows[(*n)++] = it;
	return rows;
}

void fsctl_render_ping(FILE *out, const cJSON *r)
{
	fprintf(out, "foresightd %s pid %.0f up %.1fs\n", fsctl_str(r, "version", "?"), fsctl_num(r, "pid"),
		fsctl_num(r, "uptime_s"));
}

static void header(FILE *out, const cJSON *r)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(r, "model");
	char up[32], eb[32], ab[32];
	fsctl_fmt_duration(up, sizeof(up), fsctl_num(r, "uptime_s"));
	fsctl_fmt_bytes(eb, sizeof(eb), fsctl_num(m, "max_expert_bytes"));
	fsctl_fmt_bytes(ab, sizeof(ab), fsctl_num(m, "arena_bytes"));
	fprintf(out, "foresightd %s  pid %.0f  up %s  backend %s  epoch %.0f\n", fsctl_str(r, "version", "?"),
		fsctl_num(r, "pid"), up, fsctl_str(r, "backend", "?"), fsctl_num(r, "epoch"));
	fprintf(out, "model %s: %.0f layers x %.0f experts, top-%.0f, expert <= %s, arena %s\n",
		fsctl_str(m, "name", "?"), fsctl_num(m, "layers"), fsctl_num(m, "experts"),
		fsctl_num(m, "experts_used"), eb, ab);
}

/* "# Totals": every key of the totals object, in the daemon's order, so a
 * total added there appears here too. */
static void totals(FILE *out, const cJSON *r)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "totals"), *v;
	fprintf(out, "\n# Totals\n");
	cJSON_ArrayForEach(v, t)
	{
		if (!cJSON_IsNumber(v))
			continue;
		char buf[48];
		const char *k = v->string;
		/* the value as the name says (ns, bytes), then in a reader's units */
		if (strcmp(k, "hit_rate") == 0) {
			snprintf(buf, sizeof(buf), "%.2f %%", 100.0 * v->valuedouble);
		} else if (strcmp(k, "copied_bytes") == 0) {
			char h[24];
			fsctl_fmt_bytes(h, sizeof(h), v->valuedouble);
			snprintf(buf, sizeof(buf), "%.0f (%s)", v->valuedouble, h);
		} else if (strcmp(k, "bus_busy_ns") == 0) {
			snprintf(buf, sizeof(buf), "%.0f (%.3f s)", v->valuedouble, v->valuedouble / 1e9);
		} else if (strcmp(k, "misses_per_layer_window") == 0) {
			snprintf(buf, sizeof(buf), "%.3f", v->valuedouble);
		} else {
			snprintf(buf, sizeof(buf), "%.0f", v->valuedouble);
		}
		fprintf(out, "%-24s %s\n", k, buf);
	}
}

static void cards(FILE *out, const cJSON *r)
{
	struct fsctl_table t = {.uptime_s = fsctl_num(r, "uptime_s")};
	fsctl_table_col(&t, "name", "card", FSCTL_STR);
	fsctl_table_col(&t, "state", "state", FSCTL_STR);
	fsctl_table_col(&t, "slots", "slots", FSCTL_INT);
#define X(name, help) fsctl_table_counter(&t, #name);
	FS_COUNTERS_CARD(X)
#undef X
	int n;
	const cJSON **rows = rows_of(arr(r, "cards"), &n);
	fprintf(out, "\n# Cards\n");
	if (rows)
		fsctl_table_print(out, &t, rows, n);
	/* Why a card is down, and since which epoch (0: not yet published). */
	for (int i = 0; rows && i < n; i++)
		if (strcmp(fsctl_str(rows[i], "state", "up"), "down") == 0)
			fprintf(out, "%-12s down since epoch %.0f: %s\n", fsctl_str(rows[i], "name", "?"),
				fsctl_num(rows[i], "down_epoch"), fsctl_str(rows[i], "down_reason", "?"));
	free(rows);
}

/* "# Peer reach": which card's engines read which other cards' slots (the
 * stats reply's per-card `reads`).  Only with several cards. */
static void reach(FILE *out, const cJSON *r)
{
	int n;
	const cJSON **rows = rows_of(arr(r, "cards"), &n);
	if (!rows || n < 2) {
		free(rows);
		return;
	}
	fprintf(out, "\n# Peer reach (an engine on the card reads these cards' slots directly)\n");
	for (int i = 0; i < n; i++) {
		const cJSON *reads = arr(rows[i], "reads"), *v;
		fprintf(out, "%-12s", fsctl_str(rows[i], "name", "?"));
		int k = 0;
		cJSON_ArrayForEach(v, reads)
		{
			if (!cJSON_IsNumber(v))
				continue;
			const char *name = "?";
			for (int j = 0; j < n; j++)
				if (fsctl_num(rows[j], "id") == v->valuedouble)
					name = fsctl_str(rows[j], "name", "?");
			fprintf(out, "%s%s", k++ ? ", " : " reads ", name);
		}
		fprintf(out, "%s\n", k ? "" : " reads no other card (CPU path for experts held elsewhere)");
	}
	free(rows);
}

static int uses(const cJSON *row)
{
	return fsctl_num(row, "hits") + fsctl_num(row, "misses") > 0;
}

/* Layers with uses first, worst hit rate first; unused layers last. */
static int by_hit_rate(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
	if (uses(x) != uses(y))
		return uses(y) - uses(x);
	double hx = fsctl_num(x, "hit_rate"), hy = fsctl_num(y, "hit_rate");
	if (hx != hy)
		return hx < hy ? -1 : 1;
	return (int)fsctl_num(x, "layer") - (int)fsctl_num(y, "layer");
}

static void layers(FILE *out, const cJSON *r, const struct fsctl_render_opts *o)
{
	struct fsctl_table t = {.uptime_s = fsctl_num(r, "uptime_s")};
	fsctl_table_col(&t, "layer", "layer", FSCTL_INT);
#define X(name, help) fsctl_table_counter(&t, #name);
	FS_COUNTERS_LAYER(X)
#undef X
	fsctl_table_col(&t, "misses_per_window", "miss/win", FSCTL_FIX2);
	int n, used = 0;
	const cJSON **rows = rows_of(arr(r, "layers"), &n);
	if (!rows)
		return;
	int worst = o->worst > 0 ? o->worst : FSCTL_LAYERS_WORST;
	for (int i = 0; i < n; i++)
		used += uses(rows[i]);
	if (o->all_layers || n <= worst) {
		fprintf(out, "\n# Layers (all %d)\n", n);
	} else if (!used) {
		fprintf(out, "\n# Layers: no expert uses yet (--layers all lists all %d)\n", n);
		n = 0;
	} else {
		qsort(rows, (size_t)n, sizeof(*rows), by_hit_rate);
		int show = used < worst ? used : worst;
		fprintf(out, "\n# Layers: the %d worst of %d by hit rate (--layers all lists every layer)\n",
			show, n);
		n = show;
	}
	if (n)
		fsctl_table_print(out, &t, rows, n);
	free(rows);
}

void fsctl_render_clients(FILE *out, const cJSON *reply, double uptime_s)
{
	struct fsctl_table t = {.uptime_s = uptime_s};
	fsctl_table_col(&t, "id", "id", FSCTL_INT);
	fsctl_table_col(&t, "name", "name", FSCTL_STR);
#define X(name, help) fsctl_table_counter(&t, #name);
	FS_COUNTERS_CLIENT(X)
#undef X
	int n;
	const cJSON **rows = rows_of(arr(reply, "clients"), &n);
	if (!rows)
		return;
	if (n)
		fsctl_table_print(out, &t, rows, n);
	else
		fprintf(out, "(no clients attached)\n");
	free(rows);
}

/* "# Daemon": the daemon-wide counters with their help text. */
static void daemon_counters(FILE *out, const cJSON *r)
{
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(r, "daemon");
	fprintf(out, "\n# Daemon\n");
#define X(name, help) fprintf(out, "%-20s %12.0f  %s\n", #name, fsctl_num(d, #name), help);
	FS_COUNTERS_DAEMON(X)
#undef X
}

void fsctl_render_stats(FILE *out, const cJSON *r, const struct fsctl_render_opts *o)
{
	header(out, r);
	totals(out, r);
	cards(out, r);
	reach(out, r);
	layers(out, r, o);
	fprintf(out, "\n# Clients\n");
	fsctl_render_clients(out, r, fsctl_num(r, "uptime_s"));
	daemon_counters(out, r);
}
