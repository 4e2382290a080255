/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libforesight-kernels: the router-ahead kernel.
 *
 * At layer L an engine has the hidden rows of its T tokens.  Applying the
 * routers (ffn_gate_inp) of layers L+1..L+K to those rows predicts which
 * experts those layers will want (the discussion in ../shared/background/
 * measured 61 % recall of the 10 routed experts one layer ahead at 10
 * candidates, 90 % at 48).  fs_ra_launch() does that on the GPU, in the
 * caller's stream (so it can live in a CUDA graph), and posts the
 * candidates straight into the engine's device ring: no host thread of the
 * engine is involved, and the daemon can start the copies as soon as the
 * layer's routing is known.
 *
 * Ranking rule (the same in fs_ra_reference, bit for bit):
 *  1. logit[k][t][e] = router_k[e] . hidden[t], in f32: lane = (i / 8) % 32
 *     accumulates elements i in increasing order with fmaf(w, h, acc), then
 *     the 32 lane sums are added by the butterfly s[i] += s[i ^ o] for
 *     o = 16, 8, 4, 2, 1 (lane 0's result).  bf16 and f16 inputs are
 *     widened to f32 exactly.
 *  2. Per token: its top-M experts by (logit desc, expert asc).
 *  3. Per expert e picked by any token: votes(e) = tokens that picked it;
 *     margin(e) = max over those tokens of logit(e) - that token's top logit
 *     (<= 0).  Candidates ranked by (votes desc, margin desc, expert asc).
 *  4. Experts the residency bitmap marks resident are skipped; the first
 *     max_out of the rest are the prediction for layer L+k, posted with
 *     score = votes / T * expf(margin) (the share of tokens that chose it,
 *     weighted by how close it came to their first choice; in (0, 1]).
 *
 * Inputs are device pointers; routers are E x d row-major, as GGUF stores
 * ffn_gate_inp (ne[0] = d, ne[1] = E).
 */
#ifndef FORESIGHT_ROUTER_AHEAD_H
#define FORESIGHT_ROUTER_AHEAD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FS_RA_API __attribute__((visibility("default")))
#else
#define FS_RA_API
#endif

enum fs_ra_dtype { FS_RA_F32 = 0, FS_RA_F16 = 1, FS_RA_BF16 = 2 };

#define FS_RA_MAX_TOKENS 64u
#define FS_RA_MAX_HORIZONS 3u
#define FS_RA_MAX_TOP 32u  /* top-M per token */
#define FS_RA_MAX_OUT 256u /* candidates per horizon */
#define FS_RA_MAX_EXPERTS 4096u

struct fs_ra_params {
	const void *hidden;                     /* [tokens][dim] */
	enum fs_ra_dtype hidden_type;           /* F32 or BF16 (F16 too) */
	uint32_t tokens;                        /* 1..64 */
	uint32_t dim;                           /* d, >= 1 */
	const void *router[FS_RA_MAX_HORIZONS]; /* layer L+1+k's router, [experts][dim] */
	enum fs_ra_dtype router_type;
	uint32_t experts;  /* E, 1..4096 */
	uint32_t horizons; /* K, 1..3 */
	uint32_t top_m;    /* per token, 1..min(32, E) */
	uint32_t max_out;  /* per horizon, 1..256 */
	/* Residency: bit e of resident[k][e / 32] set = layer L+1+k's expert e
	 * is resident (skip it).  NULL: nothing resident.  An engine fills it
	 * from its epoch (fs_lookup) into device memory it owns. */
	const uint32_t *resident[FS_RA_MAX_HORIZONS];
	/* Posting (NULL: do not post).  desc from fs_dev_ring_enable(). */
	void *desc;
	uint32_t layer;             /* L: records name layers L+1..L+K */
	uint32_t card;              /* card id, or 0xffff: wherever the layer runs */
	uint32_t window;            /* the window number, unless window_dev */
	const uint32_t *window_dev; /* non-NULL: read the window here at run
					  time (a graph replays frozen arguments) */
	/* Optional results (device memory), for tests and engines that want
	 * them: out_expert/out_score [horizons][max_out], out_count [horizons]. */
	uint32_t *out_expert;
	float *out_score;
	uint32_t *out_count;
	void *scratch; /* fs_ra_scratch_bytes(), zeroed once */
};

/* Device scratch one launch needs (kept between launches: the kernel
 * leaves it ready for the next one). */
FS_RA_API size_t fs_ra_scratch_bytes(const struct fs_ra_params *p);
/* Check p; 0 or -EINVAL (with a reason in msg when msg is not NULL). */
FS_RA_API int fs_ra_check(const struct fs_ra_params *p, char *msg, size_t len);
/* Launch into `stream` (a cudaStream_t; NULL: the legacy default stream).
 * 0, -EINVAL, or -EIO when the launch failed. */
FS_RA_API int fs_ra_launch(const struct fs_ra_params *p, void *stream);

/* The CPU reference (host pointers; no CUDA needed): the same rule, the
 * same bits.  Fills out_expert/out_score/out_count, which must be set. */
FS_RA_API int fs_ra_reference(const struct fs_ra_params *p);

#ifdef __cplusplus
}
#endif

#endif /* FORESIGHT_ROUTER_AHEAD_H */
