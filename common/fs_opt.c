/* SPDX-License-Identifier: Apache-2.0 */
/* fs_opt.c: the tools' command-line parser (fs_opt.h). */
#include "fs_opt.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static void fail(const struct fs_opt_cmd *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(const struct fs_opt_cmd *c, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", c->prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " %s\n", c->hint ? c->hint : "(try --help)");
}

static int takes_value(const struct fs_opt *o)
{
	return o->type != FS_OPT_T_FLAG;
}

/* The row of "--name" (len: the name's length, before any '='), or NULL. */
static const struct fs_opt *by_name(const struct fs_opt_cmd *c, const char *name, size_t len)
{
	for (unsigned i = 0; i < c->n; i++)
		if (strlen(c->opts[i].name) == len && strncmp(c->opts[i].name, name, len) == 0)
			return &c->opts[i];
	return NULL;
}

static const struct fs_opt *by_alias(const struct fs_opt_cmd *c, char a)
{
	for (unsigned i = 0; i < c->n; i++)
		if (c->opts[i].alias && c->opts[i].alias == a)
			return &c->opts[i];
	return NULL;
}

/* An integer as fs_opt.h says: decimal or 0x hex, '-' only where allowed. */
static int parse_int(const char *s, int neg_ok, int *neg, uint64_t *mag)
{
	const char *p = s;
	*neg = 0;
	if (*p == '-' && neg_ok) {
		*neg = 1;
		p++;
	}
	int base = 10;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		base = 16;
		p += 2;
	}
	if (!*p)
		return -1;
	for (const char *q = p; *q; q++) {
		int digit = (*q >= '0' && *q <= '9') ||
			    (base == 16 && ((*q >= 'a' && *q <= 'f') || (*q >= 'A' && *q <= 'F')));
		if (!digit)
			return -1;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p, &end, base);
	if (errno || *end)
		return -1;
	*mag = v;
	return 0;
}

int fs_opt_uint(const char *val, uint64_t hi, uint64_t *out)
{
	int neg;
	uint64_t mag;
	if (parse_int(val, 0, &neg, &mag) < 0 || mag > hi)
		return -1;
	*out = mag;
	return 0;
}

static void int_range(const struct fs_opt *o, char *out, size_t len)
{
	snprintf(out, len, "an integer from %" PRId64 " to %" PRIu64, o->ilo, o->ihi);
}

/* Check `val` against row o and store it.  0, or -1 with the message
 * (naming an option --name, a positional row by its bare name). */
