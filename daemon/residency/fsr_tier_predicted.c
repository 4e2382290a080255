/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_tier_predicted.c: the predicted tier, slots reserved per layer for
 * router-ahead candidates within a window.
 *
 * A prediction names an expert of a layer some layers ahead of where its
 * engine runs now (horizon 1..15) with a score (the predictor's own, e.g.
 * a probability).  It becomes a copy candidate that is worth copying only
 * before that layer runs in that window: the scheduler drops it once the
 * engine has passed the layer, or when the bus cannot land it in time.
 * A predicted expert that is used moves to the recency tier (it is now an
 * expert that was just needed); one that is not used by the end of the
 * window leaves then (fsr_predicted_recycle): its slot is free again when
 * the next window starts (the grace period ends with the window), so the
 * tier starts every window with its reserved slots ready for that
 * window's predictions instead of waiting a window for each victim.  The discussion found router-ahead and the recency ring catch
 * mostly different misses, hence separate reserved slots.
 */
#include <string.h>

#include "fsr_internal.h"

int fsr_predicted_configured(const struct fsr *r)
{
	return r->cfg_slots[FSR_TIER_PREDICTED] != 0;
}

void fsr_predicted_want(struct fsr *r, uint32_t card, uint32_t client, const struct fs_rec *rec)
{
	struct fsr_card *cd = &r->card[card];
	uint32_t idx = fsr_idx(r, rec->layer, rec->expert);
	uint32_t s = cd->slot_of[idx];
	float score;
	memcpy(&score, &rec->value, sizeof(score));
	if (s != FSR_NONE || fsr_quota(cd, rec->layer, FSR_TIER_PREDICTED) == 0 ||
	    !(score >= r->pred_min_score) || fsr_clock_passed(r, client, rec->layer, rec->window)) {
		/* Already there (a duplicate), no predicted slots here, too
		 * unlikely, or its layer has run: nothing to copy. */
		if (s != FSR_NONE && cd->slot[s].state == FSR_RESIDENT) {
			fsr_lru_touch(cd, s);
			fsr_tier_touch(cd, s);
			fsr_slot_protect(r, &cd->slot[s], client);
		}
		if (s == FSR_NONE)
			fsr_unserved(r, card, rec->layer, rec->expert, FSR_UNS_REFUSED);
		fsr_ctr_add(&cd->ctr[FS_CC_dropped], 1);
		return;
	}
	if (cd->wanted[idx] & FSR_W_CAND)
		fsr_ctr_add(&cd->ctr[FS_CC_dropped], 1); /* a duplicate; it may raise the score */
	struct fsr_cand c = {
		.score = score,
		.window = rec->window,
		.expert = rec->expert,
		.tier = FSR_TIER_PREDICTED,
		.client = client < r->max_clients ? (uint8_t)client : FSR_CAND_NOCLIENT,
	};
	fsr_cand_put(r, card, rec->layer, &c);
}

/* A predicted slot was used: it joins the recency tier, whose least
 * recently used slot takes its place in the predicted tier (oldest there,
 * so the next predicted copy replaces it). */
void fsr_predicted_hit(struct fsr *r, uint32_t card, uint32_t s)
{
	struct fsr_card *cd = &r->card[card];
	uint32_t layer = cd->slot[s].layer;
	uint32_t q = fsr_quota(cd, layer, FSR_TIER_RECENCY);
	if (q == 0) {
		fsr_static_used(r, card, s);
		return;
	}
	if (fsr_tl(cd, layer, FSR_TIER_RECENCY)->n >= q) {
		uint32_t y = fsr_tier_victim(r, card, layer, FSR_TIER_RECENCY);
		if (y == FSR_NONE)
			return;
		fsr_tier_retag(r, card, y, FSR_TIER_PREDICTED, 0);
	}
	fsr_tier_retag(r, card, s, FSR_TIER_RECENCY, 1);
	fsr_static_used(r, card, s);
}

/* Was this predicted slot copied for `window` of `client` or earlier (or
 * for no client)?  An engine that pipelines windows has already predicted
 * for its next window when this one ends: those slots stay. */
static int for_window(const struct fsr_slot *sl, uint32_t client, uint32_t window)
{
	if (sl->prot_client == FSR_NONE)
		return 1;
	return sl->prot_client == client && (int32_t)(sl->prot_window - window) <= 0;
}

/* A client's window ended: the predicted slots copied for it that nobody
 * used leave (see above).  An evicted slot is rewritten only after every
 * engine released the epochs that map it, as always. */
void fsr_predicted_recycle(struct fsr *r, uint32_t client, uint32_t window)
{
	for (uint32_t c = 0; c < r->cards; c++) {
		struct fsr_card *cd = &r->card[c];
		if (cd->ntier[FSR_TIER_PREDICTED] == 0)
			continue;
		for (uint32_t l = 0; l < r->layers; l++) {
			uint32_t s = fsr_tl(cd, l, FSR_TIER_PREDICTED)->old;
			while (s != FSR_NONE) {
				uint32_t next = cd->slot[s].tnext;
				if (cd->slot[s].state == FSR_RESIDENT &&
				    for_window(&cd->slot[s], client, window))
					fsr_slot_evict(r, c, s);
				s = next;
			}
		}
	}
}

