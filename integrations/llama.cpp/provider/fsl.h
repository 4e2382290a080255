/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsl.h: foresight's expert provider for llama.cpp (libforesight-llama).
 *
 * llama.cpp, patched with patches/0001-expert-provider.patch, reads every
 * expert of a weight placed in an experts buffer (-ot '...=CUDA0_Experts')
 * through a device table of per-expert base pointers.  This provider fills
 * those tables from foresightd: before each graph evaluation it holds the
 * newest residency epoch and points each expert at its slot when the slot
 * has landed, else at the expert's bytes in the arena, which the engine
 * maps and the GPU reads in place over the bus.  The kernels, their launch
 * shapes and the bytes they read are llama.cpp's own, so the outputs are the
 * same whatever is resident.  While a layer runs, a small kernel of ours
 * posts the experts its tokens use (usage records) through the client's
 * device ring: what foresightd learns and prefetches from.
 *
 * The core (fsl_core.c) is plain C over libforesight-client; what it needs
 * from the GPU runtime is struct fsl_gpu: fsl_cuda.cu implements it for
 * CUDA, and the tests a host stand-in (tables in host memory, the "device"
 * reading host pointers), so the table logic runs where no GPU exists.
 */
#ifndef FSL_H
#define FSL_H

#include <stddef.h>
#include <stdint.h>

#include "foresight/foresight.h"

