/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_why.c: each miss of a replay in one class (replay_why.h says
 * which and in what order).  Everything is decided at the miss from three
 * records kept as the run goes: what the engine posted for the window
 * (and when), the newest copy of each expert (its slot and generation on
 * each card, when it was issued), and which tier's copy last took a slot
 * that held it.  Whether a copy is still on its way is read from the
 * card's virtual bus: the slot still carries that copy's generation as
 * issued and its ready word does not yet.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fsr.h"
#include "replay_bus.h"
#include "replay_why.h"

/* b_wait .. b_refused: one row per reason of the core, in its order */
#define WHY_B_ORDER(NAME, name, what) _Static_assert(RW_b_##name == RW_b_wait + FSR_UNS_##NAME, #name);
FSR_UNSERVED(WHY_B_ORDER)
#undef WHY_B_ORDER
_Static_assert(RW_b_untold == RW_b_wait + FSR_UNS_N, "b_untold after the core's reasons");
_Static_assert(FSR_TIER_POOL == 0 && RW_c_unfilled == RW_c_by_pool + FSR_NTIERS, "c_by_pool + enum fsr_tier");
_Static_assert(RI_used_pool == RI_copies_pool + FSR_NTIERS && RI_unseen == RI_used_pool + FSR_NTIERS,
	       "copies_pool, used_pool + enum fsr_tier");

#define WHY_ROW(name, cls, what) {#name, cls, what},
static const struct {
	const char *name, *cls, *what;
} why_rows[RW_N] = {REPLAY_WHY(WHY_ROW)};
#undef WHY_ROW
#define HIST_ROW(name, what) {#name, what},
static const struct {
	const char *name, *what;
} hist_rows[RH_N] = {REPLAY_HIST(HIST_ROW)};
#undef HIST_ROW

#define INFO_ROW(name, what) {#name, what},
static const struct {
	const char *name, *what;
} info_rows[RI_N] = {REPLAY_WHY_INFO(INFO_ROW)};
#undef INFO_ROW

const char *replay_info_name(unsigned c)
{
	return c < RI_N ? info_rows[c].name : "?";
}

const char *replay_info_what(unsigned c)
{
	return c < RI_N ? info_rows[c].what : "?";
}

const char *replay_why_name(unsigned c)
{
	return c < RW_N ? why_rows[c].name : "?";
}

const char *replay_why_class(unsigned c)
{
	return c < RW_N ? why_rows[c].cls : "?";
}

const char *replay_why_what(unsigned c)
{
	return c < RW_N ? why_rows[c].what : "?";
}

const char *replay_hist_name(unsigned c)
{
	return c < RH_N ? hist_rows[c].name : "?";
}

const char *replay_hist_what(unsigned c)
{
	return c < RH_N ? hist_rows[c].what : "?";
}

int replay_why_init(struct replay_why *w, uint32_t layers, uint32_t experts, uint32_t clients, uint32_t cards,
		    const struct replay_bus *bus)
{
	memset(w, 0, sizeof(*w));
	if (cards == 0 || cards > FS_MAX_CARDS || clients == 0)
		return -EINVAL;
	w->layers = layers;
	w->experts = experts;
	w->clients = clients;
	w->cards = cards;
	w->bus = bus;
	w->le = (size_t)layers * experts;
	size_t ce = (size_t)clients * w->le;
	w->pred_win = calloc(ce, sizeof(*w->pred_win));
	w->cand_win = calloc(ce, sizeof(*w->cand_win));
	w->pred_t = calloc(ce, sizeof(*w->pred_t));
	w->last_t = calloc(ce, sizeof(*w->last_t));
	w->pred_cover = calloc(ce, 1);
	w->pred_flags = calloc(ce, 1);
	w->issue_t = calloc(w->le, sizeof(*w->issue_t));
	w->evicted_by = calloc(w->le, 1);
	w->copy_tier = calloc(w->le, 1);
	w->copy_used = calloc(w->le, 1);
	w->seen = calloc(w->le, 1);
	w->uns_t = calloc(w->le, sizeof(*w->uns_t));
	w->uns_why = calloc(w->le, 1);
	w->pend = calloc(w->le, sizeof(*w->pend));
	int bad = !w->pred_win || !w->cand_win || !w->pred_t || !w->last_t || !w->pred_cover ||
		  !w->pred_flags || !w->issue_t || !w->evicted_by || !w->copy_tier || !w->copy_used ||
		  !w->seen || !w->uns_t || !w->uns_why || !w->pend;
	for (uint32_t c = 0; c < cards && !bad; c++) {
		w->copy_slot[c] = calloc(w->le, sizeof(uint32_t));
		w->copy_gen[c] = calloc(w->le, sizeof(uint32_t));
		w->slot_idx[c] = calloc(bus[c].nslots ? bus[c].nslots : 1, sizeof(uint32_t));
		bad = !w->copy_slot[c] || !w->copy_gen[c] || !w->slot_idx[c];
	}
	if (bad) {
		replay_why_free(w);
		return -ENOMEM;
	}
	return 0;
}

