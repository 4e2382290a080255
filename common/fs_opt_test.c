/* SPDX-License-Identifier: Apache-2.0 */
/* fs_opt_test.c: the tools' option parser (fs_opt.c): every type's values
 * and ranges, both spellings of a value, aliases, positionals, "--", the
 * errors (each names the option and the value, leaves the destination
 * alone, returns -1), and --help generated from the table with the
 * defaults as they were before the parse. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_opt.h"

static const char *const kinds[] = {"none", "oracle", "recency", NULL};

struct vals {
	int quiet, kind, i, fn_calls, tokens_given;
	uint32_t u32;
	uint64_t u64;
	double d;
	const char *s;
	const char *pos[2];
	unsigned npos;
};
static struct vals v;

static int even(void *dst, const char *val, char *err, size_t len)
{
	long x = strtol(val, NULL, 10);
	if (x % 2) {
		snprintf(err, len, "not even");
		return -1;
	}
	*(long *)dst = x;
	v.fn_calls++;
	return 0;
}
static long ev;

static struct fs_opt opts[9];
static struct fs_opt_cmd cmd;

static void setup(void)
{
	v = (struct vals){.kind = 1, .i = -1, .u32 = 200, .u64 = 7, .d = 0.5, .s = "fs"};
	ev = 0;
	const struct fs_opt o[] = {
		FS_OPT_FLAG("quiet", 'q', &v.quiet, "no progress lines"),
		FS_OPT_STR("name", "NAME", &v.s, "a name"),
		FS_OPT_U32("windows", "N", &v.u32, 1, 1000, "windows to run"),
		FS_OPT_U64("seed", "N", &v.u64, 0, UINT64_MAX, "seed"),
		FS_OPT_INT("slots", "N", &v.i, -1, 100, "slots, -1 auto"),
		FS_OPT_DBL("skew", "S", &v.d, 0, 16, "Zipf exponent"),
		FS_OPT_CHOICE("predict", "KIND", &v.kind, kinds, "predictor"),
		FS_OPT_FN("even", "N", &ev, even, "an even number (default none)"),
		FS_OPT_U32("tokens", "T", &v.u32, 1, 4096, "tokens"),
	};
	memcpy(opts, o, sizeof(o));
	opts[8].given = &v.tokens_given;
	cmd = (struct fs_opt_cmd){.prog = "fs-test",
				  .usage = "usage: fs-test [OPTIONS] [IN [OUT]]\n\n",
				  .tail = "\nExit status: 0.\n",
				  .opts = opts,
				  .n = FS_OPT_N(opts),
				  .pos = v.pos,
				  .max_pos = 2,
				  .npos = &v.npos};
}

static int parse(int argc, const char **argv)
{
	return fs_opt_parse(&cmd, argc, (char *const *)argv);
}
/* PARSE("--a", "1", NULL): argv with the program's name first. */
static int count(const char *const *av)
{
	int n = 0;
	while (av[n])
		n++;
	return n;
}
#define PARSE(...) \
	parse(count((const char *const[]){"fs-test", __VA_ARGS__}), (const char *[]){"fs-test", __VA_ARGS__})

TestSuite(opt, .init = setup);

Test(opt, nothing_given_keeps_defaults)
{
	cr_assert_eq(PARSE(NULL), 0);
	cr_expect_eq(v.u32, 200u);
	cr_expect_eq(v.u64, 7u);
	cr_expect_eq(v.i, -1);
	cr_expect_str_eq(v.s, "fs");
	cr_expect_eq(v.npos, 0u);
}

Test(opt, every_type_both_spellings)
{
	cr_assert_eq(PARSE("--quiet", "--name", "eng", "--windows=1000", "--seed", "18446744073709551615",
			   "--slots", "-1", "--skew=2.5", "--predict", "recency", "--even=4", NULL),
		     0);
	cr_expect_eq(v.quiet, 1);
	cr_expect_str_eq(v.s, "eng");
	cr_expect_eq(v.u32, 1000u);
	cr_expect_eq(v.u64, UINT64_MAX);
	cr_expect_eq(v.i, -1);
	cr_expect_eq(v.d, 2.5);
	cr_expect_eq(v.kind, 2);
	cr_expect_eq(ev, 4);
	cr_assert_eq(PARSE("-q", "--seed", "0x10", "--slots", "100", "--name=", NULL), 0);
	cr_expect_eq(v.u64, 16u);
	cr_expect_eq(v.i, 100);
	cr_expect_str_eq(v.s, "");
}

