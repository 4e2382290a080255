/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_bound.c: the clairvoyant bound (replay_bound.h says what it
 * assumes).  The future is flattened into one sequence of uses, each a
 * distinct (window, layer, expert); a backward pass gives every use the
 * position of the same expert's next use; the forward pass keeps the
 * residents in a max-heap on that position (lazy deletion: a stale entry
 * is skipped when it surfaces).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "replay_bound.h"

#define NEVER UINT32_MAX

struct heap_ent {
	uint32_t next; /* position of the expert's next use (NEVER: none) */
	uint32_t idx;  /* layer * experts + expert */
};

struct heap {
	struct heap_ent *v;
	size_t n, cap;
};

static int heap_push(struct heap *h, struct heap_ent e)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? 2 * h->cap : 1024;
		struct heap_ent *v = realloc(h->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = cap;
	}
	size_t i = h->n++;
	while (i > 0 && h->v[(i - 1) / 2].next < e.next) {
		h->v[i] = h->v[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->v[i] = e;
	return 0;
}

static struct heap_ent heap_pop(struct heap *h)
{
	struct heap_ent top = h->v[0], last = h->v[--h->n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->v[c + 1].next > h->v[c].next)
			c++;
		if (h->v[c].next <= last.next)
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->n)
		h->v[i] = last;
	return top;
}

struct seq {
	uint32_t *idx;   /* [n]: the use's (layer, expert) */
	uint32_t *next;  /* [n]: position of its next use */
	uint32_t *start; /* [nwin * layers + 1]: first use of each (window, layer) */
	uint32_t n;
};

static void seq_free(struct seq *s)
{
	free(s->idx);
	free(s->next);
	free(s->start);
}

static int seq_build(const struct replay_bound_in *in, struct seq *s)
{
	const struct fs_trace *t = in->t;
	size_t cells = (size_t)in->nwin * t->layers, cap = 0;
	for (uint32_t w = 0; w < in->nwin; w++)
		cap += (size_t)in->ntok[w] * t->topk * t->layers;
	memset(s, 0, sizeof(*s));
	s->idx = malloc((cap ? cap : 1) * sizeof(uint32_t));
	s->next = malloc((cap ? cap : 1) * sizeof(uint32_t));
	s->start = malloc((cells + 1) * sizeof(uint32_t));
	uint32_t *last = malloc((size_t)t->layers * t->experts * sizeof(uint32_t));
	uint8_t *mark = calloc(t->experts, 1);
	if (!s->idx || !s->next || !s->start || !last || !mark || cap >= NEVER) {
		free(last);
		free(mark);
		seq_free(s);
		return cap >= NEVER ? -EINVAL : -ENOMEM;
	}
	for (uint32_t w = 0; w < in->nwin; w++)
		for (uint32_t l = 0; l < t->layers; l++) {
			s->start[(size_t)w * t->layers + l] = s->n;
			uint32_t from = s->n;
			for (uint32_t i = 0; i < in->ntok[w]; i++) {
				const uint16_t *e = fs_trace_token(t, in->first[w] + i, l);
				for (uint32_t k = 0; k < t->topk; k++)
					if (!mark[e[k]]) {
						mark[e[k]] = 1;
						s->idx[s->n++] = l * t->experts + e[k];
					}
			}
			for (uint32_t i = from; i < s->n; i++)
				mark[s->idx[i] % t->experts] = 0;
		}
	s->start[cells] = s->n;
	for (size_t i = 0; i < (size_t)t->layers * t->experts; i++)
		last[i] = NEVER;
	for (uint32_t i = s->n; i-- > 0;) {
		s->next[i] = last[s->idx[i]];
		last[s->idx[i]] = i;
	}
	free(mark);
	free(last);
	return 0;
}

static int by_next(const void *a, const void *b)
{
	const struct heap_ent *x = a, *y = b;
	return x->next < y->next ? -1 : x->next > y->next;
}