static int set(const struct fs_opt_cmd *c, const struct fs_opt *o, const char *val)
{
	const char *dash = o >= c->args && o < c->args + c->nargs ? "" : "--";
	char want[160];
	switch (o->type) {
	case FS_OPT_T_FLAG:
		*(int *)o->dst = 1;
		break;
	case FS_OPT_T_STR:
		*(const char **)o->dst = val;
		break;
	case FS_OPT_T_U32:
	case FS_OPT_T_U64:
	case FS_OPT_T_INT: {
		int neg;
		uint64_t mag;
		int bad = parse_int(val, o->ilo < 0, &neg, &mag) < 0;
		if (!bad && neg)
			bad = mag > (uint64_t)INT64_MAX || -(int64_t)mag < o->ilo;
		else if (!bad)
			bad = mag > o->ihi || (o->ilo > 0 && mag < (uint64_t)o->ilo);
		if (bad) {
			int_range(o, want, sizeof(want));
			fail(c, "%s%s '%s': give %s", dash, o->name, val, want);
			return -1;
		}
		if (o->type == FS_OPT_T_U32)
			*(uint32_t *)o->dst = (uint32_t)mag;
		else if (o->type == FS_OPT_T_U64)
			*(uint64_t *)o->dst = mag;
		else
			*(int *)o->dst = neg ? (int)-(int64_t)mag : (int)mag;
		break;
	}
	case FS_OPT_T_DBL: {
		char *end;
		errno = 0;
		double v = strtod(val, &end);
		if (errno || end == val || *end || !isfinite(v) || v < o->dlo || v > o->dhi) {
			fail(c, "%s%s '%s': give a number from %g to %g", dash, o->name, val, o->dlo, o->dhi);
			return -1;
		}
		*(double *)o->dst = v;
		break;
	}
	case FS_OPT_T_CHOICE: {
		size_t n = 0;
		want[0] = 0;
		for (int i = 0; o->choices[i]; i++) {
			if (strcmp(o->choices[i], val) == 0) {
				*(int *)o->dst = i;
				goto done;
			}
			n += (size_t)snprintf(want + n, n < sizeof(want) ? sizeof(want) - n : 0, "%s%s",
					      i == 0            ? "" :
					      o->choices[i + 1] ? ", " :
								  " or ",
					      o->choices[i]);
			if (n >= sizeof(want))
				n = sizeof(want) - 1;
		}
		fail(c, "%s%s '%s': give %s", dash, o->name, val, want);
		return -1;
	}
	case FS_OPT_T_FN:
		want[0] = 0;
		if (o->fn(o->dst, val, want, sizeof(want)) < 0) {
			fail(c, "%s%s '%s': %s", dash, o->name, val, want[0] ? want : "not accepted");
			return -1;
		}
		break;
	}
done:
	if (o->given)
		*o->given = 1;
	return 0;
}

/* One walk over argv.  store 0: only look for --help (nothing is checked
 * or stored, so the help shows the defaults); 1: check and store. */
static int walk(const struct fs_opt_cmd *c, int argc, char *const *argv, int store)
{
	unsigned npos = 0;
	int opts_done = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (opts_done || a[0] != '-' || a[1] == 0) {
			if (!store)
				continue;
			if (c->args) { /* typed positionals: checked as options are */
				if (npos >= c->nargs) {
					fail(c, "too many arguments ('%s')", a);
					return -1;
				}
				if (set(c, &c->args[npos++], a) < 0)
					return -1;
				if (c->npos)
					*c->npos = npos;
				continue;
			}
			if (npos >= c->max_pos) {
				if (c->max_pos)
					fail(c, "too many arguments ('%s')", a);
				else
					fail(c, "unexpected argument '%s'", a);
				return -1;
			}
			c->pos[npos++] = a;
			if (c->npos)
				*c->npos = npos;
			continue;
		}
		if (strcmp(a, "--") == 0) {
			opts_done = 1;
			continue;
		}
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			if (!store)
				return FS_OPT_HELP;
			continue;
		}
		const struct fs_opt *o;
		const char *val = NULL;
		if (a[1] == '-') {
			const char *eq = strchr(a + 2, '=');
			o = by_name(c, a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2));
			if (eq)
				val = eq + 1;
		} else {
			o = a[2] == 0 ? by_alias(c, a[1]) : NULL;
		}
		if (!o) {
			if (store) {
				fail(c, "unknown option '%s'", a);
				return -1;
			}
			continue;
		}
		if (!takes_value(o)) {
			if (val) {
				if (store)
					fail(c, "--%s takes no value ('%s')", o->name, a);
				return store ? -1 : 0;
			}
		} else if (!val) {
			if (i + 1 >= argc) {
				if (store)
					fail(c, "--%s needs a value", o->name);
				return store ? -1 : 0;
			}
			val = argv[++i];
		}
		if (store && set(c, o, val ? val : "1") < 0)
			return -1;
	}
	if (store && c->args && npos < c->min_args) {
		fail(c, "%s is missing", c->args[npos].name);
		return -1;
	}
	return 0;
}

/* One row of the tool's table, before anything reads it: what set(),
 * the lookups and the help dereference.  NULL, or what is wrong. */