void replay_why_free(struct replay_why *w)
{
	free(w->pred_win);
	free(w->cand_win);
	free(w->pred_t);
	free(w->last_t);
	free(w->uns_t);
	free(w->uns_why);
	free(w->pend);
	free(w->pred_cover);
	free(w->pred_flags);
	free(w->issue_t);
	free(w->evicted_by);
	free(w->copy_tier);
	free(w->copy_used);
	free(w->seen);
	for (uint32_t c = 0; c < FS_MAX_CARDS; c++) {
		free(w->copy_slot[c]);
		free(w->copy_gen[c]);
		free(w->slot_idx[c]);
	}
	memset(w, 0, sizeof(*w));
}

/* 0: no copy of idx on its way; 1: its bytes are not in; 2: they are in,
 * held back by the landing delay. */
static int on_way(const struct replay_why *w, size_t idx)
{
	int way = 0;
	for (uint32_t c = 0; c < w->cards && way != 1; c++) {
		uint32_t s1 = w->copy_slot[c][idx], g = w->copy_gen[c][idx];
		if (s1 == 0)
			continue;
		const struct replay_bus *b = &w->bus[c];
		uint32_t s = s1 - 1;
		if (s >= b->nslots || b->issued[s] != g || b->ready[s] == g)
			continue; /* the slot holds another copy now, or this one is usable */
		way = b->pend_win[s] != 0 && b->pend_gen[s] == g ? 2 : 1;
	}
	return way;
}

void replay_why_ranked(struct replay_why *w, uint32_t client, uint32_t window, uint32_t layer,
		       uint32_t expert)
{
	if (client < w->clients && layer < w->layers && expert < w->experts)
		w->cand_win[(size_t)client * w->le + (size_t)layer * w->experts + expert] = window;
}

void replay_why_posted(struct replay_why *w, uint32_t client, uint32_t window, uint32_t layer,
		       uint32_t expert, int held)
{
	if (client >= w->clients || layer >= w->layers || expert >= w->experts)
		return;
	size_t idx = (size_t)layer * w->experts + expert, k = (size_t)client * w->le + idx;
	w->last_t[k] = ++w->seq;
	if (w->pred_win[k] != window) {
		w->pred_win[k] = window;
		w->pred_t[k] = w->seq;
		w->pred_cover[k] = 0;
		w->pred_flags[k] = 0;
	}
	if (!held && !(w->pred_flags[k] & 1)) {
		w->pred_flags[k] |= 1;
		w->info[RI_posted]++;
	}
	if (held || on_way(w, idx))
		w->pred_cover[k] = 1;
}

void replay_why_copy(struct replay_why *w, uint32_t card, uint32_t slot, uint32_t gen, uint32_t layer,
		     uint32_t expert, uint32_t tier)
{
	if (card >= w->cards || slot >= w->bus[card].nslots || layer >= w->layers || expert >= w->experts)
		return;
	uint32_t idx = layer * w->experts + expert, old = w->slot_idx[card][slot];
	if (old != 0 && old - 1 != idx && w->copy_slot[card][old - 1] == slot + 1)
		w->evicted_by[old - 1] = (uint8_t)(1 + (tier < FSR_NTIERS ? tier : FSR_TIER_POOL));
	w->slot_idx[card][slot] = idx + 1;
	w->copy_slot[card][idx] = slot + 1;
	w->copy_gen[card][idx] = gen;
	w->issue_t[idx] = ++w->seq;
	w->evicted_by[idx] = 0;
	tier = tier < FSR_NTIERS ? tier : FSR_TIER_POOL;
	w->copy_tier[idx] = (uint8_t)tier;
	w->copy_used[idx] = 0;
	w->info[RI_copies_pool + tier]++;
}

