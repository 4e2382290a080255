/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fse_pass.c: one pass of the hot engine (fse.h has the order and why).
 * Everything here runs on the engine's thread; the clock is the host's.
 */
#include <errno.h>
#include <string.h>

#include "fs_rec.h"
#include "fse_internal.h"

#define FSE_BATCH 256u
#define FSE_CHECK_NS 10000000u /* liveness checks every 10 ms */

static uint32_t drain_ring(struct fse *e, uint32_t row, struct fs_ring_cons *ring, uint64_t now);

/* Drop a client: its holds no longer count, its region says why. */
void fse_finish(struct fse *e, struct fse_client *c, uint32_t reason)
{
	if (!c->active)
		return;
	uint32_t row = (uint32_t)(c - e->clients);
	/* What it posted before it detached or died is still its data: take
	 * it in (one bounded drain per ring) before the row goes, so no record
	 * is lost but the ones a full ring refused (counted by the client). */
	uint64_t now = fse_now(e);
	drain_ring(e, row, &c->ring, now);
	drain_ring(e, row, &c->dev_ring, now);
	fsr_client_remove(e->core, row);
	fs_store_relaxed(&c->hdr->reason, reason);
	fs_store_release(&c->hdr->state, (uint32_t)FS_CLIENT_DETACHED);
	c->active = 0;
	fs_store_relaxed(&fse_client_ctr(e, row)[FS_CCL_holds], 0);
	fse_note(e, &(struct fse_notice){.kind = FSE_NOTE_DROPPED, .row = row, .reason = reason});
}

void fse_stop_clients(struct fse *e, uint32_t reason)
{
	for (uint32_t row = 0; row < e->cfg.max_clients; row++)
		fse_finish(e, &e->clients[row], reason);
}

/* Drain one ring of client `row` (at most 64 batches: let the other
 * clients and the copies in).  Each record is checked against the model
 * (proto/fs_rec.h, the client library's check too).  Returns the valid
 * records consumed.  The loop ends on a look that took nothing (or met
 * an impossible tail), not on a batch that returned none:
 * fs_ring_consume() returns only the records that pass its structural
 * check, so a batch of bad ones returns 0 with good ones behind it; and
 * the bound counts every record taken, bad ones too, so a client posting
 * only bad records cannot hold the pass. */
static uint32_t drain_ring(struct fse *e, uint32_t row, struct fs_ring_cons *ring, uint64_t now)
{
	struct fs_rec buf[FSE_BATCH];
	const struct fs_rec_model m = {e->cfg.layers, e->cfg.experts, e->cfg.cards};
	uint64_t *cc = fse_client_ctr(e, row), *cd = e->cfg.ctr.daemon;
	uint64_t bad_before = ring->bad_record, idx_before = ring->bad_index;
	uint64_t taken = ring->consumed;
	uint32_t total = 0;
	for (;;) {
		uint64_t before = ring->consumed;
		uint32_t n = fs_ring_consume(ring, buf, FSE_BATCH);
		if (ring->consumed == before)
			break; /* empty, or an impossible tail resynchronised */
		uint32_t bad = 0;
		for (uint32_t i = 0; i < n; i++) {
			if (!fs_rec_fits(&buf[i], &m)) {
				bad++;
				continue;
			}
			if (buf[i].type == FS_REC_WIN_END)
				fse_count(&cd[FS_C_windows], 1);
			fsr_record(e->core, row, &buf[i], now);
		}
		fse_count(&cc[FS_CCL_records], n);
		fse_count(&cd[FS_C_records], n);
		if (bad) {
			fse_count(&cc[FS_CCL_bad_records], bad);
			fse_count(&cd[FS_C_bad_records], bad);
		}
		total += n;
		if (ring->consumed - taken > 64u * FSE_BATCH)
			break;
	}
	/* Structurally bad records and impossible indices the ring counted. */
	uint64_t br = ring->bad_record - bad_before, bi = ring->bad_index - idx_before;
	if (br) {
		fse_count(&cc[FS_CCL_bad_records], br);
		fse_count(&cd[FS_C_bad_records], br);
	}
	if (bi)
		fse_count(&cd[FS_C_bad_index], bi);
	return total;
}

