/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_opt.h: the command-line parser of the tools and benches.  A tool
 * describes its options in one table (name, type, where the value goes,
 * range, help); the parser reads argv against it and --help is printed
 * from the same table, so the flags, their checks and their help cannot
 * disagree.  (foresightd has its own list, daemon/fsd_options.h: it also
 * feeds a config file, the reload and the man pages.)
 *
 *   uint32_t windows = 200;
 *   const char *sock = NULL;
 *   int quiet = 0;
 *   const struct fs_opt opts[] = {
 *           FS_OPT_STR("socket", "PATH", &sock, "control socket"),
 *           FS_OPT_U32("windows", "N", &windows, 1, 1000000, "windows to run"),
 *           FS_OPT_FLAG("quiet", 'q', &quiet, "no progress lines"),
 *   };
 *   const struct fs_opt_cmd cmd = {"fs-tool", "usage: fs-tool [OPTIONS]\n", NULL,
 *                                  opts, FS_OPT_N(opts)};
 *   int rc = fs_opt_parse(&cmd, argc, argv);  // 0, FS_OPT_HELP or -1
 *
 * Syntax: --name VALUE or --name=VALUE; a flag takes no value; -h/--help
 * always; a one-letter alias (-q) where a row gives one; "--" ends the
 * options.  Anything else not starting with '-' is a positional argument,
 * kept in order where the command has room for it (pos, max_pos), or
 * checked and stored by the command's positional rows (args: "SOCKET N
 * [GAP_US]" as typed rows, so a bench's positional numbers get the same
 * checks as an option's).
 * Integers: decimal, or hexadecimal with 0x; no sign for the unsigned
 * types, no spaces, no fraction.  Numbers (FS_OPT_DBL): strtod's, finite.
 * Every value is checked against its row's range before it is stored: a
 * bad one leaves the destination as it was.
 *
 * Errors go to stderr as "PROG: --name 'VALUE': what was wanted (try
 * --help)" (or the command's hint) and fs_opt_parse returns -1; the tool picks its exit status
 * (fs_opt_parse_or_exit: 2, the tools' usage status).
 * --help: the usage text, the option list (each help followed by
 * "(default: X)" from the destination's value before the parse, unless
 * the help itself mentions a default, or the row is a flag), then the tail
 * text, on stdout; fs_opt_parse returns FS_OPT_HELP.
 */
#ifndef FS_OPT_H
#define FS_OPT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum fs_opt_type {
	FS_OPT_T_FLAG,   /* int: 1 when given */
	FS_OPT_T_STR,    /* const char *: the argv string itself */
	FS_OPT_T_U32,    /* uint32_t, in [ilo, ihi] */
	FS_OPT_T_U64,    /* uint64_t, in [ilo, ihi] */
	FS_OPT_T_INT,    /* int, in [ilo, ihi] (ilo may be negative) */
	FS_OPT_T_DBL,    /* double, in [dlo, dhi] */
	FS_OPT_T_CHOICE, /* int: the index of the value in choices (NULL-ended) */
	FS_OPT_T_FN,     /* fn(dst, value, err, errlen): 0, or -1 with err set */
};

struct fs_opt {
	const char *name; /* "windows": --windows */
	char alias;       /* 'q': -q too; 0: none */
	enum fs_opt_type type;
	void *dst;
	const char *arg;  /* the value's name in --help ("N", "PATH"); NULL for a flag */
	const char *help; /* one line or more; the list wraps it */
	int64_t ilo;
	uint64_t ihi;
	double dlo, dhi;
	const char *const *choices;
	int (*fn)(void *dst, const char *val, char *err, size_t errlen);
	int *given; /* optional: set to 1 when the option is given */
};

/* The rows.  The conditional in each checks the destination's type (a
 * mismatch is a compiler warning, an error under -Werror). */
#define FS_OPT_DST_(d, type) ((void *)(1 ? (d) : (type *)0))
#define FS_OPT_FLAG(n, al, d, h)                                                                           \
	{                                                                                                  \
		.name = (n), .alias = (al), .type = FS_OPT_T_FLAG, .dst = FS_OPT_DST_(d, int), .help = (h) \
	}
#define FS_OPT_STR(n, a, d, h)                                                                      \
	{                                                                                           \
		.name = (n), .type = FS_OPT_T_STR, .dst = FS_OPT_DST_(d, const char *), .arg = (a), \
		.help = (h)                                                                         \
	}
