/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fse_sleep.c: the engine's thread with nothing to do sleeps on all ring
 * wake words and its own wake word at once (futex_waitv, Linux >= 5.16; a
 * polling fallback elsewhere).  On the way it sets every ring's
 * NEED_WAKEUP, then makes one barrier for all of them (a membarrier where
 * the rings are asymmetric: fs_ring.h), then looks once more.
 */
#include "fs_futex.h"
#include "fse_internal.h"

void fse_sleep(struct fse *e, uint64_t timeout_ns, const int *stop)
{
	uint32_t *words[FS_FUTEX_WAITV_MAX];
	uint32_t expect[FS_FUTEX_WAITV_MAX];
	unsigned n = 0;
	uint64_t dev_poll_ns = (uint64_t)fse_live(e->cfg.live.dev_poll_us) * 1000u;
	if (!timeout_ns)
		return;
	words[n] = &e->wake;
	expect[n++] = fs_load_acquire(&e->wake);
	int pending = 0;
	pthread_mutex_lock(&e->done_lock);
	pending |= e->done_n > 0;
	pthread_mutex_unlock(&e->done_lock);
	pthread_mutex_lock(&e->lock);
	pending |= e->cmd_head != e->cmd_tail;
	pthread_mutex_unlock(&e->lock);
	int asym = 0;
	for (uint32_t row = 0; row < e->cfg.max_clients && !pending; row++) {
		struct fse_client *c = &e->clients[row];
		if (!c->active)
			continue;
		uint32_t seq;
		fs_ring_sleep_arm(&c->ring, &seq);
		asym |= (int)c->ring.asym;
		/* A GPU producer cannot wake us: look again soon. */
		if (fs_load_relaxed(&c->hdr->dev_armed) && timeout_ns > dev_poll_ns)
			timeout_ns = dev_poll_ns;
		words[n] = &c->ring.hdr->wake_seq;
		expect[n++] = seq;
	}
	if (!pending && fs_ring_sleep_fence(asym))
		pending = 1;
	for (uint32_t row = 0; row < e->cfg.max_clients && !pending; row++) {
		struct fse_client *c = &e->clients[row];
		if (!c->active)
			continue;
		if (fs_ring_sleep_check(&c->ring))
			pending = 1;
		/* The device ring has no futex word of its own: a host thread
		 * posting there kicks the host ring's (fs_ring_dev.h).  This
		 * seq_cst load follows the flags store above, as in
		 * fs_ring_sleep_check(). */
		if (__atomic_load_n(&c->dev_ring.hdr->tail, __ATOMIC_SEQ_CST) != c->dev_ring.head)
			pending = 1;
	}
	/* A release that raced with the flags above: its slots are free now. */
	if (!pending && fse_holds(e) > 0)
		pending = 1;
	if (!pending && !(stop && __atomic_load_n(stop, __ATOMIC_RELAXED))) {
		fs_futex_waitv(words, expect, n, timeout_ns);
		fse_count(&e->cfg.ctr.daemon[FS_C_hot_wakeups], 1);
	}
	for (uint32_t row = 0; row < e->cfg.max_clients; row++)
		if (e->clients[row].active)
			fs_ring_sleep_done(&e->clients[row].ring);
}
