/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bq.h: the baseline the ring is measured against: a bounded queue of
 * struct fs_rec in shared memory, guarded by one process-shared pthread
 * mutex, with two process-shared condition variables (not_empty for the
 * consumer, not_full for the producer).
 *
 * It is written the way a careful mutex/condvar queue is written, not as a
 * straw man: the consumer drains up to `max` records per lock hold, and a
 * side signals the other only when the other announced that it waits, so a
 * push or pop that finds nobody waiting costs one lock/unlock pair and no
 * system call.
 */
#ifndef FS_BENCH_BQ_H
#define FS_BENCH_BQ_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "fs_proto.h"

struct bq {
	pthread_mutex_t mu;
	pthread_cond_t not_empty; /* consumer waits here */
	pthread_cond_t not_full;  /* producer waits here */
	uint32_t entries;         /* power of two */
	uint32_t mask;
	uint32_t head; /* free-running, under mu */
	uint32_t tail; /* free-running, under mu */
	uint32_t cons_waiting;
	uint32_t prod_waiting;
	uint32_t rec_offset; /* bytes from the start of struct bq to record 0 */
};

/* Bytes a queue of `entries` records occupies. */
size_t bq_bytes(uint32_t entries);

/* Initialise an empty queue in `mem` (shared mapping, 64-byte aligned).
 * 0 or a negative errno. */
int bq_init(struct bq *q, uint32_t entries);
void bq_destroy(struct bq *q);

/* Append n records (n <= entries), waiting while there is no room for all
 * of them.  0, or -ETIMEDOUT when no room appeared within timeout_ns. */
int bq_push(struct bq *q, const struct fs_rec *r, uint32_t n, uint64_t timeout_ns);

/* Take up to max records.  block: wait on not_empty (at most timeout_ns)
 * while the queue is empty; else return 0 at once when it is empty. */
uint32_t bq_pop(struct bq *q, struct fs_rec *out, uint32_t max, int block, uint64_t timeout_ns);

#endif /* FS_BENCH_BQ_H */