#ifdef __cplusplus
extern "C" {
#endif

struct fsl;

/* What a route kernel needs (fsl_gpu.route): stable for the life of the
 * provider, so a launch captured in a CUDA graph stays right. */
struct fsl_route {
	void *ring_desc;          /* the client's device-ring descriptor (fs_dev_ring_enable) */
	const uint32_t *window;   /* device: the evaluation's window number (fsl_hdr) */
	uint64_t *counters;       /* device: struct fsl_counters, added to */
	const void *const *table; /* device: the layer's table of the posting role */
	uint64_t arena_dev;       /* the arena as the device reads it: [arena_dev, +arena_bytes) */
	uint64_t arena_bytes;
	uint64_t expert_bytes; /* the layer's bytes read per expert (every claimed role) */
	const int32_t *ids;    /* device: ids[i + j * ids_stride], i < n_used, j < n_tokens */
	uint32_t *used;        /* device (host-mapped): the layer's struct fsl_used, written each run */
	int64_t n_used, n_tokens, ids_stride;
	uint32_t layer, experts, card;
	int post; /* 0: count and fill `used`, post nothing (the LRU baseline) */
	/* Staging (fsl_stage.h): the layer's first `stage_cap` missed experts
	 * are copied to VRAM by a wide streaming kernel and their entries in
	 * every claimed role's table pointed there, before the layer's
	 * products read them; 0: off (the products read misses in place). */
	uint8_t *stage; /* device: stage_cap slots of stage_stride bytes */
	uint32_t stage_cap;
	uint64_t stage_stride; /* >= blob_bytes, a multiple of 256 */
	uint64_t blob_bytes;   /* one expert's blob in this layer (every part, tails included) */
	void **tables[4];      /* device: the layer's table of role r + 1, NULL when unclaimed */
	uint64_t part_off[4];  /* role r + 1's offset in the blob */
	uint32_t poster_role;  /* the role whose table `table` is */
};

/* The most ids a layer may have for its misses to be staged (decode and
 * small batches; a prefill's products read misses in place). */
#define FSL_STAGE_MAX_IDS 256

/* FORESIGHT_LLAMA_STAGE's default: up to 16 misses a layer staged (a
 * decode token's top-k misses on the models measured, 6-8).  On 1 x H100
 * (docs/results/llama.md, c against cs, 2-3 repetitions) it took decode
 * from 60.7 to 69.0 t/s on qwen at 26 % and 80.9 to 94.4 on gemma at 52 %,
 * logits byte-identical; prefill (never staged: over FSL_STAGE_MAX_IDS)
 * moved by -2..-12 %. */
#define FSL_STAGE_DEFAULT 16

/* What the route kernel leaves for the host per layer, in host-mapped
 * memory: the experts the layer's tokens used, under the window they ran
 * in (written last, after a system fence: a host that sees the window sees
 * its bits).  FSL_USED_WORDS(experts) 32-bit words. */
#define FSL_USED_WORDS(experts) (2u + ((experts) + 31u) / 32u)
#define FSL_USED_WINDOW 0 /* word 0: the window + 1 (0: never ran) */
#define FSL_USED_BITS 2   /* words 2..: bit e: expert e used */

/* Counters the route kernel keeps in device memory. */
struct fsl_counters {
	uint64_t uses;       /* (layer, expert) pairs a window used */
	uint64_t hits;       /* of those, served from a slot */
	uint64_t miss_bytes; /* bytes the missed experts read in place */
	uint64_t token_uses; /* (token, layer, expert) triples */
	uint64_t token_hits; /* of those, served from a slot */
	uint64_t posted;     /* usage records that went into the ring */
	uint64_t staged;     /* missed experts copied to VRAM before their layer */
	uint64_t staged_bytes;
};

/* The runtime under the core.  Every call returns 0 or a negative errno. */
struct fsl_gpu {
	void *ctx;
	/* Host memory the device will read in place: its device address. */
	int (*map_host)(void *ctx, const void *base, uint64_t bytes, uint64_t *dev);
	/* Device memory for the tables (never freed before the provider). */
	int (*alloc_dev)(void *ctx, uint64_t bytes, void **dev);
	/* Host memory the device writes and the host reads (struct fsl_used). */
	int (*alloc_mapped)(void *ctx, uint64_t bytes, void **host, void **dev);
	/* Copy host -> dev on the provider's own copy stream (the in-process
	 * LRU's fills) and remember it as slot's last copy; copy_done(slot): 1
	 * once that copy has landed. */
	int (*copy_in)(void *ctx, void *dev, const void *host, uint64_t bytes, uint32_t slot);
	int (*copy_done)(void *ctx, uint32_t slot);
	/* Read device memory back (the counters; never on a per-layer path). */
	int (*download)(void *ctx, void *host, const void *dev, uint64_t bytes);
	/* Pinned host memory to upload from. */
	int (*alloc_pinned)(void *ctx, uint64_t bytes, void **host);
	/* Copy host -> dev on stream, after what is queued there. */
	int (*upload)(void *ctx, void *dev, const void *host, uint64_t bytes, void *stream);
	/* Mark k: the point the stream has reached; passed(k): 1 once the
	 * device went past it, 0 not yet; wait(k): until it has. */
	int (*mark)(void *ctx, unsigned k, void *stream);
	int (*passed)(void *ctx, unsigned k);
	int (*wait)(void *ctx, unsigned k);
	/* Enqueue the usage kernel for one layer (may be captured). */
	int (*route)(void *ctx, const struct fsl_route *r, void *stream);
	/* The device ring's descriptor for the route kernel (fs_dev_ring_enable),
	 * or NULL when the stand-in posts from the host. */
	int (*ring)(void *ctx, fs_client *c, void **desc);
	/* 1: slots are read through fs_place.host (the host backend's
	 * stand-in); 0: through fs_place.device. */
	int host_slots;
	/* The runtime device the engine computes on (CUDA ordinal), -1: any. */
	int device;
};

struct fsl_opts {
	const char *socket; /* NULL: $FORESIGHT_SOCKET, else the default */
	const char *name;   /* shown by fsctl clients; NULL: "llama.cpp" */
	unsigned wait_s;    /* wait this long for foresightd to load every layer */
	int check;          /* loader bytes: 0 off, 1 sample (default), 2 every byte */
	int log;            /* 1: say what it does on stderr */
	uint32_t stage;     /* missed experts per layer copied to VRAM before the layer's
			     * products (fsl_route.stage); 0: read in place */
	uint64_t lru_mib;   /* >0: an in-process per-layer LRU of this many MiB of VRAM
			     * instead of foresightd's tier (a baseline: what an engine could
			     * add alone); foresightd still serves the arena */
};

/* The in-flight evaluations the provider keeps apart: an evaluation's
 * epoch is held until the device passed its end. */
#define FSL_INFLIGHT 4u

/* Connect, wait for the arena, map it: 0 and *out, or a negative errno
 * with the reason in fsl_error(). */
int fsl_open(struct fsl **out, const struct fsl_opts *o, const struct fsl_gpu *gpu);
void fsl_close(struct fsl *p);
const char *fsl_error(void);

/* The seam's calls (ggml-cuda.h, struct ggml_backend_cuda_expert_provider). */
const void *const *fsl_claim(struct fsl *p, int device, const char *name, int type, const int64_t *ne,
			     const size_t *nb);
int fsl_check(struct fsl *p, const void *const *table, const void *data, size_t offset, size_t size);
void fsl_begin(struct fsl *p, int device, void *stream);
void fsl_end(struct fsl *p, int device, void *stream);
void fsl_route_layer(struct fsl *p, const void *const *table, const int32_t *ids, int64_t n_used,
		     int64_t n_tokens, int64_t ids_stride, void *stream);

/* What happened so far (the counters are read as of the last evaluation
 * the device passed). */
struct fsl_stats {
	uint64_t windows;        /* evaluations begun */
	uint64_t empty_views;    /* of those, with no daemon table (every expert from the arena) */
	uint64_t slot_entries;   /* table entries pointed at a slot, summed over windows */
	uint64_t arena_entries;  /* ... at the arena */
	uint64_t waits;          /* begins that waited for the device to pass an old mark */
	uint64_t check_bytes;    /* loader bytes compared with the arena */
	uint64_t begin_ns;       /* host time in begin (epoch, tables, upload call), summed */
	struct fsl_counters dev; /* the route kernel's */
};
void fsl_stats(struct fsl *p, struct fsl_stats *out);
/* The stats as one JSON object (like snprintf). */
int fsl_stats_json(struct fsl *p, char *buf, size_t len);

/* Tensor names the provider claims: blk.<layer>.ffn_{gate,up,down,gate_up}_exps.weight.
 * 0 and *layer, *role (enum fs_part_role), or -1. */
int fsl_parse_name(const char *name, uint32_t *layer, uint32_t *role);

#ifdef __cplusplus
}
#endif

#endif /* FSL_H */
