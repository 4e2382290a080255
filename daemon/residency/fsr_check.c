/* SPDX-License-Identifier: Apache-2.0 */
/* fsr_check.c: internal consistency check, for tests and debugging. */
#include "fsr_internal.h"

#define CHECK(cond)                       \
	do {                              \
		if (!(cond))              \
			return -__LINE__; \
	} while (0)

/* Tiers: every LOADING or RESIDENT slot is in the list of its (layer,
 * tier) and nowhere else; lists count right; no tier is above its reserved
 * size (unless a layer moved here and the trim is pending); candidates are
 * distinct, in bounds and marked in `wanted`. */
static int check_tiers(const struct fsr *r, const struct fsr_card *cd)
{
	uint32_t ns = cd->nslots, inlists = 0, per_tier[FSR_NTIERS] = {0}, ncands = 0;
	uint64_t reserved = 0;
	for (uint32_t l = 0; l < r->layers; l++) {
		for (unsigned t = 0; t < FSR_NTIERS; t++) {
			const struct fsr_tlist *tl = &cd->tl[l * FSR_NTIERS + t];
			uint32_t n = 0, prev = FSR_NONE;
			for (uint32_t s = tl->old; s != FSR_NONE; prev = s, s = cd->slot[s].tnext, n++) {
				CHECK(s < ns && n < ns);
				const struct fsr_slot *sl = &cd->slot[s];
				CHECK(sl->state == FSR_LOADING || sl->state == FSR_RESIDENT);
				CHECK(sl->layer == l && sl->tier == t && sl->tprev == prev);
			}
			CHECK(n == tl->n && tl->young == prev);
			CHECK(t != FSR_TIER_POOL || n == 0);
			int wide = fsr_tier_ops(t)->card_wide;
			CHECK(wide || n <= cd->quota[l * FSR_NTIERS + t] || cd->retrim);
			/* per-layer sizes only for per-layer tiers (the pool has none) */
			CHECK((t != FSR_TIER_POOL && !wide) || cd->quota[l * FSR_NTIERS + t] == 0);
			inlists += n;
			per_tier[t] += n;
			reserved += cd->quota[l * FSR_NTIERS + t];
		}
		if (cd->cold_ok[l] && cd->cold[l] != FSR_NONE) {
			const struct fsr_slot *cs = &cd->slot[cd->cold[l]];
			CHECK(cs->state == FSR_RESIDENT && cs->tier == FSR_TIER_STATIC && cs->layer == l);
		}
		const struct fsr_cand *v = fsr_cands(r, cd, l);
		CHECK(cd->ncand[l] <= r->cand_per_layer);
		for (uint32_t i = 0; i < cd->ncand[l]; i++) {
			CHECK(v[i].expert < r->experts);
			CHECK(v[i].tier > FSR_TIER_POOL && v[i].tier < FSR_NTIERS);
			CHECK(cd->wanted[fsr_idx(r, l, v[i].expert)] & FSR_W_CAND);
			for (uint32_t j = 0; j < i; j++)
				CHECK(v[j].expert != v[i].expert);
		}
		ncands += cd->ncand[l];
	}
	uint64_t card_wide = 0;
	for (unsigned t = 0; t < FSR_NTIERS; t++) {
		CHECK(fsr_tier_ops(t)->card_wide || cd->card_quota[t] == 0);
		CHECK(cd->ntier[t] <= cd->card_quota[t] || !fsr_tier_ops(t)->card_wide || cd->retrim);
		card_wide += cd->card_quota[t];
	}
	/* Reserved sizes only for the layers the card serves (fsr_place.c);
	 * a live card that serves no layer keeps its card-wide (static) size,
	 * a card that is down none (fsr_card_check). */
	uint32_t card = (uint32_t)(cd - r->card), nserved = 0;
	for (uint32_t l = 0; l < r->layers; l++) {
		nserved += fsr_serves(r, card, l);
		for (unsigned t = 0; t < FSR_NTIERS; t++)
			CHECK(fsr_serves(r, card, l) || cd->quota[l * FSR_NTIERS + t] == 0);
	}
	CHECK(nserved > 0 || reserved == 0);
	/* Each card its own tier: no slot or candidate of a layer the card no
	 * longer serves once the trim has run (fsr_sched.c). */
	for (uint32_t l = 0; l < r->layers && !r->one_tier && !cd->retrim; l++)
		for (unsigned t = 0; t < FSR_NTIERS && !fsr_serves(r, card, l); t++)
			CHECK(cd->tl[l * FSR_NTIERS + t].n == 0 && cd->ncand[l] == 0);
	CHECK(reserved + card_wide == cd->quota_total && cd->quota_total <= ns);
	CHECK(inlists == cd->nloading + cd->nresident);
	CHECK(ncands == cd->cands);
	for (unsigned t = 0; t < FSR_NTIERS; t++)
		CHECK(per_tier[t] == cd->ntier[t]);
	for (unsigned t = 0; t < FSR_NTIERS; t++)
		CHECK(fsr_tier_ops(t)->gauge < 0 ||
		      fs_load_relaxed(&cd->ctr[fsr_tier_ops(t)->gauge]) == cd->ntier[t]);
	return 0;
}

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

	size_t total = (size_t)r->layers * r->experts, mapped = 0, wanted = 0, cands = 0;
	for (size_t i = 0; i < total; i++) {
		s = cd->slot_of[i];
		if (s != FSR_NONE) {
			CHECK(s < ns);
			CHECK(fsr_idx(r, cd->slot[s].layer, cd->slot[s].expert) == i);
			mapped++;
		}
		CHECK((cd->wanted[i] & ~(FSR_W_QUEUED | FSR_W_CAND)) == 0);
		CHECK(r->tiers || (cd->wanted[i] & FSR_W_CAND) == 0);
		wanted += cd->wanted[i] & FSR_W_QUEUED;
		cands += (cd->wanted[i] & FSR_W_CAND) != 0;
	}
	CHECK(mapped == (size_t)cd->nloading + cd->nresident);

	CHECK(cd->wq_len <= cd->wq_cap && cd->wq_head < cd->wq_cap);
	CHECK(wanted == cd->wq_len);
	for (n = 0; n < cd->wq_len; n++) {
		uint32_t at = (cd->wq_head + n) % cd->wq_cap;
		CHECK(cd->wq[at].idx < total && (cd->wanted[cd->wq[at].idx] & FSR_W_QUEUED));
		CHECK(cd->wq[at].tier < FSR_NTIERS);
	}

	CHECK(fs_load_relaxed(&cd->ctr[FS_CC_resident]) == cd->nresident);
	CHECK(fs_load_relaxed(&cd->ctr[FS_CC_loading]) == cd->nloading);
	if (!r->tiers) {
		for (s = 0; s < ns; s++)
			CHECK(cd->slot[s].state == FSR_FREE || cd->slot[s].state == FSR_RETIRING ||
			      cd->slot[s].tier == FSR_TIER_POOL);
		return 0;
	}
	CHECK(cands == cd->cands);
	return check_tiers(r, cd);
}