Test(opt, given_is_set)
{
	cr_assert_eq(PARSE("--windows", "5", NULL), 0);
	cr_expect_eq(v.tokens_given, 0);
	cr_assert_eq(PARSE("--tokens", "5", NULL), 0);
	cr_expect_eq(v.tokens_given, 1);
}

Test(opt, positionals_and_double_dash)
{
	cr_assert_eq(PARSE("in.csv", "--windows", "3", "--", "--out", NULL), 0);
	cr_expect_eq(v.npos, 2u);
	cr_expect_str_eq(v.pos[0], "in.csv");
	cr_expect_str_eq(v.pos[1], "--out");
	cr_expect_eq(v.u32, 3u);
	cr_assert_eq(PARSE("-", "x", NULL), 0); /* "-" is an argument (stdin) */
	cr_expect_str_eq(v.pos[0], "-");
}

/* Each bad input: -1, the destination untouched, one message on stderr
 * that names the option (and the value) and says what was wanted. */
static void bad(const char *want, int argc, const char **argv)
{
	struct vals before = v;
	cr_assert_eq(parse(argc, argv), -1, "%s", want);
	cr_expect_eq(v.u32, before.u32);
	cr_expect_eq(v.u64, before.u64);
	cr_expect_eq(v.i, before.i);
	cr_expect_eq(v.d, before.d);
	cr_expect_eq(v.kind, before.kind);
	fflush(stderr);
}
#define BAD(want, ...)                                                  \
	bad(want, count((const char *const[]){"fs-test", __VA_ARGS__}), \
	    (const char *[]){"fs-test", __VA_ARGS__})

Test(opt, errors_name_the_option, .init = setup)
{
	cr_redirect_stderr();
	BAD("range", "--windows", "0", NULL);
	BAD("range", "--windows", "1001", NULL);
	BAD("sign", "--windows", "-5", NULL);
	BAD("fraction", "--windows", "1.5", NULL);
	BAD("space", "--windows", " 5", NULL);
	BAD("empty", "--windows=", NULL);
	BAD("hex junk", "--seed", "0x", NULL);
	BAD("overflow", "--seed", "18446744073709551616", NULL);
	BAD("int low", "--slots", "-2", NULL);
	BAD("int high", "--slots", "101", NULL);
	BAD("dbl range", "--skew", "17", NULL);
	BAD("dbl nan", "--skew", "nan", NULL);
	BAD("dbl junk", "--skew", "1x", NULL);
	BAD("choice", "--predict", "magic", NULL);
	BAD("fn", "--even", "3", NULL);
	BAD("unknown", "--nope", NULL);
	BAD("unknown alias", "-x", NULL);
	BAD("missing", "--windows", NULL);
	BAD("flag value", "--quiet=1", NULL);
	BAD("too many", "a", "b", "c", NULL);
	fflush(stderr);
	char buf[4096] = "";
	FILE *f = cr_get_redirected_stderr();
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	const char *lines[] = {
		"fs-test: --windows '0': give an integer from 1 to 1000 (try --help)\n",
		"fs-test: --windows '-5': give an integer from 1 to 1000 (try --help)\n",
		"fs-test: --windows '': give an integer from 1 to 1000 (try --help)\n",
		"fs-test: --seed '18446744073709551616': give an integer from 0 to 18446744073709551615",
		"fs-test: --slots '-2': give an integer from -1 to 100",
		"fs-test: --skew 'nan': give a number from 0 to 16",
		"fs-test: --predict 'magic': give none, oracle or recency (try --help)\n",
		"fs-test: --even '3': not even (try --help)\n",
		"fs-test: unknown option '--nope' (try --help)\n",
		"fs-test: unknown option '-x' (try --help)\n",
		"fs-test: --windows needs a value (try --help)\n",
		"fs-test: --quiet takes no value ('--quiet=1') (try --help)\n",
		"fs-test: too many arguments ('c') (try --help)\n",
	};
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		cr_expect(strstr(buf, lines[i]) != NULL, "missing: %s\nin:\n%s", lines[i], buf);
	size_t nl = 0;
	for (char *p = buf; *p; p++)
		nl += *p == '\n';
	cr_expect_eq(nl, 20u, "one line per error:\n%s", buf);
	cr_expect_eq(ev, 0);
}

