/* SPDX-License-Identifier: Apache-2.0 */
/* fsd_idle.c: the hot thread's idle policy (see fsd_idle.h). */
#include "fsd_idle.h"

void fsd_idle_work(struct fsd_idle *s, const struct fsd_idle_cfg *c, uint64_t now, uint32_t posts)
{
	if (s->idle_since) { /* the end of an idle period */
		uint64_t gap = now - s->idle_since;
		if (gap <= c->adapt_ns)
			s->gap_mean = s->gap_mean ? (3 * s->gap_mean + gap) / 4 : gap;
		s->idle_since = 0;
	}
	if (!posts)
		return; /* a copy landed, a hold moved: not the engines' rhythm */
	uint64_t period = s->last_post ? now - s->last_post : 0;
	uint64_t at = now; /* when the post came, as far as the thread can tell */
	/* Where did this post find the thread?  Asleep in the planned sleep
	 * (early), asleep after the window (late), or awake in the window. */
	int early = s->plan_wake && s->woken && s->woke_at < s->plan_wake;
	int late = s->plan_wake && s->woken && s->woke_at >= s->plan_wake && s->woke_at >= s->plan_until;
	/* Not late but back from a pause (a period or more past the window,
	 * e.g. an engine between requests): a new rhythm starts from now, and
	 * the window after the post must not widen for it. */
	if (late && now - s->plan_until >= s->r_mean)
		late = 0;
	uint64_t cap = s->r_mean / FSD_IDLE_GUARD_DIV;
	if (early) {
		/* Wake earlier from now on. */
		s->misses++;
		s->lead = 2 * s->lead + FSD_IDLE_LEAD_MIN_NS;
		if (s->r_mean && s->lead > cap)
			s->lead = cap;
		/* The post came before the plan: this period ended before it
		 * (now holds the wake-up, tens of us that must not shift the
		 * next plan). */
		at = s->plan_wake;
		period = at - s->last_post;
	} else if (late) {
		/* Stay awake longer from now on. */
		s->lates++;
		s->lag = 2 * s->lag + FSD_IDLE_LEAD_MIN_NS;
		if (s->r_mean && s->lag > cap)
			s->lag = cap;
		/* It came after the window, most likely soon after (now holds the
		 * wake-up). */
		at = s->plan_until;
		period = at - s->last_post;
	} else if (s->plan_wake && !s->woken && now >= s->plan_wake) {
		/* Found awake: the deviations and the timer's lateness have their
		 * own terms, so the misses' extra fades (slowly: a miss costs a
		 * wake-up). */
		s->hits++;
		s->lead -= s->lead / 64;
		s->lag -= s->lag / 64;
	}
	/* A period that starts at a wake-up (the previous post's, below) is
	 * short by that wake-up: not the engines' rhythm. */
	if (c->rhythm_ns && !s->unsure && period > c->spin_ns && period <= c->rhythm_ns) {
		if (!s->r_mean) {
			s->r_mean = period;
			s->r_lo = s->r_hi = 0;
		} else {
			/* One deviation per side: a rhythm with a tail on one side
			 * (an engine's timer firing late, never early) gets its window
			 * there, not half of it where no post comes. */
			if (period < s->r_mean)
				s->r_lo = (7 * s->r_lo + (s->r_mean - period)) / 8;
			else
				s->r_hi = (7 * s->r_hi + (period - s->r_mean)) / 8;
			s->r_mean = (7 * s->r_mean + period) / 8;
		}
	}
	/* A post that found the thread asleep with no window's edge to take
	 * (back from a pause, or a sleep with no plan) came an unknown time
	 * before the wake-up `at` holds, and the next post is due that much
	 * before last_post + r_mean: a sleep planned from it would end after
	 * that post (the second post of every burst found the thread asleep).
	 * So the next period is not planned from it: the thread stays awake
	 * through it (fsd_idle_next), and that post, found awake, is the
	 * anchor again. */
	s->unsure = s->woken && !early && !late;
	s->last_post = at;
	s->plan_wake = s->plan_until = s->sleep_until = 0;
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
	if (c->rhythm_ns && s->r_mean && s->last_post) {
		/* Each side of the window is at most a quarter of the period:
		 * past that the rhythm is too loose to follow, and a post may find
		 * the thread asleep, as it would without the rhythm (the spin
		 * stays bounded on a busy machine, where it would slow the
		 * engines down). */
		uint64_t cap = s->r_mean / FSD_IDLE_GUARD_DIV;
		/* The timer's lateness varies (a CPU back from a deep idle state,
		 * a vCPU the host let sleep): its mean twice and its deviation
		 * twice before the post; its mean after it (the window's end). */
		uint64_t lo = FSD_IDLE_LEAD_MIN_NS + s->lead + 2 * s->r_lo + 2 * s->late + 2 * s->late_dev;
		uint64_t hi = FSD_IDLE_LEAD_MIN_NS + s->lag + 2 * s->r_hi + 2 * s->late;
		lo = lo > cap ? cap : lo;
		hi = hi > cap ? cap : hi;
		uint64_t due = s->last_post + s->r_mean;
		uint64_t wake = s->plan_wake ? s->plan_wake : due - lo;
		uint64_t until = due + hi;
		if (!s->unsure && now + FSD_IDLE_MIN_SLEEP_NS <= wake) {
			/* Sleep until just before the next post is due (again, after
			 * a wake-up that brought nothing). */
			s->plan_wake = wake;
			s->plan_until = until;
			*sleep_ns = wake - now;
			return FSD_IDLE_SLEEP;
		}
		if (now < until) {
			/* Awake through the window, whether the planned sleep ended
			 * on time or there was none (too short to take). */
			if (!s->plan_wake) {
				s->plan_wake = now;
				s->plan_until = until;
			}
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
	if (!s->woken && s->planned) { /* the rhythm's timer: how late it fired */
		uint64_t l = now - s->sleep_until;
		s->late_dev = (7 * s->late_dev + (l > s->late ? l - s->late : s->late - l)) / 8;
		s->late = (7 * s->late + l) / 8;
	}
}
