/* SPDX-License-Identifier: Apache-2.0 */
/* fs_name_test.c: client names reduced to printable ASCII (fs_name.h). */
#include <criterion/criterion.h>
#include <string.h>

#include "fs_name.h"

static const char *safe(const char *in, size_t cap, size_t *changed)
{
	static char out[256];
	memset(out, 'Z', sizeof(out));
	size_t c = fs_name_safe(out, cap, in);
	if (changed)
		*changed = c;
	return out;
}

Test(fs_name, a_plain_name_is_kept)
{
	size_t c;
	cr_assert_str_eq(safe("llama-70b engine#2", 48, &c), "llama-70b engine#2");
	cr_assert_eq(c, 0);
}

Test(fs_name, a_newline_cannot_start_a_log_line)
{
	size_t c;
	const char *s = safe("x\n<3>forged\r\x1b[2J", 48, &c);
	cr_assert_str_eq(s, "x\\x0a<3>forged\\x0d\\x1b[2J");
	cr_assert_eq(c, 3);
	cr_assert_null(strchr(s, '\n'));
}

Test(fs_name, high_bytes_and_utf8_are_escaped)
{
	cr_assert_str_eq(safe("\xc3\xa9\x7f\x80\xff", 48, NULL), "\\xc3\\xa9\\x7f\\x80\\xff");
}

Test(fs_name, the_cap_never_splits_an_escape)
{
	size_t c;
	/* 6 + NUL fits "abcde" then "\x0a" needs 4: cut before it. */
	cr_assert_str_eq(safe("abcde\nfg", 8, &c), "abcde");
	cr_assert_eq(c, 3);
	char big[1000];
	memset(big, '\n', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	const char *s = safe(big, FS_NAME_MAX + 1, &c);
	cr_assert_eq(strlen(s), 44); /* 11 whole escapes */
	cr_assert_eq(c, 999);
	cr_assert_eq(s[FS_NAME_MAX + 1], 'Z', "wrote past the cap");
}

Test(fs_name, empty_and_blank_names_become_engine)
{
	cr_assert_str_eq(safe("", 48, NULL), "engine");
	cr_assert_str_eq(safe(NULL, 48, NULL), "engine");
	cr_assert_str_eq(safe("   ", 48, NULL), "engine");
}

Test(fs_name, a_safe_name_is_its_own_safe_form)
{
	const char *in[] = {"x\n<3>y", "\xff\xfe", "a\\x0a", "plain", "\t\t\t\t\t\t\t\t\t\t\t\t\t\t"};
	for (unsigned i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		char a[48], b[48];
		fs_name_safe(a, sizeof(a), in[i]);
		size_t c = fs_name_safe(b, sizeof(b), a);
		cr_assert_str_eq(a, b);
		cr_assert_eq(c, 0);
		for (const char *p = a; *p; p++)
			cr_assert(*p >= 0x20 && *p <= 0x7e);
	}
}
