/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-bench-arena: how fast the daemon fills the expert arena from a GGUF
 * file, against `cat FILE >/dev/null` on the same file in the same run.
 *
 * It writes a MoE GGUF file of about --bytes (Q4_K experts, qwen3moe
 * naming) unless --file names one, then measures, in this order:
 *   cat, cold             the file evicted from the page cache first
 *                         (POSIX_FADV_DONTNEED on the file; --drop-caches
 *                         adds drop_caches as root; the line "cold:" says
 *                         which and how much stayed cached)
 *   arena, cold, O_DIRECT parse + plan + fsg_arena_build (the daemon's
 *                         code), evicted again, reads forced O_DIRECT
 *   arena, cold, buffered the same through the page cache
 *   cat, warm             the file now cached
 *   arena, warm           the daemon's default (auto: buffered when cached)
 *   the bounds            fresh pages brought in (MADV_POPULATE_WRITE, as
 *                         the loader's jobs do; locked with --lock) on 1
 *                         and N threads, then on those pages the memory
 *                         write on 1 and N threads and FNV-1a on N threads
 *                         (N: the loader's threads)
 * (--warm-only: the warm rows and the bounds alone, for sweeps)
 * and prints a table, the ratios against cat and the bounds, the issue's
 * goals (met or not), huge pages and the peak RSS.  A row that fails or
 * is missing prints FAILED and the exit status is 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fs_arena.h"
#include "fsg_arena.h"
#include "fsg_types.h"
#include "fs_opt.h"
#include "fsgw.h"

extern char **environ;

struct opts {
	uint64_t bytes;
	const char *file;
	const char *dir;
	int keep;
	int lock;
	int drop_caches;
	unsigned threads;
	uint64_t chunk;
	int warm_only;
	unsigned rounds;
	int lean;
	int pages, fill; /* enum fsg_pages, enum fsg_fill: the default rows' */
};

struct row {
	const char *what, *cache;
	uint64_t bytes;
	double s;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int size_arg(const char *v, uint64_t *out)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	double mul = 1;
	if (*end == 'K' || *end == 'k')
		mul = 1024.0, end++;
	else if (*end == 'M' || *end == 'm')
		mul = 1048576.0, end++;
	else if (*end == 'G' || *end == 'g')
		mul = 1073741824.0, end++;
	if (errno || end == v || *end || x <= 0 || x * mul > 1e15)
		return -1;
	*out = (uint64_t)(x * mul);
	return 0;
}

static const char usage[] =
	"usage: fs-bench-arena [--bytes N[K|M|G]] [--file F.gguf] [--dir D] [--keep] [--lock]\n"
	"                      [--threads N] [--chunk N[K|M]] [--drop-caches] [--warm-only] [--quick]\n"
	"                      [--pages auto|shmem|hugetlb] [--fill auto|map|write] [--rounds N] [--lean]\n\n";

/* --bytes, --chunk: a size with an optional K, M or G. */
static int size_opt(void *dst, const char *v, char *err, size_t len)
{
	if (size_arg(v, dst) < 0) {
		snprintf(err, len, "give a size above 0: N, NK, NM or NG (at most 1e15 bytes)");
		return -1;
	}
	return 0;
}

/* A qwen3moe-like model of about `bytes`: Q4_K experts of 2048 x 768
 * (2.5 MiB blobs, 128 per layer) or, for small files, 512 x 256. */
static int generate(const struct opts *o, char *path, size_t n)
{
	struct fsgw_model m;
	fsgw_model_defaults(&m, "qwen3moe");
	m.type = fsg_type_by_name("Q4_K");
	m.name = "bench";
	int big = o->bytes >= (512ull << 20);
	m.embd = big ? 2048 : 512;
	m.ff = big ? 768 : 256;
	m.experts = big ? 128 : 32;
	m.used = 8;
	uint64_t row_d = m.embd / 256 * 144, row_f = m.ff / 256 * 144;
	uint64_t per_layer = (2 * row_d * m.ff + row_f * m.embd) * m.experts;
	m.layers = (uint32_t)((o->bytes + per_layer / 2) / per_layer);
	if (m.layers < 1)
		m.layers = 1;
	snprintf(path, n, "%s/fs-bench-arena-%d.gguf", o->dir, (int)getpid());
	char err[256];
	double t = now_s();
	if (fsgw_model_write(&m, path, err, sizeof(err)) < 0) {
		fprintf(stderr, "fs-bench-arena: FAILED to write %s: %s\n", path, err);
		return -1;
	}
	printf("wrote %s: %u layers x %u experts (Q4_K %ux%u) in %.1f s\n", path, m.layers, m.experts, m.embd,
	       m.ff, now_s() - t);
	return 0;
}

/* The share of the file in the page cache (mincore), or -1. */
static double cached(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	double share = -1;
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), pages = ((size_t)st.st_size + pg - 1) / pg;
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	unsigned char *v = malloc(pages);
	if (m != MAP_FAILED && v && mincore(m, (size_t)st.st_size, v) == 0) {
		size_t in = 0;
		for (size_t i = 0; i < pages; i++)
			in += v[i] & 1;
		share = (double)in / (double)pages;
	}
	free(v);
	if (m != MAP_FAILED)
		munmap(m, (size_t)st.st_size);
	close(fd);
	return share;
}

/* Drop the file's pages from the page cache: POSIX_FADV_DONTNEED (clean
 * pages, no root needed), and with --drop-caches also drop_caches as root
 * (where /proc/sys is writable: it empties the whole machine's cache).
 * *how says which. */
static void evict(const char *path, int drop, const char **how)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	*how = "POSIX_FADV_DONTNEED on the file";
	if (drop && geteuid() == 0) {
		int dc = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
		if (dc >= 0) {
			sync();
			if (write(dc, "1", 1) == 1)
				*how = "drop_caches (1) + POSIX_FADV_DONTNEED";
			close(dc);
		}
	}
}