Test(opt, no_positionals_allowed)
{
	cmd.max_pos = 0;
	cr_redirect_stderr();
	cr_assert_eq(PARSE("stray", NULL), -1);
	fflush(stderr);
	cr_assert_stderr_eq_str("fs-test: unexpected argument 'stray' (try --help)\n");
}

/* A tool whose --help is per command names it in the hint. */
Test(opt, the_hint_replaces_try_help, .init = setup)
{
	cmd.hint = "(try 'fs-test sub --help')";
	cr_redirect_stderr();
	cr_assert_eq(PARSE("--windows", "0", NULL), -1);
	fflush(stderr);
	cr_assert_stderr_eq_str(
		"fs-test: --windows '0': give an integer from 1 to 1000 (try 'fs-test sub --help')\n");
}

/* --help: from the table, the defaults as before the parse (a value given
 * before --help does not show as the default), nothing stored. */
Test(opt, help_from_the_table)
{
	cr_redirect_stdout();
	cr_assert_eq(PARSE("--windows", "9", "--help", NULL), FS_OPT_HELP);
	cr_expect_eq(v.u32, 200u);
	fflush(stdout);
	char buf[4096] = "";
	size_t n = fread(buf, 1, sizeof(buf) - 1, cr_get_redirected_stdout());
	buf[n] = 0;
	const char *want[] = {"usage: fs-test [OPTIONS] [IN [OUT]]\n\n",
			      "  --quiet         no progress lines (also -q)\n",
			      "  --name NAME     a name (default: fs)\n",
			      "  --windows N     windows to run (default: 200)\n",
			      "  --slots N       slots, -1 auto (default: -1)\n",
			      "  --skew S        Zipf exponent (default: 0.5)\n",
			      "  --predict KIND  predictor (default: oracle)\n",
			      "  --even N        an even number (default none)\n",
			      "  --help          this text\n",
			      "\nExit status: 0.\n"};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_expect(strstr(buf, want[i]) != NULL, "missing: %s\nin:\n%s", want[i], buf);
	cr_expect(strstr(buf, "--windows N") < strstr(buf, "--help "));
}

Test(opt, help_alias_and_value_named_like_help)
{
	cr_redirect_stdout();
	cr_assert_eq(PARSE("-h", NULL), FS_OPT_HELP);
	cr_assert_eq(PARSE("--name", "-h", NULL), 0); /* a value, not the option */
	cr_expect_str_eq(v.s, "-h");
	cr_assert_eq(PARSE("--", "--help", NULL), 0);
	cr_expect_str_eq(v.pos[0], "--help");
}

Test(opt, long_help_wraps)
{
	struct fs_opt o[] = {
		FS_OPT_FLAG("x", 0, &v.quiet,
			    "one two three four five six seven eight nine ten eleven twelve thirteen "
			    "fourteen fifteen sixteen seventeen")};
	struct fs_opt_cmd c = {.prog = "p", .opts = o, .n = 1};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	fs_opt_help(&c, f);
	fclose(f);
	char *save = NULL;
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		cr_expect_leq(strlen(line), 79u, "%s", line);
	free(buf);
}

/* Typed positional rows (a bench's "SOCKET N [GAP_US]"): each checked and
 * stored as an option's value, named bare in errors and --help; too few
 * or too many is an error. */
