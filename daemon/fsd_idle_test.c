/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_idle_test: the hot thread's idle policy (fsd_idle.h) driven by a
 * simulated thread and engine on made-up time stamps: no clock, no
 * threads, the same answer on any machine.
 *
 * The simulated thread passes every 0.5 us while it spins; a post finds it
 * at its next pass when awake, or wakes it `wake_ns` later when asleep (the
 * futex wake-up); a planned sleep ends `late_ns` after its plan (the timer).
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "fsd_idle.h"

#define US 1000ull
#define PASS_NS 500ull
#define LONG_SLEEP_NS (10000 * US) /* the hot thread's own cap (HOT_CHECK_NS) */

struct sim {
	uint64_t wake_ns, late_ns;
	uint64_t late_jit; /* a planned sleep ends late_ns + 0..late_jit late */
	uint64_t cap_ns;   /* the thread's own limit on any sleep (0: none) */
	uint64_t land_ns;  /* each post's copy lands this long after it (0: no copies) */
	uint64_t land_jit; /* ... plus 0..land_jit (the bus) */
	uint64_t poll_ns;  /* the thread's limit on a sleep while a copy is in flight
			    * (a polled backend sees the landing only by looking) */
	uint64_t seed;
	uint64_t spun_ns;  /* time spent spinning */
	unsigned slow;     /* posts that waited longer than 2 passes */
	uint64_t worst_ns; /* the longest wait */
	struct fsd_idle s;
};

static uint64_t rnd(uint64_t *x);

/* Posts at arr[0..n), each a piece of work of 1 us; with land_ns, each
 * post's copy lands later, and the thread sees the landing (work that is
 * not a post) at its first pass after it: a landing wakes no one. */
static void simulate(struct sim *m, const struct fsd_idle_cfg *c, const uint64_t *arr, unsigned n,
		     unsigned warm)
{
	uint64_t now = arr[0], land = UINT64_MAX;
	for (unsigned i = 0; i < n;) {
		if (land <= now) {
			fsd_idle_work(&m->s, c, now, 0);
			land = UINT64_MAX;
			now += US;
			continue;
		}
		if (now >= arr[i]) {
			uint64_t w = now - arr[i];
			if (i >= warm) {
				m->slow += w > 2 * PASS_NS;
				m->worst_ns = w > m->worst_ns ? w : m->worst_ns;
			}
			fsd_idle_work(&m->s, c, now, 1);
			if (m->land_ns)
				land = now + m->land_ns + (m->land_jit ? rnd(&m->seed) % m->land_jit : 0);
			now += US;
			i++;
			continue;
		}
		uint64_t sl;
		enum fsd_idle_act a = fsd_idle_next(&m->s, c, now, &sl);
		if (a != FSD_IDLE_SLEEP) {
			if (i >= warm)
				m->spun_ns += PASS_NS;
			now += PASS_NS;
			continue;
		}
		uint64_t to = sl ? sl : LONG_SLEEP_NS;
		if (m->cap_ns && to > m->cap_ns)
			to = m->cap_ns; /* e.g. 20 us while copies are in flight */
		if (land != UINT64_MAX && m->poll_ns && to > m->poll_ns)
			to = m->poll_ns;
		fsd_idle_sleep(&m->s, now, to, sl);
		uint64_t timer = now + to + m->late_ns + (m->late_jit ? rnd(&m->seed) % m->late_jit : 0);
		uint64_t post = arr[i] + m->wake_ns;
		now = timer < post ? timer : post;
		fsd_idle_woke(&m->s, now);
	}
}

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* n posts `gap` apart (after the end of the previous work), +- jitter. */
static uint64_t *rhythm(unsigned n, uint64_t gap, uint64_t jitter, uint64_t seed)
{
	uint64_t *a = calloc(n, sizeof(*a)), t = 1000 * US;
	cr_assert_not_null(a);
	for (unsigned i = 0; i < n; i++) {
		a[i] = t;
		t += US + gap - jitter + (jitter ? rnd(&seed) % (2 * jitter + 1) : 0);
	}
	return a;
}

