/* SPDX-License-Identifier: Apache-2.0 */
/*
 * eb_cpu.c: the CPU expert path (misses, computed from the arena with
 * threads) and the CPU dense part (the host device).
 *
 * A batch of jobs is cut into chunks of up to 256 KiB; the caller and
 * threads - 1 workers take chunks off a shared counter and add their
 * partial sums into the jobs' y with atomic adds (wrapping sums: the order
 * does not matter).  Every byte of every job is read.  Pacing: with gbps
 * > 0 a batch of B bytes returns no sooner than B / gbps after it started,
 * which emulates a host whose threads compute a missed expert at that
 * rate (the discussion's machine: 2.78 ms per extra miss per layer-window
 * over 48 layers, 58 us per 1.8 MiB expert, about 32.6 GB/s); a slower
 * machine is simply slower.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eb.h"

#define EB_CHUNK (256u * 1024u)
#define EB_SUB 4096u /* words per sub-block: each token's pass stays in L1 */

uint64_t eb_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t eb_fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static void sleep_until(uint64_t t)
{
	for (;;) {
		uint64_t now = eb_now_ns();
		if (now >= t)
			return;
		if (t - now > 60000) {
			uint64_t ns = t - now - 50000;
			struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
					      .tv_nsec = (long)(ns % 1000000000u)};
			nanosleep(&ts, NULL);
		}
	}
}

/* Bytes [off, off + len) of a job (off a multiple of 4), tokens in mask. */
static void part(const struct eb_job *j, uint64_t off, uint64_t len, const uint32_t *keys, uint32_t ntok,
		 uint32_t *acc)
{
	const uint8_t *p = j->ptr;
	uint64_t words = j->bytes / 4, end = off + len;
	uint64_t w0 = off / 4, w1 = (end < words * 4 ? end : words * 4) / 4;
	for (uint64_t s = w0; s < w1; s += EB_SUB) {
		uint64_t e = s + EB_SUB < w1 ? s + EB_SUB : w1;
		for (uint32_t t = 0; t < ntok; t++) {
			if (!(j->mask & (1u << t)))
				continue;
			uint32_t k = keys[t], a = 0;
			for (uint64_t i = s; i < e; i++) {
				uint32_t w;
				memcpy(&w, p + 4 * i, 4);
				a += eb_term(w, (uint32_t)i, k);
			}
			acc[t] += a;
		}
	}
	if (end == j->bytes)
		for (uint64_t b = words * 4; b < j->bytes; b++)
			for (uint32_t t = 0; t < ntok; t++)
				if (j->mask & (1u << t))
					acc[t] += eb_term(p[b], (uint32_t)(words + (b - words * 4)), keys[t]);
}

void eb_cpu_jobs(struct eb_job *jobs, uint32_t n, const uint32_t *keys, uint32_t ntok)
{
	for (uint32_t i = 0; i < n; i++) {
		memset(jobs[i].y, 0, sizeof(jobs[i].y));
		part(&jobs[i], 0, jobs[i].bytes, keys, ntok, jobs[i].y);
	}
}

void eb_cpu_dense(uint32_t *h, uint32_t ntok, uint32_t layer, uint32_t iters)
{
	for (uint32_t t = 0; t < ntok; t++)
		for (uint32_t j = 0; j < EB_D; j++)
			h[t * EB_D + j] = eb_dense_word(h[t * EB_D + j], layer, j, iters);
}

/* ---- the thread pool --------------------------------------------------- */

struct eb_chunk {
	uint32_t job;
	uint64_t off, len;
};

struct eb_cpu {
	unsigned threads;
	double gbps;
	pthread_t *thr;
	pthread_mutex_t lock;
	pthread_cond_t go, done;
	uint64_t batch;   /* batch number, bumped per eb_cpu_run */
	unsigned running; /* workers still in the batch */
	int stop;
	/* the batch */
	struct eb_job *jobs;
	const uint32_t *keys;
	uint32_t ntok;
	struct eb_chunk *chunks;
	uint32_t nchunks, cap;
	uint32_t next; /* atomic */
};

