/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsg_load.c: fill an arena memfd from the GGUF file.
 *
 * The copy plan is one run per (layer, part, expert): file range -> arena
 * range.  Sorted by file offset, the runs are read in file order with
 * preadv(), many runs per call (a file range that is contiguous in the file
 * scatters straight into its blobs: no bounce buffer, no second copy), at
 * most max_read bytes per call so progress stays fine-grained.  A blob is
 * complete when its last part has landed; it is then queued for its FNV-1a
 * checksum, which worker threads compute, four blobs at a time, while the
 * file is still being read (one FNV-1a stream runs at ~1 GB/s per core,
 * slower than a fast disk: a single one would be the bottleneck).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include "fs_arena.h"
#include "fsg_arena.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux >= 5.14 */
#endif

#define IOV_BATCH 1024 /* IOV_MAX on Linux */

struct run {
	uint64_t src; /* file offset */
	uint64_t len;
	uint64_t dst; /* arena offset */
	uint32_t blob;
};

struct cksum {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint32_t *q; /* blobs ready to checksum (each appears once) */
	uint32_t head, tail;
	int closing;
	uint8_t *base;
	struct fs_arena_entry *idx;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int run_cmp(const void *a, const void *b)
{
	const struct run *x = a, *y = b;
	return x->src < y->src ? -1 : x->src > y->src ? 1 : 0;
}

static uint64_t fnv_more(uint64_t h, const uint8_t *p, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		h = (h ^ p[i]) * FS_FNV64_PRIME;
	return h;
}

/*
 * One FNV-1a stream is a chain of dependent multiplies (~4 cycles a byte);
 * four independent chains in one loop keep the multiplier busy and hash
 * about three times the bytes per core.  Each result is exactly
 * fs_fnv1a64's of its buffer.
 */
void fsg_fnv1a64_4(const uint8_t *const p[4], uint64_t n, uint64_t h[4])
{
	uint64_t h0 = h[0], h1 = h[1], h2 = h[2], h3 = h[3];
	for (uint64_t i = 0; i < n; i++) {
		h0 = (h0 ^ p[0][i]) * FS_FNV64_PRIME;
		h1 = (h1 ^ p[1][i]) * FS_FNV64_PRIME;
		h2 = (h2 ^ p[2][i]) * FS_FNV64_PRIME;
		h3 = (h3 ^ p[3][i]) * FS_FNV64_PRIME;
	}
	h[0] = h0, h[1] = h1, h[2] = h2, h[3] = h3;
}

/* Checksum up to four blobs (of a layer, usually: the same size). */
#define CK_WAYS 4
static void checksum_blobs(struct cksum *ck, const uint32_t *blob, unsigned n)
{
	const uint8_t *p[CK_WAYS];
	uint64_t len[CK_WAYS], h[CK_WAYS], common = UINT64_MAX;
	for (unsigned k = 0; k < n; k++) {
		const struct fs_arena_entry *e = &ck->idx[blob[k]];
		p[k] = ck->base + e->offset;
		len[k] = e->bytes;
		h[k] = FS_FNV64_OFFSET;
		if (len[k] < common)
			common = len[k];
	}
	if (n == CK_WAYS)
		fsg_fnv1a64_4(p, common, h);
	else
		common = 0;
	for (unsigned k = 0; k < n; k++)
		ck->idx[blob[k]].checksum = fnv_more(h[k], p[k] + common, len[k] - common);
}

static void *cksum_worker(void *arg)
{
	struct cksum *ck = arg;
	uint32_t batch[CK_WAYS];
	pthread_mutex_lock(&ck->mu);
	for (;;) {
		while (ck->tail - ck->head < CK_WAYS && !ck->closing)
			pthread_cond_wait(&ck->cv, &ck->mu);
		if (ck->head == ck->tail)
			break;
		unsigned n = 0;
		while (n < CK_WAYS && ck->head != ck->tail)
			batch[n++] = ck->q[ck->head++];
		pthread_mutex_unlock(&ck->mu);
		checksum_blobs(ck, batch, n);
		pthread_mutex_lock(&ck->mu);
	}
	pthread_mutex_unlock(&ck->mu);
	return NULL;
}

static void blob_ready(struct cksum *ck, unsigned workers, uint32_t blob)
{
	if (!workers) {
		checksum_blobs(ck, &blob, 1);
		return;
	}
	pthread_mutex_lock(&ck->mu);
	ck->q[ck->tail++] = blob;
	if (ck->tail - ck->head >= CK_WAYS) /* workers take blobs four at a time */
		pthread_cond_signal(&ck->cv);
	pthread_mutex_unlock(&ck->mu);
}

/* Read exactly the iovecs' bytes from off: 0, or -errno (-EIO: the file
 * ended early, i.e. it shrank since it was parsed). */
static int read_all(int fd, struct iovec *iov, int n, uint64_t off, uint64_t *calls)
{
	while (n > 0) {
		ssize_t got = preadv(fd, iov, n, (off_t)off);
		(*calls)++;
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0) {
			/* Zero-length iovecs at the end of a batch read nothing. */
			while (n > 0 && iov->iov_len == 0) {
				iov++;
				n--;
			}
			return n == 0 ? 0 : -EIO;
		}
		off += (uint64_t)got;
		size_t g = (size_t)got;
		while (n > 0 && g >= iov->iov_len) {
			g -= iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + g;
			iov->iov_len -= g;
		}
	}
	return 0;
}

