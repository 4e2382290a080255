/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_strata.c: the `strata-adapt` peer, what users of Strata run
 * without foresightd: the static profile, then adapted from decayed use.
 * Its rules are strata.h's (one owner: fs-engine-bench's peer of the same
 * name, bench/engine/eb_pool.c, runs the same); this file runs them on the
 * replay's clock.  A swap's newcomer crosses one card's link (copies one
 * after another) and is a hit only once landed.
 *
 * It is not a configuration of the residency core (whose static tier
 * adapts per use, not in batches), so it runs its own loop here: a layer
 * takes intercept/L plus miss_ms/L per distinct miss, as every other row.
 * One card and one engine only.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "strata.h"

struct prof {
	uint32_t count;
	uint16_t layer, expert;
};

/* fsr_profile_load's order: hottest first, ties by expert, then layer. */
static int by_count_desc(const void *a, const void *b)
{
	const struct prof *x = a, *y = b;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	if (x->expert != y->expert)
		return x->expert < y->expert ? -1 : 1;
	return x->layer < y->layer ? -1 : x->layer > y->layer;
}

struct strata {
	const struct fs_trace *t;
	size_t le;
	uint64_t *ready; /* [le]: when its copy has landed; UINT64_MAX: not resident */
	float *score;    /* [le] */
	float *uses;     /* [le]: token uses since the last adapt */
	struct strata_ranked *cand, *vict;
	uint64_t *bytes; /* [layers] */
	double ns_per_byte;
	uint64_t bus_free, copies, copy_bytes;
	uint64_t now; /* the adaptation's time */
};

/* The profile's slots resident before decode (fsr_profile_load's order). */
static int start(struct strata *s, const struct replay_input *in, uint32_t slots)
{
	const struct fs_trace *t = in->trace;
	struct prof *p = malloc(s->le * sizeof(*p));
	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < s->le; i++) {
		p[i] = (struct prof){in->profile[i], (uint16_t)(i / t->experts), (uint16_t)(i % t->experts)};
		s->ready[i] = UINT64_MAX;
	}
	qsort(p, s->le, sizeof(*p), by_count_desc);
	for (uint32_t i = 0; i < slots && i < s->le; i++)
		s->ready[(size_t)p[i].layer * t->experts + p[i].expert] = 0;
	free(p);
	return 0;
}

static enum strata_state state(void *ctx, size_t i)
{
	const struct strata *s = ctx;
	if (s->ready[i] == UINT64_MAX)
		return STRATA_OUT;
	return s->ready[i] <= s->now ? STRATA_IN : STRATA_BUSY;
}

/* A swap: the victim leaves at once, the newcomer's copy is queued on the bus. */
static int swap(void *ctx, uint32_t in, uint32_t out)
{
	struct strata *s = ctx;
	uint64_t b = s->bytes[in / s->t->experts];
	uint64_t from = s->bus_free > s->now ? s->bus_free : s->now;
	s->bus_free = from + (uint64_t)((double)b * s->ns_per_byte);
	s->ready[out] = UINT64_MAX;
	s->ready[in] = s->bus_free;
	s->copies++;
	s->copy_bytes += b;
	return 0;
}

/* One adapt at virtual time now. */
static void adapt(struct strata *s, uint64_t now)
{
	s->now = now;
	strata_decay(s->score, s->uses, s->le, STRATA_DECAY);
	(void)strata_swaps(s->score, s->le, state, swap, s, STRATA_SWAPS, s->cand, s->vict);
}

