/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_sched.c: the copy scheduler, one per card (tiers only).
 *
 * It takes copy candidates (fsr_cands.c) earliest deadline first, the
 * higher score first among equal deadlines.  A candidate's deadline is
 * when its layer next needs its experts (fsr_clock.c): within the window
 * for a prediction, the layer's next run for a recency or static want.
 * The bus is modelled per card as the time the copies handed out will have
 * landed (`bus_free`), at bus_gbps x bus_share_pct: a copy is handed out
 * only when it lands before its deadline given what is queued, so the
 * backend's queue never holds more than what is needed soonest.
 *
 *  - A prediction the bus cannot land in time, or whose layer has run, is
 *    dropped (`too_late`): a late predicted copy is bus time taken from
 *    copies that can still help.
 *  - A recency or static want that cannot make its layer's next run aims
 *    at the run after (it stays useful across windows) until it is older
 *    than want_max_age windows.
 *  - Demand first: predictions are copied only while the recency and
 *    static wants still pending would all fit in the bus time of one
 *    window after them, so a flood of predictions cannot starve the copies
 *    for experts that actually missed.  The share of the link left unused
 *    (bus_share_pct) is for the engine's own demand copies.
 *  - No slot: a want whose tier is at its reserved size evicts the tier's
 *    victim first (fsr_tiers.c); the copy starts when a FREE slot exists
 *    (spare slots, or slots back from the grace period).  Victims are
 *    evicted ahead only for the wants that one window of bus time can
 *    carry, so a backlog the bus will never copy does not empty tiers.
 *  - demand_late (an option, off): a recency or static want that has
 *    its slot is handed out only once it could not wait longer, i.e.
 *    when every pending demand want, back to back after it, would land
 *    less than a layer time before its deadline; until then the bus is
 *    left to predictions that come in the meantime (a want handed out at
 *    its miss takes bus time before the window's predictions for the
 *    next layers exist).  Its slot is evicted ahead as before: held back
 *    before that, the slot came free only after the grace period.
 *  - The profile's background fill goes only when the bus is idle.
 *  - A copy that lands after its deadline counts `landed_late`.  Copies
 *    already handed to the backend are not cancelled: the queue is short
 *    by construction, and a slot is never rewritten while LOADING.
 */
#include <math.h>

#include "fsr_internal.h"

static uint64_t dur_ns(const struct fsr *r, uint64_t bytes)
{
	if (r->bus_bytes_per_ns <= 0.0)
		return 0;
	return (uint64_t)ceil((double)bytes / r->bus_bytes_per_ns);
}

static uint32_t cand_client(const struct fsr_cand *c)
{
	return c->client == FSR_CAND_NOCLIENT ? FSR_NONE : c->client;
}

static int cand_stale(const struct fsr *r, const struct fsr_cand *c)
{
	struct fsr_want w = {.window = c->window, .client = cand_client(c)};
	return fsr_want_stale(r, &w);
}

struct pick {
	uint32_t layer, i;
	uint64_t deadline, land, dur;
};

/* Drop the predictions whose layer has run (they became late) and the
 * wants older than want_max_age windows. */
static void purge(struct fsr *r, uint32_t card)
{
	struct fsr_card *cd = &r->card[card];
	for (uint32_t l = 0; l < r->layers; l++) {
		struct fsr_cand *v = fsr_cands(r, cd, l);
		for (uint32_t i = 0; i < cd->ncand[l];) {
			const struct fsr_cand *c = &v[i];
			int spec = fsr_tier_ops(c->tier)->speculative;
			if (spec && fsr_clock_passed(r, cand_client(c), l, c->window)) {
				fsr_ctr_add(&cd->ctr[FS_CC_too_late], 1);
				fsr_unserved(r, card, l, c->expert, c->why);
				fsr_cand_del(r, card, l, i);
			} else if (!spec && cand_stale(r, c)) {
				fsr_ctr_add(&cd->ctr[FS_CC_dropped], 1);
				fsr_cand_del(r, card, l, i);
			} else {
				i++;
			}
		}
	}
}

/* The untried candidate with the earliest deadline (then the highest
 * score).  0 when none is left. */
static int pick(struct fsr *r, uint32_t card, uint64_t now, int skip_pred, struct pick *out)
{
	struct fsr_card *cd = &r->card[card];
	uint64_t start = cd->bus_free > now ? cd->bus_free : now, per = fsr_clock_period(r);
	int found = 0;
	float best_score = 0.0f;
	for (uint32_t l = 0; l < r->layers; l++) {
		const struct fsr_cand *v = fsr_cands(r, cd, l);
		for (uint32_t i = 0; i < cd->ncand[l]; i++) {
			const struct fsr_cand *c = &v[i];
			int spec = fsr_tier_ops(c->tier)->speculative;
			if (c->mark == r->take_serial || (skip_pred && spec))
				continue;
			uint64_t dur = dur_ns(r, fsr_bytes(r, fsr_idx(r, l, c->expert)));
			uint64_t land = start + dur, d = fsr_clock_deadline(r, cand_client(c), l, now);
			if (!spec && land > d)
				d += (land - d + per - 1) / per * per; /* a later run of the layer */
			if (!found || d < out->deadline || (d == out->deadline && c->score > best_score)) {
				*out = (struct pick){l, i, d, land, dur};
				best_score = c->score;
				found = 1;
			}
		}
	}
	return found;
}

