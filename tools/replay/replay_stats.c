/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_stats.c: --trace-stats, what a cache sees in a trace: how often a
 * token's experts at a layer were used `lag` tokens before (reuse), and how
 * many distinct experts a window uses per layer.  The synthetic trace's
 * knobs are set against these numbers (docs/results/replay.md).
 */
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "replay_calib.h"

static const uint32_t lags[] = {1, 2, 3, 5, 10};
#define NLAGS (sizeof(lags) / sizeof(lags[0]))

static double reuse_at(const struct fs_trace *t, uint32_t lag, uint8_t *mark)
{
	uint64_t same = 0, all = 0;
	for (uint32_t tok = lag; tok < t->tokens; tok++)
		for (uint32_t l = 0; l < t->layers; l++) {
			const uint16_t *a = fs_trace_token(t, tok - lag, l), *b = fs_trace_token(t, tok, l);
			for (uint32_t k = 0; k < t->topk; k++)
				mark[a[k]] = 1;
			for (uint32_t k = 0; k < t->topk; k++)
				same += mark[b[k]];
			for (uint32_t k = 0; k < t->topk; k++)
				mark[a[k]] = 0;
			all += t->topk;
		}
	return all ? (double)same / (double)all : 0.0;
}

int replay_trace_stats(FILE *out, const struct fs_trace *t, uint32_t tokens_per_window)
{
	uint8_t *mark = calloc(t->experts, 1);
	struct fs_trace_stats st;
	if (!mark || fs_trace_stats(t, tokens_per_window, &st) != 0) {
		free(mark);
		return -1;
	}
	fprintf(out, "reuse at lag");
	for (size_t i = 0; i < NLAGS; i++)
		fprintf(out, " %u: %.3f", lags[i], reuse_at(t, lags[i], mark));
	fprintf(out, "\ntop-decile share %.3f, distinct experts per layer-window %.2f (T = %u)\n",
		st.top_decile_share, st.distinct_per_window, tokens_per_window);
	fprintf(out, "distinct experts per layer over 16 tokens %.2f, over 64 tokens %.2f\n",
		calib_distinct(t, 0, 16), calib_distinct(t, 0, 64));
	free(mark);
	return 0;
}
