/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_sweep.c: --sweep slots (hit rate against the slot budget) and
 * --sweep delay (distinct misses against the landing delay).  Each writes
 * DIR/sweep-WHAT-TRACE.csv, and, where gnuplot is installed, a .gp script
 * and the .svg it draws (SVG: text, diffable, no cairo needed, which
 * Debian's gnuplot-nox lacks).  Without gnuplot the CSV is the result.
 */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

static const double slot_fracs[] = {0.10, 0.15, 0.20, 0.25, 0.30, 0.40, 0.50, 0.60, 0.70, 0.80, 0.90};
static const uint32_t delays[] = {1, 2, 3, 4, 5, 6};
#define NFRACS (sizeof(slot_fracs) / sizeof(slot_fracs[0]))
#define NDELAYS (sizeof(delays) / sizeof(delays[0]))

/* The discussion's 16-slot ring: change in distinct misses at delay 1/2/3/5. */
static const double ring_ref[][2] = {{1, -27.0}, {2, -18.0}, {3, -12.0}, {5, -3.5}};

/* "qwen.route.csv" -> "qwen"; synthetic -> "synthetic". */
static void trace_tag(const char *name, char *tag, size_t len)
{
	char tmp[256];
	snprintf(tmp, sizeof(tmp), "%s", name);
	snprintf(tag, len, "%s", basename(tmp));
	char *dot = strchr(tag, '.');
	if (dot && dot != tag)
		*dot = 0;
}

static int have_gnuplot(void)
{
	return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

/* The script names its files without a folder and gnuplot runs in DIR, so
 * a .gp file reads the same wherever the checkout is. */
static void plot(const char *dir, const char *base, const char *gp_body)
{
	char gp[512], cmd[1100];
	snprintf(gp, sizeof(gp), "%s/%s.gp", dir, base);
	FILE *f = fopen(gp, "w");
	if (!f)
		return;
	fprintf(f,
		"# Written by fs-replay --sweep; draws %s.svg from %s.csv (run it in their folder).\n"
		"set terminal svg size 820,500 dynamic font 'sans,12' background rgb 'white'\n"
		"set output '%s.svg'\n"
		"set datafile separator ','\n"
		"set key outside right\n"
		"set grid\n%s",
		base, base, base, gp_body);
	fclose(f);
	if (!have_gnuplot()) {
		fprintf(stderr, "fs-replay: gnuplot not found: wrote %s, no plot\n", gp);
		return;
	}
	snprintf(cmd, sizeof(cmd), "cd '%s' && gnuplot '%s.gp'", dir, base);
	if (system(cmd) != 0)
		fprintf(stderr, "fs-replay: gnuplot failed on %s\n", gp);
}

static int run_point(const struct replay_input *in, const struct replay_model *m, enum replay_policy_id p,
		     struct replay_result *r)
{
	char err[256] = "";
	int rc = replay_run(in, m, p, r, err, sizeof(err));
	if (rc)
		fprintf(stderr, "fs-replay: %s\n", err);
	return rc;
}

static int sweep_slots(const struct replay_input *in, const struct replay_model *m0, const char *dir,
		       const char *tag, const enum replay_policy_id *pols, int npols)
{
	char base[128], path[512];
	snprintf(base, sizeof(base), "sweep-slots-%s", tag);
	snprintf(path, sizeof(path), "%s/%s.csv", dir, base);
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "fs-replay: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	fprintf(f,
		"slots_frac,slots,policy,hit_rate,misses_per_layer_window,ms_per_window,copies,late_landings\n");
	/* Rows grouped by policy, so that a plot line is a run of rows. */
	for (int k = 0; k < npols; k++) {
		for (size_t i = 0; i < NFRACS; i++) {
			struct replay_model m = *m0;
			m.slots = 0;
			m.slots_frac = slot_fracs[i];
			struct replay_result r;
			if (run_point(in, &m, pols[k], &r)) {
				fclose(f);
				return -1;
			}
			fprintf(f, "%.2f,%u,%s,%.6f,%.6f,%.4f,%llu,%llu\n", slot_fracs[i], r.slots, r.policy,
				r.hit_rate, r.misses_per_lw, r.ms_per_window, (unsigned long long)r.copies,
				(unsigned long long)r.landed_late);
		}
	}
	fclose(f);
	char body[2048];
	int n = snprintf(body, sizeof(body),
			 "set title 'Hit rate vs slot budget (%s)'\n"
			 "set xlabel 'slots, share of all experts'\nset ylabel 'hit rate %%'\n"
			 "set yrange [0:100]\nplot ",
			 tag);
	for (int k = 0; k < npols && n < (int)sizeof(body); k++)
		n += snprintf(body + n, sizeof(body) - n,
			      "'%s.csv' every ::%zu::%zu using 1:(100*$4) with linespoints title '%s'%s",
			      base, 1 + k * NFRACS, (k + 1) * NFRACS, replay_policy_name(pols[k]),
			      k + 1 < npols ? ", \\\n  " : "\n");
	plot(dir, base, body);
	return 0;
}

static int sweep_delay(const struct replay_input *in, const struct replay_model *m0, const char *dir,
		       const char *tag, const enum replay_policy_id *pols, int npols)
{
	char base[128], path[512], ref[512];
	snprintf(base, sizeof(base), "sweep-delay-%s", tag);
	snprintf(path, sizeof(path), "%s/%s.csv", dir, base);
	snprintf(ref, sizeof(ref), "%s/sweep-delay-discussion.csv", dir);
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "fs-replay: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	fprintf(f,
		"delay,policy,misses_per_layer_window,change_vs_static_pct,hit_rate,late_landings,too_late\n");
	/* static at each delay first (the reference), then rows grouped by
	 * policy, so that a plot line is a run of rows. */
	struct replay_result st[NDELAYS];
	for (size_t i = 0; i < NDELAYS; i++) {
		struct replay_model m = *m0;
		m.delay = delays[i];
		if (run_point(in, &m, RP_STATIC, &st[i])) {
			fclose(f);
			return -1;
		}
	}
	for (int k = 0; k < npols; k++) {
		for (size_t i = 0; i < NDELAYS; i++) {
			struct replay_model m = *m0;
			m.delay = delays[i];
			struct replay_result r = st[i];
			if (pols[k] != RP_STATIC && run_point(in, &m, pols[k], &r)) {
				fclose(f);
				return -1;
			}
			double base_m = st[i].misses_per_lw;
			double ch = base_m > 0 ? 100.0 * (r.misses_per_lw - base_m) / base_m : 0;
			fprintf(f, "%u,%s,%.6f,%.2f,%.6f,%llu,%llu\n", delays[i], r.policy, r.misses_per_lw,
				ch, r.hit_rate, (unsigned long long)r.landed_late,
				(unsigned long long)r.too_late);
		}
	}
	fclose(f);
	FILE *g = fopen(ref, "w");
	if (g) {
		fprintf(g, "delay,change_vs_static_pct\n");
		for (size_t i = 0; i < sizeof(ring_ref) / sizeof(ring_ref[0]); i++)
			fprintf(g, "%.0f,%.1f\n", ring_ref[i][0], ring_ref[i][1]);
		fclose(g);
	}
	char body[2048];
	int n = snprintf(
		body, sizeof(body),
		"set title 'Distinct misses vs landing delay (%s)'\n"
		"set xlabel 'landing delay, windows'\nset ylabel 'distinct misses vs static, %%'\n"
		"set xrange [0.5:6.5]\nset yzeroaxis\nplot 'sweep-delay-discussion.csv' using 1:2 every ::1 "
		"with linespoints lw 2 dt 2 title 'discussion: 16-slot ring', \\\n  ",
		tag);
	for (int k = 0; k < npols && n < (int)sizeof(body); k++) {
		if (pols[k] == RP_STATIC)
			continue;
		n += snprintf(body + n, sizeof(body) - n,
			      "'%s.csv' every ::%zu::%zu using 1:4 with linespoints title '%s', \\\n  ", base,
			      1 + k * NDELAYS, (k + 1) * NDELAYS, replay_policy_name(pols[k]));
	}
	if (n < (int)sizeof(body))
		snprintf(body + n, sizeof(body) - n, "0 with lines lc rgb 'gray' notitle\n");
	plot(dir, base, body);
	return 0;
}

int replay_sweep(const struct replay_input *in, const struct replay_model *m, const char *what,
		 const char *dir, const char *name, const enum replay_policy_id *pols, int npols)
{
	char tag[128];
	if (name)
		snprintf(tag, sizeof(tag), "%s", name);
	else
		trace_tag(in->name, tag, sizeof(tag));
	if (strcmp(what, "slots") == 0)
		return sweep_slots(in, m, dir, tag, pols, npols);
	if (strcmp(what, "delay") == 0)
		return sweep_delay(in, m, dir, tag, pols, npols);
	return -EINVAL;
}