void replay_why_unserved(struct replay_why *w, uint32_t layer, uint32_t expert, unsigned why)
{
	if (w->le == 0 || layer >= w->layers || expert >= w->experts || why >= FSR_UNS_N)
		return; /* before the run's bookkeeping started: no posting yet */
	size_t idx = (size_t)layer * w->experts + expert;
	w->uns_t[idx] = ++w->seq;
	w->uns_why[idx] = (uint8_t)why;
	if (w->pend[idx]) { /* the reason of (b) misses at its use, told after it */
		w->n[RW_b_wait + why] += w->pend[idx];
		w->pend[idx] = 0;
	}
}

void replay_why_seen(struct replay_why *w, uint32_t layer, uint32_t expert)
{
	if (layer < w->layers && expert < w->experts)
		w->seen[(size_t)layer * w->experts + expert] = 1;
}

void replay_why_start(struct replay_why *w)
{
	if (w->copy_used)
		memset(w->copy_used, 1, w->le);
	memset(w->info, 0, sizeof(w->info));
}

void replay_why_finish(struct replay_why *w)
{
	for (size_t i = 0; i < w->le; i++) {
		w->n[RW_b_untold] += w->pend[i];
		w->pend[i] = 0;
	}
}

/* by: 1 + the tier whose copy took the slot, 0: none yet */
void replay_why_use(struct replay_why *w, uint32_t client, uint32_t window, uint32_t layer, uint32_t expert,
		    int hit)
{
	if (client >= w->clients || layer >= w->layers || expert >= w->experts)
		return;
	size_t idx = (size_t)layer * w->experts + expert, k = (size_t)client * w->le + idx;
	if (!hit && !w->seen[idx])
		w->info[RI_unseen]++;
	w->seen[idx] = 1;
	if (hit && w->issue_t[idx] && !w->copy_used[idx]) {
		w->copy_used[idx] = 1;
		w->info[RI_used_pool + w->copy_tier[idx]]++;
	}
	if (w->pred_win[k] == window && w->pred_flags[k] == 1) {
		w->pred_flags[k] |= 2;
		w->info[RI_posted_used]++;
	}
}

static unsigned evicted_class(unsigned by)
{
	return by == 0 ? RW_c_unfilled : RW_c_by_pool + (by - 1);
}

unsigned replay_why_miss(struct replay_why *w, uint32_t client, uint32_t window, uint32_t layer,
			 uint32_t expert, int predicts)
{
	if (client >= w->clients || layer >= w->layers || expert >= w->experts) {
		w->n[RW_a_unranked]++; /* never: the engine looks up the trace's own experts */
		w->hist[RH_cold]++;
		return RW_a_unranked;
	}
	size_t idx = (size_t)layer * w->experts + expert, k = (size_t)client * w->le + idx;
	int way = on_way(w, idx);
	w->hist[way ? RH_in_flight : w->issue_t[idx] ? RH_evicted : RH_cold]++;
	unsigned cls;
	if (!predicts)
		cls = RW_a_nopred;
	else if (w->pred_win[k] != window)
		cls = layer == 0 ? RW_a_layer0 : w->cand_win[k] == window ? RW_a_cut : RW_a_unranked;
	else if (way)
		cls = way == 2 ? RW_d_delayed : RW_d_on_bus;
	else if (w->pred_cover[k] || w->issue_t[idx] > w->pred_t[k])
		cls = evicted_class(w->evicted_by[idx]);
	else if (w->uns_t[idx] > w->last_t[k])
		cls = RW_b_wait + w->uns_why[idx]; /* the latest posting has left */
	else {
		/* still a candidate at its use: the reason comes when it leaves
		 * (its layer ran: the use's own want replaces it, or a purge) */
		w->pend[idx]++;
		return RW_b_untold;
	}
	w->n[cls]++;
	return cls;
}
