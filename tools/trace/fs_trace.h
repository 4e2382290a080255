/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_trace: MoE routing traces for the demo engine, the replay simulator and
 * the tests.
 *
 * A trace is a sequence of decode tokens; each token routes, at every
 * layer, to `topk` experts (rank order: the router's highest weight first).
 * Consumers see it as decode windows of T consecutive tokens (an engine
 * plans and holds one residency epoch per window) and ask, per window and
 * layer, for the distinct experts used.
 *
 * Sources:
 *  - the CSV route traces of ../shared/data/route-traces (README there):
 *    fs_trace_load_csv();
 *  - a synthetic generator with Zipf popularity and temporal locality:
 *    fs_trace_generate();
 *  - the calibrated routing model (popularity, topics, short-term reuse,
 *    fitted to the discussion's and the real traces' statistics):
 *    fs_trace_model.h;
 *  - a compact binary file (.fstrace) that fs-trace-convert writes:
 *    fs_trace_write_bin() / fs_trace_read_bin().
 * fs_trace_load() takes either file format (sniffed by its magic).
 *
 * Conventions: functions return 0 or a negative errno value; on failure
 * they write a one-line message into err (when non-NULL) that names the
 * file and, for text input, the line.  Nothing here aborts on bad input.
 */
#ifndef FS_TRACE_H
#define FS_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "No expert": a prefill layer the recording engine did not route. */
#define FS_TRACE_NONE 0xffffu

/* Bounds every loader enforces (experts are uint16 and FS_TRACE_NONE is
 * reserved; topk is at most 64 so a token-layer fits a 64-bit mask). */
#define FS_TRACE_MAX_LAYERS 4096u
#define FS_TRACE_MAX_EXPERTS 65535u
#define FS_TRACE_MAX_TOPK 64u

/* A comfortable size for error buffers. */
#define FS_TRACE_ERRLEN 320

struct fs_trace {
	uint32_t layers;
	uint32_t experts;
	uint32_t topk;
	uint32_t tokens;         /* decode tokens */
	uint32_t prefill_tokens; /* prefill tokens, kept apart from decode */
	uint64_t seed;           /* synthetic traces: generator seed; else 0 */
	char model[128];         /* as recorded (a path for the CSV traces) */
	char arch[32];
	uint64_t *expert_bytes; /* [layers]: bytes of one expert, 0 = unknown */
	uint16_t *decode;       /* [tokens][layers][topk], rank order */
	uint16_t *prefill;      /* [prefill_tokens][layers][topk], FS_TRACE_NONE
				   where the recording has no row */
};

/* Allocate an empty trace of these dimensions (experts all FS_TRACE_NONE,
 * expert_bytes 0).  fs_trace_free() releases it; it is safe on a zeroed
 * struct and after a failed load. */
int fs_trace_alloc(struct fs_trace *t, uint32_t layers, uint32_t experts, uint32_t topk, uint32_t tokens,
		   uint32_t prefill_tokens);
void fs_trace_free(struct fs_trace *t);

/* The topk experts (rank order) of decode token `token` at `layer`. */
static inline const uint16_t *fs_trace_token(const struct fs_trace *t, uint32_t token, uint32_t layer)
{
	return t->decode + ((size_t)token * t->layers + layer) * t->topk;
}

/* ---- loading and saving ----------------------------------------------- */

/* CSV route trace (format: ../shared/data/route-traces/README.md).
 * Decode tokens must be complete (every layer, every rank); prefill tokens
 * may lack layers.  `name` is only used in messages. */
int fs_trace_load_csv(struct fs_trace *t, const char *path, char *err, size_t errlen);
int fs_trace_parse_csv(struct fs_trace *t, FILE *f, const char *name, char *err, size_t errlen);

/* Binary .fstrace (layout in fs_trace_bin.c): little-endian header with
 * magic, version and dimensions, then uint16 experts, then an FNV-1a 64
 * checksum of everything before it. */
int fs_trace_write_bin(const struct fs_trace *t, const char *path, char *err, size_t errlen);
int fs_trace_read_bin(struct fs_trace *t, const char *path, char *err, size_t errlen);

/* Either format, chosen by the file's first bytes. */
int fs_trace_load(struct fs_trace *t, const char *path, char *err, size_t errlen);

/* ---- synthetic traces -------------------------------------------------- */

/*
 * Knobs of the generator.  Per layer, experts get a popularity that follows
 * a Zipf law of exponent `skew` over a random permutation of the experts
 * drawn for that layer (so each layer has its own hot set).  Each token, at
 * each layer, first keeps every expert of the previous token at that layer
 * with probability `locality` (temporal locality), then fills the rest of
 * its topk by drawing from the popularity law without repeats.  The output
 * depends only on these fields: same knobs and seed, same trace.
 */
struct fs_trace_gen {
	uint32_t layers;            /* default 48 */
	uint32_t experts;           /* default 128 */
	uint32_t topk;              /* default 8 */
	uint32_t tokens_per_window; /* T, default 1 */
	uint32_t windows;           /* default 200: tokens = windows * T */
	double skew;                /* Zipf exponent s >= 0; 0 = uniform; default 1.0 */
	double locality;            /* 0..1, default 0.3 */
	uint64_t seed;              /* default 1 */
	uint64_t expert_bytes;      /* recorded per layer; default 0 (unknown) */
};
void fs_trace_gen_defaults(struct fs_trace_gen *g);
int fs_trace_generate(struct fs_trace *t, const struct fs_trace_gen *g, char *err, size_t errlen);

/* ---- windows ------------------------------------------------------------ */

/* Windows of T tokens: ceil(tokens / T); the last one may be shorter.
 * 0 when T is 0. */
uint32_t fs_trace_windows(const struct fs_trace *t, uint32_t tokens_per_window);

/*
 * Iterator over windows.  After fs_trace_iter_next() (or _seek()) returns 1,
 * fs_trace_iter_experts() gives, per layer, the distinct experts the
 * window's tokens used there, sorted ascending; first_token / n_tokens say
 * which decode tokens the window covers (fs_trace_token() for per-token
 * access).
 */
struct fs_trace_iter {
	const struct fs_trace *t;
	uint32_t tokens_per_window;
	uint32_t n_windows;
	uint32_t window;      /* the window loaded now */
	uint32_t first_token; /* its first decode token */
	uint32_t n_tokens;    /* its number of tokens (T, or fewer at the end) */
	uint32_t next;        /* the window fs_trace_iter_next() loads */
	uint32_t cap;         /* per-layer capacity of buf: T * topk */
	uint16_t *buf;        /* [layers][cap] */
	uint32_t *count;      /* [layers] */
};
int fs_trace_iter_init(struct fs_trace_iter *it, const struct fs_trace *t, uint32_t tokens_per_window);
/* Load the next window: 1, or 0 after the last one. */
int fs_trace_iter_next(struct fs_trace_iter *it);
/* Load window w: 1, or 0 when w >= n_windows. Next, next() loads w + 1. */
int fs_trace_iter_seek(struct fs_trace_iter *it, uint32_t w);
/* Number of distinct experts at `layer` in the loaded window; *experts
 * points at them (valid until the next load). */
uint32_t fs_trace_iter_experts(const struct fs_trace_iter *it, uint32_t layer, const uint16_t **experts);
void fs_trace_iter_free(struct fs_trace_iter *it);

/* ---- statistics --------------------------------------------------------- */

/* What the generator's knobs move, measured on any trace. */
struct fs_trace_stats {
	uint64_t uses;              /* decode (token, layer, rank) entries */
	double reuse;               /* mean share of a token's experts at a layer
				       also used by the previous token there */
	double top_decile_share;    /* share of uses that go to each layer's 10 %
				       most used experts */
	double distinct_per_window; /* mean distinct experts per (window, layer) */
};
int fs_trace_stats(const struct fs_trace *t, uint32_t tokens_per_window, struct fs_trace_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* FS_TRACE_H */