/* A card that is down (fsr_card.c): nothing of it in the table, nothing
 * queued for it, no reserved size, its `up` gauge 0; a live card's 1. */
static int check_down(const struct fsr *r, uint32_t c)
{
	const struct fsr_card *cd = &r->card[c];
	if (fsr_is_up(r, c)) {
		CHECK(fs_load_relaxed(&cd->ctr[FS_CC_up]) == 1);
		return 0;
	}
	CHECK(fs_load_relaxed(&cd->ctr[FS_CC_up]) == 0);
	CHECK(cd->nloading == 0 && cd->nresident == 0 && cd->wq_len == 0);
	CHECK(!r->tiers || (cd->cands == 0 && cd->quota_total == 0));
	for (unsigned t = 0; t < FSR_NTIERS; t++)
		CHECK(cd->card_quota[t] == 0);
	CHECK(fsr_reach(r, c) == 0);
	for (uint32_t i = 0; i < r->cards; i++)
		CHECK(!fsr_reaches(r, i, c));
	return 0;
}

int fsr_check(const struct fsr *r)
{
	CHECK((r->down >> r->cards) == 0);
	for (uint32_t c = 0; c < r->cards; c++) {
		int rc = check_card(r, &r->card[c]);
		if (rc == 0)
			rc = check_down(r, c);
		if (rc)
			return rc;
	}
	/* Homes are on live cards (unless every card is down).  The cards that
	 * serve a layer are live and include its home; with one tier, only its
	 * home serves it (fsr_place.c). */
	int any_up = r->down != (1u << r->cards) - 1u;
	for (uint32_t l = 0; l < r->layers; l++) {
		uint32_t home = r->home[l], serves = r->serves[l];
		CHECK(home < r->cards && (!any_up || fsr_is_up(r, home)));
		CHECK((serves >> r->cards) == 0 && (serves & r->down) == 0);
		CHECK(!fsr_is_up(r, home) || fsr_serves(r, home, l));
		CHECK(!r->one_tier || serves == ((1u << home) & ~r->down));
	}
	/* One tier: no two cards that read each other hold the same expert. */
	size_t total = (size_t)r->layers * r->experts;
	for (uint32_t i = 0; i < r->cards; i++) {
		CHECK(r->reach[i] & (1u << i));
		for (uint32_t j = i + 1; j < r->cards; j++) {
			if (!fsr_reaches(r, i, j) || !fsr_reaches(r, j, i))
				continue;
			for (size_t x = 0; x < total; x++)
				CHECK(r->card[i].slot_of[x] == FSR_NONE || r->card[j].slot_of[x] == FSR_NONE);
		}
	}
	for (uint32_t c = 0; c < r->max_clients; c++) {
		const struct fsr_client *cl = &r->client[c];
		CHECK(cl->holds_seen <= r->published);
		for (unsigned k = 0; k < FS_MAX_HOLDS; k++)
			CHECK(cl->holds[k] <= r->published);
	}
	return 0;
}