static uint32_t drain_rings(struct fse *e, uint64_t now)
{
	uint32_t total = 0;
	for (uint32_t row = 0; row < e->cfg.max_clients; row++) {
		struct fse_client *c = &e->clients[row];
		if (!c->active)
			continue;
		uint64_t *cc = fse_client_ctr(e, row);
		total += drain_ring(e, row, &c->ring, now);
		uint32_t dev = drain_ring(e, row, &c->dev_ring, now);
		if (dev) {
			fse_count(&cc[FS_CCL_dev_records], dev);
			fs_store_relaxed(&cc[FS_CCL_dev_seen_ns], fse_now(e));
			total += dev;
		}
		/* The producers' own counts (client memory: shown, not trusted). */
		fs_store_relaxed(&cc[FS_CCL_ring_full], fs_load_relaxed(&c->hdr->ring_full));
		fs_store_relaxed(&cc[FS_CCL_dev_full], (uint64_t)fs_load_relaxed(&c->dev_ring.hdr->full));
		fs_store_relaxed(&cc[FS_CCL_redials], fs_load_relaxed(&c->hdr->redials));
	}
	return total;
}

static uint32_t completions(struct fse *e, uint64_t now)
{
	struct fse_done local[256];
	uint32_t n = 0;
	if (e->cfg.backend.poll)
		n = e->cfg.backend.poll(e->cfg.backend.ctx, local, 256);
	pthread_mutex_lock(&e->done_lock);
	while (e->done_n > 0 && n < 256)
		local[n++] = e->doneq[--e->done_n];
	pthread_mutex_unlock(&e->done_lock);
	for (uint32_t i = 0; i < n; i++) {
		fsr_copy_done(e->core, local[i].card, local[i].slot, local[i].gen,
			      local[i].at ? local[i].at : now);
		fse_count(&e->cfg.ctr.card[(uint64_t)local[i].card * FS_N_CARD + FS_CC_bus_busy_ns],
			  local[i].busy_ns);
	}
	return n;
}

/* The copy as the backend makes it: the core's size, bounded by the slot
 * (memory's sake only), from the blob's place in the arena.  The one place
 * a copy's length is decided; backends copy exactly this. */
static void make_copy(const struct fse *e, const struct fsr_copy *cp, struct fse_copy *out)
{
	uint64_t bytes = cp->bytes;
	if (e->cfg.slot_bytes && bytes > e->cfg.slot_bytes)
		bytes = e->cfg.slot_bytes;
	uint64_t src = 0;
	if (e->cfg.arena_index)
		src = e->cfg.arena_index[(uint64_t)cp->layer * e->cfg.experts + cp->expert].offset;
	*out = (struct fse_copy){
		.card = cp->card, .slot = cp->slot, .gen = cp->gen, .src = src, .bytes = bytes, .core = *cp};
}

static uint32_t issue(struct fse *e, uint64_t now)
{
	struct fsr_copy cps[64];
	struct fse_copy cp;
	uint32_t total = 0;
	for (uint32_t card = 0; card < e->cfg.cards; card++) {
		/* Reported down, maybe not applied yet: nothing more to it. */
		if (fs_load_relaxed(&e->cards_down) >> card & 1u)
			continue;
		unsigned n = fsr_take_copies(e->core, card, cps, 64, now);
		for (unsigned i = 0; i < n; i++) {
			/* A backend that failed the card on an earlier copy of
			 * this batch: the core drops these when it applies it. */
			if (fs_load_relaxed(&e->cards_down) >> card & 1u)
				break;
			make_copy(e, &cps[i], &cp);
			e->cfg.backend.submit(e->cfg.backend.ctx, &cp);
		}
		total += n;
	}
	return total;
}

