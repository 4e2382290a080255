/* SPDX-License-Identifier: Apache-2.0 */
/* replay_report.c: the policy table and its JSON twin. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "replay.h"

static double pct_vs(double x, double base)
{
	return base > 0 ? 100.0 * (x - base) / base : 0.0;
}

static const struct replay_result *find(const struct replay_result *res, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(res[i].policy, name) == 0)
			return &res[i];
	return NULL;
}

void replay_report_shares(struct replay_result *res, int n, const struct replay_model *m)
{
	const struct replay_result *st = find(res, n, "static"), *cv = find(res, n, "clairvoyant");
	double zero = 1000.0 * m->tokens_per_window / m->intercept_ms;
	for (int i = 0; i < n; i++) {
		struct replay_result *r = &res[i];
		r->share_zero = r->share_bound = NAN;
		if (!st)
			continue;
		double base = st->tokens_per_s, gain = r->tokens_per_s - base;
		if (zero > base)
			r->share_zero = gain / (zero - base);
		if (cv && cv->tokens_per_s > base)
			r->share_bound = gain / (cv->tokens_per_s - base);
	}
}

/* A share as a percentage cell, "-" when there is none. */
static const char *share_cell(double v, char *buf, size_t len)
{
	if (isnan(v))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.1f%%", 100.0 * v);
	return buf;
}

void replay_report_header(FILE *out, const struct replay_input *in, const struct replay_model *m)
{
	const struct fs_trace *t = in->trace;
	uint32_t slots = replay_slots(m, t);
	uint64_t all = (uint64_t)t->layers * t->experts;
	fprintf(out, "trace     %s: %u layers x %u experts, top-%u, %u decode tokens\n", in->name, t->layers,
		t->experts, t->topk, t->tokens);
	fprintf(out, "windows   %u token%s each; %u window%s only build the profile, the rest are scored\n",
		m->tokens_per_window, m->tokens_per_window == 1 ? "" : "s", m->warmup,
		m->warmup == 1 ? "" : "s");
	fprintf(out, "profile   %u %s tokens (static, and the start of our tiers; lru starts empty)\n",
		in->profile_tokens, in->profile_from);
	fprintf(out, "slots     %u (%.1f %% of %llu)\n", slots, 100.0 * slots / (double)all,
		(unsigned long long)all);
	fprintf(out, "bus       %.1f GB/s, the scheduler plans with %u %% of it; landing delay %u window%s\n",
		m->bus_gbps, m->daemon.bus_share_pct, m->delay, m->delay == 1 ? "" : "s");
	fprintf(out, "time      %.2f ms per window + %.2f ms per miss per layer-window\n", m->intercept_ms,
		m->miss_ms);
}

/* The "vs static" and "vs lru" cells of one row, for both tables. */
static void vs_cells(const struct replay_result *r, const struct replay_result *st,
		     const struct replay_result *lru, const char *pct_fmt, char *vs, char *vl, size_t len)
{
	snprintf(vs, len, "-");
	snprintf(vl, len, "-");
	if (st)
		snprintf(vs, len, pct_fmt, pct_vs(r->misses_per_lw, st->misses_per_lw));
	if (lru && lru->misses_per_lw > 0)
		snprintf(vl, len, "%.2fx", r->misses_per_lw / lru->misses_per_lw);
}

void replay_report_table(FILE *out, const struct replay_result *res, int n)
{
	const struct replay_result *st = find(res, n, "static"), *lru = find(res, n, "lru");
	fprintf(out, "\n%-17s %7s %8s %9s %7s %9s %8s %8s %9s %9s %7s %7s %7s\n", "policy", "hit %",
		"miss/lw", "vs static", "vs lru", "copies", "GB", "late", "too-late", "ms/window", "tok/s",
		"of zero", "of bound");
	for (int i = 0; i < n; i++) {
		const struct replay_result *r = &res[i];
		char vs[16], vl[16];
		char sz[16], sb[16];
		vs_cells(r, st, lru, "%+.1f%%", vs, vl, sizeof(vs));
		fprintf(out, "%-17s %7.2f %8.3f %9s %7s %9llu %8.2f %8llu %9llu %9.2f %7.1f %7s %7s\n",
			r->policy, 100.0 * r->hit_rate, r->misses_per_lw, vs, vl,
			(unsigned long long)r->copies, (double)r->bytes / 1e9,
			(unsigned long long)r->landed_late, (unsigned long long)r->too_late, r->ms_per_window,
			r->tokens_per_s, share_cell(r->share_zero, sz, sizeof(sz)),
			share_cell(r->share_bound, sb, sizeof(sb)));
	}
	fprintf(out,
		"\nmiss/lw: distinct misses per layer-window.  late: copies landed after their deadline.\n"
		"too-late: wants not copied because the bus could not land them in time.\n"
		"of zero / of bound: share of the tok/s headroom over static that the row captures, up to\n"
		"the zero-miss clock / up to the clairvoyant bound (future known, Belady, bus-rate copies).\n");
}

