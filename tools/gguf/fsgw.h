/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsgw.h: write small (or, for benchmarks, large) valid GGUF files: a
 * generic writer, and MoE models in the tensor naming of several
 * architectures, for tests and benchmarks of the reader and the arena.
 */
#ifndef FSGW_H
#define FSGW_H

#include <stddef.h>
#include <stdint.h>

/* ---- the writer --------------------------------------------------------- */

struct fsgw_tensor;
/* A tensor's bytes [from, from + n): 0, or -1 (fsgw_write fails). */
typedef int (*fsgw_fill_fn)(void *ctx, const struct fsgw_tensor *t, uint64_t from, uint8_t *dst, size_t n);

struct fsgw_tensor {
	char name[64];
	uint32_t n_dims;
	uint32_t type;
	uint64_t ne[4];
	uint64_t bytes;
	uint64_t rel_off;  /* from the start of the data section */
	fsgw_fill_fn fill; /* NULL: fsgw_fill's bytes */
	void *fill_ctx;
};

struct fsgw {
	uint32_t version;   /* 2 or 3 */
	uint32_t alignment; /* of the data section and of each tensor */
	uint64_t seed;      /* tensor bytes: a function of (seed, name, position) */
	uint8_t *kv;        /* the encoded key-value pairs */
	size_t kv_len, kv_cap;
	uint64_t n_kv;
	struct fsgw_tensor *t;
	uint64_t n_t, t_cap;
	uint64_t data_bytes;
	int oom;
	char err[256];
};

/* alignment 0: the GGUF default (32) and no general.alignment key. */
void fsgw_init(struct fsgw *w, uint32_t version, uint32_t alignment, uint64_t seed);
void fsgw_free(struct fsgw *w);

/* A key and its value type; then the value with the fsgw_put_* calls (an
 * array: fsgw_put_arr(elem_type, n), then its n elements). */
void fsgw_key(struct fsgw *w, const char *key, uint32_t type);
void fsgw_put_u8(struct fsgw *w, uint8_t v);
void fsgw_put_u16(struct fsgw *w, uint16_t v);
void fsgw_put_u32(struct fsgw *w, uint32_t v);
void fsgw_put_u64(struct fsgw *w, uint64_t v);
void fsgw_put_f32(struct fsgw *w, float v);
void fsgw_put_f64(struct fsgw *w, double v);
void fsgw_put_str(struct fsgw *w, const char *s);
void fsgw_put_arr(struct fsgw *w, uint32_t elem_type, uint64_t n);
/* Shorthands for whole scalar pairs. */
void fsgw_kv_u32(struct fsgw *w, const char *key, uint32_t v);
void fsgw_kv_str(struct fsgw *w, const char *key, const char *s);

/* A tensor of ggml type `type`, dims ne[0..n_dims).  0, or -1 with w->err
 * (unknown type, a row that is not whole blocks). */
int fsgw_tensor(struct fsgw *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne);
/* The same, with its bytes from fill(ctx, ...) (a model whose blocks must
 * be valid, not random). */
int fsgw_tensor_src(struct fsgw *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne,
		    fsgw_fill_fn fill, void *ctx);
/* Write the file (the data streamed, never all in memory).  0 or -1 with
 * w->err. */
int fsgw_write(struct fsgw *w, const char *path);

/* The bytes fsgw_write puts at byte i of tensor `name` (tests check the
 * arena against them). */
void fsgw_fill(uint64_t seed, const char *name, uint64_t from, uint8_t *dst, size_t n);

/* ---- MoE models --------------------------------------------------------- */

struct fsgw_model {
	const char *arch; /* a preset: see fsgw_model_archs() */
	const char *name; /* general.name; NULL: "fixture-<arch>" */
	uint32_t layers;  /* blocks */
	uint32_t experts;
	uint32_t used;      /* top-k */
	uint32_t embd, ff;  /* hidden size, expert FFN size */
	uint32_t version;   /* 2 or 3 */
	uint32_t alignment; /* 0: default (no key) */
	uint64_t seed;
	int type;               /* ggml type of every expert weight, or -1: mixed per layer and part */
	int no_metadata_counts; /* leave <arch>.expert_count out (the reader infers it) */
};

/* The presets: "qwen3moe qwen3next mixtral mixtral-split deepseek2 gpt-oss gemma4". */
const char *fsgw_model_archs(void);
/* Defaults for a preset (4 layers, 8 experts, top-2, embd 256, ff 64, v3). */
void fsgw_model_defaults(struct fsgw_model *m, const char *arch);
/* 0, or -1 with err. */
int fsgw_model_write(const struct fsgw_model *m, const char *path, char *err, size_t errlen);

/* The fixture set the tests and the independent-reader check use: every
 * preset, with different versions, alignments and quant types. */
struct fsgw_fixture {
	const char *file; /* base name, e.g. "qwen3moe.gguf" */
	struct fsgw_model m;
};
/* Fills out[0..n) (n <= max); returns n. */
unsigned fsgw_fixtures(struct fsgw_fixture *out, unsigned max);

#endif /* FSGW_H */