/* Publish the working table into a buffer no live client holds. */
static int publish(struct fse *e)
{
	uint32_t b, nb = e->cfg.epoch_bufs;
	for (b = 0; b < nb; b++) {
		if (b == e->cur_buf && e->buf_epoch[b] != 0)
			continue;
		if (e->buf_epoch[b] == 0 || !fsr_epoch_held(e->core, e->buf_epoch[b]))
			break;
	}
	if (b == nb) {
		if (!e->deferred)
			fse_count(&e->cfg.ctr.daemon[FS_C_publish_deferred], 1);
		e->deferred = 1;
		return 0;
	}
	e->deferred = 0;
	struct fs_epoch_buf_hdr *bh = fse_epoch_buf(e->dh, b);
	fs_store_release(&bh->epoch, 0ull); /* seqlock: being rewritten */
	fsr_fill(e->core, fse_epoch_entries(e->dh, b));
	uint64_t ep = fsr_publish(e->core);
	fs_store_release(&bh->epoch, ep);
	e->buf_epoch[b] = ep;
	e->buf_superseded_ns[e->cur_buf] = fse_now(e);
	e->buf_superseded_ns[b] = 0;
	e->cur_buf = b;
	fs_store_release(&e->dh->current, FS_CUR(ep, b));
	fse_count(&e->cfg.ctr.daemon[FS_C_epochs], 1);
	fse_cards_published(e, ep); /* a card that went down: engines learn it now */
	return 1;
}

/*
 * Publication must go on whatever the engines hold.  Each client may pin
 * its share of the buffers that are not current (the reserve is the rest):
 * max(2, (epoch_bufs - 1) / live clients).  When every buffer has been held
 * for longer than an honest window takes (PUBLISH_BLOCKED_NS), the client
 * holding the most buffers beyond its share is revoked as for an overlong
 * hold (and backs off before it may attach again).  Two engines holding 8
 * epochs each stopped publication before.
 */
#define PUBLISH_BLOCKED_NS 100000000ull

static void reserve(struct fse *e, uint64_t now)
{
	if (!e->deferred) {
		e->deferred_since = 0;
		return;
	}
	if (e->deferred_since == 0)
		e->deferred_since = now;
	if (now - e->deferred_since < PUBLISH_BLOCKED_NS)
		return;
	uint32_t live = 0, worst_n = 0;
	struct fse_client *worst = NULL;
	for (uint32_t row = 0; row < e->cfg.max_clients; row++) {
		struct fse_client *c = &e->clients[row];
		if (!c->active)
			continue;
		live++;
		uint64_t bufs = 0; /* distinct buffers, not current */
		for (unsigned k = 0; k < FS_MAX_HOLDS; k++) {
			int b = c->hold_seen[k] ? fse_epoch_buf_of(e, c->hold_seen[k]) : -1;
			if (b >= 0 && (uint32_t)b != e->cur_buf)
				bufs |= 1ull << b;
		}
		uint32_t n = (uint32_t)__builtin_popcountll(bufs);
		if (n > worst_n) {
			worst_n = n;
			worst = c;
		}
	}
	uint32_t share = live ? (e->cfg.epoch_bufs - 1) / live : 0;
	if (share < 2)
		share = 2;
	if (!worst || worst_n <= share)
		return;
	fse_log(e, 4,
		"client %u (%s, pid %d): holds %u of %u epoch buffers (its share: %u) and publication is "
		"blocked, revoking",
		(unsigned)(worst - e->clients), worst->name, worst->pid, worst_n, e->cfg.epoch_bufs, share);
	fse_count(&e->cfg.ctr.daemon[FS_C_stale], 1);
	fse_finish(e, worst, FS_DETACH_HOLD_TIMEOUT);
	e->deferred_since = now; /* the next one, if any, after another period */
}