static void json_str(FILE *out, const char *k, const char *v)
{
	fprintf(out, "\"%s\": \"", k);
	for (const char *p = v; *p; p++) {
		if (*p == '"' || *p == '\\')
			fputc('\\', out);
		if ((unsigned char)*p >= 0x20)
			fputc(*p, out);
	}
	fputc('"', out);
}

/* JSON has no NaN: null. */
static const char *json_num(double v, char *buf, size_t len)
{
	if (isnan(v))
		snprintf(buf, len, "null");
	else
		snprintf(buf, len, "%.6f", v);
	return buf;
}

void replay_report_json(FILE *out, const struct replay_input *in, const struct replay_model *m,
			const struct replay_result *res, int n)
{
	fputs("[\n", out);
	for (int i = 0; i < n; i++) {
		const struct replay_result *r = &res[i];
		char a[32], b[32];
		fputs("  {", out);
		json_str(out, "policy", r->policy);
		fputs(", ", out);
		json_str(out, "trace", in->name);
		fprintf(out,
			", \"windows\": %u, \"layers\": %u, \"slots\": %u, \"tokens_per_window\": %u, "
			"\"bus_gbps\": %.3f, \"delay\": %u, \"uses\": %llu, \"hits\": %llu, "
			"\"distinct_misses\": %llu, \"distinct_misses_per_layer_window\": %.6f, "
			"\"hit_rate\": %.6f, \"copies\": %llu, \"bytes\": %llu, \"late_landings\": %llu, "
			"\"late_uses\": %llu, \"too_late\": %llu, \"promoted\": %llu, \"predictions\": %llu, "
			"\"ms_per_window\": %.4f, \"tokens_per_s\": %.3f, \"share_of_zero_miss\": %s, "
			"\"share_of_bound\": %s",
			r->windows, r->layers, r->slots, m->tokens_per_window, m->bus_gbps, m->delay,
			(unsigned long long)r->uses, (unsigned long long)r->hits,
			(unsigned long long)r->misses, r->misses_per_lw, r->hit_rate,
			(unsigned long long)r->copies, (unsigned long long)r->bytes,
			(unsigned long long)r->landed_late, (unsigned long long)r->late_uses,
			(unsigned long long)r->too_late, (unsigned long long)r->promoted,
			(unsigned long long)r->predictions, r->ms_per_window, r->tokens_per_s,
			json_num(r->share_zero, a, sizeof(a)), json_num(r->share_bound, b, sizeof(b)));
		/* where the misses come from (replay_why.h): null where not classified */
		fputs(", \"why\": ", out);
		if (r->why_counted) {
			for (unsigned c = 0; c < RW_N; c++)
				fprintf(out, "%s\"%s\": %llu", c ? ", " : "{", replay_why_name(c),
					(unsigned long long)r->why[c]);
			fputs("}, \"why_hist\": ", out);
			for (unsigned c = 0; c < RH_N; c++)
				fprintf(out, "%s\"%s\": %llu", c ? ", " : "{", replay_hist_name(c),
					(unsigned long long)r->why_hist[c]);
			fputs("}, \"why_info\": ", out);
			for (unsigned c = 0; c < RI_N; c++)
				fprintf(out, "%s\"%s\": %llu", c ? ", " : "{", replay_info_name(c),
					(unsigned long long)r->why_info[c]);
			fputs("}", out);
		} else {
			fputs("null, \"why_hist\": null, \"why_info\": null", out);
		}
		replay_report_learn_json(out, r);
		fprintf(out, "}%s\n", i + 1 < n ? "," : "");
	}
	fputs("]\n", out);
}

