/* SPDX-License-Identifier: Apache-2.0 */
/*
 * eb_pool.c: the engine's own VRAM pool, for the modes that run without
 * foresightd (what users run today), on the same slots and bus as the
 * daemon's modes:
 *
 *  - static: the profile's hottest experts of the card's layers, copied
 *    once before the run, frozen (the baseline of issue #10);
 *  - strata-adapt: the same start, then every `adapt_every` (4) windows
 *    the rules of tools/replay/strata.h (their one owner: fs-replay's peer
 *    runs the same): decayed use scores, the best-scored non-resident
 *    experts swapped for the worst-scored residents, at most `max_swaps`
 *    (96) per adapt;
 *  - lru: each layer its share of the card's slots (slots / layers on the
 *    card), seeded with the layer's hottest experts; after a layer, up to
 *    `lru_inserts` (2) of its missed experts are uploaded into the layer's
 *    least recently used slots (llama.cpp PR 27861's expert cache:
 *    --moe-expert-cache N, --moe-expert-cache-inserts 2);
 *  - zero: every expert of the card's layers (the zero-miss ceiling).
 *
 * Copies (strata-adapt, lru) go through one copier thread per card over
 * the same emulated bus as the daemon's (the CUDA backend's throttle,
 * daemon/fsd_backend_cuda.c): the copy is issued at once, and the slot
 * becomes usable when a per-card token bucket (copies one after another at
 * bus_gbps) says the link would have delivered it.  A slot being
 * overwritten is never read: it leaves the map when its copy is queued and
 * comes back when the copy has landed.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <foresight/foresight.h>

#include "eb.h"
#include "strata.h"

#define NONE UINT32_MAX

struct copy_job {
	uint32_t slot;
	const void *src;
	uint64_t bytes, land_ns;
};

struct pcard {
	uint8_t *base;
	uint32_t slots;
	uint32_t *key;    /* [slots]: layer * E + expert, or NONE */
	uint8_t *landed;  /* [slots]: 1 once the slot's copy is in (atomic) */
	uint64_t *stamp;  /* [slots]: lru: last window used */
	uint32_t *lfirst; /* [L]: lru: the layer's first slot on this card */
	uint32_t *lcount; /* [L]: lru: the layer's slots */
	/* copier */
	pthread_t thr;
	int started, stop;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct copy_job *q;
	uint32_t qcap, qhead, qn;
	uint64_t bus_free_ns; /* the token bucket: when the link is free again */
};

struct eb_pool {
	struct eb_pool_opts o;
	struct eb_dev *dev;
	uint32_t L, E;
	uint64_t sb;
	uint32_t *slot_of; /* [L * E]: slot on its layer's card, or NONE */
	float *score;      /* [L * E]: strata-adapt */
	float *uses;       /* [L * E]: strata-adapt, token uses since the last adapt */
	uint32_t windows;
	uint32_t inserted; /* lru: this layer's uploads in this window */
	struct pcard c[EB_MAX_CARDS];
	uint64_t copies, copy_bytes, swaps;
	int failed;
};

const char *eb_pool_policy_name(enum eb_pool_policy p)
{
	static const char *const n[] = {"static", "strata-adapt", "lru", "zero"};
	return p <= EB_POOL_ZERO ? n[p] : "?";
}

struct copier_arg {
	struct eb_pool *p;
	struct pcard *c;
};
static void *copier(void *arg);

static int card_start(struct eb_pool *p, struct pcard *c)
{
	c->qcap = c->slots + 1;
	c->q = calloc(c->qcap, sizeof(*c->q));
	if (!c->q)
		return -1;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	struct copier_arg *a = malloc(sizeof(*a));
	if (!a)
		return -1;
	a->p = p, a->c = c;
	if (pthread_create(&c->thr, NULL, copier, a) != 0) {
		free(a);
		return -1;
	}
	c->started = 1;
	return 0;
}

static void sleep_until(uint64_t t)
{
	for (;;) {
		uint64_t now = eb_now_ns();
		if (now >= t)
			return;
		uint64_t d = t - now;
		if (d < 20000) { /* the last 20 us: spin, a sleep overshoots */
			while (eb_now_ns() < t)
				;
			return;
		}
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(d - 10000)};
		nanosleep(&ts, NULL);
	}
}

