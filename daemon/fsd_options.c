/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_options.c: the option list (FSD_OPTIONS, fsd_options.h) made into
 * the defaults, the table of rows, the setting of one option from text with
 * its type and range checked, the JSON config file reader, --help's option
 * lines and the --config-reference the man pages are built from.  It needs
 * neither libuv nor nng (library fsd_opts): foresightd (fsd_config.c: the
 * command line, the checks across options, the reload) and fs-replay
 * (tools/replay/replay_opts.c: the FSD_POLICY rows and the same config
 * file) read their settings through it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsd_options.h"

/* The table, one entry per row of FSD_OPTIONS (fsd_options.h). */
/* The table, one entry per row of FSD_OPTIONS (fsd_options.h). */
#define OPT_ROW(key, field, type, n, dflt, lo, hi, fl, h) \
	{#key,                                            \
	 FSD_OPT_##type,                                  \
	 offsetof(struct fsd_config, field),              \
	 sizeof(((struct fsd_config *)0)->field),         \
	 lo,                                              \
	 hi,                                              \
	 h,                                               \
	 fl},
const struct fsd_opt fsd_opt_rows[FSD_NOPTS] = {FSD_OPTIONS(OPT_ROW)};
#undef OPT_ROW

/* A reloadable option is one the reload can store whole: a string (read by
 * the loop thread only) or a 4-byte number (other threads read it with
 * relaxed atomic loads; fsd_config_reload stores it atomically). */
