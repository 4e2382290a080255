/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_learn_test.c: the learned predictor (fsr_learn.c) on hand-made
 * routing.  An engine posts only usage records; the core learns what
 * follows what and predicts, and its predictions go through the scheduler
 * like posted ones.
 *
 * The routing: 8 layers x 32 experts, windows of one token, two experts a
 * layer.  Token t uses a(t) = 7t mod 32 and a(t) + 16 at layer 0, and each
 * layer's experts are the previous layer's plus one (mod 32): one layer
 * says exactly what the next uses, the previous token says nothing.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "fs_counters.h"
#include "fsr.h"

#define NL 8u
#define NE 32u

static uint64_t cd_[FS_N_DAEMON], cc_[FS_N_CARD], cl_[NL * FS_N_LAYER], ccl_[4 * FS_N_CLIENT];
static uint64_t table_[NL * NE];

static struct fsr_config lcfg(uint32_t learn)
{
	struct fsr_config c = {.cards = 1, .slots = {64}, .layers = NL, .experts = NE, .max_clients = 4};
	memset(cc_, 0, sizeof(cc_));
	memset(cl_, 0, sizeof(cl_));
	memset(ccl_, 0, sizeof(ccl_));
	c.uniform_bytes = 1000;
	c.counters = (struct fsr_counters){cd_, cc_, cl_, ccl_};
	fsr_config_tiers(&c);
	c.recency_slots = 1;
	c.predicted_slots = 2;
	c.spare_slots = 4;
	c.bus_gbps = 1000.0; /* a copy lands in 1 ns: the bus never limits here */
	c.layer_ns = 100000;
	c.learn = learn;
	return c;
}

static void ok(const struct fsr *r)
{
	int rc = fsr_check(r);
	cr_assert_eq(rc, 0, "fsr_check failed at fsr_check.c:%d", -rc);
}

static void post(struct fsr *r, uint32_t client, uint8_t type, uint8_t aux, uint32_t layer, uint32_t expert,
		 uint32_t window, uint32_t value, uint64_t now)
{
	struct fs_rec x = {.type = type,
			   .aux = aux,
			   .layer = (uint16_t)layer,
			   .expert = (uint16_t)expert,
			   .card = 0,
			   .window = window,
			   .value = value};
	fsr_record(r, client, &x, now);
}

static uint32_t expert_at(uint32_t token, uint32_t layer, uint32_t k)
{
	return (7u * token + 16u * k + layer) % NE;
}

struct drive {
	uint64_t now;
	uint64_t copies_predicted; /* copies the scheduler issued into the predicted tier */
	uint64_t hits_predicted;   /* uses served by a slot copied for a prediction */
	uint32_t win;              /* the window being run (for `seen`) */
	uint32_t seen;             /* copies the test's `want` accepted */
	int (*want)(const struct fsr_copy *cp, uint32_t win);
};

/* What the daemon's pass does after records: copies issued land at once,
 * the table is published, no hold keeps a slot. */
static unsigned one_pass(struct fsr *r, struct drive *d)
{
	struct fsr_copy cp[64];
	unsigned n = fsr_take_copies(r, 0, cp, 64, d->now);
	for (unsigned i = 0; i < n; i++) {
		d->copies_predicted += cp[i].tier == FSR_TIER_PREDICTED;
		d->seen += d->want && d->want(&cp[i], d->win);
		fsr_copy_done(r, 0, cp[i].slot, cp[i].gen, d->now + 1);
	}
	if (fsr_dirty(r)) {
		fsr_fill(r, table_);
		fsr_publish(r);
	}
	uint64_t holds[FS_MAX_HOLDS] = {0};
	fsr_client_holds(r, 0, holds);
	fsr_reclaim(r);
	return n + fsr_learn_flush(r); /* the hot engine's order (fse_pass.c) */
}

/* Passes until one finds nothing to do, as the hot thread runs them. */
static void pass(struct fsr *r, struct drive *d)
{
	for (int i = 0; i < 64 && one_pass(r, d); i++)
		;
}

/* One window (one token) of client 0, layer by layer; a pass after each
 * layer's records, as the hot thread's after a post.  predict: the engine
 * also posts a prediction of its own (a self-predicting client). */
