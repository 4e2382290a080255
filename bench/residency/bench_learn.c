/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-bench-learn: what the learned predictor (daemon/residency/fsr_learn.c)
 * costs the hot thread, against the same core without it, in one run.
 *
 * An engine's decode is played through the residency core in the order of
 * foresightd's hot engine (daemon/engine/fse_pass.c): per layer, the
 * layer's usage records (fsr_record), the pass's copies (fsr_take_copies),
 * landed at once, the table published, holds read, slots reclaimed, then
 * the learner's work (fsr_learn_flush), and a second pass that copies what
 * it predicted.  Timed per layer, on the core's clock of the pass:
 *  - issue path: from the first record in to take_copies' return, the
 *    core's part of every post -> copy issued of the pass (the learner's
 *    part of it is the records' bookkeeping only: it learns and predicts
 *    after the copies went out);
 *  - learner: the fsr_learn_flush steps per layer, each after a pass's
 *    copies went out;
 *  - its longest step: what a record that arrives meanwhile waits for.
 *
 * Modes, interleaved per repetition (A B C A B C ...), each on a fresh
 * core over the same routing:
 *   bare     learn off (the reference)
 *   learned  learn auto, the engine posts usage only: the learner learns
 *            and predicts every layer
 *   silent   learn auto, the engine posts a prediction of its own per
 *            layer: the learner learns, predicts nothing (its cost for an
 *            engine with its own predictor)
 * The table: per mode ns per record (the layer's time over its records)
 * and the per-layer time's p50 and p99, each a median over the
 * repetitions with their range; per mode against bare, the ratio paired
 * per repetition (median, range).  Exit 1 when a row could not be
 * measured.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs_counters.h"
#include "fs_opt.h"
#include "fs_trace.h"
#include "fs_trace_model.h"
#include "fsr.h"

enum { M_BARE, M_LEARNED, M_SILENT, M_N };
static const char *const mode_name[M_N] = {"bare", "learned", "silent"};

struct opts {
	uint32_t layers, experts, topk, tpw, windows, warm, reps;
	double slots_frac;
	const char *trace;
	int quick;
};

struct one {
	double ns_per_rec, p50, p99; /* the issue path: per record, and its per-layer p50, p99 (ns) */
	double l50, l99;             /* the learner's work per layer (ns) */
	double a50, a99;             /* its longest step per layer (ns): what a record may wait */
	int ok;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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

static void post(struct fsr *r, uint8_t type, uint8_t aux, uint32_t layer, uint32_t expert, uint32_t window,
		 uint32_t value, uint64_t vt)
{
	struct fs_rec x = {.type = type,
			   .aux = aux,
			   .layer = (uint16_t)layer,
			   .expert = (uint16_t)expert,
			   .card = 0,
			   .window = window,
			   .value = value};
	fsr_record(r, 0, &x, vt);
}

/* One mode over the routing; fills o.  0 or -errno. */
static int run_mode(const struct opts *op, const struct fs_trace *t, int mode, struct one *o)
{
	uint64_t cd[FS_N_DAEMON] = {0}, *cc = calloc(FS_N_CARD, 8),
		 *cl = calloc((size_t)t->layers * FS_N_LAYER, 8), *ccl = calloc(FS_N_CLIENT, 8),
		 *table = calloc((size_t)t->layers * t->experts, 8);
	uint32_t nw = fs_trace_windows(t, op->tpw);
	uint64_t *lt = calloc((size_t)nw * t->layers * 3, sizeof(uint64_t));
	struct fs_trace_iter it;
	int rc = fs_trace_iter_init(&it, t, op->tpw);
	if (!cc || !cl || !ccl || !table || !lt || rc) {
		free(cc), free(cl), free(ccl), free(table), free(lt);
		return rc ? rc : -ENOMEM;
	}
	struct fsr_config c = {.cards = 1, .layers = t->layers, .experts = t->experts, .max_clients = 1};
	c.slots[0] = (uint32_t)(op->slots_frac * t->layers * t->experts);
	c.uniform_bytes = 1769472; /* the discussion's 1.8 MB experts over its 13.5 GB/s link */
	c.counters = (struct fsr_counters){cd, cc, cl, ccl};
	fsr_config_tiers(&c);
	c.bus_gbps = 13.5;
	c.learn = mode == M_BARE ? FSR_LEARN_OFF : FSR_LEARN_AUTO;
	c.learn_min_p = 0.01f; /* foresightd's default */
	struct fsr *r = fsr_create(&c);
	if (!r || fsr_client_add(r, 0) != 0) {
		fsr_destroy(r);
		fs_trace_iter_free(&it);
		free(cc), free(cl), free(ccl), free(table), free(lt);
		return -EINVAL;
	}
	uint64_t vt = 0, recs = 0, sum = 0, nlt = 0;
	const uint64_t layer_vt = 270833; /* the virtual clock: the discussion's per-layer time */
	struct fsr_copy cp[64];
	uint32_t w = 0;
	while (fs_trace_iter_next(&it)) {
		w++;
		int timed = w > op->warm;
		post(r, FS_REC_WIN_BEGIN, 0, 0, 0, w, it.n_tokens, vt);
		for (uint32_t l = 0; l < t->layers; l++) {
			const uint16_t *ex;
			uint32_t n = fs_trace_iter_experts(&it, l, &ex);
			uint64_t t0 = now_ns();
			for (uint32_t k = 0; k < n; k++) {
				uint32_t s = fsr_lookup(r, 0, l, ex[k]);
				struct fsr_slot_info si;
				int hit = s != FSR_NONE && fsr_slot_info(r, 0, s, &si) == 0 &&
					  si.state == FSR_RESIDENT;
				post(r, FS_REC_USAGE, hit ? FS_USE_HIT : FS_USE_MISS, l, ex[k], w, 0, vt);
			}
			if (mode == M_SILENT && l + 1 < t->layers && n) {
				float one = 0.5f;
				uint32_t v;
				memcpy(&v, &one, sizeof(v));
				post(r, FS_REC_PREDICT, FS_PRED_AUX(1, FS_SRC_HOST), l + 1, ex[0], w, v, vt);
			}
			uint64_t t1 = 0, t2 = 0, step = 0;
			for (int pass = 0, more = 1; more && pass < 64; pass++) { /* until nothing is left */
				unsigned nc = fsr_take_copies(r, 0, cp, 64, vt);
				if (pass == 0)
					t1 = now_ns();
				for (unsigned i = 0; i < nc; i++)
					fsr_copy_done(r, 0, cp[i].slot, cp[i].gen, vt + layer_vt / 2);
				if (fsr_dirty(r)) {
					fsr_fill(r, table);
					fsr_publish(r);
				}
				uint64_t holds[FS_MAX_HOLDS] = {0};
				fsr_client_holds(r, 0, holds);
				fsr_reclaim(r);
				uint64_t tf = now_ns();
				more = nc > 0 || fsr_learn_flush(r) > 0;
				uint64_t d = now_ns() - tf;
				t2 += d;
				step = d > step ? d : step;
			}
			if (timed) {
				lt[3 * nlt] = t1 - t0;
				lt[3 * nlt + 1] = t2;
				lt[3 * nlt + 2] = step;
				nlt++;
				sum += t1 - t0;
				recs += n + (mode == M_SILENT && l + 1 < t->layers && n);
			}
			vt += layer_vt;
		}
		post(r, FS_REC_WIN_END, 0, 0, 0, w, 0, vt);
		if (w >= op->warm + op->windows)
			break;
	}
	struct fsr_learn_stats st;
	fsr_learn_stats(r, &st);
	int learner_ok = mode == M_BARE ?
				 !st.on :
				 st.on && st.records > 0 &&
					 (mode == M_LEARNED ? st.predictions > 0 : st.predictions == 0);
	fsr_destroy(r);
	fs_trace_iter_free(&it);
	if (nlt && recs && learner_ok) {
		uint64_t *col = malloc(nlt * sizeof(uint64_t));
		double *q[3][2] = {{&o->p50, &o->p99}, {&o->l50, &o->l99}, {&o->a50, &o->a99}};
		for (int k = 0; col && k < 3; k++) {
			for (uint64_t i = 0; i < nlt; i++)
				col[i] = lt[3 * i + k];
			qsort(col, nlt, sizeof(col[0]), cmp_u64);
			*q[k][0] = (double)col[nlt / 2];
			*q[k][1] = (double)col[nlt * 99 / 100];
		}
		o->ns_per_rec = (double)sum / (double)recs;
		o->ok = col != NULL;
		free(col);
	}
	free(cc), free(cl), free(ccl), free(table), free(lt);
	return o->ok ? 0 : -EIO;
}

static void med(double *v, unsigned n, double *m, double *lo, double *hi)
{
	qsort(v, n, sizeof(double), cmp_dbl);
	*m = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
	*lo = v[0];
	*hi = v[n - 1];
}

int main(int argc, char **argv)
{
	struct opts op = {.layers = 48,
			  .experts = 128,
			  .topk = 6,
			  .tpw = 1,
			  .windows = 300,
			  .warm = 100,
			  .reps = 5,
			  .slots_frac = 0.25};
	const struct fs_opt opts[] = {
		FS_OPT_U32("layers", "N", &op.layers, 1, 1024, "layers of the calibrated routing model (48)"),
		FS_OPT_U32("experts", "N", &op.experts, 2, 4096, "experts per layer (128)"),
		FS_OPT_U32("topk", "K", &op.topk, 1, 64, "experts per token (6)"),
		FS_OPT_U32("tpw", "T", &op.tpw, 1, 64, "tokens per window (1)"),
		FS_OPT_U32("windows", "N", &op.windows, 1, 1000000, "timed windows per run (300)"),
		FS_OPT_U32("warm", "N", &op.warm, 0, 1000000, "windows before the timed ones (100)"),
		FS_OPT_U32("reps", "N", &op.reps, 1, 100, "repetitions, modes interleaved (5)"),
		FS_OPT_DBL("slots-frac", "F", &op.slots_frac, 0.01, 1.0,
			   "slots as a share of all experts (0.25)"),
		FS_OPT_STR("trace", "FILE", &op.trace, "a route CSV / .fstrace instead of the model"),
		FS_OPT_FLAG("quick", 'q', &op.quick, "a smoke run: 2 repetitions of 30 windows"),
	};
	const struct fs_opt_cmd cmd = {
		.prog = "fs-bench-learn",
		.usage = "usage: fs-bench-learn [options]\n\nThe learned predictor's cost in the hot thread, "
			 "against the core without it (bench/residency).\n\n",
		.opts = opts,
		.n = FS_OPT_N(opts)};
	fs_opt_parse_or_exit(&cmd, argc, argv);
	if (op.quick) {
		op.reps = 2;
		op.windows = 30;
		op.warm = 10;
	}
	struct fs_trace t;
	char err[256] = "";
	uint32_t tokens = (op.warm + op.windows) * op.tpw;
	int rc = op.trace ? fs_trace_load(&t, op.trace, err, sizeof(err)) :
			    fs_trace_model_simple(&t, op.layers, op.experts, op.topk, tokens, 500, 1, err,
						  sizeof(err));
	if (rc) {
		fprintf(stderr, "fs-bench-learn: %s\n", err);
		return 2;
	}
	printf("fs-bench-learn: %u layers x %u experts, top-%u, %u token(s) per window, %s; %.0f %% slots; "
	       "%u timed windows after %u, %u repetitions, modes interleaved\n",
	       t.layers, t.experts, t.topk, op.tpw, op.trace ? op.trace : "calibrated routing model",
	       100 * op.slots_frac, op.windows, op.warm, op.reps);
	enum { NQ = 7 };
	double v[M_N][NQ][100], ratio[M_N][NQ][100];
	int fail = 0;
	for (uint32_t rep = 0; rep < op.reps; rep++) {
		struct one o[M_N];
		memset(o, 0, sizeof(o));
		for (int m = 0; m < M_N; m++) {
			if (run_mode(&op, &t, m, &o[m]) != 0) {
				printf("%s, repetition %u: FAILED (not measured, or the learner did not run as the mode "
				       "says)\n",
				       mode_name[m], rep + 1);
				fail = 1;
			}
		}
		for (int m = 0; m < M_N; m++) {
			double x[NQ] = {o[m].ns_per_rec, o[m].p50, o[m].p99, o[m].l50,
					o[m].l99,        o[m].a50, o[m].a99};
			double b[NQ] = {o[0].ns_per_rec, o[0].p50, o[0].p99, o[0].l50,
					o[0].l99,        o[0].a50, o[0].a99};
			for (int k = 0; k < NQ; k++) {
				v[m][k][rep] = x[k];
				ratio[m][k][rep] = b[k] > 0 ? x[k] / b[k] : 0;
			}
		}
	}
	printf("\n| mode | issue path: ns per record | issue path per layer p50 (us) | p99 (us) | learner per layer "
	       "p50 (us) | p99 (us) | its longest step p50 (us) | p99 (us) | issue path p50 / bare | p99 / bare |\n"
	       "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int m = 0; m < M_N; m++) {
		double a[NQ][3], q[NQ][3];
		for (int k = 0; k < NQ; k++) {
			med(v[m][k], op.reps, &a[k][0], &a[k][1], &a[k][2]);
			med(ratio[m][k], op.reps, &q[k][0], &q[k][1], &q[k][2]);
		}
		printf("| %s | %.0f (%.0f..%.0f) |", mode_name[m], a[0][0], a[0][1], a[0][2]);
		for (int k = 1; k < NQ; k++)
			printf(" %.2f (%.2f..%.2f) |", a[k][0] / 1e3, a[k][1] / 1e3, a[k][2] / 1e3);
		if (m == M_BARE)
			printf(" 1 (reference) | 1 |\n");
		else
			printf(" %.2f (%.2f..%.2f) | %.2f (%.2f..%.2f) |\n", q[1][0], q[1][1], q[1][2],
			       q[2][0], q[2][1], q[2][2]);
	}
	printf("\nmedian (range) over the repetitions; ratios paired per repetition.  Issue path: the layer's\n"
	       "records in, then take_copies (the core's part of post -> copy issued).  Learner: fsr_learn_flush,\n"
	       "one step a pass, after the pass's copies went out.  Its longest step: what a\n"
	       "record arriving meanwhile waits for at most.\n");
	fs_trace_free(&t);
	if (fail)
		printf("fs-bench-learn: FAILED: a promised row was not measured\n");
	return fail;
}