static int run_cat(const char *path, double *secs)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	char *argv[] = {(char *)"cat", (char *)path, NULL};
	pid_t pid;
	double t = now_s();
	int r = posix_spawnp(&pid, "cat", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		return -r;
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -EIO;
	*secs = now_s() - t;
	return 0;
}

struct bound_job {
	uint8_t *p;
	uint64_t n;
	int fnv;
	uint64_t h;
	int mfd;       /* fnv 3: the memfd written */
	uint64_t off;  /* fnv 3: p's offset in it */
	int map_after; /* fnv 3: then MADV_POPULATE_READ (maps and, locked, locks) */
};

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

static void *bound_thread(void *arg)
{
	struct bound_job *j = arg;
	if (j->fnv == 3) { /* fresh pages the write fill's way: pwrite of a cached buffer, 8 MiB steps */
		uint8_t *buf = aligned_alloc(4096, 8u << 20);
		if (!buf) {
			j->h = 1;
			return NULL;
		}
		memset(buf, 0x5a, 8u << 20);
		for (uint64_t o = 0; o < j->n; o += 8ull << 20) {
			size_t n = (size_t)(j->n - o < (8ull << 20) ? j->n - o : 8ull << 20);
			if (pwrite(j->mfd, buf, n, (off_t)(j->off + o)) != (ssize_t)n)
				j->h = 1;
			if (j->map_after)
				(void)madvise(j->p + o, n, MADV_POPULATE_READ);
		}
		free(buf);
		return NULL;
	}
	if (j->fnv == 2) { /* fresh pages, in the loader's 8 MiB steps */
		for (uint64_t o = 0; o < j->n; o += 8ull << 20)
			(void)madvise(j->p + o, (size_t)(j->n - o < (8ull << 20) ? j->n - o : 8ull << 20),
				      MADV_POPULATE_WRITE);
		return NULL;
	}
	if (!j->fnv) {
		memset(j->p, 0x5a, (size_t)j->n);
		return NULL;
	}
	/* As the loader does: four streams at once. */
	uint64_t q = j->n / 4, h[4] = {FS_FNV64_OFFSET, FS_FNV64_OFFSET, FS_FNV64_OFFSET, FS_FNV64_OFFSET};
	const uint8_t *s[4] = {j->p, j->p + q, j->p + 2 * q, j->p + 3 * q};
	fsg_fnv1a64_4(s, q, h);
	j->h = h[0] ^ h[1] ^ h[2] ^ h[3];
	return NULL;
}

/* One pass of memset (fnv 0), FNV-1a x4 (fnv 1), page population (fnv 2)
 * or pwrite (fnv 3, into mfd, mapped at p) over [p, p + bytes) on
 * `threads` threads, each its own slice: seconds, or < 0. */
static double parallel_pass_fd(uint8_t *p, uint64_t bytes, unsigned threads, int fnv, int mfd, int map_after)
{
	pthread_t th[64];
	struct bound_job j[64];
	uint64_t per = bytes / threads / 4096 * 4096;
	double t = now_s();
	unsigned n = 0;
	for (; n < threads; n++) {
		j[n] = (struct bound_job){
			p + n * per, n + 1 == threads ? bytes - n * per : per, fnv, 0, mfd, n * per,
			map_after};
		if (pthread_create(&th[n], NULL, bound_thread, &j[n]) != 0)
			return -1;
	}
	uint64_t h = 0;
	int bad = 0;
	for (unsigned k = 0; k < n; k++) {
		pthread_join(th[k], NULL);
		h ^= j[k].h;
		bad |= fnv == 3 && j[k].h;
	}
	double s = bad ? -1 : now_s() - t;
	if (h == 42)
		printf("(unlikely)\n"); /* keep the hashes alive */
	return s;
}