static const char *row_bad(const struct fs_opt *o)
{
	if (!o->name)
		return "a row without a name";
	if (!o->help)
		return "a row without help";
	if (!o->dst && o->type != FS_OPT_T_FN) /* a callback may keep its value elsewhere */
		return "a row without a destination";
	if ((unsigned)o->type > FS_OPT_T_FN)
		return "a row of no known type";
	if (o->type == FS_OPT_T_CHOICE && !o->choices)
		return "a choice row without its choices";
	if (o->type == FS_OPT_T_FN && !o->fn)
		return "a callback row without its function";
	return NULL;
}

/*
 * The tool's own definition, checked before any argument and before the
 * help reads it: rows counted but not given, more positional rows
 * required than defined (the "is missing" message names args[npos]), or
 * a row that lacks what the parser and the help dereference would read
 * past the table or through NULL.  0, or -1 with the message on stderr.
 * (A choices list must still end with NULL: its length is not known.)
 */
static int table_ok(const struct fs_opt_cmd *cmd)
{
	const char *prog = cmd->prog ? cmd->prog : "fs_opt";
	if (!cmd->opts && cmd->n) {
		fprintf(stderr, "%s: bad option table: %u option rows counted, none given\n", prog, cmd->n);
		return -1;
	}
	if (!cmd->args && cmd->nargs) {
		fprintf(stderr, "%s: bad option table: %u positional rows counted, none given\n", prog,
			cmd->nargs);
		return -1;
	}
	if (cmd->args && cmd->min_args > cmd->nargs) {
		fprintf(stderr, "%s: bad option table: %u positional rows required, %u defined\n", prog,
			cmd->min_args, cmd->nargs);
		return -1;
	}
	for (unsigned i = 0; i < cmd->nargs + cmd->n; i++) {
		const struct fs_opt *o = i < cmd->nargs ? &cmd->args[i] : &cmd->opts[i - cmd->nargs];
		const char *why = row_bad(o);
		if (why) {
			fprintf(stderr, "%s: bad option table: %s (%s row %u%s%s)\n", prog, why,
				i < cmd->nargs ? "positional" : "option", i < cmd->nargs ? i : i - cmd->nargs,
				o->name ? ", " : "", o->name ? o->name : "");
			return -1;
		}
	}
	return 0;
}

int fs_opt_parse(const struct fs_opt_cmd *cmd, int argc, char *const *argv)
{
	if (table_ok(cmd) < 0)
		return -1;
	if (cmd->npos)
		*cmd->npos = 0;
	if (walk(cmd, argc, argv, 0) == FS_OPT_HELP) {
		fs_opt_help(cmd, stdout);
		return FS_OPT_HELP;
	}
	return walk(cmd, argc, argv, 1);
}

void fs_opt_parse_or_exit(const struct fs_opt_cmd *cmd, int argc, char *const *argv)
{
	int rc = fs_opt_parse(cmd, argc, argv);
	if (rc == FS_OPT_HELP)
		exit(0);
	if (rc < 0)
		exit(FS_OPT_EXIT_USAGE);
}

/* The value a destination holds, as a user would type it; 0 when there
 * is nothing to show (a flag, a NULL string, a callback's). */
static int dflt_text(const struct fs_opt *o, char *out, size_t len)
{
	switch (o->type) {
	case FS_OPT_T_STR: {
		const char *s = *(const char *const *)o->dst;
		if (!s)
			return 0;
		snprintf(out, len, "%s", s);
		return 1;
	}
	case FS_OPT_T_U32:
		snprintf(out, len, "%" PRIu32, *(const uint32_t *)o->dst);
		return 1;
	case FS_OPT_T_U64:
		snprintf(out, len, "%" PRIu64, *(const uint64_t *)o->dst);
		return 1;
	case FS_OPT_T_INT:
		snprintf(out, len, "%d", *(const int *)o->dst);
		return 1;
	case FS_OPT_T_DBL:
		snprintf(out, len, "%g", *(const double *)o->dst);
		return 1;
	case FS_OPT_T_CHOICE: {
		int i = *(const int *)o->dst;
		for (int k = 0; o->choices[k]; k++)
			if (k == i) {
				snprintf(out, len, "%s", o->choices[k]);
				return 1;
			}
		return 0;
	}
	default:
		return 0;
	}
}

