/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsgw_blocks.h: valid quantized blocks, written directly (never
 * quantized from floats), and pools of them that a multi-GB model is
 * written from at disk speed.
 *
 * A block of a quantized ggml type is a scale (or two) and packed codes.
 * Random bytes make NaN/Inf scales; these blocks have finite, positive
 * fp16 scales and random codes, chosen so that the block's values have
 * mean about 0 and standard deviation about `sd` (what an initialiser
 * would give a weight of that fan-in).  The layouts are ggml's
 * (ggml-common.h); the types are those llama.cpp's CPU and CUDA paths
 * both run.
 *
 * A pool holds a few pages of such blocks; a tensor's bytes are pages
 * picked by a hash of (key, page index), so every expert of a 3-D tensor
 * gets its own sequence of pages (experts differ) while writing costs a
 * memcpy per page.
 */
#ifndef FSGW_BLOCKS_H
#define FSGW_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

/* Whether fsgw_blocks() writes `type` (a ggml type id): F32, F16, Q4_0,
 * Q5_0, Q8_0, Q4_K, Q5_K, Q6_K, MXFP4. */
int fsgw_blocks_supported(uint32_t type);
/* "F32 F16 Q4_0 ..." for messages. */
const char *fsgw_blocks_types(void);

/* n blocks of `type` (for F32/F16 a block is one value) into dst: values
 * of mean ~0 and standard deviation ~sd (sd > 0, at most 1e3), from a
 * generator seeded by seed.  0, or -1 for an unsupported type or sd. */
int fsgw_blocks(uint32_t type, float sd, uint64_t seed, uint8_t *dst, size_t n);

/* IEEE half precision (round to nearest even; normal, subnormal, inf). */
uint16_t fsgw_half(float f);
float fsgw_half_to_float(uint16_t h);

struct fsgw_pool {
	uint32_t type;
	float sd;
	size_t block_bytes;
	size_t page_bytes; /* a whole number of blocks */
	unsigned n_pages;
	uint8_t *pages; /* [n_pages][page_bytes] */
};

/* n_pages pages of about page_bytes (rounded down to whole blocks, at
 * least one block).  0, -1 (bad type or sd) or -ENOMEM. */
int fsgw_pool_init(struct fsgw_pool *p, uint32_t type, float sd, uint64_t seed, unsigned n_pages,
		   size_t page_bytes);
void fsgw_pool_free(struct fsgw_pool *p);
/* Bytes [from, from + n) of the stream the pool makes for `key`: page i of
 * it is pool page hash(key, i) % n_pages.  `from` counts from a block
 * boundary (a tensor's start), so every block comes out whole. */
void fsgw_pool_read(const struct fsgw_pool *p, uint64_t key, uint64_t from, uint8_t *dst, size_t n);

#endif /* FSGW_BLOCKS_H */