/* The costs the arena load cannot avoid, on an arena-sized memfd set up as
 * the loader sets up its arena (huge pages asked for; with --lock, locked
 * on fault): bringing in its fresh pages (MADV_POPULATE_WRITE: the page
 * allocation, its zeroing and the lock, which the loader's jobs do) on 1
 * and N threads, each on a memfd of its own; then, on populated pages,
 * writing every byte (1 and N threads) and the index checksum (FNV-1a 64,
 * four streams a thread, on N threads). */
struct bounds {
	double pop1, popn, popsplit, popwrite, pophuge, write1, writen, fnv;
};

/* The free hugetlb pool: bytes, and the page size. */
static uint64_t hugetlb_room(uint64_t *size)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];
	unsigned long long v, n = 0;
	*size = 0;
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "HugePages_Free: %llu", &v) == 1)
			n = v;
		else if (sscanf(line, "Hugepagesize: %llu kB", &v) == 1)
			*size = v * 1024;
	}
	if (f)
		fclose(f);
	return n * *size;
}

static double parallel_pass(uint8_t *p, uint64_t bytes, unsigned threads, int fnv)
{
	return parallel_pass_fd(p, bytes, threads, fnv, -1, 0);
}

static int fresh_arena(struct fs_shm *shm, uint64_t bytes, int lock)
{
	int r = fs_shm_create(shm, "fs-bench-arena", (size_t)bytes);
	if (r < 0) {
		fprintf(stderr, "fs-bench-arena: FAILED: memfd of %llu bytes: %s\n",
			(unsigned long long)bytes, strerror(-r));
		return r;
	}
	(void)madvise(shm->base, shm->bytes, MADV_HUGEPAGE); /* as the loader does */
	if (lock)
		(void)syscall(SYS_mlock2, shm->base, shm->bytes, 1 /* MLOCK_ONFAULT */);
	return 0;
}

/* The goal's bounds, each round: a fresh arena-sized memfd set up as the
 * loader's, its pages brought in on the loader's N threads (popn), then on
 * those populated pages the memory write on 1 and N threads and FNV-1a x4
 * on N threads. */
static int run_bounds_core(uint64_t bytes, unsigned threads, int lock, struct bounds *b)
{
	struct fs_shm shm;
	int r;
	if ((r = fresh_arena(&shm, bytes, lock)) < 0)
		return r;
	b->popn = parallel_pass(shm.base, bytes, threads, 2);
	b->write1 = parallel_pass(shm.base, bytes, 1, 0);
	b->writen = parallel_pass(shm.base, bytes, threads, 0);
	b->fnv = parallel_pass(shm.base, bytes, threads, 1);
	fs_shm_close(&shm);
	if (b->popn <= 0 || b->write1 <= 0 || b->writen <= 0 || b->fnv <= 0) {
		fprintf(stderr, "fs-bench-arena: FAILED: a bound's thread did not start\n");
		return -EAGAIN;
	}
	return 0;
}

/* Once (not with --lean): the population on 1 thread, with a memfd per
 * thread, the write fill's way and in hugetlb pages (where the pool holds
 * the arena). */
static int run_bounds_extra(uint64_t bytes, unsigned threads, int lock, struct bounds *b)
{
	struct fs_shm shm;
	int r;
	if ((r = fresh_arena(&shm, bytes, lock)) < 0)
		return r;
	b->pop1 = parallel_pass(shm.base, bytes, 1, 2);
	fs_shm_close(&shm);
	/* The same on a memfd per thread: how much of the population's cost
	 * is the one file's locks (the page cache's, shmem's accounting). */
	{
		struct fs_shm part[64];
		memset(part, 0, sizeof(part));
		unsigned n = 0;
		uint64_t per = bytes / threads / 4096 * 4096;
		pthread_t th[64];
		struct bound_job j[64];
		for (; n < threads && r == 0; n++)
			r = fresh_arena(&part[n], n + 1 == threads ? bytes - n * per : per, lock);
		double t = now_s();
		unsigned started = 0;
		for (unsigned k = 0; r == 0 && k < n; k++, started++) {
			j[k] = (struct bound_job){part[k].base, part[k].bytes, 2, 0};
			if (pthread_create(&th[k], NULL, bound_thread, &j[k]) != 0)
				break;
		}
		for (unsigned k = 0; k < started; k++)
			pthread_join(th[k], NULL);
		b->popsplit = r == 0 && started == n ? now_s() - t : -1;
		for (unsigned k = 0; k < n; k++)
			if (part[k].base)
				fs_shm_close(&part[k]);
		if (r < 0)
			return r;
	}
	/* The write fill's way: pwrite into a fresh memfd (no zeroing, no
	 * faults), then, locked, map the pages (which locks them). */
	{
		struct fs_shm w;
		if ((r = fresh_arena(&w, bytes, lock)) < 0)
			return r;
		b->popwrite = parallel_pass_fd(w.base, bytes, threads, 3, w.fd, lock);
		fs_shm_close(&w);
	}
	/* hugetlb pages (only where the pool holds them: vm.nr_hugepages). */
	uint64_t hsz;
	b->pophuge = 0;
	if (hugetlb_room(&hsz) >= (bytes + hsz - 1) / (hsz ? hsz : 1) * hsz && hsz) {
		struct fs_shm h;
		if (fs_shm_create_hugetlb(&h, "fs-bench-arena", (size_t)bytes, (size_t)hsz) == 0) {
			if (lock)
				(void)syscall(SYS_mlock2, h.base, h.bytes, 1 /* MLOCK_ONFAULT */);
			b->pophuge = parallel_pass(h.base, bytes, threads, 2);
			fs_shm_close(&h);
		}
	}
	if (b->pop1 <= 0 || b->popsplit <= 0 || b->popwrite <= 0) {
		fprintf(stderr, "fs-bench-arena: FAILED: a bound's thread did not start\n");
		return -EAGAIN;
	}
	return 0;
}

