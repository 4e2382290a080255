/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsg_types.c: the ggml type table.
 *
 * Source of the numbers: ggml (github.com/ggml-org/ggml, also vendored in
 * llama.cpp): the ids are `enum ggml_type` in ggml/include/ggml.h; a
 * block's element count is the QK* constant and its size the sizeof of the
 * block_* struct in ggml/src/ggml-common.h (each struct there carries a
 * static_assert of that size), as collected in the type_traits table of
 * ggml/src/ggml.c.  Each row below spells out the struct so that it can be
 * checked against ggml-common.h without trusting anybody's memory
 * (ggml_half is 2 bytes, QK_K is 256).  The gaps are ids ggml removed; a
 * current ggml refuses files that use them, and so do we.
 */
#include "fsg_types.h"

#include <errno.h>
#include <stddef.h>
#include <strings.h>

#define QK_K 256u

static const struct fsg_type_info types[FSG_TYPE_COUNT] = {
	[0] = {"F32", 1, 4},
	[1] = {"F16", 1, 2},
	[2] = {"Q4_0", 32, 2 + 32 / 2},         /* d; qs[QK4_0/2] */
	[3] = {"Q4_1", 32, 2 + 2 + 32 / 2},     /* d, m; qs[QK4_1/2] */
	[4] = {"Q4_2", 0, 0},                   /* removed */
	[5] = {"Q4_3", 0, 0},                   /* removed */
	[6] = {"Q5_0", 32, 2 + 4 + 32 / 2},     /* d; qh[4]; qs[QK5_0/2] */
	[7] = {"Q5_1", 32, 2 + 2 + 4 + 32 / 2}, /* d, m; qh[4]; qs[QK5_1/2] */
	[8] = {"Q8_0", 32, 2 + 32},             /* d; qs[QK8_0] */
	[9] = {"Q8_1", 32, 2 + 2 + 32},         /* d, s; qs[QK8_1] */
	/* d, dmin; scales[QK_K/16]; qs[QK_K/4] */
	[10] = {"Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4},
	/* hmask[QK_K/8]; qs[QK_K/4]; scales[12]; d */
	[11] = {"Q3_K", QK_K, QK_K / 8 + QK_K / 4 + 12 + 2},
	/* d, dmin; scales[K_SCALE_SIZE = 12]; qs[QK_K/2] */
	[12] = {"Q4_K", QK_K, 2 + 2 + 12 + QK_K / 2},
	/* d, dmin; scales[12]; qh[QK_K/8]; qs[QK_K/2] */
	[13] = {"Q5_K", QK_K, 2 + 2 + 12 + QK_K / 8 + QK_K / 2},
	/* ql[QK_K/2]; qh[QK_K/4]; scales[QK_K/16]; d */
	[14] = {"Q6_K", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2},
	/* float d; qs[QK_K]; int16 bsums[QK_K/16] */
	[15] = {"Q8_K", QK_K, 4 + QK_K + 2 * (QK_K / 16)},
	/* d; uint16 qs[QK_K/8] */
	[16] = {"IQ2_XXS", QK_K, 2 + 2 * (QK_K / 8)},
	/* d; uint16 qs[QK_K/8]; scales[QK_K/32] */
	[17] = {"IQ2_XS", QK_K, 2 + 2 * (QK_K / 8) + QK_K / 32},
	/* d; qs[3*QK_K/8] */
	[18] = {"IQ3_XXS", QK_K, 2 + 3 * QK_K / 8},
	/* d; qs[QK_K/8]; uint16 qh[QK_K/32] */
	[19] = {"IQ1_S", QK_K, 2 + QK_K / 8 + 2 * (QK_K / 32)},
	/* d; qs[QK4_NL/2], QK4_NL = 32 */
	[20] = {"IQ4_NL", 32, 2 + 32 / 2},
	/* d; qs[QK_K/4]; qh[QK_K/32]; signs[QK_K/8]; scales[QK_K/64] */
	[21] = {"IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 32 + QK_K / 8 + QK_K / 64},
	/* d; qs[QK_K/4]; qh[QK_K/32]; scales[QK_K/32] */
	[22] = {"IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 32 + QK_K / 32},
	/* d; uint16 scales_h; scales_l[QK_K/64]; qs[QK_K/2] */
	[23] = {"IQ4_XS", QK_K, 2 + 2 + QK_K / 64 + QK_K / 2},
	[24] = {"I8", 1, 1},
	[25] = {"I16", 1, 2},
	[26] = {"I32", 1, 4},
	[27] = {"I64", 1, 8},
	[28] = {"F64", 1, 8},
	/* qs[QK_K/8]; qh[QK_K/16]; scales[QK_K/32] (the scale lives in them) */
	[29] = {"IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32},
	[30] = {"BF16", 1, 2},
	[31] = {"Q4_0_4_4", 0, 0}, /* removed (CPU repacking is done at load time now) */
	[32] = {"Q4_0_4_8", 0, 0}, /* removed */
	[33] = {"Q4_0_8_8", 0, 0}, /* removed */
	/* qs[(QK_K - 4*QK_K/64)/5]; qh[QK_K/64]; d */
	[34] = {"TQ1_0", QK_K, (QK_K - 4 * QK_K / 64) / 5 + QK_K / 64 + 2},
	/* qs[QK_K/4]; d */
	[35] = {"TQ2_0", QK_K, QK_K / 4 + 2},
	[36] = {"IQ4_NL_4_4", 0, 0}, /* removed */
	[37] = {"IQ4_NL_4_8", 0, 0}, /* removed */
	[38] = {"IQ4_NL_8_8", 0, 0}, /* removed */
	/* uint8 e (E8M0); qs[QK_MXFP4/2], QK_MXFP4 = 32 */
	[39] = {"MXFP4", 32, 1 + 32 / 2},
	/* d[QK_NVFP4/QK_NVFP4_SUB] (UE4M3); qs[QK_NVFP4/2], QK_NVFP4 = 64, QK_NVFP4_SUB = 16 */
	[40] = {"NVFP4", 64, 64 / 16 + 64 / 2},
	/* d; qs[QK1_0/8], QK1_0 = 128 */
	[41] = {"Q1_0", 128, 2 + 128 / 8},
	/* d; qs[QK2_0/4], QK2_0 = 64 */
	[42] = {"Q2_0", 64, 2 + 64 / 4},
};

/* Pin the rows that are easy to get wrong against the sizes ggml asserts. */
_Static_assert(2 + 2 + QK_K / 16 + QK_K / 4 == 84, "Q2_K");
_Static_assert(QK_K / 8 + QK_K / 4 + 12 + 2 == 110, "Q3_K");
_Static_assert(2 + 2 + 12 + QK_K / 2 == 144, "Q4_K");
_Static_assert(2 + 2 + 12 + QK_K / 8 + QK_K / 2 == 176, "Q5_K");
_Static_assert(QK_K / 2 + QK_K / 4 + QK_K / 16 + 2 == 210, "Q6_K");
_Static_assert(4 + QK_K + 2 * (QK_K / 16) == 292, "Q8_K");
_Static_assert(2 + QK_K / 4 + QK_K / 32 + QK_K / 8 + QK_K / 64 == 110, "IQ3_S");
_Static_assert(QK_K / 8 + QK_K / 16 + QK_K / 32 == 56, "IQ1_M");
_Static_assert((QK_K - 4 * QK_K / 64) / 5 + QK_K / 64 + 2 == 54, "TQ1_0");

const struct fsg_type_info *fsg_type(uint32_t id)
{
	return id < FSG_TYPE_COUNT ? &types[id] : NULL;
}

const char *fsg_type_name(uint32_t id)
{
	static const char *const removed[FSG_TYPE_COUNT] = {
		[4] = "Q4_2 (removed)",        [5] = "Q4_3 (removed)",        [31] = "Q4_0_4_4 (removed)",
		[32] = "Q4_0_4_8 (removed)",   [33] = "Q4_0_8_8 (removed)",   [36] = "IQ4_NL_4_4 (removed)",
		[37] = "IQ4_NL_4_8 (removed)", [38] = "IQ4_NL_8_8 (removed)",
	};
	const struct fsg_type_info *t = fsg_type(id);
	if (!t)
		return "unknown";
	return t->block ? t->name : removed[id];
}

int fsg_type_by_name(const char *name)
{
	for (uint32_t i = 0; i < FSG_TYPE_COUNT; i++)
		if (types[i].block && strcasecmp(types[i].name, name) == 0)
			return (int)i;
	return -1;
}

int fsg_row_bytes(uint32_t id, uint64_t ne0, uint64_t *bytes)
{
	const struct fsg_type_info *t = fsg_type(id);
	if (!t || !t->block)
		return -EINVAL;
	if (ne0 % t->block != 0)
		return -EDOM;
	uint64_t blocks = ne0 / t->block;
	if (blocks > UINT64_MAX / t->block_bytes)
		return -EOVERFLOW;
	*bytes = blocks * t->block_bytes;
	return 0;
}
