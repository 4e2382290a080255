/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the ggml type table against the sizes ggml asserts. */
#include <criterion/criterion.h>
#include <errno.h>

#include "fsg_types.h"

static const struct {
	const char *name;
	uint32_t id, block, bytes;
} want[] = {
	{"F32", 0, 1, 4},         {"F16", 1, 1, 2},         {"Q4_0", 2, 32, 18},      {"Q4_1", 3, 32, 20},
	{"Q5_0", 6, 32, 22},      {"Q5_1", 7, 32, 24},      {"Q8_0", 8, 32, 34},      {"Q8_1", 9, 32, 36},
	{"Q2_K", 10, 256, 84},    {"Q3_K", 11, 256, 110},   {"Q4_K", 12, 256, 144},   {"Q5_K", 13, 256, 176},
	{"Q6_K", 14, 256, 210},   {"Q8_K", 15, 256, 292},   {"IQ2_XXS", 16, 256, 66}, {"IQ2_XS", 17, 256, 74},
	{"IQ3_XXS", 18, 256, 98}, {"IQ1_S", 19, 256, 50},   {"IQ4_NL", 20, 32, 18},   {"IQ3_S", 21, 256, 110},
	{"IQ2_S", 22, 256, 82},   {"IQ4_XS", 23, 256, 136}, {"I8", 24, 1, 1},         {"I16", 25, 1, 2},
	{"I32", 26, 1, 4},        {"I64", 27, 1, 8},        {"F64", 28, 1, 8},        {"IQ1_M", 29, 256, 56},
	{"BF16", 30, 1, 2},       {"TQ1_0", 34, 256, 54},   {"TQ2_0", 35, 256, 66},   {"MXFP4", 39, 32, 17},
	{"NVFP4", 40, 64, 36},    {"Q1_0", 41, 128, 18},    {"Q2_0", 42, 64, 18},
};

Test(types, every_row_matches_ggml)
{
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct fsg_type_info *t = fsg_type(want[i].id);
		cr_assert_not_null(t);
		cr_expect_str_eq(t->name, want[i].name);
		cr_expect_eq(t->block, want[i].block, "%s block", want[i].name);
		cr_expect_eq(t->block_bytes, want[i].bytes, "%s bytes", want[i].name);
		cr_expect_eq(fsg_type_by_name(want[i].name), (int)want[i].id);
	}
	cr_expect_eq(fsg_type_by_name("q4_k"), 12, "names are case-insensitive");
	cr_expect_eq(fsg_type_by_name("Q4_2"), -1, "removed types have no name to ask for");
}

Test(types, removed_and_unknown_ids_are_refused)
{
	static const uint32_t removed[] = {4, 5, 31, 32, 33, 36, 37, 38};
	uint64_t b;
	for (size_t i = 0; i < sizeof(removed) / sizeof(removed[0]); i++) {
		cr_expect_eq(fsg_type(removed[i])->block, 0u);
		cr_expect(strstr(fsg_type_name(removed[i]), "removed") != NULL);
		cr_expect_eq(fsg_row_bytes(removed[i], 256, &b), -EINVAL);
	}
	cr_expect_null(fsg_type(FSG_TYPE_COUNT));
	cr_expect_str_eq(fsg_type_name(1000), "unknown");
	cr_expect_eq(fsg_row_bytes(1000, 32, &b), -EINVAL);
}

Test(types, row_bytes)
{
	uint64_t b = 0;
	cr_expect_eq(fsg_row_bytes(12, 4096, &b), 0);
	cr_expect_eq(b, 16u * 144);
	cr_expect_eq(fsg_row_bytes(39, 2880, &b), 0); /* gpt-oss: 2880 = 90 MXFP4 blocks */
	cr_expect_eq(b, 90u * 17);
	cr_expect_eq(fsg_row_bytes(12, 100, &b), -EDOM, "a row of part of a block");
	cr_expect_eq(fsg_row_bytes(0, 0, &b), 0);
	cr_expect_eq(b, 0u);
	cr_expect_eq(fsg_row_bytes(0, UINT64_MAX, &b), -EOVERFLOW);
}
