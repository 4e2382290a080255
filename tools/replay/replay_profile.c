/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_profile.c: the static profile a run starts decode with: use
 * counts per (layer, expert) from the trace's prefill rows (what a
 * calibrated engine knows before it decodes) plus, when asked, its first
 * `warmup` decode windows (synthetic traces have no prefill).  Warm-up
 * windows only build the profile; fs-replay never scores them.  Rows the
 * recording engine left empty (FS_TRACE_NONE) count nothing.
 */
#include <errno.h>
#include <string.h>

#include "replay.h"

int replay_profile_build(const struct fs_trace *t, uint32_t warmup, uint32_t tokens_per_window,
			 uint32_t *counts)
{
	if (!tokens_per_window)
		return -EINVAL;
	memset(counts, 0, (size_t)t->layers * t->experts * sizeof(*counts));
	uint64_t wt = (uint64_t)warmup * tokens_per_window;
	uint32_t warm_tokens = wt < t->tokens ? (uint32_t)wt : t->tokens;
	uint32_t counted = 0;
	for (uint32_t tok = 0; tok < t->prefill_tokens; tok++) {
		int any = 0;
		for (uint32_t l = 0; l < t->layers; l++) {
			const uint16_t *e = t->prefill + ((size_t)tok * t->layers + l) * t->topk;
			for (uint32_t k = 0; k < t->topk; k++)
				if (e[k] != FS_TRACE_NONE && e[k] < t->experts) {
					counts[(size_t)l * t->experts + e[k]]++;
					any = 1;
				}
		}
		counted += any;
	}
	for (uint32_t tok = 0; tok < warm_tokens; tok++) {
		for (uint32_t l = 0; l < t->layers; l++) {
			const uint16_t *e = fs_trace_token(t, tok, l);
			for (uint32_t k = 0; k < t->topk; k++)
				counts[(size_t)l * t->experts + e[k]]++;
		}
		counted++;
	}
	return (int)counted;
}