#define OPT_RELOAD_OK(key, field, type, n, dflt, lo, hi, fl, h)               \
	_Static_assert(!((fl)&FSD_RELOAD) || FSD_OPT_##type == FSD_OPT_STR || \
			       sizeof(((struct fsd_config *)0)->field) == 4,  \
		       "option " #key ": only a string or a 4-byte number can be reloadable");
FSD_OPTIONS(OPT_RELOAD_OK)
#undef OPT_RELOAD_OK

void fsd_opt_src_init(struct fsd_opt_src *s, const char *prog)
{
	memset(s, 0, sizeof(*s));
	s->prog = prog;
}

/* Messages about the settings go to stderr: at start before logging
 * matters, "PROG: ..."; during a reload (SIGHUP) they are log lines of
 * priority error, so journald keeps them with the daemon's. */
void fsd_opt_err(const struct fsd_opt_src *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, s->reloading ? "<3>%s: reload: " : "%s: ", s->prog);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

/* The defaults: each row's default column. */
#define DEF_STR(f, d) snprintf(c->f, sizeof(c->f), "%s", d);
#define DEF_U32(f, d) c->f = d;
#define DEF_U64(f, d) c->f = d;
#define DEF_DBL(f, d) c->f = d;
#define DEF_INT(f, d) c->f = d;
#define DEF_MODE(f, d) c->f = d;
#define DEF_FLAG(f, d) c->f = d;
#define DEF_ONOFF(f, d) c->f = d;
#define OPT_DEFAULT(key, field, type, n, dflt, lo, hi, fl, h) DEF_##type(field, dflt)
void fsd_config_defaults(struct fsd_config *c)
{
	memset(c, 0, sizeof(*c));
	FSD_OPTIONS(OPT_DEFAULT)
}
#undef OPT_DEFAULT

static size_t opt_index(const struct fsd_opt *o)
{
	return (size_t)(o - fsd_opt_rows);
}

const struct fsd_opt *fsd_opt_find(const char *key)
{
	for (size_t i = 0; i < FSD_NOPTS; i++)
		if (strcmp(fsd_opt_rows[i].key, key) == 0)
			return &fsd_opt_rows[i];
	return NULL;
}

void fsd_opt_flag(const struct fsd_opt *o, char *out, size_t len)
{
	snprintf(out, len, "--%s", o->key);
	for (char *p = out; *p; p++)
		if (*p == '_')
			*p = '-';
}

int fsd_opt_given(const struct fsd_opt_src *s, const char *key)
{
	const struct fsd_opt *o = fsd_opt_find(key);
	return o && s->origin[opt_index(o)][0];
}

void fsd_opt_note(struct fsd_opt_src *s, const char *key, const char *where)
{
	const struct fsd_opt *o = fsd_opt_find(key);
	if (o)
		snprintf(s->origin[opt_index(o)], sizeof(s->origin[0]), "%s", where);
}

/* How to name option `key` in a message: where it was set, or
 * "key 'K' (default)". */
const char *fsd_opt_origin(const struct fsd_opt_src *s, const char *key)
{
	static char buf[4][320];
	static int next;
	const struct fsd_opt *o = fsd_opt_find(key);
	char *b = buf[next++ & 3];
	if (o && s->origin[opt_index(o)][0])
		snprintf(b, sizeof(buf[0]), "%s", s->origin[opt_index(o)]);
	else
		snprintf(b, sizeof(buf[0]), "%s (default)", key);
	return b;
}

static int opt_is_int(const struct fsd_opt *o)
{
	return o->type == FSD_OPT_U32 || o->type == FSD_OPT_U64 || o->type == FSD_OPT_INT;
}

/* "1 to 16777216": integer ranges as integers (the u64 seed: its whole range). */
static void range_text(const struct fsd_opt *o, char *out, size_t len)
{
	if (!opt_is_int(o))
		snprintf(out, len, "%g to %g", o->min, o->max);
	else if (o->max >= 18446744073709551615.0)
		snprintf(out, len, "%lld to %llu", (long long)o->min, (unsigned long long)UINT64_MAX);
	else
		snprintf(out, len, "%lld to %lld", (long long)o->min, (long long)o->max);
}

static const char *type_word(const struct fsd_opt *o);

/* Set one option from text.  0, or -1 with a message naming `where`. */
int fsd_opt_set(const struct fsd_opt_src *s, struct fsd_config *c, const struct fsd_opt *o, const char *val,
		const char *where)
{
	char *p = (char *)c + o->off;
	char *end;
	char range[96];
	errno = 0;
	switch (o->type) {
	case FSD_OPT_STR:
		if (strlen(val) >= o->size) {
			fsd_opt_err(s, "%s: value too long (%zu bytes, at most %zu)\n", where, strlen(val),
				    o->size - 1);
			return -1;
		}
		strcpy(p, val);
		return 0;
	case FSD_OPT_FLAG:
		if (strcmp(val, "1") && strcmp(val, "0") && strcmp(val, "true") && strcmp(val, "false")) {
			fsd_opt_err(s, "%s: '%s' is not true or false\n", where, val);
			return -1;
		}
		*(uint32_t *)p = val[0] == '1' || val[0] == 't';
		return 0;
	case FSD_OPT_ONOFF:
		if (strcmp(val, "on") && strcmp(val, "off")) {
			fsd_opt_err(s, "%s: '%s' is not on or off\n", where, val);
			return -1;
		}
		*(uint32_t *)p = strcmp(val, "on") == 0;
		return 0;
	case FSD_OPT_MODE: {
		unsigned long v = strtoul(val, &end, 8);
		if (errno || *end || end == val || v > 0777 || val[0] == '-' || val[0] == '+' ||
		    val[0] == ' ') {
			fsd_opt_err(s, "%s: '%s' is not an octal mode 0 to 0777\n", where, val);
			return -1;
		}
		*(unsigned *)p = (unsigned)v;
		return 0;
	}
	default:
		break;
	}
	range_text(o, range, sizeof(range));
	double v;
	if (opt_is_int(o)) {
		/* Digits only: "128", "-1"; not "1e3", "0x80", " 128" or "128.0". */
		const char *d = val + (val[0] == '-');
		int digits = *d != 0;
		for (; *d; d++)
			digits &= *d >= '0' && *d <= '9';
		if (!digits) {
			fsd_opt_err(s, "%s: '%s' is not an integer (%s)\n", where, val, range);
			return -1;
		}
		if (val[0] == '-') {
			long long x = strtoll(val, &end, 10);
			v = (double)x;
			/* An unsigned member never takes a negative value, whatever
			 * its row's minimum says (the cast below would wrap it). */
			if (errno || x < (long long)o->min || o->type != FSD_OPT_INT) {
				fsd_opt_err(s, "%s: %s is out of range (%s)\n", where, val, range);
				return -1;
			}
		} else {
			unsigned long long x = strtoull(val, &end, 10);
			if (errno || (double)x > o->max || (double)x < o->min) {
				fsd_opt_err(s, "%s: %s is out of range (%s)\n", where, val, range);
				return -1;
			}
			if (o->type == FSD_OPT_U64) {
				*(uint64_t *)p = x;
				goto done;
			}
			v = (double)x;
		}
	} else {
		v = strtod(val, &end);
		if (errno || *end || end == val || v != v) {
			fsd_opt_err(s, "%s: '%s' is not a number (%s)\n", where, val, range);
			return -1;
		}
		if (v < o->min || v > o->max) {
			fsd_opt_err(s, "%s: %s is out of range (%s)\n", where, val, range);
			return -1;
		}
	}
	switch (o->type) {
	case FSD_OPT_U32:
		*(uint32_t *)p = (uint32_t)v;
		break;
	case FSD_OPT_U64:
		*(uint64_t *)p = (uint64_t)v;
		break;
	case FSD_OPT_INT:
		*(int *)p = (int)v;
		break;
	default:
		/* p points at the double member the table names (offsetof) */
		// cppcheck-suppress invalidPointerCast
		*(double *)p = v;
		break;
	}
done:
	if (strcmp(o->key, "cards") == 0)
		c->cards_set = 1;
	if (strcmp(o->key, "bus_gbps") == 0)
		c->bus_gbps_set = 1;
	return 0;
}

/* The config file: one flat JSON object (RFC 8259) of string, number and
 * boolean values.  A reader of its own, not cJSON: every error names the
 * file, line and column, a key given twice is refused (cJSON keeps both and
 * lookups take one), and a value's JSON type is kept (a string "128" is not
 * the number 128). */
enum jtok { J_STR, J_NUM, J_TRUE, J_FALSE, J_NULL, J_OBJ, J_ARR, J_BAD };

struct jr {
	const struct fsd_opt_src *s; /* names the program in messages */
	const char *p, *end, *lstart, *file;
	int line;
	char err[192];
};

static int jcol(const struct jr *j, const char *at)
{
	return (int)(at - j->lstart) + 1;
}

static void jws(struct jr *j)
{
	for (; j->p < j->end; j->p++) {
		if (*j->p == '\n') {
			j->line++;
			j->lstart = j->p + 1;
		} else if (*j->p != ' ' && *j->p != '\t' && *j->p != '\r') {
			break;
		}
	}
}

static int jfail(struct jr *j, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int jfail(struct jr *j, const char *at, const char *fmt, ...)
{
	char msg[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fsd_opt_err(j->s, "%s:%d:%d: %s\n", j->file, j->line, jcol(j, at), msg);
	return -1;
}

static void put_utf8(char *out, size_t *n, unsigned cp)
{
	if (cp < 0x80) {
		out[(*n)++] = (char)cp;
	} else if (cp < 0x800) {
		out[(*n)++] = (char)(0xc0 | cp >> 6);
		out[(*n)++] = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		out[(*n)++] = (char)(0xe0 | cp >> 12);
		out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[(*n)++] = (char)(0x80 | (cp & 0x3f));
	} else {
		out[(*n)++] = (char)(0xf0 | cp >> 18);
		out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
		out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[(*n)++] = (char)(0x80 | (cp & 0x3f));
	}
}

static int hex4(const char *s, unsigned *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char ch = s[i];
		int d = ch >= '0' && ch <= '9' ? ch - '0' :
			ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 :
			ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 :
						 -1;
		if (d < 0)
			return -1;
		*v = *v << 4 | (unsigned)d;
	}
	return 0;
}

/* A string at j->p (the opening quote) into out (cap bytes); 0 or -1. */
static int jstring(struct jr *j, char *out, size_t cap)
{
	const char *q = j->p++;
	size_t n = 0;
	while (j->p < j->end && *j->p != '"') {
		const char *at = j->p;
		unsigned char ch = (unsigned char)*j->p++;
		if (n + 4 >= cap)
			return jfail(j, q, "a string longer than %zu bytes", cap - 5);
		if (ch < 0x20)
			return jfail(j, at, "a control character (0x%02x) in a string: write it as \\u%04x",
				     ch, ch);
		if (ch != '\\') {
			out[n++] = (char)ch;
			continue;
		}
		if (j->p >= j->end)
			break;
		char e = *j->p++;
		const char *map = strchr("\"\\/bfnrt", e);
		if (e && map) {
			out[n++] = "\"\\/\b\f\n\r\t"[map - "\"\\/bfnrt"];
			continue;
		}
		unsigned cp, lo;
		if (e != 'u' || j->end - j->p < 4 || hex4(j->p, &cp) < 0)
			return jfail(j, at, "'\\%c' is not a JSON escape", e ? e : '0');
		j->p += 4;
		if (cp >= 0xd800 && cp < 0xdc00) {
			if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' ||
			    hex4(j->p + 2, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
				return jfail(j, at, "a lone UTF-16 surrogate \\u%04x", cp);
			j->p += 6;
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		} else if (cp >= 0xdc00 && cp < 0xe000) {
			return jfail(j, at, "a lone UTF-16 surrogate \\u%04x", cp);
		}
		if (cp == 0)
			return jfail(j, at, "\\u0000 in a string");
		put_utf8(out, &n, cp);
	}
	if (j->p >= j->end)
		return jfail(j, q, "a string that does not end (no closing '\"')");
	j->p++;
	out[n] = 0;
	return 0;
}

/* One value at j->p: its kind, its text in out (a string's contents, a
 * number's digits), -1 on a syntax error. */
static int jvalue(struct jr *j, char *out, size_t cap, enum jtok *t)
{
	const char *at = j->p;
	if (j->p >= j->end)
		return jfail(j, at, "the file ends where a value should be");
	char ch = *j->p;
	if (ch == '"') {
		*t = J_STR;
		return jstring(j, out, cap);
	}
	if (ch == '{' || ch == '[') {
		*t = ch == '{' ? J_OBJ : J_ARR;
		return 0;
	}
	static const struct {
		const char *w;
		enum jtok t;
	} words[] = {{"true", J_TRUE}, {"false", J_FALSE}, {"null", J_NULL}};
	for (size_t i = 0; i < 3; i++) {
		size_t n = strlen(words[i].w);
		if ((size_t)(j->end - j->p) >= n && memcmp(j->p, words[i].w, n) == 0) {
			j->p += n;
			*t = words[i].t;
			snprintf(out, cap, "%s", words[i].w);
			return 0;
		}
	}
	/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
	const char *s = j->p;
	if (s < j->end && *s == '-')
		s++;
	const char *digits = s;
	while (s < j->end && *s >= '0' && *s <= '9')
		s++;
	int ok = s > digits && !(digits[0] == '0' && s - digits > 1);
	if (ok && s < j->end && *s == '.') {
		const char *f = ++s;
		while (s < j->end && *s >= '0' && *s <= '9')
			s++;
		ok = s > f;
	}
	if (ok && s < j->end && (*s == 'e' || *s == 'E')) {
		s++;
		if (s < j->end && (*s == '+' || *s == '-'))
			s++;
		const char *e = s;
		while (s < j->end && *s >= '0' && *s <= '9')
			s++;
		ok = s > e;
	}
	if (!ok || (size_t)(s - j->p) >= cap) {
		const char *w = j->p;
		while (w < j->end && w - j->p < 24 && !strchr(" \t\r\n,}]", *w))
			w++;
		return jfail(j, at, "'%.*s' is not a JSON value (strings need double quotes)",
			     (int)(w - j->p), j->p);
	}
	memcpy(out, j->p, (size_t)(s - j->p));
	out[s - j->p] = 0;
	j->p = s;
	*t = J_NUM;
	return 0;
}

static const char *type_word(const struct fsd_opt *o)
{
	switch (o->type) {
	case FSD_OPT_STR:
		return "a string";
	case FSD_OPT_FLAG:
		return "true or false";
	case FSD_OPT_ONOFF:
		return "\"on\" or \"off\" (or true or false)";
	case FSD_OPT_MODE:
		return "an octal mode (\"0660\")";
	case FSD_OPT_DBL:
		return "a number";
	default:
		return "an integer";
	}
}

static const char *jtok_word(enum jtok t)
{
	static const char *w[] = {"a string", "a number",  "true",     "false",
				  "null",     "an object", "an array", "?"};
	return w[t];
}

/* One key's value into c: the JSON type must be the option's. */
static int file_set(const struct fsd_opt_src *s, struct fsd_config *c, const struct fsd_opt *o, enum jtok t,
		    const char *val, const char *where)
{
	int fits;
	switch (o->type) {
	case FSD_OPT_STR:
		fits = t == J_STR;
		break;
	case FSD_OPT_FLAG:
		fits = t == J_TRUE || t == J_FALSE;
		break;
	case FSD_OPT_ONOFF:
		fits = t == J_TRUE || t == J_FALSE ||
		       (t == J_STR && (!strcmp(val, "on") || !strcmp(val, "off")));
		if (t != J_STR)
			val = t == J_TRUE ? "on" : "off";
		break;
	case FSD_OPT_MODE:
		/* 660 reads as octal, like "0660" (the example's spelling) */
		fits = t == J_STR || t == J_NUM;
		break;
	default:
		fits = t == J_NUM;
		break;
	}
	if (!fits) {
		char range[96] = "";
		if (o->type != FSD_OPT_STR && o->type != FSD_OPT_FLAG && o->type != FSD_OPT_ONOFF &&
		    o->type != FSD_OPT_MODE) {
			range[0] = ',';
			range[1] = ' ';
			range_text(o, range + 2, sizeof(range) - 2);
		}
		if (t == J_STR)
			fsd_opt_err(s, "%s: \"%s\" is a string; %s takes %s%s\n", where, val, o->key,
				    type_word(o), range);
		else
			fsd_opt_err(s, "%s: %s is %s; %s takes %s%s\n", where, val,
				    t == J_NUM ? "a number" : "a boolean", o->key, type_word(o), range);
		return -1;
	}
	if (o->type == FSD_OPT_FLAG)
		val = t == J_TRUE ? "true" : "false";
	return fsd_opt_set(s, c, o, val, where);
}

static int parse_text(struct fsd_opt_src *s, struct fsd_config *c, const char *path, const char *buf,
		      size_t len)
{
	struct jr j = {.s = s, .p = buf, .end = buf + len, .lstart = buf, .file = path, .line = 1};
	if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0)
		j.p = j.lstart = buf + 3; /* a UTF-8 byte order mark */
	jws(&j);
	if (j.p >= j.end)
		return jfail(&j, j.p, "empty: the file must hold one JSON object, e.g. {\"slots\": 128}");
	if (*j.p != '{') {
		char tmp[256];
		enum jtok t = J_BAD;
		const char *at = j.p;
		if (jvalue(&j, tmp, sizeof(tmp), &t) < 0)
			return -1;
		return jfail(&j, at, "%s: the file must hold one JSON object {...} of keys and values",
			     jtok_word(t));
	}
	int line_of[FSD_NOPTS], col_of[FSD_NOPTS];
	memset(line_of, 0, sizeof(line_of));
	memset(col_of, 0, sizeof(col_of));
	j.p++;
	jws(&j);
	if (j.p < j.end && *j.p == '}') {
		j.p++;
	} else {
		for (;;) {
			char key[64], val[4200];
			enum jtok t;
			jws(&j);
			if (j.p >= j.end)
				return jfail(&j, j.p, "the file ends inside the object (no closing '}')");
			if (*j.p == '}')
				return jfail(&j, j.p, "a ',' before '}': JSON has no trailing comma");
			if (*j.p != '"')
				return jfail(&j, j.p, "'%c' where a key should be (keys are \"quoted\")",
					     *j.p);
			const char *kat = j.p;
			int kline = j.line, kcol = jcol(&j, kat);
			if (jstring(&j, key, sizeof(key)) < 0)
				return -1;
			jws(&j);
			if (j.p >= j.end || *j.p != ':')
				return jfail(&j, j.p, "':' expected after the key \"%s\"", key);
			j.p++;
			jws(&j);
			const char *vat = j.p;
			if (jvalue(&j, val, sizeof(val), &t) < 0)
				return -1;
			char where[300];
			snprintf(where, sizeof(where), "%.200s:%d:%d: key '%s'", path, kline, kcol, key);
			const struct fsd_opt *o = fsd_opt_find(key);
			if (!o) {
				char hint[96] = "";
				for (size_t i = 0; i < FSD_NOPTS; i++)
					if (strncmp(fsd_opt_rows[i].key, key, strlen(key)) == 0 ||
					    strstr(key, fsd_opt_rows[i].key))
						snprintf(hint, sizeof(hint), " (did you mean '%s'?)",
							 fsd_opt_rows[i].key);
				fsd_opt_err(s, "%s: unknown key%s; foresightd --help lists them\n", where,
					    hint);
				return -1;
			}
			size_t i = opt_index(o);
			if (line_of[i]) {
				fsd_opt_err(s, "%s: given twice (first at line %d, column %d)\n", where,
					    line_of[i], col_of[i]);
				return -1;
			}
			line_of[i] = kline;
			col_of[i] = kcol;
			if (t == J_OBJ || t == J_ARR || t == J_NULL) {
				fsd_opt_err(
					s, "%s:%d:%d: key '%s': %s is not a value it takes; %s takes %s\n",
					path, j.line, jcol(&j, vat), key, jtok_word(t), key, type_word(o));
				return -1;
			}
			if (file_set(s, c, o, t, val, where) < 0)
				return -1;
			snprintf(s->origin[i], sizeof(s->origin[i]), "%s", where);
			jws(&j);
			if (j.p < j.end && *j.p == ',') {
				j.p++;
				continue;
			}
			if (j.p < j.end && *j.p == '}') {
				j.p++;
				break;
			}
			if (j.p >= j.end)
				return jfail(&j, j.p, "the file ends inside the object (no closing '}')");
			return jfail(&j, j.p, "',' or '}' expected after the value of '%s'", key);
		}
	}
	jws(&j);
	if (j.p < j.end)
		return jfail(&j, j.p, "more after the object's closing '}'");
	return 0;
}

int fsd_config_load(struct fsd_opt_src *s, struct fsd_config *c, const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		fsd_opt_err(s, "config %s: %s\n", path, strerror(errno));
		return -1;
	}
	char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (len + 4096 > cap) {
			cap = cap ? cap * 2 : 8192;
			if (cap > (1u << 20)) {
				fsd_opt_err(s, "config %s: larger than 1 MiB\n", path);
				free(buf);
				fclose(f);
				return -1;
			}
			char *nb = realloc(buf, cap);
			if (!nb) {
				fsd_opt_err(s, "config %s: out of memory\n", path);
				free(buf);
				fclose(f);
				return -1;
			}
			buf = nb;
		}
		size_t n = fread(buf + len, 1, cap - len, f);
		if (n == 0)
			break;
		len += n;
	}
	int err = ferror(f);
	fclose(f);
	if (err) {
		fsd_opt_err(s, "config %s: read error\n", path);
		free(buf);
		return -1;
	}
	int rc = parse_text(s, c, path, buf, len);
	free(buf);
	return rc;
}