static void *copier(void *arg)
{
	struct copier_arg a = *(struct copier_arg *)arg;
	free(arg);
	struct pcard *c = a.c;
	uint32_t card = (uint32_t)(c - a.p->c);
	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (c->qn == 0 && !c->stop)
			pthread_cond_wait(&c->cond, &c->lock);
		if (c->stop)
			break; /* the run is over: copies still queued do not matter */
		struct copy_job j = c->q[c->qhead];
		pthread_mutex_unlock(&c->lock);
		if (eb_dev_put(a.p->dev, card, c->base + (uint64_t)j.slot * a.p->sb, j.src, j.bytes) != 0)
			__atomic_store_n(&a.p->failed, 1, __ATOMIC_RELAXED);
		sleep_until(j.land_ns);
		__atomic_store_n(&c->landed[j.slot], 1, __ATOMIC_RELEASE);
		pthread_mutex_lock(&c->lock);
		c->qhead = (c->qhead + 1) % c->qcap;
		c->qn--;
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* Queue slot's copy of (layer, x): the slot leaves the map until it lands.
 * 0, 1 when there is nothing to copy, -1 on an arena error. */
static int upload(struct eb_pool *p, uint32_t card, uint32_t slot, uint32_t layer, uint32_t x, int measured)
{
	struct pcard *c = &p->c[card];
	struct fs_expert_blob b;
	if (fs_arena_expert(p->o.client, layer, x, &b) != 0 || b.bytes > p->sb)
		return -1;
	if (b.bytes == 0)
		return 1; /* a GGUF's dense layer: no routed expert to hold */
	uint32_t old = c->key[slot];
	if (old != NONE)
		p->slot_of[old] = NONE;
	c->key[slot] = layer * p->E + x;
	p->slot_of[(size_t)layer * p->E + x] = slot;
	__atomic_store_n(&c->landed[slot], 0, __ATOMIC_RELAXED);
	uint64_t now = eb_now_ns();
	uint64_t start = c->bus_free_ns > now ? c->bus_free_ns : now;
	uint64_t land = start + (p->o.bus_gbps > 0 ? (uint64_t)((double)b.bytes / p->o.bus_gbps) : 0);
	c->bus_free_ns = land;
	pthread_mutex_lock(&c->lock);
	if (c->qn == c->qcap) { /* cannot happen: a slot is queued at most once */
		pthread_mutex_unlock(&c->lock);
		return -1;
	}
	c->q[(c->qhead + c->qn) % c->qcap] = (struct copy_job){slot, b.data, b.bytes, land};
	c->qn++;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
	if (measured) {
		p->copies++;
		p->copy_bytes += b.bytes;
	}
	return 0;
}

struct ranked {
	uint32_t count;
	uint32_t key; /* layer * E + expert */
};

static int by_count_desc(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return x->key < y->key ? -1 : x->key > y->key;
}

/* Copy (layer, x) into slot now, before the run (no bus). */
static int put_now(struct eb_pool *p, uint32_t card, uint32_t slot, uint32_t key)
{
	struct pcard *c = &p->c[card];
	struct fs_expert_blob b;
	if (fs_arena_expert(p->o.client, key / p->E, key % p->E, &b) != 0 || b.bytes == 0)
		return 1; /* no routed expert there (a GGUF's dense layer) */
	if (b.bytes > p->sb ||
	    eb_dev_put(p->dev, card, c->base + (uint64_t)slot * p->sb, b.data, b.bytes) != 0)
		return -1;
	c->key[slot] = key;
	c->landed[slot] = 1;
	p->slot_of[key] = slot;
	return 0;
}

static int fill(struct eb_pool *p, char *err, size_t errlen)
{
	uint32_t L = p->L, E = p->E;
	size_t n = (size_t)L * E;
	struct ranked *rk = malloc(n * sizeof(*rk));
	if (!rk) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		rk[i] = (struct ranked){p->o.profile[i], (uint32_t)i};
	qsort(rk, n, sizeof(*rk), by_count_desc);
	int rc = 0;
	for (uint32_t card = 0; card < p->o.cards && rc == 0; card++) {
		struct pcard *c = &p->c[card];
		if (c->slots == 0)
			continue;
		if (p->o.policy == EB_POOL_LRU) {
			/* each layer of the card its equal share, its hottest first */
			uint32_t here = 0, at = 0;
			for (uint32_t l = 0; l < L; l++)
				here += p->o.card_of[l] == card;
			if (here == 0)
				continue;
			uint32_t share = c->slots / here;
			for (uint32_t l = 0; l < L; l++) {
				if (p->o.card_of[l] != card)
					continue;
				c->lfirst[l] = at;
				c->lcount[l] = share;
				at += share;
			}
			uint32_t *used = calloc(L, sizeof(*used));
			if (!used) {
				rc = -1;
				break;
			}
			for (size_t i = 0; i < n && rc == 0; i++) {
				uint32_t l = rk[i].key / E;
				if (p->o.card_of[l] != card || used[l] == c->lcount[l])
					continue;
				int r = put_now(p, card, c->lfirst[l] + used[l], rk[i].key);
				if (r < 0)
					rc = -1;
				used[l] += r == 0;
			}
			free(used);
			continue;
		}
		uint32_t used = 0;
		for (size_t i = 0; i < n && used < c->slots && rc == 0; i++) {
			if (p->o.card_of[rk[i].key / E] != card)
				continue;
			int r = put_now(p, card, used, rk[i].key);
			if (r < 0)
				rc = -1;
			used += r == 0;
		}
	}
	free(rk);
	if (rc)
		snprintf(err, errlen, "copy into the own pool failed");
	return rc;
}

int eb_pool_create(struct eb_pool **out, struct eb_dev *dev, const struct eb_pool_opts *o, char *err,
		   size_t errlen)
{
	struct eb_pool *p = calloc(1, sizeof(*p));
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	*out = p;
	p->o = *o;
	p->dev = dev;
	p->L = o->layers;
	p->E = o->experts;
	p->sb = (o->slot_bytes + 4095) / 4096 * 4096;
	size_t n = (size_t)p->L * p->E;
	p->slot_of = malloc(n * sizeof(*p->slot_of));
	if (!p->slot_of || o->cards > EB_MAX_CARDS) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		p->slot_of[i] = NONE;
	if (o->policy == EB_POOL_STRATA) {
		p->score = calloc(n, sizeof(*p->score));
		p->uses = calloc(n, sizeof(*p->uses));
		if (!p->score || !p->uses) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		strata_seed(p->score, o->profile, n, o->adapt_every, o->tpw, o->topk, p->L, o->decay);
	}
	for (uint32_t card = 0; card < o->cards; card++) {
		struct pcard *c = &p->c[card];
		c->slots = (uint32_t)o->slots_card[card];
		if (c->slots == 0)
			continue;
		c->base = eb_dev_alloc(dev, card, (uint64_t)c->slots * p->sb);
		c->key = malloc(c->slots * sizeof(*c->key));
		c->landed = calloc(c->slots, 1);
		c->stamp = calloc(c->slots, sizeof(*c->stamp));
		c->lfirst = calloc(p->L, sizeof(*c->lfirst));
		c->lcount = calloc(p->L, sizeof(*c->lcount));
		if (!c->base || !c->key || !c->landed || !c->stamp || !c->lfirst || !c->lcount) {
			snprintf(err, errlen, "cannot allocate %llu bytes for %u slots on card %u",
				 (unsigned long long)((uint64_t)c->slots * p->sb), c->slots, card);
			return -1;
		}
		for (uint32_t s = 0; s < c->slots; s++)
			c->key[s] = NONE;
		if ((o->policy == EB_POOL_STRATA || o->policy == EB_POOL_LRU) && card_start(p, c) != 0) {
			snprintf(err, errlen, "cannot start the copier of card %u", card);
			return -1;
		}
	}
	return fill(p, err, errlen);
}

const void *eb_pool_lookup(const struct eb_pool *p, uint32_t layer, uint32_t x)
{
	uint32_t s = p->slot_of[(size_t)layer * p->E + x];
	if (s == NONE)
		return NULL;
	const struct pcard *c = &p->c[p->o.card_of[layer]];
	if (!__atomic_load_n(&c->landed[s], __ATOMIC_ACQUIRE))
		return NULL; /* its copy is on the bus */
	return c->base + (uint64_t)s * p->sb;
}

/* lru: the least recently used landed slot of the layer not used in this
 * window, or NONE. */
static uint32_t lru_victim(const struct pcard *c, uint32_t layer, uint64_t now)
{
	uint32_t best = NONE;
	for (uint32_t s = c->lfirst[layer]; s < c->lfirst[layer] + c->lcount[layer]; s++) {
		if (c->key[s] != NONE && !__atomic_load_n(&c->landed[s], __ATOMIC_ACQUIRE))
			continue; /* a copy in flight */
		if (c->key[s] != NONE && c->stamp[s] >= now)
			continue;
		if (c->key[s] == NONE)
			return s;
		if (best == NONE || c->stamp[s] < c->stamp[best])
			best = s;
	}
	return best;
}

int eb_pool_layer_done(struct eb_pool *p, uint32_t w, uint32_t layer, const struct eb_use *u, uint32_t n,
		       int measured)
{
	uint32_t card = p->o.card_of[layer];
	struct pcard *c = &p->c[card];
	if (p->o.policy == EB_POOL_STRATA) {
		for (uint32_t i = 0; i < n; i++)
			p->uses[(size_t)layer * p->E + u[i].expert] += (float)__builtin_popcount(u[i].mask);
		return 0;
	}
	if (p->o.policy != EB_POOL_LRU || c->slots == 0)
		return 0;
	uint64_t now = (uint64_t)w + 1; /* stamps: 0 = never used */
	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = p->slot_of[(size_t)layer * p->E + u[i].expert];
		if (s != NONE)
			c->stamp[s] = now;
	}
	uint32_t ins = 0;
	for (uint32_t i = 0; i < n && ins < p->o.lru_inserts; i++) {
		uint32_t key = layer * p->E + u[i].expert;
		if (p->slot_of[key] != NONE)
			continue; /* resident, or on its way */
		uint32_t v = lru_victim(c, layer, now);
		if (v == NONE)
			break;
		int r = upload(p, card, v, layer, u[i].expert, measured);
		if (r < 0)
			return -1;
		if (r > 0)
			continue;
		c->stamp[v] = now;
		ins++;
	}
	return __atomic_load_n(&p->failed, __ATOMIC_RELAXED) ? -1 : 0;
}