Test(opt, typed_positionals)
{
	const char *sock = NULL;
	uint32_t n = 0, gap = 200;
	const struct fs_opt args[] = {
		FS_OPT_STR("SOCKET", NULL, &sock, "the daemon's control socket"),
		FS_OPT_U32("N", NULL, &n, 1, 1000, "samples"),
		FS_OPT_U32("GAP_US", NULL, &gap, 0, 100000, "between samples"),
	};
	cmd.pos = NULL;
	cmd.max_pos = 0;
	cmd.args = args;
	cmd.nargs = FS_OPT_N(args);
	cmd.min_args = 2;
	cr_assert_eq(PARSE("s.sock", "10", "--windows", "3", NULL), 0);
	cr_expect_str_eq(sock, "s.sock");
	cr_expect_eq(n, 10u);
	cr_expect_eq(gap, 200u);
	cr_expect_eq(v.npos, 2u);
	cr_expect_eq(v.u32, 3u);
	cr_assert_eq(PARSE("t.sock", "0x10", "5", NULL), 0);
	cr_expect_eq(n, 16u);
	cr_expect_eq(gap, 5u);
	cr_expect_eq(v.npos, 3u);

	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cr_assert_not_null(f);
	FILE *saved = stderr;
	stderr = f;
	cr_expect_eq(PARSE("s.sock", "12x", NULL), -1); /* not a number: n untouched */
	cr_expect_eq(n, 16u);
	cr_expect_eq(PARSE("s.sock", NULL), -1);           /* N missing */
	cr_expect_eq(PARSE("s", "1", "2", "3", NULL), -1); /* too many */
	stderr = saved;
	fclose(f);
	cr_expect(strstr(buf, "fs-test: N is missing (try --help)\n") != NULL, "%s", buf);
	cr_expect(strstr(buf, "fs-test: N '12x': give an integer from 1 to 1000 (try --help)\n") != NULL,
		  "%s", buf);
	cr_expect(strstr(buf, "fs-test: too many arguments ('3') (try --help)\n") != NULL, "%s", buf);
	free(buf);

	buf = NULL;
	sock = NULL;
	gap = 200;
	f = open_memstream(&buf, &len);
	fs_opt_help(&cmd, f);
	fclose(f);
	cr_expect(strstr(buf, "  SOCKET          the daemon's control socket\n") != NULL, "%s", buf);
	cr_expect(strstr(buf, "  GAP_US          between samples (default: 200)\n") != NULL, "%s", buf);
	cr_expect(strstr(buf, "  N               samples\n") != NULL, "%s", buf); /* required: no default */
	cr_expect(strstr(buf, "  SOCKET") < strstr(buf, "  --quiet"), "%s", buf);
	free(buf);
}

/* A table that requires more positional rows than it defines is the
 * tool's bug: refused before any argument is looked at (it read past
 * args[] to name the row "missing"), --help included. */
Test(opt, min_args_above_nargs_is_refused)
{
	const char *a = NULL, *b = NULL;
	const struct fs_opt args[] = {
		FS_OPT_STR("A", NULL, &a, "first"),
		FS_OPT_STR("B", NULL, &b, "second"),
	};
	cmd.pos = NULL;
	cmd.max_pos = 0;
	cmd.args = args;
	cmd.nargs = FS_OPT_N(args);
	cmd.min_args = 3;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cr_assert_not_null(f);
	FILE *saved = stderr;
	stderr = f;
	int given_two = PARSE("x", "y", NULL), help = PARSE("--help", NULL);
	cmd.args = NULL; /* nargs rows counted, none given */
	cmd.min_args = 0;
	int no_rows = PARSE(NULL);
	stderr = saved;
	fclose(f);
	cr_expect_eq(given_two, -1);
	cr_expect_eq(help, -1, "--help with a bad table");
	cr_expect_eq(no_rows, -1);
	cr_expect(strstr(buf, "fs-test: bad option table: 3 positional rows required, 2 defined\n") != NULL,
		  "%s", buf);
	cr_expect(strstr(buf, "fs-test: bad option table: 2 positional rows counted, none given\n") != NULL,
		  "%s", buf);
	cr_expect(strstr(buf, "is missing") == NULL, "%s", buf);
	cr_expect_null(a, "a row was stored from a bad table");
	free(buf);
}

/* fs_opt_help() called directly (a tool's own usage error: "too few
 * files", fs-trace-convert, fs-engine-bench report) checks the table as
 * the parse does: a bad one is refused, -1, the message on stderr and
 * nothing on the help's stream.  Before, only the parse checked: rows
 * counted and not given, or a choice row without its list, were read
 * through NULL (a crash), and min_args > nargs printed a help that
 * called option rows required. */
