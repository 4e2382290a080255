/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsg_load.c: fill an arena memfd from the GGUF file.
 *
 * The work is cut into jobs of consecutive experts of one layer (about
 * opts->chunk bytes of blobs each, a multiple of four experts where the
 * layer allows).  Loader threads take jobs in file order from one atomic
 * counter and do the whole pipeline per job, on their own core, while the
 * other threads do the same for the next jobs:
 *   1. populate the job's arena pages (MADV_POPULATE_WRITE; with the arena
 *      locked MLOCK_ONFAULT up front, this also locks them): the page
 *      allocation and its zeroing, spread over the threads instead of one
 *      mlock pass before the first read;
 *   2. read each part's slices (for stacked tensors, the job's experts are
 *      one contiguous file range: one preadv scattering into the blobs, or
 *      with O_DIRECT, a bench's comparison, one aligned read into a bounce
 *      buffer and a copy); cold, the job a round ahead is asked for
 *      (POSIX_FADV_WILLNEED) first;
 *   3. checksum the job's blobs (FNV-1a 64, four streams at once) while
 *      they are still in the core's cache.
 * So the disk has one request in flight per thread, and the memory write,
 * the checksum and the lock overlap per job instead of running as passes.
 * A layer is complete when its last job is; opts->layer_done says so (the
 * daemon serves a layer from then on).  The calling thread reports progress
 * every 100 ms while it waits.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "fs_arena.h"
#include "fsg_arena.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  /* Linux >= 5.14 */
#define MADV_POPULATE_WRITE 23 /* Linux >= 5.14 */
#endif
#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 0x01 /* Linux >= 4.4 */
#endif

#define IOV_BATCH 1024     /* IOV_MAX on Linux */
#define DIRECT_ALIGN 4096u /* O_DIRECT: offset, length and buffer */
#define MAX_THREADS 64u
#define CK_WAYS 4
#define READAHEAD_MAX (256ull << 20) /* bytes asked for ahead of the jobs, cold */

struct job {
	uint32_t layer, x0, n; /* experts x0 .. x0 + n - 1 of the layer */
};