/* Bus time the pending demand (not speculative) wants need. */
static uint64_t cross_pending_ns(const struct fsr *r, const struct fsr_card *cd)
{
	uint64_t ns = 0;
	for (uint32_t l = 0; l < r->layers; l++) {
		const struct fsr_cand *v = fsr_cands(r, cd, l);
		for (uint32_t i = 0; i < cd->ncand[l]; i++)
			if (!fsr_tier_ops(v[i].tier)->speculative)
				ns += dur_ns(r, fsr_bytes(r, fsr_idx(r, l, v[i].expert)));
	}
	return ns;
}

static void issue(struct fsr *r, uint32_t card, const struct pick *p, struct fsr_copy *out)
{
	struct fsr_card *cd = &r->card[card];
	struct fsr_cand c = fsr_cands(r, cd, p->layer)[p->i];
	uint32_t idx = fsr_idx(r, p->layer, c.expert);
	fsr_cand_del(r, card, p->layer, p->i);
	uint32_t s = fsr_slot_load(r, card, idx, cand_client(&c), c.tier);
	cd->slot[s].deadline = p->deadline;
	cd->slot[s].score = fsr_tier_ops(c.tier)->speculative ? c.score : 0.0f;
	cd->slot[s].outcome_due = (uint8_t)r->use_measure; /* the use rates' measure: used or not, once */
	/* A prediction for a later window (the learner's for the next
	 * window's first layers, an engine that pipelines) is that window's:
	 * it must not leave with this one's unused predictions. */
	if (fsr_tier_ops(c.tier)->speculative && cd->slot[s].prot_client != FSR_NONE &&
	    (int32_t)(c.window - cd->slot[s].prot_window) > 0)
		cd->slot[s].prot_window = c.window;
	cd->bus_free = p->land;
	if (!fsr_tier_ops(c.tier)->speculative)
		cd->dem_bytes += fsr_bytes(r, idx);
	*out = (struct fsr_copy){
		.card = card,
		.slot = s,
		.gen = cd->slot[s].gen,
		.layer = p->layer,
		.expert = c.expert,
		.bytes = fsr_bytes(r, idx),
		.tier = c.tier,
		.window = c.window,
		.deadline_ns = p->deadline,
	};
}

/* Candidates headed for the same reserved size (the layer's; the card's
 * for a card-wide tier) that this call already set a slot aside for. */
static uint32_t waiting_for(const struct fsr *r, const struct fsr_card *cd, uint32_t layer, unsigned tier)
{
	int wide = fsr_tier_ops(tier)->card_wide;
	uint32_t from = wide ? 0 : layer, to = wide ? r->layers : layer + 1, n = 0;
	for (uint32_t l = from; l < to; l++) {
		const struct fsr_cand *v = fsr_cands(r, cd, l);
		for (uint32_t i = 0; i < cd->ncand[l]; i++)
			n += v[i].mark == r->take_serial && v[i].tier == tier;
	}
	return n;
}

/* May a copy for (layer, tier) take a FREE slot now?  FREE and RETIRING
 * slots are the spare ones plus every tier's shortfall below its reserved
 * size, so a tier below its size may take one (it is its own), and a tier
 * at its size (it evicts its victim first) only one that no shortfall
 * claims: a spare one.  Without this, the copies of the layers that run
 * first in a window would take every slot the grace period gives back, and
 * the later layers' copies would wait until they went stale. */
static int free_slot(const struct fsr_card *cd, uint32_t layer, unsigned tier)
{
	if (cd->nfree == 0)
		return 0;
	if (fsr_tier_has_room(cd, layer, tier))
		return 1;
	uint32_t held = cd->nloading + cd->nresident;
	uint32_t shortfall = cd->quota_total > held ? cd->quota_total - held : 0;
	return cd->nfree > shortfall;
}

/* Reserved sizes shrank (a layer moved here): evict what is above them.
 * Without one tier, a card's slots of a layer it no longer serves are of
 * no use to anyone (no card reads them, no engine on it runs the layer):
 * they go too, static ones included, whose scores the cards still running
 * the layer keep high. */
