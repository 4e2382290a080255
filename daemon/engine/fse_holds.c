/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fse_holds.c: the engines' holds, read after every publish, and what each
 * user may keep from reuse with them (issue 33).  Everything here runs on
 * the engine's thread.
 *
 * Checked when read.  A hold word protects the slots of its epoch's table
 * only when the engine can have acquired that epoch: an acquire stores the
 * epoch that is current and re-checks `current` after a full fence, so the
 * first read that sees a new value finds it current, or current when the
 * holds were last read (an acquire that overlapped the publish since), and
 * in a buffer.  A word that takes any other value (an epoch superseded
 * before it was written, one in no buffer, the future, one from before the
 * client attached) is refused at once: read as 0 for as long as the word
 * keeps that value, counted (bad_holds, the client's holds_refused) and
 * written into the client's region with why (fs_hold_refusal), so its
 * engine can tell.  Before, a word naming an epoch in no buffer counted
 * once it was published, and was then honoured for the whole hold timeout
 * (10 s): the honest engine beside it dropped to 10.5 % of hits.
 *
 * A budget per user.  A hold pins the RETIRING slots of the tables its
 * client can read (fsr_clients.c: its holds and its reach).  The slots that
 * the holds of one user (uid: not a process, not a name) pin on a card and
 * that were evicted for another user's wants (fsr_slot.evict_for) count
 * against that user's budget there: pin_share_pct % of its share of the
 * card's slots, the share being the slots over the users attached.  A
 * slot evicted for the user's own want is its own to wait for and costs
 * no one else.  Past the budget, the client of that user holding the
 * oldest epoch is revoked at once, once that epoch has been superseded
 * (pinning) longer than pin_grace_ms (FS_DETACH_OVER_BUDGET; the loop then
 * bars the user, fsd_clients.c), and again until the user is back under
 * it.  The grace is for honest engines on a loaded host: a fast engine
 * whose windows took 25-100 ms beside five slow ones (2 cores) pinned 73 of
 * 128 slots that they had evicted, over its share of 64, and was revoked
 * and barred without it; and the slow ones, their windows stretched past
 * 1 s there, were revoked after a grace of 1 s.  So the grace is the longer
 * of pin_grace_ms and four times how long the holder's own holds last
 * (hold_timed), within the hold timeout.  An honest engine releases its
 * hold within a window; one that holds an epoch and never lets go has no
 * such figure and is gone pin_grace_ms after its pins pass the budget, far
 * sooner than the hold timeout.
 */
#include <string.h>

#include "fse_internal.h"

int fse_epoch_buf_of(const struct fse *e, uint64_t ep)
{
	for (uint32_t b = 0; b < e->cfg.epoch_bufs; b++)
		if (e->buf_epoch[b] == ep)
			return (int)b;
	return -1;
}

uint64_t fse_hold_superseded(const struct fse *e, uint64_t ep)
{
	int b = ep ? fse_epoch_buf_of(e, ep) : -1;
	return b < 0 || (uint32_t)b == e->cur_buf ? 0 : e->buf_superseded_ns[b];
}

static const char *refusal_name(uint32_t why)
{
	switch (why) {
	case FS_HOLD_NO_BUFFER:
		return "no epoch buffer holds it";
	case FS_HOLD_NOT_CURRENT:
		return "it was superseded before the hold named it: never acquired";
	case FS_HOLD_BEFORE_ATTACH:
		return "it was published before the client attached";
	default:
		return "refused";
	}
}

/* Why hold word value h (new to this word) cannot be a hold, or 0. */
static uint32_t hold_refusal(const struct fse *e, const struct fse_client *c, uint64_t h, uint64_t cur)
{
	if (h > cur || fse_epoch_buf_of(e, h) < 0)
		return FS_HOLD_NO_BUFFER;
	if (h < c->first_epoch)
		return FS_HOLD_BEFORE_ATTACH;
	if (h < e->hold_floor)
		return FS_HOLD_NOT_CURRENT;
	return 0;
}

/* The value a hold word counts as: h, or 0 for a refused one. */
static uint64_t hold_check(struct fse *e, struct fse_client *c, unsigned k, uint64_t h, uint64_t cur)
{
	if (h == 0) {
		c->hold_bad[k] = 0;
		return 0;
	}
	if (h == c->hold_seen[k]) /* accepted before, and its buffer is kept while held */
		return h;
	if (h == c->hold_bad[k]) /* refused before: refused while the word keeps it */
		return 0;
	uint32_t why = hold_refusal(e, c, h, cur);
	if (!why) {
		c->hold_bad[k] = 0;
		return h;
	}
	c->hold_bad[k] = h;
	uint32_t row = (uint32_t)(c - e->clients);
	fse_count(&e->cfg.ctr.daemon[FS_C_bad_holds], 1);
	fse_count(&fse_client_ctr(e, row)[FS_CCL_holds_refused], 1);
	/* The client's region says it (its own memory: it may scribble there,
	 * which tells it nothing it did not write). */
	fs_store_relaxed(&c->hdr->refused_epoch, h);
	fs_store_relaxed(&c->hdr->refused_why, why);
	fs_store_release(&c->hdr->holds_refused, fs_load_relaxed(&c->hdr->holds_refused) + 1u);
	uint64_t now = fse_now(e);
	if (now - c->refused_logged_ns > 1000000000ull || c->refused_logged_ns == 0) {
		c->refused_logged_ns = now;
		fse_log(e, 4, "client %u (%s, pid %d): hold of epoch %llu refused (current %llu): %s", row,
			c->name, c->pid, (unsigned long long)h, (unsigned long long)cur, refusal_name(why));
	}
	return 0;
}

/*
 * How long this client's holds last (the budget's grace, fse_budget): a
 * hold that ended (released, or replaced by the next window's) counts at
 * once when longer than the figure, and pulls it down by an eighth when
 * shorter.  An engine's windows on a host loaded far past its cores take
 * what they take (five 20 ms engines beside a sixth on 2 cores held epochs
 * over 1 s); one that holds an epoch and never lets go has no figure.
 */
static void hold_timed(struct fse *e, struct fse_client *c, unsigned k, uint64_t h)
{
	uint64_t now = fse_now(e);
	if (c->hold_seen[k] && now > c->hold_since[k]) {
		uint64_t d = now - c->hold_since[k];
		c->hold_typ_ns = d > c->hold_typ_ns ? d : c->hold_typ_ns - (c->hold_typ_ns - d) / 8u;
	}
	c->hold_since[k] = h ? now : 0;
}

uint32_t fse_holds(struct fse *e)
{
	fs_smp_mb(); /* the current store above, before these hold loads */
	uint64_t cur = fsr_epoch(e->core);
	for (uint32_t row = 0; row < e->cfg.max_clients; row++) {
		struct fse_client *c = &e->clients[row];
		if (!c->active)
			continue;
		uint64_t holds[FS_MAX_HOLDS];
		for (unsigned k = 0; k < FS_MAX_HOLDS; k++) {
			holds[k] = hold_check(e, c, k, fs_load_acquire(&c->hdr->holds[k]), cur);
			if (holds[k] != c->hold_seen[k])
				hold_timed(e, c, k, holds[k]);
			c->hold_seen[k] = holds[k];
		}
		/* Only valid holds reach the core (it keeps the holds gauge). */
		fsr_client_holds(e->core, row, holds);
		/* What it may read through them (client memory: a lie pins more
		 * for itself, or protects less of what only it reads). */
		fsr_client_reach(e->core, row, fs_load_acquire(&c->hdr->reach));
	}
	e->hold_floor = cur;
	return fsr_reclaim(e->core);
}

/* The users attached now, and each client's user as an index into them. */
static uint32_t users_of(const struct fse *e, uint32_t *uid, uint32_t *user_of)
{
	uint32_t n = 0;
	for (uint32_t row = 0; row < e->cfg.max_clients; row++) {
		const struct fse_client *c = &e->clients[row];
		if (!c->active)
			continue;
		uint32_t u = 0;
		while (u < n && uid[u] != c->uid)
			u++;
		if (u == n)
			uid[n++] = c->uid;
		user_of[row] = u;
	}
	return n;
}

/* The oldest hold of a client, 0: none. */
static uint64_t oldest_hold(const struct fse_client *c)
{
	uint64_t m = 0;
	for (unsigned k = 0; k < FS_MAX_HOLDS; k++)
		if (c->hold_seen[k] && (m == 0 || c->hold_seen[k] < m))
			m = c->hold_seen[k];
	return m;
}

void fse_budget(struct fse *e, uint64_t now)
{
	uint32_t uid[FSE_MAX_CLIENTS], user_of[FSE_MAX_CLIENTS], rows[FSE_MAX_CLIENTS];
	uint32_t users = users_of(e, uid, user_of);
	uint32_t pct = fse_live(e->cfg.live.pin_share_pct);
	uint64_t grace_ns = (uint64_t)fse_live(e->cfg.live.pin_grace_ms) * 1000000u;
	uint64_t hold_ns = (uint64_t)fse_live(e->cfg.live.hold_timeout_ms) * 1000000u;
	/* Each client's own figure, for fsctl clients and /metrics. */
	for (uint32_t row = 0; row < e->cfg.max_clients; row++) {
		if (!e->clients[row].active)
			continue;
		uint64_t p = 0;
		for (uint32_t card = 0; card < e->cfg.cards; card++)
			p += fsr_pinned(e->core, card, &row, 1, 0);
		fs_store_relaxed(&fse_client_ctr(e, row)[FS_CCL_pinned], p);
	}
	if (!pct || users == 0)
		return;
	for (uint32_t u = 0; u < users; u++) {
		for (uint32_t card = 0; card < e->cfg.cards; card++) {
			uint64_t budget = (uint64_t)fsr_card_slots(e->core, card) * pct / 100u / users;
			for (;;) {
				unsigned n = 0;
				struct fse_client *worst = NULL;
				uint64_t worst_h = 0;
				for (uint32_t row = 0; row < e->cfg.max_clients; row++) {
					struct fse_client *c = &e->clients[row];
					if (!c->active || user_of[row] != u)
						continue;
					rows[n++] = row;
					uint64_t h = oldest_hold(c);
					if (h && (!worst || h < worst_h)) {
						worst = c;
						worst_h = h;
					}
				}
				unsigned pinned = n ? fsr_pinned(e->core, card, rows, n, 1) : 0;
				if (pinned <= budget || !worst)
					break;
				/* Charged only once it has pinned longer than an honest
				 * window takes here (pin_grace_ms), or four times what
				 * this client's holds last when that is longer, within
				 * the hold timeout. */
				uint64_t since = fse_hold_superseded(e, worst_h);
				uint64_t grace = 4u * worst->hold_typ_ns;
				grace = grace > grace_ns ? grace : grace_ns;
				grace = grace < hold_ns ? grace : hold_ns;
				if (!since || now < since || now - since < grace)
					break;
				fse_log(e, 4,
					"client %u (%s, pid %d, uid %u): the holds of uid %u keep %u of card %u's %u "
					"slots from reuse for others, over its budget of %llu (%u %% of its share, %u "
					"users): revoking the holder of epoch %llu, superseded %llu ms ago",
					(unsigned)(worst - e->clients), worst->name, worst->pid, worst->uid,
					uid[u], pinned, card, fsr_card_slots(e->core, card),
					(unsigned long long)budget, pct, users, (unsigned long long)worst_h,
					(unsigned long long)((now - since) / 1000000u));
				fse_count(&e->cfg.ctr.daemon[FS_C_over_budget], 1);
				fse_finish(e, worst, FS_DETACH_OVER_BUDGET);
				fse_holds(e); /* its slots: free now, unless another hold pins them */
			}
		}
	}
}
