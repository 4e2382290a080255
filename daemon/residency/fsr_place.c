/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_place.c: one expert tier across cards (the rule is stated in fsr.h,
 * "Placement across cards").
 *
 * The reach matrix says which card reads which: bit j of reach[i] is set
 * when an engine on card i can read card j's slots directly (CUDA peer
 * access over NVLink or PCIe P2P; on the host backend every card's pool is
 * host memory, so every card reads every other).  Without any cross-card
 * bit the core behaves as it always did: each card keeps its own tier and
 * a record's card is where its expert goes.
 *
 * With one, every path that could start a copy asks fsr_held_elsewhere()
 * first (the scheduler, the profile's fill, the untiered pool), and every
 * record is routed by fsr_place_card() to the card that holds its expert
 * or should: no card ever loads an expert that a card it reads holds.
 * Cost: a loop over the cards a card reads (at most 16) per record and per
 * copy; the working table (slot_of per card) is the only index, so there
 * is nothing more to keep consistent.
 *
 * A card that goes down (fsr_card.c) leaves every one of these questions:
 * fsr_reaches() masks it, so it is nobody's holder or copy target, and its
 * own records go to a live card it read (fsr_live_card).
 *
 * Which cards keep a layer's reserved sizes (r->serves, fsr_tiers_quotas):
 * with one tier only its home; without, every card that runs it
 * (fsr_layer_used, fsr_card_window_ended).
 */
#include <errno.h>

#include "fsr_internal.h"

void fsr_place_init(struct fsr *r, const uint16_t reach[FS_MAX_CARDS])
{
	uint16_t all = (uint16_t)((1u << r->cards) - 1u);
	r->one_tier = 0;
	for (uint32_t i = 0; i < r->cards; i++) {
		r->reach[i] = (uint16_t)((reach ? reach[i] & all : 0u) | (1u << i));
		if (r->reach[i] != (uint16_t)(1u << i))
			r->one_tier = 1;
	}
}

/* The card `from` reads that holds idx (LOADING or RESIDENT): `from`
 * itself first, else the lowest other; FSR_NONE when none does.  A card
 * that is down holds nothing (fsr_card.c emptied its table) and no card
 * reads it (fsr_reaches). */
uint32_t fsr_holder(const struct fsr *r, uint32_t from, uint32_t idx)
{
	if (r->card[from].slot_of[idx] != FSR_NONE)
		return from;
	if (!r->one_tier)
		return FSR_NONE;
	for (uint32_t c = 0; c < r->cards; c++)
		if (c != from && fsr_reaches(r, from, c) && r->card[c].slot_of[idx] != FSR_NONE)
			return c;
	return FSR_NONE;
}

/* Would a copy of idx into `card` duplicate what `card` can already read? */
int fsr_held_elsewhere(const struct fsr *r, uint32_t card, uint32_t idx)
{
	if (!r->one_tier)
		return 0;
	for (uint32_t c = 0; c < r->cards; c++)
		if (c != card && fsr_reaches(r, card, c) && r->card[c].slot_of[idx] != FSR_NONE)
			return 1;
	return 0;
}

/* A live card for a record from `from` to act on when nothing holds its
 * expert: `from` itself while it is up.  A card that is down (fsr_card.c)
 * hands its records to a live card it read: the layer's home when it read
 * that, else the lowest; FSR_NONE when it read no live card (each card its
 * own tier, or every card down): the caller drops the record and counts it. */
uint32_t fsr_live_card(const struct fsr *r, uint32_t from, uint32_t layer)
{
	if (fsr_is_up(r, from))
		return from;
	if (fsr_reaches(r, from, r->home[layer]))
		return r->home[layer];
	for (uint32_t c = 0; c < r->cards; c++)
		if (fsr_reaches(r, from, c))
			return c;
	return FSR_NONE;
}

/* The card a record from `from` about (layer, idx) acts on: the holder it
 * reads, else the layer's home when `from` reads it, else `from` (a live
 * card it read when `from` is down; FSR_NONE: none). */
uint32_t fsr_place_card(const struct fsr *r, uint32_t from, uint32_t layer, uint32_t idx)
{
	if (!r->one_tier)
		return fsr_live_card(r, from, layer);
	uint32_t h = fsr_holder(r, from, idx);
	if (h != FSR_NONE)
		return h;
	uint32_t home = r->home[layer];
	return fsr_reaches(r, from, home) ? home : fsr_live_card(r, from, layer);
}

/* The cards in the mask serve other layers now: their reserved sizes are
 * worked out again, and a tier above its new size is trimmed before the
 * card copies anything (fsr_sched.c). */
void fsr_serves_changed(struct fsr *r, uint32_t cards)
{
	if (!r->tiers)
		return;
	for (uint32_t c = 0; c < r->cards; c++)
		if ((cards >> c) & 1u) {
			fsr_tiers_quotas(r, c);
			r->card[c].retrim = fsr_is_up(r, c);
		}
}

/* A use of `layer` reported from live `card` (fsr.h, "Placement across
 * cards").  With one tier, the layer has one home and only that card
 * serves it: the home moves once the home card has been silent about the
 * layer for FSR_HOME_IDLE_WINDOWS windows (of any engine).  Without, the
 * card serves the layer from its first use on (the reserved sizes change
 * only then), and the home is the card that reported last (where a record
 * naming no card acts): a change of home alone moves no slot. */
void fsr_layer_used(struct fsr *r, uint32_t layer, uint32_t card)
{
	uint32_t was = r->home[layer], bit = 1u << card;
	if (!r->one_tier) {
		r->serve_seen[card * r->layers + layer] = r->card_wins[card];
		r->home[layer] = (uint16_t)card;
		r->home_seen[layer] = r->wins;
		if (r->serves[layer] & bit)
			return;
		r->serves[layer] = (uint16_t)(r->serves[layer] | bit);
		fsr_serves_changed(r, bit);
		return;
	}
	if (was == card) {
		r->home_seen[layer] = r->wins;
		return;
	}
	if (r->wins - r->home_seen[layer] < FSR_HOME_IDLE_WINDOWS)
		return;
	r->home_seen[layer] = r->wins;
	r->home[layer] = (uint16_t)card;
	r->serves[layer] = (uint16_t)bit;
	fsr_serves_changed(r, bit | 1u << was);
}

/* An engine whose newest use was on `card` ended a window (without one
 * tier): the card's window clock ticks, and a layer the card has not used
 * in its last FSR_HOME_IDLE_WINDOWS whole windows (those after the window
 * of its last use) is no longer served there, unless the card is its home
 * (the last card that used it: every other card serving it is silent
 * too).  The clock counts only the windows of engines on the card, so
 * more engines elsewhere do not make it drop a layer sooner.  O(layers). */
void fsr_card_window_ended(struct fsr *r, uint32_t card)
{
	if (r->one_tier || !fsr_is_up(r, card))
		return;
	uint32_t now = ++r->card_wins[card], bit = 1u << card, dropped = 0;
	const uint32_t *seen = r->serve_seen + (size_t)card * r->layers;
	for (uint32_t l = 0; l < r->layers; l++) {
		if (!(r->serves[l] & bit) || r->home[l] == card || now - seen[l] <= FSR_HOME_IDLE_WINDOWS)
			continue;
		r->serves[l] = (uint16_t)(r->serves[l] & ~bit);
		dropped = bit;
	}
	fsr_serves_changed(r, dropped);
}

uint32_t fsr_lookup_from(const struct fsr *r, uint32_t from, uint32_t layer, uint32_t expert, uint32_t *card)
{
	if (from >= r->cards || layer >= r->layers || expert >= r->experts)
		return FSR_NONE;
	uint32_t idx = fsr_idx(r, layer, expert);
	uint32_t h = fsr_holder(r, from, idx);
	if (h == FSR_NONE)
		return FSR_NONE;
	if (card)
		*card = h;
	return r->card[h].slot_of[idx];
}

int fsr_set_reach(struct fsr *r, const uint16_t reach[FS_MAX_CARDS])
{
	for (uint32_t c = 0; c < r->cards; c++)
		if (r->card[c].nfree != r->card[c].nslots)
			return -EBUSY;
	fsr_place_init(r, reach);
	if (r->one_tier) {
		/* Records before (none, from the daemon) may have let several
		 * cards serve a layer: with one tier only its home does. */
		for (uint32_t l = 0; l < r->layers; l++)
			r->serves[l] = (uint16_t)((1u << r->home[l]) & ~r->down);
		fsr_serves_changed(r, (1u << r->cards) - 1u);
	}
	return 0;
}

uint16_t fsr_reach(const struct fsr *r, uint32_t card)
{
	if (card >= r->cards || !fsr_is_up(r, card))
		return 0;
	return (uint16_t)(r->reach[card] & ~r->down);
}