/* A space that does not break a line ("(default: X)" stays whole). */
#define NBSP "\x1f"

/* words of `text` from column `col` on, wrapped before column 80 to
 * `indent`. */
static void wrap(FILE *out, const char *text, int col, int indent)
{
	const char *p = text;
	while (*p) {
		if (*p == '\n') {
			fprintf(out, "\n%*s", indent, "");
			col = indent;
			p++;
			continue;
		}
		size_t w = strcspn(p, " \n");
		if (col > indent && col + 1 + (int)w > 79) {
			fprintf(out, "\n%*s", indent, "");
			col = indent;
		} else if (col > indent) {
			fputc(' ', out);
			col++;
		}
		for (size_t k = 0; k < w; k++)
			fputc(p[k] == NBSP[0] ? ' ' : p[k], out);
		col += (int)w;
		p += w;
		while (*p == ' ')
			p++;
	}
	fputc('\n', out);
}

int fs_opt_help(const struct fs_opt_cmd *cmd, FILE *out)
{
	/* Called directly too (a tool's own usage error): the same check as
	 * the parse, so a bad table is refused here rather than read past. */
	if (table_ok(cmd) < 0)
		return -1;
	if (cmd->usage)
		fputs(cmd->usage, out);
	int width = 6; /* "--help" */
	for (unsigned i = 0; i < cmd->n; i++) {
		const struct fs_opt *o = &cmd->opts[i];
		int w = (int)strlen(o->name) + 2 + (o->arg ? 1 + (int)strlen(o->arg) : 0);
		if (w > width)
			width = w;
	}
	for (unsigned i = 0; i < cmd->nargs; i++)
		if ((int)strlen(cmd->args[i].name) > width)
			width = (int)strlen(cmd->args[i].name);
	if (width > 24)
		width = 24;
	/* The positional rows first (by name), then the options, then --help. */
	for (unsigned i = 0; i <= cmd->nargs + cmd->n; i++) {
		const struct fs_opt *o = i < cmd->nargs          ? &cmd->args[i] :
					 i < cmd->nargs + cmd->n ? &cmd->opts[i - cmd->nargs] :
								   NULL;
		char flag[96], text[1024], d[256];
		if (o && i < cmd->nargs)
			snprintf(flag, sizeof(flag), "%s", o->name);
		else if (o)
			snprintf(flag, sizeof(flag), "--%s%s%s", o->name, o->arg ? " " : "",
				 o->arg ? o->arg : "");
		else
			snprintf(flag, sizeof(flag), "--help");
		const char *help = o ? o->help : "this text";
		if (o && o->alias)
			snprintf(text, sizeof(text), "%s (also -%c)", help, o->alias);
		else
			snprintf(text, sizeof(text), "%s", help);
		int required = i < cmd->min_args; /* a positional row that must be given: no default */
		if (o && !required && o->type != FS_OPT_T_FLAG && !strstr(help, "default") &&
		    dflt_text(o, d, sizeof(d))) {
			size_t n = strlen(text);
			snprintf(text + n, sizeof(text) - n, " (default:" NBSP "%s)", d);
		}
		int col = fprintf(out, "  %-*s", width, flag);
		if (col > 2 + width) { /* too long for the column: the help on the next line */
			fprintf(out, "\n%*s", 4 + width, "");
			col = 4 + width;
		} else {
			fprintf(out, "  ");
			col += 2;
		}
		wrap(out, text, col, 4 + width);
	}
	if (cmd->tail)
		fputs(cmd->tail, out);
	return 0;
}
