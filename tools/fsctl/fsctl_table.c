/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsctl_table.c: a table whose columns are JSON keys.  Tables built from the
 * counter X-macro lists get one column per counter, so a counter added to
 * proto/fs_counters.h shows up in fsctl without touching this code.
 */
#include <stdlib.h>
#include <string.h>

#include "fsctl.h"

#define CELL 32

void fsctl_table_col(struct fsctl_table *t, const char *key, const char *title, enum fsctl_fmt fmt)
{
	if (t->n < FSCTL_MAX_COLS)
		t->col[t->n++] = (struct fsctl_col){key, title, fmt};
}

/* Counters that read better in other units than a raw count. */
static const struct {
	const char *name, *title;
	enum fsctl_fmt fmt;
} special[] = {
	{"copied_bytes", "copied_bytes", FSCTL_BYTES},
	{"bus_busy_ns", "bus%", FSCTL_BUSY},
};

/* Derived fields of the stats reply, shown right after what they explain. */
static const struct {
	const char *after, *key, *title;
	enum fsctl_fmt fmt;
} derived[] = {
	{"misses", "hit_rate", "hit%", FSCTL_PCT},
	{"uid", "attached_s", "attached", FSCTL_SECS},
};

void fsctl_table_counter(struct fsctl_table *t, const char *name)
{
	const char *title = name;
	enum fsctl_fmt fmt = FSCTL_INT;
	for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
		if (strcmp(name, special[i].name) == 0) {
			title = special[i].title;
			fmt = special[i].fmt;
		}
	fsctl_table_col(t, name, title, fmt);
	for (size_t i = 0; i < sizeof(derived) / sizeof(derived[0]); i++)
		if (strcmp(name, derived[i].after) == 0)
			fsctl_table_col(t, derived[i].key, derived[i].title, derived[i].fmt);
}

static void cell(char *buf, const struct fsctl_col *c, const cJSON *row, double uptime_s)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, c->key);
	if (cJSON_IsString(v) && v->valuestring) {
		snprintf(buf, CELL, "%s", v->valuestring);
		return;
	}
	if (!cJSON_IsNumber(v)) {
		snprintf(buf, CELL, "-");
		return;
	}
	double x = v->valuedouble;
	switch (c->fmt) {
	case FSCTL_PCT:
		snprintf(buf, CELL, "%.1f", 100.0 * x);
		break;
	case FSCTL_BYTES:
		fsctl_fmt_bytes(buf, CELL, x);
		break;
	case FSCTL_FIX2:
		snprintf(buf, CELL, "%.2f", x);
		break;
	case FSCTL_SECS:
		fsctl_fmt_duration(buf, CELL, x);
		break;
	case FSCTL_BUSY:
		if (uptime_s > 0)
			snprintf(buf, CELL, "%.1f", x / (uptime_s * 1e9) * 100.0);
		else
			snprintf(buf, CELL, "-");
		break;
	case FSCTL_INT:
	case FSCTL_STR:
	default:
		snprintf(buf, CELL, "%.0f", x);
		break;
	}
}

void fsctl_table_print(FILE *out, const struct fsctl_table *t, const cJSON *const *rows, int nrows)
{
	char(*cells)[CELL] = calloc((size_t)(nrows > 0 ? nrows : 1) * (size_t)t->n, CELL);
	int width[FSCTL_MAX_COLS];
	if (!cells)
		return;
	for (int c = 0; c < t->n; c++)
		width[c] = (int)strlen(t->col[c].title);
	for (int r = 0; r < nrows; r++)
		for (int c = 0; c < t->n; c++) {
			char *s = cells[r * t->n + c];
			cell(s, &t->col[c], rows[r], t->uptime_s);
			if ((int)strlen(s) > width[c])
				width[c] = (int)strlen(s);
		}
	/* Strings left-aligned, numbers right-aligned, two spaces apart. */
	for (int c = 0; c < t->n; c++)
		fprintf(out, "%s%*s", c ? "  " : "", t->col[c].fmt == FSCTL_STR ? -width[c] : width[c],
			t->col[c].title);
	fputc('\n', out);
	for (int r = 0; r < nrows; r++) {
		for (int c = 0; c < t->n; c++)
			fprintf(out, "%s%*s", c ? "  " : "",
				t->col[c].fmt == FSCTL_STR ? -width[c] : width[c], cells[r * t->n + c]);
		fputc('\n', out);
	}
	free(cells);
}
