/* SPDX-License-Identifier: Apache-2.0 */
/*
 * eb_math.h: the arithmetic of fs-engine-bench, one definition for the
 * host (C) and the device (CUDA), so that an expert computed on the GPU
 * from a slot and the same expert computed on the CPU from the arena give
 * the same bits.
 *
 * Everything is 32-bit unsigned integer arithmetic, wrapping: sums are
 * associative and commutative, so the order in which blocks, threads or
 * CPU chunks add their partial results never changes the result.
 *
 *  - hidden state: EB_D words per token; a token enters layer 0 as
 *    eb_embed(token, j);
 *  - dense part of a layer: every word runs `iters` rounds of a
 *    multiply-xorshift (eb_dense_word); `iters` is calibrated once per
 *    run to the dense time per layer and passed to every engine;
 *  - a token's key at a layer: a fold of its hidden state (eb_key);
 *  - an expert applied to a token: y = sum over the expert's 32-bit words
 *    w[i] of eb_term(w[i], i, key), then its trailing bytes the same way;
 *    every byte of the expert is read;
 *  - the layer's output: word j of token t = dense word + sum over the
 *    experts e routed to t of eb_contrib(y[e][t], e, layer, j).
 */
#ifndef EB_MATH_H
#define EB_MATH_H

#include <stdint.h>

#ifdef __CUDACC__
#define EB_HD static __host__ __device__ __forceinline__
#else
#define EB_HD static inline
#endif

#define EB_D 64u    /* hidden words per token */
#define EB_MAX_T 8u /* tokens per window, at most */

EB_HD uint32_t eb_mix32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x85ebca6bu;
	x ^= x >> 13;
	x *= 0xc2b2ae35u;
	x ^= x >> 16;
	return x;
}

EB_HD uint32_t eb_embed(uint32_t token, uint32_t j)
{
	return eb_mix32(token * 0x9e3779b1u ^ (j * 0x85ebca77u) ^ 0x2545f491u);
}

EB_HD uint32_t eb_dense_word(uint32_t x, uint32_t layer, uint32_t j, uint32_t iters)
{
	uint32_t c = layer * 0x27d4eb2fu + j * 0x165667b1u + 1u;
	for (uint32_t i = 0; i < iters; i++)
		x = (x ^ (x >> 15)) * 0x2c1b3c6du + c;
	return x;
}

/* h: EB_D words of one token. */
EB_HD uint32_t eb_key(const uint32_t *h, uint32_t layer)
{
	uint32_t k = layer * 0x9e3779b9u;
	for (uint32_t j = 0; j < EB_D; j++)
		k += h[j] * (2u * j + 1u);
	return eb_mix32(k);
}

/* Word i (or trailing byte: i = words + b, w = the byte) of an expert. */
EB_HD uint32_t eb_term(uint32_t w, uint32_t i, uint32_t k)
{
	return ((w ^ k) * (i * 2u + 1u)) + (w >> 3);
}

EB_HD uint32_t eb_contrib(uint32_t y, uint32_t expert, uint32_t layer, uint32_t j)
{
	return eb_mix32(y + expert * 0x85ebca6bu + layer * 0xc2b2ae35u + j * 0x9e3779b9u);
}

#endif /* EB_MATH_H */