static const struct fsd_idle_cfg dflt = {.spin_ns = 50 * US, .adapt_ns = 0, .rhythm_ns = 2000 * US};

Test(idle, steady_rhythm_finds_the_thread_awake_and_spins_little)
{
	/* Posts 250 us apart (bench/latency's pace); a futex wake-up costs
	 * 100 us and the timer fires 5 us late. */
	const unsigned n = 5000, warm = 100;
	uint64_t *a = rhythm(n, 250 * US, 0, 1);
	struct sim m = {.wake_ns = 100 * US, .late_ns = 5 * US};
	simulate(&m, &dflt, a, n, warm);
	cr_assert_leq(m.slow, (n - warm) / 100, "%u of %u posts found the thread asleep", m.slow, n - warm);
	/* The spin: 50 us, then about the lead around each post (not 250). */
	double per_gap_us = (double)m.spun_ns / (n - warm) / US;
	cr_log_info(
		"steady 250 us: %u of %u found asleep, misses %llu hits %llu, spun %.1f us per gap, worst %llu us",
		m.slow, n - warm, (unsigned long long)m.s.misses, (unsigned long long)m.s.hits, per_gap_us,
		(unsigned long long)(m.worst_ns / US));
	cr_assert_lt(per_gap_us, 100.0, "spun %.1f us per gap", per_gap_us);
	cr_assert_gt(m.s.hits, n / 2);
	free(a);
}

Test(idle, jittered_rhythm_keeps_misses_under_one_percent)
{
	/* 300 us +- 40 us, a late timer (20 us): the lead grows to cover it. */
	const unsigned n = 20000, warm = 500;
	uint64_t *a = rhythm(n, 300 * US, 40 * US, 7);
	struct sim m = {.wake_ns = 150 * US, .late_ns = 20 * US};
	simulate(&m, &dflt, a, n, warm);
	cr_assert_leq(m.slow, (n - warm) / 100, "%u of %u posts found the thread asleep (misses %llu)",
		      m.slow, n - warm, (unsigned long long)m.s.misses);
	double per_gap_us = (double)m.spun_ns / (n - warm) / US;
	cr_log_info(
		"300 +- 40 us: %u of %u found asleep, misses %llu hits %llu, spun %.1f us per gap, worst %llu us",
		m.slow, n - warm, (unsigned long long)m.s.misses, (unsigned long long)m.s.hits, per_gap_us,
		(unsigned long long)(m.worst_ns / US));
	cr_assert_lt(per_gap_us, 250.0, "spun %.1f us per gap: not cheaper than spinning", per_gap_us);
	free(a);
}

Test(idle, off_is_the_old_policy)
{
	/* rhythm_us 0: spin 50 us, then sleep with no plan, every time. */
	const unsigned n = 200;
	uint64_t *a = rhythm(n, 250 * US, 0, 1);
	struct fsd_idle_cfg c = dflt;
	c.rhythm_ns = 0;
	struct sim m = {.wake_ns = 100 * US, .late_ns = 5 * US};
	simulate(&m, &c, a, n, 1);
	cr_assert_eq(m.slow, n - 1, "every post after the first waits for a wake-up");
	cr_assert_eq(m.s.hits + m.s.misses, 0);
	cr_assert_leq(m.spun_ns, (uint64_t)(n - 1) * 51 * US);
	free(a);
}

