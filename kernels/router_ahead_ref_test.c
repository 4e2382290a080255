/* SPDX-License-Identifier: Apache-2.0 */
/* The router-ahead rule, pinned on the CPU reference (no GPU needed). */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "foresight/router_ahead.h"
#include "router_ahead_rule.h"

#define MAXO 16

struct run {
	uint32_t e[FS_RA_MAX_HORIZONS * MAXO];
	float s[FS_RA_MAX_HORIZONS * MAXO];
	uint32_t n[FS_RA_MAX_HORIZONS];
};

static struct fs_ra_params params(const float *hidden, uint32_t T, uint32_t d, const float *router,
				  uint32_t E, uint32_t M, struct run *out)
{
	struct fs_ra_params p = {.hidden = hidden,
				 .hidden_type = FS_RA_F32,
				 .tokens = T,
				 .dim = d,
				 .router = {router},
				 .router_type = FS_RA_F32,
				 .experts = E,
				 .horizons = 1,
				 .top_m = M,
				 .max_out = MAXO,
				 .out_expert = out->e,
				 .out_score = out->s,
				 .out_count = out->n};
	return p;
}

Test(router_ahead_rule, conversions_are_exact)
{
	cr_assert_eq(fs_ra_f16_to_f32(0x3c00), 1.0f);
	cr_assert_eq(fs_ra_f16_to_f32(0xc000), -2.0f);
	cr_assert_eq(fs_ra_f16_to_f32(0x7bff), 65504.0f);
	cr_assert_eq(fs_ra_f16_to_f32(0x0001), ldexpf(1.0f, -24)); /* smallest subnormal */
	cr_assert_eq(fs_ra_f16_to_f32(0x03ff), ldexpf(1023.0f, -24));
	cr_assert(isinf(fs_ra_f16_to_f32(0x7c00)) && fs_ra_f16_to_f32(0x7c00) > 0);
	cr_assert(isnan(fs_ra_f16_to_f32(0x7e00)));
	cr_assert_eq(fs_ra_bf16_to_f32(0x3f80), 1.0f);
	cr_assert_eq(fs_ra_bf16_to_f32(0xc0a0), -5.0f);
	cr_assert_eq(FS_RA_LANE(0), 0u);
	cr_assert_eq(FS_RA_LANE(7), 0u);
	cr_assert_eq(FS_RA_LANE(8), 1u);
	cr_assert_eq(FS_RA_LANE(255), 31u);
	cr_assert_eq(FS_RA_LANE(256), 0u);
}

/* The lane rule is observable: 2^24 + 1.0 rounds back to 2^24.  Lane 0
 * holds elements 0..7 and 256..263 (2^24 and 15 ones: the ones are lost),
 * lanes 1..31 hold 16 ones each, which survive the butterfly: the rule
 * gives 2^24 + 496, where a left-to-right sum would give 2^24. */
Test(router_ahead_rule, dot_product_follows_the_lane_rule)
{
	enum { D = 512 };
	static float h[D], w[4 * D];
	for (int i = 0; i < D; i++)
		h[i] = 1.0f;
	h[0] = 16777216.0f;
	for (int i = 0; i < 4 * D; i++)
		w[i] = 0.0f;
	for (int i = 0; i < D; i++)
		w[i] = 1.0f;        /* expert 0 */
	w[1 * D + 1] = 16777000.0f; /* expert 1: just below the rule's 2^24 + 496 */
	w[2 * D + 1] = 16777216.0f; /* expert 2: just equal to a plain sum, 2^24 */
	struct run r;
	struct fs_ra_params p = params(h, 1, D, w, 4, 3, &r);
	cr_assert_eq(fs_ra_reference(&p), 0);
	cr_assert_eq(r.n[0], 3u);
	/* 2^24 + 496 > 2^24 (expert 2) > 16777000 (expert 1) */
	cr_assert_eq(r.e[0], 0u, "expert 0's logit must be 2^24 + 496 (lane rule), got order %u %u %u",
		     r.e[0], r.e[1], r.e[2]);
	cr_assert_eq(r.e[1], 2u);
	cr_assert_eq(r.e[2], 1u);
	cr_assert_eq(r.s[0], 1.0f); /* the top choice: margin 0 */
	cr_assert_float_eq(r.s[1], expf(16777216.0f - 16777712.0f), 0.0f);
}