/* --help's " (default: X)" after an option's help: the row's default as a
 * user types it ("" for a flag, which is off unless given). */
static void help_default(const struct fsd_opt *o, const struct fsd_config *def, char *out, size_t len)
{
	const char *p = (const char *)def + o->off;
	char v[96];
	if (o->type == FSD_OPT_FLAG) {
		out[0] = 0;
		return;
	}
	if (o->type == FSD_OPT_STR) {
		snprintf(v, sizeof(v), "%s", p[0] ? p : "none");
	} else {
		fsd_opt_format(o, def, v, sizeof(v));
		size_t n = strlen(v);
		if (n >= 2 && v[0] == '"' && v[n - 1] == '"') { /* "on", "0660": unquoted */
			memmove(v, v + 1, n - 2);
			v[n - 2] = 0;
		}
	}
	snprintf(out, len, " (default: %s)", v);
}

void fsd_opt_help(FILE *out, unsigned flags, const struct fsd_config *def)
{
	for (size_t i = 0; i < FSD_NOPTS; i++) {
		if (flags && !(fsd_opt_rows[i].flags & flags))
			continue;
		char flag[40], dflt[128];
		fsd_opt_flag(&fsd_opt_rows[i], flag, sizeof(flag));
		help_default(&fsd_opt_rows[i], def, dflt, sizeof(dflt));
		fprintf(out, "  %-18s %s%s\n", flag, fsd_opt_rows[i].help, dflt);
	}
}

