/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsl_seam_iface.h: the expert provider seam as patches/0001-expert-provider.patch
 * declares it in ggml-cuda.h, for a build without the llama.cpp tree.
 * integrations/llama.cpp/tests/patch_test.sh compiles the provider against
 * the patched header and checks this layout against it.
 */
#ifndef FSL_SEAM_IFACE_H
#define FSL_SEAM_IFACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ggml_backend_cuda_expert_provider {
	void *ctx;
	const void *const *(*claim)(void *ctx, int device, const char *name, int type, const int64_t *ne,
				    const size_t *nb);
	bool (*check)(void *ctx, const void *const *table, const void *data, size_t offset, size_t size);
	void (*begin)(void *ctx, int device, void *stream);
	void (*end)(void *ctx, int device, void *stream);
	void (*route)(void *ctx, const void *const *table, const int32_t *ids, int64_t n_used,
		      int64_t n_tokens, int64_t ids_stride, void *stream);
};

#endif /* FSL_SEAM_IFACE_H */