/* Tokens vote; margin breaks ties among equal votes; the lower id breaks
 * exact ties; resident experts are skipped; max_out caps. */
Test(router_ahead_rule, ranking_votes_then_margin_then_id)
{
	/* d = 4 one-hot rows: expert e's logit for token t is h[t][e % 4] * gain. */
	enum { E = 6, D = 4, T = 3 };
	float w[E * D] = {0};
	float gain[E] = {1, 1, 1, 1, 0.5f, 1};
	for (int e = 0; e < E; e++)
		w[e * D + (e % 4)] = gain[e];
	/* expert 5 duplicates expert 1's column (equal logits: id decides) */
	float h[T * D] = {
		4, 3, 0, 0, /* token 0: e0 4, e1 3, e5 3, e4 2 */
		4, 0, 2, 0, /* token 1: e0 4, e4 2, e2 2 */
		0, 3, 0, 1, /* token 2: e1 3, e5 3, e3 1 */
	};
	struct run r;
	struct fs_ra_params p = params(h, T, D, w, E, 2, &r);
	cr_assert_eq(fs_ra_reference(&p), 0);
	/* picks: t0 {e0 (0), e1 (-1)}, t1 {e0 (0), e2 (-2)} (e2 and e4 tie at 2:
	 * e2 has the lower id), t2 {e1 (0), e5 (0)} */
	uint32_t want[] = {0, 1, 5, 2}; /* votes 2 (margins 0 and 0: id), then votes 1 (0 > -2) */
	cr_assert_eq(r.n[0], 4u);
	for (unsigned i = 0; i < 4; i++)
		cr_assert_eq(r.e[i], want[i], "rank %u: expert %u, want %u", i, r.e[i], want[i]);
	cr_assert_float_eq(r.s[0], 2.0f / 3.0f, 1e-7f);
	cr_assert_float_eq(r.s[3], 1.0f / 3.0f * expf(-2.0f), 1e-7f);

	/* Resident e0 and e5 are skipped; max_out 1 keeps the best of the rest. */
	uint32_t bits = (1u << 0) | (1u << 5);
	p.resident[0] = &bits;
	p.max_out = 1;
	cr_assert_eq(fs_ra_reference(&p), 0);
	cr_assert_eq(r.n[0], 1u);
	cr_assert_eq(r.e[0], 1u);
}

Test(router_ahead_rule, bad_parameters_are_named)
{
	float h[8] = {0}, w[8] = {0};
	struct run r;
	char msg[128];
	struct fs_ra_params p = params(h, 1, 8, w, 1, 1, &r);
	cr_assert_eq(fs_ra_check(&p, msg, sizeof(msg)), 0);
	p.top_m = 2; /* more than experts */
	cr_assert_eq(fs_ra_check(&p, msg, sizeof(msg)), -EINVAL);
	cr_assert(strstr(msg, "top_m"), "%s", msg);
	p.top_m = 1;
	p.tokens = 65;
	cr_assert_eq(fs_ra_check(&p, msg, sizeof(msg)), -EINVAL);
	cr_assert(strstr(msg, "tokens"), "%s", msg);
	p.tokens = 1;
	p.horizons = 2; /* router[1] is NULL */
	cr_assert_eq(fs_ra_check(&p, msg, sizeof(msg)), -EINVAL);
	cr_assert(strstr(msg, "router"), "%s", msg);
	p.horizons = 1;
	p.out_count = NULL; /* nothing to do */
	cr_assert_eq(fs_ra_check(&p, msg, sizeof(msg)), -EINVAL);
	cr_assert_eq(fs_ra_reference(NULL), -EINVAL);
}

/* NaN in the hidden rows (an engine's bug) must not break the reference. */
Test(router_ahead_rule, nan_inputs_are_survived)
{
	float h[16], w[4 * 16];
	for (int i = 0; i < 16; i++)
		h[i] = NAN;
	for (int i = 0; i < 64; i++)
		w[i] = 1.0f;
	struct run r;
	struct fs_ra_params p = params(h, 1, 16, w, 4, 4, &r);
	cr_assert_eq(fs_ra_reference(&p), 0);
	cr_assert_leq(r.n[0], 4u);
}
