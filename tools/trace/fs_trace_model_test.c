/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the calibrated routing model (fs_trace_model.c): validity of
 * every cell, determinism, rejected fields, and that each source moves the
 * statistic it stands for (so a broken source fails here, not only in
 * fs-replay --calibrate). */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "fs_trace.h"
#include "fs_trace_model.h"

/* Share of a token's experts at a layer that token - lag used there,
 * counting only pairs inside one session. */
static double reuse(const struct fs_trace *t, uint32_t session, uint32_t lag)
{
	uint64_t same = 0, all = 0;
	for (uint32_t tok = lag; tok < t->tokens; tok++) {
		if (session && tok / session != (tok - lag) / session)
			continue;
		for (uint32_t l = 0; l < t->layers; l++) {
			const uint16_t *a = fs_trace_token(t, tok - lag, l), *b = fs_trace_token(t, tok, l);
			for (uint32_t i = 0; i < t->topk; i++)
				for (uint32_t j = 0; j < t->topk; j++)
					same += a[j] == b[i];
			all += t->topk;
		}
	}
	return all ? (double)same / (double)all : 0.0;
}

static struct fs_trace_model small(void)
{
	struct fs_trace_model m;
	fs_trace_model_defaults(&m);
	m.layers = 8;
	m.experts = 64;
	m.topk = 6;
	m.tokens = 600;
	m.session_tokens = 200;
	return m;
}

