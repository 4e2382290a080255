/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsg_types.h: ggml's tensor types as stored in GGUF files: for each type
 * id, how many elements share a block and how many bytes a block takes.
 * A tensor row of ne0 elements (ne0 a multiple of the block size) takes
 * ne0 / block * block_bytes bytes; that is all the arena needs to cut a
 * 3-D expert tensor into per-expert slices.
 */
#ifndef FSG_TYPES_H
#define FSG_TYPES_H

#include <stdint.h>

#define FSG_TYPE_COUNT 43u /* ids 0..42 (GGML_TYPE_COUNT of ggml at the time of writing) */

struct fsg_type_info {
	const char *name;
	uint32_t block;       /* elements per block; 0: the id was removed from ggml */
	uint32_t block_bytes; /* bytes per block */
};

/* The row of the table for id, or NULL when ggml never defined it. */
const struct fsg_type_info *fsg_type(uint32_t id);
/* "Q4_K", "Q4_2 (removed)", or "unknown" for an undefined id. */
const char *fsg_type_name(uint32_t id);
/* The id of a type name ("Q4_K", case-insensitive), or -1. */
int fsg_type_by_name(const char *name);
/* Bytes of one row of ne0 elements: 0; -EINVAL (unknown or removed type),
 * -EDOM (ne0 is not a whole number of blocks), -EOVERFLOW. */
int fsg_row_bytes(uint32_t id, uint64_t ne0, uint64_t *bytes);

#endif /* FSG_TYPES_H */