int replay_bound(const struct replay_bound_in *in, struct replay_result *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->policy, sizeof(out->policy), "clairvoyant");
	const struct fs_trace *t = in->t;
	if (!t || !in->nwin || !in->first || !in->ntok || !in->slots || !(in->intercept_ms > 0) ||
	    !(in->miss_ms >= 0))
		return -EINVAL;
	for (uint32_t w = 0; w < in->nwin; w++)
		if (!in->ntok[w] || (uint64_t)in->first[w] + in->ntok[w] > t->tokens)
			return -EINVAL;
	struct seq s;
	int rc = seq_build(in, &s);
	if (rc)
		return rc;
	size_t le = (size_t)t->layers * t->experts;
	uint32_t *cur = malloc(le * sizeof(uint32_t)); /* resident: its next use; else 0 */
	uint8_t *res = calloc(le, 1);
	struct heap_ent *first = malloc(le * sizeof(*first));
	struct heap h = {0};
	if (!cur || !res || !first) {
		rc = -ENOMEM;
		goto out;
	}
	/* Preload: the experts used soonest, as many as there are slots. */
	size_t nf = 0;
	for (size_t i = 0; i < le; i++)
		first[i] = (struct heap_ent){NEVER, (uint32_t)i};
	for (uint32_t i = s.n; i-- > 0;)
		first[s.idx[i]].next = i;
	qsort(first, le, sizeof(*first), by_next);
	uint32_t used = 0;
	for (nf = 0; nf < le && used < in->slots; nf++, used++) {
		res[first[nf].idx] = 1;
		cur[first[nf].idx] = first[nf].next;
		if ((rc = heap_push(&h, first[nf])) != 0)
			goto out;
	}

	double layer_ns = in->intercept_ms * 1e6 / t->layers, miss_ns = in->miss_ms * 1e6 / t->layers;
	double now = 0.0, bus = 0.0; /* virtual ns since decode start; bus time spent */
	uint64_t hits = 0, misses = 0, copies = 0, bytes = 0;
	for (uint32_t w = 0; w < in->nwin; w++)
		for (uint32_t l = 0; l < t->layers; l++) {
			uint64_t eb = t->expert_bytes && t->expert_bytes[l] ? t->expert_bytes[l] :
									      in->expert_bytes;
			double copy_ns = in->bus_gbps > 0 ? (double)eb / in->bus_gbps :
							    0.0; /* bytes / (GB/s) = ns */
			uint32_t a = s.start[(size_t)w * t->layers + l],
				 b = s.start[(size_t)w * t->layers + l + 1];
			uint32_t lm = 0;
			for (uint32_t i = a; i < b; i++) {
				uint32_t x = s.idx[i];
				if (res[x]) {
					hits++;
				} else if (bus + copy_ns <= now) {
					/* landed in time; make room: the furthest next use goes */
					if (used >= in->slots) {
						for (;;) {
							struct heap_ent v = heap_pop(&h);
							if (res[v.idx] && cur[v.idx] == v.next) {
								res[v.idx] = 0;
								used--;
								break;
							}
						}
					}
					res[x] = 1;
					used++;
					bus += copy_ns;
					copies++;
					bytes += eb;
					hits++;
				} else {
					misses++;
					lm++;
					continue;
				}
				cur[x] = s.next[i];
				if ((rc = heap_push(&h, (struct heap_ent){s.next[i], x})) != 0)
					goto out;
			}
			now += layer_ns + miss_ns * lm;
		}
	out->windows = in->nwin;
	out->layers = t->layers;
	out->slots = in->slots;
	out->uses = hits + misses;
	out->hits = hits;
	out->misses = misses;
	out->copies = copies;
	out->bytes = bytes;
	out->hit_rate = out->uses ? (double)hits / (double)out->uses : 0.0;
	out->misses_per_lw = (double)misses / ((double)in->nwin * t->layers);
	out->ms_per_window = now / 1e6 / in->nwin;
	uint64_t tokens = 0;
	for (uint32_t w = 0; w < in->nwin; w++)
		tokens += in->ntok[w];
	out->tokens_per_s = now > 0 ? (double)tokens / (now / 1e9) : 0.0;
out:
	free(cur);
	free(res);
	free(first);
	free(h.v);
	seq_free(&s);
	return rc;
}

int replay_bound_run(const struct replay_input *in, const struct replay_model *m, struct replay_result *out)
{
	const struct fs_trace *t = in->trace;
	uint32_t T = m->tokens_per_window, nw = 0;
	uint32_t total = fs_trace_windows(t, T);
	if (!T || T > 255 || m->warmup >= total)
		return -EINVAL;
	uint32_t n = total - m->warmup;
	uint32_t *first = malloc(n * sizeof(uint32_t));
	uint8_t *ntok = malloc(n);
	if (!first || !ntok) {
		free(first);
		free(ntok);
		return -ENOMEM;
	}
	for (uint32_t w = m->warmup; w < total; w++, nw++) {
		first[nw] = w * T;
		uint32_t left = t->tokens - w * T;
		ntok[nw] = (uint8_t)(left < T ? left : T);
	}
	struct replay_bound_in b = {
		.t = t,
		.nwin = nw,
		.first = first,
		.ntok = ntok,
		.slots = replay_slots(m, t),
		.intercept_ms = m->intercept_ms,
		.miss_ms = m->miss_ms,
		.bus_gbps = m->bus_gbps,
		.expert_bytes = m->expert_bytes,
	};
	int rc = replay_bound(&b, out);
	free(first);
	free(ntok);
	return rc;
}
