/* SPDX-License-Identifier: Apache-2.0 */
/*
 * eb_report.c: the repeated, interleaved protocol's statistics and tables,
 * from one row per (config, repetition, mode): what `fs-engine-bench run`
 * prints at its end and what `fs-engine-bench report FILE.csv...` prints
 * from the CSV (bench/engine/results.sh puts that into
 * docs/results/engine.md, so nobody retypes a figure).  One code path.
 *
 * Per config and mode: the median over repetitions of tokens/s with a 95 %
 * bootstrap interval (resampling the repetitions, 4000 draws, a fixed
 * seed: the same CSV always gives the same table).  The best peer is the
 * peer (static, strata-adapt, lru) with the highest median.  Every mode is
 * then compared with it repetition by repetition (the modes of one
 * repetition ran next to each other): tokens/s relative to the best peer,
 * and the share of the zero-miss headroom above it,
 * (mode - peer) / (zero - peer); each is a median with its bootstrap
 * interval, and an interval that includes 0 prints as "no effect".  With a
 * clairvoyant bound on misses (the `bound_mplw` column: full knowledge of
 * the future at the bus rate, tools/replay), also the share of the misses
 * the bound removes that the mode removes, (peer - mode) / (peer - bound)
 * in misses per layer-window.
 *
 * A config fails (the report and the run exit non-zero) when a promised
 * (mode, repetition) is missing or failed.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eb.h"
#include "fs_opt.h"

#define BOOT_DRAWS 4000

/* ---- statistics ---------------------------------------------------------- */

static int dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
	double s[EB_MAX_REPS];
	if (n < 1 || n > EB_MAX_REPS)
		return 0;
	memcpy(s, v, (size_t)n * sizeof(*s));
	qsort(s, (size_t)n, sizeof(*s), dcmp);
	return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* The median of v[0..n) and its 95 % percentile-bootstrap interval. */
static void boot_median(const double *v, int n, double *med, double *lo, double *hi)
{
	*med = median(v, n);
	*lo = *hi = *med;
	if (n < 2)
		return;
	static double m[BOOT_DRAWS];
	uint64_t x = 0x9e3779b97f4a7c15ull; /* fixed: the same rows, the same interval */
	double s[EB_MAX_REPS];
	for (int b = 0; b < BOOT_DRAWS; b++) {
		for (int i = 0; i < n; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			s[i] = v[x % (uint64_t)n];
		}
		m[b] = median(s, n);
	}
	qsort(m, BOOT_DRAWS, sizeof(*m), dcmp);
	*lo = m[(int)(0.025 * BOOT_DRAWS)];
	*hi = m[(int)(0.975 * BOOT_DRAWS) - 1];
}

/* ---- records ---------------------------------------------------------------- */

#define EB_CSV_COLUMNS(X)                                            \
	X(label, "%s", r->label)                                     \
	X(rep, "%d", r->rep)                                         \
	X(mode, "%s", eb_mode_name(r->mode))                         \
	X(status, "%s", r->ok ? "ok" : "FAILED")                     \
	X(device, "%s", r->device)                                   \
	X(cards, "%u", r->cards)                                     \
	X(engines, "%u", r->engines)                                 \
	X(layers, "%u", r->layers)                                   \
	X(experts, "%u", r->experts)                                 \
	X(topk, "%u", r->topk)                                       \
	X(budget, "%.4f", r->budget)                                 \
	X(slots_per_card, "%llu", (unsigned long long)r->slots)      \
	X(expert_bytes, "%llu", (unsigned long long)r->expert_bytes) \
	X(bus_gbps, "%.6g", r->bus_gbps)                             \
	X(cpu_gbps, "%.6g", r->cpu_gbps)                             \
	X(routing, "%s", r->routing)                                 \
	X(predictor, "%s", r->predictor)                             \
	X(windows, "%u", r->windows)                                 \
	X(tokens_per_s, "%.3f", r->tps)                              \
	X(hit_rate, "%.6f", r->hit)                                  \
	X(misses_per_layer_window, "%.5f", r->mplw)                  \
	X(late_engine, "%.0f", r->late_seen)                         \
	X(late_daemon, "%.0f", r->late_daemon)                       \
	X(bus_gbps_used, "%.4f", r->bus)                             \
	X(copies, "%.0f", r->copies)                                 \
	X(swaps, "%.0f", r->swaps)                                   \
	X(peer_share, "%.6f", r->peer)                               \
	X(bound_mplw, "%.5f", r->bound_mplw)                         \
	X(promised_modes, "%s", promised)                            \
	X(promised_reps, "%d", r->promised_reps)

