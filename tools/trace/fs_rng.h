/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_rng.h: a small deterministic PRNG (xoshiro256** seeded by splitmix64).
 *
 * Traces, the demo engine and the replay tools draw from this instead of
 * rand(): the same seed gives the same stream on every libc and platform,
 * which is what makes a synthetic trace reproducible from its seed alone.
 */
#ifndef FS_RNG_H
#define FS_RNG_H

#include <stdint.h>

struct fs_rng {
	uint64_t s[4];
};

static inline uint64_t fs_splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline void fs_rng_seed(struct fs_rng *r, uint64_t seed)
{
	/* splitmix64 never yields four zero words, so xoshiro's state is valid. */
	for (int i = 0; i < 4; i++)
		r->s[i] = fs_splitmix64(&seed);
}

static inline uint64_t fs_rng_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static inline uint64_t fs_rng_next(struct fs_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = fs_rng_rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = fs_rng_rotl(s[3], 45);
	return out;
}

/* Uniform double in [0, 1): the top 53 bits. */
static inline double fs_rng_double(struct fs_rng *r)
{
	return (double)(fs_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; the bias is
 * below 2^-32 for the n used here and does not matter for traces). */
static inline uint32_t fs_rng_below(struct fs_rng *r, uint32_t n)
{
	return (uint32_t)(((fs_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

#endif /* FS_RNG_H */
