/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-replay-client: one of fs-replay's engines as a real process against a
 * real foresightd, on the real clock.  It replays windows [--from, --to)
 * of a trace exactly as replay_run.c's engine does on the virtual clock,
 * so a daemon run and an fs-replay run of the same trace can be compared
 * (replay_agree_test.c, issue 19):
 *
 *  - per window: at its start, hold the newest epoch (fs_acquire), then
 *    WIN_BEGIN with the window's tokens; its number is --num plus the
 *    windows replayed before it (fs-replay numbers from warm-up + 1);
 *  - per layer, at the layer's time: each distinct expert the window
 *    routes there is looked up on the engine's own card first, then on the
 *    others in card order, in the held epoch or the newest table whose
 *    slot has landed (fs_lookup_live: replay_run.c's engine_hit), and a
 *    USAGE record names the engine's card; with --predict, the
 *    oracle-noised candidates of the next 1-3 layers (replay_predict.c,
 *    the same seed: the same records);
 *  - a layer takes intercept/L plus miss/L per distinct miss (the model's
 *    linear cost): the next layer starts then, on CLOCK_MONOTONIC against
 *    --start-ns (absolute: a late wake-up does not shift the rest);
 *  - at the end of the last layer: WIN_END, release the hold.
 *
 * Prints one line "uses U hits H misses M windows W predictions P late_us
 * L" (L: how far behind its schedule it ran at worst, microseconds).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <foresight/foresight.h>

#include "fs_opt.h"
#include "fs_trace.h"
#include "replay.h"
#include "replay_predict.h"

struct opts {
	const char *socket, *trace, *name;
	uint32_t from, to, num, card, tokens;
	int predict;
	uint64_t start_ns, seed;
	double intercept_ms, miss_ms;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleep until CLOCK_MONOTONIC t; how late it woke (0 if t had passed). */
static uint64_t sleep_until(uint64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ull), .tv_nsec = (long)(t % 1000000000ull)};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
	uint64_t now = mono_ns();
	return now > t ? now - t : 0;
}

static const char usage[] =
	"usage: fs-replay-client --trace FILE --from W --to W2 [OPTIONS]\n"
	"\n"
	"One of fs-replay's engines as a real process: replays trace windows [W, W2) against\n"
	"foresightd on the real clock, as replay_run.c does on its virtual one.\n"
	"\n";

static int parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){.name = "fs-replay-client",
			   .num = 1,
			   .tokens = 1,
			   .seed = 1,
			   .intercept_ms = 13.0,
			   .miss_ms = 2.78};
	const struct fs_opt opts[] = {
		FS_OPT_STR("socket", "PATH", &o->socket, "foresightd's control socket"),
		FS_OPT_STR("name", "NAME", &o->name, "name shown by `fsctl clients`"),
		FS_OPT_STR("trace", "FILE", &o->trace, "the trace (route CSV or .fstrace)"),
		FS_OPT_U32("from", "W", &o->from, 0, UINT32_MAX, "first trace window replayed"),
		FS_OPT_U32("to", "W", &o->to, 0, UINT32_MAX, "end of the windows replayed (not included)"),
		FS_OPT_U32("num", "N", &o->num, 1, UINT32_MAX / 2, "the first window's number"),
		FS_OPT_U32("card", "C", &o->card, 0, FS_MAX_CARDS - 1, "the card the engine runs on"),
		FS_OPT_U32("tokens-per-window", "T", &o->tokens, 1, 4096, "tokens per window"),
		FS_OPT_DBL("intercept-ms", "MS", &o->intercept_ms, 0, 1e6, "a window with no miss"),
		FS_OPT_DBL("miss-ms", "MS", &o->miss_ms, 0, 1e6, "per distinct miss per layer-window"),
		FS_OPT_U64("start-ns", "T", &o->start_ns, 0, UINT64_MAX,
			   "CLOCK_MONOTONIC time of the first window (0: now)"),
		FS_OPT_FLAG("predict", 0, &o->predict, "post fs-replay's oracle-noised predictions"),
		FS_OPT_U64("seed", "N", &o->seed, 0, UINT64_MAX, "the predictor's seed (fs-replay's --seed)"),
	};
	const struct fs_opt_cmd cmd = {"fs-replay-client", usage, NULL, opts, FS_OPT_N(opts)};
	int rc = fs_opt_parse(&cmd, argc, argv);
	if (rc == FS_OPT_HELP)
		return -1;
	if (rc < 0)
		return 2;
	if (!o->trace || o->to <= o->from) {
		fprintf(stderr, "fs-replay-client: --trace and --from < --to are required\n");
		return 2;
	}
	return 0;
}

struct run {
	const struct opts *o;
	fs_client *c;
	struct fs_trace t;
	struct fs_trace_iter it;
	struct replay_predictor pred;
	uint16_t *cand_e;
	float *cand_s;
	uint32_t cards;
	uint64_t uses, hits, predictions, late_ns, dropped_before;
};