void replay_report_csv(FILE *out, const struct replay_result *res, int n)
{
	fprintf(out,
		"policy,hit_rate,misses_per_layer_window,distinct_misses,copies,bytes,late_landings,too_late,"
		"promoted,ms_per_window,tokens_per_s,share_of_zero_miss,share_of_bound\n");
	for (int i = 0; i < n; i++) {
		const struct replay_result *r = &res[i];
		fprintf(out, "%s,%.6f,%.6f,%llu,%llu,%llu,%llu,%llu,%llu,%.4f,%.3f,%.6f,%.6f\n", r->policy,
			r->hit_rate, r->misses_per_lw, (unsigned long long)r->misses,
			(unsigned long long)r->copies, (unsigned long long)r->bytes,
			(unsigned long long)r->landed_late, (unsigned long long)r->too_late,
			(unsigned long long)r->promoted, r->ms_per_window, r->tokens_per_s, r->share_zero,
			r->share_bound);
	}
}

void replay_report_markdown(FILE *out, const struct replay_result *res, int n)
{
	const struct replay_result *st = find(res, n, "static"), *lru = find(res, n, "lru");
	fprintf(out, "| policy | hit %% | misses / layer-window | vs static | vs lru | copies | GB moved | "
		     "landed late | ms / window | tok/s | of zero-miss | of bound |\n");
	fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int i = 0; i < n; i++) {
		const struct replay_result *r = &res[i];
		char vs[16], vl[16];
		char sz[16], sb[16];
		vs_cells(r, st, lru, "%+.1f %%", vs, vl, sizeof(vs));
		fprintf(out, "| %s | %.2f | %.3f | %s | %s | %llu | %.2f | %llu | %.2f | %.1f | %s | %s |\n",
			r->policy, 100.0 * r->hit_rate, r->misses_per_lw, vs, vl,
			(unsigned long long)r->copies, (double)r->bytes / 1e9,
			(unsigned long long)r->landed_late, r->ms_per_window, r->tokens_per_s,
			share_cell(r->share_zero, sz, sizeof(sz)),
			share_cell(r->share_bound, sb, sizeof(sb)));
	}
}

/* The sum of a row's classes whose letter is `cls` ("a" .. "d"). */
static uint64_t why_sum(const struct replay_result *r, const char *cls)
{
	uint64_t s = 0;
	for (unsigned c = 0; c < RW_N; c++)
		if (strcmp(replay_why_class(c), cls) == 0)
			s += r->why[c];
	return s;
}

static const char *const why_letters[4] = {"a", "b", "c", "d"};

/* A --why column: as wide as its name, at least 8. */
static int why_col(const char *name)
{
	int w = (int)strlen(name);
	return w > 8 ? w : 8;
}

/* A run of --why columns: n counters named by name(c), the values at off
 * in a struct replay_result (a uint64_t array). */
struct why_group {
	unsigned n;
	const char *(*name)(unsigned c);
	size_t off;
};

/* One text table of --why: a row per policy that counted, the groups'
 * columns side by side. */
static void why_table(FILE *out, const struct replay_result *res, int n, const char *title,
		      const struct why_group *g, int ng)
{
	fprintf(out, "\n%s:\n%-17s", title, "policy");
	for (int k = 0; k < ng; k++)
		for (unsigned c = 0; c < g[k].n; c++)
			fprintf(out, " %*s", why_col(g[k].name(c)), g[k].name(c));
	fputc('\n', out);
	for (int i = 0; i < n; i++) {
		if (!res[i].why_counted)
			continue;
		fprintf(out, "%-17s", res[i].policy);
		for (int k = 0; k < ng; k++) {
			const uint64_t *v = (const uint64_t *)((const char *)&res[i] + g[k].off);
			for (unsigned c = 0; c < g[k].n; c++)
				fprintf(out, " %*llu", why_col(g[k].name(c)), (unsigned long long)v[c]);
		}
		fputc('\n', out);
	}
}

