/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsgw_llama.h: MoE models that llama.cpp loads and runs: every key and
 * tensor its loader wants for the arch (qwen3moe, gpt-oss), valid blocks
 * with sane scales (no NaN/Inf anywhere in the forward pass), a
 * `no_vocab` tokenizer with the vocab size, and, for routing replay,
 * optional `blk.N.ffn_gate_tid2eid` tables (token id -> the experts it
 * routes to; integrations/llama.cpp/patches/0002-route-replay.patch makes
 * llama.cpp use them in place of the router's top-k).
 *
 * Weights are random: the model computes nothing useful, but it runs the
 * real kernels on real shapes, and with replay routes as a recorded
 * trace did.
 */
#ifndef FSGW_LLAMA_H
#define FSGW_LLAMA_H

#include <stddef.h>
#include <stdint.h>

#include "fs_trace.h"

struct fsgw_llama {
	const char *arch; /* "qwen3moe" or "gpt-oss" (llama.cpp's arch names) */
	const char *name; /* general.name; NULL: "fs-<arch>" */
	uint32_t layers;
	uint32_t experts;
	uint32_t used; /* top-k: expert_used_count */
	uint32_t embd; /* hidden size */
	uint32_t ff;   /* expert FFN size */
	uint32_t vocab;
	uint32_t heads, kv_heads, head_dim;
	uint32_t ctx;                 /* context_length */
	uint32_t swa;                 /* gpt-oss: attention.sliding_window */
	int expert_type;              /* ggml type of the gate and up experts */
	int down_type;                /* of the down experts; -1: expert_type where ff allows it, else Q8_0 */
	int dense_type;               /* attention, embeddings, output */
	uint8_t *down_types;          /* [layers] or NULL: per-layer down types (fsgw_llama_match_bytes) */
	uint64_t seed;                /* weights: a function of (seed, tensor name, position) */
	const struct fs_trace *route; /* tid2eid from its decode tokens, or NULL */
};

/* The shapes: "tiny qwen3-30b-a3b gemma-replay gpt-oss-20b gpt-oss-120b". */
const char *fsgw_llama_shapes(void);
/* Fill m with a shape's values (seed 1, no route).  0, or -1: unknown. */
int fsgw_llama_shape(struct fsgw_llama *m, const char *shape);

/* The down experts' type at layer l. */
uint32_t fsgw_llama_down_type(const struct fsgw_llama *m, uint32_t l);
/* Bytes of one expert (gate + up + down) at layer l. */
uint64_t fsgw_llama_expert_bytes(const struct fsgw_llama *m, uint32_t l);
/* Total bytes of the tensors' data (what the file holds past its head). */
uint64_t fsgw_llama_data_bytes(const struct fsgw_llama *m);

/* Per layer, the down type that makes one expert exactly bytes[l] bytes
 * (gate and up of expert_type): fills m->down_types (which the caller
 * allocated, m->layers entries).  0, or -1 with err naming the layer. */
int fsgw_llama_match_bytes(struct fsgw_llama *m, const uint64_t *bytes, char *err, size_t errlen);

/* Checks the spec (and the route against it: the model replays the
 * trace's first `layers` layers; its expert ids must be < experts and its
 * top-k becomes expert_used_count, which the caller sets), then writes.
 * 0, or -1 with err. */
int fsgw_llama_write(const struct fsgw_llama *m, const char *path, char *err, size_t errlen);

/* The expert token t routes to at layer l, rank k, in a model written
 * with this route: decode token t mod tokens of the trace. */
static inline uint16_t fsgw_llama_route(const struct fs_trace *r, uint32_t t, uint32_t l, uint32_t k)
{
	return fs_trace_token(r, t % r->tokens, l)[k];
}

#endif /* FSGW_LLAMA_H */
