/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_config.c: the option list (FSD_OPTIONS, fsd_options.h) made into
 * the defaults, the table that parses the command-line flags and the JSON
 * config file keys, --help, the --config-reference the man pages are built
 * from, and the reload, so none of them can disagree with another.
 * Precedence: flag > $FORESIGHT_SOCKET (socket only) > config file > default.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsd.h"

enum opt_type {
	OPT_STR,
	OPT_U32,
	OPT_U64,
	OPT_DBL,
	OPT_MODE,
	OPT_INT,
	OPT_FLAG,  /* u32 0/1, no value */
	OPT_ONOFF, /* u32 0/1: "on" or "off" (a flag with a value; in the file also true/false) */
};

struct opt {
	const char *key; /* config key; the flag is --key with '_' -> '-' */
	enum opt_type type;
	size_t off, size;
	double min, max;
	const char *help;
	int reload; /* applied on SIGHUP; else a change needs a restart */
};

/* The table, one entry per row of FSD_OPTIONS (fsd_options.h). */
#define OPT_ROW(key, field, type, n, dflt, lo, hi, rl, h) \
	{#key,                                            \
	 OPT_##type,                                      \
	 offsetof(struct fsd_config, field),              \
	 sizeof(((struct fsd_config *)0)->field),         \
	 lo,                                              \
	 hi,                                              \
	 h,                                               \
	 rl},
static const struct opt opts[] = {FSD_OPTIONS(OPT_ROW)};
#undef OPT_ROW

/* A reloadable option is one the reload can store whole: a string (read by
 * the loop thread only) or a 4-byte number (other threads read it with
 * relaxed atomic loads; fsd_config_reload stores it atomically). */
