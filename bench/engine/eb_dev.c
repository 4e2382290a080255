/* SPDX-License-Identifier: Apache-2.0 */
/*
 * eb_dev.c: the device an engine computes resident experts and the dense
 * part on.  CUDA: eb_dev_cuda.cu.  Host: the stand-in for a GPU when
 * foresightd runs its host backend: the dense part is the same integer
 * loop on the calling thread (a busy CPU loop of the calibrated length),
 * and resident experts are computed by one "device" thread that reads
 * them where they are (the host backend's slot pool memfd, or the engine's
 * own pool), while the engine's CPU threads compute the misses.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "eb.h"

struct eb_dev {
	enum eb_device kind;
#ifdef EB_HAVE_CUDA
	struct eb_cuda *cuda;
#endif
	/* host device */
	pthread_t thr;
	int started, stop, busy;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct eb_job *jobs;
	uint32_t n, ntok;
	uint32_t keys[EB_MAX_T];
};

static void *dev_thread(void *arg)
{
	struct eb_dev *d = arg;
	pthread_mutex_lock(&d->lock);
	for (;;) {
		while (d->busy != 1 && !d->stop)
			pthread_cond_wait(&d->cond, &d->lock);
		if (d->stop)
			break;
		pthread_mutex_unlock(&d->lock);
		eb_cpu_jobs(d->jobs, d->n, d->keys, d->ntok);
		pthread_mutex_lock(&d->lock);
		d->busy = 2;
		pthread_cond_broadcast(&d->cond);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

int eb_dev_open(struct eb_dev **out, enum eb_device kind, uint32_t cards, char *err, size_t errlen)
{
	struct eb_dev *d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	d->kind = kind;
	if (kind == EB_DEV_CUDA) {
#ifdef EB_HAVE_CUDA
		int rc = eb_cuda_open(&d->cuda, cards, err, errlen);
		if (rc) {
			if (d->cuda)
				eb_cuda_close(d->cuda);
			free(d);
			return rc;
		}
		*out = d;
		return 0;
#else
		(void)cards;
		snprintf(err, errlen,
			 "--device cuda: this build has no CUDA (nvcc was not found at build time)");
		free(d);
		return -ENOTSUP;
#endif
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	if (pthread_create(&d->thr, NULL, dev_thread, d) != 0) {
		snprintf(err, errlen, "cannot start the device thread");
		free(d);
		return -EAGAIN;
	}
	d->started = 1;
	*out = d;
	return 0;
}

void eb_dev_close(struct eb_dev *d)
{
	if (!d)
		return;
#ifdef EB_HAVE_CUDA
	if (d->cuda)
		eb_cuda_close(d->cuda);
#endif
	if (d->started) {
		pthread_mutex_lock(&d->lock);
		d->stop = 1;
		pthread_cond_broadcast(&d->cond);
		pthread_mutex_unlock(&d->lock);
		pthread_join(d->thr, NULL);
		pthread_mutex_destroy(&d->lock);
		pthread_cond_destroy(&d->cond);
	}
	free(d);
}

void *eb_dev_alloc(struct eb_dev *d, uint32_t card, uint64_t bytes)
{
#ifdef EB_HAVE_CUDA
	if (d->cuda)
		return eb_cuda_alloc(d->cuda, card, bytes);
#endif
	(void)d;
	(void)card;
	void *p = NULL;
	if (posix_memalign(&p, 4096, bytes ? bytes : 4096) != 0)
		return NULL;
	return p;
}

int eb_dev_put(struct eb_dev *d, uint32_t card, void *dst, const void *src, uint64_t bytes)
{
#ifdef EB_HAVE_CUDA
	if (d->cuda)
		return eb_cuda_put(d->cuda, card, dst, src, bytes);
#endif
	(void)d;
	(void)card;
	memcpy(dst, src, bytes);
	return 0;
}

int eb_dev_dense(struct eb_dev *d, uint32_t card, uint32_t *h, uint32_t ntok, uint32_t layer, uint32_t iters)
{
#ifdef EB_HAVE_CUDA
	if (d->cuda)
		return eb_cuda_dense(d->cuda, card, h, ntok, layer, iters);
#endif
	(void)d;
	(void)card;
	eb_cpu_dense(h, ntok, layer, iters);
	return 0;
}

int eb_dev_experts_start(struct eb_dev *d, uint32_t card, struct eb_job *jobs, uint32_t n,
			 const uint32_t *keys, uint32_t ntok)
{
#ifdef EB_HAVE_CUDA
	if (d->cuda)
		return eb_cuda_experts_start(d->cuda, card, jobs, n, keys, ntok);
#endif
	(void)card;
	pthread_mutex_lock(&d->lock);
	d->jobs = jobs;
	d->n = n;
	d->ntok = ntok;
	memcpy(d->keys, keys, ntok * sizeof(*keys));
	d->busy = 1;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	return 0;
}

int eb_dev_experts_wait(struct eb_dev *d, uint32_t card)
{
#ifdef EB_HAVE_CUDA
	if (d->cuda)
		return eb_cuda_experts_wait(d->cuda, card);
#endif
	(void)card;
	pthread_mutex_lock(&d->lock);
	while (d->busy == 1)
		pthread_cond_wait(&d->cond, &d->lock);
	d->busy = 0;
	pthread_mutex_unlock(&d->lock);
	return 0;
}

double eb_dev_dense_time(struct eb_dev *d, uint32_t iters, uint32_t reps)
{
	uint32_t h[3 * EB_D];
	for (uint32_t i = 0; i < 3 * EB_D; i++)
		h[i] = eb_embed(i / EB_D, i % EB_D);
	eb_dev_dense(d, 0, h, 3, 0, iters); /* warm up */
	double best = 1e30;
	for (uint32_t r = 0; r < reps; r++) {
		uint64_t t0 = eb_now_ns();
		eb_dev_dense(d, 0, h, 3, 1, iters);
		double s = (double)(eb_now_ns() - t0) / 1e9;
		if (s < best)
			best = s;
	}
	return best;
}

int eb_dev_ra(struct eb_dev *d, uint32_t card, const struct fs_ra_params *p)
{
#ifdef EB_HAVE_CUDA
	if (d->kind == EB_DEV_CUDA)
		return eb_cuda_ra(d->cuda, card, p);
#endif
	(void)d, (void)card, (void)p;
	return -1;
}

int eb_dev_ra_sync(struct eb_dev *d)
{
#ifdef EB_HAVE_CUDA
	if (d->kind == EB_DEV_CUDA)
		return eb_cuda_ra_sync(d->cuda) ? 0 : -1;
#endif
	(void)d;
	return 0;
}