static void window(struct fsr *r, struct drive *d, uint32_t w, int predict)
{
	uint32_t t = w - 1;
	post(r, 0, FS_REC_WIN_BEGIN, 0, 0, 0, w, 1, d->now);
	for (uint32_t l = 0; l < NL; l++) {
		for (uint32_t k = 0; k < 2; k++) {
			uint32_t e = expert_at(t, l, k);
			struct fsr_slot_info si;
			uint32_t s = fsr_lookup(r, 0, l, e);
			int hit = s != FSR_NONE && fsr_slot_info(r, 0, s, &si) == 0 &&
				  si.state == FSR_RESIDENT;
			if (hit && si.tier == FSR_TIER_PREDICTED)
				d->hits_predicted++;
			post(r, 0, FS_REC_USAGE, hit ? FS_USE_HIT : FS_USE_MISS, l, e, w, 0, d->now);
		}
		if (predict && l + 1 < NL) {
			float one = 1.0f;
			uint32_t v;
			memcpy(&v, &one, sizeof(v));
			post(r, 0, FS_REC_PREDICT, FS_PRED_AUX(1, FS_SRC_HOST), l + 1, expert_at(t, l + 1, 0),
			     w, v, d->now);
		}
		pass(r, d);
		d->now += 100000;
	}
	post(r, 0, FS_REC_WIN_END, 0, 0, 0, w, 0, d->now);
	pass(r, d);
}

Test(learn, learns_what_follows_and_its_copies_are_used)
{
	struct fsr_config c = lcfg(FSR_LEARN_AUTO);
	c.learn_min_p = 0.5f; /* only what it has come to be sure of */
	struct fsr *r = fsr_create(&c);
	cr_assert_not_null(r);
	cr_assert_eq(fsr_client_add(r, 0), 0);
	struct drive d = {0};
	for (uint32_t w = 1; w <= 120; w++)
		window(r, &d, w, 0);
	ok(r);
	struct fsr_learn_stats s;
	cr_assert_eq(fsr_learn_stats(r, &s), 0);
	cr_assert_eq(s.on, 1);
	cr_expect_eq(s.records, 120u * NL * 2);
	cr_expect_eq(s.windows, 119u); /* the last one is still open */
	/* One layer on: the two used experts are its best two once learned. */
	cr_expect_gt(s.h[0].targets, 100u);
	cr_expect_gt((double)s.h[0].at_k / (double)s.h[0].used, 0.8, "recall at k %llu / %llu",
		     (unsigned long long)s.h[0].at_k, (unsigned long long)s.h[0].used);
	/* What it posted (three layers ahead first: copied then, resident by
	 * the nearer horizons) was used. */
	uint64_t posted = 0, used = 0;
	for (unsigned h = 0; h < FSR_HORIZONS; h++) {
		posted += s.h[h].posted;
		used += s.h[h].posted_used;
	}
	cr_expect_leq(posted, s.predictions); /* the last targets are not judged yet */
	cr_expect_gt(posted, 100u);
	cr_expect_gt((double)used / (double)posted, 0.9, "posted %llu, used %llu", (unsigned long long)posted,
		     (unsigned long long)used);
	/* Its predictions became copies, and the copies were used. */
	cr_expect_gt(d.copies_predicted, 100u);
	cr_expect_gt(d.hits_predicted, 100u);
	/* Calibrated: what it called likely was used that often. */
	double n = 0, p = 0, hit = 0;
	for (unsigned k = 5; k < FSR_LEARN_REL; k++) {
		n += (double)s.rel_n[k];
		p += s.rel_p[k];
		hit += (double)s.rel_hit[k];
	}
	cr_assert_gt(n, 100.0);
	cr_expect_lt(p / n - hit / n, 0.1, "mean p %.3f, used %.3f", p / n, hit / n);
	cr_expect_lt(hit / n - p / n, 0.1, "mean p %.3f, used %.3f", p / n, hit / n);
	fsr_destroy(r);
}

