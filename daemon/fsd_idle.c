/* SPDX-License-Identifier: Apache-2.0 */
/* fsd_idle.c: the hot thread's idle policy (see fsd_idle.h). */
#include "fsd_idle.h"

static uint64_t dist(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

void fsd_idle_work(struct fsd_idle *s, const struct fsd_idle_cfg *c, uint64_t now)
{
	if (!s->idle_since)
		return; /* still working */
	uint64_t gap = now - s->idle_since;
	if (gap <= c->adapt_ns)
		s->gap_mean = s->gap_mean ? (3 * s->gap_mean + gap) / 4 : gap;
	/* A miss: woken from the planned sleep, before its end. */
	int miss = s->plan_wake && s->woken && s->woke_at < s->plan_wake;
	if (miss) {
		/* It came in the planned sleep: wake earlier from now on. */
		s->misses++;
		s->lead = 2 * s->lead + FSD_IDLE_LEAD_MIN_NS;
		if (s->r_mean && s->lead > s->r_mean / FSD_IDLE_GUARD_DIV)
			s->lead = s->r_mean / FSD_IDLE_GUARD_DIV;
	} else if (s->plan_wake && !s->woken && now >= s->plan_wake) {
		/* Found awake: the deviation and the timer's lateness have their
		 * own terms, so the misses' extra fades (slowly: a miss costs a
		 * wake-up). */
		s->hits++;
		s->lead -= s->lead / 64;
	}
	/* A gap that ended in a sleep holds the wake-up: an upper bound; one
	 * that ended in the planned sleep ended before the plan. */
	if (miss)
		gap = s->plan_wake - s->idle_since;
	if (c->rhythm_ns && gap > c->spin_ns && gap <= c->rhythm_ns) {
		if (!s->r_mean) {
			s->r_mean = gap;
			s->r_dev = 0;
		} else {
			s->r_dev = (7 * s->r_dev + dist(gap, s->r_mean)) / 8;
			s->r_mean = (7 * s->r_mean + gap) / 8;
		}
	}
	s->idle_since = s->plan_wake = s->sleep_until = 0;
	s->woken = 0;
}

enum fsd_idle_act fsd_idle_next(struct fsd_idle *s, const struct fsd_idle_cfg *c, uint64_t now,
				uint64_t *sleep_ns)
{
	*sleep_ns = 0;
	s->woken = 0; /* a pass found nothing: awake from here on */
	if (!s->idle_since)
		s->idle_since = now;
	uint64_t t = now - s->idle_since;
	if (t < c->spin_ns)
		return FSD_IDLE_SPIN;
	if (c->adapt_ns > c->spin_ns && s->gap_mean) {
		uint64_t want = 2 * s->gap_mean;
		want = want > c->adapt_ns ? c->adapt_ns : want;
		if (t < want)
			return FSD_IDLE_YIELD; /* give the core to anyone who wants it */
	}
	if (c->rhythm_ns && s->r_mean) {
		uint64_t guard = FSD_IDLE_LEAD_MIN_NS + s->lead + 2 * s->r_dev + 2 * s->late;
		/* The window is at most half the gap: past that the rhythm is too
		 * loose to follow, and a post may find the thread asleep, as it
		 * would without the rhythm (the spin stays bounded on a busy
		 * machine, where it would slow the engines down). */
		if (guard > s->r_mean / FSD_IDLE_GUARD_DIV)
			guard = s->r_mean / FSD_IDLE_GUARD_DIV;
		uint64_t early = s->r_mean > guard ? s->r_mean - guard : 0;
		uint64_t until = s->r_mean + guard;
		uint64_t wake = s->plan_wake ? s->plan_wake : s->idle_since + early;
		if (now + FSD_IDLE_MIN_SLEEP_NS <= wake) {
			/* Sleep until just before the next post is due (again, after
			 * a wake-up that brought nothing). */
			s->plan_wake = wake;
			*sleep_ns = wake - now;
			return FSD_IDLE_SLEEP;
		}
		if (t < until) {
			/* Awake through the window, whether the planned sleep ended
			 * on time or there was none (too short to take). */
			if (!s->plan_wake)
				s->plan_wake = now;
			return FSD_IDLE_SPIN;
		}
	}
	return FSD_IDLE_SLEEP;
}

void fsd_idle_sleep(struct fsd_idle *s, uint64_t now, uint64_t timeout_ns, uint64_t plan_ns)
{
	s->sleep_until = now + timeout_ns;
	s->planned = plan_ns && timeout_ns == plan_ns;
}

void fsd_idle_woke(struct fsd_idle *s, uint64_t now)
{
	/* A timer never fires early: before its end, something woke the thread. */
	s->woken = now < s->sleep_until;
	s->woke_at = now;
	if (!s->woken && s->planned) /* the rhythm's timer: how late it fired */
		s->late = (7 * s->late + (now - s->sleep_until)) / 8;
}