struct loader {
	const struct fsg_plan *p;
	const struct fsg_layout *lo;
	const struct fsg_load_opts *o;
	int fd, dfd; /* dfd: an O_DIRECT open of the same file, or -1 */
	uint8_t *base;
	int mfd; /* the arena memfd (the write fill) */
	struct fs_arena_entry *idx;
	struct job *jobs;
	uint64_t njobs;
	uint64_t max_read;
	uint64_t bounce_bytes;
	uint64_t ahead;        /* buffered, cold: readahead this many jobs ahead; 0: none */
	uint64_t next;         /* atomic: the next job to take */
	uint64_t done;         /* atomic: expert bytes landed and checksummed */
	uint64_t read_calls;   /* atomic */
	uint64_t direct_bytes; /* atomic: bytes read with O_DIRECT */
	uint32_t *layer_left;  /* atomic: jobs of the layer not finished */
	int failed;            /* atomic: a job failed; the others stop */
	int populate;          /* map fill: MADV_POPULATE_WRITE each job's pages */
	int write;             /* write fill: assemble a job in wbuf, pwrite it */
	int map_after;         /* write fill, locked: MADV_POPULATE_READ the written pages */
	uint64_t wbuf_bytes;   /* the largest job's arena span */
	uint64_t t0;           /* when the fill began */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned running;
	int err_r;
	struct fsg_err err;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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

/* Where a job's bytes go: arena offset a is at dst + (a - off0) (the arena
 * mapping itself, or the thread's buffer for the write fill). */
struct dst {
	uint8_t *p;
	uint64_t off0;
};

static inline uint8_t *at(const struct dst *d, uint64_t a)
{
	return d->p + (a - d->off0);
}

/* Checksum the job's blobs (one layer: all the same size), four at once. */
static void checksum_job(struct loader *L, const struct job *j, const struct dst *d)
{
	uint64_t bytes = L->p->layer[j->layer].blob_bytes;
	uint32_t x = 0;
	for (; x + CK_WAYS <= j->n; x += CK_WAYS) {
		const uint8_t *q[CK_WAYS];
		uint64_t h[CK_WAYS];
		for (unsigned k = 0; k < CK_WAYS; k++) {
			q[k] = at(d, fsg_layout_blob(L->lo, j->layer, j->x0 + x + k));
			h[k] = FS_FNV64_OFFSET;
		}
		fsg_fnv1a64_4(q, bytes, h);
		for (unsigned k = 0; k < CK_WAYS; k++)
			L->idx[(uint64_t)j->layer * L->p->experts + j->x0 + x + k].checksum = h[k];
	}
	if (j->n - x >= 2) { /* 2 or 3 left: still four streams, the last blob hashed twice */
		const uint8_t *q[CK_WAYS];
		uint64_t h[CK_WAYS];
		for (unsigned k = 0; k < CK_WAYS; k++) {
			uint32_t e = j->x0 + x + (x + k < j->n ? k : j->n - 1 - x);
			q[k] = at(d, fsg_layout_blob(L->lo, j->layer, e));
			h[k] = FS_FNV64_OFFSET;
		}
		fsg_fnv1a64_4(q, bytes, h);
		for (unsigned k = 0; x + k < j->n; k++)
			L->idx[(uint64_t)j->layer * L->p->experts + j->x0 + x + k].checksum = h[k];
		x = j->n;
	}
	for (; x < j->n; x++) {
		const uint8_t *q = at(d, fsg_layout_blob(L->lo, j->layer, j->x0 + x));
		L->idx[(uint64_t)j->layer * L->p->experts + j->x0 + x].checksum = fnv_more(FS_FNV64_OFFSET, q,
											   bytes);
	}
}

/* Read exactly the iovecs' bytes from off: 0, or -errno (-EIO: the file
 * ended early, i.e. it shrank since it was parsed). */
static int read_all(struct loader *L, int fd, struct iovec *iov, int n, uint64_t off)
{
	while (n > 0) {
		ssize_t got = preadv(fd, iov, n, (off_t)off);
		__atomic_add_fetch(&L->read_calls, 1, __ATOMIC_RELAXED);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0) {
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

/* Buffered: file range [src, src + len) scattered into the blobs of
 * experts x0.. of one part, at most max_read bytes (and IOV_BATCH pieces)
 * per call.  piece = one expert's slice. */
static int read_scatter(struct loader *L, const struct dst *d, const struct fsg_part *pt, uint32_t layer,
			uint32_t x0, uint32_t n)
{
	struct iovec iov[IOV_BATCH];
	uint64_t src = fsg_part_src(pt, x0), want = 0;
	int k = 0;
	for (uint32_t x = 0; x < n; x++) {
		uint8_t *dst = at(d, fsg_layout_blob(L->lo, layer, x0 + x) + pt->blob_off);
		for (uint64_t o = 0; o < pt->bytes;) {
			uint64_t take = pt->bytes - o;
			if (take > L->max_read - want)
				take = L->max_read - want;
			iov[k++] = (struct iovec){dst + o, (size_t)take};
			want += take;
			o += take;
			if (want == L->max_read || k == IOV_BATCH) {
				int r = read_all(L, L->fd, iov, k, src);
				if (r < 0)
					return r;
				src += want;
				want = 0;
				k = 0;
			}
		}
	}
	return k ? read_all(L, L->fd, iov, k, src) : 0;
}

/* O_DIRECT: the aligned superset of [src, src + len) into the bounce
 * buffer, then each expert's slice copied to its blob. */
static int read_direct(struct loader *L, const struct dst *d, uint8_t *bounce, const struct fsg_part *pt,
		       uint32_t layer, uint32_t x0, uint32_t n)
{
	uint64_t src = fsg_part_src(pt, x0), len = (uint64_t)n * pt->bytes;
	uint64_t a = src / DIRECT_ALIGN * DIRECT_ALIGN;
	uint64_t end = (src + len + DIRECT_ALIGN - 1) / DIRECT_ALIGN * DIRECT_ALIGN;
	if (end - a > L->bounce_bytes)
		return -ENOBUFS; /* cannot happen: sized from the jobs */
	uint64_t got = 0;
	while (a + got < src + len) {
		uint64_t ask = end - a - got;
		if (ask > L->max_read)
			ask = (L->max_read + DIRECT_ALIGN - 1) / DIRECT_ALIGN * DIRECT_ALIGN;
		ssize_t r = pread(L->dfd, bounce + got, (size_t)ask, (off_t)(a + got));
		__atomic_add_fetch(&L->read_calls, 1, __ATOMIC_RELAXED);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO; /* the file ended early */
		got += (uint64_t)r;
		if ((uint64_t)r < ask && a + got < src + len && (uint64_t)r % DIRECT_ALIGN)
			return -EIO;
	}
	__atomic_add_fetch(&L->direct_bytes, got, __ATOMIC_RELAXED);
	for (uint32_t x = 0; x < n; x++)
		memcpy(at(d, fsg_layout_blob(L->lo, layer, x0 + x) + pt->blob_off),
		       bounce + (src - a) + (uint64_t)x * pt->bytes, (size_t)pt->bytes);
	return 0;
}

/* The write fill: the bytes of each blob that no part covers (the part
 * alignment, the page padding) are zeros, as in a fresh page. */
static void zero_gaps(const struct fsg_layer *ly, uint8_t *blob, uint64_t stride)
{
	uint32_t ord[FS_ARENA_MAX_PARTS], n = 0;
	for (uint32_t i = 0; i < ly->nparts && i < FS_ARENA_MAX_PARTS; i++) { /* by blob_off */
		uint32_t k = n++;
		for (; k > 0 && ly->part[ord[k - 1]].blob_off > ly->part[i].blob_off; k--)
			ord[k] = ord[k - 1];
		ord[k] = i;
	}
	uint64_t cur = 0;
	for (uint32_t k = 0; k <= n; k++) {
		uint64_t end = k < n ? ly->part[ord[k]].blob_off : stride;
		if (end > stride)
			end = stride;
		if (end > cur)
			memset(blob + cur, 0, (size_t)(end - cur));
		if (k < n && ly->part[ord[k]].blob_off + ly->part[ord[k]].bytes > cur)
			cur = ly->part[ord[k]].blob_off + ly->part[ord[k]].bytes;
	}
}

/* pwrite all of [buf, buf + n) at off of the memfd: 0 or -errno. */
static int write_all(int fd, const uint8_t *buf, uint64_t n, uint64_t off)
{
	while (n > 0) {
		ssize_t w = pwrite(fd, buf, (size_t)(n > (1ull << 30) ? 1ull << 30 : n), (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		buf += w;
		off += (uint64_t)w;
		n -= (uint64_t)w;
	}
	return 0;
}

static int do_job(struct loader *L, const struct job *j, uint8_t *bounce, uint8_t *wbuf)
{
	const struct fsg_layer *ly = &L->p->layer[j->layer];
	uint64_t stride = L->lo->stride[j->layer];
	uint64_t off0 = fsg_layout_blob(L->lo, j->layer, j->x0), span = stride * j->n;
	struct dst d = {L->write ? wbuf : L->base + off0, off0};
	if (L->populate)
		(void)madvise(L->base + off0, (size_t)span, MADV_POPULATE_WRITE);
	for (uint32_t i = 0; i < ly->nparts; i++) {
		const struct fsg_part *pt = &ly->part[i];
		int r;
		if (pt->split) { /* one tensor per expert: a read each */
			r = 0;
			for (uint32_t x = 0; x < j->n && r == 0; x++)
				r = bounce ? read_direct(L, &d, bounce, pt, j->layer, j->x0 + x, 1) :
					     read_scatter(L, &d, pt, j->layer, j->x0 + x, 1);
		} else if (bounce) {
			r = read_direct(L, &d, bounce, pt, j->layer, j->x0, j->n);
		} else {
			r = read_scatter(L, &d, pt, j->layer, j->x0, j->n);
		}
		if (r < 0) {
			uint64_t src = fsg_part_src(pt, j->x0);
			pthread_mutex_lock(&L->mu);
			if (!L->err_r)
				L->err_r = fsg_fail_errno(
					&L->err, r, "reading %llu bytes at byte %llu of the model file: %s",
					(unsigned long long)((uint64_t)j->n * pt->bytes),
					(unsigned long long)src,
					r == -EIO ?
						"the file ended early (did it change since it was parsed?)" :
						strerror(-r));
			pthread_mutex_unlock(&L->mu);
			return r;
		}
	}
	if (L->write)
		for (uint32_t x = 0; x < j->n; x++)
			zero_gaps(ly, wbuf + (uint64_t)x * stride, stride);
	checksum_job(L, j, &d);
	if (L->write) {
		int r = write_all(L->mfd, wbuf, span, off0);
		if (r < 0) {
			pthread_mutex_lock(&L->mu);
			if (!L->err_r)
				L->err_r = fsg_fail_errno(&L->err, r, "writing %llu bytes into the arena: %s",
							  (unsigned long long)span, strerror(-r));
			pthread_mutex_unlock(&L->mu);
			return r;
		}
		/* Map (and so lock: MLOCK_ONFAULT) the pages now in the memfd:
		 * read faults, which map the page cache's pages a run at a time. */
		if (L->map_after)
			(void)madvise(L->base + off0, (size_t)span, MADV_POPULATE_READ);
	}
	uint64_t bytes = 0;
	for (uint32_t i = 0; i < ly->nparts; i++)
		bytes += ly->part[i].bytes * j->n;
	__atomic_add_fetch(&L->done, bytes, __ATOMIC_RELAXED);
	if (__atomic_sub_fetch(&L->layer_left[j->layer], 1, __ATOMIC_ACQ_REL) == 0 && L->o->layer_done)
		L->o->layer_done(L->o->arg, j->layer);
	return 0;
}

/* opts->max_bps (tests: a load that takes seconds): sleep until the bytes
 * done so far are due at that rate, in steps that notice a cancel. */
static void throttle(struct loader *L)
{
	if (!L->o->max_bps)
		return;
	uint64_t done = __atomic_load_n(&L->done, __ATOMIC_RELAXED);
	uint64_t due = L->t0 + (uint64_t)((double)done * 1e9 / (double)L->o->max_bps);
	for (uint64_t t = now_ns(); t < due; t = now_ns()) {
		if (L->o->cancel && __atomic_load_n(L->o->cancel, __ATOMIC_RELAXED))
			return;
		uint64_t ns = due - t < 50000000ull ? due - t : 50000000ull;
		struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
		nanosleep(&ts, NULL);
	}
}

/* Cold, buffered: ask the kernel to start reading job j's file ranges now
 * (POSIX_FADV_WILLNEED queues the reads and returns), `ahead` jobs before
 * a thread reads them, so the disk has the next round's requests queued
 * while this round's are copied and hashed.  Without it each thread's
 * preadv waits on the readahead of its own range, and the threads share
 * one file's readahead state, which their interleaved offsets defeat. */
static void readahead_job(struct loader *L, const struct job *j)
{
	const struct fsg_layer *ly = &L->p->layer[j->layer];
	for (uint32_t i = 0; i < ly->nparts; i++) {
		const struct fsg_part *pt = &ly->part[i];
		if (pt->split) /* one tensor per expert */
			for (uint32_t x = 0; x < j->n; x++)
				(void)posix_fadvise(L->fd, (off_t)fsg_part_src(pt, j->x0 + x),
						    (off_t)pt->bytes, POSIX_FADV_WILLNEED);
		else
			(void)posix_fadvise(L->fd, (off_t)fsg_part_src(pt, j->x0),
					    (off_t)((uint64_t)j->n * pt->bytes), POSIX_FADV_WILLNEED);
	}
}

static void *worker(void *arg)
{
	struct loader *L = arg;
	uint8_t *bounce = NULL, *wbuf = NULL;
	if ((L->dfd >= 0 && posix_memalign((void **)&bounce, DIRECT_ALIGN, (size_t)L->bounce_bytes) != 0) ||
	    (L->write && posix_memalign((void **)&wbuf, DIRECT_ALIGN, (size_t)L->wbuf_bytes) != 0)) {
		pthread_mutex_lock(&L->mu);
		if (!L->err_r)
			L->err_r = fsg_fail_errno(
				&L->err, -ENOMEM, "out of memory for a %llu-byte read buffer",
				(unsigned long long)(L->write ? L->wbuf_bytes : L->bounce_bytes));
		pthread_mutex_unlock(&L->mu);
		__atomic_store_n(&L->failed, 1, __ATOMIC_RELAXED);
	}
	while (!__atomic_load_n(&L->failed, __ATOMIC_RELAXED) &&
	       !(L->o->cancel && __atomic_load_n(L->o->cancel, __ATOMIC_RELAXED))) {
		uint64_t k = __atomic_fetch_add(&L->next, 1, __ATOMIC_RELAXED);
		if (k >= L->njobs)
			break;
		if (L->ahead && k + L->ahead < L->njobs)
			readahead_job(L, &L->jobs[k + L->ahead]);
		if (do_job(L, &L->jobs[k], bounce, wbuf) < 0)
			__atomic_store_n(&L->failed, 1, __ATOMIC_RELAXED);
		throttle(L);
	}
	free(bounce);
	free(wbuf);
	pthread_mutex_lock(&L->mu);
	L->running--;
	pthread_cond_signal(&L->cv);
	pthread_mutex_unlock(&L->mu);
	return NULL;
}

/* Jobs of about `chunk` bytes of blobs, in file order (layer by layer: the
 * writer and llama.cpp store blk.N's tensors in block order), a multiple of
 * four experts where the layer has that many (the checksum's four streams).
 * *bounce: the largest aligned read a job makes (O_DIRECT). */
static struct job *make_jobs(const struct fsg_plan *p, uint64_t chunk, uint64_t *njobs, uint64_t *bounce)
{
	uint64_t n = 0, k = 0;
	uint32_t *per = calloc(p->layers ? p->layers : 1, sizeof(*per));
	if (!per)
		return NULL;
	for (uint32_t l = 0; l < p->layers; l++) {
		const struct fsg_layer *ly = &p->layer[l];
		per[l] = 0;
		if (!ly->nparts || !p->experts)
			continue;
		uint64_t e = ly->blob_bytes ? chunk / ly->blob_bytes : p->experts;
		/* At least four experts: a job of fewer hashes them one stream
		 * each, a quarter of the multiplier's rate (the 2.5 MiB blobs of
		 * fs-bench-arena's model made 8 MiB jobs of three, and the warm
		 * load paid that: issue 23). */
		e = e < CK_WAYS ? CK_WAYS : e / CK_WAYS * CK_WAYS;
		if (e > p->experts)
			e = p->experts;
		per[l] = (uint32_t)e;
		n += (p->experts + e - 1) / e;
	}
	struct job *j = malloc((n ? n : 1) * sizeof(*j));
	if (!j) {
		free(per);
		return NULL;
	}
	*bounce = DIRECT_ALIGN;
	for (uint32_t l = 0; l < p->layers; l++) {
		if (!per[l])
			continue;
		for (uint32_t x = 0; x < p->experts; x += per[l]) {
			uint32_t c = p->experts - x < per[l] ? p->experts - x : per[l];
			j[k++] = (struct job){l, x, c};
		}
		for (uint32_t i = 0; i < p->layer[l].nparts; i++) {
			uint64_t span = (uint64_t)per[l] * p->layer[l].part[i].bytes + 2 * DIRECT_ALIGN;
			if (span > *bounce)
				*bounce = span;
		}
	}
	*njobs = n;
	free(per);
	return j;
}

static int lock_arena(struct fs_shm *shm, struct fsg_err *err)
{
	/* Lock on fault: the limit is checked now, for the whole arena (fail
	 * in a second, not after reading the file), and each page is locked
	 * as the loader threads populate it. */
	if (syscall(SYS_mlock2, shm->base, shm->bytes, MLOCK_ONFAULT) == 0)
		return 0;
	int e = errno;
	if (e == ENOSYS || e == EINVAL) {
		if (mlock(shm->base, shm->bytes) == 0)
			return 0;
		e = errno;
	}
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

/* The share of the file's pages in the page cache (0..1), or -1. */
static double cached_share(int fd, uint64_t bytes)
{
	long pg = sysconf(_SC_PAGESIZE);
	if (!bytes || bytes > SIZE_MAX / 2)
		return -1;
	void *m = mmap(NULL, (size_t)bytes, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return -1;
	size_t pages = ((size_t)bytes + (size_t)pg - 1) / (size_t)pg;
	unsigned char *v = malloc(pages);
	double share = -1;
	if (v && mincore(m, (size_t)bytes, v) == 0) {
		size_t in = 0;
		for (size_t i = 0; i < pages; i++)
			in += v[i] & 1;
		share = (double)in / (double)pages;
	}
	free(v);
	munmap(m, (size_t)bytes);
	return share;
}

/* O_DIRECT only when asked for (FSG_DIRECT_ON).  auto reads through the
 * page cache, with readahead asked for ahead of the jobs when the file is
 * not cached (fsg_arena_fill): on the GPU machine at 16 GiB with 2 MiB
 * shmem pages buffered reads were 1.07 x and 1.15 x cat cold in two runs,
 * O_DIRECT 0.68 x in one of them (docs/results/arena.md).  -1: buffered. */
static int open_direct(const struct fsg_file *f, const struct fsg_plan *p, const struct fsg_load_opts *o,
		       struct fsg_load_result *res)
{
	res->cached = cached_share(f->fd, f->file_size);
	if (o->direct != FSG_DIRECT_ON || p->member_bytes == 0)
		return -1;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", f->fd);
	int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	return fd; /* -1 (EINVAL: a file system without O_DIRECT): buffered */
}

void fsg_hugetlb_pool_parse(FILE *f, uint64_t *size, uint64_t *free_pages)
{
	char line[128];
	unsigned long long v, nfree = 0, rsvd = 0;
	*size = *free_pages = 0;
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "HugePages_Free: %llu", &v) == 1)
			nfree = v;
		else if (sscanf(line, "HugePages_Rsvd: %llu", &v) == 1)
			rsvd = v;
		else if (sscanf(line, "Hugepagesize: %llu kB", &v) == 1)
			*size = v * 1024;
	}
	/* HugePages_Free counts pages another mapping has reserved but not
	 * touched yet (HugePages_Rsvd): those are promised, not free. */
	*free_pages = nfree > rsvd ? nfree - rsvd : 0;
}

static void hugetlb_pool(uint64_t *size, uint64_t *free_pages)
{
	FILE *f = fopen("/proc/meminfo", "r");
	fsg_hugetlb_pool_parse(f, size, free_pages);
	if (f)
		fclose(f);
}

/* The bracketed word of a sysfs choice line ("always [advise] never"). */
static void sys_choice(const char *path, char *out, size_t n)
{
	FILE *f = fopen(path, "r");
	char line[160] = "";
	out[0] = 0;
	if (f && fgets(line, sizeof(line), f)) {
		char *a = strchr(line, '['), *b = a ? strchr(a, ']') : NULL;
		if (a && b)
			snprintf(out, n, "%.*s", (int)(b - a - 1), a + 1);
	}
	if (f)
		fclose(f);
}

/* Does a MADV_HUGEPAGE shmem mapping get 2 MiB folios?  shmem_enabled
 * always, within_size, advise or force (or, since Linux 6.11, the 2 MiB
 * size's own shmem_enabled when the global one is never). */
int fsg_shmem_thp(char *why, size_t n)
{
	char g[32], s2m[32];
	sys_choice("/sys/kernel/mm/transparent_hugepage/shmem_enabled", g, sizeof(g));
	sys_choice("/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/shmem_enabled", s2m, sizeof(s2m));
	int on = !strcmp(g, "always") || !strcmp(g, "within_size") || !strcmp(g, "advise") ||
		 !strcmp(g, "force");
	if (!strcmp(s2m, "always") || !strcmp(s2m, "within_size") || !strcmp(s2m, "advise"))
		on = 1;
	else if (s2m[0] && strcmp(s2m, "inherit"))
		on = 0;
	snprintf(why, n, "shmem_enabled %s%s%s", g[0] ? g : "(absent)", s2m[0] ? ", 2048kB " : "", s2m);
	return on;
}

/* The arena's memory: hugetlb pages when asked for, or (auto) when the
 * free pool holds it all and shmem gets no huge pages -- measured
 * (fs-bench-arena): bringing in 2 MiB pages costs a fraction of 4 KiB
 * ones, which the warm load is bound by; else a shmem memfd, asking for
 * transparent huge pages. */
static int arena_memory(uint64_t bytes, const struct fsg_load_opts *o, struct fs_shm *shm,
			struct fsg_load_result *res, struct fsg_err *err)
{
	uint64_t hsz, hfree;
	char thp[96];
	hugetlb_pool(&hsz, &hfree);
	uint64_t need = hsz ? (bytes + hsz - 1) / hsz : 0;
	int r;
	char failed[64] = "";
	/* auto: shmem's 2 MiB pages where shmem_enabled gives them, hugetlb
	 * only where it does not: at 16 GiB on the GPU machine a hugetlb arena
	 * (a pool raised for the run) loaded warm at 4.04 GB/s, a shmem one
	 * with 2 MiB pages at 10.80 and 11.99 GB/s in the same call
	 * (docs/results/arena.md, session 7). */
	int thp_on = fsg_shmem_thp(thp, sizeof(thp));
	if (o->pages == FSG_PAGES_HUGETLB ||
	    (o->pages == FSG_PAGES_AUTO && !thp_on && hsz && hfree >= need)) {
		r = hsz ? fs_shm_create_hugetlb(shm, "foresight-arena", (size_t)bytes, (size_t)hsz) : -EINVAL;
		if (r == 0) {
			res->hugetlb = 1;
			snprintf(res->pages_why, sizeof(res->pages_why),
				 "hugetlb: %llu pages of %llu KiB (%llu were free)", (unsigned long long)need,
				 (unsigned long long)hsz / 1024, (unsigned long long)hfree);
			return 0;
		}
		/* auto: the pool looked big enough but the reservation failed
		 * (another process took the pages meanwhile, a hugetlb cgroup
		 * limit): shmem, and the log says so. */
		snprintf(failed, sizeof(failed), "; hugetlb failed: %s", strerror(-r));
		if (o->pages == FSG_PAGES_HUGETLB)
			return fsg_fail_errno(
				err, r,
				"a %llu-byte arena in hugetlb pages: %s (%llu free pages of %llu "
				"KiB; vm.nr_hugepages reserves them)",
				(unsigned long long)bytes, strerror(-r), (unsigned long long)hfree,
				(unsigned long long)hsz / 1024);
	}
	if ((r = fs_shm_create(shm, "foresight-arena", (size_t)bytes)) < 0)
		return fsg_fail_errno(err, r, "creating a %llu-byte arena memfd: %s",
				      (unsigned long long)bytes, strerror(-r));
	/* Huge pages where the kernel gives them to shmem: fewer faults while
	 * loading, fewer TLB misses for every reader.  Elsewhere a no-op. */
	(void)madvise(shm->base, shm->bytes, MADV_HUGEPAGE);
	res->thp = thp_on;
	snprintf(res->pages_why, sizeof(res->pages_why),
		 "shmem, %s pages (%s; hugetlb pool: %llu free of %llu%s)", res->thp ? "2 MiB" : "4 KiB", thp,
		 (unsigned long long)hfree, (unsigned long long)need, failed);
	return 0;
}

int fsg_arena_create(const struct fsg_plan *p, const struct fsg_load_opts *o, struct fs_shm *shm,
		     struct fsg_load_result *res, struct fsg_err *err)
{
	struct fsg_layout lo;
	int r;
	memset(res, 0, sizeof(*res));
	shm->fd = -1;
	shm->base = NULL;
	if ((r = fsg_layout_build(p, &lo, err)) < 0)
		return r;
	if (lo.bytes > SIZE_MAX / 2) {
		fsg_layout_free(&lo);
		return fsg_fail_errno(err, -EFBIG, "an arena of %llu bytes cannot be mapped",
				      (unsigned long long)lo.bytes);
	}
	if ((r = arena_memory(lo.bytes, o, shm, res, err)) < 0) {
		fsg_layout_free(&lo);
		shm->fd = -1;
		shm->base = NULL;
		return r;
	}
	if (o->lock == FSG_LOCK_MUST && (r = lock_arena(shm, err)) < 0) {
		res->lock_failed = 1;
		fsg_layout_free(&lo);
		fs_shm_close(shm);
		return r;
	}
	if (o->lock == FSG_LOCK_TRY)
		(void)lock_arena(shm, &res->lock_err);
	res->locked = o->lock != FSG_LOCK_NO && res->lock_err.msg[0] == 0;
	fsg_layout_write(p, &lo, shm->base, shm->bytes, o->model);
	fsg_layout_free(&lo);
	return 0;
}

int fsg_arena_fill(const struct fsg_file *f, const struct fsg_plan *p, const struct fsg_load_opts *o,
		   struct fs_shm *shm, struct fsg_load_result *res, struct fsg_err *err)
{
	struct fsg_layout lo;
	pthread_t th[MAX_THREADS];
	unsigned workers = 0;
	uint64_t t0 = now_ns();
	struct loader L = {.p = p,
			   .lo = &lo,
			   .o = o,
			   .fd = f->fd,
			   .dfd = -1,
			   .mu = PTHREAD_MUTEX_INITIALIZER,
			   .cv = PTHREAD_COND_INITIALIZER};
	int r;

	if (f->fd < 0)
		return fsg_fail_errno(err, -EBADF, "the model file is not open");
	if ((r = fsg_layout_build(p, &lo, err)) < 0)
		return r;
	if (lo.bytes > shm->bytes) {
		fsg_layout_free(&lo);
		return fsg_fail_errno(err, -EINVAL, "the arena (%zu bytes) is smaller than its layout",
				      shm->bytes);
	}
	L.t0 = t0;
	L.base = shm->base;
	L.idx = (struct fs_arena_entry *)((char *)shm->base + lo.off_index);
	L.max_read = o->max_read ? o->max_read : 64ull << 20;
	/* The fill (fsg_arena.h): through the mapping unless asked.  Writing
	 * into the memfd skips the zeroing and the page faults (1.6 x less CPU
	 * a byte on one thread), but every pwrite of one shmem file takes its
	 * inode lock: on the GPU machine's 15 threads it ran at 0.51 x the map
	 * fill (2.06 vs 4.03 GB/s, 16 GiB warm).  hugetlbfs has no write. */
	L.write = !res->hugetlb && o->fill == FSG_FILL_WRITE;
	L.populate = !L.write;
	L.map_after = L.write && res->locked;
	L.mfd = shm->fd;
	res->fill = L.write ? FSG_FILL_WRITE : FSG_FILL_MAP;
	L.jobs = make_jobs(p, o->chunk ? o->chunk : 8ull << 20, &L.njobs, &L.bounce_bytes);
	L.layer_left = calloc(p->layers ? p->layers : 1, sizeof(*L.layer_left));
	if (!L.jobs || !L.layer_left) {
		r = fsg_fail_errno(err, -ENOMEM, "out of memory for the copy plan (%u layers)", p->layers);
		goto out;
	}
	for (uint64_t k = 0; k < L.njobs; k++) {
		L.layer_left[L.jobs[k].layer]++;
		uint64_t span = L.lo->stride[L.jobs[k].layer] * L.jobs[k].n;
		if (span > L.wbuf_bytes)
			L.wbuf_bytes = span;
	}
	/* Layers without experts are complete from the start. */
	for (uint32_t l = 0; l < p->layers && o->layer_done; l++)
		if (!L.layer_left[l])
			o->layer_done(o->arg, l);

	unsigned want = o->threads;
	if (!want) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		/* One core for the rest of the daemon; at least two threads, so
		 * that one reads while the other copies and checksums. */
		want = cpus > 2 ? (unsigned)(cpus - 1) : 2;
		if (want > 16)
			want = 16;
	}
	if (want > MAX_THREADS)
		want = MAX_THREADS;
	if ((uint64_t)want > L.njobs)
		want = L.njobs ? (unsigned)L.njobs : 1;
	L.dfd = open_direct(f, p, o, res);
	res->direct = L.dfd >= 0;
	if (L.dfd < 0) {
		(void)posix_fadvise(f->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		/* Readahead one round of jobs ahead (want threads take the next
		 * want jobs), unless the file is mostly cached already. */
		if (res->cached < 0.5 && !o->no_readahead)
			L.ahead = want;
		/* At most READAHEAD_MAX bytes asked for ahead (jobs of large
		 * experts: pages read ahead that memory pressure evicts before
		 * their job would be read twice). */
		uint64_t job_bytes = L.njobs ? p->member_bytes / L.njobs : 0;
		if (L.ahead && job_bytes && L.ahead * job_bytes > READAHEAD_MAX)
			L.ahead = READAHEAD_MAX / job_bytes ? READAHEAD_MAX / job_bytes : 1;
		for (uint64_t k = 0; k < L.ahead && k < L.njobs; k++) /* the first round */
			readahead_job(&L, &L.jobs[k]);
	}
	res->readahead = L.ahead;
	L.running = want;
	for (; workers < want; workers++)
		if (pthread_create(&th[workers], NULL, worker, &L) != 0)
			break;
	if (!workers) { /* no thread: do it all here */
		L.running = 1;
		worker(&L);
	} else {
		pthread_mutex_lock(&L.mu);
		L.running -= want - workers;
		uint64_t last = t0;
		while (L.running) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&L.cv, &L.mu, &ts);
			uint64_t t = now_ns(), done = __atomic_load_n(&L.done, __ATOMIC_RELAXED);
			if (o->progress && L.running && t - last >= 100000000ull && done < p->member_bytes) {
				pthread_mutex_unlock(&L.mu);
				o->progress(o->arg, done, p->member_bytes, t - t0);
				pthread_mutex_lock(&L.mu);
				last = t;
			}
		}
		pthread_mutex_unlock(&L.mu);
		for (unsigned w = 0; w < workers; w++)
			pthread_join(th[w], NULL);
	}
	res->threads = workers ? workers : 1;
	res->bytes_read = L.done;
	res->read_calls = L.read_calls;
	res->direct_bytes = L.direct_bytes;
	res->ns = now_ns() - t0;
	if (L.err_r) {
		r = L.err_r;
		*err = L.err;
		goto out;
	}
	if (o->cancel && __atomic_load_n(o->cancel, __ATOMIC_RELAXED)) {
		r = fsg_fail_errno(err, -ECANCELED, "the load was cancelled");
		goto out;
	}
	r = 0;
	if (o->progress)
		o->progress(o->arg, res->bytes_read, p->member_bytes, res->ns);
out:
	if (L.dfd >= 0)
		close(L.dfd);
	free(L.jobs);
	free(L.layer_left);
	fsg_layout_free(&lo);
	return r;
}

int fsg_arena_build(const struct fsg_file *f, const struct fsg_plan *p, const struct fsg_load_opts *o,
		    struct fs_shm *shm, struct fsg_load_result *res, struct fsg_err *err)
{
	uint64_t t0 = now_ns();
	int r = fsg_arena_create(p, o, shm, res, err);
	if (r < 0)
		return r;
	if ((r = fsg_arena_fill(f, p, o, shm, res, err)) < 0)
		fs_shm_close(shm);
	res->ns = now_ns() - t0; /* the whole build: create, lock, read, checksums */
	return r;
}
