/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-demo-engine: a stand-in MoE engine that exercises libforesight-client
 * the way a real one does, and checks every byte it reads.
 *
 * Per window: begin, acquire the newest epoch, then per layer post the next
 * layer's predictions, look each distinct expert up on the layer's card,
 * read it from the slot (hit) or the arena (miss), verify it against the
 * arena's checksum, post the usage; end the window and release the epoch.
 * The arena stays readable when the daemon dies, so the run goes on.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "demo.h"

struct run {
	const struct demo_opts *o;
	fs_client *c;
	struct fs_model_info m;
	struct fs_trace trace;
	struct fs_trace_iter it;
	struct demo_predictor pred;
	uint32_t cards;
	uint64_t hits, misses, verified, mismatches;
	uint64_t arena_errors; /* reads the arena could not serve (also mismatches) */
	uint64_t not_loaded;   /* experts of layers the daemon was still loading */
	/* since the last progress line */
	uint64_t hits_mark, misses_mark;
	uint64_t next_report_ns;
	int lost_daemon;
};

/* SIGINT or SIGTERM: finish the window, print the summary, exit. */
static volatile sig_atomic_t stop_asked;

static void on_stop(int sig)
{
	(void)sig;
	stop_asked = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

/* The trace: a file, or synthetic with the daemon's dimensions unless the
 * options say otherwise.  It must fit the model the daemon serves. */
static int setup_trace(struct run *r)
{
	const struct demo_opts *o = r->o;
	char err[FS_TRACE_ERRLEN];
	int rc;
	if (o->trace) {
		rc = fs_trace_load(&r->trace, o->trace, err, sizeof(err));
	} else {
		struct fs_trace_gen g;
		fs_trace_gen_defaults(&g);
		g.layers = o->layers ? o->layers : r->m.layers;
		g.experts = o->experts ? o->experts : r->m.experts;
		g.topk = o->topk ? o->topk : r->m.experts_used ? r->m.experts_used : 8;
		if (!o->topk && g.topk > g.experts)
			g.topk = g.experts;
		g.tokens_per_window = o->tokens;
		g.windows = o->windows;
		g.skew = o->skew;
		g.locality = o->locality;
		g.seed = o->seed;
		g.expert_bytes = r->m.max_expert_bytes;
		rc = fs_trace_generate(&r->trace, &g, err, sizeof(err));
	}
	if (rc) {
		fprintf(stderr, "fs-demo-engine: %s\n", err);
		return 2;
	}
	if (r->trace.layers > r->m.layers || r->trace.experts > r->m.experts) {
		fprintf(stderr,
			"fs-demo-engine: the trace has %u layers x %u experts but foresightd serves %u x %u "
			"(start it with --layers %u --experts %u)\n",
			r->trace.layers, r->trace.experts, r->m.layers, r->m.experts, r->trace.layers,
			r->trace.experts);
		return 2;
	}
	if (fs_trace_iter_init(&r->it, &r->trace, o->tokens) != 0) {
		fprintf(stderr, "fs-demo-engine: out of memory\n");
		return 2;
	}
	return 0;
}

/* Look an expert up, read its bytes from wherever they are, verify them. */
static void use_expert(struct run *r, const struct fs_view *v, uint32_t w, uint32_t layer, uint32_t expert,
		       uint32_t card)
{
	struct fs_expert_blob b;
	struct fs_slot s;
	int rc = fs_arena_expert(r->c, layer, expert, &b);
	if (rc == -EAGAIN) {
		/* The daemon is still loading this layer: a real engine computes
		 * it from its own copy of the model (this demo has none), a miss. */
		r->not_loaded++;
		r->misses++;
		fs_post_usage(r->c, w, layer, expert, card, 0);
		return;
	}
	if (rc != 0) {
		r->arena_errors++;
		if (r->mismatches++ < 5)
			fprintf(stderr, "fs-demo-engine: window %u: no arena entry for layer %u expert %u\n",
				w, layer, expert);
		return;
	}
	int hit = fs_lookup(r->c, v, card, layer, expert, &s);
	/* A CUDA slot (host == NULL) cannot be read from here: the arena copy
	 * is what the engine would compute from, so verify that. */
	const void *p = hit && s.host ? s.host : b.data;
	uint64_t n = hit && s.host ? s.bytes : b.bytes;
	r->verified++;
	if (n != b.bytes || fs_checksum(p, n) != b.checksum) {
		if (r->mismatches++ < 5)
			fprintf(stderr,
				"fs-demo-engine: window %u layer %u expert %u: bytes from the %s do not match the "
				"arena checksum (%llu bytes, expected %llu)\n",
				w, layer, expert, hit ? "slot" : "arena", (unsigned long long)n,
				(unsigned long long)b.bytes);
	}
	if (hit)
		r->hits++;
	else
		r->misses++;
	fs_post_usage(r->c, w, layer, expert, card, hit);
}

/* A slow engine's compute: `us` microseconds with its epoch held. */
static void sleep_us(uint64_t us)
{
	struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void one_window(struct run *r, uint32_t i)
{
	uint32_t w = i + 1; /* the engine's window numbers start at 1 */
	uint32_t layers = r->trace.layers;
	const uint16_t *ex;
	fs_trace_iter_seek(&r->it, i % r->it.n_windows); /* a file trace wraps around */
	fs_window_begin(r->c, w, r->it.n_tokens);
	struct fs_view v;
	if (fs_acquire(r->c, &v) != 0)
		v.epoch = 0; /* all hold slots busy cannot happen here; misses are safe */
	/* Layer 0's guesses go out at the window's start, as a real engine
	 * predicts the next token's first layer from the last one. */
	uint32_t n0 = fs_trace_iter_experts(&r->it, 0, &ex);
	demo_predict_layer(&r->pred, r->c, w, 0, ex, n0);
	for (uint32_t l = 0; l < layers; l++) {
		if (l + 1 < layers) {
			uint32_t nn = fs_trace_iter_experts(&r->it, l + 1, &ex);
			demo_predict_layer(&r->pred, r->c, w, l + 1, ex, nn);
		}
		uint32_t card = demo_card_of(l, layers, r->cards);
		uint32_t n = fs_trace_iter_experts(&r->it, l, &ex);
		if (r->o->hold_us) /* the layer's compute, before its reads: they come late in the hold */
			sleep_us(r->o->hold_us / layers);
		for (uint32_t k = 0; k < n; k++)
			use_expert(r, &v, w, l, ex[k], card);
		demo_predict_learn(&r->pred, l, ex, n);
	}
	fs_window_end(r->c, w);
	fs_release(r->c, &v);
}

static void progress(struct run *r, uint32_t done, int last)
{
	uint64_t now = now_ns();
	int attached = fs_client_attached(r->c);
	if (!attached)
		r->lost_daemon = 1;
	if (r->o->quiet || (!last && now < r->next_report_ns))
		return;
	r->next_report_ns = now + 1000000000ull;
	uint64_t h = r->hits - r->hits_mark, m = r->misses - r->misses_mark;
	printf("window %u/%u  hit rate %.1f%% (last interval %.1f%%)  %s\n", done, r->o->windows,
	       pct(r->hits, r->hits + r->misses), pct(h, h + m),
	       attached ? "attached" : "daemon gone: CPU path");
	fflush(stdout);
	r->hits_mark = r->hits;
	r->misses_mark = r->misses;
}

static void banner(const struct run *r, const char *socket)
{
	const struct demo_opts *o = r->o;
	if (o->quiet)
		return;
	printf("fs-demo-engine: attached to %s: model %s, %u layers x %u experts, top-%u, %u card(s)\n",
	       socket, r->m.model, r->m.layers, r->m.experts, r->m.experts_used, r->cards);
	if (o->trace)
		printf("trace %s: %u layers x %u experts, top-%u, %u decode tokens", o->trace,
		       r->trace.layers, r->trace.experts, r->trace.topk, r->trace.tokens);
	else
		printf("synthetic trace: %u layers x %u experts, top-%u, skew %.2f, locality %.2f, seed %llu",
		       r->trace.layers, r->trace.experts, r->trace.topk, o->skew, o->locality,
		       (unsigned long long)o->seed);
	printf("; %u windows of %u token(s); predictor %s", o->windows, o->tokens,
	       demo_predict_name(o->predict));
	if (o->predict == PREDICT_ORACLE)
		printf(" (recall %.2f, %u decoys)", o->recall, o->decoys);
	printf("\n");
	fflush(stdout);
}

static const char *socket_path(const struct demo_opts *o)
{
	const char *env = getenv("FORESIGHT_SOCKET");
	return o->socket && *o->socket ? o->socket : env && *env ? env : FS_DEFAULT_SOCKET;
}

/* Safe on a partly set up run: every free takes a zeroed struct. */
static void cleanup(struct run *r)
{
	fs_trace_iter_free(&r->it);
	fs_trace_free(&r->trace);
	demo_predictor_free(&r->pred);
	fs_client_close(r->c);
}

int main(int argc, char **argv)
{
	struct demo_opts o;
	int rc = demo_parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? 0 : rc;
	struct run r = {.o = &o};
	struct fs_client_opts co = {.socket_path = o.socket, .name = o.name};
	uint64_t open_ns = now_ns();
	rc = fs_client_open(&r.c, &co);
	open_ns = now_ns() - open_ns;
	if (rc != 0) {
		fprintf(stderr, "fs-demo-engine: cannot attach to foresightd at %s: %s\n", socket_path(&o),
			fs_strerror(rc));
		return 2;
	}
	fs_client_model(r.c, &r.m);
	r.cards = r.m.cards ? r.m.cards : 1;
	if ((rc = setup_trace(&r)) == 0 &&
	    demo_predictor_init(&r.pred, &o, r.trace.layers, r.trace.experts, r.cards, r.it.cap) != 0) {
		fprintf(stderr, "fs-demo-engine: out of memory\n");
		rc = 2;
	}
	if (rc) {
		cleanup(&r);
		return rc;
	}
	banner(&r, socket_path(&o));
	r.next_report_ns = now_ns() + 1000000000ull;
	struct sigaction sa = {.sa_handler = on_stop};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	for (uint32_t i = 0; i < o.windows && !stop_asked; i++) {
		one_window(&r, i);
		progress(&r, i + 1, i + 1 == o.windows || stop_asked);
		if (o.window_us)
			sleep_us(o.window_us);
	}
	if (r.lost_daemon)
		printf("note: foresightd went away during the run (attached %llu time(s)); %s\n",
		       (unsigned long long)fs_client_attach_count(r.c),
		       r.arena_errors ? "the arena became unreadable" : "the CPU path carried on");
	if (r.lost_daemon && !fs_client_attached(r.c))
		printf("note: not attached at the end; the library's last error: %s\n",
		       fs_client_last_error(r.c));
	if (r.arena_errors)
		printf("arena unreadable for %llu reads (counted as mismatches)\n",
		       (unsigned long long)r.arena_errors);
	if (r.not_loaded)
		printf("experts of layers still loading: %llu (served from the engine's own copy: misses)\n",
		       (unsigned long long)r.not_loaded);
	printf("predictions posted: %llu  posts dropped: %llu  attaches: %llu (the first took %.1f ms)\n",
	       (unsigned long long)r.pred.posted, (unsigned long long)fs_client_dropped(r.c),
	       (unsigned long long)fs_client_attach_count(r.c), (double)open_ns / 1e6);
	printf("hits: %llu misses: %llu hit rate: %.2f%%\n", (unsigned long long)r.hits,
	       (unsigned long long)r.misses, pct(r.hits, r.hits + r.misses));
	printf("verified reads: %llu mismatches: %llu\n", (unsigned long long)r.verified,
	       (unsigned long long)r.mismatches);
	cleanup(&r);
	return r.mismatches == 0 && r.verified > 0 ? 0 : 1;
}