int replay_strata_run(const struct replay_input *in, const struct replay_model *m, struct replay_result *out,
		      char *err, size_t errlen)
{
	const struct fs_trace *t = in->trace;
	memset(out, 0, sizeof(*out));
	if ((m->cards && m->cards != 1) || (m->clients && m->clients != 1)) {
		snprintf(err, errlen, "strata-adapt: one card and one engine only");
		return -EINVAL;
	}
	if (!(m->bus_gbps > 0.0) || !m->tokens_per_window) {
		snprintf(err, errlen, "strata-adapt: needs a bus (--bus-gbps > 0) and tokens per window");
		return -EINVAL;
	}
	struct strata s = {.t = t, .le = (size_t)t->layers * t->experts};
	s.ready = malloc(s.le * sizeof(*s.ready));
	s.score = calloc(s.le, sizeof(*s.score));
	s.uses = calloc(s.le, sizeof(*s.uses));
	s.cand = malloc(s.le * sizeof(*s.cand));
	s.vict = malloc(s.le * sizeof(*s.vict));
	s.bytes = malloc(t->layers * sizeof(*s.bytes));
	struct fs_trace_iter it = {0};
	int rc = fs_trace_iter_init(&it, t, m->tokens_per_window);
	if (!s.ready || !s.score || !s.uses || !s.cand || !s.vict || !s.bytes || rc != 0) {
		rc = rc ? rc : -ENOMEM;
		goto out;
	}
	for (uint32_t l = 0; l < t->layers; l++)
		s.bytes[l] = t->expert_bytes && t->expert_bytes[l] ? t->expert_bytes[l] : m->expert_bytes;
	s.ns_per_byte = 1.0 / m->bus_gbps; /* GB/s = bytes per ns */
	uint32_t slots = replay_slots(m, t);
	if ((rc = start(&s, in, slots)) != 0)
		goto out;
	strata_seed(s.score, in->profile, s.le, STRATA_EVERY, m->tokens_per_window, t->topk, t->layers,
		    STRATA_DECAY);
	double layer_ms = m->intercept_ms / t->layers, miss_ms_l = m->miss_ms / t->layers;
	uint64_t now = 0;
	uint32_t win = 0;
	for (int ok = fs_trace_iter_seek(&it, m->warmup); ok; ok = fs_trace_iter_next(&it), win++) {
		for (uint32_t l = 0; l < t->layers; l++) {
			const uint16_t *ex;
			uint32_t n = fs_trace_iter_experts(&it, l, &ex), miss = 0;
			for (uint32_t k = 0; k < n; k++)
				miss += s.ready[(size_t)l * t->experts + ex[k]] > now;
			for (uint32_t tok = 0; tok < it.n_tokens; tok++) {
				const uint16_t *e = fs_trace_token(t, it.first_token + tok, l);
				for (uint32_t k = 0; k < t->topk; k++)
					if (e[k] < t->experts)
						s.uses[(size_t)l * t->experts + e[k]] += 1.0f;
			}
			out->uses += n;
			out->misses += miss;
			now += (uint64_t)llround((layer_ms + miss_ms_l * miss) * 1e6);
		}
		if ((win + 1) % STRATA_EVERY == 0)
			adapt(&s, now);
	}
	snprintf(out->policy, sizeof(out->policy), "%s", replay_policy_name(RP_STRATA_ADAPT));
	out->windows = win;
	out->layers = t->layers;
	out->slots = slots;
	out->hits = out->uses - out->misses;
	out->copies = s.copies;
	out->bytes = s.copy_bytes;
	out->hit_rate = out->uses ? (double)out->hits / (double)out->uses : 0.0;
	double lw = (double)win * t->layers;
	out->misses_per_lw = lw > 0 ? (double)out->misses / lw : 0.0;
	out->ms_per_window = win ? (double)now / 1e6 / win : 0.0;
	out->tokens_per_s = out->ms_per_window > 0 ? 1000.0 * m->tokens_per_window / out->ms_per_window : 0.0;
	out->client_uses[0] = out->uses;
	out->client_hits[0] = out->hits;
	out->card_copies[0] = out->copies;
	rc = 0;
out:
	if (rc && !err[0])
		snprintf(err, errlen, "strata-adapt: %s", strerror(-rc));
	fs_trace_iter_free(&it);
	free(s.ready), free(s.score), free(s.uses), free(s.cand), free(s.vict), free(s.bytes);
	return rc;
}