Test(opt, help_refuses_a_bad_table)
{
	const char *a = NULL;
	const struct fs_opt args[] = {FS_OPT_STR("A", NULL, &a, "first")};
	int k = 0;
	const struct fs_opt no_choices[] = {FS_OPT_CHOICE("kind", "K", &k, NULL, "kind")};
	const struct fs_opt no_name[] = {FS_OPT_FLAG(NULL, 0, &k, "nameless")};
	const struct {
		struct fs_opt_cmd c;
		const char *msg;
	} bad[] = {
		{{.prog = "t1", .opts = opts, .n = 2, .nargs = 2},
		 "t1: bad option table: 2 positional rows counted, none given\n"},
		{{.prog = "t2", .opts = opts, .n = 2, .args = args, .nargs = 1, .min_args = 2},
		 "t2: bad option table: 2 positional rows required, 1 defined\n"},
		{{.prog = "t3", .n = 3}, "t3: bad option table: 3 option rows counted, none given\n"},
		{{.prog = "t4", .opts = no_choices, .n = 1},
		 "t4: bad option table: a choice row without its choices (option row 0, kind)\n"},
		{{.prog = "t5", .opts = opts, .n = 2, .args = no_name, .nargs = 1},
		 "t5: bad option table: a row without a name (positional row 0)\n"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *out = NULL, *err = NULL;
		size_t olen = 0, elen = 0;
		FILE *fo = open_memstream(&out, &olen), *fe = open_memstream(&err, &elen);
		cr_assert(fo && fe);
		FILE *saved = stderr;
		stderr = fe;
		int help = fs_opt_help(&bad[i].c, fo);
		int parse = fs_opt_parse(&bad[i].c, 2, (char *const[]){"t", "--help", NULL});
		stderr = saved;
		fclose(fo);
		fclose(fe);
		cr_expect_eq(help, -1, "%s: help took a bad table", bad[i].c.prog);
		cr_expect_eq(parse, -1, "%s: parse took a bad table", bad[i].c.prog);
		cr_expect_eq(olen, 0u, "%s: help printed from a bad table:\n%s", bad[i].c.prog, out);
		cr_expect(strstr(err, bad[i].msg) == err, "%s: want %s got %s", bad[i].c.prog, bad[i].msg,
			  err);
		cr_expect(strstr(err + strlen(bad[i].msg), bad[i].msg) != NULL, "%s: parse said %s",
			  bad[i].c.prog, err);
		free(out);
		free(err);
	}
	cr_expect_null(a);
	/* A good table still prints, and says so. */
	char *out = NULL;
	size_t olen = 0;
	FILE *fo = open_memstream(&out, &olen);
	cr_expect_eq(fs_opt_help(&cmd, fo), 0);
	fclose(fo);
	cr_expect(strstr(out, "  --windows N     windows to run (default: 200)\n") != NULL, "%s", out);
	free(out);
}

/* fs_opt_parse_or_exit: the tools' mains in one call.  Taken: it returns
 * with the values stored; --help: exit 0; an error: exit 2 (criterion
 * runs each test in a process of its own and checks its exit status). */
Test(opt, parse_or_exit_returns_when_taken)
{
	fs_opt_parse_or_exit(&cmd, 3, (char *const[]){"fs-test", "--windows=9", "in", NULL});
	cr_expect_eq(v.u32, 9u);
	cr_expect_str_eq(v.pos[0], "in");
}

Test(opt, parse_or_exit_exits_0_after_help, .exit_code = 0)
{
	cr_redirect_stdout();
	fs_opt_parse_or_exit(&cmd, 2, (char *const[]){"fs-test", "--help", NULL});
	cr_assert_fail("returned after --help");
}

Test(opt, parse_or_exit_exits_2_after_an_error, .exit_code = FS_OPT_EXIT_USAGE)
{
	cr_redirect_stderr();
	fs_opt_parse_or_exit(&cmd, 2, (char *const[]){"fs-test", "--windows=0", NULL});
	cr_assert_fail("returned after an error");
}

/* fs_opt_uint: what the rows take, for callbacks that keep the text. */
Test(fs_opt, uint_helper_takes_what_the_rows_take)
{
	uint64_t got = 7;
	cr_expect_eq(fs_opt_uint("42", 100, &got), 0);
	cr_expect_eq(got, 42);
	cr_expect_eq(fs_opt_uint("0x10", 100, &got), 0);
	cr_expect_eq(got, 16);
	cr_expect_eq(fs_opt_uint("4294967295", UINT32_MAX, &got), 0);
	cr_expect_eq(got, UINT32_MAX);
	got = 7;
	cr_expect_eq(fs_opt_uint("4294967296", UINT32_MAX, &got), -1, "past hi");
	cr_expect_eq(fs_opt_uint("12x", 100, &got), -1);
	cr_expect_eq(fs_opt_uint("-1", 100, &got), -1, "no sign");
	cr_expect_eq(fs_opt_uint("", 100, &got), -1);
	cr_expect_eq(fs_opt_uint("99999999999999999999", UINT64_MAX, &got), -1, "overflow");
	cr_expect_eq(got, 7, "nothing stored on a refusal");
}