/* An option's value in `c` as text: what --config-reference prints as the
 * default and a reload logs as old and new. */
void fsd_opt_format(const struct fsd_opt *o, const struct fsd_config *c, char *out, size_t len)
{
	const char *p = (const char *)c + o->off;
	uint32_t u32;
	uint64_t u64;
	int i32;
	unsigned mode;
	double dbl;
	switch (o->type) {
	case FSD_OPT_STR:
		if (p[0])
			snprintf(out, len, "\"%s\"", p);
		else
			snprintf(out, len, "none");
		break;
	case FSD_OPT_FLAG:
		memcpy(&u32, p, sizeof(u32));
		snprintf(out, len, "%s", u32 ? "true" : "false");
		break;
	case FSD_OPT_ONOFF:
		memcpy(&u32, p, sizeof(u32));
		snprintf(out, len, "\"%s\"", u32 ? "on" : "off");
		break;
	case FSD_OPT_MODE:
		memcpy(&mode, p, sizeof(mode));
		snprintf(out, len, "\"%04o\"", mode);
		break;
	case FSD_OPT_U32:
		memcpy(&u32, p, sizeof(u32));
		snprintf(out, len, "%u", u32);
		break;
	case FSD_OPT_U64:
		memcpy(&u64, p, sizeof(u64));
		snprintf(out, len, "%llu", (unsigned long long)u64);
		break;
	case FSD_OPT_INT:
		memcpy(&i32, p, sizeof(i32));
		snprintf(out, len, "%d", i32);
		break;
	default:
		memcpy(&dbl, p, sizeof(dbl));
		snprintf(out, len, "%g", dbl);
		break;
	}
}