#define FS_OPT_U32(n, a, d, lo, hi, h)                                                                       \
	{                                                                                                    \
		.name = (n), .type = FS_OPT_T_U32, .dst = FS_OPT_DST_(d, uint32_t), .arg = (a), .help = (h), \
		.ilo = (int64_t)(lo), .ihi = (uint64_t)(hi)                                                  \
	}
#define FS_OPT_U64(n, a, d, lo, hi, h)                                                                       \
	{                                                                                                    \
		.name = (n), .type = FS_OPT_T_U64, .dst = FS_OPT_DST_(d, uint64_t), .arg = (a), .help = (h), \
		.ilo = (int64_t)(lo), .ihi = (uint64_t)(hi)                                                  \
	}
#define FS_OPT_INT(n, a, d, lo, hi, h)                                                                  \
	{                                                                                               \
		.name = (n), .type = FS_OPT_T_INT, .dst = FS_OPT_DST_(d, int), .arg = (a), .help = (h), \
		.ilo = (int64_t)(lo), .ihi = (uint64_t)(hi)                                             \
	}
#define FS_OPT_DBL(n, a, d, lo, hi, h)                                                                     \
	{                                                                                                  \
		.name = (n), .type = FS_OPT_T_DBL, .dst = FS_OPT_DST_(d, double), .arg = (a), .help = (h), \
		.dlo = (lo), .dhi = (hi)                                                                   \
	}
#define FS_OPT_CHOICE(n, a, d, ch, h)                                                                      \
	{                                                                                                  \
		.name = (n), .type = FS_OPT_T_CHOICE, .dst = FS_OPT_DST_(d, int), .arg = (a), .help = (h), \
		.choices = (ch)                                                                            \
	}
#define FS_OPT_FN(n, a, d, f, h)                                                                 \
	{                                                                                        \
		.name = (n), .type = FS_OPT_T_FN, .dst = (d), .arg = (a), .help = (h), .fn = (f) \
	}
#define FS_OPT_N(opts) ((unsigned)(sizeof(opts) / sizeof((opts)[0])))

struct fs_opt_cmd {
	const char *prog;  /* names the tool in messages */
	const char *usage; /* --help: before the option list ("usage: ...\n\nWhat it does.\n") */
	const char *tail;  /* --help: after it (exit status, output), or NULL */
	const struct fs_opt *opts;
	unsigned n;
	/* Positional arguments, in order: at most max_pos (0: none allowed). */
	const char **pos;
	unsigned max_pos;
	unsigned *npos;
	/* Or typed positional rows: the i-th argument not starting with '-'
	 * is checked and stored by args[i] as an option's value would be
	 * (named by the row's name, "SOCKET", in messages and --help); fewer
	 * than min_args, or more than nargs, is an error.  *npos (may be
	 * NULL) says how many were given.  pos and max_pos are then unused.
	 * A table with min_args > nargs, or nargs rows and no args, is the
	 * tool's bug: fs_opt_parse() and fs_opt_help() say so and return -1
	 * at once (as for n rows and no opts, or a row without its name,
	 * help, destination, choices or callback). */
	const struct fs_opt *args;
	unsigned nargs, min_args;
	/* After an error message: NULL, "(try --help)"; a tool whose --help
	 * is per command says which ("(try 'fsctl stats --help')"). */
	const char *hint;
};

#define FS_OPT_HELP 1
/* Parse argv[1..argc) against cmd: 0, FS_OPT_HELP (--help printed on
 * stdout) or -1 (the error printed on stderr). */
int fs_opt_parse(const struct fs_opt_cmd *cmd, int argc, char *const *argv);
/* fs_opt_parse() and what nearly every tool's main does with its result:
 * exit(0) after --help, exit(FS_OPT_EXIT_USAGE) after an error (both
 * already printed); returns only when argv was taken.  For a tool's main
 * or a subcommand's, never a library: a tool that must clean up, or
 * exits otherwise (fsctl, fs-demo-engine), calls fs_opt_parse. */
#define FS_OPT_EXIT_USAGE 2
void fs_opt_parse_or_exit(const struct fs_opt_cmd *cmd, int argc, char *const *argv);
/* The --help text (the defaults as the destinations hold them now): 0,
 * or -1 for a bad table (the message on stderr, nothing on out). */
int fs_opt_help(const struct fs_opt_cmd *cmd, FILE *out);
/* An unsigned integer as the rows take it (decimal or 0x hex, no sign),
 * at most hi: 0, or -1.  For FS_OPT_FN callbacks that check a value
 * before they keep it in another form. */
int fs_opt_uint(const char *val, uint64_t hi, uint64_t *out);

#endif /* FS_OPT_H */