static void drain(struct eb_cpu *c)
{
	for (;;) {
		uint32_t i = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED);
		if (i >= c->nchunks)
			return;
		const struct eb_chunk *ch = &c->chunks[i];
		struct eb_job *j = &c->jobs[ch->job];
		uint32_t acc[EB_MAX_T] = {0};
		part(j, ch->off, ch->len, c->keys, c->ntok, acc);
		for (uint32_t t = 0; t < c->ntok; t++)
			if (acc[t])
				__atomic_fetch_add(&j->y[t], acc[t], __ATOMIC_RELAXED);
	}
}

static void *worker(void *arg)
{
	struct eb_cpu *c = arg;
	uint64_t seen = 0;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (c->batch == seen && !c->stop)
			pthread_cond_wait(&c->go, &c->lock);
		if (c->stop)
			break;
		seen = c->batch;
		pthread_mutex_unlock(&c->lock);
		drain(c);
		pthread_mutex_lock(&c->lock);
		if (--c->running == 0)
			pthread_cond_signal(&c->done);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

int eb_cpu_create(struct eb_cpu **out, unsigned threads, double gbps)
{
	struct eb_cpu *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->threads = threads ? threads : 1;
	c->gbps = gbps;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->go, NULL);
	pthread_cond_init(&c->done, NULL);
	c->thr = calloc(c->threads, sizeof(*c->thr));
	if (!c->thr) {
		free(c);
		return -ENOMEM;
	}
	for (unsigned i = 1; i < c->threads; i++)
		if (pthread_create(&c->thr[i], NULL, worker, c) != 0) {
			c->threads = i;
			eb_cpu_destroy(c);
			return -EAGAIN;
		}
	*out = c;
	return 0;
}

void eb_cpu_destroy(struct eb_cpu *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stop = 1;
	pthread_cond_broadcast(&c->go);
	pthread_mutex_unlock(&c->lock);
	for (unsigned i = 1; i < c->threads; i++)
		pthread_join(c->thr[i], NULL);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->go);
	pthread_cond_destroy(&c->done);
	free(c->thr);
	free(c->chunks);
	free(c);
}

void eb_cpu_run(struct eb_cpu *c, struct eb_job *jobs, uint32_t n, const uint32_t *keys, uint32_t ntok)
{
	if (n == 0)
		return;
	uint64_t t0 = eb_now_ns(), total = 0;
	c->nchunks = 0;
	for (uint32_t i = 0; i < n; i++) {
		memset(jobs[i].y, 0, sizeof(jobs[i].y));
		total += jobs[i].bytes;
		uint64_t off = 0;
		do {
			if (c->nchunks == c->cap) {
				uint32_t nc = c->cap ? c->cap * 2 : 256;
				struct eb_chunk *p = realloc(c->chunks, nc * sizeof(*p));
				if (!p)
					abort();
				c->chunks = p;
				c->cap = nc;
			}
			uint64_t len = jobs[i].bytes - off < EB_CHUNK ? jobs[i].bytes - off : EB_CHUNK;
			c->chunks[c->nchunks++] = (struct eb_chunk){i, off, len};
			off += len;
		} while (off < jobs[i].bytes);
	}
	c->jobs = jobs;
	c->keys = keys;
	c->ntok = ntok;
	__atomic_store_n(&c->next, 0, __ATOMIC_RELAXED);
	pthread_mutex_lock(&c->lock);
	c->running = c->threads - 1;
	c->batch++;
	pthread_cond_broadcast(&c->go);
	pthread_mutex_unlock(&c->lock);
	drain(c);
	pthread_mutex_lock(&c->lock);
	while (c->running)
		pthread_cond_wait(&c->done, &c->lock);
	pthread_mutex_unlock(&c->lock);
	if (c->gbps > 0)
		sleep_until(t0 + (uint64_t)((double)total / c->gbps));
}