/*
 * A valid hold still pins every slot retired after its epoch (fsr_reclaim
 * frees nothing newer than the oldest hold), so one engine holding an old
 * epoch takes the tier from the others until hold_timeout_ms.  Under slot
 * pressure the wait is shorter: when the oldest hold was superseded more
 * than hold_pressure_ms ago and the slots it keeps retired are at least an
 * eighth of a card's pool, its holder is revoked as for an overlong hold
 * (and backs off before it may attach again).  An honest decode window
 * holds an epoch for milliseconds; a window longer than this that pins the
 * pool costs the others as much whether it is honest or not.  Off by
 * default (0): on a host loaded far past its cores an honest engine was
 * seen stalled 1 s mid-window, revoked, and then read one slot rewritten
 * under it (a revoked engine's lookups race the reuse: fs_slot_ready after
 * the read is how an engine notices).  The back-off alone bounds a
 * repeated long hold over time; this is for a host that wants it sooner.
 */
static void pressure(struct fse *e, uint64_t now)
{
	uint64_t minh = fsr_min_hold(e->core);
	if (minh == UINT64_MAX)
		return;
	uint64_t since = fse_hold_superseded(e, minh);
	uint64_t pressure_ns = (uint64_t)fse_live(e->cfg.live.hold_pressure_ms) * 1000000u;
	if (!pressure_ns || !since || now <= since || now - since < pressure_ns)
		return;
	uint32_t worst = 0, worst_card = 0, pool = 0;
	for (uint32_t card = 0; card < e->cfg.cards; card++) {
		uint32_t pinned = 0, slot = 0;
		struct fsr_slot_info si;
		for (; fsr_slot_info(e->core, card, slot, &si) == 0; slot++)
			pinned += si.state == FSR_RETIRING && si.retire > minh;
		if (pinned * 8u >= slot && pinned > worst) {
			worst = pinned;
			worst_card = card;
			pool = slot;
		}
	}
	if (!worst)
		return;
	for (uint32_t row = 0; row < e->cfg.max_clients; row++) {
		struct fse_client *c = &e->clients[row];
		if (!c->active)
			continue;
		for (unsigned k = 0; k < FS_MAX_HOLDS; k++) {
			if (c->hold_seen[k] != minh)
				continue;
			fse_log(e, 4,
				"client %u (%s, pid %d): epoch %llu held %llu ms after it was superseded keeps %u "
				"of card %u's %u slots retired, revoking",
				row, c->name, c->pid, (unsigned long long)minh,
				(unsigned long long)((now - since) / 1000000u), worst, worst_card, pool);
			fse_count(&e->cfg.ctr.daemon[FS_C_stale], 1);
			fse_finish(e, c, FS_DETACH_HOLD_TIMEOUT);
			return;
		}
	}
}

