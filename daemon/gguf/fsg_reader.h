/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsg_reader.h: a GGUF reader (versions 2 and 3, little-endian) that trusts
 * nothing in the file.
 *
 * Layout (github.com/ggml-org/ggml, docs/gguf.md):
 *   "GGUF", u32 version, u64 tensor_count, u64 kv_count,
 *   kv_count x { string key, u32 value_type, value },
 *   tensor_count x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type,
 *                    u64 offset (from the data section, aligned) },
 *   padding to general.alignment (default 32), the data section.
 * A string is a u64 length and that many bytes; an array is a u32 element
 * type, a u64 count and the elements (arrays of arrays are allowed).
 *
 * Every count, length, offset and size is checked against the file with
 * overflow-safe arithmetic before it is used; tensors must lie inside the
 * data section, aligned, without overlapping, with a known ggml type and a
 * whole number of blocks per row.  Memory grows with what the file really
 * holds, never with what a count claims.
 */
#ifndef FSG_READER_H
#define FSG_READER_H

#include <stdint.h>

#include "fsg_cursor.h"
#include "fsg_err.h"

enum fsg_vtype {
	FSG_V_U8 = 0,
	FSG_V_I8 = 1,
	FSG_V_U16 = 2,
	FSG_V_I16 = 3,
	FSG_V_U32 = 4,
	FSG_V_I32 = 5,
	FSG_V_F32 = 6,
	FSG_V_BOOL = 7,
	FSG_V_STR = 8,
	FSG_V_ARR = 9,
	FSG_V_U64 = 10,
	FSG_V_I64 = 11,
	FSG_V_F64 = 12,
	FSG_V_COUNT
};

#define FSG_DEFAULT_ALIGNMENT 32u /* GGUF_DEFAULT_ALIGNMENT */
#define FSG_MAX_ALIGNMENT (1u << 30)
#define FSG_MAX_DEPTH 8u /* arrays nested deeper are refused */
#define FSG_MAX_DIMS 4u  /* GGML_MAX_DIMS */
#define FSG_MAX_NAME 64u /* GGML_MAX_NAME: tensor names are shorter */

/* A metadata value, located in the file (decoded on demand). */
struct fsg_val {
	uint32_t type;      /* enum fsg_vtype */
	uint32_t elem_type; /* arrays: the elements' type */
	uint64_t off;       /* file offset of the value */
	uint64_t bytes;     /* its encoded size */
	uint64_t n;         /* arrays: elements */
	uint64_t first;     /* arrays: file offset of element 0 */
};

struct fsg_kv {
	struct fsg_str key; /* points into fsg_file.head */
	struct fsg_val val;
	uint64_t at; /* file offset of the kv */
};

struct fsg_tensor {
	char name[FSG_MAX_NAME];   /* NUL-terminated */
	uint32_t n_dims;           /* 1..4 */
	uint32_t type;             /* ggml type id */
	uint64_t ne[FSG_MAX_DIMS]; /* elements per dimension; unused ones are 1 */
	uint64_t rel_off;          /* as stored: from the start of the data section */
	uint64_t off;              /* from the start of the file */
	uint64_t bytes;
	uint64_t at; /* file offset of its tensor info */
};

struct fsg_file {
	const uint8_t *head; /* the first head_len bytes of the file */
	uint64_t head_len;
	uint64_t file_size;
	uint32_t version;
	uint32_t alignment;
	uint64_t n_kv;
	struct fsg_kv *kv;
	uint64_t n_tensors;
	struct fsg_tensor *t;
	uint64_t info_end; /* end of the tensor infos */
	uint64_t data_off; /* start of the data section */
	/* fsg_open only */
	int fd; /* -1 after fsg_parse */
	void *owned;
};

/* Parse a file whose first len bytes are in buf (the file is file_size
 * bytes).  0; -EAGAIN when the head does not fit in buf (call again with
 * more of the file); -EBADMSG with err filled; -ENOMEM.  f keeps pointers
 * into buf. */
int fsg_parse(struct fsg_file *f, const void *buf, uint64_t len, uint64_t file_size, struct fsg_err *err);
/* Open and parse path, reading only as much as the head needs; keeps the
 * file open (f->fd) for loading.  0 or -errno with err filled. */
int fsg_open(struct fsg_file *f, const char *path, struct fsg_err *err);
/* Free what parse/open allocated and close the file (safe on a file that
 * fsg_parse or fsg_open failed on; not on a merely zeroed struct). */
void fsg_close(struct fsg_file *f);

const char *fsg_vtype_name(uint32_t type);
const struct fsg_kv *fsg_kv_find(const struct fsg_file *f, const char *key);
const struct fsg_tensor *fsg_tensor_find(const struct fsg_file *f, const char *name);

/* Decoders: 0, or -EINVAL when the value is not of a fitting type. */
int fsg_val_uint(const struct fsg_file *f, const struct fsg_val *v, uint64_t *out); /* any integer >= 0 */
int fsg_val_int(const struct fsg_file *f, const struct fsg_val *v, int64_t *out);  /* any integer that fits */
int fsg_val_float(const struct fsg_file *f, const struct fsg_val *v, double *out); /* F32, F64 */
int fsg_val_bool(const struct fsg_file *f, const struct fsg_val *v, int *out);
int fsg_val_str(const struct fsg_file *f, const struct fsg_val *v, struct fsg_str *out);
/* Element i of an array (nested arrays: an array value again). */
int fsg_val_at(const struct fsg_file *f, const struct fsg_val *arr, uint64_t i, struct fsg_val *out);
/* Convenience: the unsigned integer / string value of key; -ENOENT, -EINVAL. */
int fsg_get_uint(const struct fsg_file *f, const char *key, uint64_t *out);
int fsg_get_str(const struct fsg_file *f, const char *key, struct fsg_str *out);

#endif /* FSG_READER_H */
