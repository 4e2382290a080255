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
	"                      [--pages auto|shmem|hugetlb] [--fill auto|map|write]\n\n";

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

static int run_bounds(uint64_t bytes, unsigned threads, int lock, struct bounds *b)
{
	struct fs_shm shm;
	int r;
	if ((r = fresh_arena(&shm, bytes, lock)) < 0)
		return r;
	b->pop1 = parallel_pass(shm.base, bytes, 1, 2);
	fs_shm_close(&shm);
	if ((r = fresh_arena(&shm, bytes, lock)) < 0)
		return r;
	b->popn = parallel_pass(shm.base, bytes, threads, 2);
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
		if (r < 0) {
			fs_shm_close(&shm);
			return r;
		}
	}
	/* The write fill's way: pwrite into a fresh memfd (no zeroing, no
	 * faults), then, locked, map the pages (which locks them). */
	{
		struct fs_shm w;
		if ((r = fresh_arena(&w, bytes, lock)) < 0) {
			fs_shm_close(&shm);
			return r;
		}
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
	b->write1 = parallel_pass(shm.base, bytes, 1, 0);
	b->writen = parallel_pass(shm.base, bytes, threads, 0);
	b->fnv = parallel_pass(shm.base, bytes, threads, 1);
	fs_shm_close(&shm);
	if (b->pop1 <= 0 || b->popn <= 0 || b->popsplit <= 0 || b->popwrite <= 0 || b->write1 <= 0 ||
	    b->writen <= 0 || b->fnv <= 0) {
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
	unsigned threads;
	long huge_kib;
	char pages_why[160];
};

static int run_arena(const struct opts *o, const char *path, int direct, int pages, int fill,
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
				   .fill = fill};
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

int main(int argc, char **argv)
{
	struct opts o = {.bytes = 2ull << 30, .dir = "/tmp"};
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
		FS_OPT_FLAG("quick", 0, &quick, "a 32 MiB file (the smoke test; instead of --bytes)"),
		FS_OPT_CHOICE("pages", "KIND", &o.pages, page_names,
			      "the default rows' arena memory: auto (the daemon's), shmem, hugetlb"),
		FS_OPT_CHOICE("fill", "HOW", &o.fill, fill_names,
			      "the default rows' fill: auto (the daemon's), map, write"),
	};
	const struct fs_opt_cmd cmd = {"fs-bench-arena", usage, NULL, opts, FS_OPT_N(opts)};
	int prc = fs_opt_parse(&cmd, argc, argv);
	if (prc != 0)
		return prc == FS_OPT_HELP ? 0 : 2;
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
		CAT_COLD,
		AR_COLD_D,
		AR_COLD_B,
		CAT_WARM,
		AR_WARM,
		AR_WARM_MAP,
		AR_WARM_WRITE,
		AR_WARM_HUGE,
		P1,
		PN,
		PS,
		PWR,
		PH,
		W1,
		WN,
		FNVN,
		NROWS
	};
	uint64_t file_bytes = (uint64_t)st.st_size;
	struct row rows[NROWS] = {{0}};
	struct arena_run ar[NROWS] = {{0}};
	const char *how = "none";
	double left_cold[NROWS] = {0};
	int rc = 0;
	double s = 0;
	/* Cold: cat, the loader with O_DIRECT, the loader buffered (not with
	 * --warm-only). */
	if (!o.warm_only)
		evict(path, o.drop_caches, &how);
	left_cold[CAT_COLD] = cached(path);
	if (o.warm_only)
		rc = 0;
	else if ((rc = run_cat(path, &s)) == 0)
		rows[CAT_COLD] = (struct row){"cat FILE >/dev/null", "cold", file_bytes, s};
	else
		fprintf(stderr, "fs-bench-arena: FAILED: cat %s: %s\n", path, strerror(-rc));
	static const struct {
		int row, direct;
		const char *what, *cache;
	} loads[] = {
		{AR_COLD_D, FSG_DIRECT_ON, "arena load, O_DIRECT", "cold"},
		{AR_COLD_B, FSG_DIRECT_OFF, "arena load, buffered", "cold"},
	};
	for (unsigned k = 0; k < 2 && rc == 0 && !o.warm_only; k++) {
		evict(path, o.drop_caches, &how);
		left_cold[loads[k].row] = cached(path);
		if ((rc = run_arena(&o, path, loads[k].direct, o.pages, o.fill, &ar[loads[k].row])) == 0)
			rows[loads[k].row] = (struct row){loads[k].what, loads[k].cache,
							  ar[loads[k].row].bytes, ar[loads[k].row].s};
	}
	/* Warm: cat (which also brings the file in), then the daemon's default. */
	if (rc == 0 && (rc = run_cat(path, &s)) == 0 && (rc = run_cat(path, &s)) == 0)
		rows[CAT_WARM] = (struct row){"cat FILE >/dev/null", "warm", file_bytes, s};
	if (rc == 0 && (rc = run_arena(&o, path, FSG_DIRECT_AUTO, o.pages, o.fill, &ar[AR_WARM])) == 0)
		rows[AR_WARM] = (struct row){ar[AR_WARM].direct ? "arena load, auto=O_DIRECT" :
								  "arena load, auto=buffered",
					     "warm", ar[AR_WARM].bytes, ar[AR_WARM].s};
	/* The memory and the fill side by side, warm: 4 KiB shmem filled
	 * through the mapping and by pwrite, and hugetlb pages where the pool
	 * (vm.nr_hugepages) holds the arena. */
	static const struct {
		int row, pages, fill;
		const char *what;
	} kinds[] = {
		{AR_WARM_MAP, FSG_PAGES_SHMEM, FSG_FILL_MAP, "arena load, shmem, map fill"},
		{AR_WARM_WRITE, FSG_PAGES_SHMEM, FSG_FILL_WRITE, "arena load, shmem, write fill"},
		{AR_WARM_HUGE, FSG_PAGES_HUGETLB, FSG_FILL_AUTO, "arena load, hugetlb pages"},
	};
	uint64_t hsz, hroom = hugetlb_room(&hsz);
	int pool = hsz && ar[AR_WARM].arena_bytes && hroom >= ar[AR_WARM].arena_bytes;
	for (unsigned k = 0; k < 3 && rc == 0; k++) {
		if (kinds[k].pages == FSG_PAGES_HUGETLB && !pool)
			continue;
		if ((rc = run_arena(&o, path, FSG_DIRECT_AUTO, kinds[k].pages, kinds[k].fill,
				    &ar[kinds[k].row])) == 0)
			rows[kinds[k].row] = (struct row){kinds[k].what, "warm", ar[kinds[k].row].bytes,
							  ar[kinds[k].row].s};
	}
	/* The peak RSS so far: the loads' (the bounds below map memfds of
	 * their own). */
	struct rusage self;
	getrusage(RUSAGE_SELF, &self);
	unsigned threads = ar[AR_WARM].threads ? ar[AR_WARM].threads : 1;
	uint64_t arena_read = ar[AR_WARM].bytes;
	struct bounds bd = {0};
	if (rc == 0 && (rc = run_bounds(arena_read, threads, o.lock, &bd)) == 0) {
		rows[P1] = (struct row){"fresh pages (populate), 1 thr", "-", arena_read, bd.pop1};
		rows[PN] = (struct row){"fresh pages (populate), N thr", "-", arena_read, bd.popn};
		rows[PS] = (struct row){"fresh pages, N thr, N memfds", "-", arena_read, bd.popsplit};
		rows[PWR] = (struct row){"fresh pages (pwrite), N thr", "-", arena_read, bd.popwrite};
		if (bd.pophuge > 0)
			rows[PH] = (struct row){"fresh pages (hugetlb), N thr", "-", arena_read, bd.pophuge};
		rows[W1] = (struct row){"fresh memory write, 1 thread", "-", arena_read, bd.write1};
		rows[WN] = (struct row){"fresh memory write, N threads", "-", arena_read, bd.writen};
		rows[FNVN] = (struct row){"FNV-1a 64 x4, N threads", "-", arena_read, bd.fnv};
	}
	if (!o.file && !o.keep)
		unlink(path);

	printf("\n| %-30s | %-5s | %14s | %8s | %7s |\n", "what", "cache", "bytes", "seconds", "GB/s");
	printf("|%s|%s|%s|%s|%s|\n", "--------------------------------", "-------", "----------------",
	       "----------", "---------");
	int missing = 0;
	for (int i = 0; i < NROWS; i++) {
		if (o.warm_only && (i == CAT_COLD || i == AR_COLD_D || i == AR_COLD_B))
			continue; /* not asked for */
		if ((i == AR_WARM_HUGE || i == PH) && !pool)
			continue; /* no hugetlb pool: said below */
		if (!rows[i].what || rows[i].s <= 0) {
			printf("| %-30s | %-5s | %14s | %8s | %7s |\n", "(row missing)", "-", "-", "-",
			       "FAILED");
			missing++;
			continue;
		}
		printf("| %-30s | %-5s | %14llu | %8.3f | %7.2f |\n", rows[i].what, rows[i].cache,
		       (unsigned long long)rows[i].bytes, rows[i].s, gbps(&rows[i]));
	}
	if (missing || rc < 0) {
		fprintf(stderr, "fs-bench-arena: FAILED: %d of %d rows missing\n", missing, NROWS);
		return 1;
	}
	if (o.warm_only) { /* the cold rows' ratios below print as 0 */
		rows[CAT_COLD] = rows[AR_COLD_D] = rows[AR_COLD_B] = (struct row){"-", "-", 0, 1};
		how = "not measured (--warm-only)";
	}
	double cold_best = gbps(&rows[AR_COLD_D]) > gbps(&rows[AR_COLD_B]) ? gbps(&rows[AR_COLD_D]) :
									     gbps(&rows[AR_COLD_B]);
	double bound = gbps(&rows[W1]) < gbps(&rows[FNVN]) ? gbps(&rows[W1]) : gbps(&rows[FNVN]);
	printf("\nN = %u loader threads (%s), jobs of %llu bytes; cold: %s (file cached after: %.1f %%, %.1f %%, "
	       "%.1f %%)\n",
	       threads, o.threads ? "--threads" : "the daemon's choice",
	       (unsigned long long)(o.chunk ? o.chunk : 8ull << 20), how, 100.0 * left_cold[CAT_COLD],
	       100.0 * left_cold[AR_COLD_D], 100.0 * left_cold[AR_COLD_B]);
	printf("arena/cat throughput ratio: %.2f (cold, O_DIRECT), %.2f (cold, buffered), %.2f (warm)\n",
	       ratio(gbps(&rows[AR_COLD_D]), gbps(&rows[CAT_COLD])),
	       ratio(gbps(&rows[AR_COLD_B]), gbps(&rows[CAT_COLD])),
	       ratio(gbps(&rows[AR_WARM]), gbps(&rows[CAT_WARM])));
	printf("arena warm / bounds: %.2f x fresh memory write (1 thread), %.2f x (N threads), %.2f x FNV-1a "
	       "(N threads)\n",
	       ratio(gbps(&rows[AR_WARM]), gbps(&rows[W1])), ratio(gbps(&rows[AR_WARM]), gbps(&rows[WN])),
	       ratio(gbps(&rows[AR_WARM]), gbps(&rows[FNVN])));
	/* Where the warm load's time goes: bringing in the fresh pages is
	 * part of it (the memory write bounds above run on populated pages). */
	printf("warm load %.3f s; of that at least the page population on N threads, %.3f s alone (%.2f GB/s), "
	       "%.2f x the population's rate; population 1 -> N threads: %.1f x faster (%.1f x with a memfd "
	       "each)\n",
	       rows[AR_WARM].s, bd.popn, gbps(&rows[PN]), ratio(gbps(&rows[AR_WARM]), gbps(&rows[PN])),
	       bd.pop1 / bd.popn, bd.pop1 / bd.popsplit);
	printf("auto's choice: %s when cold (%s was faster here), buffered when warm (%s)\n", "O_DIRECT",
	       gbps(&rows[AR_COLD_D]) >= gbps(&rows[AR_COLD_B]) ? "O_DIRECT" : "buffered",
	       ar[AR_WARM].direct ? "it read O_DIRECT: the file was not cached?" : "as chosen");
	printf("goal (issue 23, at 16 GiB or more): cold >= 0.90 x cat cold: %.2f, %s; warm >= 0.70 x the lower "
	       "bound (%.2f GB/s): %.2f, %s%s\n",
	       ratio(cold_best, gbps(&rows[CAT_COLD])),
	       o.warm_only                              ? "not measured" :
	       cold_best >= 0.9 * gbps(&rows[CAT_COLD]) ? "met" :
							  "NOT met",
	       bound, ratio(gbps(&rows[AR_WARM]), bound),
	       gbps(&rows[AR_WARM]) >= 0.7 * bound ? "met" : "NOT met",
	       file_bytes < (16ull << 30) ? " (this file is under 16 GiB)" : "");
	printf("arena memory (the default rows): %s; filled %s\n", ar[AR_WARM].pages_why,
	       ar[AR_WARM].fill == FSG_FILL_WRITE ? "by pwrite into the memfd" : "through the mapping");
	printf("warm by memory and fill: shmem map %.2f GB/s, shmem write %.2f GB/s (%.2f x map), hugetlb %s\n",
	       gbps(&rows[AR_WARM_MAP]), gbps(&rows[AR_WARM_WRITE]),
	       ratio(gbps(&rows[AR_WARM_WRITE]), gbps(&rows[AR_WARM_MAP])),
	       pool ? "measured above" : "not measured (no hugetlb pool holds the arena: vm.nr_hugepages)");
	printf("CPU seconds a GB (all loader threads, user + system), warm: shmem map %.2f, shmem write %.2f%s",
	       ar[AR_WARM_MAP].cpu / ((double)ar[AR_WARM_MAP].bytes / 1e9 + 1e-9),
	       ar[AR_WARM_WRITE].cpu / ((double)ar[AR_WARM_WRITE].bytes / 1e9 + 1e-9),
	       pool ? ", hugetlb " : "\n");
	if (pool)
		printf("%.2f\n", ar[AR_WARM_HUGE].cpu / ((double)ar[AR_WARM_HUGE].bytes / 1e9 + 1e-9));
	if (pool)
		printf("hugetlb: %.2f GB/s warm, %.2f x the lower bound (%.2f x shmem map); fresh hugetlb pages %.1f x "
		       "faster than 4 KiB ones (N thr)\n",
		       gbps(&rows[AR_WARM_HUGE]), ratio(gbps(&rows[AR_WARM_HUGE]), bound),
		       ratio(gbps(&rows[AR_WARM_HUGE]), gbps(&rows[AR_WARM_MAP])),
		       ratio(bd.popn, bd.pophuge));
	char thp[160], thp_anon[160];
	read_line("/sys/kernel/mm/transparent_hugepage/shmem_enabled", thp, sizeof(thp));
	read_line("/sys/kernel/mm/transparent_hugepage/enabled", thp_anon, sizeof(thp_anon));
	printf("huge pages: shmem_enabled %s (anon: %s); the warm arena had %.1f of %.1f MiB in 2 MiB pages "
	       "(ShmemPmdMapped)\n",
	       thp, thp_anon, ar[AR_WARM].huge_kib >= 0 ? (double)ar[AR_WARM].huge_kib / 1024.0 : -1.0,
	       (double)ar[AR_WARM].arena_bytes / 1048576.0);
	/* The arena's pages are mapped, so they count in the RSS; the rest is
	 * the loader's own memory (no mapping of the file; O_DIRECT: one bounce
	 * buffer per thread). */
	double rss = (double)self.ru_maxrss / 1024.0, arena = (double)ar[AR_WARM].arena_bytes / 1048576.0;
	printf("peak RSS: %.1f MiB = the %.1f MiB arena (%s) + %.1f MiB besides\n", rss, arena,
	       ar[AR_WARM].locked ? "locked" : "not locked", rss - arena);
	return 0;
}
