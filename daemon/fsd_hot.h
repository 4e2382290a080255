/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_hot.h: foresightd's hot thread (fsd_hot.c), the host of the hot
 * engine (daemon/engine/fse.h): it owns the thread, the idle policy (spin,
 * then sleep on every ring), the clock, and the adapters from the engine
 * to the backend and to the loop thread (the rows it dropped, through
 * struct fsd's dropped_notice; its log lines).  And the daemon's cards that go down
 * (fsd_cards.c), whose one record is the engine's.
 */
#ifndef FSD_HOT_H
#define FSD_HOT_H

#include <stddef.h>
#include <stdint.h>

struct fsd;

/* The engine over the daemon's regions, core and backend (before the hot
 * thread starts; fuzz/hot_fuzz.c calls it too).  0 or -errno. */
int fsd_hot_init(struct fsd *d);
int fsd_hot_start(struct fsd *d); /* fsd_hot_init, then the thread */
/* One pass of the hot loop at `now`, without sleeping (the hot thread runs
 * these; fuzz/hot_fuzz.c drives them against a hostile client region).
 * fsd_hot_first: before the first pass (publishes epoch 1).  Returns
 * nonzero when the pass did work. */
void fsd_hot_first(struct fsd *d);
int fsd_hot_pass(struct fsd *d, uint64_t now);
void fsd_hot_stop(struct fsd *d);
void fsd_hot_wake(struct fsd *d);
/* Loop thread: hand client `row` to the hot thread / ask it to drop it. */
int fsd_hot_add(struct fsd *d, uint32_t row);
int fsd_hot_drop(struct fsd *d, uint32_t row, uint32_t reason);
/* Run fn(d, arg) on the hot thread (the residency core's only caller) and
 * wait for it, at most 2 s.  For rare admin verbs: the loop blocks meanwhile.
 * Returns fn's result, or -ETIMEDOUT / -EAGAIN. */
int fsd_hot_call(struct fsd *d, int (*fn)(struct fsd *d, void *arg), void *arg);

/* fsd_cards.c: cards that go down (lost, reset, or taken down by an
 * admin) and stay down until a restart; the record is the engine's
 * (daemon/engine/fse_cards.c).  fsd_card_down, from any thread (the
 * control verb; a backend that finds a card broken calls the engine's
 * card_down callback instead): record it and the reason,
 * wake the hot thread; 0, -EINVAL (no such card) or -EALREADY.  The hot
 * thread applies it at its next pass and, once the next epoch is out,
 * tells engines (peer_reach, then the header's cards_down).
 * fsd_card_down_sync (loop thread): the same through fsd_hot_call,
 * returning once the core dropped the card (or -ETIMEDOUT).
 * fsd_card_state: 1 (down, its reason and first epoch without it) or 0. */
int fsd_card_down(struct fsd *d, uint32_t card, const char *reason);
int fsd_card_down_sync(struct fsd *d, uint32_t card, const char *reason);
int fsd_card_state(struct fsd *d, uint32_t card, char *reason, size_t len, uint64_t *epoch);
#define FSD_CARD_REASON 128u /* a reason's buffer */

#endif /* FSD_HOT_H */