static void liveness(struct fse *e, uint64_t now)
{
	/* Relaxed loads: a reload (SIGHUP) stores new values from the loop. */
	uint64_t live_ns = (uint64_t)fse_live(e->cfg.live.liveness_ms) * 1000000u;
	uint64_t hold_ns = (uint64_t)fse_live(e->cfg.live.hold_timeout_ms) * 1000000u;
	uint64_t *cd = e->cfg.ctr.daemon;
	for (uint32_t row = 0; row < e->cfg.max_clients; row++) {
		struct fse_client *c = &e->clients[row];
		if (!c->active)
			continue;
		/* `now` is this pass's start: a heartbeat written since is newer
		 * than it, and fresh.  (A client could write any value here; all
		 * it can do is keep itself attached, which its pidfd undoes when
		 * it dies.) */
		uint64_t hb = fs_load_relaxed(&c->hdr->heartbeat_ns);
		if (hb > now && hb - now > live_ns) {
			/* CLOCK_MONOTONIC is one clock for every process: no honest
			 * client is a liveness period ahead of it.  A client that
			 * writes the far future to stay attached forever is dropped. */
			fse_log(e, 4, "client %u (%s, pid %d): heartbeat from the future, dropping it", row,
				c->name, c->pid);
			fse_count(&cd[FS_C_bad_heartbeats], 1);
			fse_count(&cd[FS_C_stale], 1);
			fse_finish(e, c, FS_DETACH_STALE);
			continue;
		}
		if (hb < now && now - hb > live_ns) {
			fse_log(e, 4, "client %u (%s, pid %d): heartbeat stale, dropping its holds", row,
				c->name, c->pid);
			fse_count(&cd[FS_C_stale], 1);
			fse_finish(e, c, FS_DETACH_STALE);
			continue;
		}
		/* A hold is too old when the epoch it names was superseded more
		 * than hold_timeout ago: a window that long is a hung or hostile
		 * engine.  (Re-acquiring an epoch that is still current, window
		 * after window, is normal and never times out.) */
		for (unsigned k = 0; k < FS_MAX_HOLDS; k++) {
			uint64_t since = fse_hold_superseded(e, c->hold_seen[k]);
			if (since && now > since && now - since > hold_ns) { /* since may be after `now` */
				fse_log(e, 4, "client %u (%s, pid %d): epoch %llu held over %u ms, revoking",
					row, c->name, c->pid, (unsigned long long)c->hold_seen[k],
					(unsigned)(hold_ns / 1000000u));
				fse_count(&cd[FS_C_stale], 1);
				fse_finish(e, c, FS_DETACH_HOLD_TIMEOUT);
				break;
			}
		}
	}
}

void fse_first(struct fse *e)
{
	for (uint32_t b = 0; b < e->cfg.epoch_bufs; b++)
		e->buf_epoch[b] = 0;
	e->cur_buf = 0;
	e->last_publish = e->last_check = e->last_hb = 0;
	e->deferred = 0;
	e->deferred_since = 0;
	/* Epoch 1, empty, at once: every acquire then holds a real epoch, and
	 * fs_lookup_live has a hold that protects what it finds. */
	publish(e);
}

int fse_pass(struct fse *e, uint64_t now)
{
	uint64_t publish_ns = (uint64_t)fse_live(e->cfg.live.publish_us) * 1000u; /* reloadable */
	uint64_t hb_ns = (uint64_t)e->cfg.heartbeat_ms * 1000000u;
	uint32_t work = 0;
	fse_apply_cmds(e);
	work += fse_cards_apply(e); /* cards that went down (fse_cards.c) */
	work += drain_rings(e, now);
	work += completions(e, now);
	work += issue(e, now);
	int published = 0;
	if (fsr_dirty(e->core) && now - e->last_publish >= publish_ns) {
		published = publish(e);
		if (published)
			e->last_publish = now;
	}
	reserve(e, now);
	/* Holds change without a record (a release), so read them on every
	 * pass: eight loads per client. */
	uint32_t freed = fse_holds(e);
	work += freed;
	/* Slots back from their grace period: a copy that waited for one (an
	 * eviction in an earlier pass) goes in this pass, not the next one
	 * (issue 20: post -> copy issued with a full pool was three passes). */
	if (freed)
		work += issue(e, now);
	/* The learned predictor's work on this pass's records, after its
	 * copies and epoch went out (it never delays them); what it predicts
	 * is copied by the next pass, which its work runs at once. */
	work += fsr_learn_flush(e->core);
	if (now - e->last_check >= FSE_CHECK_NS) {
		fse_holds(e);
		liveness(e, now);
		pressure(e, now);
		fse_budget(e, now);
		e->last_check = now;
	}
	if (now - e->last_hb >= hb_ns / 2) {
		fs_store_release(&e->dh->heartbeat_ns, now);
		e->last_hb = now;
	}
	return work || published;
}
