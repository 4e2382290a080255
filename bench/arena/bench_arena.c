/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-bench-arena: how fast the daemon fills the expert arena from a GGUF
 * file, against `cat FILE >/dev/null` on the same file in the same run.
 *
 * It writes a MoE GGUF file of about --bytes (Q4_K experts, qwen3moe
 * naming) unless --file names one, then measures, in this order:
 *   cat, cold    the file evicted from the page cache first (fadvise)
 *   arena, cold  the same, then parse + plan + fsg_arena_build (the
 *                daemon's code: preadv into the memfd, checksums)
 *   cat, warm    the file now cached
 *   arena, warm
 * and prints a table, the arena/cat throughput ratio and the peak RSS.
 * A measurement that fails prints FAILED (the smoke test looks for it).
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fs_arena.h"
#include "fsg_arena.h"
#include "fsg_types.h"
#include "fsgw.h"

extern char **environ;

struct opts {
	uint64_t bytes;
	const char *file;
	const char *dir;
	int keep;
	int lock;
	unsigned threads;
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

static void usage(FILE *out)
{
	fprintf(out, "usage: fs-bench-arena [--bytes N[K|M|G]] [--file F.gguf] [--dir D] [--keep] [--lock]\n"
		     "                      [--threads N] [--quick]\n\n"
		     "  --bytes N    size of the generated GGUF file (default 2G)\n"
		     "  --file F     use this GGUF MoE file instead (not deleted)\n"
		     "  --dir D      where to write the generated file (default /tmp)\n"
		     "  --keep       keep the generated file\n"
		     "  --lock       mlock the arena like foresightd (default: not locked)\n"
		     "  --threads N  checksum threads (default: the daemon's choice)\n"
		     "  --quick      a 32 MiB file (the smoke test)\n");
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

/* Drop the file's pages from the page cache (clean pages: no root needed). */
static void evict(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
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

/* The two costs the arena load cannot avoid, measured on an arena-sized
 * memfd: writing fresh memory (pages populated as the loader does) and the
 * index checksum (FNV-1a 64, four streams on one thread, as the loader's
 * checksum threads run it). */
static int run_bounds(uint64_t bytes, double *write_s, double *fnv_s)
{
	struct fs_shm shm;
	int r = fs_shm_create(&shm, "fs-bench-arena", (size_t)bytes);
	if (r < 0) {
		fprintf(stderr, "fs-bench-arena: FAILED: memfd of %llu bytes: %s\n",
			(unsigned long long)bytes, strerror(-r));
		return r;
	}
	(void)madvise(shm.base, shm.bytes, MADV_POPULATE_WRITE);
	double t = now_s();
	memset(shm.base, 0x5a, (size_t)bytes);
	*write_s = now_s() - t;
	/* As the checksum threads do: four blobs (here: quarters) at once. */
	const uint8_t *q[4];
	uint64_t h[4] = {FS_FNV64_OFFSET, FS_FNV64_OFFSET, FS_FNV64_OFFSET, FS_FNV64_OFFSET};
	for (int i = 0; i < 4; i++)
		q[i] = (const uint8_t *)shm.base + (size_t)i * (bytes / 4);
	t = now_s();
	fsg_fnv1a64_4(q, bytes / 4, h);
	*fnv_s = now_s() - t;
	if ((h[0] ^ h[1] ^ h[2] ^ h[3]) == 42)
		printf("(unlikely)\n"); /* keep the hashes alive */
	fs_shm_close(&shm);
	return 0;
}

static int run_arena(const struct opts *o, const char *path, double *secs, uint64_t *bytes, int *locked,
		     uint64_t *arena_bytes, unsigned *threads)
{
	struct fsg_file f;
	struct fsg_plan p;
	struct fsg_err err;
	struct fs_shm shm;
	struct fsg_load_result res;
	struct fsg_load_opts lo = {
		.model = "bench", .lock = o->lock ? FSG_LOCK_TRY : FSG_LOCK_NO, .threads = o->threads};
	double t = now_s();
	int r = fsg_open(&f, path, &err);
	if (r == 0 && (r = fsg_plan_build(&f, &p, &err)) < 0)
		fsg_close(&f);
	if (r < 0) {
		fprintf(stderr, "fs-bench-arena: FAILED: %s: %s\n", path, err.msg);
		return r;
	}
	r = fsg_arena_build(&f, &p, &lo, &shm, &res, &err);
	*secs = now_s() - t;
	if (r < 0)
		fprintf(stderr, "fs-bench-arena: FAILED: arena: %s\n", err.msg);
	else {
		*bytes = res.bytes_read;
		*locked = res.locked;
		*arena_bytes = shm.bytes;
		*threads = res.threads;
		fs_shm_close(&shm);
	}
	fsg_plan_free(&p);
	fsg_close(&f);
	return r;
}

int main(int argc, char **argv)
{
	struct opts o = {.bytes = 2ull << 30, .dir = "/tmp"};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--quick")) {
			o.bytes = 32ull << 20;
		} else if (!strcmp(a, "--keep")) {
			o.keep = 1;
		} else if (!strcmp(a, "--lock")) {
			o.lock = 1;
		} else if (!strcmp(a, "--bytes") && v && size_arg(v, &o.bytes) == 0) {
			i++;
		} else if (!strcmp(a, "--file") && v) {
			o.file = v;
			i++;
		} else if (!strcmp(a, "--dir") && v) {
			o.dir = v;
			i++;
		} else if (!strcmp(a, "--threads") && v && atoi(v) > 0 && atoi(v) <= 8) {
			o.threads = (unsigned)atoi(v);
			i++;
		} else {
			fprintf(stderr, "fs-bench-arena: bad argument '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}
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
	uint64_t file_bytes = (uint64_t)st.st_size, arena_read = 0, arena_bytes = 0;
	struct row rows[6];
	int locked = 0, rc = 0;
	unsigned threads = 0;
	for (int warm = 0; warm < 2 && rc == 0; warm++) {
		double s = 0;
		if (!warm)
			evict(path);
		if ((rc = run_cat(path, &s)) < 0) {
			fprintf(stderr, "fs-bench-arena: FAILED: cat %s: %s\n", path, strerror(-rc));
			break;
		}
		rows[warm * 2] = (struct row){"cat FILE >/dev/null", warm ? "warm" : "cold", file_bytes, s};
		if (!warm)
			evict(path);
		if ((rc = run_arena(&o, path, &s, &arena_read, &locked, &arena_bytes, &threads)) < 0)
			break;
		rows[warm * 2 + 1] = (struct row){"arena load", warm ? "warm" : "cold", arena_read, s};
	}
	double ws = 0, fs = 0;
	if (rc == 0 && (rc = run_bounds(arena_read, &ws, &fs)) == 0) {
		rows[4] = (struct row){"fresh memory write", "-", arena_read, ws};
		rows[5] = (struct row){"FNV-1a 64 x4, 1 thread", "-", arena_read, fs};
	}
	if (!o.file && !o.keep)
		unlink(path);
	if (rc < 0)
		return 1;

	printf("\n| %-22s | %-5s | %14s | %8s | %7s |\n", "what", "cache", "bytes", "seconds", "GB/s");
	printf("|%s|%s|%s|%s|%s|\n", "------------------------", "-------", "----------------", "----------",
	       "---------");
	for (int i = 0; i < 6; i++)
		printf("| %-22s | %-5s | %14llu | %8.3f | %7.2f |\n", rows[i].what, rows[i].cache,
		       (unsigned long long)rows[i].bytes, rows[i].s, (double)rows[i].bytes / rows[i].s / 1e9);
	double cold = ((double)rows[1].bytes / rows[1].s) / ((double)rows[0].bytes / rows[0].s);
	double warm = ((double)rows[3].bytes / rows[3].s) / ((double)rows[2].bytes / rows[2].s);
	printf("\narena/cat throughput ratio: %.2f (cold), %.2f (warm)\n", cold, warm);
	printf("the arena load writes every byte to fresh memory and checksums it on %u thread%s: "
	       "bounds here %.2f GB/s and %.2f GB/s\n",
	       threads, threads == 1 ? "" : "s", (double)arena_read / ws / 1e9,
	       (double)arena_read / fs / 1e9 * (threads ? threads : 1));
	/* The arena's pages are mapped, so they count in the RSS; the rest is
	 * the loader's own memory (no bounce buffer, no mapping of the file). */
	struct rusage self;
	getrusage(RUSAGE_SELF, &self);
	double rss = (double)self.ru_maxrss / 1024.0, arena = (double)arena_bytes / 1048576.0;
	printf("peak RSS: %.1f MiB = the %.1f MiB arena (%s) + %.1f MiB besides\n", rss, arena,
	       locked ? "locked" : "not locked", rss - arena);
	return 0;
}