static int hit_any(const struct run *r, const struct fs_view *v, uint32_t layer, uint32_t expert)
{
	struct fs_slot s;
	for (uint32_t i = 0; i < r->cards; i++)
		if (fs_lookup_live(r->c, v, (r->o->card + i) % r->cards, layer, expert, &s))
			return 1;
	return 0;
}

static void predict_ahead(struct run *r, uint32_t num, uint32_t layer)
{
	for (unsigned h = 1; h <= 3 && layer + h < r->t.layers; h++) {
		uint32_t n = replay_predict(&r->pred, r->it.window, r->it.first_token, r->it.n_tokens,
					    layer + h, h, r->cand_e, r->cand_s);
		for (uint32_t i = 0; i < n; i++)
			fs_post_predict(r->c, num, layer + h, r->cand_e[i], r->o->card, r->cand_s[i], h,
					FS_SOURCE_ROUTER_AHEAD);
		r->predictions += n;
	}
}

static void note_late(struct run *r, uint64_t late)
{
	if (late > r->late_ns)
		r->late_ns = late;
}

static int replay(struct run *r)
{
	const struct opts *o = r->o;
	double layer_ms = o->intercept_ms / r->t.layers, miss_ms_l = o->miss_ms / r->t.layers;
	uint64_t t = o->start_ns ? o->start_ns : mono_ns();
	uint32_t num = o->num;
	for (uint32_t w = o->from; w < o->to; w++, num++) {
		if (!fs_trace_iter_seek(&r->it, w)) {
			fprintf(stderr, "fs-replay-client: the trace has no window %u\n", w);
			return 1;
		}
		note_late(r, sleep_until(t));
		struct fs_view v;
		if (fs_acquire(r->c, &v) != 0)
			v.epoch = 0;
		fs_window_begin(r->c, num, r->it.n_tokens);
		for (uint32_t l = 0; l < r->t.layers; l++) {
			if (l > 0)
				note_late(r, sleep_until(t));
			const uint16_t *ex;
			uint32_t n = fs_trace_iter_experts(&r->it, l, &ex), misses = 0;
			for (uint32_t k = 0; k < n; k++) {
				int hit = hit_any(r, &v, l, ex[k]);
				misses += !hit;
				fs_post_usage(r->c, num, l, ex[k], o->card, hit);
			}
			r->uses += n;
			r->hits += n - misses;
			if (o->predict)
				predict_ahead(r, num, l);
			t += (uint64_t)llround((layer_ms + miss_ms_l * misses) * 1e6);
		}
		note_late(r, sleep_until(t));
		fs_window_end(r->c, num);
		fs_release(r->c, &v);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? 0 : rc;
	struct run r = {.o = &o};
	char err[FS_TRACE_ERRLEN];
	if (fs_trace_load(&r.t, o.trace, err, sizeof(err)) != 0) {
		fprintf(stderr, "fs-replay-client: %s\n", err);
		return 2;
	}
	struct replay_model m;
	replay_model_defaults(&m);
	m.seed = o.seed;
	m.tokens_per_window = o.tokens;
	r.cand_e = malloc(r.t.experts * sizeof(*r.cand_e));
	r.cand_s = malloc(r.t.experts * sizeof(*r.cand_s));
	if (!r.cand_e || !r.cand_s || fs_trace_iter_init(&r.it, &r.t, o.tokens) != 0 ||
	    (o.predict && replay_predictor_init(&r.pred, &r.t, &m) != 0)) {
		fprintf(stderr, "fs-replay-client: out of memory\n");
		return 2;
	}
	struct fs_client_opts co = {.socket_path = o.socket, .name = o.name};
	if ((rc = fs_client_open(&r.c, &co)) != 0) {
		fprintf(stderr, "fs-replay-client: cannot attach: %s\n", fs_strerror(rc));
		return 2;
	}
	struct fs_model_info mi;
	fs_client_model(r.c, &mi);
	r.cards = mi.cards ? mi.cards : 1;
	if (mi.layers != r.t.layers || mi.experts != r.t.experts || o.card >= r.cards) {
		fprintf(stderr,
			"fs-replay-client: foresightd serves %u x %u on %u cards; the trace is %u x %u, card %u\n",
			mi.layers, mi.experts, r.cards, r.t.layers, r.t.experts, o.card);
		fs_client_close(r.c);
		return 2;
	}
	rc = replay(&r);
	printf("uses %llu hits %llu misses %llu windows %u predictions %llu dropped %llu late_us %llu\n",
	       (unsigned long long)r.uses, (unsigned long long)r.hits, (unsigned long long)(r.uses - r.hits),
	       o.to - o.from, (unsigned long long)r.predictions, (unsigned long long)fs_client_dropped(r.c),
	       (unsigned long long)(r.late_ns / 1000));
	fs_client_close(r.c);
	replay_predictor_free(&r.pred);
	fs_trace_iter_free(&r.it);
	fs_trace_free(&r.t);
	free(r.cand_e);
	free(r.cand_s);
	return rc;
}