#define OPT_RELOAD_OK(key, field, type, n, dflt, lo, hi, rl, h)                                        \
	_Static_assert(!(rl) || OPT_##type == OPT_STR || sizeof(((struct fsd_config *)0)->field) == 4, \
		       "option " #key ": only a string or a 4-byte number can be reloadable");
FSD_OPTIONS(OPT_RELOAD_OK)
#undef OPT_RELOAD_OK
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

/* Messages about the settings go to stderr: at start before logging
 * matters, "foresightd: ..."; during a reload (SIGHUP) they are log lines of
 * priority error, so journald keeps them with the daemon's. */
static int reloading;

static void cfg_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void cfg_err(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs(reloading ? "<3>foresightd: reload: " : "foresightd: ", stderr);
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
#define OPT_DEFAULT(key, field, type, n, dflt, lo, hi, rl, h) DEF_##type(field, dflt)
void fsd_config_defaults(struct fsd_config *c)
{
	memset(c, 0, sizeof(*c));
	FSD_OPTIONS(OPT_DEFAULT)
}
#undef OPT_DEFAULT

/* Where each option's value came from, as the user wrote it: "--slots",
 * "FILE:LINE:COL: key 'slots'", "$FORESIGHT_SOCKET"; "" = the default.
 * Every later message about an option names it this way. */
static char origin[NOPTS][300];

static size_t opt_index(const struct opt *o)
{
	return (size_t)(o - opts);
}

static const struct opt *opt_by_key(const char *key)
{
	for (size_t i = 0; i < NOPTS; i++)
		if (strcmp(opts[i].key, key) == 0)
			return &opts[i];
	return NULL;
}

/* How to name option `key` in a message: where it was set, or
 * "key 'K' (default)". */
static const char *src(const char *key)
{
	static char buf[4][320];
	static int next;
	const struct opt *o = opt_by_key(key);
	char *b = buf[next++ & 3];
	if (o && origin[opt_index(o)][0])
		snprintf(b, sizeof(buf[0]), "%s", origin[opt_index(o)]);
	else
		snprintf(b, sizeof(buf[0]), "%s (default)", key);
	return b;
}

static int opt_is_int(const struct opt *o)
{
	return o->type == OPT_U32 || o->type == OPT_U64 || o->type == OPT_INT;
}

/* "1 to 16777216": integer ranges as integers (the u64 seed: its whole range). */
static void range_text(const struct opt *o, char *out, size_t len)
{
	if (!opt_is_int(o))
		snprintf(out, len, "%g to %g", o->min, o->max);
	else if (o->max >= 18446744073709551615.0)
		snprintf(out, len, "%lld to %llu", (long long)o->min, (unsigned long long)UINT64_MAX);
	else
		snprintf(out, len, "%lld to %lld", (long long)o->min, (long long)o->max);
}

static const char *type_word(const struct opt *o);

/* Set one option from text.  0, or -1 with a message naming `where`. */
static int opt_set(struct fsd_config *c, const struct opt *o, const char *val, const char *where)
{
	char *p = (char *)c + o->off;
	char *end;
	char range[96];
	errno = 0;
	switch (o->type) {
	case OPT_STR:
		if (strlen(val) >= o->size) {
			cfg_err("%s: value too long (%zu bytes, at most %zu)\n", where, strlen(val),
				o->size - 1);
			return -1;
		}
		strcpy(p, val);
		return 0;
	case OPT_FLAG:
		if (strcmp(val, "1") && strcmp(val, "0") && strcmp(val, "true") && strcmp(val, "false")) {
			cfg_err("%s: '%s' is not true or false\n", where, val);
			return -1;
		}
		*(uint32_t *)p = val[0] == '1' || val[0] == 't';
		return 0;
	case OPT_ONOFF:
		if (strcmp(val, "on") && strcmp(val, "off")) {
			cfg_err("%s: '%s' is not on or off\n", where, val);
			return -1;
		}
		*(uint32_t *)p = strcmp(val, "on") == 0;
		return 0;
	case OPT_MODE: {
		unsigned long v = strtoul(val, &end, 8);
		if (errno || *end || end == val || v > 0777 || val[0] == '-' || val[0] == '+' ||
		    val[0] == ' ') {
			cfg_err("%s: '%s' is not an octal mode 0 to 0777\n", where, val);
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
			cfg_err("%s: '%s' is not an integer (%s)\n", where, val, range);
			return -1;
		}
		if (val[0] == '-') {
			long long x = strtoll(val, &end, 10);
			v = (double)x;
			if (errno || x < (long long)o->min) {
				cfg_err("%s: %s is out of range (%s)\n", where, val, range);
				return -1;
			}
		} else {
			unsigned long long x = strtoull(val, &end, 10);
			if (errno || (double)x > o->max || (double)x < o->min) {
				cfg_err("%s: %s is out of range (%s)\n", where, val, range);
				return -1;
			}
			if (o->type == OPT_U64) {
				*(uint64_t *)p = x;
				goto done;
			}
			v = (double)x;
		}
	} else {
		v = strtod(val, &end);
		if (errno || *end || end == val || v != v) {
			cfg_err("%s: '%s' is not a number (%s)\n", where, val, range);
			return -1;
		}
		if (v < o->min || v > o->max) {
			cfg_err("%s: %s is out of range (%s)\n", where, val, range);
			return -1;
		}
	}
	switch (o->type) {
	case OPT_U32:
		*(uint32_t *)p = (uint32_t)v;
		break;
	case OPT_U64:
		*(uint64_t *)p = (uint64_t)v;
		break;
	case OPT_INT:
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
	cfg_err("%s:%d:%d: %s\n", j->file, j->line, jcol(j, at), msg);
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

static const char *type_word(const struct opt *o)
{
	switch (o->type) {
	case OPT_STR:
		return "a string";
	case OPT_FLAG:
		return "true or false";
	case OPT_ONOFF:
		return "\"on\" or \"off\" (or true or false)";
	case OPT_MODE:
		return "an octal mode (\"0660\")";
	case OPT_DBL:
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
static int file_set(struct fsd_config *c, const struct opt *o, enum jtok t, const char *val,
		    const char *where)
{
	int fits;
	switch (o->type) {
	case OPT_STR:
		fits = t == J_STR;
		break;
	case OPT_FLAG:
		fits = t == J_TRUE || t == J_FALSE;
		break;
	case OPT_ONOFF:
		fits = t == J_TRUE || t == J_FALSE ||
		       (t == J_STR && (!strcmp(val, "on") || !strcmp(val, "off")));
		if (t != J_STR)
			val = t == J_TRUE ? "on" : "off";
		break;
	case OPT_MODE:
		/* 660 reads as octal, like "0660" (the example's spelling) */
		fits = t == J_STR || t == J_NUM;
		break;
	default:
		fits = t == J_NUM;
		break;
	}
	if (!fits) {
		char range[96] = "";
		if (o->type != OPT_STR && o->type != OPT_FLAG && o->type != OPT_ONOFF &&
		    o->type != OPT_MODE) {
			range[0] = ',';
			range[1] = ' ';
			range_text(o, range + 2, sizeof(range) - 2);
		}
		if (t == J_STR)
			cfg_err("%s: \"%s\" is a string; %s takes %s%s\n", where, val, o->key, type_word(o),
				range);
		else
			cfg_err("%s: %s is %s; %s takes %s%s\n", where, val,
				t == J_NUM ? "a number" : "a boolean", o->key, type_word(o), range);
		return -1;
	}
	if (o->type == OPT_FLAG)
		val = t == J_TRUE ? "true" : "false";
	return opt_set(c, o, val, where);
}

static int parse_text(struct fsd_config *c, const char *path, const char *buf, size_t len)
{
	struct jr j = {.p = buf, .end = buf + len, .lstart = buf, .file = path, .line = 1};
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
	int line_of[NOPTS], col_of[NOPTS];
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
			const struct opt *o = opt_by_key(key);
			if (!o) {
				char hint[96] = "";
				for (size_t i = 0; i < NOPTS; i++)
					if (strncmp(opts[i].key, key, strlen(key)) == 0 ||
					    strstr(key, opts[i].key))
						snprintf(hint, sizeof(hint), " (did you mean '%s'?)",
							 opts[i].key);
				cfg_err("%s: unknown key%s; foresightd --help lists them\n", where, hint);
				return -1;
			}
			size_t i = opt_index(o);
			if (line_of[i]) {
				cfg_err("%s: given twice (first at line %d, column %d)\n", where, line_of[i],
					col_of[i]);
				return -1;
			}
			line_of[i] = kline;
			col_of[i] = kcol;
			if (t == J_OBJ || t == J_ARR || t == J_NULL) {
				cfg_err("%s:%d:%d: key '%s': %s is not a value it takes; %s takes %s\n", path,
					j.line, jcol(&j, vat), key, jtok_word(t), key, type_word(o));
				return -1;
			}
			if (file_set(c, o, t, val, where) < 0)
				return -1;
			snprintf(origin[i], sizeof(origin[i]), "%s", where);
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

static int load_file(struct fsd_config *c, const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		cfg_err("config %s: %s\n", path, strerror(errno));
		return -1;
	}
	char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (len + 4096 > cap) {
			cap = cap ? cap * 2 : 8192;
			if (cap > (1u << 20)) {
				cfg_err("config %s: larger than 1 MiB\n", path);
				free(buf);
				fclose(f);
				return -1;
			}
			char *nb = realloc(buf, cap);
			if (!nb) {
				cfg_err("config %s: out of memory\n", path);
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
		cfg_err("config %s: read error\n", path);
		free(buf);
		return -1;
	}
	int rc = parse_text(c, path, buf, len);
	free(buf);
	return rc;
}

static void opt_format(const struct opt *o, const struct fsd_config *c, char *out, size_t len);

/* --help's " (default: X)" after an option's help: the row's default as a
 * user types it ("" for a flag, which is off unless given). */
static void help_default(const struct opt *o, const struct fsd_config *def, char *out, size_t len)
{
	const char *p = (const char *)def + o->off;
	char v[96];
	if (o->type == OPT_FLAG) {
		out[0] = 0;
		return;
	}
	if (o->type == OPT_STR) {
		snprintf(v, sizeof(v), "%s", p[0] ? p : "none");
	} else {
		opt_format(o, def, v, sizeof(v));
		size_t n = strlen(v);
		if (n >= 2 && v[0] == '"' && v[n - 1] == '"') { /* "on", "0660": unquoted */
			memmove(v, v + 1, n - 2);
			v[n - 2] = 0;
		}
	}
	snprintf(out, len, " (default: %s)", v);
}

static void usage(FILE *out)
{
	fprintf(out, "usage: foresightd [--config FILE] [--OPTION VALUE ...]\n"
		     "       foresightd --check-config [FILE] [--OPTION VALUE ...]\n"
		     "       foresightd --help | --version | --config-reference[=json|flags]\n\n"
		     "Serves a shared MoE expert tier to inference engines.  Runs in the\n"
		     "foreground until SIGTERM or `fsctl shutdown`; SIGHUP re-reads the config.\n\n"
		     "  --config FILE   JSON object whose keys are the options below\n"
		     "  --check-config [FILE]  validate the settings (FILE: as --config), print\n"
		     "                  OK and exit 0, or name the bad key and exit 2\n"
		     "  --config-reference[=json|flags]  print every config key (json) or option\n"
		     "                  (flags) with its type and default, as scdoc(5) text (the\n"
		     "                  man pages foresightd.json(5) and foresightd(8) are built from it)\n");
	struct fsd_config def;
	fsd_config_defaults(&def);
	for (size_t i = 0; i < NOPTS; i++) {
		char flag[40], dflt[128];
		snprintf(flag, sizeof(flag), "--%s", opts[i].key);
		for (char *p = flag; *p; p++)
			if (*p == '_')
				*p = '-';
		help_default(&opts[i], &def, dflt, sizeof(dflt));
		fprintf(out, "  %-18s %s%s\n", flag, opts[i].help, dflt);
	}
	fprintf(out, "\nThe socket is, in order: --socket, $FORESIGHT_SOCKET, the config key, %s.\n",
		FS_DEFAULT_SOCKET_PATH);
}

/* An option's value in `c` as text: what --config-reference prints as the
 * default and a reload logs as old and new. */
static void opt_format(const struct opt *o, const struct fsd_config *c, char *out, size_t len)
{
	const char *p = (const char *)c + o->off;
	uint32_t u32;
	uint64_t u64;
	int i32;
	unsigned mode;
	double dbl;
	switch (o->type) {
	case OPT_STR:
		if (p[0])
			snprintf(out, len, "\"%s\"", p);
		else
			snprintf(out, len, "none");
		break;
	case OPT_FLAG:
		memcpy(&u32, p, sizeof(u32));
		snprintf(out, len, "%s", u32 ? "true" : "false");
		break;
	case OPT_ONOFF:
		memcpy(&u32, p, sizeof(u32));
		snprintf(out, len, "\"%s\"", u32 ? "on" : "off");
		break;
	case OPT_MODE:
		memcpy(&mode, p, sizeof(mode));
		snprintf(out, len, "\"%04o\"", mode);
		break;
	case OPT_U32:
		memcpy(&u32, p, sizeof(u32));
		snprintf(out, len, "%u", u32);
		break;
	case OPT_U64:
		memcpy(&u64, p, sizeof(u64));
		snprintf(out, len, "%llu", (unsigned long long)u64);
		break;
	case OPT_INT:
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

static const char *opt_type_name(const struct opt *o)
{
	switch (o->type) {
	case OPT_STR:
		return "string";
	case OPT_FLAG:
		return "boolean";
	case OPT_ONOFF:
		return "on or off";
	case OPT_MODE:
		return "octal mode";
	case OPT_DBL:
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
static int config_reference(const char *mode)
{
	int flags = mode && strcmp(mode, "flags") == 0;
	if (mode && !flags && strcmp(mode, "json") != 0) {
		cfg_err("--config-reference=%s: json or flags\n", mode);
		return 2;
	}
	struct fsd_config def;
	fsd_config_defaults(&def);
	for (size_t i = 0; i < NOPTS; i++) {
		const struct opt *o = &opts[i];
		char dflt[128], name[48];
		opt_format(o, &def, dflt, sizeof(dflt));
		snprintf(name, sizeof(name), "%s%s", flags ? "--" : "", o->key);
		if (flags)
			for (char *p = name; *p; p++)
				if (*p == '_')
					*p = '-';
		putchar('*');
		scdoc_text(name);
		putchar('*');
		if (flags && o->type == OPT_ONOFF)
			printf(" *on*|*off*");
		else if (flags && o->type != OPT_FLAG)
			printf(" _%s_", o->type == OPT_STR ? "VALUE" : o->type == OPT_MODE ? "MODE" : "N");
		printf("\n\t");
		scdoc_text(o->help);
		printf(".\n\n\t");
		if (o->type == OPT_FLAG)
			printf("%s", flags ? "Takes no value; in the file: true or false" : "Type: boolean");
		else if (o->type == OPT_STR || o->type == OPT_MODE)
			printf("Type: %s", opt_type_name(o));
		else if (o->type == OPT_ONOFF)
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
			printf(". %s\n\n",
			       o->reload ? "SIGHUP applies a change." : "A change needs a restart.");
	}
	return 0;
}

/* argv of the start, kept for a reload: the flags win over the file then
 * as they did at start. */
static int saved_argc;
static char **saved_argv;
static const char *saved_cfgfile;
/* The settings as parsed (at start, then with each reload's applied keys).
 * A reload compares against these, not the running d->cfg, which the start
 * fills in (a GGUF model's layers and name, the CUDA backend's cards and
 * slots): those are not changes of the file. */
static struct fsd_config parsed;

/* Parse the config file and argv over c's contents.  Exits on --help,
 * --version and --config-reference (never during a reload: the first parse
 * exited).  0 or -1 (message printed). */
static int parse(struct fsd_config *c, int argc, char **argv)
{
	static char names[NOPTS][40];
	struct option lo[NOPTS + 6];
	size_t n = 0;
	for (size_t i = 0; i < NOPTS; i++) {
		snprintf(names[i], sizeof(names[i]), "%s", opts[i].key);
		for (char *p = names[i]; *p; p++)
			if (*p == '_')
				*p = '-';
		lo[n++] = (struct option){names[i],
					  opts[i].type == OPT_FLAG ? no_argument : required_argument, NULL,
					  1000 + (int)i};
	}
	lo[n++] = (struct option){"config", required_argument, NULL, 'c'};
	lo[n++] = (struct option){"help", no_argument, NULL, 'h'};
	lo[n++] = (struct option){"version", no_argument, NULL, 'V'};
	lo[n++] = (struct option){"check-config", optional_argument, NULL, 'k'};
	lo[n++] = (struct option){"config-reference", optional_argument, NULL, 'r'};
	lo[n] = (struct option){0};

	/* `--check-config FILE` is `--check-config --config FILE`. */
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--check-config") == 0 && i + 1 < argc && argv[i + 1][0] != '-') {
			c->check_config = 1;
			argv[i] = (char *)"--config";
		}
	}
	/* Pass 1: --config, --check-config, --help, --version, --config-reference. */
	const char *cfgfile = NULL;
	int ch;
	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (ch == 'c')
			cfgfile = optarg;
		else if (ch == 'k') {
			c->check_config = 1;
			if (optarg)
				cfgfile = optarg;
		} else if (ch == 'h') {
			usage(stdout);
			exit(0);
		} else if (ch == 'V') {
			printf("foresightd %s (protocol %u)\n", FSD_VERSION, FS_PROTO_VERSION);
			exit(0);
		} else if (ch == 'r') {
			exit(config_reference(optarg));
		}
	}
	saved_cfgfile = cfgfile;
	memset(origin, 0, sizeof(origin));
	if (cfgfile && load_file(c, cfgfile) < 0)
		return -1;
	const char *env = getenv("FORESIGHT_SOCKET");
	if (env && *env) {
		if (strlen(env) >= sizeof(c->socket_path)) {
			cfg_err("FORESIGHT_SOCKET too long\n");
			return -1;
		}
		strcpy(c->socket_path, env);
		snprintf(origin[opt_index(opt_by_key("socket"))], sizeof(origin[0]), "$FORESIGHT_SOCKET");
	}
	/* Pass 2: flags override. */
	opterr = 1;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (ch >= 1000) {
			char where[64];
			snprintf(where, sizeof(where), "--%s", names[ch - 1000]);
			if (opt_set(c, &opts[ch - 1000], optarg ? optarg : "1", where) < 0)
				return -1;
			snprintf(origin[ch - 1000], sizeof(origin[0]), "%s", where);
		} else if (ch == '?') {
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		cfg_err("unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	int known;
	if (!fsd_backend_find(c->backend, &known)) {
		char all[64], built[64];
		fsd_backends_list(all, sizeof(all), 0);
		fsd_backends_list(built, sizeof(built), 1);
		if (!known)
			cfg_err("%s: '%s' is not a backend (backends: %s)\n", src("backend"), c->backend,
				all);
		else
			cfg_err("%s: '%s': not built here (this build has: %s; cuda needs nvcc at build time)\n",
				src("backend"), c->backend, built);
		return -1;
	}
	if ((c->ring_entries & (c->ring_entries - 1)) != 0) {
		cfg_err("%s: %u is not a power of two\n", src("ring_entries"), c->ring_entries);
		return -1;
	}
	if (c->describe && !c->model_path[0]) {
		cfg_err("--describe needs --model FILE\n");
		return -1;
	}
	if (c->experts_used > c->experts) {
		cfg_err("%s: %u exceeds %s: %u\n", src("experts_used"), c->experts_used, src("experts"),
			c->experts);
		return -1;
	}
	if ((uint64_t)c->layers * c->experts * c->cards > (1ull << 26)) {
		cfg_err("%s x %s x %s (%u x %u x %u) is more than the epoch tables hold (%llu)\n",
			src("cards"), src("layers"), src("experts"), c->cards, c->layers, c->experts,
			1ull << 26);
		return -1;
	}
	if (snprintf(c->fd_socket_path, sizeof(c->fd_socket_path), "%s.fd", c->socket_path) >=
		    (int)sizeof(c->fd_socket_path) ||
	    strlen(c->fd_socket_path) >= 108) {
		cfg_err("%s: the path is too long (%zu bytes, at most 104)\n", src("socket"),
			strlen(c->socket_path));
		return -1;
	}
	if (c->metrics_listen[0]) {
		char url[128], err[256];
		if (fsd_metrics_url(c->metrics_listen, (int)c->metrics_allow_remote, url, sizeof(url), err,
				    sizeof(err)) < 0) {
			cfg_err("%s: %s\n", src("metrics_listen"), err);
			return -1;
		}
	}
	return 0;
}

int fsd_config_parse(struct fsd_config *c, int argc, char **argv)
{
	saved_argc = argc;
	saved_argv = argv;
	if (parse(c, argc, argv) < 0)
		return -1;
	parsed = *c;
	fsd_log_level = c->log_level;
	return 0;
}

static void append(char *dst, size_t len, const char *s)
{
	size_t n = strlen(dst);
	if (n + 1 < len)
		snprintf(dst + n, len - n, "%s%s", n ? ", " : "", s);
}

int fsd_config_reload(struct fsd *d)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	char msg[96];
	snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
		 (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000u);
	fsd_notify(msg);

	const char *file = saved_cfgfile ? saved_cfgfile : "(no --config file)";
	struct fsd_config *n = malloc(sizeof(*n));
	int rc = -1;
	if (!n) {
		fsd_log(FSD_ERR, "reload: out of memory");
		goto out;
	}
	fsd_config_defaults(n);
	reloading = 1;
	rc = parse(n, saved_argc, saved_argv);
	reloading = 0;
	if (rc < 0) {
		fsd_log(FSD_ERR, "reload: %s rejected, nothing changed: the running settings stay", file);
		goto out;
	}
	/* The reload's lines show under the old level or the new one,
	 * whichever is more verbose: lowering the level must not hide them. */
	int old_level = fsd_log_level, level = n->log_level;
	__atomic_store_n(&fsd_log_level, level > old_level ? level : old_level, __ATOMIC_RELAXED);
	/* The endpoint first: it can fail (address in use), and then its two
	 * keys keep their running values and are not reported as applied. */
	if (strcmp(n->metrics_listen, parsed.metrics_listen) != 0 &&
	    fsd_metrics_start(d, n->metrics_listen, (int)n->metrics_allow_remote) < 0) {
		fsd_log(FSD_ERR, "reload: metrics_listen %s could not be served: kept %s",
			n->metrics_listen[0] ? n->metrics_listen : "(off)",
			parsed.metrics_listen[0] ? parsed.metrics_listen : "(off)");
		memcpy(n->metrics_listen, parsed.metrics_listen, sizeof(n->metrics_listen));
		n->metrics_allow_remote = parsed.metrics_allow_remote;
	}
	char applied[1024] = "", restart[1024] = "";
	for (size_t i = 0; i < NOPTS; i++) {
		const struct opt *o = &opts[i];
		char *was_p = (char *)&parsed + o->off, *cur = (char *)&d->cfg + o->off;
		const char *nv = (const char *)n + o->off;
		if (memcmp(was_p, nv, o->size) == 0)
			continue;
		if (!o->reload || (o->type != OPT_STR && o->size != sizeof(uint32_t))) {
			append(restart, sizeof(restart), o->key);
			continue;
		}
		char was[96], now[96], item[256];
		opt_format(o, &parsed, was, sizeof(was));
		opt_format(o, n, now, sizeof(now));
		snprintf(item, sizeof(item), "%s %s -> %s", o->key, was, now);
		append(applied, sizeof(applied), item);
		memcpy(was_p, nv, o->size);
		if (o->type == OPT_STR) {
			memcpy(cur, nv, o->size); /* read by the loop thread only */
		} else {
			/* The hot thread reads these with relaxed atomic loads. */
			uint32_t v;
			_Static_assert(sizeof(int) == sizeof(uint32_t), "4-byte settings");
			memcpy(&v, nv, sizeof(v));
			__atomic_store_n((uint32_t *)(void *)cur, v, __ATOMIC_RELAXED);
		}
	}
	fsd_log(FSD_INFO, "reload: %s: %s%s", file, applied[0] ? "applied " : "no reloadable setting changed",
		applied);
	if (restart[0])
		fsd_log(FSD_WARN,
			"reload: changed, but only a restart applies them (still running the old values): %s",
			restart);
	__atomic_store_n(&fsd_log_level, level, __ATOMIC_RELAXED);
out:
	free(n);
	fsd_notify("READY=1");
	return rc < 0 ? -1 : 0;
}