Test(idle, an_engine_that_stops_leaves_the_thread_asleep)
{
	const unsigned n = 300;
	uint64_t *a = rhythm(n, 250 * US, 0, 1);
	struct sim m = {.wake_ns = 100 * US, .late_ns = 5 * US};
	simulate(&m, &dflt, a, n, 0);
	free(a);
	/* After the last post: spin 50 us, one planned sleep, the window, then
	 * a sleep with no plan of its own. */
	uint64_t now = 1000000 * US, sl;
	fsd_idle_work(&m.s, &dflt, now, 1);
	uint64_t spun = 0;
	int planned = 0;
	for (int i = 0; i < 100000; i++) {
		enum fsd_idle_act act = fsd_idle_next(&m.s, &dflt, now, &sl);
		if (act == FSD_IDLE_SLEEP && sl == 0)
			break;
		cr_assert_neq(act, FSD_IDLE_YIELD);
		if (act == FSD_IDLE_SLEEP) {
			planned++;
			fsd_idle_sleep(&m.s, now, sl, sl);
			now += sl;
			fsd_idle_woke(&m.s, now);
		} else {
			now += PASS_NS;
			spun += PASS_NS;
		}
	}
	cr_assert_eq(planned, 1);
	cr_assert_lt(spun, 120 * US, "spun %llu us before sleeping", (unsigned long long)(spun / US));
	cr_assert_lt(now - 1000000 * US, 400 * US, "asleep with no plan %llu us after the last work",
		     (unsigned long long)((now - 1000000 * US) / US));
}

Test(idle, long_gaps_teach_nothing)
{
	/* Posts 5 ms apart (longer than rhythm_us): no plan, the old policy. */
	const unsigned n = 50;
	uint64_t *a = rhythm(n, 5000 * US, 0, 1);
	struct sim m = {.wake_ns = 100 * US, .late_ns = 5 * US};
	simulate(&m, &dflt, a, n, 1);
	cr_assert_eq(m.s.r_mean, 0);
	cr_assert_eq(m.s.hits + m.s.misses, 0);
	free(a);
}

Test(idle, spin_adapt_still_yields_through_twice_the_mean)
{
	struct fsd_idle_cfg c = {.spin_ns = 50 * US, .adapt_ns = 1000 * US, .rhythm_ns = 0};
	struct fsd_idle s = {0};
	uint64_t sl, now = 1000 * US;
	for (int i = 0; i < 8; i++) { /* gaps of 200 us */
		cr_assert_eq(fsd_idle_next(&s, &c, now, &sl), FSD_IDLE_SPIN);
		now += 200 * US;
		fsd_idle_work(&s, &c, now, 1);
	}
	cr_assert_eq(fsd_idle_next(&s, &c, now, &sl), FSD_IDLE_SPIN);
	cr_assert_eq(fsd_idle_next(&s, &c, now + 60 * US, &sl), FSD_IDLE_YIELD);
	cr_assert_eq(fsd_idle_next(&s, &c, now + 390 * US, &sl), FSD_IDLE_YIELD);
	cr_assert_eq(fsd_idle_next(&s, &c, now + 410 * US, &sl), FSD_IDLE_SLEEP);
	cr_assert_eq(sl, 0);
}

Test(idle, the_threads_own_short_sleeps_are_not_misses)
{
	/* Every sleep capped at 20 us (a polled backend with copies in
	 * flight): the wake-ups are the thread's, not the engine's. */
	const unsigned n = 2000;
	uint64_t *a = rhythm(n, 250 * US, 0, 1);
	struct sim m = {.wake_ns = 100 * US, .late_ns = 5 * US, .cap_ns = 20 * US};
	simulate(&m, &dflt, a, n, 100);
	cr_assert_eq(m.s.misses, 0);
	cr_assert_leq(m.s.lead, 0);
	free(a);
}

Test(idle, a_loose_rhythm_spins_at_most_about_half_the_gap)
{
	/* Gaps anywhere in 100..600 us: too loose to follow closely; the
	 * window stays within half the mean gap (plus the 50 us spin). */
	const unsigned n = 5000, warm = 200;
	uint64_t *a = rhythm(n, 350 * US, 250 * US, 3);
	struct sim m = {.wake_ns = 100 * US, .late_ns = 5 * US};
	simulate(&m, &dflt, a, n, warm);
	double per_gap_us = (double)m.spun_ns / (n - warm) / US;
	cr_log_info("100..600 us: %u of %u found asleep, spun %.1f us per gap", m.slow, n - warm, per_gap_us);
	cr_assert_lt(per_gap_us, 50.0 + 350.0 / 2 + 10.0, "spun %.1f us per gap", per_gap_us);
	free(a);
}

