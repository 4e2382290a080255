/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_layer.c: the `static-layer` policy's profile, the definition of
 * ../shared/tools/replay_ref.py's static baseline (an independent reference
 * replay), so the two can be compared exactly (tests/replay_oracle_test.sh):
 * each layer keeps its own `per_layer` most used experts of the profile
 * (prefill rows, then warm-up windows), ties broken by first appearance in
 * those rows, experts never seen left out (their slots stay empty).
 *
 * The core's static tier is one per card, filled by count from the top, so
 * the selection is handed to it as a profile that ranks exactly the chosen
 * experts (count per_layer - rank, everything else 0) with as many slots
 * as were chosen: the same residency core, a per-layer profile.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

struct cand {
	uint32_t count, first;
	uint16_t expert;
};

static int by_count_then_first(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return x->first < y->first ? -1 : x->first > y->first;
}

int replay_layer_profile(const struct fs_trace *t, const uint32_t *counts, uint32_t warmup,
			 uint32_t tokens_per_window, uint32_t per_layer, uint32_t *out)
{
	if (!tokens_per_window)
		return -EINVAL;
	struct cand *c = malloc(t->experts * sizeof(*c));
	if (!c)
		return -ENOMEM;
	uint64_t wt = (uint64_t)warmup * tokens_per_window;
	uint32_t warm_tokens = wt < t->tokens ? (uint32_t)wt : t->tokens;
	memset(out, 0, (size_t)t->layers * t->experts * sizeof(*out));
	uint32_t chosen = 0;
	for (uint32_t l = 0; l < t->layers; l++) {
		for (uint32_t e = 0; e < t->experts; e++)
			c[e] = (struct cand){counts[(size_t)l * t->experts + e], UINT32_MAX, (uint16_t)e};
		uint32_t pos = 0; /* rows in the order replay_profile_build counts them */
		for (uint32_t tok = 0; tok < t->prefill_tokens; tok++) {
			const uint16_t *e = t->prefill + ((size_t)tok * t->layers + l) * t->topk;
			for (uint32_t k = 0; k < t->topk; k++, pos++)
				if (e[k] != FS_TRACE_NONE && e[k] < t->experts && c[e[k]].first == UINT32_MAX)
					c[e[k]].first = pos;
		}
		for (uint32_t tok = 0; tok < warm_tokens; tok++) {
			const uint16_t *e = fs_trace_token(t, tok, l);
			for (uint32_t k = 0; k < t->topk; k++, pos++)
				if (e[k] < t->experts && c[e[k]].first == UINT32_MAX)
					c[e[k]].first = pos;
		}
		qsort(c, t->experts, sizeof(*c), by_count_then_first);
		for (uint32_t r = 0; r < per_layer && r < t->experts && c[r].count > 0; r++, chosen++)
			out[(size_t)l * t->experts + c[r].expert] = per_layer - r;
	}
	free(c);
	return (int)chosen;
}