/* KiB of shmem mapped with huge pages (PMD) in this process right now. */
static long shmem_huge_kib(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char line[256];
	long kib = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "ShmemPmdMapped: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       (double)ru.ru_stime.tv_usec / 1e6;
}

struct arena_run {
	uint64_t bytes, arena_bytes, direct_bytes;
	double s, cached, cpu; /* cpu: the process's CPU seconds (user + system) the load took */
	int locked, direct, hugetlb, fill;
	uint64_t readahead;
	unsigned threads;
	long huge_kib;
	char pages_why[160];
};

static int run_arena(const struct opts *o, const char *path, int direct, int pages, int fill, int no_ra,
		     struct arena_run *out)
{
	struct fsg_file f;
	struct fsg_plan p;
	struct fsg_err err;
	struct fs_shm shm;
	struct fsg_load_result res;
	struct fsg_load_opts lo = {.model = "bench",
				   .lock = o->lock ? FSG_LOCK_TRY : FSG_LOCK_NO,
				   .threads = o->threads,
				   .chunk = o->chunk,
				   .direct = direct,
				   .pages = pages,
				   .fill = fill,
				   .no_readahead = no_ra};
	double t = now_s(), c0 = cpu_s();
	int r = fsg_open(&f, path, &err);
	if (r == 0 && (r = fsg_plan_build(&f, &p, &err)) < 0)
		fsg_close(&f);
	if (r < 0) {
		fprintf(stderr, "fs-bench-arena: FAILED: %s: %s\n", path, err.msg);
		return r;
	}
	r = fsg_arena_build(&f, &p, &lo, &shm, &res, &err);
	out->s = now_s() - t;
	out->cpu = cpu_s() - c0;
	if (r < 0)
		fprintf(stderr, "fs-bench-arena: FAILED: arena: %s\n", err.msg);
	else {
		out->bytes = res.bytes_read;
		out->locked = res.locked;
		out->arena_bytes = shm.bytes;
		out->threads = res.threads;
		out->direct = res.direct;
		out->direct_bytes = res.direct_bytes;
		out->readahead = res.readahead;
		out->cached = res.cached;
		out->huge_kib = shmem_huge_kib();
		out->hugetlb = res.hugetlb;
		out->fill = res.fill;
		snprintf(out->pages_why, sizeof(out->pages_why), "%s", res.pages_why);
		fs_shm_close(&shm);
	}
	fsg_plan_free(&p);
	fsg_close(&f);
	if (r == 0 && direct == FSG_DIRECT_ON && !res.direct) {
		fprintf(stderr, "fs-bench-arena: FAILED: O_DIRECT asked for, not used (file system?)\n");
		return -EINVAL;
	}
	return r;
}

static void read_line(const char *path, char *out, size_t n)
{
	FILE *f = fopen(path, "r");
	out[0] = 0;
	if (f && fgets(out, (int)n, f))
		out[strcspn(out, "\n")] = 0;
	if (f)
		fclose(f);
	if (!out[0])
		snprintf(out, n, "(absent)");
}

static double gbps(const struct row *r)
{
	return r->s > 0 ? (double)r->bytes / r->s / 1e9 : 0;
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 0;
}

static const char *const page_names[] = {"auto", "shmem", "hugetlb", NULL};
static const char *const fill_names[] = {"auto", "map", "write", NULL};

#define MAX_ROUNDS 8

/* One round: the rows the goals are judged on, measured together (cold,
 * then warm, then the bounds on this round's memory), so that each
 * verdict compares figures of the same minute. */
