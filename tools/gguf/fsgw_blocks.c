/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsgw_blocks.c: valid quantized blocks and the page pools a large model
 * is written from (fsgw_blocks.h).  Layouts from ggml-common.h:
 *
 *   Q4_0  { half d; u8 qs[16]; }                       x = d (q - 8)
 *   Q5_0  { half d; u8 qh[4]; u8 qs[16]; }             x = d (q - 16)
 *   Q8_0  { half d; i8 qs[32]; }                       x = d q
 *   Q4_K  { half d, dmin; u8 scales[12]; u8 qs[128]; } x = d sc q - dmin m
 *   Q5_K  { half d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]; }
 *   Q6_K  { u8 ql[128]; u8 qh[64]; i8 scales[16]; half d; } x = d sc (q - 32)
 *   MXFP4 { u8 e; u8 qs[16]; }    x = kvalues[q] 2^(e - 128) (e: E8M0, halved)
 *
 * The codes are random bytes; only the scales are chosen.  For the K
 * types each 32-value sub-block gets a 6-bit scale sc in [32, 63] and a
 * min m = round(sc * mean(q) * d / dmin), so the sub-block is centred;
 * d is set so that the values' standard deviation is about sd, with a
 * +-20 % jitter per block (blocks differ in scale, as real ones do).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsg_types.h"
#include "fsgw_blocks.h"

enum {
	T_F32 = 0,
	T_F16 = 1,
	T_Q4_0 = 2,
	T_Q5_0 = 6,
	T_Q8_0 = 8,
	T_Q4_K = 12,
	T_Q5_K = 13,
	T_Q6_K = 14,
	T_MXFP4 = 39,
};

int fsgw_blocks_supported(uint32_t type)
{
	switch (type) {
	case T_F32:
	case T_F16:
	case T_Q4_0:
	case T_Q5_0:
	case T_Q8_0:
	case T_Q4_K:
	case T_Q5_K:
	case T_Q6_K:
	case T_MXFP4:
		return 1;
	default:
		return 0;
	}
}

const char *fsgw_blocks_types(void)
{
	return "F32 F16 Q4_0 Q5_0 Q8_0 Q4_K Q5_K Q6_K MXFP4";
}

uint16_t fsgw_half(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
	if (exp == 0xffu) /* inf, nan */
		return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
	int e = (int)exp - 127 + 15;
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00u);
	if (e <= 0) { /* subnormal or zero */
		if (e < -10)
			return (uint16_t)sign;
		man |= 0x800000u;
		unsigned shift = (unsigned)(14 - e);
		uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
		h++; /* may carry into the exponent: still right, up to inf */
	return (uint16_t)(sign | h);
}

float fsgw_half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, x;
	if (exp == 0) {
		float v = ldexpf((float)man, -24);
		return sign ? -v : v;
	}
	if (exp == 31)
		x = sign | 0x7f800000u | (man << 13);
	else
		x = sign | ((exp - 15 + 127) << 23) | (man << 13);
	float f;
	memcpy(&f, &x, 4);
	return f;
}

static uint64_t next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void random_bytes(uint64_t *s, uint8_t *dst, size_t n)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t v = next(s);
		memcpy(dst + i, &v, n - i < 8 ? n - i : 8);
	}
}

/* Uniform in [lo, hi). */
static float uni(uint64_t *s, float lo, float hi)
{
	return lo + (hi - lo) * (float)((double)(next(s) >> 11) / 9007199254740992.0);
}

/* About normal(0, sd): a sum of four uniforms (variance 4/12), scaled. */
static float gauss(uint64_t *s, float sd)
{
	float a = 0;
	for (int i = 0; i < 4; i++)
		a += uni(s, -0.5f, 0.5f);
	return a * sd * 1.7320508f;
}

static void put_half(uint8_t *p, float f)
{
	uint16_t h = fsgw_half(f);
	p[0] = (uint8_t)h;
	p[1] = (uint8_t)(h >> 8);
}

/* Standard deviation of a uniform code over 0..n-1. */
static float code_sd(unsigned n)
{
	return sqrtf(((float)n * (float)n - 1.0f) / 12.0f);
}

/* Q4_K/Q5_K: 8 sub-blocks, 6-bit scales and mins packed as ggml's
 * get_scale_min_k4() reads them. */
