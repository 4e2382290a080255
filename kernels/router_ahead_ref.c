/* SPDX-License-Identifier: Apache-2.0 */
/*
 * router_ahead_ref.c: the router-ahead ranking rule on the CPU, and the
 * parameter check the kernel shares.  foresight/router_ahead.h states the
 * rule; this file is its executable statement, which the device tests hold
 * the kernel to bit for bit (candidates and order; scores within expf's
 * last bits).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "foresight/router_ahead.h"
#include "router_ahead_rule.h"

int fs_ra_check(const struct fs_ra_params *p, char *msg, size_t len)
{
	const char *why = NULL;
	if (!p)
		why = "no parameters";
	else if (!p->hidden)
		why = "hidden is NULL";
	else if (p->tokens < 1 || p->tokens > FS_RA_MAX_TOKENS)
		why = "tokens must be 1..64";
	else if (p->dim < 1)
		why = "dim must be >= 1";
	else if (p->experts < 1 || p->experts > FS_RA_MAX_EXPERTS)
		why = "experts must be 1..4096";
	else if (p->horizons < 1 || p->horizons > FS_RA_MAX_HORIZONS)
		why = "horizons must be 1..3";
	else if (p->top_m < 1 || p->top_m > FS_RA_MAX_TOP || p->top_m > p->experts)
		why = "top_m must be 1..min(32, experts)";
	else if (p->max_out < 1 || p->max_out > FS_RA_MAX_OUT)
		why = "max_out must be 1..256";
	else if ((unsigned)p->hidden_type > FS_RA_BF16 || (unsigned)p->router_type > FS_RA_BF16)
		why = "unknown dtype";
	else if (p->desc && (p->layer + p->horizons > 0xffffu || p->card > 0xffffu))
		why = "layer or card out of the record's range";
	else if (!p->desc && !(p->out_expert && p->out_score && p->out_count))
		why = "nothing to do: neither desc nor the out arrays are set";
	for (uint32_t k = 0; !why && k < p->horizons; k++)
		if (!p->router[k])
			why = "a router of the horizons is NULL";
	if (why) {
		if (msg && len)
			snprintf(msg, len, "router-ahead: %s", why);
		return -EINVAL;
	}
	return 0;
}

static float load_elem(const void *base, enum fs_ra_dtype t, size_t i)
{
	switch (t) {
	case FS_RA_F16:
		return fs_ra_f16_to_f32(((const uint16_t *)base)[i]);
	case FS_RA_BF16:
		return fs_ra_bf16_to_f32(((const uint16_t *)base)[i]);
	default:
		return ((const float *)base)[i];
	}
}

/* Rule step 1: the lane sums and the butterfly, as the kernel's warp does. */
static float dot(const struct fs_ra_params *p, const void *router, uint32_t e, uint32_t t)
{
	float s[32] = {0};
	size_t wrow = (size_t)e * p->dim, hrow = (size_t)t * p->dim;
	for (uint32_t i = 0; i < p->dim; i++) {
		unsigned lane = FS_RA_LANE(i);
		s[lane] = fmaf(load_elem(router, p->router_type, wrow + i),
			       load_elem(p->hidden, p->hidden_type, hrow + i), s[lane]);
	}
	for (unsigned o = 16; o >= 1; o /= 2) {
		float n[32];
		for (unsigned l = 0; l < 32; l++)
			n[l] = s[l] + s[l ^ o];
		memcpy(s, n, sizeof(s));
	}
	return s[0];
}

struct cand {
	uint32_t e, votes;
	float margin;
};

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	return fs_ra_better(y->votes, y->margin, y->e, x->votes, x->margin, x->e) ? 1 : -1;
}

int fs_ra_reference(const struct fs_ra_params *p)
{
	if (fs_ra_check(p, NULL, 0) < 0 || !p->out_expert || !p->out_score || !p->out_count)
		return -EINVAL;
	uint32_t E = p->experts, T = p->tokens, M = p->top_m;
	float *logit = malloc(sizeof(float) * E);
	uint32_t *votes = calloc(E, sizeof(uint32_t));
	float *margin = malloc(sizeof(float) * E);
	struct cand *cand = malloc(sizeof(*cand) * (size_t)T * M);
	if (!logit || !votes || !margin || !cand) {
		free(logit), free(votes), free(margin), free(cand);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k < p->horizons; k++) {
		memset(votes, 0, sizeof(uint32_t) * E);
		for (uint32_t t = 0; t < T; t++) {
			for (uint32_t e = 0; e < E; e++)
				logit[e] = dot(p, p->router[k], e, t);
			/* Step 2: top-M by (logit desc, expert asc), one pick at a time,
			 * each the best below the previous one (keys are unique). */
			float top = 0, prev_l = 0;
			uint32_t prev_e = 0;
			for (uint32_t m = 0; m < M; m++) {
				uint32_t best = UINT32_MAX;
				for (uint32_t e = 0; e < E; e++) {
					if (m > 0 && !fs_ra_key_below(logit[e], e, prev_l, prev_e))
						continue;
					if (best == UINT32_MAX ||
					    fs_ra_key_below(logit[best], best, logit[e], e))
						best = e;
				}
				if (best == UINT32_MAX)
					break; /* NaN logits: no order below this */
				if (m == 0)
					top = logit[best];
				prev_l = logit[best];
				prev_e = best;
				/* Step 3: votes and the best margin. */
				float mg = logit[best] - top;
				if (votes[best]++ == 0 || mg > margin[best])
					margin[best] = mg;
			}
		}
		uint32_t n = 0;
		for (uint32_t e = 0; e < E; e++) {
			if (!votes[e])
				continue;
			if (p->resident[k] && fs_ra_bit(p->resident[k], e))
				continue; /* step 4: resident experts need no copy */
			cand[n++] = (struct cand){.e = e, .votes = votes[e], .margin = margin[e]};
		}
		qsort(cand, n, sizeof(*cand), cand_cmp);
		uint32_t out = n < p->max_out ? n : p->max_out;
		for (uint32_t i = 0; i < out; i++) {
			p->out_expert[(size_t)k * p->max_out + i] = cand[i].e;
			p->out_score[(size_t)k * p->max_out + i] = fs_ra_score(cand[i].votes, T,
									       cand[i].margin);
		}
		p->out_count[k] = out;
	}
	free(logit), free(votes), free(margin), free(cand);
	return 0;
}
