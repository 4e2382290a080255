/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_loading_test.c: the core while the arena loads (fsr_config.layer_ready).
 * Predictions and uses of a layer whose ready word is not exactly
 * FS_LAYER_READY (0, 1, all ones: a word the daemon did not write) give no
 * copy and no slot in any epoch, untiered or tiered, and are counted (a use
 * as a miss, arena_unloaded_recs); once the word is set the same records
 * are acted on.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "fs_counters.h"
#include "fs_regions.h"
#include "fsr.h"

#define L 4u
#define E 8u

static uint64_t cd_[FS_N_DAEMON], cc_[FS_N_CARD], cl_[L * FS_N_LAYER], ccl_[4 * FS_N_CLIENT];
static uint32_t ready_[L];

static struct fsr *mk(int tiers, uint32_t recency)
{
	struct fsr_config c = {.cards = 1,
			       .slots = {16},
			       .layers = L,
			       .experts = E,
			       .max_clients = 4,
			       .uniform_bytes = 1000};
	memset(cd_, 0, sizeof(cd_));
	memset(cc_, 0, sizeof(cc_));
	memset(cl_, 0, sizeof(cl_));
	memset(ccl_, 0, sizeof(ccl_));
	c.counters = (struct fsr_counters){cd_, cc_, cl_, ccl_};
	if (tiers) {
		fsr_config_tiers(&c);
		c.bus_gbps = 0;
		c.recency_slots = recency;
	}
	c.layer_ready = ready_;
	fsr_config_defaults(&c);
	struct fsr *r = fsr_create(&c);
	cr_assert_not_null(r);
	cr_assert_eq(fsr_client_add(r, 0), 0);
	return r;
}

static void post(struct fsr *r, uint8_t type, uint8_t aux, uint32_t layer, uint32_t expert, uint32_t window)
{
	struct fs_rec x = {.type = type,
			   .aux = aux,
			   .layer = (uint16_t)layer,
			   .expert = (uint16_t)expert,
			   .card = 0,
			   .window = window};
	if (type == FS_REC_PREDICT) {
		float one = 1.0f;
		memcpy(&x.value, &one, sizeof(one));
	}
	fsr_record(r, 0, &x, (uint64_t)window * 1000000ull);
}

/* A window predicting and missing every expert of every layer, then the
 * copies it gives, landed and published: the layers copied (bit l). */
static unsigned window(struct fsr *r, uint32_t w)
{
	unsigned copied = 0;
	post(r, FS_REC_WIN_BEGIN, 0, 0, 0, w);
	for (uint32_t l = 0; l < L; l++)
		for (uint32_t x = 0; x < E; x++) {
			post(r, FS_REC_PREDICT, FS_PRED_AUX(1, FS_SRC_ROUTER_AHEAD), l, x, w);
			post(r, FS_REC_USAGE, FS_USE_MISS, l, x, w);
		}
	post(r, FS_REC_WIN_END, 0, 0, 0, w);
	struct fsr_copy cp[64];
	uint64_t now = (uint64_t)w * 1000000ull;
	unsigned n;
	while ((n = fsr_take_copies(r, 0, cp, 64, now)) > 0)
		for (unsigned i = 0; i < n; i++) {
			cr_assert_lt(cp[i].layer, L);
			copied |= 1u << cp[i].layer;
			fsr_copy_done(r, 0, cp[i].slot, cp[i].gen, now);
		}
	static uint64_t tbl[L * E];
	fsr_fill(r, tbl);
	fsr_publish(r);
	for (uint32_t l = 0; l < L; l++)
		for (uint32_t x = 0; x < E; x++)
			if (tbl[l * E + x] != FS_ENTRY_NONE)
				cr_assert_eq(ready_[l], FS_LAYER_READY, "layer %u published before it is in",
					     l);
	cr_assert_eq(fsr_check(r), 0);
	return copied;
}

static void run(int tiers, uint32_t recency)
{
	/* Layer 0 in; the others loading, one with a word nobody wrote. */
	ready_[0] = FS_LAYER_READY, ready_[1] = 0, ready_[2] = 1, ready_[3] = UINT32_MAX;
	struct fsr *r = mk(tiers, recency);
	unsigned copied = 0;
	for (uint32_t w = 1; w <= 3; w++)
		copied |= window(r, w);
	cr_expect_eq(copied, 1u, "only layer 0 copied (layers %#x)", copied);
	cr_expect_eq(cd_[FS_C_arena_unloaded_recs], 3u * 3u * E * 2u, "every record of layers 1-3 counted");
	cr_expect_geq(cc_[FS_CC_misses], 3u * 3u * E, "their uses counted as misses");
	/* Layer 2 lands: its experts are copied from the next windows on. */
	ready_[2] = FS_LAYER_READY;
	copied = 0;
	for (uint32_t w = 4; w <= 6; w++)
		copied |= window(r, w);
	cr_expect(copied & (1u << 2), "layer 2 copied once in (layers %#x)", copied);
	cr_expect_eq(copied & ((1u << 1) | (1u << 3)), 0u, "layers 1 and 3 still not (layers %#x)", copied);
	fsr_destroy(r);
}

Test(fsr_loading, untiered)
{
	run(0, 0);
}

Test(fsr_loading, tiered)
{
	run(1, FSR_AUTO); /* the default split */
}