void eb_csv_header(FILE *f)
{
	const char *sep = "";
#define HDR(name, fmt, val)             \
	fprintf(f, "%s%s", sep, #name); \
	sep = ",";
	EB_CSV_COLUMNS(HDR)
#undef HDR
	fprintf(f, "\n");
}

static void promised_str(uint32_t mask, char *out, size_t len)
{
	size_t n = 0;
	out[0] = 0;
	for (int m = 0; m < EB_NMODES; m++)
		if (mask >> m & 1u)
			n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%s%s", n ? "+" : "",
					      eb_mode_name(m));
}

void eb_csv_row(FILE *f, const struct eb_rec *r)
{
	char promised[256];
	promised_str(r->promised_modes, promised, sizeof(promised));
	const char *sep = "";
#define ROW(name, fmt, val)             \
	fprintf(f, "%s" fmt, sep, val); \
	sep = ",";
	EB_CSV_COLUMNS(ROW)
#undef ROW
	fprintf(f, "\n");
}

/* ---- one config's table ---------------------------------------------------- */

static void cell(char *out, size_t len, double med, double lo, double hi, int n, const char *unit, double k,
		 int effect)
{
	if (n < 1) {
		snprintf(out, len, "n/a");
		return;
	}
	if (n == 1) { /* one repetition: a figure, no interval, no verdict */
		snprintf(out, len, effect ? "%+.1f%s (one run)" : "%.1f (one run)", med * k, unit);
		return;
	}
	if (n == 2 && effect) { /* a bootstrap of two is their range: no verdict either */
		snprintf(out, len, "%+.1f%s (two runs: %+.1f..%+.1f)", med * k, unit, lo * k, hi * k);
		return;
	}
	if (effect && lo <= 0 && hi >= 0)
		snprintf(out, len, "no effect (%+.1f%s, %+.1f..%+.1f)", med * k, unit, lo * k, hi * k);
	else if (effect)
		snprintf(out, len, "**%+.1f%s** (%+.1f..%+.1f)", med * k, unit, lo * k, hi * k);
	else
		snprintf(out, len, "%.1f (%.1f..%.1f)", med * k, lo * k, hi * k);
}

/* One config (rows r[0..n), one label).  Returns 0, or -1 when a promised
 * row is missing or failed. */