static void trim(struct fsr *r, uint32_t card)
{
	struct fsr_card *cd = &r->card[card];
	int left = 0;
	for (uint32_t l = 0; l < r->layers && !r->one_tier; l++) {
		if (fsr_serves(r, card, l))
			continue;
		while (cd->ncand[l] > 0) {
			fsr_cand_del(r, card, l, cd->ncand[l] - 1u);
			fsr_ctr_add(&cd->ctr[FS_CC_dropped], 1);
		}
		/* Per-layer tiers lose the layer's slots below with their
		 * reserved sizes (0 here); card-wide ones lose them now. */
		for (unsigned t = 1; t < FSR_NTIERS; t++) {
			if (!fsr_tier_ops(t)->card_wide)
				continue;
			uint32_t s = fsr_tl(cd, l, t)->old;
			while (s != FSR_NONE) {
				uint32_t next = cd->slot[s].tnext;
				if (cd->slot[s].state == FSR_RESIDENT)
					fsr_slot_evict(r, card, s);
				else
					left = 1; /* still loading: next time */
				s = next;
			}
		}
	}
	for (uint32_t l = 0; l < r->layers; l++)
		for (unsigned t = 1; t < FSR_NTIERS; t++)
			while (!fsr_tier_ops(t)->card_wide && fsr_used(cd, l, t) > fsr_quota(cd, l, t)) {
				uint32_t v = fsr_tier_victim(r, card, l, t);
				if (v == FSR_NONE) {
					left = 1; /* still loading: next time */
					break;
				}
				fsr_slot_evict(r, card, v);
			}
	for (unsigned t = 1; t < FSR_NTIERS; t++)
		while (fsr_tier_ops(t)->card_wide && cd->ntier[t] > cd->card_quota[t]) {
			uint32_t v = fsr_tier_victim(r, card, 0, t);
			if (v == FSR_NONE) {
				left = 1;
				break;
			}
			fsr_slot_evict(r, card, v);
		}
	cd->retrim = left;
}

/* The profile's fill, while the bus has nothing more urgent. */
static unsigned background(struct fsr *r, uint32_t card, struct fsr_copy *out, unsigned max, uint64_t now)
{
	struct fsr_card *cd = &r->card[card];
	unsigned n = 0;
	struct fsr_want w;
	while (n < max && cd->nloading < r->max_inflight && cd->nfree > 0 &&
	       (r->bus_bytes_per_ns <= 0.0 || cd->bus_free <= now) && fsr_want_pop(cd, &w)) {
		uint32_t layer = w.idx / r->experts;
		cd->wanted[w.idx] &= (uint8_t)~FSR_W_QUEUED;
		if (cd->slot_of[w.idx] != FSR_NONE || fsr_held_elsewhere(r, card, w.idx) ||
		    !fsr_tier_has_room(cd, layer, w.tier) || (!r->one_tier && !fsr_serves(r, card, layer))) {
			fsr_ctr_add(&cd->ctr[FS_CC_dropped], 1);
			continue;
		}
		uint32_t s = fsr_slot_load(r, card, w.idx, FSR_NONE, w.tier);
		uint64_t bytes = fsr_bytes(r, w.idx), start = cd->bus_free > now ? cd->bus_free : now;
		cd->slot[s].deadline = UINT64_MAX;
		cd->bus_free = start + dur_ns(r, bytes);
		out[n++] = (struct fsr_copy){
			.card = card,
			.slot = s,
			.gen = cd->slot[s].gen,
			.layer = layer,
			.expert = w.idx % r->experts,
			.bytes = bytes,
			.tier = w.tier,
			.window = w.window,
			.deadline_ns = UINT64_MAX,
		};
	}
	return n;
}