/* strata-adapt, one card: strata.h's swaps over the card's layers. */
struct adapt_ctx {
	struct eb_pool *p;
	uint32_t card;
	int measured;
};

static enum strata_state adapt_state(void *ctx, size_t i)
{
	const struct adapt_ctx *a = ctx;
	const struct eb_pool *p = a->p;
	if (p->o.card_of[i / p->E] != a->card)
		return STRATA_BUSY; /* another card's */
	if (p->slot_of[i] == NONE)
		return STRATA_OUT;
	return __atomic_load_n(&p->c[a->card].landed[p->slot_of[i]], __ATOMIC_ACQUIRE) ? STRATA_IN :
											 STRATA_BUSY;
}

static int adapt_swap(void *ctx, uint32_t in, uint32_t out)
{
	const struct adapt_ctx *a = ctx;
	struct eb_pool *p = a->p;
	return upload(p, a->card, p->slot_of[out], in / p->E, in % p->E, a->measured);
}

int eb_pool_window_end(struct eb_pool *p, int measured)
{
	if (p->o.policy != EB_POOL_STRATA || ++p->windows % p->o.adapt_every != 0)
		return __atomic_load_n(&p->failed, __ATOMIC_RELAXED) ? -1 : 0;
	size_t n = (size_t)p->L * p->E;
	strata_decay(p->score, p->uses, n, p->o.decay);
	struct strata_ranked *cand = malloc(n * sizeof(*cand)), *vict = malloc(n * sizeof(*vict));
	int rc = cand && vict ? 0 : -1;
	for (uint32_t card = 0; card < p->o.cards && rc == 0; card++) {
		if (!p->c[card].slots)
			continue;
		struct adapt_ctx a = {p, card, measured};
		int swaps = strata_swaps(p->score, n, adapt_state, adapt_swap, &a, p->o.max_swaps, cand,
					 vict);
		if (swaps < 0)
			rc = -1;
		else if (measured)
			p->swaps += (uint64_t)swaps;
	}
	free(cand);
	free(vict);
	return rc || __atomic_load_n(&p->failed, __ATOMIC_RELAXED) ? -1 : 0;
}

void eb_pool_counts(const struct eb_pool *p, uint64_t *copies, uint64_t *bytes, uint64_t *swaps)
{
	*copies = p->copies;
	*bytes = p->copy_bytes;
	*swaps = p->swaps;
}

void eb_pool_free(struct eb_pool *p)
{
	if (!p)
		return;
	for (uint32_t card = 0; card < EB_MAX_CARDS; card++) {
		struct pcard *c = &p->c[card];
		if (c->started) {
			pthread_mutex_lock(&c->lock);
			c->stop = 1;
			pthread_cond_signal(&c->cond);
			pthread_mutex_unlock(&c->lock);
			pthread_join(c->thr, NULL);
			pthread_mutex_destroy(&c->lock);
			pthread_cond_destroy(&c->cond);
		}
		free(c->q);
		free(c->key);
		free(c->landed);
		free(c->stamp);
		free(c->lfirst);
		free(c->lcount);
		/* device memory: released with the device (process exit) */
	}
	free(p->slot_of);
	free(p->score);
	free(p->uses);
	free(p);
}