/* Posts `base` + 0..spread apart (start to start: an engine that waits for
 * its copy, then sleeps on a timer that fires late, never early), and one
 * in `tail_in` periods up to `tail` later still (a slow wake-up). */
static uint64_t *skewed(unsigned n, uint64_t base, uint64_t spread, unsigned tail_in, uint64_t tail,
			uint64_t seed)
{
	uint64_t *a = calloc(n, sizeof(*a)), t = 1000 * US;
	cr_assert_not_null(a);
	for (unsigned i = 0; i < n; i++) {
		a[i] = t;
		t += base + rnd(&seed) % (spread + 1);
		if (rnd(&seed) % tail_in == 0)
			t += rnd(&seed) % (tail + 1);
	}
	return a;
}

Test(idle, a_copy_landing_mid_period_does_not_move_the_plan)
{
	/* bench/latency's engine on the GPU host: a post, its copy lands 45 us
	 * later and is seen by a thread that polls every 20 us while it is in
	 * flight (work that is not a post, up to 25 us late), then the engine
	 * sleeps 200 us on a timer up to 50 us late: 250..300 us from post to
	 * post.  A futex wake-up costs 100 us, the timer fires 5 us late. */
	const unsigned n = 20000, warm = 500;
	uint64_t *a = skewed(n, 250 * US, 50 * US, 1000000, 0, 11);
	struct sim m = {.wake_ns = 100 * US,
			.late_ns = 5 * US,
			.land_ns = 45 * US,
			.land_jit = 5 * US,
			.poll_ns = 20 * US,
			.seed = 5};
	simulate(&m, &dflt, a, n, warm);
	double per_gap_us = (double)m.spun_ns / (n - warm) / US;
	cr_log_info(
		"copy landing mid-period: %u of %u found asleep (misses %llu, late %llu), spun %.1f us per "
		"period of 275",
		m.slow, n - warm, (unsigned long long)m.s.misses, (unsigned long long)m.s.lates, per_gap_us);
	cr_assert_leq(m.slow, (n - warm) / 200, "%u of %u posts found the thread asleep", m.slow, n - warm);
	cr_assert_lt(per_gap_us, 275.0 * 0.6, "spun %.1f us per period", per_gap_us);
	free(a);
}

Test(idle, a_late_tail_gets_the_window_on_its_side)
{
	/* 250..300 us, and one period in 50 up to 60 us longer still. */
	const unsigned n = 20000, warm = 500;
	uint64_t *a = skewed(n, 250 * US, 50 * US, 50, 60 * US, 13);
	struct sim m = {
		.wake_ns = 100 * US, .late_ns = 5 * US, .land_ns = 45 * US, .poll_ns = 20 * US, .seed = 9};
	simulate(&m, &dflt, a, n, warm);
	double per_gap_us = (double)m.spun_ns / (n - warm) / US;
	cr_log_info("late tail: %u of %u found asleep (misses %llu, late %llu), spun %.1f us per period",
		    m.slow, n - warm, (unsigned long long)m.s.misses, (unsigned long long)m.s.lates,
		    per_gap_us);
	cr_assert_leq(m.slow, (n - warm) / 100, "%u of %u posts found the thread asleep", m.slow, n - warm);
	cr_assert_lt(per_gap_us, 280.0 * 0.6, "spun %.1f us per period", per_gap_us);
	free(a);
}