static void k_scales(uint64_t *s, uint8_t *q, float d, float dmin, float qmean)
{
	uint8_t sc[8], m[8];
	for (int j = 0; j < 8; j++) {
		sc[j] = (uint8_t)(32 + next(s) % 32);
		long mm = lroundf((float)sc[j] * qmean * d / dmin);
		m[j] = (uint8_t)(mm > 63 ? 63 : mm);
	}
	for (int j = 0; j < 4; j++) {
		q[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
		q[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
		q[j + 8] = (uint8_t)((sc[j + 4] & 0xf) | ((m[j + 4] & 0xf) << 4));
	}
}

int fsgw_blocks(uint32_t type, float sd, uint64_t seed, uint8_t *dst, size_t n)
{
	if (!fsgw_blocks_supported(type) || !(sd > 0.0f && sd <= 1e3f))
		return -1;
	const size_t bb = fsg_type(type)->block_bytes;
	uint64_t s = seed ^ 0x5851f42d4c957f2dull;
	/* mean sub-block scale of the K types: sc in [32, 63] */
	const float k_sc = 47.5f;
	for (size_t b = 0; b < n; b++) {
		uint8_t *p = dst + b * bb;
		const float j = uni(&s, 0.8f, 1.2f); /* this block's scale jitter */
		switch (type) {
		case T_F32: {
			float v = gauss(&s, sd);
			memcpy(p, &v, 4);
			break;
		}
		case T_F16:
			put_half(p, gauss(&s, sd));
			break;
		case T_Q4_0: /* d (q - 8), q in 0..15 */
			put_half(p, j * sd / code_sd(16));
			random_bytes(&s, p + 2, 16);
			break;
		case T_Q5_0: /* d (q - 16), q in 0..31 */
			put_half(p, j * sd / code_sd(32));
			random_bytes(&s, p + 2, 4 + 16);
			break;
		case T_Q8_0: /* d q, q in -128..127 */
			put_half(p, j * sd / code_sd(256));
			random_bytes(&s, p + 2, 32);
			break;
		case T_Q4_K:
		case T_Q5_K: {
			const unsigned levels = type == T_Q4_K ? 16 : 32;
			const float qmean = (float)(levels - 1) / 2.0f;
			const float d = j * sd / (k_sc * code_sd(levels));
			/* dmin = 8 d (Q4_K) or 16 d (Q5_K): m = sc * qmean / 8 or 16 fits 6 bits */
			const float dmin = d * (float)(levels / 2);
			put_half(p, d);
			put_half(p + 2, dmin);
			k_scales(&s, p + 4, fsgw_half_to_float(fsgw_half(d)),
				 fsgw_half_to_float(fsgw_half(dmin)), qmean);
			random_bytes(&s, p + 16, bb - 16);
			break;
		}
		case T_Q6_K: { /* d sc (q - 32), q in 0..63, sc int8 in [32, 127] */
			random_bytes(&s, p, 128 + 64);
			for (int k = 0; k < 16; k++)
				p[192 + k] = (uint8_t)(32 + next(&s) % 96);
			put_half(p + 208, j * sd / (79.5f * code_sd(64)));
			break;
		}
		case T_MXFP4: { /* kvalues {0,1,2,3,4,6,8,12,-0,-1,...}: rms 5.85 */
			long e = 128 + lroundf(log2f(j * sd / 5.852f));
			p[0] = (uint8_t)(e < 1 ? 1 : e > 254 ? 254 : e);
			random_bytes(&s, p + 1, 16);
			break;
		}
		}
	}
	return 0;
}

int fsgw_pool_init(struct fsgw_pool *p, uint32_t type, float sd, uint64_t seed, unsigned n_pages,
		   size_t page_bytes)
{
	memset(p, 0, sizeof(*p));
	if (!fsgw_blocks_supported(type) || n_pages == 0)
		return -1;
	const size_t bb = fsg_type(type)->block_bytes;
	size_t blocks = page_bytes / bb ? page_bytes / bb : 1;
	p->type = type;
	p->sd = sd;
	p->block_bytes = bb;
	p->page_bytes = blocks * bb;
	p->n_pages = n_pages;
	p->pages = malloc(p->page_bytes * n_pages);
	if (!p->pages)
		return -ENOMEM;
	for (unsigned i = 0; i < n_pages; i++)
		if (fsgw_blocks(type, sd, seed * 0x100000001b3ull + i, p->pages + i * p->page_bytes, blocks) <
		    0) {
			fsgw_pool_free(p);
			return -1;
		}
	return 0;
}

void fsgw_pool_free(struct fsgw_pool *p)
{
	free(p->pages);
	memset(p, 0, sizeof(*p));
}

void fsgw_pool_read(const struct fsgw_pool *p, uint64_t key, uint64_t from, uint8_t *dst, size_t n)
{
	while (n) {
		uint64_t page = from / p->page_bytes, off = from % p->page_bytes;
		uint64_t h = key ^ (page * 0x9e3779b97f4a7c15ull);
		const uint8_t *src = p->pages + (size_t)(next(&h) % p->n_pages) * p->page_bytes;
		size_t k = p->page_bytes - off < n ? (size_t)(p->page_bytes - off) : n;
		memcpy(dst, src + off, k);
		dst += k;
		from += k;
		n -= k;
	}
}