Test(model, cells_valid_and_deterministic)
{
	struct fs_trace_model m = small();
	struct fs_trace a, b;
	char err[FS_TRACE_ERRLEN];
	cr_assert_eq(fs_trace_model_generate(&a, &m, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fs_trace_model_generate(&b, &m, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(a.tokens, 600);
	cr_assert_eq(a.prefill_tokens, 0);
	size_t n = (size_t)a.tokens * a.layers * a.topk;
	cr_assert_eq(memcmp(a.decode, b.decode, n * sizeof(uint16_t)), 0, "same fields, same trace");
	for (uint32_t tok = 0; tok < a.tokens; tok++)
		for (uint32_t l = 0; l < a.layers; l++) {
			const uint16_t *e = fs_trace_token(&a, tok, l);
			for (uint32_t i = 0; i < a.topk; i++) {
				cr_assert_lt(e[i], 64);
				for (uint32_t j = 0; j < i; j++)
					cr_assert_neq(e[i], e[j], "token %u layer %u repeats expert %u", tok,
						      l, e[i]);
			}
		}
	fs_trace_free(&b);
	m.seed = 2;
	cr_assert_eq(fs_trace_model_generate(&b, &m, err, sizeof(err)), 0);
	cr_assert_neq(memcmp(a.decode, b.decode, n * sizeof(uint16_t)), 0, "another seed, another trace");
	fs_trace_free(&a);
	fs_trace_free(&b);
}

Test(model, topk_equal_to_experts)
{
	struct fs_trace_model m = small();
	m.experts = 6;
	struct fs_trace t;
	char err[FS_TRACE_ERRLEN];
	cr_assert_eq(fs_trace_model_generate(&t, &m, err, sizeof(err)), 0, "%s", err);
	for (uint32_t tok = 0; tok < t.tokens; tok++) {
		unsigned seen = 0;
		const uint16_t *e = fs_trace_token(&t, tok, 3);
		for (uint32_t i = 0; i < 6; i++)
			seen |= 1u << e[i];
		cr_assert_eq(seen, 0x3fu);
	}
	fs_trace_free(&t);
}

Test(model, bad_fields_rejected)
{
	char err[FS_TRACE_ERRLEN];
	struct fs_trace t;
	struct fs_trace_model m = small();
	m.reuse = 0.7;
	m.topic = 0.4; /* shares over 1 */
	cr_assert_eq(fs_trace_model_generate(&t, &m, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "reuse + topic") != NULL, "%s", err);
	m = small();
	m.sigma = NAN;
	cr_assert_eq(fs_trace_model_generate(&t, &m, err, sizeof(err)), -EINVAL);
	m = small();
	m.topk = 65;
	cr_assert_eq(fs_trace_model_generate(&t, &m, err, sizeof(err)), -EINVAL);
	m = small();
	m.topics = 0;
	cr_assert_eq(fs_trace_model_generate(&t, &m, err, sizeof(err)), -EINVAL);
	m = small();
	m.tokens = 0;
	cr_assert_eq(fs_trace_model_generate(&t, &m, err, sizeof(err)), -EINVAL);
	cr_assert_null(t.decode, "a failed call leaves nothing to free");
}

/* Short-term reuse raises lag-1 reuse over lag-8; without it and without
 * topics, lags look alike (only the global popularity is left). */
Test(model, reuse_source_makes_lag_one_reuse)
{
	char err[FS_TRACE_ERRLEN];
	struct fs_trace t;
	struct fs_trace_model m = small();
	m.tokens = 2000;
	m.session_tokens = 0;
	m.reuse = 0.4;
	m.reuse_decay = 0.2; /* nearly all of it at lag 1 */
	m.topic = 0.0;
	cr_assert_eq(fs_trace_model_generate(&t, &m, err, sizeof(err)), 0);
	double r1 = reuse(&t, 0, 1), r8 = reuse(&t, 0, 8);
	fs_trace_free(&t);
	cr_assert_gt(r1, r8 + 0.15, "reuse 0.4: lag 1 %.3f, lag 8 %.3f", r1, r8);
	m.reuse = 0.0;
	cr_assert_eq(fs_trace_model_generate(&t, &m, err, sizeof(err)), 0);
	r1 = reuse(&t, 0, 1);
	r8 = reuse(&t, 0, 8);
	fs_trace_free(&t);
	cr_assert_lt(r1 - r8, 0.03, "no reuse, no topics: lag 1 %.3f, lag 8 %.3f", r1, r8);
}

/* A session boundary resets history and topics: reuse across it falls to
 * the level of the global popularity. */
Test(model, sessions_reset)
{
	char err[FS_TRACE_ERRLEN];
	struct fs_trace t;
	struct fs_trace_model m = small();
	m.tokens = 4000;
	m.session_tokens = 2;
	m.reuse = 0.0;
	m.topic = 0.6;
	m.topic_stay = 1.0;
	m.topic_drift = 0.0;
	m.topic_temper = 0.0; /* topic members uniform: far from the global law */
	cr_assert_eq(fs_trace_model_generate(&t, &m, err, sizeof(err)), 0);
	/* lag 1 inside a 2-token session vs lag 1 across sessions (pairs at odd tokens) */
	uint64_t in = 0, across = 0, n_in = 0, n_across = 0;
	for (uint32_t tok = 1; tok < t.tokens; tok++)
		for (uint32_t l = 0; l < t.layers; l++) {
			const uint16_t *a = fs_trace_token(&t, tok - 1, l), *b = fs_trace_token(&t, tok, l);
			uint64_t s = 0;
			for (uint32_t i = 0; i < t.topk; i++)
				for (uint32_t j = 0; j < t.topk; j++)
					s += a[j] == b[i];
			if (tok % 2) {
				in += s;
				n_in += t.topk;
			} else {
				across += s;
				n_across += t.topk;
			}
		}
	fs_trace_free(&t);
	cr_assert_gt((double)in / n_in, (double)across / n_across + 0.1, "in %.3f across %.3f",
		     (double)in / n_in, (double)across / n_across);
}

Test(model, simple_call_is_the_defaults)
{
	char err[FS_TRACE_ERRLEN];
	struct fs_trace a, b;
	struct fs_trace_model m;
	fs_trace_model_defaults(&m);
	m.layers = 4;
	m.experts = 128;
	m.topk = 8;
	m.tokens = 300;
	m.session_tokens = 100;
	m.seed = 9;
	cr_assert_eq(fs_trace_model_generate(&a, &m, err, sizeof(err)), 0);
	cr_assert_eq(fs_trace_model_simple(&b, 4, 128, 8, 300, 100, 9, err, sizeof(err)), 0);
	cr_assert_eq(memcmp(a.decode, b.decode, (size_t)300 * 4 * 8 * sizeof(uint16_t)), 0);
	fs_trace_free(&a);
	fs_trace_free(&b);
}
