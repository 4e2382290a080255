/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_rec_test.c: the one record validator (proto/fs_rec.h) against
 * references written from the format's words (proto/README.md), not from
 * the validator: a score is valid when it is finite and >= 0 (libm's
 * isfinite), a field fits when it is below the model's bound.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fs_rec.h"

static uint32_t bits_of(float f)
{
	uint32_t b;
	memcpy(&b, &f, sizeof(b));
	return b;
}

static float float_of(uint32_t b)
{
	float f;
	memcpy(&f, &b, sizeof(f));
	return f;
}

static int score_reference(uint32_t b)
{
	float f = float_of(b);
	return isfinite(f) && f >= 0.0f;
}

static struct fs_rec predict(uint16_t layer, uint16_t expert, uint16_t card, float score)
{
	struct fs_rec r = {.type = FS_REC_PREDICT,
			   .aux = FS_PRED_AUX(1, FS_SRC_HOST),
			   .layer = layer,
			   .expert = expert,
			   .card = card,
			   .window = 1};
	r.value = bits_of(score);
	return r;
}

/* The client used to accept +Inf (its test was !(score >= 0)) where the
 * daemon refused it: the two now ask the same function. */
Test(rec, score_specials)
{
	const float no[] = {INFINITY, -INFINITY, NAN, -NAN, -1.0f, -FLT_MIN, -FLT_MAX, -FLT_TRUE_MIN};
	const float yes[] = {0.0f, -0.0f, FLT_TRUE_MIN, FLT_MIN, 1.0f, 0.5f, FLT_MAX};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		cr_expect(!fs_rec_score_ok(bits_of(no[i])), "score %g accepted", (double)no[i]);
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		cr_expect(fs_rec_score_ok(bits_of(yes[i])), "score %g refused", (double)yes[i]);
	/* Every NaN payload, both signs. */
	for (uint32_t m = 1; m < 0x800000u; m += 4099u) {
		cr_expect(!fs_rec_score_ok(0x7f800000u | m));
		cr_expect(!fs_rec_score_ok(0xff800000u | m));
	}
}

/* Four million bit patterns spread over the whole space, each judged as
 * libm judges it. */
Test(rec, score_every_region)
{
	uint64_t disagree = 0;
	for (uint64_t b = 0; b <= 0xffffffffull; b += 1021u)
		disagree += fs_rec_score_ok((uint32_t)b) != score_reference((uint32_t)b);
	cr_assert_eq(disagree, 0u);
}

Test(rec, model_bounds)
{
	struct fs_rec_model m = {.layers = 4, .experts = 8, .cards = 2};
	struct fs_rec r = predict(3, 7, 1, 1.0f);
	cr_expect(fs_rec_check(&r, &m));
	r = predict(4, 0, 0, 1.0f);
	cr_expect(!fs_rec_check(&r, &m), "layer == layers accepted");
	r = predict(0, 8, 0, 1.0f);
	cr_expect(!fs_rec_check(&r, &m), "expert == experts accepted");
	r = predict(0, 0, 2, 1.0f);
	cr_expect(!fs_rec_check(&r, &m), "card == cards accepted");
	r = predict(0, 0, FS_CARD_NONE, 1.0f);
	cr_expect(fs_rec_check(&r, &m), "any card refused");
	r = predict(0, 0, 0, INFINITY);
	cr_expect(!fs_rec_check(&r, &m), "+Inf accepted");
	/* A usage's value is not a score: any bits. */
	struct fs_rec u = {.type = FS_REC_USAGE, .aux = FS_USE_MISS, .layer = 3, .expert = 7, .card = 1};
	u.value = bits_of(NAN);
	cr_expect(fs_rec_check(&u, &m));
	u.layer = 4;
	cr_expect(!fs_rec_check(&u, &m));
	/* Window records carry no layer, expert or card to bound. */
	struct fs_rec w = {
		.type = FS_REC_WIN_BEGIN, .layer = 0xffff, .expert = 0xffff, .card = 7, .value = 10};
	cr_expect(fs_rec_check(&w, &m));
	w.type = FS_REC_WIN_END;
	cr_expect(fs_rec_check(&w, &m));
	w.aux = 1;
	cr_expect(!fs_rec_check(&w, &m), "a window record with aux accepted");
}

/* Structure first: a record of no known type fits no model. */
Test(rec, structure_before_bounds)
{
	struct fs_rec_model m = {.layers = 100, .experts = 100, .cards = 8};
	for (unsigned t = 0; t < 256; t++) {
		struct fs_rec r = {.type = (uint8_t)t, .aux = 0, .layer = 1, .expert = 1, .card = 0};
		if (t == FS_REC_PREDICT)
			r.aux = FS_PRED_AUX(1, 0);
		int known = t >= FS_REC_PREDICT && t <= FS_REC_TYPE_MAX;
		cr_expect_eq(!!fs_rec_check(&r, &m), known, "type %u", t);
	}
	struct fs_rec p = predict(1, 1, 0, 1.0f);
	p.aux = FS_PRED_AUX(0, 0); /* horizon 0 */
	cr_expect(!fs_rec_check(&p, &m));
	p.aux = FS_PRED_AUX(1, FS_SRC_MAX + 1);
	cr_expect(!fs_rec_check(&p, &m));
}