static int report_one(FILE *out, const struct eb_rec *r, size_t n)
{
	const struct eb_rec *h = &r[0];
	int reps = h->promised_reps > 0 ? h->promised_reps : 1;
	if (reps > EB_MAX_REPS)
		reps = EB_MAX_REPS;
	/* [mode][rep] -> row */
	const struct eb_rec *at[EB_NMODES][EB_MAX_REPS];
	memset(at, 0, sizeof(at));
	int bad = 0;
	for (size_t i = 0; i < n; i++) {
		if (r[i].mode < 0 || r[i].mode >= EB_NMODES || r[i].rep < 1 || r[i].rep > reps)
			continue;
		at[r[i].mode][r[i].rep - 1] = &r[i];
	}
	fprintf(out, "\n#### %s\n\n", h->label);
	fprintf(out,
		"%u card(s), %u engine(s), %s device; %u layers x %u experts, top-%u, %.2f MiB per expert; "
		"%llu slots per card (%.0f %% of all experts); bus %.3g GB/s per card, CPU path %.3g GB/s; "
		"routing: %s; predictor: %s; %u decode windows per run, %d repetitions, modes interleaved "
		"within each\n\n",
		h->cards, h->engines, h->device, h->layers, h->experts, h->topk,
		(double)h->expert_bytes / 1048576.0, (unsigned long long)h->slots, h->budget * 100,
		h->bus_gbps, h->cpu_gbps, h->routing, h->predictor, h->windows, reps);
	/* medians of tokens/s; the best peer */
	double med[EB_NMODES], lo[EB_NMODES], hi[EB_NMODES];
	int have[EB_NMODES] = {0};
	int best = -1;
	for (int m = 0; m < EB_NMODES; m++) {
		if (!(h->promised_modes >> m & 1u))
			continue;
		double v[EB_MAX_REPS];
		int k = 0;
		for (int q = 0; q < reps; q++) {
			if (!at[m][q] || !at[m][q]->ok) {
				bad = 1;
				continue;
			}
			v[k++] = at[m][q]->tps;
		}
		have[m] = k;
		if (k)
			boot_median(v, k, &med[m], &lo[m], &hi[m]);
		if (k && eb_mode_peer(m) && (best < 0 || med[m] > med[best]))
			best = m;
	}
	int has_bound = 0;
	for (size_t i = 0; i < n; i++)
		has_bound |= r[i].bound_mplw >= 0;
	fprintf(out,
		"| mode | tokens/s: median (95 %% CI) | hit rate | misses/layer-window | bus GB/s | "
		"tokens/s vs the best peer | share of the zero-miss headroom above the best peer |%s\n",
		has_bound ? " share of the misses the clairvoyant bound removes |" : "");
	fprintf(out, "|---|---|---|---|---|---|---|%s\n", has_bound ? "---|" : "");
	for (int m = 0; m < EB_NMODES; m++) {
		if (!(h->promised_modes >> m & 1u))
			continue;
		char tps[96], vs[96] = "n/a", sh[160] = "", cv[96] = "n/a";
		if (!have[m]) {
			fprintf(out, "| %s | MISSING or FAILED (0 of %d repetitions) | | | | | |%s\n",
				eb_mode_name(m), reps, has_bound ? " |" : "");
			continue;
		}
		cell(tps, sizeof(tps), med[m], lo[m], hi[m], have[m], "", 1, 0);
		if (have[m] < reps)
			snprintf(tps + strlen(tps), sizeof(tps) - strlen(tps), ", FAILED in %d of %d",
				 reps - have[m], reps);
		double hit[EB_MAX_REPS], mp[EB_MAX_REPS], bus[EB_MAX_REPS], rel[EB_MAX_REPS],
			share[EB_MAX_REPS], cvs[EB_MAX_REPS];
		int k = 0, kr = 0, ks = 0, kc = 0;
		for (int q = 0; q < reps; q++) {
			const struct eb_rec *x = at[m][q];
			if (!x || !x->ok)
				continue;
			hit[k] = x->hit, mp[k] = x->mplw, bus[k] = x->bus;
			k++;
			const struct eb_rec *p = best >= 0 ? at[best][q] : NULL;
			const struct eb_rec *z = at[EB_ZERO][q];
			if (!p || !p->ok || p->tps <= 0)
				continue;
			rel[kr++] = x->tps / p->tps - 1.0;
			if (z && z->ok && z->tps > p->tps)
				share[ks++] = (x->tps - p->tps) / (z->tps - p->tps);
			if (x->bound_mplw >= 0 && p->mplw > x->bound_mplw)
				cvs[kc++] = (p->mplw - x->mplw) / (p->mplw - x->bound_mplw);
		}
		double a, b, c;
		if (m == best || m == EB_ZERO || !kr)
			snprintf(sh, sizeof(sh), "n/a");
		if (m == best) {
			snprintf(vs, sizeof(vs), "best peer");
			snprintf(sh, sizeof(sh), "0 (reference)");
		} else if (m == EB_ZERO) {
			if (kr) {
				boot_median(rel, kr, &a, &b, &c);
				cell(vs, sizeof(vs), a, b, c, kr, " %", 100, 1);
			}
			snprintf(sh, sizeof(sh), "100 %% (ceiling)");
		} else {
			if (kr) {
				boot_median(rel, kr, &a, &b, &c);
				cell(vs, sizeof(vs), a, b, c, kr, " %", 100, 1);
			}
			if (ks) {
				boot_median(share, ks, &a, &b, &c);
				cell(sh, sizeof(sh), a, b, c, ks, " %", 100, 1);
			}
			if (ks < kr) /* zero-miss was not faster than the peer in the others */
				snprintf(sh + strlen(sh), sizeof(sh) - strlen(sh),
					 "%sheadroom in %d of %d repetitions", ks ? "; " : "", ks, kr);
		}
		if (kc && m != EB_ZERO && m != best) {
			boot_median(cvs, kc, &a, &b, &c);
			cell(cv, sizeof(cv), a, b, c, kc, " %", 100, 1);
		}
		fprintf(out, "| %s | %s | %.2f %% | %.3f | %.2f | %s | %s |", eb_mode_name(m), tps,
			100.0 * median(hit, k), median(mp, k), median(bus, k), vs, sh);
		if (has_bound)
			fprintf(out, " %s |", cv);
		fprintf(out, "\n");
	}
	if (best >= 0)
		fprintf(out, "\nbest peer: **%s** (%.1f tokens/s median)\n", eb_mode_name(best), med[best]);
	else
		fprintf(out, "\nbest peer: none ran\n");
	if (bad)
		fprintf(out, "**FAILED: a promised (mode, repetition) is missing or failed**\n");
	fflush(out);
	return bad ? -1 : 0;
}

