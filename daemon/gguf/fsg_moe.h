/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsg_moe.h: find the routed experts of a MoE model in a parsed GGUF file
 * and plan the arena blob of each (layer, expert).
 *
 * Members of the arena, per block N:
 *   blk.N.ffn_{gate,up,down,gate_up}_exps.{weight,bias,scale}
 *       stacked: the last dimension is the expert, so expert e's slice is
 *       the e-th contiguous 1/E of the tensor (qwen3moe, qwen3next,
 *       llama/mixtral, deepseek2, gpt-oss with its biases, gemma4 with the
 *       fused gate_up and the down scale, ...);
 *   blk.N.ffn_{gate,up,down}.E.weight
 *       one tensor per expert (older mixtral conversions).
 * Not members, reported as left out with the reason: shared experts
 * (*_shexp), routers (ffn_gate_inp*, exp_probs_b) and every dense tensor.
 * The expert count and top-k come from <arch>.expert_count and
 * <arch>.expert_used_count (the count falls back to the tensors' last
 * dimension when the key is absent, and must agree with them when present).
 */
#ifndef FSG_MOE_H
#define FSG_MOE_H

#include <stdint.h>

#include "fs_arena.h"
#include "fsg_reader.h"

struct fsg_part {
	uint16_t role;     /* enum fs_arena_role */
	uint16_t what;     /* enum fs_arena_what */
	uint32_t type;     /* ggml type */
	uint64_t ne[2];    /* the slice: ne[0] elements per row, ne[1] rows */
	uint64_t bytes;    /* one expert's slice */
	uint64_t blob_off; /* where it goes in the blob */
	uint64_t src;      /* stacked: file offset of expert 0's slice (expert e: src + e * bytes) */
	uint64_t *split;   /* one tensor per expert: [experts] file offsets; else NULL */
	uint32_t tensor;   /* index of its (first) tensor in the file */
};

struct fsg_layer {
	uint32_t nparts; /* 0: a dense layer */
	struct fsg_part part[FS_ARENA_MAX_PARTS];
	uint64_t blob_bytes; /* one expert's blob (its last part's end) */
};

struct fsg_left {
	uint32_t tensor;
	const char *why;
};

struct fsg_plan {
	char arch[64];
	char name[64];       /* general.name, or "" */
	uint32_t layers;     /* highest block with experts + 1: arena layer = block number */
	uint32_t moe_layers; /* layers with experts */
	uint32_t experts;
	uint32_t experts_used;    /* 0 when the file does not say */
	int experts_from_tensors; /* <arch>.expert_count absent */
	struct fsg_layer *layer;  /* [layers] */
	uint64_t max_blob;
	uint64_t member_bytes; /* expert bytes in the file (what loading reads) */
	uint32_t nleft;
	struct fsg_left *left;
	uint64_t left_bytes;
};

/* 0, or -EBADMSG (err says which tensor or key is wrong), -ENOMEM. */
int fsg_plan_build(const struct fsg_file *f, struct fsg_plan *p, struct fsg_err *err);
void fsg_plan_free(struct fsg_plan *p);

/* File offset of expert e's slice of a part. */
static inline uint64_t fsg_part_src(const struct fsg_part *pt, uint32_t e)
{
	return pt->split ? pt->split[e] : pt->src + (uint64_t)e * pt->bytes;
}

const char *fsg_role_name(uint32_t role); /* "gate", "up", "down", "gate_up" */
const char *fsg_what_name(uint32_t what); /* "weight", "bias", "scale" */

#endif /* FSG_MOE_H */
