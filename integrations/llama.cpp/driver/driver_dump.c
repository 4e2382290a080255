/* SPDX-License-Identifier: Apache-2.0 */
/*
 * driver_dump.c: what fs-llama-driver writes besides timings: logit
 * hashes, the routed experts seen by llama.cpp's eval callback, and the
 * per-repetition and summary lines (table, JSON lines, CSV).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "ggml-backend.h"
#include "ggml.h"

uint64_t drv_fnv1a(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* ---- routes ------------------------------------------------------------- */

int drv_routes_open(struct drv_routes *r, const char *path, uint32_t n_layer, uint32_t first_token,
		    uint32_t n_vocab)
{
	memset(r, 0, sizeof(*r));
	r->seen = calloc(n_layer ? n_layer : 1, sizeof(*r->seen));
	r->f = fopen(path, "w");
	if (!r->f || !r->seen) {
		free(r->seen);
		if (r->f)
			fclose(r->f);
		memset(r, 0, sizeof(*r));
		return -1;
	}
	r->n_layer = n_layer;
	r->first_token = first_token;
	r->n_vocab = n_vocab ? n_vocab : 1;
	fprintf(r->f, "# pos token layer experts (rank order)\n");
	return 0;
}

void drv_routes_batch(struct drv_routes *r, uint32_t pos)
{
	r->base = pos;
	if (r->seen)
		memset(r->seen, 0, r->n_layer * sizeof(*r->seen));
}

static const char topk_name[] = "ffn_moe_topk-";

bool drv_routes_cb(struct ggml_tensor *t, bool ask, void *user)
{
	struct drv_routes *r = user;
	if (!r->f || !r->on || strncmp(t->name, topk_name, sizeof(topk_name) - 1) != 0)
		return ask ? false : true;
	if (ask)
		return true;
	char *end;
	long layer = strtol(t->name + sizeof(topk_name) - 1, &end, 10);
	if (*end || layer < 0 || (uint32_t)layer >= r->n_layer || t->type != GGML_TYPE_I32 || t->ne[2] != 1 ||
	    t->ne[3] != 1) {
		r->bad = 1;
		return true;
	}
	/* the router's top-k is a view of its argsort (rows n_expert apart);
	 * a replayed one is contiguous: read the rows where they are */
	const int64_t k = t->ne[0], n = t->ne[1];
	const size_t bytes = ggml_nbytes(t);
	uint8_t *raw = malloc(bytes);
	if (!raw || t->nb[0] != sizeof(int32_t)) {
		r->bad = 1;
		free(raw);
		return true;
	}
	ggml_backend_tensor_get(t, raw, 0, bytes);
	/* llama_decode hands the batch over in ubatches, in order: this
	 * layer's next rows are the tokens after those it already saw */
	for (int64_t j = 0; j < n; j++) {
		uint32_t pos = r->base + r->seen[layer] + (uint32_t)j;
		fprintf(r->f, "%u %u %ld", pos, (uint32_t)(((uint64_t)r->first_token + pos) % r->n_vocab),
			layer);
		for (int64_t i = 0; i < k; i++) {
			int32_t id;
			memcpy(&id, raw + (size_t)j * t->nb[1] + (size_t)i * sizeof(int32_t), sizeof(id));
			fprintf(r->f, " %d", id);
		}
		fputc('\n', r->f);
		r->rows++;
	}
	free(raw);
	r->seen[layer] += (uint32_t)n;
	return true;
}

int drv_routes_close(struct drv_routes *r)
{
	int rc = 0;
	if (r->f && fclose(r->f) != 0)
		rc = -1;
	free(r->seen);
	r->f = NULL;
	r->seen = NULL;
	return rc ? rc : (r->bad ? -2 : 0);
}

/* ---- reports -------------------------------------------------------------- */

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts a copy). */
static double median(const double *v, unsigned n)
{
	if (n == 0)
		return 0;
	double *c = malloc(n * sizeof(*c));
	if (!c)
		return 0;
	memcpy(c, v, n * sizeof(*c));
	qsort(c, n, sizeof(*c), cmp_dbl);
	double m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
	free(c);
	return m;
}

static double pp_tps(const struct drv_opts *o, const struct drv_rep *r)
{
	return r->pp_s > 0 ? o->pp / r->pp_s : 0;
}

static double tg_tps(const struct drv_opts *o, const struct drv_rep *r)
{
	return r->tg_s > 0 ? o->tg / r->tg_s : 0;
}