int eb_report(FILE *out, const struct eb_rec *r, size_t n)
{
	int bad = 0;
	uint8_t *done = calloc(n ? n : 1, 1);
	struct eb_rec *g = malloc((n ? n : 1) * sizeof(*g));
	if (!done || !g) {
		free(done);
		free(g);
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		if (done[i])
			continue;
		size_t k = 0;
		for (size_t j = i; j < n; j++)
			if (!done[j] && strcmp(r[j].label, r[i].label) == 0) {
				g[k++] = r[j];
				done[j] = 1;
			}
		bad += report_one(out, g, k) != 0;
	}
	free(done);
	free(g);
	return bad;
}

/* ---- the CSV ---------------------------------------------------------------- */

static char *field(char **p)
{
	char *s = *p, *c = strchr(s, ',');
	if (c) {
		*c = 0;
		*p = c + 1;
	} else {
		s[strcspn(s, "\r\n")] = 0;
		*p = s + strlen(s);
	}
	return s;
}

static uint32_t promised_parse(const char *s)
{
	uint32_t mask = 0;
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", s);
	char *save = NULL;
	for (char *t = strtok_r(buf, "+", &save); t; t = strtok_r(NULL, "+", &save)) {
		int m = eb_mode_by_name(t);
		if (m >= 0)
			mask |= 1u << m;
	}
	return mask;
}