static struct run *make_runs(const struct fsg_plan *p, const struct fsg_layout *lo, uint64_t *nruns)
{
	uint64_t n = 0;
	for (uint32_t l = 0; l < p->layers; l++)
		n += (uint64_t)p->layer[l].nparts * p->experts;
	struct run *r = malloc((n ? n : 1) * sizeof(*r));
	if (!r)
		return NULL;
	uint64_t k = 0;
	for (uint32_t l = 0; l < p->layers; l++) {
		const struct fsg_layer *ly = &p->layer[l];
		for (uint32_t i = 0; i < ly->nparts; i++)
			for (uint32_t x = 0; x < p->experts; x++)
				r[k++] = (struct run){fsg_part_src(&ly->part[i], x), ly->part[i].bytes,
						      fsg_layout_blob(lo, l, x) + ly->part[i].blob_off,
						      l * p->experts + x};
	}
	qsort(r, (size_t)n, sizeof(*r), run_cmp);
	*nruns = n;
	return r;
}

static int lock_arena(struct fs_shm *shm, struct fsg_err *err)
{
	if (mlock(shm->base, shm->bytes) == 0)
		return 0;
	int e = errno;
	struct rlimit rl = {0};
	getrlimit(RLIMIT_MEMLOCK, &rl);
	char lim[32];
	if (rl.rlim_cur == RLIM_INFINITY)
		snprintf(lim, sizeof(lim), "unlimited");
	else
		snprintf(lim, sizeof(lim), "%llu bytes", (unsigned long long)rl.rlim_cur);
	return fsg_fail_errno(
		err, -e,
		"mlock of the %llu-byte arena failed (%s): the memlock limit (RLIMIT_MEMLOCK) is %s; "
		"raise LimitMEMLOCK= in the service unit (or ulimit -l), or grant CAP_IPC_LOCK",
		(unsigned long long)shm->bytes, strerror(e), lim);
}

/* Stream every run into the arena, handing completed blobs to ck. */
static int stream(int fd, const struct run *runs, uint64_t nruns, uint16_t *left, struct cksum *ck,
		  unsigned workers, const struct fsg_load_opts *o, uint64_t total, uint64_t t0,
		  struct fsg_load_result *res, struct fsg_err *err)
{
	uint64_t max_read = o->max_read ? o->max_read : 64ull << 20;
	uint64_t i = 0, in_run = 0, last_report = t0;
	struct iovec iov[IOV_BATCH];
	while (i < nruns) {
		uint64_t start = runs[i].src + in_run, want = 0, j = i, jo = in_run;
		int n = 0;
		while (j < nruns && n < IOV_BATCH && want < max_read) {
			if (n > 0 && runs[j].src != start + want)
				break; /* a gap in the file: next call */
			uint64_t take = runs[j].len - jo;
			if (take > max_read - want)
				take = max_read - want;
			iov[n++] = (struct iovec){ck->base + runs[j].dst + jo, (size_t)take};
			want += take;
			if (jo + take < runs[j].len) {
				jo += take;
				break;
			}
			j++;
			jo = 0;
		}
		int r = read_all(fd, iov, n, start, &res->read_calls);
		if (r < 0)
			return fsg_fail_errno(
				err, r, "reading %llu bytes at byte %llu of the model file: %s",
				(unsigned long long)want, (unsigned long long)start,
				r == -EIO ? "the file ended early (did it change since it was parsed?)" :
					    strerror(-r));
		for (uint64_t k = i; k < j; k++)
			if (--left[runs[k].blob] == 0)
				blob_ready(ck, workers, runs[k].blob);
		i = j;
		in_run = jo;
		res->bytes_read += want;
		uint64_t t = now_ns();
		if (o->progress && t - last_report >= 100000000ull && res->bytes_read < total) {
			o->progress(o->arg, res->bytes_read, total, t - t0);
			last_report = t;
		}
	}
	return 0;
}