struct round {
	struct row cat_cold, ar_cold, cat_warm, ar_warm, popn, w1, wn, fnv;
	struct arena_run arc, arw;
	double left_cat, left_ar; /* the file's share still cached before each cold row */
};

static int row_ok(const struct row *r)
{
	return r->what && r->s > 0;
}

static void print_head(const char *title)
{
	printf("\n%s\n\n| %-30s | %-5s | %14s | %8s | %7s |\n", title, "what", "cache", "bytes", "seconds",
	       "GB/s");
	printf("|%s|%s|%s|%s|%s|\n", "--------------------------------", "-------", "----------------",
	       "----------", "---------");
}

/* One row, or "(row missing) FAILED": 1 when missing. */
static int print_row(const struct row *r)
{
	if (!row_ok(r)) {
		printf("| %-30s | %-5s | %14s | %8s | %7s |\n", "(row missing)", "-", "-", "-", "FAILED");
		return 1;
	}
	printf("| %-30s | %-5s | %14llu | %8.3f | %7.2f |\n", r->what, r->cache, (unsigned long long)r->bytes,
	       r->s, gbps(r));
	return 0;
}

static const char *default_name(const struct arena_run *a)
{
	return a->direct    ? "arena load, auto=O_DIRECT" :
	       a->readahead ? "arena load, auto=read ahead" :
			      "arena load, auto=buffered";
}

static int warm_cat(const char *path, uint64_t file_bytes, struct row *out)
{
	double s = 0;
	int rc;
	/* twice: the first brings the file in, the second is timed */
	if ((rc = run_cat(path, &s)) < 0 || (rc = run_cat(path, &s)) < 0) {
		fprintf(stderr, "fs-bench-arena: FAILED: cat %s: %s\n", path, strerror(-rc));
		return rc;
	}
	*out = (struct row){"cat FILE >/dev/null", "warm", file_bytes, s};
	return 0;
}

static int round_run(const struct opts *o, const char *path, uint64_t file_bytes, struct round *rd,
		     const char **how, struct rusage *peak)
{
	double s = 0;
	int rc;
	if (!o->warm_only) {
		evict(path, o->drop_caches, how);
		rd->left_cat = cached(path);
		if ((rc = run_cat(path, &s)) < 0) {
			fprintf(stderr, "fs-bench-arena: FAILED: cat %s: %s\n", path, strerror(-rc));
			return rc;
		}
		rd->cat_cold = (struct row){"cat FILE >/dev/null", "cold", file_bytes, s};
		evict(path, o->drop_caches, how);
		rd->left_ar = cached(path);
		if ((rc = run_arena(o, path, FSG_DIRECT_AUTO, o->pages, o->fill, 0, &rd->arc)) < 0)
			return rc;
		rd->ar_cold = (struct row){default_name(&rd->arc), "cold", rd->arc.bytes, rd->arc.s};
	}
	if ((rc = warm_cat(path, file_bytes, &rd->cat_warm)) < 0)
		return rc;
	if ((rc = run_arena(o, path, FSG_DIRECT_AUTO, o->pages, o->fill, 0, &rd->arw)) < 0)
		return rc;
	rd->ar_warm = (struct row){default_name(&rd->arw), "warm", rd->arw.bytes, rd->arw.s};
	/* The peak RSS of the loads (the bounds below map memfds of their own). */
	if (peak)
		getrusage(RUSAGE_SELF, peak);
	struct bounds bd = {0};
	unsigned threads = rd->arw.threads ? rd->arw.threads : 1;
	if ((rc = run_bounds_core(rd->arw.bytes, threads, o->lock, &bd)) < 0)
		return rc;
	uint64_t n = rd->arw.bytes;
	rd->popn = (struct row){"fresh pages (populate), N thr", "-", n, bd.popn};
	rd->w1 = (struct row){"fresh memory write, 1 thread", "-", n, bd.write1};
	rd->wn = (struct row){"fresh memory write, N threads", "-", n, bd.writen};
	rd->fnv = (struct row){"FNV-1a 64 x4, N threads", "-", n, bd.fnv};
	return 0;
}

/* The lower of the goal's two bounds in a round. */
static double lower_bound(const struct round *rd)
{
	return gbps(&rd->w1) < gbps(&rd->fnv) ? gbps(&rd->w1) : gbps(&rd->fnv);
}

