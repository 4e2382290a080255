/* SPDX-License-Identifier: Apache-2.0 */
/*
 * router_ahead_rule.h: the pieces of the router-ahead ranking rule that the
 * kernel (router_ahead.cu) and the CPU reference (router_ahead_ref.c) must
 * share exactly (foresight/router_ahead.h states the rule).
 */
#ifndef FS_ROUTER_AHEAD_RULE_H
#define FS_ROUTER_AHEAD_RULE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define FS_RA_FN __host__ __device__ static inline
#else
#define FS_RA_FN static inline
#endif

/* The lane that accumulates element i of a dot product: eight consecutive
 * elements per lane (one 16-byte load of bf16), 32 lanes. */
#define FS_RA_LANE(i) (((i) >> 3) & 31u)

FS_RA_FN float fs_ra_bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

FS_RA_FN float fs_ra_bf16_to_f32(uint16_t h)
{
	return fs_ra_bits_f32((uint32_t)h << 16);
}

/* IEEE binary16 to binary32, exact (subnormals, infinities, NaN). */
FS_RA_FN float fs_ra_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
	if (exp == 0x1fu)
		return fs_ra_bits_f32(sign | 0x7f800000u | (man << 13));
	if (exp == 0) {
		if (man == 0)
			return fs_ra_bits_f32(sign);
		exp = 113; /* normalise the subnormal: 127 - 15 + 1 */
		while (!(man & 0x400u)) {
			man <<= 1;
			exp--;
		}
		return fs_ra_bits_f32(sign | (exp << 23) | ((man & 0x3ffu) << 13));
	}
	return fs_ra_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

/* Key order of one token's experts: (logit desc, expert asc).  1 when
 * (l1, e1) ranks below (l2, e2). */
FS_RA_FN int fs_ra_key_below(float l1, uint32_t e1, float l2, uint32_t e2)
{
	return l1 < l2 || (l1 == l2 && e1 > e2);
}

/* Candidate order: (votes desc, margin desc, expert asc).  1 when a ranks
 * above b. */
FS_RA_FN int fs_ra_better(uint32_t va, float ma, uint32_t ea, uint32_t vb, float mb, uint32_t eb)
{
	if (va != vb)
		return va > vb;
	if (ma != mb)
		return ma > mb;
	return ea < eb;
}

FS_RA_FN int fs_ra_bit(const uint32_t *bits, uint32_t e)
{
	return (bits[e >> 5] >> (e & 31u)) & 1u;
}

/* The posted score: the share of tokens that chose the expert, weighted by
 * how close it came to their first choice (softmax ratio exp(margin)). */
FS_RA_FN float fs_ra_score(uint32_t votes, uint32_t tokens, float margin)
{
	return (float)votes / (float)tokens * expf(margin);
}

#endif /* FS_ROUTER_AHEAD_RULE_H */