/* scdoc(5) text: * and _ format, \ escapes; the help texts mean them
 * literally. */
static void scdoc_text(const char *s)
{
	for (; *s; s++) {
		if (*s == '*' || *s == '_' || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
}

static const char *opt_type_name(const struct fsd_opt *o)
{
	switch (o->type) {
	case FSD_OPT_STR:
		return "string";
	case FSD_OPT_FLAG:
		return "boolean";
	case FSD_OPT_ONOFF:
		return "on or off";
	case FSD_OPT_MODE:
		return "octal mode";
	case FSD_OPT_DBL:
		return "number";
	default:
		return "integer";
	}
}

/* --config-reference: one entry per option of the table, with its type,
 * range and default, as scdoc source.  "json": the config keys (the
 * KEYS section of foresightd.json(5)); "flags": the options (OPTIONS of
 * foresightd(8)).  CMake builds both man pages from this output, so
 * they list exactly what this binary accepts. */
int fsd_config_reference(const char *mode)
{
	int flags = mode && strcmp(mode, "flags") == 0;
	if (mode && !flags && strcmp(mode, "json") != 0) {
		fprintf(stderr, "foresightd: --config-reference=%s: json or flags\n", mode);
		return 2;
	}
	struct fsd_config def;
	fsd_config_defaults(&def);
	for (size_t i = 0; i < FSD_NOPTS; i++) {
		const struct fsd_opt *o = &fsd_opt_rows[i];
		char dflt[128], name[48];
		fsd_opt_format(o, &def, dflt, sizeof(dflt));
		snprintf(name, sizeof(name), "%s%s", flags ? "--" : "", o->key);
		if (flags)
			for (char *p = name; *p; p++)
				if (*p == '_')
					*p = '-';
		putchar('*');
		scdoc_text(name);
		putchar('*');
		if (flags && o->type == FSD_OPT_ONOFF)
			printf(" *on*|*off*");
		else if (flags && o->type != FSD_OPT_FLAG)
			printf(" _%s_", o->type == FSD_OPT_STR  ? "VALUE" :
					o->type == FSD_OPT_MODE ? "MODE" :
								  "N");
		printf("\n\t");
		scdoc_text(o->help);
		printf(".\n\n\t");
		if (o->type == FSD_OPT_FLAG)
			printf("%s", flags ? "Takes no value; in the file: true or false" : "Type: boolean");
		else if (o->type == FSD_OPT_STR || o->type == FSD_OPT_MODE)
			printf("Type: %s", opt_type_name(o));
		else if (o->type == FSD_OPT_ONOFF)
			printf("Type: %s (in the file also true or false)", opt_type_name(o));
		else {
			char range[96];
			range_text(o, range, sizeof(range));
			printf("Type: %s, %s", opt_type_name(o), range);
		}
		printf(". Default: ");
		scdoc_text(dflt);
		if (flags)
			printf(".\n\n");
		else
			printf(". %s\n\n", (o->flags & FSD_RELOAD) ? "SIGHUP applies a change." :
								     "A change needs a restart.");
	}
	return 0;
}