int main(int argc, char **argv)
{
	struct opts o = {.bytes = 2ull << 30, .dir = "/tmp", .rounds = 1};
	int quick = 0;
	const struct fs_opt opts[] = {
		FS_OPT_FN("bytes", "N", &o.bytes, size_opt, "size of the generated GGUF file (default: 2G)"),
		FS_OPT_STR("file", "F", &o.file, "use this GGUF MoE file instead (not deleted)"),
		FS_OPT_STR("dir", "D", &o.dir, "where to write the generated file"),
		FS_OPT_FLAG("keep", 0, &o.keep, "keep the generated file"),
		FS_OPT_FLAG("lock", 0, &o.lock, "lock the arena like foresightd (default: not locked)"),
		FS_OPT_U32("threads", "N", &o.threads, 1, 64,
			   "loader threads (default: the daemon's choice)"),
		FS_OPT_FN("chunk", "N", &o.chunk, size_opt,
			  "bytes of blobs per loader job (default: the daemon's, 8M)"),
		FS_OPT_FLAG("drop-caches", 0, &o.drop_caches,
			    "cold rows: also drop the machine's page cache (root only)"),
		FS_OPT_FLAG("warm-only", 0, &o.warm_only,
			    "only the warm rows and the bounds (a sweep of --threads, --chunk)"),
		FS_OPT_U32("rounds", "N", &o.rounds, 1, MAX_ROUNDS,
			   "measure the goal's rows (cold, warm, bounds) N times in turn (default 1)"),
		FS_OPT_FLAG("lean", 0, &o.lean,
			    "only the goal's rows: no comparison of read modes, memories, fills"),
		FS_OPT_FLAG("quick", 0, &quick, "a 32 MiB file (the smoke test; instead of --bytes)"),
		FS_OPT_CHOICE("pages", "KIND", &o.pages, page_names,
			      "the default rows' arena memory: auto (the daemon's), shmem, hugetlb"),
		FS_OPT_CHOICE("fill", "HOW", &o.fill, fill_names,
			      "the default rows' fill: auto (the daemon's), map, write"),
	};
	const struct fs_opt_cmd cmd = {"fs-bench-arena", usage, NULL, opts, FS_OPT_N(opts)};
	fs_opt_parse_or_exit(&cmd, argc, argv);
	if (quick)
		o.bytes = 32ull << 20;
	char path[4096];
	if (o.file)
		snprintf(path, sizeof(path), "%s", o.file);
	else if (generate(&o, path, sizeof(path)) < 0)
		return 1;
	struct stat st;
	if (stat(path, &st) < 0) {
		fprintf(stderr, "fs-bench-arena: FAILED: %s: %s\n", path, strerror(errno));
		return 1;
	}
	enum {
		AR_COLD_D,
		AR_COLD_NRA,
		CAT_WARM,
		AR_WARM_MAP,
		AR_WARM_WRITE,
		AR_WARM_HUGE,
		P1,
		PS,
		PWR,
		PH,
		NROWS
	};
	uint64_t file_bytes = (uint64_t)st.st_size;
	struct round rd[MAX_ROUNDS];
	struct row rows[NROWS];
	struct arena_run ar[NROWS];
	memset(rd, 0, sizeof(rd));
	memset(rows, 0, sizeof(rows));
	memset(ar, 0, sizeof(ar));
	const char *how = "not measured (--warm-only)";
	double left_d = -1, left_nra = -1;
	struct rusage self = {0};
	int rc = 0;
	/* The goal's rows, round after round. */
	for (unsigned r = 0; r < o.rounds && rc == 0; r++)
		rc = round_run(&o, path, file_bytes, &rd[r], &how, r == 0 ? &self : NULL);
	/* The comparison, once: the other read modes cold, the memories and
	 * fills warm, the population's other ways. */
	uint64_t hsz, hroom = hugetlb_room(&hsz);
	int pool = hsz && rd[0].arw.arena_bytes && hroom >= rd[0].arw.arena_bytes;
	struct bounds bd = {0};
	if (!o.lean && rc == 0) {
		static const struct {
			int row, direct, no_ra;
			const char *what;
		} cold[] = {
			{AR_COLD_D, FSG_DIRECT_ON, 0, "arena load, O_DIRECT"},
			{AR_COLD_NRA, FSG_DIRECT_OFF, 1, "arena load, buffered, no RA"},
		};
		for (unsigned k = 0; k < 2 && rc == 0 && !o.warm_only; k++) {
			evict(path, o.drop_caches, &how);
			*(k ? &left_nra : &left_d) = cached(path);
			if ((rc = run_arena(&o, path, cold[k].direct, o.pages, o.fill, cold[k].no_ra,
					    &ar[cold[k].row])) == 0)
				rows[cold[k].row] = (struct row){cold[k].what, "cold", ar[cold[k].row].bytes,
								 ar[cold[k].row].s};
		}
		if (rc == 0)
			rc = warm_cat(path, file_bytes, &rows[CAT_WARM]);
		static const struct {
			int row, pages, fill;
			const char *what;
		} kinds[] = {
			{AR_WARM_MAP, FSG_PAGES_SHMEM, FSG_FILL_MAP, "arena load, shmem, map fill"},
			{AR_WARM_WRITE, FSG_PAGES_SHMEM, FSG_FILL_WRITE, "arena load, shmem, write fill"},
			{AR_WARM_HUGE, FSG_PAGES_HUGETLB, FSG_FILL_AUTO, "arena load, hugetlb pages"},
		};
		for (unsigned k = 0; k < 3 && rc == 0; k++) {
			if (kinds[k].pages == FSG_PAGES_HUGETLB && !pool)
				continue;
			if ((rc = run_arena(&o, path, FSG_DIRECT_AUTO, kinds[k].pages, kinds[k].fill, 0,
					    &ar[kinds[k].row])) == 0)
				rows[kinds[k].row] = (struct row){kinds[k].what, "warm",
								  ar[kinds[k].row].bytes, ar[kinds[k].row].s};
		}
		unsigned threads = rd[0].arw.threads ? rd[0].arw.threads : 1;
		uint64_t n = rd[0].arw.bytes;
		if (rc == 0 && (rc = run_bounds_extra(n, threads, o.lock, &bd)) == 0) {
			rows[P1] = (struct row){"fresh pages (populate), 1 thr", "-", n, bd.pop1};
			rows[PS] = (struct row){"fresh pages, N thr, N memfds", "-", n, bd.popsplit};
			rows[PWR] = (struct row){"fresh pages (pwrite), N thr", "-", n, bd.popwrite};
			if (bd.pophuge > 0)
				rows[PH] = (struct row){"fresh pages (hugetlb), N thr", "-", n, bd.pophuge};
		}
	}
	if (!o.file && !o.keep)
		unlink(path);

	int missing = 0;
	for (unsigned r = 0; r < o.rounds; r++) {
		char title[64];
		snprintf(title, sizeof(title), "round %u of %u (the goal's rows)", r + 1, o.rounds);
		print_head(title);
		const struct row *rr[] = {&rd[r].cat_cold, &rd[r].ar_cold, &rd[r].cat_warm, &rd[r].ar_warm,
					  &rd[r].popn,     &rd[r].w1,      &rd[r].wn,       &rd[r].fnv};
		for (unsigned i = o.warm_only ? 2 : 0; i < sizeof(rr) / sizeof(rr[0]); i++)
			missing += print_row(rr[i]);
	}
	if (!o.lean) {
		print_head("once (the comparison)");
		for (int i = 0; i < NROWS; i++) {
			if (o.warm_only && (i == AR_COLD_D || i == AR_COLD_NRA))
				continue; /* not asked for */
			if ((i == AR_WARM_HUGE || i == PH) && !pool)
				continue; /* no hugetlb pool: said below */
			missing += print_row(&rows[i]);
		}
	}
	if (missing || rc < 0) {
		fprintf(stderr, "fs-bench-arena: FAILED: %d rows missing\n", missing);
		return 1;
	}
	const struct round *last = &rd[o.rounds - 1];
	unsigned threads = last->arw.threads ? last->arw.threads : 1;
	printf("\nN = %u loader threads (%s), jobs of about %llu bytes (at least four experts); cold: %s",
	       threads, o.threads ? "--threads" : "the daemon's choice",
	       (unsigned long long)(o.chunk ? o.chunk : 8ull << 20), how);
	if (!o.warm_only)
		printf(" (file cached before each cold row, round 1: %.1f %% cat, %.1f %% load)",
		       100.0 * rd[0].left_cat, 100.0 * rd[0].left_ar);
	printf("\n");
	printf("the daemon's default read: cold %s, warm %s\n",
	       o.warm_only         ? "not measured" :
	       last->arc.direct    ? "O_DIRECT" :
	       last->arc.readahead ? "buffered, read ahead one job per thread (POSIX_FADV_WILLNEED)" :
				     "buffered",
	       last->arw.direct    ? "O_DIRECT (the file was not cached?)" :
	       last->arw.readahead ? "buffered, read ahead (the file was not cached?)" :
				     "buffered");
	/* The verdict: the daemon's default rows against cat and the bounds of
	 * the same round; a goal is met when it is met in every round. */
	int judged = file_bytes >= (16ull << 30);
	unsigned cold_met = 0, warm_met = 0;
	for (unsigned r = 0; r < o.rounds; r++) {
		double c = ratio(gbps(&rd[r].ar_cold), gbps(&rd[r].cat_cold));
		double w = ratio(gbps(&rd[r].ar_warm), lower_bound(&rd[r]));
		cold_met += !o.warm_only && c >= 0.9;
		warm_met += w >= 0.7;
		printf("round %u: cold %.2f x cat cold (%s); warm %.2f x cat warm, %.2f x the lower bound %.2f GB/s "
		       "(%s: 1-thread write %.2f, FNV N threads %.2f), %.2f x the N-thread population\n",
		       r + 1, c,
		       o.warm_only ? "not measured" :
		       c >= 0.9    ? "met" :
				     "NOT met",
		       ratio(gbps(&rd[r].ar_warm), gbps(&rd[r].cat_warm)), w, lower_bound(&rd[r]),
		       w >= 0.7 ? "met" : "NOT met", gbps(&rd[r].w1), gbps(&rd[r].fnv),
		       ratio(gbps(&rd[r].ar_warm), gbps(&rd[r].popn)));
	}
	if (o.warm_only)
		printf("GOAL cold >= 0.90 x cat cold, the daemon's default: not measured (--warm-only)\n");
	else
		printf("GOAL cold >= 0.90 x cat cold, the daemon's default: %s (met in %u of %u rounds)%s\n",
		       cold_met == o.rounds ? "MET" : "NOT MET", cold_met, o.rounds,
		       judged ? "" : "; this file is under 16 GiB: not the goal's size");
	printf("GOAL warm >= 0.70 x the lower bound, the daemon's default: %s (met in %u of %u rounds)%s\n",
	       warm_met == o.rounds ? "MET" : "NOT MET", warm_met, o.rounds,
	       judged ? "" : "; this file is under 16 GiB: not the goal's size");
	if (!o.lean) {
		if (!o.warm_only)
			printf("cold, read modes against the default of the last round: O_DIRECT %.2f x, buffered "
			       "without readahead %.2f x (file cached before: %.1f %%, %.1f %%)\n",
			       ratio(gbps(&rows[AR_COLD_D]), gbps(&last->ar_cold)),
			       ratio(gbps(&rows[AR_COLD_NRA]), gbps(&last->ar_cold)), 100.0 * left_d,
			       100.0 * left_nra);
		printf("warm by memory and fill: shmem map %.2f GB/s, shmem write %.2f GB/s (%.2f x map), hugetlb "
		       "%s\n",
		       gbps(&rows[AR_WARM_MAP]), gbps(&rows[AR_WARM_WRITE]),
		       ratio(gbps(&rows[AR_WARM_WRITE]), gbps(&rows[AR_WARM_MAP])),
		       pool ? "measured above" :
			      "not measured (no hugetlb pool holds the arena: vm.nr_hugepages)");
		printf("CPU seconds a GB (all loader threads, user + system), warm: default %.2f, shmem map %.2f, "
		       "shmem write %.2f",
		       last->arw.cpu / ((double)last->arw.bytes / 1e9 + 1e-9),
		       ar[AR_WARM_MAP].cpu / ((double)ar[AR_WARM_MAP].bytes / 1e9 + 1e-9),
		       ar[AR_WARM_WRITE].cpu / ((double)ar[AR_WARM_WRITE].bytes / 1e9 + 1e-9));
		if (pool)
			printf(", hugetlb %.2f",
			       ar[AR_WARM_HUGE].cpu / ((double)ar[AR_WARM_HUGE].bytes / 1e9 + 1e-9));
		printf("\npopulation 1 -> N threads: %.1f x faster (%.1f x with a memfd each)\n",
		       bd.pop1 / last->popn.s, bd.pop1 / bd.popsplit);
	}
	printf("arena memory (the default rows): %s; filled %s\n", last->arw.pages_why,
	       last->arw.fill == FSG_FILL_WRITE ? "by pwrite into the memfd" : "through the mapping");
	char thp[160], thp_anon[160];
	read_line("/sys/kernel/mm/transparent_hugepage/shmem_enabled", thp, sizeof(thp));
	read_line("/sys/kernel/mm/transparent_hugepage/enabled", thp_anon, sizeof(thp_anon));
	printf("huge pages: shmem_enabled %s (anon: %s); the warm arena had %.1f of %.1f MiB in 2 MiB pages "
	       "(ShmemPmdMapped)\n",
	       thp, thp_anon, last->arw.huge_kib >= 0 ? (double)last->arw.huge_kib / 1024.0 : -1.0,
	       (double)last->arw.arena_bytes / 1048576.0);
	/* The arena's pages are mapped, so they count in the RSS; the rest is
	 * the loader's own memory (no mapping of the file; O_DIRECT: one bounce
	 * buffer per thread). */
	double rss = (double)self.ru_maxrss / 1024.0, arena = (double)rd[0].arw.arena_bytes / 1048576.0;
	if (rd[0].arw.hugetlb) /* hugetlb pages are not counted in the RSS */
		printf("peak RSS: %.1f MiB, the loader's own; the %.1f MiB arena (%s) is in hugetlb pages, "
		       "which the RSS does not count\n",
		       rss, arena, rd[0].arw.locked ? "locked" : "not locked");
	else
		printf("peak RSS: %.1f MiB = the %.1f MiB arena (%s) + %.1f MiB besides\n", rss, arena,
		       rd[0].arw.locked ? "locked" : "not locked", rss - arena);
	return 0;
}
