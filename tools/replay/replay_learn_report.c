/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_learn_report.c: what the core's learned predictor did in a run
 * (fsr_learn_stats, daemon/residency/fsr_learn.c): per horizon its recall
 * at k and 2k (k: the experts the window used at the target layer, the
 * model's top-k for windows of one token) and the precision of what it
 * posted; and its calibration, per decile of the probability it gave:
 * how often a candidate there was used.  After --why's tables, and in
 * --json as "learn" (null where no learner ran).
 */
#include <stdio.h>

#include "replay.h"

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

void replay_report_learn_json(FILE *out, const struct replay_result *r)
{
	const struct fsr_learn_stats *s = &r->learn;
	if (!s->on) {
		fputs(", \"learn\": null", out);
		return;
	}
	fprintf(out,
		", \"learn\": {\"row_entries\": %u, \"bytes\": %llu, \"records\": %llu, \"windows\": %llu, "
		"\"predictions\": %llu, \"horizons\": [",
		s->row_entries, (unsigned long long)s->bytes, (unsigned long long)s->records,
		(unsigned long long)s->windows, (unsigned long long)s->predictions);
	for (unsigned h = 0; h < FSR_HORIZONS; h++) {
		const struct fsr_learn_hstats *x = &s->h[h];
		fprintf(out,
			"%s{\"horizon\": %u, \"targets\": %llu, \"used\": %llu, \"recall_at_k\": %.6f, "
			"\"recall_at_2k\": %.6f, \"posted\": %llu, \"posted_used\": %llu, \"precision\": %.6f}",
			h ? ", " : "", h + 1, (unsigned long long)x->targets, (unsigned long long)x->used,
			ratio(x->at_k, x->used), ratio(x->at_2k, x->used), (unsigned long long)x->posted,
			(unsigned long long)x->posted_used, ratio(x->posted_used, x->posted));
	}
	fputs("], \"reliability\": [", out);
	for (unsigned d = 0, first = 1; d < FSR_LEARN_REL; d++) {
		if (!s->rel_n[d])
			continue;
		fprintf(out,
			"%s{\"p_from\": %.2f, \"p_to\": %.2f, \"n\": %llu, \"mean_p\": %.6f, \"used\": %.6f}",
			first ? "" : ", ", (double)d / FSR_LEARN_REL, (double)(d + 1) / FSR_LEARN_REL,
			(unsigned long long)s->rel_n[d], s->rel_p[d] / (double)s->rel_n[d],
			ratio(s->rel_hit[d], s->rel_n[d]));
		first = 0;
	}
	fputs("]}", out);
}

void replay_report_learn(FILE *out, const struct replay_result *res, int n, int markdown)
{
	int any = 0;
	for (int i = 0; i < n; i++)
		any |= res[i].learn.on;
	if (!any)
		return;
	if (markdown)
		fprintf(out, "\n| policy | horizon | recall at k | at 2k | posted | posted and used |\n"
			     "|---|---:|---:|---:|---:|---:|\n");
	else
		fprintf(out,
			"\nthe learned predictor (fsr_learn.c): per horizon, recall at k and 2k of the "
			"experts used (k: those\nused at the layer), and what it posted (not resident):\n"
			"%-17s %7s %9s %9s %9s %9s\n",
			"policy", "horizon", "at k", "at 2k", "posted", "used");
	for (int i = 0; i < n; i++) {
		const struct fsr_learn_stats *s = &res[i].learn;
		for (unsigned h = 0; s->on && h < FSR_HORIZONS; h++) {
			const struct fsr_learn_hstats *x = &s->h[h];
			if (markdown)
				fprintf(out, "| %s | %u | %.3f | %.3f | %llu | %.1f %% |\n", res[i].policy,
					h + 1, ratio(x->at_k, x->used), ratio(x->at_2k, x->used),
					(unsigned long long)x->posted,
					100.0 * ratio(x->posted_used, x->posted));
			else
				fprintf(out, "%-17s %7u %9.3f %9.3f %9llu %8.1f%%\n", res[i].policy, h + 1,
					ratio(x->at_k, x->used), ratio(x->at_2k, x->used),
					(unsigned long long)x->posted,
					100.0 * ratio(x->posted_used, x->posted));
		}
	}
	if (markdown)
		return;
	fprintf(out, "its calibration: per decile of the probability it gave, candidates judged, their mean "
		     "probability,\nand the share used:\n");
	for (int i = 0; i < n; i++) {
		const struct fsr_learn_stats *s = &res[i].learn;
		if (!s->on)
			continue;
		fprintf(out, "%-17s", res[i].policy);
		for (unsigned d = 0; d < FSR_LEARN_REL; d++)
			if (s->rel_n[d])
				fprintf(out, " %.1f: %llu, %.3f -> %.3f;", (double)d / FSR_LEARN_REL,
					(unsigned long long)s->rel_n[d], s->rel_p[d] / (double)s->rel_n[d],
					ratio(s->rel_hit[d], s->rel_n[d]));
		fputc('\n', out);
	}
}