/* Append FILE's rows to *r (n, cap).  0, or -1 with a message. */
static int csv_load(const char *path, struct eb_rec **r, size_t *n, size_t *cap)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "fs-engine-bench report: %s: %s\n", path, strerror(errno));
		return -1;
	}
	char line[4096], hdr[4096];
	if (!fgets(hdr, sizeof(hdr), f)) {
		fprintf(stderr, "fs-engine-bench report: %s: empty\n", path);
		fclose(f);
		return -1;
	}
	char *names[64];
	int nc = 0;
	for (char *p = hdr; *p && nc < 64;)
		names[nc++] = field(&p);
	int rc = 0;
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '\n' || line[0] == 0)
			continue;
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 256;
			struct eb_rec *g = realloc(*r, *cap * sizeof(**r));
			if (!g) {
				rc = -1;
				break;
			}
			*r = g;
		}
		struct eb_rec *x = &(*r)[*n];
		memset(x, 0, sizeof(*x));
		x->bound_mplw = -1;
		x->mode = -1;
		char *p = line;
		for (int i = 0; i < nc && *p; i++) {
			const char *k = names[i], *v = field(&p);
			if (!strcmp(k, "label"))
				snprintf(x->label, sizeof(x->label), "%s", v);
			else if (!strcmp(k, "rep"))
				x->rep = atoi(v);
			else if (!strcmp(k, "mode"))
				x->mode = eb_mode_by_name(v);
			else if (!strcmp(k, "status"))
				x->ok = !strcmp(v, "ok");
			else if (!strcmp(k, "device"))
				snprintf(x->device, sizeof(x->device), "%s", v);
			else if (!strcmp(k, "cards"))
				x->cards = (uint32_t)atoi(v);
			else if (!strcmp(k, "engines"))
				x->engines = (uint32_t)atoi(v);
			else if (!strcmp(k, "layers"))
				x->layers = (uint32_t)atoi(v);
			else if (!strcmp(k, "experts"))
				x->experts = (uint32_t)atoi(v);
			else if (!strcmp(k, "topk"))
				x->topk = (uint32_t)atoi(v);
			else if (!strcmp(k, "budget"))
				x->budget = strtod(v, NULL);
			else if (!strcmp(k, "slots_per_card"))
				x->slots = strtoull(v, NULL, 10);
			else if (!strcmp(k, "expert_bytes"))
				x->expert_bytes = strtoull(v, NULL, 10);
			else if (!strcmp(k, "bus_gbps"))
				x->bus_gbps = strtod(v, NULL);
			else if (!strcmp(k, "cpu_gbps"))
				x->cpu_gbps = strtod(v, NULL);
			else if (!strcmp(k, "routing"))
				snprintf(x->routing, sizeof(x->routing), "%s", v);
			else if (!strcmp(k, "predictor"))
				snprintf(x->predictor, sizeof(x->predictor), "%s", v);
			else if (!strcmp(k, "windows"))
				x->windows = (uint32_t)atoi(v);
			else if (!strcmp(k, "tokens_per_s"))
				x->tps = strtod(v, NULL);
			else if (!strcmp(k, "hit_rate"))
				x->hit = strtod(v, NULL);
			else if (!strcmp(k, "misses_per_layer_window"))
				x->mplw = strtod(v, NULL);
			else if (!strcmp(k, "late_engine"))
				x->late_seen = strtod(v, NULL);
			else if (!strcmp(k, "late_daemon"))
				x->late_daemon = strtod(v, NULL);
			else if (!strcmp(k, "bus_gbps_used"))
				x->bus = strtod(v, NULL);
			else if (!strcmp(k, "copies"))
				x->copies = strtod(v, NULL);
			else if (!strcmp(k, "swaps"))
				x->swaps = strtod(v, NULL);
			else if (!strcmp(k, "peer_share"))
				x->peer = strtod(v, NULL);
			else if (!strcmp(k, "bound_mplw"))
				x->bound_mplw = *v ? strtod(v, NULL) : -1;
			else if (!strcmp(k, "promised_modes"))
				x->promised_modes = promised_parse(v);
			else if (!strcmp(k, "promised_reps"))
				x->promised_reps = atoi(v);
		}
		if (!x->label[0] || x->mode < 0 || !x->promised_modes) {
			fprintf(stderr,
				"fs-engine-bench report: %s: a row without label, mode or promised modes\n",
				path);
			rc = -1;
			continue;
		}
		(*n)++;
	}
	fclose(f);
	return rc;
}

int eb_report_main(int argc, char **argv)
{
	const char *files[256];
	unsigned nfiles = 0;
	const struct fs_opt_cmd cmd = {
		.prog = "fs-engine-bench report",
		.usage =
			"usage: fs-engine-bench report FILE.csv...\n"
			"Prints one table per config (label) of the CSVs `fs-engine-bench run --csv` wrote:\n"
			"medians over the repetitions with 95 % bootstrap intervals, the best peer, every mode\n"
			"against it and against zero-miss.  Exits 1 when a promised row is missing or failed.\n\n",
		.pos = files,
		.max_pos = 256,
		.npos = &nfiles};
	fs_opt_parse_or_exit(&cmd, argc, argv);
	if (nfiles == 0) {
		fs_opt_help(&cmd, stderr);
		return 2;
	}
	struct eb_rec *r = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	for (unsigned i = 0; i < nfiles; i++)
		if (csv_load(files[i], &r, &n, &cap) != 0)
			rc = 1;
	if (n == 0) {
		fprintf(stderr, "fs-engine-bench report: no rows\n");
		free(r);
		return 1;
	}
	int bad = eb_report(stdout, r, n);
	free(r);
	if (bad)
		fprintf(stderr,
			"fs-engine-bench report: FAILED: %d config(s) with a promised row missing or failed\n",
			bad);
	return bad || rc ? 1 : 0;
}
