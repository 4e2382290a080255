/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Linked into every criterion test binary (fs_add_test): names each skipped
 * test on one "SKIP: <suite>::<test>: <why>" line (tools/test.sh collects
 * those lines per stage), and exits 77 when every test of the binary was
 * skipped, so ctest (SKIP_RETURN_CODE 77) reports the binary as skipped
 * rather than passed.  A binary with some tests run and some skipped passes;
 * its SKIP lines still name what did not run.
 */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <stdio.h>
#include <stdlib.h>

ReportHook(POST_ALL)(struct criterion_global_stats *st)
{
	for (struct criterion_suite_stats *s = st->suites; s; s = s->next)
		for (struct criterion_test_stats *t = s->tests; t; t = t->next)
			/* (a test left out by --filter is "skipped" with no message) */
			if (t->test_status == CR_STATUS_SKIPPED && t->message)
				fprintf(stderr, "SKIP: %s::%s: %s\n", t->test->category, t->test->name,
					t->message);
	if (st->nb_tests > 0 && st->tests_skipped == st->nb_tests && st->tests_failed == 0 &&
	    st->tests_crashed == 0) {
		fprintf(stderr, "SKIP: all %zu tests skipped (exit 77: ctest reports this test skipped)\n",
			st->nb_tests);
		fflush(NULL);
		exit(77);
	}
}