/* A JSON string (quotes, backslashes and control characters escaped). */
static void json_str(FILE *f, const char *key, const char *s)
{
	fprintf(f, "\"%s\":\"", key);
	for (const char *p = s ? s : ""; *p; p++) {
		if ((unsigned char)*p < 0x20)
			fprintf(f, "\\u%04x", (unsigned char)*p);
		else if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void json_head(const struct drv_opts *o, FILE *f)
{
	fputc('{', f);
	json_str(f, "label", o->label);
	fputc(',', f);
	json_str(f, "model", o->model);
	fputc(',', f);
	json_str(f, "fa", drv_fa_choices[o->fa]);
	fprintf(f,
		",\"ngl\":%d,\"n_cpu_moe\":%u,\"n_ot\":%u,\"threads\":%u,\"ubatch\":%u,\"pp\":%u,\"tg\":%u",
		o->ngl, o->n_cpu_moe, o->n_ot, o->threads, o->ubatch, o->pp, o->tg);
}

/* The CSV columns every line starts with. */
static void csv_head(const struct drv_opts *o, FILE *f)
{
	fprintf(f, "%s,%s,%d,%u,%u,%s,%u,%u,%u,%u", o->label ? o->label : "", o->model, o->ngl, o->n_cpu_moe,
		o->n_ot, drv_fa_choices[o->fa], o->threads, o->ubatch, o->pp, o->tg);
}

void drv_report_rep(const struct drv_opts *o, FILE *jsonl, FILE *csv, unsigned rep, const struct drv_rep *r)
{
	double p50 = median(r->tg_ms, o->tg);
	printf("| %3u | %10.2f | %10.2f | %9.3f | %016llx | %9llu |\n", rep, pp_tps(o, r), tg_tps(o, r), p50,
	       (unsigned long long)r->logits_hash, (unsigned long long)r->nonfinite);
	if (jsonl) {
		json_head(o, jsonl);
		fprintf(jsonl,
			",\"rep\":%u,\"pp_s\":%.6f,\"pp_tps\":%.3f,\"tg_s\":%.6f,\"tg_tps\":%.3f,\"tg_ms_p50\":%.4f,"
			"\"logits_fnv\":\"%016llx\",\"outputs\":%u,\"nonfinite\":%llu,\"tg_ms\":[",
			rep, r->pp_s, pp_tps(o, r), r->tg_s, tg_tps(o, r), p50,
			(unsigned long long)r->logits_hash, r->outputs, (unsigned long long)r->nonfinite);
		for (uint32_t i = 0; i < o->tg; i++)
			fprintf(jsonl, "%s%.4f", i ? "," : "", r->tg_ms[i]);
		fprintf(jsonl, "]}\n");
	}
	if (csv) {
		csv_head(o, csv);
		fprintf(csv, ",%u,%.3f,%.3f,%.4f,%016llx,%llu\n", rep, pp_tps(o, r), tg_tps(o, r), p50,
			(unsigned long long)r->logits_hash, (unsigned long long)r->nonfinite);
	}
}

void drv_report_summary(const struct drv_opts *o, FILE *jsonl, FILE *csv, const struct drv_rep *reps,
			unsigned n, int identical)
{
	double *pp = malloc((n ? n : 1) * sizeof(*pp)), *tg = malloc((n ? n : 1) * sizeof(*tg));
	double ppmin = 0, ppmax = 0, tgmin = 0, tgmax = 0;
	uint64_t nonfinite = 0;
	if (!pp || !tg) {
		free(pp);
		free(tg);
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		pp[i] = pp_tps(o, &reps[i]);
		tg[i] = tg_tps(o, &reps[i]);
		ppmin = i == 0 || pp[i] < ppmin ? pp[i] : ppmin;
		ppmax = i == 0 || pp[i] > ppmax ? pp[i] : ppmax;
		tgmin = i == 0 || tg[i] < tgmin ? tg[i] : tgmin;
		tgmax = i == 0 || tg[i] > tgmax ? tg[i] : tgmax;
		nonfinite += reps[i].nonfinite;
	}
	double ppm = median(pp, n), tgm = median(tg, n);
	printf("pp%u %.2f t/s (median of %u; %.2f-%.2f), tg%u %.2f t/s (%.2f-%.2f); logits %s across repetitions, "
	       "%llu non-finite\n",
	       o->pp, ppm, n, ppmin, ppmax, o->tg, tgm, tgmin, tgmax,
	       o->rep_stride ? "not compared (--rep-stride)" :
	       identical     ? "identical" :
			       "DIFFERENT",
	       (unsigned long long)nonfinite);
	if (jsonl) {
		json_head(o, jsonl);
		fprintf(jsonl,
			",\"summary\":true,\"reps\":%u,\"pp_tps_median\":%.3f,\"pp_tps_min\":%.3f,\"pp_tps_max\":%.3f,"
			"\"tg_tps_median\":%.3f,\"tg_tps_min\":%.3f,\"tg_tps_max\":%.3f,\"logits_identical\":%s,"
			"\"logits_fnv\":\"%016llx\",\"nonfinite\":%llu}\n",
			n, ppm, ppmin, ppmax, tgm, tgmin, tgmax,
			o->rep_stride ? "null" :
			identical     ? "true" :
					"false",
			(unsigned long long)(n ? reps[0].logits_hash : 0), (unsigned long long)nonfinite);
	}
	if (csv) {
		csv_head(o, csv);
		fprintf(csv, ",median,%.3f,%.3f,,%016llx,%llu\n", ppm, tgm,
			(unsigned long long)(n ? reps[0].logits_hash : 0), (unsigned long long)nonfinite);
	}
	free(pp);
	free(tg);
}