/* The same routing with the learner off: no prediction, no predicted copy. */
Test(learn, off_predicts_nothing)
{
	struct fsr *r = fsr_create(&(struct fsr_config){0});
	cr_assert_null(r); /* (an empty config is refused: sanity of the harness) */
	struct fsr_config c = lcfg(FSR_LEARN_OFF);
	r = fsr_create(&c);
	cr_assert_not_null(r);
	cr_assert_eq(fsr_client_add(r, 0), 0);
	struct drive d = {0};
	for (uint32_t w = 1; w <= 40; w++)
		window(r, &d, w, 0);
	struct fsr_learn_stats s;
	cr_assert_eq(fsr_learn_stats(r, &s), 0);
	cr_expect_eq(s.on, 0);
	cr_expect_eq(s.predictions, 0u);
	cr_expect_eq(d.copies_predicted, 0u);
	fsr_destroy(r);
}

/* auto: a client that posts predictions of its own gets none from the
 * learner, which still learns from its usage. */
Test(learn, auto_is_silent_for_a_client_that_predicts)
{
	struct fsr_config c = lcfg(FSR_LEARN_AUTO);
	struct fsr *r = fsr_create(&c);
	cr_assert_not_null(r);
	cr_assert_eq(fsr_client_add(r, 0), 0);
	struct drive d = {0};
	for (uint32_t w = 1; w <= 40; w++)
		window(r, &d, w, 1);
	struct fsr_learn_stats s;
	cr_assert_eq(fsr_learn_stats(r, &s), 0);
	cr_expect_eq(s.predictions, 0u);
	cr_expect_gt(s.records, 0u);
	cr_expect_gt(s.windows, 0u);
	fsr_destroy(r);

	/* on: it posts for that client too */
	c = lcfg(FSR_LEARN_ON);
	r = fsr_create(&c);
	cr_assert_not_null(r);
	cr_assert_eq(fsr_client_add(r, 0), 0);
	memset(&d, 0, sizeof(d));
	for (uint32_t w = 1; w <= 40; w++)
		window(r, &d, w, 1);
	cr_assert_eq(fsr_learn_stats(r, &s), 0);
	cr_expect_gt(s.predictions, 0u);
	fsr_destroy(r);
}

/* No predicted tier (predicted_slots 0): the learner posts nothing, so it
 * cannot touch what the other tiers keep. */
Test(learn, no_predicted_tier_no_posting)
{
	struct fsr_config c = lcfg(FSR_LEARN_ON);
	c.predicted_slots = 0;
	struct fsr *r = fsr_create(&c);
	cr_assert_not_null(r);
	cr_assert_eq(fsr_client_add(r, 0), 0);
	struct drive d = {0};
	for (uint32_t w = 1; w <= 40; w++)
		window(r, &d, w, 0);
	struct fsr_learn_stats s;
	cr_assert_eq(fsr_learn_stats(r, &s), 0);
	cr_expect_eq(s.predictions, 0u);
	cr_expect_eq(cc_[FS_CC_predicted], 0u);
	fsr_destroy(r);
}

/* The next window's first layers come from the last layers of this one:
 * with the routing above, layer 0 of token t+1 is not what layer 7 of t
 * says (7(t+1) mod 32 against 7t + 7 + 1), so use a routing where it is:
 * window w uses 9(w-1) + l + 16k at layer l, so layer 0 of w+1 is layer
 * 7's experts plus 2 (every use a miss here: the test is what gets
 * predicted and copied). */
static int next_window_layer0(const struct fsr_copy *cp, uint32_t w)
{
	return cp->tier == FSR_TIER_PREDICTED && cp->layer == 0 && cp->window == w + 1 &&
	       (cp->expert == (9u * w) % NE || cp->expert == (9u * w + 16u) % NE);
}

