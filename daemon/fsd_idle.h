/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_idle.h: the hot thread's idle policy (issue 20): what it does after a
 * pass that found nothing, as a pure state machine over time stamps (the
 * thread feeds it; fsd_idle_test.c drives it with made-up times).
 *
 *  - spin_us: spin this long first (a burst's next record, a copy landing).
 *  - spin_adapt_us (opt-in): spin, yielding the core, through twice the
 *    running mean of the gaps no longer than it.
 *  - rhythm_us (the default): follow the engines' rhythm.  The periods
 *    between posts (passes that drained records) longer than spin_us and
 *    no longer than rhythm_us (an engine's layers and windows) give a mean
 *    and one mean deviation per side; after the spin the thread sleeps
 *    until a guard before the next post is due (the last post + the mean;
 *    the guard: 10 us, 2 deviations below, twice the timer's measured
 *    lateness and twice its deviation, and `lead`), then spins until a
 *    guard after it (10 us, 2 deviations above, twice the lateness and
 *    `lag`), then sleeps as before.  A post that found the thread asleep
 *    is taken to have come at the window's edge it missed (the wake-up
 *    it paid must not shift the next plan).  So a post that
 *    keeps the rhythm finds the thread awake (no futex wake-up on its path,
 *    no system call in the engine's post), while the core spins only
 *    around the moment the post is due.  A post that finds the thread
 *    asleep in that planned sleep (a miss) doubles `lead` (plus 10 us); one
 *    that finds it asleep after the window (a late one; but one a period
 *    or more past it is an engine back from a pause: a new rhythm from
 *    there, not counted) doubles `lag`; a
 *    hit takes 1/64 off both, so misses stay rare.  A post found asleep
 *    with no window's edge to stand for it (back from a pause, or after a
 *    sleep with no plan) holds its wake-up in its time: the period after
 *    it is spun, not planned (the next post is due that much earlier than
 *    the plan would say), and is not a period of the rhythm.  Each side
 *    is at most a quarter of the mean period.  A short timed sleep also keeps the CPU
 *    out of its deep idle states (the kernel's idle governor sees the
 *    timer), which is most of a sleeping thread's wake-up cost on a server.
 *    Why posts, not the end of the last work (session 6): the daemon's
 *    other work in a period (a copy landing, seen up to a poll sleep late;
 *    a slot reclaimed when the engine releases its epoch) moved that
 *    anchor by tens of us, which the GPU host's runs paid as posts that
 *    came before the plan (4 % in one run); and one deviation for both
 *    sides put half the window where an engine whose timer fires late
 *    never posts.
 * Any sleep still ends on the engine's futex wake-up: a post that breaks
 * the rhythm costs what it did before (bench/latency, docs/results/gpu.md).
 */
#ifndef FSD_IDLE_H
#define FSD_IDLE_H

#include <stdint.h>

#define FSD_IDLE_LEAD_MIN_NS 10000u  /* the least lead: a timer's wake-up and a pass */
#define FSD_IDLE_MIN_SLEEP_NS 20000u /* a planned sleep shorter than this is spun */
#ifndef FSD_IDLE_GUARD_DIV
#define FSD_IDLE_GUARD_DIV 4u /* the guard is at most mean / this: the window at most 2x that */
#endif

struct fsd_idle_cfg {
	uint64_t spin_ns, adapt_ns, rhythm_ns; /* spin_us, spin_adapt_us, rhythm_us in ns */
};

enum fsd_idle_act {
	FSD_IDLE_SPIN,  /* pass again at once */
	FSD_IDLE_YIELD, /* sched_yield, then pass again (spin_adapt_us) */
	FSD_IDLE_SLEEP, /* sleep: at most *sleep_ns when nonzero (the rhythm's wake) */
};

struct fsd_idle {
	uint64_t idle_since;   /* end of the last work; 0 while working */
	uint64_t gap_mean;     /* spin_adapt_us: mean of the gaps <= it */
	uint64_t last_post;    /* rhythm: the last pass that drained records (0: none) */
	uint64_t r_mean;       /* rhythm: mean period between posts */
	uint64_t r_lo, r_hi;   /* rhythm: mean deviation of the periods below / above it */
	uint64_t lead;         /* rhythm: extra early guard the misses asked for */
	uint64_t lag;          /* rhythm: extra late guard the late posts asked for */
	uint64_t late;         /* rhythm: mean lateness of a planned wake (the timer) */
	uint64_t late_dev;     /* rhythm: its mean deviation */
	uint64_t plan_wake;    /* rhythm: this period's planned wake (0: none) */
	uint64_t plan_until;   /* rhythm: the end of its window */
	uint64_t sleep_until;  /* the current sleep's end (its timeout) */
	uint64_t woke_at;      /* when the last sleep ended */
	int planned;           /* the current sleep ends at the rhythm's wake */
	int unsure;            /* rhythm: last_post holds a wake-up (the post found the thread
				     * asleep, no window's edge to take): spin the next period */
	int woken;             /* the last sleep ended before its timeout (something woke the
				     * thread) and no pass has found nothing since */
	uint64_t hits, misses; /* rhythm: posts found awake / asleep in a planned sleep */
	uint64_t lates;        /* rhythm: posts found asleep after the window (less than a period after it) */
};

/* A pass did work at `now`; `posts`: it drained that many records (the
 * engines' rhythm; 0: other work, a copy landing, a slot reclaimed). */
void fsd_idle_work(struct fsd_idle *s, const struct fsd_idle_cfg *c, uint64_t now, uint32_t posts);

/* A pass found nothing at `now`: what to do.  For FSD_IDLE_SLEEP, *sleep_ns
 * is the longest sleep the rhythm wants (0: no limit of its own). */
enum fsd_idle_act fsd_idle_next(struct fsd_idle *s, const struct fsd_idle_cfg *c, uint64_t now,
				uint64_t *sleep_ns);

/* The thread sleeps from `now` for at most timeout_ns (plan_ns: what
 * fsd_idle_next() asked for; the thread may sleep less for its own
 * reasons). */
void fsd_idle_sleep(struct fsd_idle *s, uint64_t now, uint64_t timeout_ns, uint64_t plan_ns);

/* That sleep returned at `now`. */
void fsd_idle_woke(struct fsd_idle *s, uint64_t now);

#endif /* FSD_IDLE_H */