void replay_report_why(FILE *out, const struct replay_result *res, int n, int markdown)
{
	const struct replay_result *lru = find(res, n, "lru");
	if (markdown) {
		fprintf(out,
			"\n| policy | misses | (a) never predicted | (b) not copied | (c) evicted before use | "
			"(d) landed after use | (a) vs lru's misses | posted | used |");
		for (unsigned c = 0; c < RW_N; c++)
			fprintf(out, " %s |", replay_why_name(c));
		for (unsigned c = 0; c < RH_N; c++)
			fprintf(out, " %s |", replay_hist_name(c));
		fprintf(out, "\n|---|---:|---:|---:|---:|---:|---:|---:|---:|");
		for (unsigned c = 0; c < RW_N + RH_N; c++)
			fprintf(out, "---:|");
		fputc('\n', out);
	} else {
		fprintf(out,
			"\nwhere the misses come from (each miss in one class; a + b + c + d = misses):\n");
		fprintf(out, "%-17s %8s %8s %8s %8s %8s %9s %9s %6s\n", "policy", "misses", "a:never",
			"b:uncop", "c:evict", "d:late", "a/lru", "posted", "used");
	}
	for (int i = 0; i < n; i++) {
		const struct replay_result *r = &res[i];
		if (!r->why_counted)
			continue;
		char vl[16] = "-", used[16] = "-";
		if (r->why_info[RI_posted])
			snprintf(used, sizeof(used), "%.1f%%",
				 100.0 * (double)r->why_info[RI_posted_used] /
					 (double)r->why_info[RI_posted]);
		if (lru && lru->misses > 0)
			snprintf(vl, sizeof(vl), "%.3fx", (double)why_sum(r, "a") / (double)lru->misses);
		if (markdown) {
			fprintf(out, "| %s | %llu |", r->policy, (unsigned long long)r->misses);
			for (int k = 0; k < 4; k++)
				fprintf(out, " %llu |", (unsigned long long)why_sum(r, why_letters[k]));
			fprintf(out, " %s | %llu | %s |", vl, (unsigned long long)r->why_info[RI_posted],
				used);
			for (unsigned c = 0; c < RW_N; c++)
				fprintf(out, " %llu |", (unsigned long long)r->why[c]);
			for (unsigned c = 0; c < RH_N; c++)
				fprintf(out, " %llu |", (unsigned long long)r->why_hist[c]);
			fputc('\n', out);
		} else {
			fprintf(out, "%-17s %8llu", r->policy, (unsigned long long)r->misses);
			for (int k = 0; k < 4; k++)
				fprintf(out, " %8llu", (unsigned long long)why_sum(r, why_letters[k]));
			fprintf(out, " %9s %9llu %6s\n", vl, (unsigned long long)r->why_info[RI_posted],
				used);
		}
	}
	if (markdown)
		return;
	static const struct why_group classes[] = {
		{RW_N, replay_why_name, offsetof(struct replay_result, why)},
		{RH_N, replay_hist_name, offsetof(struct replay_result, why_hist)}};
	static const struct why_group info[] = {
		{RI_N, replay_info_name, offsetof(struct replay_result, why_info)}};
	why_table(out, res, n, "by class (replay_why.h), and by history (each also sums to the misses)",
		  classes, 2);
	/* Every why_info counter (REPLAY_WHY_INFO), as --json carries them. */
	why_table(out, res, n, "the posting and each tier's copies (why_info)", info, 1);
	fputc('\n', out);
	for (unsigned c = 0; c < RW_N; c++)
		fprintf(out, "%s (%s): %s\n", replay_why_name(c), replay_why_class(c), replay_why_what(c));
	for (unsigned c = 0; c < RH_N; c++)
		fprintf(out, "%s: %s\n", replay_hist_name(c), replay_hist_what(c));
	for (unsigned c = 0; c < RI_N; c++)
		fprintf(out, "%s: %s\n", replay_info_name(c), replay_info_what(c));
	fprintf(out,
		"a/lru: the never-predicted misses against lru's misses (the predictor's ceiling, issue 18);\n"
		"used: posted_used / posted, the posting's precision\n");
}
