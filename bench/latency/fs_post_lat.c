/* SPDX-License-Identifier: Apache-2.0 */
/* fs_post_lat.c: see fs_post_lat.h. */
#include "fs_post_lat.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

uint64_t fs_post_lat_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rnd(uint64_t *st)
{
	uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static uint32_t card_of(const struct fs_model_info *m, uint32_t layer)
{
	return layer * m->cards / m->layers;
}

/* One run: n samples into issue[]/seen[] (ns, sorted). */
static void one_run(fs_client *c, const struct fs_model_info *m, unsigned n, unsigned gap_us, uint64_t *rng,
		    uint32_t *w, uint64_t *issue, uint64_t *seen, struct fs_post_lat_run *r, FILE *stamps)
{
	unsigned got = 0, timeouts = 0;
	for (unsigned i = 0; i < n; i++) {
		struct fs_view v;
		fs_acquire(c, &v);
		uint32_t l, e;
		struct fs_slot s;
		do {
			l = (uint32_t)(rnd(rng) % m->layers);
			e = (uint32_t)(rnd(rng) % m->experts);
		} while (fs_lookup_live(c, &v, card_of(m, l), l, e, &s));
		uint64_t t0 = fs_post_lat_now_ns(), t1 = 0;
		fs_post_predict(c, *w, l, e, card_of(m, l), 1.0f, 1, FS_SOURCE_HOST);
		uint64_t tp = fs_post_lat_now_ns(); /* the post's own cost: the kick */
		while (fs_post_lat_now_ns() - t0 < 1000000000ull) {
			if (fs_lookup_live(c, &v, card_of(m, l), l, e, &s)) {
				t1 = fs_post_lat_now_ns();
				break;
			}
			/* Windows pass: holding one epoch for the whole wait would keep
			 * the slot this copy needs in its grace period. */
			fs_release(c, &v);
			fs_acquire(c, &v);
		}
		if (t1) {
			uint64_t is = fs_slot_issued_ns(c, &s);
			issue[got] = is > t0 ? is - t0 : 0;
			seen[got] = t1 - t0;
			if (stamps)
				fprintf(stamps, "%llu %llu %llu %llu\n", (unsigned long long)t0,
					(unsigned long long)tp, (unsigned long long)is,
					(unsigned long long)t1);
			got++;
		} else {
			timeouts++;
		}
		fs_release(c, &v);
		if ((i & 63) == 63) {
			fs_window_end(c, *w);
			(*w)++;
		}
		if (gap_us)
			usleep(gap_us);
	}
	qsort(issue, got, 8, cmp_u64);
	qsort(seen, got, 8, cmp_u64);
	*r = (struct fs_post_lat_run){.got = got, .timeouts = timeouts};
	if (got) {
		r->issue_p50 = issue[got / 2] / 1e3, r->issue_p99 = issue[got * 99 / 100] / 1e3;
		r->seen_p50 = seen[got / 2] / 1e3, r->seen_p99 = seen[got * 99 / 100] / 1e3;
	}
}

/* Median, min and max of v[0..k) (sorts v). */
static void spread(double *v, unsigned k, double *med, double *mn, double *mx)
{
	*med = *mn = *mx = 0;
	if (!k)
		return;
	qsort(v, k, sizeof(double), cmp_dbl);
	*med = v[k / 2], *mn = v[0], *mx = v[k - 1];
}

int fs_post_lat_runs(fs_client *c, unsigned runs, unsigned n, unsigned gap_us, struct fs_post_lat *out)
{
	if (runs < 1 || runs > FS_POST_LAT_MAX_RUNS || n < 1)
		return -EINVAL;
	struct fs_model_info m;
	fs_client_model(c, &m);
	uint64_t *issue = calloc(n, 8), *seen = calloc(n, 8);
	if (!issue || !seen) {
		free(issue), free(seen);
		return -ENOMEM;
	}
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	uint32_t w = 1;
	*out = (struct fs_post_lat){.runs = runs};
	/* Bench builds' profile (bench/latency/profile.sh): every sample's
	 * "post_ns posted_ns issued_ns seen_ns", joined there with the
	 * daemon's stage stamps on issued_ns. */
	const char *sp = getenv("FS_POST_LAT_STAMPS");
	FILE *stamps = sp ? fopen(sp, "w") : NULL;
	for (unsigned i = 0; i < runs; i++) {
		one_run(c, &m, n, gap_us, &rng, &w, issue, seen, &out->run[i], stamps);
		out->got += out->run[i].got;
		out->timeouts += out->run[i].timeouts;
	}
	/* Over the runs that have samples. */
	double i50[FS_POST_LAT_MAX_RUNS], i99[FS_POST_LAT_MAX_RUNS], s50[FS_POST_LAT_MAX_RUNS],
		s99[FS_POST_LAT_MAX_RUNS], x, y;
	unsigned k = 0;
	for (unsigned i = 0; i < runs; i++) {
		const struct fs_post_lat_run *r = &out->run[i];
		if (!r->got)
			continue;
		i50[k] = r->issue_p50, i99[k] = r->issue_p99, s50[k] = r->seen_p50, s99[k] = r->seen_p99;
		k++;
	}
	spread(i50, k, &out->issue_p50, &x, &y);
	spread(s50, k, &out->seen_p50, &x, &y);
	spread(i99, k, &out->issue_p99_med, &out->issue_p99_min, &out->issue_p99_max);
	spread(s99, k, &out->seen_p99_med, &out->seen_p99_min, &out->seen_p99_max);
	if (stamps)
		fclose(stamps);
	free(issue), free(seen);
	return 0;
}

void fs_post_lat_print(const struct fs_post_lat *l, const char *extra)
{
	for (unsigned i = 0; i < l->runs; i++)
		printf("run %u samples %u timeouts %u post_to_issue_us p50 %.2f p99 %.2f post_to_ready_us p50 %.2f "
		       "p99 %.2f\n",
		       i + 1, l->run[i].got, l->run[i].timeouts, l->run[i].issue_p50, l->run[i].issue_p99,
		       l->run[i].seen_p50, l->run[i].seen_p99);
	printf("samples %u timeouts %u runs %u post_to_issue_us p50 %.2f p99 %.2f min %.2f max %.2f "
	       "post_to_ready_us p50 %.2f p99 %.2f min %.2f max %.2f%s%s\n",
	       l->got, l->timeouts, l->runs, l->issue_p50, l->issue_p99_med, l->issue_p99_min,
	       l->issue_p99_max, l->seen_p50, l->seen_p99_med, l->seen_p99_min, l->seen_p99_max,
	       extra ? " " : "", extra ? extra : "");
}
