/* SPDX-License-Identifier: Apache-2.0 */
/* fsr_check.c: internal consistency check, for tests and debugging. */
#include "fsr_internal.h"

#define CHECK(cond)                       \
	do {                              \
		if (!(cond))              \
			return -__LINE__; \
	} while (0)

static int check_card(const struct fsr *r, const struct fsr_card *cd)
{
	uint32_t ns = cd->nslots, n, s, prev;
	uint32_t cnt[4] = {0};

	for (s = 0; s < ns; s++) {
		const struct fsr_slot *sl = &cd->slot[s];
		CHECK(sl->state <= FSR_RETIRING);
		cnt[sl->state]++;
		if (sl->state != FSR_FREE) {
			CHECK(sl->gen != FS_GEN_NONE);
			CHECK(sl->layer < r->layers && sl->expert < r->experts);
		}
		if (sl->state == FSR_LOADING || sl->state == FSR_RESIDENT)
			CHECK(cd->slot_of[fsr_idx(r, sl->layer, sl->expert)] == s);
		if (sl->state == FSR_RETIRING)
			CHECK(sl->retire >= 1 && sl->retire <= r->published + 1);
	}
	CHECK(cnt[FSR_FREE] + cnt[FSR_LOADING] + cnt[FSR_RESIDENT] + cnt[FSR_RETIRING] == ns);
	CHECK(cnt[FSR_FREE] == cd->nfree && cnt[FSR_LOADING] == cd->nloading);
	CHECK(cnt[FSR_RESIDENT] == cd->nresident && cnt[FSR_RETIRING] == cd->nretiring);

	for (n = 0, s = cd->free_head; s != FSR_NONE; s = cd->slot[s].next, n++) {
		CHECK(s < ns && n < ns);
		CHECK(cd->slot[s].state == FSR_FREE);
	}
	CHECK(n == cd->nfree);

	for (n = 0, prev = FSR_NONE, s = cd->lru_old; s != FSR_NONE; prev = s, s = cd->slot[s].next, n++) {
		CHECK(s < ns && n < ns);
		CHECK(cd->slot[s].state == FSR_RESIDENT && cd->slot[s].prev == prev);
	}
	CHECK(n == cd->nresident && cd->lru_new == prev);

	uint64_t last = 0;
	for (n = 0, prev = FSR_NONE, s = cd->ret_head; s != FSR_NONE; prev = s, s = cd->slot[s].next, n++) {
		CHECK(s < ns && n < ns);
		CHECK(cd->slot[s].state == FSR_RETIRING && cd->slot[s].retire >= last);
		last = cd->slot[s].retire;
	}
	CHECK(n == cd->nretiring && cd->ret_tail == prev);

	size_t total = (size_t)r->layers * r->experts, mapped = 0, wanted = 0;
	for (size_t i = 0; i < total; i++) {
		s = cd->slot_of[i];
		if (s != FSR_NONE) {
			CHECK(s < ns);
			CHECK(fsr_idx(r, cd->slot[s].layer, cd->slot[s].expert) == i);
			mapped++;
		}
		CHECK(cd->wanted[i] <= 1);
		wanted += cd->wanted[i];
	}
	CHECK(mapped == (size_t)cd->nloading + cd->nresident);

	CHECK(cd->wq_len <= cd->wq_cap && cd->wq_head < cd->wq_cap);
	CHECK(wanted == cd->wq_len);
	for (n = 0; n < cd->wq_len; n++) {
		uint32_t at = (cd->wq_head + n) % cd->wq_cap;
		CHECK(cd->wq[at].idx < total && cd->wanted[cd->wq[at].idx]);
	}

	CHECK(fs_load_relaxed(&cd->ctr[FS_CC_resident]) == cd->nresident);
	CHECK(fs_load_relaxed(&cd->ctr[FS_CC_loading]) == cd->nloading);
	return 0;
}

int fsr_check(const struct fsr *r)
{
	for (uint32_t c = 0; c < r->cards; c++) {
		int rc = check_card(r, &r->card[c]);
		if (rc)
			return rc;
	}
	for (uint32_t l = 0; l < r->layers; l++)
		CHECK(r->home[l] < r->cards);
	for (uint32_t c = 0; c < r->max_clients; c++) {
		const struct fsr_client *cl = &r->client[c];
		CHECK(cl->holds_seen <= r->published);
		for (unsigned k = 0; k < FS_MAX_HOLDS; k++)
			CHECK(cl->holds[k] <= r->published);
	}
	return 0;
}