Test(idle, a_timer_late_by_varying_amounts)
{
	/* The thread's own timer fires 5..45 us late (a vCPU the host let
	 * sleep), posts 250..300 us apart. */
	const unsigned n = 20000, warm = 500;
	uint64_t *a = skewed(n, 250 * US, 50 * US, 1000000, 0, 17);
	struct sim m = {.wake_ns = 100 * US, .late_ns = 5 * US, .late_jit = 40 * US, .seed = 3};
	simulate(&m, &dflt, a, n, warm);
	double per_gap_us = (double)m.spun_ns / (n - warm) / US;
	cr_log_info(
		"timer late 5..45 us: %u of %u found asleep (misses %llu, late %llu), spun %.1f us per period",
		m.slow, n - warm, (unsigned long long)m.s.misses, (unsigned long long)m.s.lates, per_gap_us);
	cr_assert_leq(m.slow, (n - warm) / 200, "%u of %u posts found the thread asleep", m.slow, n - warm);
	cr_assert_lt(per_gap_us, 275.0 * 0.6, "spun %.1f us per period", per_gap_us);
	free(a);
}

/* An engine between requests: 200 bursts of BURST_PER posts 250 us apart,
 * 20 ms between bursts; the thread's wake-up 100 us, its timer 5 us late.
 * Fills *m; returns the posts. */
#define BURST_PER 12u
static unsigned simulate_bursts(struct sim *m)
{
	const unsigned n = 200 * BURST_PER;
	uint64_t *a = calloc(n, sizeof(*a)), t = 1000 * US;
	cr_assert_not_null(a);
	for (unsigned i = 0; i < n; i++) {
		a[i] = t;
		t += (i + 1) % BURST_PER ? 250 * US : 20000 * US;
	}
	*m = (struct sim){.wake_ns = 100 * US, .late_ns = 5 * US};
	simulate(m, &dflt, a, n, 2 * BURST_PER);
	free(a);
	return n;
}

Test(idle, an_engine_that_pauses_is_not_late)
{
	/* Bursts of 12 posts 250 us apart, 20 ms between bursts (an engine
	 * between requests).  The first post of a burst finds the thread
	 * asleep long after the window: a new rhythm, not a late post, so it
	 * must neither count as one nor widen the window after the post. */
	struct sim m;
	const unsigned n = simulate_bursts(&m), warm = 2 * BURST_PER;
	cr_log_info("bursts: misses %llu, late %llu, hits %llu, lag %.1f us, spun %.1f us per post",
		    (unsigned long long)m.s.misses, (unsigned long long)m.s.lates,
		    (unsigned long long)m.s.hits, (double)m.s.lag / US, (double)m.spun_ns / (n - warm) / US);
	cr_expect_eq(m.s.lates, 0, "%llu posts after a pause counted late", (unsigned long long)m.s.lates);
	cr_expect_eq(m.s.lag, 0, "the pauses widened the window by %.1f us", (double)m.s.lag / US);
}

Test(idle, the_post_after_the_first_of_a_burst_finds_the_thread_awake)
{
	/* Bursts as above.  The first post of a burst finds the thread asleep
	 * (unavoidable: it wakes the thread, 100 us); that wake-up is in the
	 * time the thread has for it, so a sleep planned from it ended after
	 * the burst's second post, which waited too (198 of 198 bursts, 39 us
	 * on average).  Only the first post of each burst may wait. */
	struct sim m;
	const unsigned n = simulate_bursts(&m), warm = 2 * BURST_PER;
	const unsigned bursts = n / BURST_PER;
	cr_log_info(
		"bursts: %u of %u posts found the thread asleep (%u bursts), worst %.1f us, spun %.1f us per post",
		m.slow, n - warm, bursts - 2, (double)m.worst_ns / US, (double)m.spun_ns / (n - warm) / US);
	cr_expect_leq(m.slow, bursts - 2,
		      "%u of %u posts found the thread asleep: more than the %u that end a pause", m.slow,
		      n - warm, bursts - 2);
}