/* A full predicted tier takes a prediction only when its victim is worth
 * less: a slot whose window is over (unprotected), or one predicted for a
 * current window with a lower score.  Without this, the candidates of one
 * window would each evict the one before (the tier cycling through them
 * and keeping the last, not the best).  1: go; -1: drop it. */
static int predicted_admit(struct fsr *r, uint32_t card, uint32_t layer, struct fsr_cand *c)
{
	struct fsr_card *cd = &r->card[card];
	if (fsr_tier_has_room(cd, layer, FSR_TIER_PREDICTED))
		return 1;
	uint32_t v = fsr_tier_victim(r, card, layer, FSR_TIER_PREDICTED);
	if (v == FSR_NONE || !fsr_slot_protected(r, &cd->slot[v]))
		return 1;
	return c->score > cd->slot[v].score ? 1 : -1;
}

/* Its size at a layer (predicted_slots): FSR_AUTO a 16th of the share,
 * rounded down, at most the copies the planned bus lands in a layer's time
 * (pred_auto_max, 1..4; fsr_core.c). */
static uint32_t predicted_size(const struct fsr *r, uint32_t share)
{
	uint32_t cfg = r->cfg_slots[FSR_TIER_PREDICTED];
	uint32_t sixteenth = share / 16;
	uint32_t cap = r->pred_auto_max ? r->pred_auto_max : 4;
	return cfg == FSR_AUTO ? (sixteenth < cap ? sixteenth : cap) : cfg;
}

const struct fsr_tier_ops fsr_tier_predicted_ops = {
	.name = "predicted",
	.gauge = FS_CC_tier_predicted,
	.speculative = 1,
	.admit = predicted_admit,
	.on_use = fsr_predicted_hit,
	.size = predicted_size,
};

/*
 * Across the window boundary (cross_window = N): nothing inside a window
 * predicts its first layers in time (router-ahead looks 1-3 layers on from
 * where the engine is), and with a perfect in-window predictor two thirds
 * of what still misses is in layers 0-2 (docs/results/engine.md).  What is
 * known before the next window starts is this window's routing there: a
 * token reuses 0.36-0.38 of the previous token's experts at a layer on the
 * real traces.  So when a client's window ends, each expert it used at
 * layers 0..N-1 becomes a prediction for the same layer of its next
 * window, scored with the share of a window's experts there that the next
 * window used again (measured per client and layer, smoothed).  A resident
 * one is kept from leaving; a missing one is copied as any prediction is,
 * by deadline and within the bus.
 */
void fsr_predicted_seen(struct fsr *r, uint32_t client, uint32_t layer, uint32_t expert)
{
	if (client >= r->max_clients || layer >= FSR_CROSS_MAX)
		return;
	struct fsr_client *cl = &r->client[client];
	uint8_t n = cl->xw_ncur[layer];
	for (uint32_t i = 0; i < n; i++)
		if (cl->xw_cur[layer][i] == expert)
			return;
	if (n < FSR_XW) {
		cl->xw_cur[layer][n] = (uint16_t)expert;
		cl->xw_ncur[layer] = (uint8_t)(n + 1);
	}
}

void fsr_predicted_cross(struct fsr *r, uint32_t client, uint32_t window)
{
	if (client >= r->max_clients)
		return;
	struct fsr_client *cl = &r->client[client];
	for (uint32_t l = 0; l < r->cross_window && l < r->layers; l++) {
		uint32_t n = cl->xw_ncur[l], again = 0;
		for (uint32_t i = 0; i < n; i++)
			for (uint32_t j = 0; j < cl->xw_nprev[l]; j++)
				again += cl->xw_prev[l][j] == cl->xw_cur[l][i];
		if (n > 0 && cl->xw_nprev[l] > 0)
			cl->xw_reuse[l] = 0.9f * cl->xw_reuse[l] + 0.1f * (float)again / (float)n;
		uint32_t card = cl->on_card ? cl->card : r->home[l];
		for (uint32_t i = 0; i < n; i++) {
			uint32_t idx = fsr_idx(r, l, cl->xw_cur[l][i]);
			uint32_t c = fsr_holder(r, card, idx);
			if (c == FSR_NONE)
				c = fsr_live_card(r, card, l);
			if (c == FSR_NONE)
				continue;
			struct fs_rec rec = {
				.type = FS_REC_PREDICT,
				.layer = (uint16_t)l,
				.expert = cl->xw_cur[l][i],
				.card = (uint16_t)c,
				.window = window + 1,
			};
			memcpy(&rec.value, &cl->xw_reuse[l], sizeof(rec.value));
			fsr_predicted_want(r, c, client, &rec);
		}
		memcpy(cl->xw_prev[l], cl->xw_cur[l], n * sizeof(cl->xw_cur[l][0]));
		cl->xw_nprev[l] = (uint8_t)n;
		cl->xw_ncur[l] = 0;
	}
}
