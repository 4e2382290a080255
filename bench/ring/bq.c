/* SPDX-License-Identifier: Apache-2.0 */
/* bq.c: the mutex + condition variable baseline queue (see bq.h). */
#include "bq.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#define BQ_ALIGN 64u

static size_t bq_rec_offset(void)
{
	return (sizeof(struct bq) + BQ_ALIGN - 1) / BQ_ALIGN * BQ_ALIGN;
}

static struct fs_rec *bq_recs(struct bq *q)
{
	return (struct fs_rec *)((char *)q + q->rec_offset);
}

size_t bq_bytes(uint32_t entries)
{
	return bq_rec_offset() + (size_t)entries * sizeof(struct fs_rec);
}

int bq_init(struct bq *q, uint32_t entries)
{
	if (entries == 0 || (entries & (entries - 1)) != 0)
		return -EINVAL;
	memset(q, 0, sizeof(*q));
	pthread_mutexattr_t ma;
	pthread_condattr_t ca;
	int rc = pthread_mutexattr_init(&ma);
	if (rc == 0)
		rc = pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	if (rc == 0)
		rc = pthread_mutex_init(&q->mu, &ma);
	pthread_mutexattr_destroy(&ma);
	if (rc != 0)
		return -rc;
	rc = pthread_condattr_init(&ca);
	if (rc == 0)
		rc = pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
	if (rc == 0)
		rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(&q->not_empty, &ca);
	if (rc == 0)
		rc = pthread_cond_init(&q->not_full, &ca);
	pthread_condattr_destroy(&ca);
	if (rc != 0)
		return -rc;
	q->entries = entries;
	q->mask = entries - 1;
	q->rec_offset = (uint32_t)bq_rec_offset();
	memset(bq_recs(q), 0, (size_t)entries * sizeof(struct fs_rec));
	return 0;
}

void bq_destroy(struct bq *q)
{
	pthread_cond_destroy(&q->not_full);
	pthread_cond_destroy(&q->not_empty);
	pthread_mutex_destroy(&q->mu);
}

static struct timespec deadline_after(uint64_t ns)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	ns += (uint64_t)t.tv_nsec;
	t.tv_sec += (time_t)(ns / 1000000000u);
	t.tv_nsec = (long)(ns % 1000000000u);
	return t;
}

int bq_push(struct bq *q, const struct fs_rec *r, uint32_t n, uint64_t timeout_ns)
{
	if (n > q->entries)
		return -EINVAL;
	pthread_mutex_lock(&q->mu);
	if (q->entries - (q->tail - q->head) < n) {
		struct timespec dl = deadline_after(timeout_ns);
		while (q->entries - (q->tail - q->head) < n) {
			q->prod_waiting++;
			int rc = pthread_cond_timedwait(&q->not_full, &q->mu, &dl);
			q->prod_waiting--;
			if (rc == ETIMEDOUT && q->entries - (q->tail - q->head) < n) {
				pthread_mutex_unlock(&q->mu);
				return -ETIMEDOUT;
			}
		}
	}
	struct fs_rec *recs = bq_recs(q);
	uint32_t idx = q->tail & q->mask;
	uint32_t first = q->entries - idx;
	if (first > n)
		first = n;
	memcpy(&recs[idx], r, (size_t)first * sizeof(*r));
	memcpy(&recs[0], r + first, (size_t)(n - first) * sizeof(*r));
	q->tail += n;
	if (q->cons_waiting)
		pthread_cond_signal(&q->not_empty);
	pthread_mutex_unlock(&q->mu);
	return 0;
}

uint32_t bq_pop(struct bq *q, struct fs_rec *out, uint32_t max, int block, uint64_t timeout_ns)
{
	pthread_mutex_lock(&q->mu);
	if (q->tail == q->head) {
		if (!block) {
			pthread_mutex_unlock(&q->mu);
			return 0;
		}
		struct timespec dl = deadline_after(timeout_ns);
		while (q->tail == q->head) {
			q->cons_waiting++;
			int rc = pthread_cond_timedwait(&q->not_empty, &q->mu, &dl);
			q->cons_waiting--;
			if (rc == ETIMEDOUT)
				break;
		}
	}
	uint32_t avail = q->tail - q->head;
	if (avail > max)
		avail = max;
	const struct fs_rec *recs = bq_recs(q);
	for (uint32_t i = 0; i < avail; i++)
		out[i] = recs[(q->head + i) & q->mask];
	q->head += avail;
	if (avail && q->prod_waiting)
		pthread_cond_signal(&q->not_full);
	pthread_mutex_unlock(&q->mu);
	return avail;
}
