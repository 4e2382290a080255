/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_policy.c: records in, and the untiered policy.
 *
 * With tiers (fsr_config.tiers), a record goes to the tiers instead:
 * PREDICT to the predicted tier, a USAGE miss to the static or recency
 * tier, a USAGE hit promotes (fsr_tier_*.c), and take_copies is the copy
 * scheduler (fsr_sched.c).  Without, the first, simple policy below runs
 * as it always did:
 *
 *  - PREDICT: the predicted expert is wanted on the record's card (or, for
 *    FS_CARD_NONE, on the layer's home card: the card that last reported a
 *    use of the layer; with one tier, see fsr.h).  With one tier across
 *    cards (fsr_place.c), on the card that holds it or should hold it
 *    instead.  A record naming a card
 *    that is down acts on a live card that card read, else it is dropped
 *    (fsr_card.c).  Already LOADING/RESIDENT or already wanted there:
 *    a duplicate, counted `dropped` (a RESIDENT one is touched in the LRU).
 *  - USAGE hit: touch the slot.  USAGE miss: the recency tier, the expert
 *    is wanted again on that card (experts that just missed come back
 *    soon); a miss while its copy is in flight is `late`.
 *  - take_copies: wants in FIFO order into FREE slots; with none free,
 *    evict least recently used RESIDENT slots (those loaded or touched in
 *    their client's current window last) and wait for the grace period.
 */
#include "fsr_internal.h"

static void note_window(struct fsr *r, uint32_t client, uint32_t window)
{
	if (client >= r->max_clients)
		return;
	struct fsr_client *cl = &r->client[client];
	if (!cl->window_seen || (int32_t)(window - cl->newest_window) > 0) {
		cl->newest_window = window;
		cl->window_seen = 1;
	}
}

static uint32_t rec_card(const struct fsr *r, const struct fs_rec *rec)
{
	return rec->card < r->cards ? rec->card : r->home[rec->layer];
}

/* Want (layer, expert) on card; is_pred: a prediction, whose duplicates
 * count as dropped (a miss's recency insert is not a prediction). */
static void want(struct fsr *r, uint32_t card, uint32_t client, const struct fs_rec *rec, int is_pred)
{
	struct fsr_card *cd = &r->card[card];
	uint32_t idx = fsr_idx(r, rec->layer, rec->expert);
	uint32_t s = cd->slot_of[idx];
	if (s != FSR_NONE || cd->wanted[idx]) {
		if (s != FSR_NONE && cd->slot[s].state == FSR_RESIDENT) {
			fsr_lru_touch(cd, s);
			fsr_slot_protect(r, &cd->slot[s], client);
		}
		if (is_pred)
			fsr_ctr_add(&cd->ctr[FS_CC_dropped], 1);
		return;
	}
	struct fsr_want w = {
		.idx = idx,
		.window = rec->window,
		.client = client < r->max_clients ? client : FSR_NONE,
	};
	fsr_want_push(r, card, &w);
}

static void count3(struct fsr *r, uint32_t card, uint32_t client, uint32_t layer, int cc, int cl, int ccl)
{
	fsr_ctr_add(&r->card[card].ctr[cc], 1);
	fsr_ctr_add(&fsr_layer_ctr(r, layer)[cl], 1);
	uint64_t *c = fsr_client_ctr(r, client);
	if (c)
		fsr_ctr_add(&c[ccl], 1);
}

/* The layer runs on rec->card now: its home and the cards that serve it
 * follow (fsr_place.c), and with them the reserved sizes.  The client's
 * card is noted for the cards' window clocks. */
static void set_home(struct fsr *r, uint32_t client, const struct fs_rec *rec)
{
	/* A card that is down is nobody's home (fsr_card.c). */
	if (rec->card >= r->cards || !fsr_is_up(r, rec->card))
		return;
	if (client < r->max_clients) {
		r->client[client].card = rec->card;
		r->client[client].on_card = 1;
	}
	fsr_layer_used(r, rec->layer, rec->card);
}

/* A use with tiers: its score goes up; a hit may promote its slot, a miss
 * becomes a copy candidate of the static or recency tier. */
static void usage_tiered(struct fsr *r, uint32_t card, uint32_t client, const struct fs_rec *rec)
{
	struct fsr_card *cd = &r->card[card];
	uint32_t idx = fsr_idx(r, rec->layer, rec->expert);
	uint32_t s = cd->slot_of[idx];
	fsr_score_bump(r, idx);
	if (rec->aux != FS_USE_HIT) {
		fsr_tiers_ghost_miss(r, card, rec->layer, rec->expert);
		fsr_recency_missed(r, card, client, rec);
		return;
	}
	if (s == FSR_NONE || cd->slot[s].state != FSR_RESIDENT)
		return;
	fsr_lru_touch(cd, s);
	fsr_tier_touch(cd, s);
	fsr_slot_protect(r, &cd->slot[s], client);
	if (cd->slot[s].outcome_due) {
		/* Its first hit: counted now, not at its eviction, so a copy
		 * kept resident for long counts as soon as it pays. */
		cd->slot[s].outcome_due = 0;
		fsr_use_outcome(cd, cd->slot[s].load_tier, 1);
	}
	const struct fsr_tier_ops *op = fsr_tier_ops(cd->slot[s].tier);
	if (op->on_use)
		op->on_use(r, card, s);
}

/* Counted on the card the engine ran it on (`from`); acted on where the
 * expert is or goes (`card`, fsr_place.c: the same card without one tier). */
static void usage(struct fsr *r, uint32_t client, const struct fs_rec *rec)
{
	set_home(r, client, rec);
	uint32_t from = rec_card(r, rec);
	uint32_t idx = fsr_idx(r, rec->layer, rec->expert);
	uint32_t card = fsr_place_card(r, from, rec->layer, idx);
	int hit = rec->aux == FS_USE_HIT;
	if (card == FSR_NONE) {
		/* From a card that is down and read no live card: nowhere to act. */
		count3(r, from, client, rec->layer, hit ? FS_CC_hits : FS_CC_misses,
		       hit ? FS_CL_hits : FS_CL_misses, hit ? FS_CCL_hits : FS_CCL_misses);
		fsr_ctr_add(&r->card[from].ctr[FS_CC_dropped], 1);
		return;
	}
	struct fsr_card *cd = &r->card[card];
	uint32_t s = cd->slot_of[idx];
	if (hit) {
		count3(r, from, client, rec->layer, FS_CC_hits, FS_CL_hits, FS_CCL_hits);
		if (r->tiers)
			usage_tiered(r, card, client, rec);
		else if (s != FSR_NONE && cd->slot[s].state == FSR_RESIDENT) {
			fsr_lru_touch(cd, s);
			fsr_slot_protect(r, &cd->slot[s], client);
		}
		return;
	}
	count3(r, from, client, rec->layer, FS_CC_misses, FS_CL_misses, FS_CCL_misses);
	if (s != FSR_NONE && cd->slot[s].state == FSR_LOADING) {
		fsr_ctr_add(&cd->ctr[FS_CC_late], 1);
		fsr_ctr_add(&fsr_layer_ctr(r, rec->layer)[FS_CL_late], 1);
	}
	if (r->tiers)
		usage_tiered(r, card, client, rec);
	else
		want(r, card, client, rec, 0);
}

/* Whether the layer's experts are in the arena (fsr_config.layer_ready). */
static int layer_in(const struct fsr *r, uint32_t layer)
{
	return !r->layer_ready || fs_load_acquire(&r->layer_ready[layer]) == FS_LAYER_READY;
}

/* A prediction or a use of a layer still loading: counted as what it is
 * (a use is a miss: nothing of the layer can be resident), acted on not. */
static void not_in(struct fsr *r, uint32_t client, const struct fs_rec *rec)
{
	uint32_t from = rec_card(r, rec);
	if (rec->type == FS_REC_PREDICT) {
		count3(r, from, client, rec->layer, FS_CC_predicted, FS_CL_predicted, FS_CCL_predicted);
		fsr_ctr_add(&r->card[from].ctr[FS_CC_dropped], 1);
	} else {
		count3(r, from, client, rec->layer, FS_CC_misses, FS_CL_misses, FS_CCL_misses);
	}
	fsr_ctr_add(&r->c_daemon[FS_C_arena_unloaded_recs], 1);
}

void fsr_record(struct fsr *r, uint32_t client, const struct fs_rec *rec, uint64_t now_ns)
{
	if (rec == NULL)
		return;
	/* The daemon validated the record; this check only keeps a daemon bug
	 * from writing out of bounds.  WIN_* records use neither field. */
	if ((rec->type == FS_REC_PREDICT || rec->type == FS_REC_USAGE) &&
	    (rec->layer >= r->layers || rec->expert >= r->experts))
		return;
	note_window(r, client, rec->window);
	if (r->tiers)
		fsr_clock_record(r, client, rec, now_ns);
	if (r->learn)
		fsr_learn_record(r, client, rec);
	if ((rec->type == FS_REC_PREDICT || rec->type == FS_REC_USAGE) && !layer_in(r, rec->layer)) {
		not_in(r, client, rec);
		return;
	}
	switch (rec->type) {
	case FS_REC_PREDICT: {
		/* Wanted where the record says (or, for FS_CARD_NONE, where
		 * the layer runs), unless a card that one reads holds it. */
		uint32_t from = rec_card(r, rec);
		uint32_t card = fsr_holder(r, from, fsr_idx(r, rec->layer, rec->expert));
		if (card == FSR_NONE)
			card = fsr_live_card(r, from, rec->layer);
		count3(r, from, client, rec->layer, FS_CC_predicted, FS_CL_predicted, FS_CCL_predicted);
		if (r->tiers)
			fsr_tiers_predictions_seen(r);
		if (card == FSR_NONE) /* names a card that is down and read no live one */
			fsr_ctr_add(&r->card[from].ctr[FS_CC_dropped], 1);
		else if (r->tiers)
			fsr_predicted_want(r, card, client, rec);
		else
			want(r, card, client, rec, 1);
		break;
	}
	case FS_REC_USAGE:
		usage(r, client, rec);
		if (r->tiers && rec->layer < r->cross_window)
			fsr_predicted_seen(r, client, rec->layer, rec->expert);
		break;
	case FS_REC_WIN_END: {
		uint64_t *c = fsr_client_ctr(r, client);
		if (c)
			fsr_ctr_add(&c[FS_CCL_windows], 1);
		r->wins++;
		if (client < r->max_clients && r->client[client].on_card)
			fsr_card_window_ended(r, r->client[client].card);
		if (r->tiers) {
			/* The decay clock of the use scores counts tokens: a window's
			 * length varies (speculative decoding), a token's work not. */
			uint32_t tokens = client < r->max_clients ? r->client[client].win_tokens : 0;
			r->tick += tokens ? tokens : 1;
			fsr_predicted_recycle(r, client, rec->window);
			if (r->cross_window)
				fsr_predicted_cross(r, client, rec->window);
		}
		break;
	}
	default:
		break;
	}
}

/* Evict up to n RESIDENT slots, least recently used first, passing over
 * the ones protected for their client's current window while a bounded
 * scan finds others.  Returns how many were evicted. */
static uint32_t evict_lru(struct fsr *r, uint32_t card, uint32_t n)
{
	struct fsr_card *cd = &r->card[card];
	uint32_t done = 0, scanned = 0, scan_max = n + FSR_EVICT_SCAN_EXTRA;
	uint32_t s = cd->lru_old;
	while (s != FSR_NONE && done < n && scanned < scan_max) {
		uint32_t next = cd->slot[s].next;
		scanned++;
		if (!fsr_slot_protected(r, &cd->slot[s])) {
			fsr_slot_evict(r, card, s);
			done++;
		}
		s = next;
	}
	while (done < n && cd->lru_old != FSR_NONE) {
		fsr_slot_evict(r, card, cd->lru_old);
		done++;
	}
	return done;
}

void fsr_copy_done(struct fsr *r, uint32_t card, uint32_t slot, uint32_t gen, uint64_t now_ns)
{
	const struct fsr_slot *sl = fsr_slot_landed(r, card, slot, gen);
	if (!sl || !r->tiers)
		return;
	const struct fsr_tier_ops *op = fsr_tier_ops(sl->tier);
	if (op->changed)
		op->changed(&r->card[card], sl->layer); /* landed: it can be the static tier's coldest now */
	fsr_sched_landed(r, card, sl, now_ns);
}

unsigned fsr_take_copies(struct fsr *r, uint32_t card, struct fsr_copy *out, unsigned max, uint64_t now_ns)
{
	if (card >= r->cards || out == NULL || !fsr_is_up(r, card))
		return 0; /* a card that is down is never copied to again */
	/* Each eviction a want makes is that want's client's (fsr_pinned). */
	r->evict_for = FSR_NONE;
	unsigned n = r->tiers ? fsr_sched_take(r, card, out, max, now_ns) : fsr_pool_take(r, card, out, max);
	r->evict_for = FSR_NONE;
	return n;
}

unsigned fsr_pool_take(struct fsr *r, uint32_t card, struct fsr_copy *out, unsigned max)
{
	struct fsr_card *cd = &r->card[card];
	unsigned n = 0;
	struct fsr_want w;
	while (n < max && cd->nloading < r->max_inflight && fsr_want_pop(cd, &w)) {
		r->evict_for = w.client < r->max_clients ? w.client : FSR_NONE;
		if (fsr_want_stale(r, &w) || cd->slot_of[w.idx] != FSR_NONE ||
		    fsr_held_elsewhere(r, card, w.idx)) {
			cd->wanted[w.idx] = 0;
			fsr_ctr_add(&cd->ctr[FS_CC_dropped], 1);
			continue;
		}
		if (cd->nfree == 0) {
			/* Make room for the wants pending (this one included) that
			 * the inflight budget lets through, less the slots already
			 * on their way back; they come free after a publish and
			 * the grace period. */
			uint32_t need = cd->wq_len + 1;
			uint32_t room = r->max_inflight - cd->nloading;
			if (need > room)
				need = room;
			if (need > cd->nretiring)
				evict_lru(r, card, need - cd->nretiring);
			fsr_want_unpop(cd, &w);
			break;
		}
		cd->wanted[w.idx] = 0;
		uint32_t s = fsr_slot_load(r, card, w.idx, w.client, FSR_TIER_POOL);
		const struct fsr_slot *sl = &cd->slot[s];
		out[n++] = (struct fsr_copy){
			.card = card,
			.slot = s,
			.gen = sl->gen,
			.layer = sl->layer,
			.expert = sl->expert,
			.bytes = fsr_bytes(r, w.idx),
			.tier = FSR_TIER_POOL,
			.window = w.window,
			.deadline_ns = UINT64_MAX,
		};
	}
	return n;
}