unsigned fsr_sched_take(struct fsr *r, uint32_t card, struct fsr_copy *out, unsigned max, uint64_t now)
{
	struct fsr_card *cd = &r->card[card];
	if (r->pred_adapt)
		fsr_tiers_pred_adapt(r, card); /* may set retrim */
	if (cd->retrim)
		trim(r, card);
	r->take_serial++;
	purge(r, card);
	if (r->pred_value)
		fsr_sched_value(r, card, now);
	unsigned n = 0;
	int skip_pred = 0, have_cross = 0;
	uint64_t cross = 0, reserved = 0, per = fsr_clock_period(r);
	struct pick p;
	while (n < max && cd->nloading < r->max_inflight && pick(r, card, now, skip_pred, &p)) {
		struct fsr_cand *c = &fsr_cands(r, cd, p.layer)[p.i];
		uint32_t cidx = fsr_idx(r, p.layer, c->expert);
		r->evict_for = cand_client(c) < r->max_clients ? cand_client(c) : FSR_NONE;
		if (cd->slot_of[cidx] != FSR_NONE || fsr_held_elsewhere(r, card, cidx)) {
			/* Copied meanwhile (the profile's fill), or now on a card
			 * this one reads (fsr_place.c): nothing to do. */
			fsr_cand_del(r, card, p.layer, p.i);
			continue;
		}
		const struct fsr_tier_ops *op = fsr_tier_ops(c->tier);
		if (op->speculative) {
			if (p.land > p.deadline) {
				fsr_ctr_add(&cd->ctr[FS_CC_too_late], 1);
				fsr_unserved(r, card, p.layer, c->expert, FSR_UNS_TOO_LATE);
				fsr_cand_del(r, card, p.layer, p.i);
				continue;
			}
			if (!have_cross) {
				cross = cross_pending_ns(r, cd);
				have_cross = 1;
			}
			if (p.land + cross > now + per) {
				c->why = FSR_UNS_WAIT_DEMAND;
				skip_pred = 1; /* demand first */
				continue;
			}
			int a = op->admit ? op->admit(r, card, p.layer, c) : 1;
			if (a < 0) {
				fsr_ctr_add(&cd->ctr[FS_CC_dropped], 1);
				fsr_unserved(r, card, p.layer, c->expert, FSR_UNS_ADMIT);
				fsr_cand_del(r, card, p.layer, p.i);
			}
			if (a <= 0)
				continue;
			if (!free_slot(cd, p.layer, c->tier)) {
				/* Its victim leaves now; the slot is this tier's
				 * once the grace period gives it back. */
				(void)fsr_tier_room(r, card, p.layer, c->tier, 1);
				c->mark = r->take_serial;
				c->why = FSR_UNS_WAIT_SLOT;
				continue;
			}
			if (!fsr_tier_room(r, card, p.layer, c->tier, 1)) {
				c->mark = r->take_serial; /* no slot in time: it expires */
				c->why = FSR_UNS_WAIT_SLOT;
				continue;
			}
			issue(r, card, &p, &out[n++]);
			continue;
		}
		if (op->admit) {
			int st = op->admit(r, card, p.layer, c);
			if (st < 0) {
				fsr_ctr_add(&cd->ctr[FS_CC_dropped], 1);
				fsr_cand_del(r, card, p.layer, p.i);
			}
			if (st <= 0)
				continue;
		}
		if (!free_slot(cd, p.layer, c->tier)) {
			/* Evict ahead for what one window of bus time can copy:
			 * the slot comes back after the grace period and is this
			 * tier's to take (free_slot). */
			uint32_t waiting = waiting_for(r, cd, p.layer, c->tier);
			c->mark = r->take_serial;
			if (reserved + p.dur <= per && fsr_tier_room(r, card, p.layer, c->tier, waiting + 1))
				reserved += p.dur;
			continue;
		}
		if (r->demand_late && r->bus_bytes_per_ns > 0.0) {
			/* demand_late: with its slot ready (evicted ahead
			 * above: held back before that, the grace period made
			 * it late), it waits while every pending demand copy,
			 * back to back after it, would still land a layer time
			 * before its deadline (the layer's next run).  Only while
			 * its engine keeps its pace: a paused engine's deadlines
			 * move with the clock, and a copy held for one would
			 * never go. */
			if (!have_cross) {
				cross = cross_pending_ns(r, cd);
				have_cross = 1;
			}
			if (p.deadline > p.land + cross + r->layer_ns &&
			    fsr_clock_on_pace(r, cand_client(c), now)) {
				c->mark = r->take_serial;
				continue;
			}
		}
		if (!fsr_tier_room(r, card, p.layer, c->tier, 1)) {
			c->mark = r->take_serial;
			continue;
		}
		issue(r, card, &p, &out[n++]);
	}
	if (r->bus_bytes_per_ns > 0.0 && now >= cd->dem_t0 + per) {
		double u = (double)cd->dem_bytes / (r->bus_bytes_per_ns * (double)(now - cd->dem_t0));
		cd->dem_util = 0.5f * cd->dem_util + 0.5f * (float)u;
		cd->dem_bytes = 0;
		cd->dem_t0 = now;
		cd->bus_tight = cd->dem_util > FSR_TIGHT_UTIL;
	}
	return n + background(r, card, out + n, max - n, now);
}

void fsr_sched_landed(struct fsr *r, uint32_t card, const struct fsr_slot *sl, uint64_t now)
{
	struct fsr_card *cd = &r->card[card];
	if (sl->deadline != UINT64_MAX && now > sl->deadline) {
		fsr_ctr_add(&cd->ctr[FS_CC_landed_late], 1);
		fsr_ctr_add(&fsr_layer_ctr(r, sl->layer)[FS_CL_landed_late], 1);
	}
	/* The bus ran faster than planned (bus_share_pct): catch up. */
	if (cd->nloading == 0 && cd->bus_free > now)
		cd->bus_free = now;
}