Test(learn, predicts_the_next_windows_first_layers)
{
	struct fsr_config c = lcfg(FSR_LEARN_ON);
	c.learn_min_p = 0.5f;
	struct fsr *r = fsr_create(&c);
	cr_assert_not_null(r);
	cr_assert_eq(fsr_client_add(r, 0), 0);
	struct drive d = {.want = next_window_layer0};
	for (uint32_t w = 1; w <= 80; w++) {
		d.win = w;
		post(r, 0, FS_REC_WIN_BEGIN, 0, 0, 0, w, 1, d.now);
		for (uint32_t l = 0; l < NL; l++) {
			for (uint32_t k = 0; k < 2; k++)
				post(r, 0, FS_REC_USAGE, FS_USE_MISS, l, (9u * (w - 1) + l + 16u * k) % NE, w,
				     0, d.now);
			pass(r, &d);
			d.now += 100000;
		}
		post(r, 0, FS_REC_WIN_END, 0, 0, 0, w, 0, d.now);
	}
	ok(r);
	cr_expect_gt(d.seen, 20u, "layer 0 of the next window predicted and copied %u times", d.seen);
	fsr_destroy(r);
}

/* A window that uses more than FSR_LEARN_SET experts at a layer (a
 * prefill batch) is not learned from; a client that goes keeps nothing of
 * its windows, the model stays. */
Test(learn, prefill_batches_and_clients_that_go)
{
	struct fsr_config c = lcfg(FSR_LEARN_ON);
	c.layers = 2;
	c.experts = 128;
	c.slots[0] = 64;
	struct fsr *r = fsr_create(&c);
	cr_assert_not_null(r);
	cr_assert_eq(fsr_client_add(r, 0), 0);
	post(r, 0, FS_REC_WIN_BEGIN, 0, 0, 0, 1, 512, 0);
	for (uint32_t l = 0; l < 2; l++)
		for (uint32_t e = 0; e < 100; e++)
			post(r, 0, FS_REC_USAGE, FS_USE_MISS, l, e, 1, 0, 0);
	post(r, 0, FS_REC_USAGE, FS_USE_MISS, 0, 5, 2, 0, 0); /* window 2: window 1 is closed */
	(void)fsr_learn_flush(r);                             /* learns what it can: nothing from window 1 */
	struct fsr_learn_stats s;
	cr_assert_eq(fsr_learn_stats(r, &s), 0);
	cr_expect_eq(s.records, 2u * 64u + 1u, "records %llu", (unsigned long long)s.records);
	cr_expect_eq(s.h[0].targets, 0u);
	ok(r);
	/* The client goes and comes back: its windows are forgotten. */
	fsr_client_remove(r, 0);
	cr_assert_eq(fsr_client_add(r, 0), 0);
	post(r, 0, FS_REC_USAGE, FS_USE_MISS, 0, 1, 1, 0, 0); /* window 1 again: not a straggler now */
	cr_assert_eq(fsr_learn_stats(r, &s), 0);
	cr_expect_eq(s.records, 2u * 64u + 2u);
	ok(r);
	fsr_destroy(r);
}

/* Memory is bounded: a model too big for FSR_LEARN's entries runs no
 * learner (said by fsr_learn_stats), and a bad setting is refused. */
Test(learn, bounded_and_checked)
{
	struct fsr_config c = lcfg(FSR_LEARN_AUTO);
	c.layers = 512;
	c.experts = 4096;
	c.slots[0] = 1024;
	struct fsr *r = fsr_create(&c);
	cr_assert_not_null(r);
	struct fsr_learn_stats s;
	cr_assert_eq(fsr_learn_stats(r, &s), 0);
	cr_expect_eq(s.on, 0);
	fsr_destroy(r);

	c = lcfg(FSR_LEARN_AUTO);
	r = fsr_create(&c);
	cr_assert_not_null(r);
	cr_assert_eq(fsr_learn_stats(r, &s), 0);
	cr_expect_eq(s.on, 1);
	cr_expect_leq(s.row_entries, NE);
	cr_expect_gt(s.bytes, 0u);
	fsr_destroy(r);

	c = lcfg(3);
	cr_expect_null(fsr_create(&c));
	c = lcfg(FSR_LEARN_ON);
	c.learn_decay = 1.5f;
	cr_expect_null(fsr_create(&c));
	c = lcfg(FSR_LEARN_ON);
	c.learn_min_p = -0.1f;
	cr_expect_null(fsr_create(&c));
	cr_expect_eq(fsr_learn_stats(NULL, &s), -EINVAL);
}
