/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsl_seam.c: libforesight-llama's entry point, the "expert provider" seam
 * of llama.cpp's CUDA backend (patches/0001-expert-provider.patch).
 * ggml-cuda loads this library from GGML_CUDA_EXPERT_PROVIDER and calls
 * ggml_backend_cuda_expert_provider_init; everything else goes through the
 * interface it fills.
 *
 * Environment (read once, at the first weight claimed):
 *   FORESIGHT_SOCKET          foresightd's control socket (the client's default otherwise)
 *   FORESIGHT_LLAMA_CHECK     off | sample (default) | full: compare the model file's expert bytes,
 *                             as llama.cpp loads them, with foresightd's arena
 *   FORESIGHT_LLAMA_WAIT_S    how long to wait for foresightd to load the model (default 600)
 *   FORESIGHT_LLAMA_STATS     at exit, write the provider's counters there (JSON)
 *   FORESIGHT_LLAMA_QUIET     1: say nothing unless something fails
 *   FORESIGHT_LLAMA_STAGE     N: copy up to N missed experts per layer to VRAM before the layer's
 *                             products, instead of the products reading them in place over the
 *                             bus; 0: every miss read in place.  Default FSL_STAGE_DEFAULT (16):
 *                             decode +0.5..+17 % on an H100, prefill -2..-12 %
 *                             (docs/results/llama.md, modes c and cs)
 *   FORESIGHT_LLAMA_CACHE     lru:MIB: instead of foresightd's tier, an in-process per-layer
 *                             LRU of MIB of VRAM (a baseline for the benchmark; foresightd
 *                             still serves the arena that misses are read from)
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsl.h"
#include "fsl_cuda.h"

#ifdef FSL_GGML_CUDA_H
/* Built against the patched llama.cpp tree (integrations/llama.cpp/build.sh):
 * the seam's own declaration, so a change to it fails this build. */
#include "ggml-cuda.h"
#else
#include "fsl_seam_iface.h"
#endif

#define EXPORT __attribute__((visibility("default")))

/* What ggml-cuda and a driver look up in this library (dlsym). */
EXPORT bool ggml_backend_cuda_expert_provider_init(struct ggml_backend_cuda_expert_provider *out);
EXPORT int foresight_llama_stats_json(char *buf, size_t len);

static struct fsl *g_p;
static int g_failed;

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : dflt;
}

static void write_stats(void)
{
	const char *path = getenv("FORESIGHT_LLAMA_STATS");
	char buf[1024];
	if (!g_p || fsl_stats_json(g_p, buf, sizeof(buf)) < 0)
		return;
	if (!env_int("FORESIGHT_LLAMA_QUIET", 0))
		fprintf(stderr, "foresight-llama: %s\n", buf);
	if (path && *path) {
		FILE *f = fopen(path, "w");
		if (!f || fprintf(f, "%s\n", buf) < 0 || fclose(f) != 0)
			fprintf(stderr, "foresight-llama: cannot write %s: %s\n", path, strerror(errno));
	}
}

/* The provider opens at the first claim: only then is the device known. */
static struct fsl *provider(int device)
{
	if (g_p || g_failed)
		return g_p;
	const char *check = getenv("FORESIGHT_LLAMA_CHECK");
	struct fsl_opts o = {
		.socket = NULL,
		.name = "llama.cpp",
		.wait_s = (unsigned)env_int("FORESIGHT_LLAMA_WAIT_S", 600),
		.check = !check || !*check || strcmp(check, "sample") == 0 ? 1 :
			 strcmp(check, "full") == 0                        ? 2 :
			 strcmp(check, "off") == 0                         ? 0 :
									     -1,
		.log = !env_int("FORESIGHT_LLAMA_QUIET", 0),
		.stage = (uint32_t)env_int("FORESIGHT_LLAMA_STAGE", FSL_STAGE_DEFAULT),
	};
	const char *cache = getenv("FORESIGHT_LLAMA_CACHE");
	if (cache && *cache) {
		char *end = NULL;
		unsigned long long mib = strncmp(cache, "lru:", 4) == 0 ? strtoull(cache + 4, &end, 10) : 0;
		if (!mib || !end || *end) {
			fprintf(stderr,
				"foresight-llama: FORESIGHT_LLAMA_CACHE=%s: lru:MIB (e.g. lru:4096)\n",
				cache);
			g_failed = 1;
			return NULL;
		}
		o.lru_mib = mib;
	}
	if (o.check < 0) {
		fprintf(stderr, "foresight-llama: FORESIGHT_LLAMA_CHECK=%s: off, sample or full\n", check);
		g_failed = 1;
		return NULL;
	}
	struct fsl_gpu gpu;
	fsl_cuda_gpu(&gpu, device);
	if (fsl_open(&g_p, &o, &gpu) < 0) {
		g_failed = 1; /* fsl_open said why; every claim now fails, and so does the load */
		return NULL;
	}
	atexit(write_stats);
	return g_p;
}

static const void *const *seam_claim(void *ctx, int device, const char *name, int type, const int64_t *ne,
				     const size_t *nb)
{
	(void)ctx;
	struct fsl *p = provider(device);
	return p ? fsl_claim(p, device, name, type, ne, nb) : NULL;
}

static bool seam_check(void *ctx, const void *const *table, const void *data, size_t offset, size_t size)
{
	(void)ctx;
	return g_p && fsl_check(g_p, table, data, offset, size) == 0;
}

static void seam_begin(void *ctx, int device, void *stream)
{
	(void)ctx;
	if (g_p)
		fsl_begin(g_p, device, stream);
}

static void seam_end(void *ctx, int device, void *stream)
{
	(void)ctx;
	if (g_p)
		fsl_end(g_p, device, stream);
}

static void seam_route(void *ctx, const void *const *table, const int32_t *ids, int64_t n_used,
		       int64_t n_tokens, int64_t ids_stride, void *stream)
{
	(void)ctx;
	if (g_p)
		fsl_route_layer(g_p, table, ids, n_used, n_tokens, ids_stride, stream);
}

EXPORT bool ggml_backend_cuda_expert_provider_init(struct ggml_backend_cuda_expert_provider *out)
{
	memset(out, 0, sizeof(*out));
	out->claim = seam_claim;
	out->check = seam_check;
	out->begin = seam_begin;
	out->end = seam_end;
	out->route = seam_route;
	return true;
}

/* For a driver that reports per run: the counters so far, as JSON (like
 * snprintf); -1 before the provider opened.  Find it with
 * dlopen(path, RTLD_NOLOAD) + dlsym. */
EXPORT int foresight_llama_stats_json(char *buf, size_t len)
{
	return g_p ? fsl_stats_json(g_p, buf, len) : -1;
}