int fsg_arena_build(const struct fsg_file *f, const struct fsg_plan *p, const struct fsg_load_opts *o,
		    struct fs_shm *shm, struct fsg_load_result *res, struct fsg_err *err)
{
	struct fsg_layout lo;
	struct run *runs = NULL;
	uint16_t *left = NULL;
	pthread_t th[8];
	unsigned workers = 0;
	uint64_t nruns = 0, nblobs = (uint64_t)p->layers * p->experts;
	uint64_t t0 = now_ns();
	struct cksum ck = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	int r;

	memset(res, 0, sizeof(*res));
	shm->fd = -1;
	shm->base = NULL;
	if (f->fd < 0)
		return fsg_fail_errno(err, -EBADF, "the model file is not open");
	if ((r = fsg_layout_build(p, &lo, err)) < 0)
		return r;
	if (lo.bytes > SIZE_MAX / 2) {
		fsg_layout_free(&lo);
		return fsg_fail_errno(err, -EFBIG, "an arena of %llu bytes cannot be mapped",
				      (unsigned long long)lo.bytes);
	}
	if ((r = fs_shm_create(shm, "foresight-arena", (size_t)lo.bytes)) < 0) {
		fsg_layout_free(&lo);
		shm->fd = -1;
		return fsg_fail_errno(err, r, "creating a %llu-byte arena memfd: %s",
				      (unsigned long long)lo.bytes, strerror(-r));
	}
	/* Lock before reading: fail in a second, not after reading the whole
	 * file; locking also allocates every page at once. */
	if (o->lock == FSG_LOCK_MUST && (r = lock_arena(shm, err)) < 0) {
		res->lock_failed = 1;
		goto out;
	}
	if (o->lock == FSG_LOCK_TRY)
		(void)lock_arena(shm, &res->lock_err);
	res->locked = o->lock != FSG_LOCK_NO && res->lock_err.msg[0] == 0;
	if (!res->locked) {
		(void)madvise(shm->base, shm->bytes, MADV_HUGEPAGE);       /* where shmem THP allows it */
		(void)madvise(shm->base, shm->bytes, MADV_POPULATE_WRITE); /* one fault per page is slow */
	}
	fsg_layout_write(p, &lo, shm->base, shm->bytes, o->model);
	ck.base = shm->base;
	ck.idx = (struct fs_arena_entry *)((char *)shm->base + lo.off_index);

	runs = make_runs(p, &lo, &nruns);
	left = malloc((nblobs ? nblobs : 1) * sizeof(*left));
	ck.q = malloc((nblobs ? nblobs : 1) * sizeof(*ck.q));
	if (!runs || !left || !ck.q) {
		r = fsg_fail_errno(err, -ENOMEM, "out of memory for the copy plan (%llu runs)",
				   (unsigned long long)nruns);
		goto out;
	}
	for (uint64_t b = 0; b < nblobs; b++)
		left[b] = (uint16_t)p->layer[b / p->experts].nparts;

	unsigned want = o->threads;
	if (!want) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		want = cpus > 2 ? (unsigned)(cpus - 1) : 1;
	}
	if (want > 8)
		want = 8;
	for (; workers < want; workers++)
		if (pthread_create(&th[workers], NULL, cksum_worker, &ck) != 0)
			break; /* fewer workers (none: checksums inline) */
	res->threads = workers;

	(void)posix_fadvise(f->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	r = stream(f->fd, runs, nruns, left, &ck, workers, o, p->member_bytes, t0, res, err);

	pthread_mutex_lock(&ck.mu);
	ck.closing = 1;
	pthread_cond_broadcast(&ck.cv);
	pthread_mutex_unlock(&ck.mu);
	for (unsigned w = 0; w < workers; w++)
		pthread_join(th[w], NULL);
	res->ns = now_ns() - t0;
	if (r == 0 && o->progress)
		o->progress(o->arg, res->bytes_read, p->member_bytes, res->ns);
out:
	free(runs);
	free(left);
	free(ck.q);
	fsg_layout_free(&lo);
	if (r < 0)
		fs_shm_close(shm);
	return r;
}
