/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_pin_test.c: fs-replay's single-card results, pinned.
 *
 * The hot pass and the residency core are being reshaped (issue 19) under
 * a promise: what fs-replay says about one card on the shared traces does
 * not move, bit for bit, unless a change says so (docs/results/replay.md).
 * This test replays each case through the same option parser and library
 * fs-replay uses and compares every counter of every policy, and the
 * virtual clock's ms per window as an exact double (%a), with the lines in
 * replay_pin.txt.
 *
 * Cases: the two shared route traces (qwen, gemma: skipped, visibly, when
 * ../shared is absent) and a short synthetic trace (always).
 *
 * A change that moves a number on purpose: regenerate the file with
 *   FS_REPLAY_PIN_OUT=tools/replay/replay_pin.txt build/tools/replay/replay_pin_test
 * (each case appends its lines; truncate the file first), and state the
 * change and its size in docs/results/replay.md.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "replay.h"
#include "replay_opts.h"

#define MAX_LINES 16

/* One line per policy: case policy windows uses hits misses copies bytes
 * landed_late late_uses too_late promoted predictions ms_per_window. */
static void line(char *out, size_t len, const char *name, const struct replay_result *r)
{
	snprintf(out, len, "%s %s %u %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %a", name, r->policy,
		 r->windows, (unsigned long long)r->uses, (unsigned long long)r->hits,
		 (unsigned long long)r->misses, (unsigned long long)r->copies, (unsigned long long)r->bytes,
		 (unsigned long long)r->landed_late, (unsigned long long)r->late_uses,
		 (unsigned long long)r->too_late, (unsigned long long)r->promoted,
		 (unsigned long long)r->predictions, r->ms_per_window);
}

/* The pinned lines of `name`, in file order. */
static int pinned(const char *name, char lines[][256], int max)
{
	FILE *f = fopen(FS_REPLAY_PIN_FILE, "r");
	cr_assert_not_null(f, "%s: cannot open", FS_REPLAY_PIN_FILE);
	char buf[256];
	int n = 0;
	size_t nl = strlen(name);
	while (fgets(buf, sizeof(buf), f)) {
		buf[strcspn(buf, "\n")] = 0;
		if (buf[0] == '#' || strncmp(buf, name, nl) != 0 || buf[nl] != ' ')
			continue;
		cr_assert_lt(n, max);
		snprintf(lines[n++], 256, "%s", buf);
	}
	fclose(f);
	return n;
}

static void pin_case(const char *name, int argc, char **argv)
{
	struct replay_opts o;
	cr_assert_eq(replay_opts_parse(&o, argc, argv), 0);
	struct fs_trace t;
	char err[FS_TRACE_ERRLEN] = "";
	int rc = o.synthetic ? fs_trace_generate(&t, &o.gen, err, sizeof(err)) :
			       fs_trace_load(&t, o.path, err, sizeof(err));
	cr_assert_eq(rc, 0, "%s", err);
	struct replay_input in = {.trace = &t, .name = name, .profile_from = "pin"};
	in.profile = calloc((size_t)t.layers * t.experts, sizeof(uint32_t));
	cr_assert_not_null(in.profile);
	rc = replay_profile_build(&t, o.model.warmup, o.model.tokens_per_window, in.profile);
	cr_assert_gt(rc, 0);
	in.profile_tokens = (uint32_t)rc;

	char got[MAX_LINES][256], want[MAX_LINES][256];
	cr_assert_leq(o.npols, MAX_LINES);
	for (int i = 0; i < o.npols; i++) {
		struct replay_result r;
		char e[256] = "";
		cr_assert_eq(replay_run(&in, &o.model, o.pols[i], &r, e, sizeof(e)), 0, "%s", e);
		line(got[i], sizeof(got[i]), name, &r);
	}
	free(in.profile);
	fs_trace_free(&t);

	const char *out = getenv("FS_REPLAY_PIN_OUT");
	if (out && *out) {
		FILE *f = fopen(out, "a");
		cr_assert_not_null(f);
		for (int i = 0; i < o.npols; i++)
			fprintf(f, "%s\n", got[i]);
		fclose(f);
		return;
	}
	int n = pinned(name, want, MAX_LINES);
	cr_assert_eq(n, o.npols, "%s: %d pinned lines, %d policies run", name, n, o.npols);
	for (int i = 0; i < n; i++)
		cr_expect_str_eq(got[i], want[i], "%s moved:\n  pinned %s\n  now    %s", name, want[i],
				 got[i]);
}

static void trace_case(const char *name, const char *file)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", FS_ROUTE_TRACES_DIR, file);
	if (access(path, R_OK) != 0)
		cr_skip_test("%s absent (a fresh checkout has no ../shared)", path);
	char *argv[] = {"fs-replay", path, "--compare", "--policy", "lru-warm", NULL};
	pin_case(name, 5, argv);
}

Test(replay_pin, qwen, .timeout = 120)
{
	trace_case("qwen", "qwen.route.csv");
}

Test(replay_pin, gemma, .timeout = 120)
{
	trace_case("gemma", "gemma.route.csv");
}

/* The discussion's box, shortened: 100 scored windows after the warm-up. */
Test(replay_pin, synthetic, .timeout = 120)
{
	char *argv[] = {"fs-replay", "--synthetic", "--windows", "100", "--compare", NULL};
	pin_case("synthetic", 5, argv);
}
