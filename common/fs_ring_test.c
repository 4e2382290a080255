/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_ring_test.c: tests of the SPSC record ring (proto/fs_ring.h,
 * common/fs_ring.c) and of the futex helpers it sleeps on.
 *
 *  format/ prod/ basic/   single-thread semantics: validation, order,
 *                         empty/full, batch all-or-nothing, 32-bit wrap
 *  hostile/               a lying producer in the same process: impossible
 *                         tails, bad records, a rewritten header
 *  ipc/                   two processes over memfd + MAP_SHARED: 10M
 *                         records in order; a hostile writer process
 *  wake/                  sleep/wake-up handshake stress (one ring and
 *                         futex_waitv over 8 rings): every 16th post is
 *                         made only once the consumer is provably parked
 *                         in its futex wait (/proc: state S, in futex), so
 *                         the wake-up path runs a known number of times on
 *                         any scheduler; a wait that times out on a post
 *                         that never bumped wake_seq is a lost wake-up
 *  futex/                 fs_futex_wait / fs_futex_waitv basics
 *
 * Every wait is bounded: each test that waits for a peer has a criterion
 * timeout and its own, shorter deadlines (a deadline fails the test, it
 * never hangs it), and forked children die with their parent
 * (PR_SET_PDEATHSIG).  Threads never call cr_assert (it longjmps); they
 * report through counters the test thread checks.  Under ThreadSanitizer
 * the file brings its own minimal runner (see FS_TEST_TSAN below).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fs_futex.h"

/* Which lines the producer prefetches for write: fs_ring.h calls this
 * hook (defined below, by basic/prefetch_only_free_lines) for each. */
static void prefetch_seen(const void *a);
#define FS_RING_PREFETCH_HOOK prefetch_seen
#include "fs_ring.h"

#if defined(__SANITIZE_THREAD__)
#define FS_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FS_TEST_TSAN 1
#endif
#endif
#ifndef FS_TEST_TSAN
#define FS_TEST_TSAN 0
#endif

#if !FS_TEST_TSAN
#include <criterion/criterion.h>
#else
/*
 * Criterion cannot start under ThreadSanitizer: its sandbox (BoxFort) maps
 * an "inheritable arena" at a random address in 0x2000'0000'0000 ..
 * 0x6000'0000'0000, which TSan's shadow and guard mappings cover almost
 * entirely ("Could not initialize inheritable arena: Resource temporarily
 * unavailable", or a SEGV in libcriterion; Criterion issue #274).  Under
 * TSan this file therefore brings the few pieces of Criterion it uses:
 * Test() with an optional .timeout, cr_assert*, cr_log_info, and a main
 * that runs every test in its own forked process (like Criterion) with an
 * alarm() for the timeout.  It accepts (and ignores) Criterion's
 * "--jobs N" and "--verbose", and honours "--filter suite/name-glob".
 */
#include <fnmatch.h>

struct mt_test {
	const char *suite;
	const char *name;
	void (*fn)(void);
	double timeout;
};
struct mt_opts {
	int unused_;
	double timeout;
};
static struct mt_test mt_tests[64];
static int mt_ntests;

static void mt_register(const char *suite, const char *name, void (*fn)(void), double timeout)
{
	if (mt_ntests < (int)(sizeof(mt_tests) / sizeof(mt_tests[0])))
		mt_tests[mt_ntests++] = (struct mt_test){suite, name, fn, timeout};
}

#define Test(suite, name, ...)                                                 \
	static void suite##_##name(void);                                      \
	__attribute__((constructor)) static void mt_reg_##suite##_##name(void) \
	{                                                                      \
		struct mt_opts o = {.unused_ = 0, __VA_ARGS__};                \
		mt_register(#suite, #name, suite##_##name, o.timeout);         \
	}                                                                      \
	static void suite##_##name(void)

__attribute__((noreturn)) static void mt_fail(const char *file, int line, const char *expr, const char *fmt,
					      ...)
{
	va_list ap;
	fprintf(stderr, "[----] %s:%d: Assertion Failed: %s\n[----]   ", file, line, expr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	fflush(stderr);
	_exit(1);
}

#define cr_assert(cond, ...)                                                \
	do {                                                                \
		if (!(cond))                                                \
			mt_fail(__FILE__, __LINE__, #cond, "" __VA_ARGS__); \
	} while (0)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_not_null(p, ...) cr_assert((p) != NULL, __VA_ARGS__)
#define cr_log_info(...) (fprintf(stderr, "[----] " __VA_ARGS__), fprintf(stderr, "\n"))

int main(int argc, char **argv)
{
	const char *filter = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc)
			filter = argv[++i];
		else if (strncmp(argv[i], "--filter=", 9) == 0)
			filter = argv[i] + 9;
		else if (strcmp(argv[i], "--jobs") == 0 || strcmp(argv[i], "-j") == 0)
			i++;
	}
	int run = 0, failed = 0;
	for (int t = 0; t < mt_ntests; t++) {
		const struct mt_test *m = &mt_tests[t];
		char full[256];
		snprintf(full, sizeof(full), "%s/%s", m->suite, m->name);
		if (filter && fnmatch(filter, full, 0) != 0)
			continue;
		run++;
		fflush(NULL);
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 2;
		}
		if (pid == 0) {
			alarm(m->timeout > 0 ? (unsigned)m->timeout + 1 : 300);
			m->fn();
			fflush(NULL);
			_exit(0);
		}
		int st = 0;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double el = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
			fprintf(stderr, "[PASS] %s::%s: (%.2fs)\n", m->suite, m->name, el);
		} else {
			failed++;
			if (WIFSIGNALED(st))
				fprintf(stderr, "[FAIL] %s::%s: %s (%.2fs)\n", m->suite, m->name,
					WTERMSIG(st) == SIGALRM ? "Timed out" : "CRASH", el);
			else
				fprintf(stderr, "[FAIL] %s::%s: (%.2fs)\n", m->suite, m->name, el);
		}
	}
	fprintf(stderr,
		"[====] Synthesis: Tested: %d | Passing: %d | Failing: %d (TSan build: built-in runner)\n",
		run, run - failed, failed);
	return failed ? 1 : (run ? 0 : 1);
}
#endif /* FS_TEST_TSAN */

#ifndef Test
/* Only a static analyser that does not read <criterion/criterion.h> gets
 * here (tools/lint.sh's cppcheck): `.timeout = N` in a Test() line would
 * stop its analysis of this file. */
#define Test(suite, name, ...) void suite##_##name(void)
#endif

#define NS_PER_S 1000000000ull

/* ---- helpers --------------------------------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * NS_PER_S + (uint64_t)t.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* xorshift64*: deterministic per seed, good enough to shuffle timings. */
static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

static void *ring_alloc(uint32_t entries)
{
	size_t bytes = (fs_ring_bytes(entries) + 63) / 64 * 64;
	void *m = aligned_alloc(64, bytes);
	cr_assert_not_null(m);
	memset(m, 0xa5, bytes); /* format must not rely on zeroed memory */
	return m;
}

/*
 * A record that carries a 64-bit sequence number in window:value and
 * derives its other fields from it, so a torn or misplaced record is
 * caught, not just a wrong sequence number.
 */
static struct fs_rec seq_rec(uint64_t seq)
{
	struct fs_rec r = {
		.type = FS_REC_USAGE,
		.aux = (uint8_t)(seq & 1),
		.layer = (uint16_t)(seq % 61),
		.expert = (uint16_t)(seq % 257),
		.card = (uint16_t)(seq % 3),
		.window = (uint32_t)(seq >> 32),
		.value = (uint32_t)seq,
	};
	return r;
}

static uint64_t rec_seq(const struct fs_rec *r)
{
	return ((uint64_t)r->window << 32) | r->value;
}

/* 1 when r is exactly seq_rec(rec_seq(r)). */
static int seq_rec_ok(const struct fs_rec *r)
{
	struct fs_rec want = seq_rec(rec_seq(r));
	return memcmp(r, &want, sizeof(want)) == 0;
}

/* An independent statement of which (type, aux) pairs are valid: used to
 * check fs_rec_valid() and every record a consumer returns. */
static int rec_ok_reference(const struct fs_rec *r)
{
	unsigned h = r->aux & 0x0fu, s = r->aux >> 4;
	if (r->type == FS_REC_PREDICT)
		return h >= 1 && h <= 15 && s <= 2;
	if (r->type == FS_REC_USAGE)
		return r->aux == 0 || r->aux == 1;
	if (r->type == FS_REC_WIN_BEGIN || r->type == FS_REC_WIN_END)
		return r->aux == 0;
	return 0;
}

/* Consume exactly `want` more records (single thread: they must be there). */
static void drain_expect(struct fs_ring_cons *c, uint64_t *next_seq, uint32_t want)
{
	struct fs_rec out[64];
	while (want) {
		uint32_t max = want < 64 ? want : 64;
		uint32_t n = fs_ring_consume(c, out, max);
		cr_assert_eq(n, max, "consume returned %u, expected %u", n, max);
		for (uint32_t i = 0; i < n; i++) {
			cr_assert(seq_rec_ok(&out[i]), "torn record");
			cr_assert_eq(rec_seq(&out[i]), *next_seq, "got seq %llu, expected %llu",
				     (unsigned long long)rec_seq(&out[i]), (unsigned long long)*next_seq);
			(*next_seq)++;
		}
		want -= n;
	}
}

/* ---- a consumer provably asleep ------------------------------------------------ */

/* The caller's kernel thread id (what /proc/PID/task/ names). */
static pid_t my_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/*
 * 1 when thread `tid` of process `pid` is blocked in the kernel: its state
 * in /proc/PID/task/TID/stat is S (an interruptible sleep), and, where
 * /proc/PID/task/TID/syscall can be read (same process; not across
 * processes under Yama), the call it is blocked in is futex or
 * futex_waitv.  The wake tests' consumers do nothing else that sleeps
 * between setting NEED_WAKEUP and their futex wait, so with NEED set and
 * the ring empty this is "parked on wake_seq".  0 otherwise; -1 when /proc
 * cannot be read (the caller fails: the test cannot prove its point).
 */
static int task_parked(pid_t pid, pid_t tid)
{
	char path[96], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	const char *p = strrchr(buf, ')'); /* the name may hold spaces and ')' */
	if (!p || p[1] != ' ' || p[2] != 'S')
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1; /* not readable here: the state must do */
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 1;
	buf[n] = 0;
	long nr = strtol(buf, NULL, 10); /* "running" (woke meanwhile) reads 0: not parked */
	return nr == SYS_futex || nr == 449 /* futex_waitv */;
}

/* 1 when the consumer of the `n` rings `h` asked each to wake it
 * (NEED_WAKEUP), took every record, and its thread `tid` of process `pid`
 * is blocked in a futex wait; 0 when not (yet); -1 when /proc is unreadable. */
static int consumer_parked(struct fs_ring_hdr *const *h, int n, pid_t pid, pid_t tid)
{
	for (int i = 0; i < n; i++) {
		if (!(__atomic_load_n(&h[i]->flags, __ATOMIC_SEQ_CST) & FS_RING_NEED_WAKEUP))
			return 0;
		if (__atomic_load_n(&h[i]->head, __ATOMIC_ACQUIRE) !=
		    __atomic_load_n(&h[i]->tail, __ATOMIC_RELAXED))
			return 0;
	}
	return task_parked(pid, tid);
}

/* Waits until consumer_parked(); returns its 1, or -1 (/proc unreadable),
 * or 0 when *stop was set or `deadline` (now_ns) passed first.  No bound
 * tighter than the test's deadline: a consumer of empty rings parks, and
 * how soon depends on the scheduler only. */
static int wait_parked(struct fs_ring_hdr *const *h, int n, pid_t pid, pid_t tid, const uint32_t *stop,
		       uint64_t deadline)
{
	for (uint32_t spins = 0;; spins++) {
		int rc = consumer_parked(h, n, pid, tid);
		if (rc != 0)
			return rc;
		if (stop && __atomic_load_n(stop, __ATOMIC_RELAXED))
			return 0;
		if ((spins & 63) == 0 && now_ns() > deadline)
			return 0;
		sched_yield();
	}
}

/*
 * After a futex wait on `wake_seq` (armed with `seq`) timed out: 1 when a
 * wake-up was lost, i.e. a post whose fs_ring_post() had returned
 * (*posted, published with release after it) is not among the `consumed`
 * records the consumer had taken before it slept, yet wake_seq never moved.
 * Such a post came after the consumer's last look at the tail (else it
 * would not have slept), so the handshake promises its producer saw
 * NEED_WAKEUP and bumped wake_seq.  Not "records pending at the timeout":
 * a producer kept off a CPU between its tail store and its wake-up makes
 * that true with nothing lost.  *posted is read first: its acquire makes
 * a bump made before it visible to the wake_seq load after it.
 */
static int lost_wakeup(const uint64_t *posted, uint64_t consumed, const uint32_t *wake_seq, uint32_t seq)
{
	uint64_t done = __atomic_load_n(posted, __ATOMIC_ACQUIRE);
	return done > consumed && __atomic_load_n(wake_seq, __ATOMIC_ACQUIRE) == seq;
}

/* ---- format / attach ------------------------------------------------------- */

Test(format, rejects_bad_entries)
{
	void *mem = ring_alloc(1024);
	size_t big = fs_ring_bytes(1024);
	struct fs_ring_cons c;
	const uint32_t bad[] = {0, 1, 2, 8, 15, 17, 24, 48, 100, 1000, 1023, 1025, 0xffffffffu};
	unsigned char *snap = malloc(big);
	cr_assert_not_null(snap);
	memcpy(snap, mem, big);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(fs_ring_format(&c, mem, big, bad[i]), -EINVAL, "entries %u accepted", bad[i]);
		cr_assert(memcmp(snap, mem, big) == 0, "a rejected format (entries %u) wrote memory", bad[i]);
	}
	/* Above the maximum (checked before the size, so no huge buffer needed). */
	cr_assert_eq(fs_ring_format(&c, mem, big, FS_RING_MAX_ENTRIES * 2u), -EINVAL);
	/* The bounds themselves are fine (the maximum only if the size fits). */
	cr_assert_eq(fs_ring_format(&c, mem, big, FS_RING_MIN_ENTRIES), 0);
	cr_assert_eq(fs_ring_format(&c, mem, big, 1024), 0);
	cr_assert_eq(fs_ring_format(&c, mem, big, FS_RING_MAX_ENTRIES), -EINVAL, "size too small for max");
	free(snap);
	free(mem);
}

Test(format, rejects_small_or_misaligned_memory)
{
	void *mem = ring_alloc(64);
	struct fs_ring_cons c;
	cr_assert_eq(fs_ring_format(&c, mem, fs_ring_bytes(64) - 1, 64), -EINVAL);
	cr_assert_eq(fs_ring_format(&c, mem, sizeof(struct fs_ring_hdr), 64), -EINVAL);
	cr_assert_eq(fs_ring_format(&c, mem, 0, 64), -EINVAL);
	cr_assert_eq(fs_ring_format(&c, NULL, fs_ring_bytes(64), 64), -EINVAL);
	/* Not cache-line aligned: every offset 1..63. */
	char *raw = aligned_alloc(64, fs_ring_bytes(64) + 128);
	cr_assert_not_null(raw);
	for (int off = 1; off < 64; off++)
		cr_assert_eq(fs_ring_format(&c, raw + off, fs_ring_bytes(64), 64), -EINVAL, "offset %d", off);
	cr_assert_eq(fs_ring_format(&c, raw + 64, fs_ring_bytes(64), 64), 0);
	cr_assert_eq(fs_ring_format(&c, mem, fs_ring_bytes(64), 64), 0);
	free(raw);
	free(mem);
}

Test(format, writes_header_and_zeroes_records)
{
	const uint32_t E = 256;
	void *mem = ring_alloc(E);
	struct fs_ring_cons c;
	cr_assert_eq(fs_ring_format(&c, mem, fs_ring_bytes(E), E), 0);
	struct fs_ring_hdr *h = mem;
	cr_assert_eq(h->magic, FS_RING_MAGIC);
	cr_assert_eq(h->version, FS_PROTO_VERSION);
	cr_assert_eq(h->entries, E);
	cr_assert_eq(h->rec_size, sizeof(struct fs_rec));
	cr_assert_eq(h->rec_offset, FS_RING_REC_OFFSET);
	cr_assert_eq(h->tail, 0);
	cr_assert_eq(h->head, 0);
	cr_assert_eq(h->flags, 0);
	cr_assert_eq(h->wake_seq, 0);
	const unsigned char *recs = (const unsigned char *)mem + FS_RING_REC_OFFSET;
	for (size_t i = 0; i < (size_t)E * sizeof(struct fs_rec); i++)
		cr_assert_eq(recs[i], 0, "record byte %zu not zeroed", i);
	cr_assert_eq(c.entries, E);
	cr_assert_eq(c.mask, E - 1);
	cr_assert_eq(c.head, 0);
	cr_assert_eq((const void *)c.recs, (const void *)recs);
	free(mem);
}

Test(prod, init_validates_header)
{
	const uint32_t E = 64;
	void *mem = ring_alloc(E);
	size_t sz = fs_ring_bytes(E);
	struct fs_ring_cons c;
	struct fs_ring_prod p;
	struct fs_ring_hdr *h = mem;
	cr_assert_eq(fs_ring_format(&c, mem, sz, E), 0);
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), 0);
	cr_assert_eq(p.mask, E - 1);
	cr_assert_eq(p.tail, 0);

	h->magic ^= 1;
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), -EPROTO, "bad magic");
	h->magic ^= 1;
	h->version = FS_PROTO_VERSION + 1;
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), -EPROTO, "bad version");
	h->version = 0;
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), -EPROTO, "version 0");
	h->version = FS_PROTO_VERSION;

	const uint32_t bad_entries[] = {0, 8, 63, 65, 96, 128 /* bigger than the memory */, 0xffffffffu};
	for (size_t i = 0; i < sizeof(bad_entries) / sizeof(bad_entries[0]); i++) {
		h->entries = bad_entries[i];
		cr_assert_eq(fs_ring_prod_init(&p, mem, sz), -EINVAL, "entries %u", bad_entries[i]);
	}
	h->entries = E;
	h->rec_size = 32;
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), -EINVAL, "rec_size");
	h->rec_size = sizeof(struct fs_rec);
	h->rec_offset = 128;
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), -EINVAL, "rec_offset");
	h->rec_offset = FS_RING_REC_OFFSET;
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz - 1), -EINVAL, "size");
	cr_assert_eq(fs_ring_prod_init(&p, mem, 16), -EINVAL, "size < header");
	cr_assert_eq(fs_ring_prod_init(&p, NULL, sz), -EINVAL, "NULL");
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), 0, "restored header accepted");
	free(mem);
}

/* The asymmetric wake-up is offered where the kernel has the membarrier
 * command, taken by a producer that registers, refused on request; a
 * producer seeing no feature bit (an older daemon) posts with seq_cst. */
Test(prod, asym_feature_negotiated)
{
	const uint32_t E = 64;
	void *mem = ring_alloc(E);
	size_t sz = fs_ring_bytes(E);
	struct fs_ring_cons c;
	struct fs_ring_prod p;
	struct fs_ring_hdr *h = mem;
	int avail = fs_ring_asym_available();
	cr_log_info("membarrier GLOBAL_EXPEDITED: %s", avail ? "available" : "not available");
	cr_assert_eq(fs_ring_format(&c, mem, sz, E), 0);
	cr_assert_eq(c.asym, (uint32_t)avail);
	cr_assert_eq(h->features, avail ? FS_RING_F_ASYM : 0u);
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), 0);
	cr_assert_eq(p.asym, (uint32_t)avail, "the producer takes what the consumer offers");
	fs_ring_set_asym(&c, 0);
	cr_assert_eq(c.asym, 0);
	cr_assert_eq(h->features, 0u);
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), 0);
	cr_assert_eq(p.asym, 0, "no feature bit: the seq_cst post");
	/* Unknown feature bits are ignored (a newer consumer). */
	h->features = ~FS_RING_F_ASYM;
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), 0);
	cr_assert_eq(p.asym, 0);
	/* Either way the sleep handshake works on an empty ring. */
	for (int asym = 0; asym < 2; asym++) {
		fs_ring_set_asym(&c, asym);
		uint32_t seq;
		cr_assert_eq(fs_ring_sleep_prepare(&c, &seq), 0, "empty: may sleep");
		cr_assert_eq(h->flags, FS_RING_NEED_WAKEUP);
		fs_ring_sleep_done(&c);
		cr_assert_eq(h->flags, 0u);
	}
	free(mem);
}

/* ---- single-thread semantics ----------------------------------------------- */

Test(basic, empty_ring_consumes_nothing)
{
	const uint32_t E = 16;
	void *mem = ring_alloc(E);
	struct fs_ring_cons c;
	struct fs_ring_prod p;
	struct fs_rec out[4];
	cr_assert_eq(fs_ring_format(&c, mem, fs_ring_bytes(E), E), 0);
	cr_assert_eq(fs_ring_prod_init(&p, mem, fs_ring_bytes(E)), 0);
	cr_assert_eq(fs_ring_consume(&c, out, 4), 0);
	cr_assert_eq(fs_ring_pending(&c), 0);
	cr_assert_eq(c.consumed + c.bad_index + c.bad_record, 0);
	/* Post one, take it, then the ring is empty again. */
	struct fs_rec r = seq_rec(7);
	cr_assert_eq(fs_ring_post(&p, &r), 0);
	cr_assert_eq(fs_ring_pending(&c), 1);
	cr_assert_eq(fs_ring_consume(&c, out, 0), 0, "max 0 takes nothing");
	cr_assert_eq(fs_ring_pending(&c), 1, "max 0 dropped a record");
	cr_assert_eq(fs_ring_consume(&c, out, 4), 1);
	cr_assert(memcmp(&out[0], &r, sizeof(r)) == 0);
	cr_assert_eq(fs_ring_consume(&c, out, 4), 0);
	cr_assert_eq(c.consumed, 1);
	cr_assert_eq(((struct fs_ring_hdr *)mem)->head, 1, "head published");
	free(mem);
}

Test(basic, consume_group_waits_while_the_tail_moves)
{
	const uint32_t E = 64;
	void *mem = ring_alloc(E);
	struct fs_ring_cons c;
	struct fs_ring_prod p;
	struct fs_rec out[64];
	uint32_t last = 0;
	uint64_t next_in = 0, next_out = 0;
	cr_assert_eq(fs_ring_format(&c, mem, fs_ring_bytes(E), E), 0);
	cr_assert_eq(fs_ring_prod_init(&p, mem, fs_ring_bytes(E)), 0);
	cr_assert_eq(fs_ring_consume_group(&c, out, 64, 8, &last), 0, "empty");
	/* 3 posted: the tail moved since the last look, wait for more. */
	for (int i = 0; i < 3; i++) {
		struct fs_rec r = seq_rec(next_in++);
		cr_assert_eq(fs_ring_post(&p, &r), 0);
	}
	cr_assert_eq(fs_ring_consume_group(&c, out, 64, 8, &last), 0, "the group is not full yet");
	cr_assert_eq(fs_ring_pending(&c), 3, "waiting took nothing");
	/* Nothing new since: the producer paused, take what is there. */
	cr_assert_eq(fs_ring_consume_group(&c, out, 64, 8, &last), 3);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rec_seq(&out[i]), next_out++);
	/* A full group is taken at once, however the tail moves. */
	for (int i = 0; i < 9; i++) {
		struct fs_rec r = seq_rec(next_in++);
		cr_assert_eq(fs_ring_post(&p, &r), 0);
	}
	cr_assert_eq(fs_ring_consume_group(&c, out, 64, 8, &last), 9);
	for (int i = 0; i < 9; i++)
		cr_assert_eq(rec_seq(&out[i]), next_out++);
	/* max below the group: max is a full group. */
	for (int i = 0; i < 2; i++) {
		struct fs_rec r = seq_rec(next_in++);
		cr_assert_eq(fs_ring_post(&p, &r), 0);
	}
	cr_assert_eq(fs_ring_consume_group(&c, out, 2, 8, &last), 2);
	cr_assert_eq(c.consumed, 14);
	cr_assert_eq(fs_ring_consume_group(&c, out, 64, 8, &last), 0, "empty again");
	free(mem);
}

/* The wait for a group is bounded whatever the producer does between two
 * calls: one record per call (the pending count reaches the group), a
 * pause (the next call), or a tail that moves back and forth under the
 * group (a hostile producer: the count must grow for the consumer to wait). */
Test(basic, consume_group_waits_a_bounded_number_of_calls)
{
	const uint32_t E = 64, G = 8;
	void *mem = ring_alloc(E);
	struct fs_ring_cons c;
	struct fs_ring_prod p;
	struct fs_ring_hdr *h = mem;
	struct fs_rec out[64];
	uint32_t last = 0, calls, got;
	uint64_t next_in = 0, next_out = 0;
	cr_assert_eq(fs_ring_format(&c, mem, fs_ring_bytes(E), E), 0);
	cr_assert_eq(fs_ring_prod_init(&p, mem, fs_ring_bytes(E)), 0);

	/* One record before each call: the first comes out on call G (the
	 * count reached the group), all G of them. */
	for (calls = 1, got = 0; calls <= 4 * G && !got; calls++) {
		struct fs_rec r = seq_rec(next_in++);
		cr_assert_eq(fs_ring_post(&p, &r), 0);
		got = fs_ring_consume_group(&c, out, 64, G, &last);
	}
	cr_assert_eq(got, G, "took %u after %u calls", got, calls - 1);
	cr_assert_eq(calls - 1, G, "the first record waited %u calls", calls - 1);
	for (uint32_t i = 0; i < got; i++)
		cr_assert_eq(rec_seq(&out[i]), next_out++);
	/* Three before each call, max 5 (below the group): out once 5 are there. */
	for (calls = 1, got = 0; calls <= 4 * G && !got; calls++) {
		for (int k = 0; k < 3; k++) {
			struct fs_rec r = seq_rec(next_in++);
			cr_assert_eq(fs_ring_post(&p, &r), 0);
		}
		got = fs_ring_consume_group(&c, out, 5, G, &last);
	}
	cr_assert_eq(got, 5u);
	cr_assert_eq(calls - 1, 2u, "waited %u calls", calls - 1);
	for (uint32_t i = 0; i < got; i++)
		cr_assert_eq(rec_seq(&out[i]), next_out++);
	while ((got = fs_ring_consume_group(&c, out, 64, G, &last)) == 0)
		;
	next_out += got;
	cr_assert_eq(next_out, next_in);

	/* A producer that moves its tail back and forth between head + 1 and
	 * head + 2 (records written, tail rewound): the count changes on every
	 * call but never grows past 2; the old rule (wait while it changed)
	 * waited forever. */
	for (int k = 0; k < 2; k++) {
		struct fs_rec r = seq_rec(next_in++);
		cr_assert_eq(fs_ring_post(&p, &r), 0);
	}
	uint32_t head = c.head;
	last = 0;
	for (calls = 1, got = 0; calls <= 1000 && !got; calls++) {
		h->tail = head + 1 + (calls & 1);
		got = fs_ring_consume_group(&c, out, 64, G, &last);
	}
	cr_assert(got > 0, "a tail moving back and forth under the group: nothing after %u calls", calls - 1);
	cr_assert(calls - 1 <= G, "waited %u calls", calls - 1);
	cr_assert_eq(rec_seq(&out[0]), next_out);
	free(mem);
}

Test(basic, records_come_out_in_order)
{
	const uint32_t E = 64;
	void *mem = ring_alloc(E);
	struct fs_ring_cons c;
	struct fs_ring_prod p;
	cr_assert_eq(fs_ring_format(&c, mem, fs_ring_bytes(E), E), 0);
	cr_assert_eq(fs_ring_prod_init(&p, mem, fs_ring_bytes(E)), 0);
	/* Every record type, byte for byte. */
	const struct fs_rec in[] = {
		{.type = FS_REC_WIN_BEGIN, .window = 41, .value = 512},
		{.type = FS_REC_PREDICT,
		 .aux = FS_PRED_AUX(2, FS_SRC_KERNEL),
		 .layer = 3,
		 .expert = 9,
		 .card = FS_CARD_NONE,
		 .window = 41,
		 .value = 0x3f800000u},
		{.type = FS_REC_USAGE, .aux = FS_USE_HIT, .layer = 3, .expert = 9, .card = 1, .window = 41},
		{.type = FS_REC_USAGE,
		 .aux = FS_USE_MISS,
		 .layer = 4,
		 .expert = 1,
		 .card = FS_CARD_NONE,
		 .window = 41},
		{.type = FS_REC_WIN_END, .window = 41},
	};
	const uint32_t n_in = sizeof(in) / sizeof(in[0]);
	for (uint32_t i = 0; i < n_in; i++)
		cr_assert_eq(fs_ring_post(&p, &in[i]), 0);
	struct fs_rec out[8];
	uint32_t got = 0;
	while (got < n_in) {
		uint32_t n = fs_ring_consume(&c, out, 2); /* in pieces */
		cr_assert(n > 0 && n <= 2);
		for (uint32_t i = 0; i < n; i++, got++)
			cr_assert(memcmp(&out[i], &in[got], sizeof(out[i])) == 0, "record %u differs", got);
	}
	cr_assert_eq(c.bad_record, 0);
	cr_assert_eq(c.consumed, n_in);

	/* A longer stream with random post and consume sizes. */
	uint64_t seed = 0x1234567, next_in = 0, next_out = 0;
	while (next_out < 100000) {
		uint32_t k = (uint32_t)(rnd(&seed) % 9);
		for (uint32_t i = 0; i < k; i++) {
			struct fs_rec r = seq_rec(next_in);
			if (fs_ring_post(&p, &r) != 0)
				break;
			next_in++;
		}
		uint32_t want = (uint32_t)(rnd(&seed) % 10);
		uint32_t avail = (uint32_t)(next_in - next_out);
		drain_expect(&c, &next_out, want < avail ? want : avail);
	}
	free(mem);
}

Test(basic, full_ring_refuses_and_writes_nothing)
{
	const uint32_t E = 32;
	void *mem = ring_alloc(E);
	size_t sz = fs_ring_bytes(E);
	struct fs_ring_cons c;
	struct fs_ring_prod p;
	struct fs_ring_hdr *h = mem;
	cr_assert_eq(fs_ring_format(&c, mem, sz, E), 0);
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), 0);
	unsigned char *snap = malloc(sz);
	cr_assert_not_null(snap);
	uint64_t in = 0, out = 0;
	for (int lap = 0; lap < 5; lap++) {
		/* Accepted while fewer than E are in flight... */
		while (in - out < E) {
			struct fs_rec r = seq_rec(in);
			cr_assert_eq(fs_ring_post(&p, &r), 0, "refused with %llu in flight",
				     (unsigned long long)(in - out));
			in++;
		}
		/* ...refused exactly at E, without touching the ring. */
		memcpy(snap, mem, sz);
		for (int k = 0; k < 3; k++) {
			struct fs_rec r = seq_rec(999999);
			cr_assert_eq(fs_ring_post(&p, &r), -ENOBUFS);
			cr_assert_eq(fs_ring_post_batch(&p, &r, 1), -ENOBUFS);
		}
		cr_assert(memcmp(snap, mem, sz) == 0, "a refused post wrote to the ring");
		cr_assert_eq(h->tail - h->head, E);
		/* Free a few (a different number each lap) and refill. */
		drain_expect(&c, &out, (uint32_t)lap * 7 + 1);
	}
	drain_expect(&c, &out, (uint32_t)(in - out));
	/* Two records of room for a one-record take: GCC's -O3 peels the
	 * compaction loop and warns of out[1] for a one-record array
	 * (-Warray-bounds, a false positive: avail <= max = 1). */
	cr_assert_eq(fs_ring_consume(&c, (struct fs_rec[2]){{0}}, 1), 0);
	free(snap);
	free(mem);
}

Test(basic, batch_is_all_or_nothing)
{
	const uint32_t E = 64;
	void *mem = ring_alloc(E);
	size_t sz = fs_ring_bytes(E);
	struct fs_ring_cons c;
	struct fs_ring_prod p;
	cr_assert_eq(fs_ring_format(&c, mem, sz, E), 0);
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), 0);
	unsigned char *snap = malloc(sz);
	cr_assert_not_null(snap);
	struct fs_rec b[2 * 64];
	uint64_t in = 0, out = 0;

	/* n == 0 is a no-op. */
	memcpy(snap, mem, sz);
	cr_assert_eq(fs_ring_post_batch(&p, b, 0), 0);
	cr_assert(memcmp(snap, mem, sz) == 0);
	/* More than the ring holds: refused even when empty. */
	for (uint32_t i = 0; i < E + 1; i++)
		b[i] = seq_rec(in + i);
	cr_assert_eq(fs_ring_post_batch(&p, b, E + 1), -ENOBUFS);
	cr_assert(memcmp(snap, mem, sz) == 0);
	/* Exactly the capacity fits. */
	cr_assert_eq(fs_ring_post_batch(&p, b, E), 0);
	in += E;
	drain_expect(&c, &out, E);

	/* For every amount of free space f: a batch of f + 1 is refused and
	 * writes nothing; a batch of f is accepted. */
	for (uint32_t f = 1; f < E; f++) {
		for (uint32_t i = 0; i < E - f; i++) {
			struct fs_rec r = seq_rec(in++);
			cr_assert_eq(fs_ring_post(&p, &r), 0);
		}
		for (uint32_t i = 0; i < f + 1; i++)
			b[i] = seq_rec(in + i);
		memcpy(snap, mem, sz);
		cr_assert_eq(fs_ring_post_batch(&p, b, f + 1), -ENOBUFS, "free %u", f);
		cr_assert(memcmp(snap, mem, sz) == 0, "refused batch wrote (free %u)", f);
		cr_assert_eq(fs_ring_post_batch(&p, b, f), 0, "free %u", f);
		in += f;
		cr_assert_eq(fs_ring_post(&p, b), -ENOBUFS);
		drain_expect(&c, &out, (uint32_t)(in - out));
	}
	free(snap);
	free(mem);
}

/* The post with any prefetch distance (fs_ring_post_ahead(): 0, none, to
 * far past the ring), the batch post and the bulk consume with any `max`
 * deliver every record once, in order, across the array's wrap: a
 * prefetch is a hint that never reads or writes a record. */
Test(basic, prefetch_distances_change_nothing)
{
	const uint32_t E = 16;
	const uint32_t aheads[] = {0, 1, 4, FS_RING_AHEAD, 1u << 20};
	void *mem = ring_alloc(E);
	size_t sz = fs_ring_bytes(E);
	struct fs_ring_cons c;
	struct fs_ring_prod p;
	cr_assert_eq(fs_ring_format(&c, mem, sz, E), 0);
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), 0);
	uint64_t in = 0, out = 0, seed = 7;
	struct fs_rec got[E];
	while (in < 20000) {
		uint32_t n = 1 + (uint32_t)(rnd(&seed) % E);
		for (uint32_t i = 0; i < n; i++) {
			struct fs_rec r = seq_rec(in);
			int rc = fs_ring_post_ahead(&p, &r, aheads[rnd(&seed) % 5]);
			if (in - out == E) {
				cr_assert_eq(rc, -ENOBUFS, "full ring took a record");
				break;
			}
			cr_assert_eq(rc, 0);
			in++;
		}
		uint32_t max = 1 + (uint32_t)(rnd(&seed) % E);
		uint32_t k = fs_ring_consume(&c, got, max);
		cr_assert_eq(k, (uint32_t)(in - out) < max ? (uint32_t)(in - out) : max);
		for (uint32_t i = 0; i < k; i++, out++)
			cr_assert(seq_rec_ok(&got[i]) && rec_seq(&got[i]) == out, "record %llu",
				  (unsigned long long)out);
	}
	cr_assert_eq(c.bad_record, 0);
	cr_assert_eq(c.bad_index, 0);
	free(mem);
}

/* The producer's prefetch hook: while `pf.p` is set (one thread, no other
 * test running), check that each line asked for lies wholly in that
 * producer's free space as its cached view has it: slots whose next
 * position from tail comes before head_cache + entries. */
static struct pf_watch {
	const struct fs_ring_prod *p; /* the producer watched (NULL: none) */
	uint64_t seen, bad;
	uint32_t bad_tail, bad_head, bad_slot; /* the first bad one */
} pf;

static void prefetch_seen(const void *a)
{
	const struct fs_ring_prod *p = pf.p;
	if (!p)
		return;
	uint32_t entries = p->mask + 1, free_n = p->head_cache + entries - p->tail;
	uintptr_t off = (uintptr_t)a - (uintptr_t)p->recs;
	pf.seen++;
	int bad = off % sizeof(struct fs_rec) != 0 || off / sizeof(struct fs_rec) >= entries ||
		  free_n > entries;
	uint32_t first = (uint32_t)(off / sizeof(struct fs_rec)) & ~(FS_RING_RECS_PER_LINE - 1);
	for (uint32_t k = 0; !bad && k < FS_RING_RECS_PER_LINE; k++)
		bad = ((first + k - p->tail) & p->mask) >= free_n;
	if (bad && !pf.bad++) {
		pf.bad_tail = p->tail;
		pf.bad_head = p->head_cache;
		pf.bad_slot = (uint32_t)(off / sizeof(struct fs_rec));
	}
}

/* The write prefetch asks only for lines the consumer is done with: all
 * FS_RING_RECS_PER_LINE records of the line free, not only the one
 * `ahead` records on (a line holding a record yet to be read would be
 * taken from the consumer's cache while it reads it). */
Test(basic, prefetch_only_free_lines)
{
	/* The condition itself, at its edges (a line is 4 records). */
	cr_assert_eq(FS_RING_RECS_PER_LINE, 4u);
	cr_assert(fs_ring_line_free(0, 68, 64), "line 64..67 in [0, 68)");
	cr_assert(!fs_ring_line_free(0, 67, 64), "record 67 is not free");
	cr_assert(!fs_ring_line_free(0, 65, 64), "record 64 free, 65..67 not");
	cr_assert(fs_ring_line_free(0, 4, 1), "line 0..3 in [0, 4)");
	cr_assert(!fs_ring_line_free(0, 3, 1));
	cr_assert(!fs_ring_line_free(5, 16, 6), "line 4..7 starts before tail 5");
	cr_assert(fs_ring_line_free(5, 16, 8));
	cr_assert(fs_ring_line_free(0xfffffffcu, 8, 0), "across 2^32");
	cr_assert(!fs_ring_line_free(0xfffffffcu, 7, 0));
	cr_assert(!fs_ring_line_free(0, 0, 0));

	/* A producer and a consumer at random paces, small rings so that
	 * the free space often ends inside the line `ahead` on; the hook
	 * checks every line asked for.  Single posts at distances that are
	 * and are not whole lines (16 entries), then batches (their distance
	 * is FS_RING_AHEAD: a ring with room past it). */
	const uint32_t aheads[] = {1, 2, 3, 4, 5, 8, 12};
	for (int batch = 0; batch < 2; batch++) {
		const uint32_t E = batch ? 2 * FS_RING_AHEAD : 16;
		void *mem = ring_alloc(E);
		size_t sz = fs_ring_bytes(E);
		struct fs_ring_cons c;
		struct fs_ring_prod p;
		struct fs_rec b[2 * FS_RING_AHEAD];
		cr_assert_eq(fs_ring_format(&c, mem, sz, E), 0);
		cr_assert_eq(fs_ring_prod_init(&p, mem, sz), 0);
		uint64_t in = 0, out = 0, seed = 11 + (uint64_t)batch;
		pf = (struct pf_watch){.p = &p};
		while (in < 100000) {
			uint32_t n = 1 + (uint32_t)(rnd(&seed) % (batch ? 24 : 8));
			for (uint32_t i = 0; i < n; i++)
				b[i] = seq_rec(in + i);
			if (batch) {
				if (fs_ring_post_batch(&p, b, n) == 0)
					in += n;
			} else {
				for (uint32_t i = 0;
				     i < n && fs_ring_post_ahead(&p, &b[i], aheads[rnd(&seed) % 7]) == 0; i++)
					in++;
			}
			drain_expect(&c, &out, (uint32_t)(rnd(&seed) % (in - out + 1)));
		}
		pf.p = NULL;
		cr_log_info("prefetch (%s): %llu lines asked for, %llu not free", batch ? "batch" : "single",
			    (unsigned long long)pf.seen, (unsigned long long)pf.bad);
		cr_assert(pf.seen > 1000, "only %llu prefetches: the test sees nothing",
			  (unsigned long long)pf.seen);
		cr_assert_eq(
			pf.bad, 0,
			"%llu prefetches (%s) of lines not free; first: slot %u with tail %u, head (cached) %u",
			(unsigned long long)pf.bad, batch ? "batch" : "single", pf.bad_slot, pf.bad_tail,
			pf.bad_head);
		free(mem);
	}
}

/* Counters start just below 2^32: records must survive the wrap of the
 * free-running u32 counters and of the array index, including batches
 * that straddle the end of the array. */
Test(basic, wraps_free_running_counters)
{
	const uint32_t E = 64;
	void *mem = ring_alloc(E);
	size_t sz = fs_ring_bytes(E);
	struct fs_ring_cons c;
	struct fs_ring_prod p;
	struct fs_ring_hdr *h = mem;
	const uint32_t start = 0xfffffff0u;
	cr_assert_eq(fs_ring_format(&c, mem, sz, E), 0);
	h->tail = start;
	h->head = start;
	c.head = start;
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), 0);
	cr_assert_eq(p.tail, start, "producer resumes at the ring's tail");
	cr_assert_eq(p.head_cache, start);

	uint64_t in = 0, out = 0, seed = 42;
	struct fs_rec b[64];
	int straddled = 0, wrapped_full = 0;
	/* Full ring right across the 2^32 boundary. */
	for (uint32_t i = 0; i < E; i++)
		b[i] = seq_rec(in + i);
	cr_assert_eq(fs_ring_post_batch(&p, b, E), 0);
	in += E;
	cr_assert_eq(h->tail, start + E);
	cr_assert(h->tail < h->head, "tail wrapped past 2^32");
	struct fs_rec r = seq_rec(123);
	cr_assert_eq(fs_ring_post(&p, &r), -ENOBUFS, "full across the wrap");
	wrapped_full = 1;
	drain_expect(&c, &out, 17);
	/* Then several thousand random batches and single posts. */
	while (in < 200000) {
		uint32_t n = 1 + (uint32_t)(rnd(&seed) % E);
		uint32_t space = E - (uint32_t)(in - out);
		if (n <= space) {
			for (uint32_t i = 0; i < n; i++)
				b[i] = seq_rec(in + i);
			uint32_t idx = p.tail & p.mask;
			if (rnd(&seed) & 1) {
				cr_assert_eq(fs_ring_post_batch(&p, b, n), 0);
			} else {
				for (uint32_t i = 0; i < n; i++)
					cr_assert_eq(fs_ring_post(&p, &b[i]), 0);
			}
			if (idx + n > E)
				straddled++;
			in += n;
		} else {
			cr_assert_eq(fs_ring_post_batch(&p, b, n), -ENOBUFS);
		}
		uint32_t take = (uint32_t)(rnd(&seed) % (in - out + 1));
		drain_expect(&c, &out, take);
		cr_assert_eq(h->head, c.head);
		cr_assert_eq(h->tail, p.tail);
	}
	drain_expect(&c, &out, (uint32_t)(in - out));
	cr_assert(wrapped_full);
	cr_assert(straddled > 100, "only %d batches straddled the end", straddled);
	cr_assert_eq(c.bad_index, 0);
	cr_assert_eq(c.bad_record, 0);
	cr_assert_eq(c.head, (uint32_t)(start + in));
	free(mem);
}

/* ---- hostile input, one process ---------------------------------------------- */

Test(hostile, impossible_tail_resyncs)
{
	const uint32_t E = 16;
	void *mem = ring_alloc(E);
	size_t sz = fs_ring_bytes(E);
	struct fs_ring_cons c;
	struct fs_ring_prod p;
	struct fs_ring_hdr *h = mem;
	struct fs_rec out[32];
	uint64_t in = 0, outseq = 0;
	cr_assert_eq(fs_ring_format(&c, mem, sz, E), 0);
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), 0);
	for (int i = 0; i < 3; i++) {
		struct fs_rec r = seq_rec(in++);
		cr_assert_eq(fs_ring_post(&p, &r), 0);
	}
	drain_expect(&c, &outseq, 3);

	/* tail == head + entries is a full ring, not an error: the consumer
	 * reads the whole array again (the 3 old records come out again, the
	 * never-written zeroed ones are bad and skipped). */
	h->tail = c.head + E;
	cr_assert_eq(fs_ring_pending(&c), E);
	cr_assert_eq(fs_ring_consume(&c, out, 32), 3);
	for (uint32_t i = 0; i < 3; i++)
		cr_assert_eq(rec_seq(&out[i]), i);
	cr_assert_eq(c.bad_index, 0);
	cr_assert_eq(c.bad_record, E - 3);
	uint64_t bad_rec = c.bad_record;

	/* One past that, far ahead, and behind head: all impossible. */
	const uint32_t deltas[] = {E + 1, 1000000, 0x80000000u, 0xffffffffu /* head - 1 */};
	for (size_t i = 0; i < sizeof(deltas) / sizeof(deltas[0]); i++) {
		uint32_t bogus = c.head + deltas[i];
		h->tail = bogus;
		cr_assert_eq(fs_ring_pending(&c), 1, "insane tail reported as pending (to be counted)");
		cr_assert_eq(fs_ring_consume(&c, out, 32), 0, "delta %u", deltas[i]);
		cr_assert_eq(c.bad_index, i + 1);
		cr_assert_eq(c.head, bogus, "resynchronised to the tail");
		cr_assert_eq(h->head, bogus, "resync published");
		cr_assert_eq(fs_ring_pending(&c), 0);
		cr_assert_eq(fs_ring_consume(&c, out, 32), 0);
		cr_assert_eq(c.bad_index, i + 1, "counted once");
		cr_assert_eq(c.bad_record, bad_rec, "no record was read");
	}

	/* A producer that (re)attaches now starts from the resynchronised
	 * point and its records flow again, none lost. */
	struct fs_ring_prod p2;
	cr_assert_eq(fs_ring_prod_init(&p2, mem, sz), 0);
	for (int k = 0; k < 5 * (int)E; k++) {
		struct fs_rec r = seq_rec(in);
		cr_assert_eq(fs_ring_post(&p2, &r), 0);
		in++;
		outseq = in - 1;
		drain_expect(&c, &outseq, 1);
	}
	cr_assert_eq(c.bad_index, 4);

	/* The old producer kept its own (now stale) tail.  Its next post looks
	 * impossible to the consumer (counted, resynchronised, that record is
	 * lost); after that its records flow again. */
	struct fs_rec r0 = seq_rec(in++);
	cr_assert_eq(fs_ring_post(&p, &r0), 0);
	cr_assert_eq(fs_ring_consume(&c, out, 32), 0);
	cr_assert_eq(c.bad_index, 5);
	for (int k = 0; k < 40; k++) {
		struct fs_rec r = seq_rec(in);
		cr_assert_eq(fs_ring_post(&p, &r), 0, "stale producer could not post after resync");
		in++;
		outseq = in - 1;
		drain_expect(&c, &outseq, 1);
	}
	cr_assert_eq(c.bad_index, 5);
	free(mem);
}

Test(hostile, bad_records_are_skipped)
{
	const uint32_t E = 64;
	void *mem = ring_alloc(E);
	size_t sz = fs_ring_bytes(E);
	struct fs_ring_cons c;
	struct fs_ring_prod p;
	cr_assert_eq(fs_ring_format(&c, mem, sz, E), 0);
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), 0);
	/* The producer posts whatever it is given: bad records reach the ring. */
	const struct fs_rec bad[] = {
		{.type = 0},
		{.type = 99},
		{.type = 5},
		{.type = 0xff, .aux = 0},
		{.type = FS_REC_PREDICT, .aux = FS_PRED_AUX(0, FS_SRC_HOST)}, /* horizon 0 */
		{.type = FS_REC_PREDICT, .aux = FS_PRED_AUX(1, 3)},           /* source 3 */
		{.type = FS_REC_PREDICT, .aux = FS_PRED_AUX(15, 15)},         /* source 15 */
		{.type = FS_REC_PREDICT, .aux = 0},                           /* both */
		{.type = FS_REC_USAGE, .aux = 2},
		{.type = FS_REC_USAGE, .aux = 0xff},
		{.type = FS_REC_WIN_BEGIN, .aux = 1},
		{.type = FS_REC_WIN_BEGIN, .aux = 0x80},
		{.type = FS_REC_WIN_END, .aux = 1},
		{.type = FS_REC_WIN_END, .aux = 0x10},
	};
	const uint32_t n_bad = sizeof(bad) / sizeof(bad[0]);
	const struct fs_rec good[] = {
		{.type = FS_REC_PREDICT, .aux = FS_PRED_AUX(1, FS_SRC_ROUTER_AHEAD), .window = 1},
		{.type = FS_REC_PREDICT, .aux = FS_PRED_AUX(15, FS_SRC_KERNEL), .window = 2},
		{.type = FS_REC_USAGE, .aux = FS_USE_MISS, .window = 3},
		{.type = FS_REC_USAGE, .aux = FS_USE_HIT, .window = 4},
		{.type = FS_REC_WIN_BEGIN, .window = 5, .value = 7},
		{.type = FS_REC_WIN_END, .window = 6},
	};
	const uint32_t n_good = sizeof(good) / sizeof(good[0]);
	/* good, bad, good, bad, ... with the bad ones in runs of 1..3. */
	struct fs_rec seqn[64];
	uint32_t n = 0, gi = 0, bi = 0;
	while (bi < n_bad || gi < n_good) {
		if (gi < n_good)
			seqn[n++] = good[gi++];
		for (uint32_t k = 0; k < 1 + (bi % 3) && bi < n_bad; k++)
			seqn[n++] = bad[bi++];
	}
	for (uint32_t i = 0; i < n; i++)
		cr_assert(rec_ok_reference(&seqn[i]) == fs_rec_valid(&seqn[i]),
			  "fs_rec_valid disagrees, rec %u", i);
	cr_assert_eq(fs_ring_post_batch(&p, seqn, n), 0);
	struct fs_rec out[64];
	uint32_t got = 0;
	/* Small max: the skipped records still count against it. */
	for (int it = 0; it < 100 && c.consumed < n; it++) {
		uint32_t k = fs_ring_consume(&c, out + got, 3);
		cr_assert(k <= 3);
		got += k;
	}
	cr_assert_eq(c.consumed, n);
	cr_assert_eq(got, n_good, "valid records delivered");
	cr_assert_eq(c.bad_record, n_bad);
	cr_assert_eq(c.bad_index, 0);
	for (uint32_t i = 0; i < n_good; i++)
		cr_assert(memcmp(&out[i], &good[i], sizeof(out[i])) == 0,
			  "good record %u changed or reordered", i);
	free(mem);
}

/* fs_rec_valid over every (type, aux): the counts of valid aux values per
 * type come from fs_proto.h's definitions, not from fs_rec_valid. */
Test(hostile, rec_valid_exhaustive)
{
	for (unsigned t = 0; t < 256; t++) {
		unsigned valid = 0;
		for (unsigned a = 0; a < 256; a++) {
			struct fs_rec r = {.type = (uint8_t)t, .aux = (uint8_t)a};
			cr_assert_eq(!!fs_rec_valid(&r), rec_ok_reference(&r), "type %u aux %u", t, a);
			valid += !!fs_rec_valid(&r);
		}
		unsigned want = t == FS_REC_PREDICT ? FS_PRED_HORIZON_MAX * (FS_SRC_MAX + 1) :
				t == FS_REC_USAGE   ? 2 :
				(t == FS_REC_WIN_BEGIN || t == FS_REC_WIN_END) ? 1 :
										 0;
		cr_assert_eq(valid, want, "type %u: %u valid aux values", t, valid);
	}
}

Test(hostile, consumer_ignores_rewritten_header)
{
	const uint32_t E = 32;
	void *mem = ring_alloc(E);
	size_t sz = fs_ring_bytes(E);
	struct fs_ring_cons c;
	struct fs_ring_prod p;
	struct fs_ring_hdr *h = mem;
	cr_assert_eq(fs_ring_format(&c, mem, sz, E), 0);
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), 0);
	/* Whatever line 0 says after format, the consumer keeps its own copy. */
	h->entries = 0xffffffffu;
	h->magic = 0;
	h->rec_offset = 0;
	h->rec_size = 1;
	uint64_t in = 0, out = 0;
	for (int lap = 0; lap < 4; lap++) {
		for (uint32_t i = 0; i < E; i++) {
			struct fs_rec r = seq_rec(in++);
			cr_assert_eq(fs_ring_post(&p, &r), 0);
		}
		cr_assert_eq(fs_ring_pending(&c), E);
		drain_expect(&c, &out, E);
	}
	/* A tail one past the real size is still impossible (with entries read
	 * from the ring it would look fine). */
	h->tail = c.head + E + 1;
	struct fs_rec buf[64];
	cr_assert_eq(fs_ring_consume(&c, buf, 64), 0);
	cr_assert_eq(c.bad_index, 1);
	cr_assert_eq(c.entries, E);
	cr_assert_eq(c.mask, E - 1);
	/* A new producer refuses the rewritten header. */
	struct fs_ring_prod p2;
	cr_assert_neq(fs_ring_prod_init(&p2, mem, sz), 0);
	free(mem);
}

/* A consumer writing nonsense into head (ahead of the producer's tail, or
 * absurdly far behind) must neither make the producer write outside the
 * ring nor block it: once it re-reads head it sees a full ring. */
Test(hostile, producer_survives_bad_head)
{
	const uint32_t E = 16;
	void *mem = ring_alloc(E + 16); /* guard records after the ring */
	size_t sz = fs_ring_bytes(E);
	struct fs_ring_cons c;
	struct fs_ring_prod p;
	struct fs_ring_hdr *h = mem;
	cr_assert_eq(fs_ring_format(&c, mem, sz, E), 0);
	cr_assert_eq(fs_ring_prod_init(&p, mem, sz), 0);
	unsigned char *guard = (unsigned char *)mem + sz;
	memset(guard, 0x5a, 16 * sizeof(struct fs_rec));
	const uint32_t ahead[] = {1, 5, E + 1, 0x80000000u, 0xfffffff0u};
	struct fs_rec b[E];
	for (uint32_t k = 0; k < E; k++)
		b[k] = seq_rec(k);
	for (size_t i = 0; i < sizeof(ahead) / sizeof(ahead[0]); i++) {
		/* Start from an empty ring as the producer sees it. */
		h->head = p.tail;
		cr_assert_eq(fs_ring_prod_init(&p, mem, sz), 0);
		h->head = p.tail + ahead[i]; /* head ahead of tail: impossible */
		uint32_t ok = 0;
		for (uint32_t k = 0; k < 3 * E; k++)
			ok += fs_ring_post(&p, &b[k % E]) == 0;
		/* It may fill what its cached head allowed (E); a head a little
		 * ahead becomes plausible once the producer passed it. */
		uint32_t want = ahead[i] <= E ? E + ahead[i] : E;
		cr_assert_eq(ok, want, "producer accepted %u records with head %u ahead", ok, ahead[i]);
		cr_assert_eq(fs_ring_post(&p, b), -ENOBUFS);
		cr_assert_eq(fs_ring_post_batch(&p, b, 1), -ENOBUFS);
		for (size_t g = 0; g < 16 * sizeof(struct fs_rec); g++)
			cr_assert_eq(guard[g], 0x5a, "producer wrote past the ring");
		/* An honest head again: the producer goes on. */
		h->head = p.tail;
		cr_assert_eq(fs_ring_post_batch(&p, b, E), 0);
		cr_assert_eq(fs_ring_post(&p, b), -ENOBUFS);
	}
	free(mem);
}

/* ---- two processes ------------------------------------------------------------ */

struct shm_ring {
	int fd;
	void *mem;
	size_t bytes;
};

static void shm_ring_create(struct shm_ring *s, uint32_t entries)
{
	s->bytes = fs_ring_bytes(entries);
	s->fd = memfd_create("fs_ring_test", MFD_CLOEXEC);
	cr_assert(s->fd >= 0, "memfd_create: %s", strerror(errno));
	cr_assert_eq(ftruncate(s->fd, (off_t)s->bytes), 0);
	s->mem = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	cr_assert(s->mem != MAP_FAILED);
}

static void shm_ring_destroy(struct shm_ring *s)
{
	munmap(s->mem, s->bytes);
	close(s->fd);
}

/* First thing a forked child does: die with the test (a failed or timed
 * out test never leaves a spinning child behind). */
static void child_setup(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(90);
}

/* Reap the child within timeout_ns (killing it after that); its status. */
static int reap(pid_t pid, uint64_t timeout_ns)
{
	int st = 0;
	uint64_t dl = now_ns() + timeout_ns;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return st;
		if (r < 0)
			return -1;
		if (now_ns() > dl) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -2;
		}
		usleep(1000);
	}
}

#define IPC_RECORDS 10000000ull
#define IPC_DEADLINE_NS (45 * NS_PER_S)

/* What the producer child tells the consumer, in a shared page. */
struct ipc_shared {
	uint64_t posted; /* records whose post returned (release), for lost_wakeup() */
	uint64_t forced; /* posts made to a consumer parked in its futex wait */
	pid_t cons_pid, cons_tid;
};

/* Producer child: map the ring again (at another address), attach, post
 * n sequenced records, one at a time or in batches of 2..64.  In the second
 * half, every n / 32 records, it waits until the consumer (which sleeps on
 * the futex in that half) is parked, then posts: the sleep path runs 16
 * times whatever the relative speeds (a fast producer kept the ring full
 * and the sleep path unexercised in one CI run; a 2 ms pause only made
 * that unlikely). */
static int ipc_producer(int fd, size_t bytes, uint64_t n, struct ipc_shared *sh)
{
	void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return 10;
	struct fs_ring_prod p;
	if (fs_ring_prod_init(&p, m, bytes) != 0)
		return 11;
	uint64_t seed = 0x9e3779b97f4a7c15ull, seq = 0, dl = now_ns() + IPC_DEADLINE_NS;
	uint64_t pause_at = n / 2 + n / 64;
	uint32_t spins = 0;
	struct fs_rec b[64];
	struct fs_ring_hdr *hdr = m;
	while (seq < n) {
		if (seq >= pause_at) {
			int rc = wait_parked(&hdr, 1, sh->cons_pid, sh->cons_tid, NULL, dl);
			if (rc <= 0)
				return rc < 0 ? 14 : 12;
			sh->forced++;
			pause_at += n / 32;
		}
		uint64_t x = rnd(&seed);
		uint32_t k = (x & 31) == 0 ? 2 + (uint32_t)((x >> 8) % 63) :
					     1; /* ~half the records batched */
		if (k > n - seq)
			k = (uint32_t)(n - seq);
		for (uint32_t i = 0; i < k; i++)
			b[i] = seq_rec(seq + i);
		int rc;
		while ((rc = k == 1 ? fs_ring_post(&p, b) : fs_ring_post_batch(&p, b, k)) == -ENOBUFS) {
			sched_yield();
			if ((++spins & 1023) == 0 && now_ns() > dl)
				return 12;
		}
		if (rc != 0)
			return 13;
		seq += k;
		__atomic_store_n(&sh->posted, seq, __ATOMIC_RELEASE);
	}
	munmap(m, bytes);
	return 0;
}

Test(ipc, ten_million_in_order, .timeout = 120)
{
	const uint32_t E = 4096;
	const uint64_t N = IPC_RECORDS;
	struct shm_ring s;
	struct fs_ring_cons c;
	shm_ring_create(&s, E);
	cr_assert_eq(fs_ring_format(&c, s.mem, s.bytes, E), 0);
	struct ipc_shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
				     -1, 0);
	cr_assert(sh != MAP_FAILED);
	*sh = (struct ipc_shared){.cons_pid = getpid(), .cons_tid = my_tid()};
	pid_t parent = getpid();
	fflush(NULL);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		child_setup(parent);
		_exit(ipc_producer(s.fd, s.bytes, N, sh));
	}
	/* First half: the consumer spins (yielding when empty).  Second half:
	 * it sleeps on the futex whenever the ring is empty. */
	struct fs_rec out[256];
	uint64_t next = 0, seed = 7, dl = now_ns() + IPC_DEADLINE_NS;
	uint64_t bad_order = 0, torn = 0, sleeps = 0, timeouts_pending = 0, empties = 0;
	int late = 0;
	while (next < N) {
		uint32_t max = 1 + (uint32_t)(rnd(&seed) % 256);
		uint32_t n = fs_ring_consume(&c, out, max);
		for (uint32_t i = 0; i < n; i++) {
			torn += !seq_rec_ok(&out[i]);
			if (rec_seq(&out[i]) != next + i)
				bad_order++;
		}
		if (bad_order || torn)
			break;
		next += n;
		if (n)
			continue;
		if ((++empties & 255) == 0 && now_ns() > dl) {
			late = 1;
			break;
		}
		if (next < N / 2) {
			sched_yield();
			continue;
		}
		uint32_t seq;
		if (fs_ring_sleep_prepare(&c, &seq))
			continue;
		sleeps++;
		int rc = fs_futex_wait(&c.hdr->wake_seq, seq, NS_PER_S);
		fs_ring_sleep_done(&c);
		if (rc == -ETIMEDOUT && lost_wakeup(&sh->posted, next, &c.hdr->wake_seq, seq)) {
			timeouts_pending++;
			break; /* fail fast */
		}
		if (now_ns() > dl) {
			late = 1;
			break;
		}
	}
	if (next < N)
		kill(pid, SIGKILL);
	int st = reap(pid, 10 * NS_PER_S);
	cr_assert_eq(bad_order, 0, "records out of order (at %llu)", (unsigned long long)next);
	cr_assert_eq(torn, 0, "torn records");
	cr_assert_eq(timeouts_pending, 0, "lost wake-up (a 1 s wait timed out on a post that never woke it)");
	cr_assert(!late, "deadline: only %llu of %llu records in %llu s", (unsigned long long)next,
		  (unsigned long long)N, IPC_DEADLINE_NS / NS_PER_S);
	cr_assert_eq(next, N);
	cr_assert(!WIFEXITED(st) || WEXITSTATUS(st) != 14,
		  "the producer could not read the consumer's /proc");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "producer status 0x%x", st);
	cr_assert_eq(c.consumed, N, "nothing extra (no duplicates)");
	cr_assert_eq(c.bad_index + c.bad_record, 0);
	cr_assert_eq(fs_ring_pending(&c), 0);
	/* 16 posts met the consumer parked (the child's exit 0 says it waited
	 * for each), so the sleep path ran and each of those posts woke it. */
	cr_assert_eq(sh->forced, 16, "%llu posts to a parked consumer", (unsigned long long)sh->forced);
	cr_assert(sleeps >= sh->forced, "%llu sleeps", (unsigned long long)sleeps);
	munmap(sh, sizeof(*sh));
	shm_ring_destroy(&s);
}

/* Hostile child: for `ns`, write random tails, random record bytes, random
 * flags / wake_seq and random header words; some honest-looking records and
 * tails in between so that valid records do reach the consumer. */
static void hostile_writer(void *mem, uint32_t entries, uint64_t ns)
{
	struct fs_ring_hdr *h = mem;
	struct fs_rec *recs = (struct fs_rec *)((char *)mem + FS_RING_REC_OFFSET);
	uint64_t seed = 0xdeadbeefcafef00dull ^ (uint64_t)getpid(), end = now_ns() + ns;
	uint32_t it = 0;
	while ((++it & 63) || now_ns() < end) {
		uint64_t x = rnd(&seed);
		uint32_t head = __atomic_load_n(&h->head, __ATOMIC_RELAXED);
		switch (x % 10) {
		case 0: /* anything */
			__atomic_store_n(&h->tail, (uint32_t)(x >> 32), __ATOMIC_RELEASE);
			break;
		case 1: /* near head: sometimes possible, sometimes not */
			__atomic_store_n(&h->tail, head + (uint32_t)((x >> 16) % (2 * entries + 2)),
					 __ATOMIC_RELEASE);
			break;
		case 2: /* behind head */
			__atomic_store_n(&h->tail, head - 1 - (uint32_t)((x >> 16) % 64), __ATOMIC_RELEASE);
			break;
		case 3:
		case 4: /* random bytes over random records */
			for (int k = 0; k < 8; k++) {
				uint64_t y = rnd(&seed), z = rnd(&seed);
				struct fs_rec *r = &recs[(y >> 40) % entries];
				memcpy(r, &z, 8);
				memcpy((char *)r + 8, &y, 8);
			}
			break;
		case 5: /* valid records, then a plausible tail */
			for (uint32_t k = 0; k < 8; k++) {
				struct fs_rec v = seq_rec(x + k);
				recs[(head + k) & (entries - 1)] = v;
			}
			__atomic_store_n(&h->tail, head + 1 + (uint32_t)((x >> 20) % 8), __ATOMIC_RELEASE);
			break;
		case 6: /* single bytes: type / aux fuzz */
			((unsigned char *)&recs[(x >> 24) % entries])[(x >> 8) % 2] = (unsigned char)(x >>
												      48);
			break;
		case 7:
			__atomic_store_n(&h->flags, (uint32_t)(x >> 32), __ATOMIC_RELAXED);
			break;
		case 8:
			__atomic_store_n(&h->wake_seq, (uint32_t)(x >> 32), __ATOMIC_RELAXED);
			if (x & 1)
				fs_futex_wake(&h->wake_seq, 1);
			break;
		case 9: /* line 0 */
			__atomic_store_n(&h->entries, (uint32_t)(x >> 32), __ATOMIC_RELAXED);
			__atomic_store_n(&h->magic, (uint32_t)x, __ATOMIC_RELAXED);
			break;
		}
	}
}

#define HOSTILE_NS (NS_PER_S * 11 / 10)

Test(ipc, hostile_writer_process, .timeout = 60)
{
	const uint32_t E = 256;
	struct shm_ring s;
	struct fs_ring_cons c;
	shm_ring_create(&s, E);
	cr_assert_eq(fs_ring_format(&c, s.mem, s.bytes, E), 0);
	const struct fs_ring_hdr *hdr0 = c.hdr;
	const struct fs_rec *recs0 = c.recs;
	pid_t parent = getpid();
	fflush(NULL);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		child_setup(parent);
		hostile_writer(s.mem, E, 40 * NS_PER_S); /* killed when the parent is done */
		_exit(0);
	}
	uint64_t seed = 99, calls = 0, returned = 0, sleeps = 0;
	uint64_t too_many = 0, invalid = 0, accounting = 0, drift = 0, head_mismatch = 0, slow_sleep = 0;
	uint64_t end = now_ns() + HOSTILE_NS, hard_end = now_ns() + 30 * NS_PER_S;
	struct fs_rec out[64];
	/* HOSTILE_NS, and longer on a loaded machine until every kind of
	 * hostility was seen (each process may get little CPU there). */
	while (now_ns() < end ||
	       (now_ns() < hard_end && (calls <= 1000 || !c.bad_index || !c.bad_record || !returned))) {
		for (int k = 0; k < 256; k++) {
			uint32_t max = 1 + (uint32_t)(rnd(&seed) % 64);
			uint64_t cons0 = c.consumed, bad0 = c.bad_record, idx0 = c.bad_index;
			memset(out, 0, sizeof(out));
			uint32_t n = fs_ring_consume(&c, out, max);
			calls++;
			returned += n;
			too_many += n > max;
			for (uint32_t i = 0; i < n && i < 64; i++)
				invalid += !fs_rec_valid(&out[i]) || !rec_ok_reference(&out[i]);
			/* Each examined record was either returned or counted bad; an
			 * impossible tail reads none. */
			uint64_t dc = c.consumed - cons0, db = c.bad_record - bad0, di = c.bad_index - idx0;
			if (dc != n + db || dc > max || dc > E || di > 1 || (di && dc))
				accounting++;
			drift += c.entries != E || c.mask != E - 1 || c.hdr != hdr0 || c.recs != recs0;
			head_mismatch += __atomic_load_n(&c.hdr->head, __ATOMIC_RELAXED) != c.head;
			drift += fs_ring_pending(&c) > E;
		}
		/* A sleep with a hostile wake_seq / flags: bounded by its timeout. */
		uint32_t seq;
		uint64_t t0 = now_ns();
		if (!fs_ring_sleep_prepare(&c, &seq)) {
			fs_futex_wait(&c.hdr->wake_seq, seq, 1000000);
			fs_ring_sleep_done(&c);
			sleeps++;
		}
		/* A hang, not a slow wake-up: the futex timeout is 1 ms, but on a
		 * loaded 2-CPU machine (ctest -j2 beside other builds) this
		 * process waited > 0.5 s for a CPU once; 5 s only a lost
		 * timeout reaches. */
		slow_sleep += now_ns() - t0 > 5000000000ull;
	}
	kill(pid, SIGKILL);
	int st = reap(pid, 10 * NS_PER_S);
	cr_assert(WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) == 0), "writer status 0x%x", st);
	cr_assert_eq(too_many, 0, "consume returned more than max");
	cr_assert_eq(invalid, 0, "%llu invalid records returned", (unsigned long long)invalid);
	cr_assert_eq(accounting, 0, "%llu calls with inconsistent counters", (unsigned long long)accounting);
	cr_assert_eq(drift, 0, "the consumer's private state changed");
	cr_assert_eq(head_mismatch, 0, "published head differs from the consumer's");
	cr_assert_eq(slow_sleep, 0, "a bounded sleep took > 5 s");
	cr_assert(calls > 1000, "only %llu consume calls", (unsigned long long)calls);
	cr_assert(c.bad_index > 0, "no impossible tail seen");
	cr_assert(c.bad_record > 0, "no bad record seen");
	cr_assert(returned > 0, "no valid record got through");
	cr_log_info("hostile: %llu calls, %llu returned, bad_index %llu, bad_record %llu, %llu sleeps",
		    (unsigned long long)calls, (unsigned long long)returned, (unsigned long long)c.bad_index,
		    (unsigned long long)c.bad_record, (unsigned long long)sleeps);
	shm_ring_destroy(&s);
}

/* ---- wake-up handshake stress (threads) ------------------------------------------ */

#define WAKE_TIMEOUT_NS (2 * NS_PER_S)
#define WAKE_DEADLINE_NS (100 * NS_PER_S)

struct wake_ctx {
	struct fs_ring_cons c;
	struct fs_ring_prod p;
	uint64_t n;
	uint64_t deadline;
	/* consumer results */
	uint64_t received;
	uint64_t bad_order;
	uint64_t sleeps;
	uint64_t lost_wakeups; /* a wait timed out on a post that never bumped wake_seq */
	uint64_t woke_empty;   /* returned from a wait and found nothing: spurious */
	uint32_t stop;         /* either side gives up */
	uint32_t timed_out;
	pid_t tid;       /* the consumer thread's, for task_parked() */
	uint64_t posted; /* records whose fs_ring_post() returned (release) */
};

/* Every WAKE_FORCE_EVERY-th record the producer posts only once the
 * consumer is parked in its futex wait (wait_parked()): those posts must
 * wake it, whatever the scheduler did; the others race it freely. */
#define WAKE_FORCE_EVERY 16

static void *wake_consumer(void *arg)
{
	struct wake_ctx *w = arg;
	struct fs_rec out[64];
	uint64_t next = 0, seed = 0xc0ffee;
	__atomic_store_n(&w->tid, my_tid(), __ATOMIC_RELEASE);
	while (next < w->n && !__atomic_load_n(&w->stop, __ATOMIC_RELAXED)) {
		uint32_t n = fs_ring_consume(&w->c, out, 64);
		for (uint32_t i = 0; i < n; i++)
			w->bad_order += rec_seq(&out[i]) != next + i || !seq_rec_ok(&out[i]);
		next += n;
		if (n)
			continue;
		/* Always sleep when empty, sometimes after a short random delay
		 * (a daemon polls other rings first): a post landing between the
		 * empty poll and the sleep is what the handshake must catch. */
		uint64_t x = rnd(&seed);
		if (x & 1)
			for (uint32_t i = (uint32_t)((x >> 8) % 64); i; i--)
				cpu_relax();
		uint32_t seq;
		if (fs_ring_sleep_prepare(&w->c, &seq))
			continue;
		w->sleeps++;
		int rc;
		do
			rc = fs_futex_wait(&w->c.hdr->wake_seq, seq, WAKE_TIMEOUT_NS);
		while (rc == -EINTR);
		fs_ring_sleep_done(&w->c);
		if (rc == -ETIMEDOUT && lost_wakeup(&w->posted, next, &w->c.hdr->wake_seq, seq)) {
			w->lost_wakeups++;
			break; /* fail fast */
		} else if (rc == 0 && !fs_ring_pending(&w->c))
			w->woke_empty++;
		if (now_ns() > w->deadline) {
			__atomic_store_n(&w->timed_out, 1, __ATOMIC_RELAXED);
			break;
		}
	}
	w->received = next;
	__atomic_store_n(&w->stop, 1, __ATOMIC_RELAXED);
	return NULL;
}

/* Tiny random pause: nothing, a few pause instructions, or a yield. */
static void tiny_pause(uint64_t *seed)
{
	uint64_t x = rnd(seed);
	switch (x & 7) {
	case 0:
	case 1:
		break;
	case 2:
		sched_yield();
		break;
	default:
		for (uint32_t i = (uint32_t)((x >> 8) % 400); i; i--)
			cpu_relax();
		break;
	}
}

/* The consumer sleeps whenever the ring is empty; the producer waits until
 * each record was taken, so that its next post meets a consumer going to
 * sleep or asleep, and every WAKE_FORCE_EVERY-th record it posts only once
 * the consumer is provably parked: the wake-up path runs n / 16 times on
 * any scheduler (a count of sleeps was an assumption about one: a quiet
 * 2-core machine ran the two threads side by side and the consumer rarely
 * slept).  `asym`: the membarrier handshake (where available) or the
 * seq_cst one on both sides. */
static void handshake_stress_single_ring(int asym)
{
	const uint32_t E = 64;
	void *mem = ring_alloc(E);
	struct wake_ctx *w = calloc(1, sizeof(*w));
	cr_assert_not_null(w);
	cr_assert_eq(fs_ring_format(&w->c, mem, fs_ring_bytes(E), E), 0);
	fs_ring_set_asym(&w->c, asym);
	cr_assert_eq(fs_ring_prod_init(&w->p, mem, fs_ring_bytes(E)), 0);
	cr_assert_eq(w->p.asym, w->c.asym);
	w->n = 200000;
	w->deadline = now_ns() + WAKE_DEADLINE_NS;
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, wake_consumer, w), 0);
	uint64_t seed = 0xfeed, stalls = 0, forced = 0, forced_want = 0;
	int proc_unreadable = 0;
	pid_t tid;
	while (!(tid = __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE)))
		sched_yield();
	for (uint64_t i = 0; i < w->n && !__atomic_load_n(&w->stop, __ATOMIC_RELAXED); i++) {
		struct fs_rec r = seq_rec(i);
		if (i % WAKE_FORCE_EVERY == WAKE_FORCE_EVERY - 1) {
			forced_want++;
			int rc = wait_parked(&w->c.hdr, 1, getpid(), tid, &w->stop, w->deadline);
			if (rc <= 0) {
				proc_unreadable = rc < 0;
				__atomic_store_n(&w->stop, 1, __ATOMIC_RELAXED);
				break;
			}
			forced++;
		}
		while (fs_ring_post(&w->p, &r) == -ENOBUFS) {
			if (__atomic_load_n(&w->stop, __ATOMIC_RELAXED))
				break;
			sched_yield();
		}
		__atomic_store_n(&w->posted, i + 1, __ATOMIC_RELEASE);
		/* Mostly wait until the consumer took it (so that the next post
		 * finds it going to sleep or asleep: no later post can hide a lost
		 * wake-up); then a tiny random pause to vary the race. */
		if (rnd(&seed) % 8) {
			while (__atomic_load_n(&w->c.hdr->head, __ATOMIC_ACQUIRE) != w->p.tail) {
				if (__atomic_load_n(&w->stop, __ATOMIC_RELAXED))
					break;
				if (now_ns() > w->deadline) {
					stalls++;
					__atomic_store_n(&w->stop, 1, __ATOMIC_RELAXED);
					break;
				}
				sched_yield();
			}
		}
		tiny_pause(&seed);
	}
	pthread_join(th, NULL);
	cr_assert(!proc_unreadable, "/proc/self/task/%d/stat unreadable: cannot tell a parked consumer",
		  (int)tid);
	cr_assert(!w->timed_out, "deadline passed");
	cr_assert_eq(w->lost_wakeups, 0, "%llu lost wake-ups", (unsigned long long)w->lost_wakeups);
	cr_assert_eq(stalls, 0, "producer saw its record unconsumed until the deadline");
	cr_assert_eq(w->bad_order, 0);
	cr_assert_eq(w->received, w->n, "received %llu of %llu", (unsigned long long)w->received,
		     (unsigned long long)w->n);
	/* Every forced post met a parked consumer and was taken (received ==
	 * n), with no wait running out on a pending record (lost_wakeups). */
	cr_assert_eq(forced, w->n / WAKE_FORCE_EVERY, "%llu of %llu posts met a parked consumer",
		     (unsigned long long)forced, (unsigned long long)forced_want);
	cr_assert(w->sleeps >= forced, "%llu sleeps, %llu forced", (unsigned long long)w->sleeps,
		  (unsigned long long)forced);
	cr_log_info("wake (%s): %llu records, %llu sleeps (%llu forced), %llu spurious",
		    w->c.asym ? "membarrier" : "seq_cst", (unsigned long long)w->n,
		    (unsigned long long)w->sleeps, (unsigned long long)forced,
		    (unsigned long long)w->woke_empty);
	free(w);
	free(mem);
}

Test(wake, handshake_stress_single_ring, .timeout = 150)
{
	handshake_stress_single_ring(1);
}

Test(wake, handshake_stress_single_ring_seq_cst, .timeout = 150)
{
	handshake_stress_single_ring(0);
}

/* 8 rings, one consumer thread sleeping on all of them with futex_waitv,
 * two producer threads (each owns 4 rings: a ring has one producer)
 * posting to random rings of theirs.  Every WAKE_FORCE_EVERY-th record of
 * each producer is a forced one: that producer takes the turn (`forcing`),
 * waits until the other stands aside (or is done), until the consumer
 * parked on all 8 rings, then posts to one of its rings: a post to any one
 * ring must end the consumer's futex_waitv. */
#define NRINGS 8
#define NPROD 2

struct multi_ctx {
	struct fs_ring_cons c[NRINGS];
	struct fs_ring_prod p[NRINGS];
	void *mem[NRINGS];
	uint64_t per_prod;
	uint64_t deadline;
	uint64_t received;
	uint64_t bad_order;
	uint64_t sleeps;
	uint64_t lost_wakeups;
	uint64_t waitv_errors;
	uint64_t stalls[NPROD];
	uint64_t forced[NPROD];
	uint64_t posted[NRINGS]; /* per ring: records whose fs_ring_post() returned */
	uint32_t stop;
	uint32_t timed_out;
	uint32_t proc_unreadable;
	pid_t tid;             /* the consumer thread's */
	int forcing;           /* -1, or the producer whose forced post is under way */
	uint32_t aside[NPROD]; /* the producer posts nothing until `forcing` changes */
	uint32_t done[NPROD];  /* the producer posts nothing more */
};

struct prod_arg {
	struct multi_ctx *m;
	int id;
};

static void *multi_consumer(void *arg)
{
	struct multi_ctx *m = arg;
	uint64_t next[NRINGS] = {0}, total = 0, want = m->per_prod * NPROD, seed = 0xbadc0de;
	struct fs_rec out[64];
	uint32_t *words[NRINGS];
	uint32_t seqs[NRINGS];
	for (int i = 0; i < NRINGS; i++)
		words[i] = &m->c[i].hdr->wake_seq;
	__atomic_store_n(&m->tid, my_tid(), __ATOMIC_RELEASE);
	while (total < want) {
		uint32_t got = 0;
		for (int i = 0; i < NRINGS; i++) {
			uint32_t n = fs_ring_consume(&m->c[i], out, 64);
			for (uint32_t k = 0; k < n; k++)
				m->bad_order += rec_seq(&out[k]) != next[i] + k || !seq_rec_ok(&out[k]);
			next[i] += n;
			got += n;
		}
		total += got;
		if (got)
			continue;
		uint64_t x = rnd(&seed);
		if (x & 1)
			for (uint32_t i = (uint32_t)((x >> 8) % 64); i; i--)
				cpu_relax();
		/* As the daemon does: arm every ring, one barrier, then look. */
		int busy = 0, prepared = 0, asym = 0;
		for (; prepared < NRINGS; prepared++) {
			fs_ring_sleep_arm(&m->c[prepared], &seqs[prepared]);
			asym |= (int)m->c[prepared].asym;
		}
		busy = fs_ring_sleep_fence(asym);
		for (int i = 0; i < NRINGS && !busy; i++)
			busy = fs_ring_sleep_check(&m->c[i]);
		if (!busy) {
			m->sleeps++;
			int rc;
			do
				rc = fs_futex_waitv(words, seqs, NRINGS, WAKE_TIMEOUT_NS);
			while (rc == -EINTR);
			if (rc != 0 && rc != -ETIMEDOUT)
				m->waitv_errors++;
			for (int i = 0; i < NRINGS && rc == -ETIMEDOUT; i++)
				m->lost_wakeups += lost_wakeup(&m->posted[i], next[i], words[i], seqs[i]);
		}
		if (m->lost_wakeups)
			break; /* fail fast */
		for (int i = 0; i < prepared; i++)
			fs_ring_sleep_done(&m->c[i]);
		if (now_ns() > m->deadline || __atomic_load_n(&m->stop, __ATOMIC_RELAXED)) {
			__atomic_store_n(&m->timed_out, now_ns() > m->deadline, __ATOMIC_RELAXED);
			break;
		}
	}
	m->received = total;
	__atomic_store_n(&m->stop, 1, __ATOMIC_RELAXED);
	return NULL;
}

/* Posts nothing while the other producer's forced post is under way. */
static void stand_aside(struct multi_ctx *m, int id)
{
	__atomic_store_n(&m->aside[id], 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&m->forcing, __ATOMIC_SEQ_CST) == 1 - id &&
	       !__atomic_load_n(&m->stop, __ATOMIC_RELAXED))
		sched_yield();
	__atomic_store_n(&m->aside[id], 0, __ATOMIC_SEQ_CST);
}

/* Takes the turn, waits until the other producer posts nothing and the
 * consumer is parked on every ring: 1 then (the caller posts, then gives
 * the turn back with forcing = -1), 0 when the test stops first. */
static int force_turn(struct multi_ctx *m, int id)
{
	int none = -1;
	while (!__atomic_compare_exchange_n(&m->forcing, &none, id, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
		stand_aside(m, id);
		none = -1;
		if (__atomic_load_n(&m->stop, __ATOMIC_RELAXED))
			return 0;
	}
	while (!__atomic_load_n(&m->aside[1 - id], __ATOMIC_SEQ_CST) &&
	       !__atomic_load_n(&m->done[1 - id], __ATOMIC_SEQ_CST)) {
		if (__atomic_load_n(&m->stop, __ATOMIC_RELAXED) || now_ns() > m->deadline)
			return 0;
		sched_yield();
	}
	struct fs_ring_hdr *h[NRINGS];
	for (int i = 0; i < NRINGS; i++)
		h[i] = m->c[i].hdr;
	int rc = wait_parked(h, NRINGS, getpid(), __atomic_load_n(&m->tid, __ATOMIC_ACQUIRE), &m->stop,
			     m->deadline);
	if (rc < 0)
		__atomic_store_n(&m->proc_unreadable, 1, __ATOMIC_RELAXED);
	return rc > 0;
}

static void multi_producer_run(struct multi_ctx *m, int id)
{
	const int per = NRINGS / NPROD, first = id * per;
	uint64_t seq[NRINGS / NPROD] = {0}, seed = 0x51ed + (uint64_t)id;
	while (!__atomic_load_n(&m->tid, __ATOMIC_ACQUIRE))
		sched_yield();
	for (uint64_t i = 0; i < m->per_prod && !__atomic_load_n(&m->stop, __ATOMIC_RELAXED); i++) {
		int forced = i % WAKE_FORCE_EVERY == WAKE_FORCE_EVERY - 1;
		if (forced && !force_turn(m, id)) {
			__atomic_store_n(&m->stop, 1, __ATOMIC_RELAXED);
			return;
		}
		if (!forced && __atomic_load_n(&m->forcing, __ATOMIC_SEQ_CST) == 1 - id)
			stand_aside(m, id);
		int k = (int)(rnd(&seed) % (uint64_t)per);
		struct fs_ring_prod *p = &m->p[first + k];
		struct fs_rec r = seq_rec(seq[k]);
		while (fs_ring_post(p, &r) == -ENOBUFS) {
			if (__atomic_load_n(&m->stop, __ATOMIC_RELAXED))
				return;
			sched_yield();
		}
		seq[k]++;
		__atomic_store_n(&m->posted[first + k], seq[k], __ATOMIC_RELEASE);
		if (forced) {
			m->forced[id]++;
			__atomic_store_n(&m->forcing, -1, __ATOMIC_SEQ_CST);
		}
		if (rnd(&seed) % 4) {
			while (__atomic_load_n(&p->hdr->head, __ATOMIC_ACQUIRE) != p->tail) {
				if (__atomic_load_n(&m->stop, __ATOMIC_RELAXED))
					return;
				if (now_ns() > m->deadline) {
					m->stalls[id]++;
					__atomic_store_n(&m->stop, 1, __ATOMIC_RELAXED);
					return;
				}
				sched_yield();
			}
		}
		tiny_pause(&seed);
	}
}

static void *multi_producer(void *arg)
{
	struct prod_arg *a = arg;
	multi_producer_run(a->m, a->id);
	__atomic_store_n(&a->m->done[a->id], 1, __ATOMIC_SEQ_CST);
	return NULL;
}

Test(wake, futex_waitv_eight_rings, .timeout = 150)
{
	const uint32_t E = 32;
	struct multi_ctx *m = calloc(1, sizeof(*m));
	cr_assert_not_null(m);
	for (int i = 0; i < NRINGS; i++) {
		m->mem[i] = ring_alloc(E);
		cr_assert_eq(fs_ring_format(&m->c[i], m->mem[i], fs_ring_bytes(E), E), 0);
		cr_assert_eq(fs_ring_prod_init(&m->p[i], m->mem[i], fs_ring_bytes(E)), 0);
	}
	m->per_prod = 50000;
	m->deadline = now_ns() + WAKE_DEADLINE_NS;
	m->forcing = -1;
	pthread_t ct, pt[NPROD];
	struct prod_arg pa[NPROD];
	cr_assert_eq(pthread_create(&ct, NULL, multi_consumer, m), 0);
	for (int i = 0; i < NPROD; i++) {
		pa[i] = (struct prod_arg){m, i};
		cr_assert_eq(pthread_create(&pt[i], NULL, multi_producer, &pa[i]), 0);
	}
	for (int i = 0; i < NPROD; i++)
		pthread_join(pt[i], NULL);
	pthread_join(ct, NULL);
	cr_assert(!m->proc_unreadable, "/proc/self/task/%d/stat unreadable: cannot tell a parked consumer",
		  (int)m->tid);
	cr_assert(!m->timed_out, "deadline passed");
	cr_assert_eq(m->lost_wakeups, 0, "%llu lost wake-ups", (unsigned long long)m->lost_wakeups);
	for (int i = 0; i < NPROD; i++)
		cr_assert_eq(m->stalls[i], 0, "producer %d saw a record unconsumed until the deadline", i);
	cr_assert_eq(m->waitv_errors, 0);
	cr_assert_eq(m->bad_order, 0);
	cr_assert_eq(m->received, m->per_prod * NPROD);
	/* Every forced post met a consumer parked on all 8 rings and was taken. */
	for (int i = 0; i < NPROD; i++)
		cr_assert_eq(m->forced[i], m->per_prod / WAKE_FORCE_EVERY, "producer %d: %llu forced posts",
			     i, (unsigned long long)m->forced[i]);
	cr_assert(m->sleeps >= m->forced[0] + m->forced[1], "%llu sleeps", (unsigned long long)m->sleeps);
	cr_log_info("waitv: %llu records over %d rings, %llu sleeps (%llu forced)",
		    (unsigned long long)m->received, NRINGS, (unsigned long long)m->sleeps,
		    (unsigned long long)(m->forced[0] + m->forced[1]));
	for (int i = 0; i < NRINGS; i++)
		free(m->mem[i]);
	free(m);
}

/* ---- futex helpers ------------------------------------------------------------------ */

Test(futex, wait_returns_on_mismatch_and_times_out)
{
	uint32_t *w = aligned_alloc(64, 4096);
	cr_assert_not_null(w);
	memset(w, 0, 4096);
	*w = 5;
	uint64_t t0 = now_ns();
	/* "No sleep" against a 20 s timeout: a loaded 2-CPU machine may keep
	 * this thread off a CPU for a while, never for 10 s. */
	cr_assert_eq(fs_futex_wait(w, 4, 20 * NS_PER_S), 0, "value differs: no sleep");
	cr_assert(now_ns() - t0 < 10 * NS_PER_S);
	t0 = now_ns();
	cr_assert_eq(fs_futex_wait(w, 5, 20000000), -ETIMEDOUT);
	uint64_t el = now_ns() - t0;
	cr_assert(el >= 19000000 && el < 2 * NS_PER_S, "waited %llu ns for a 20 ms timeout",
		  (unsigned long long)el);

	uint32_t *words[3] = {w, w + 16, w + 32};
	uint32_t exp[3] = {5, 0, 0};
	cr_assert_eq(fs_futex_waitv(words, exp, 0, 1000), -EINVAL);
	cr_assert_eq(fs_futex_waitv(words, exp, FS_FUTEX_WAITV_MAX + 1, 1000), -EINVAL);
	t0 = now_ns();
	int rc = fs_futex_waitv(words, exp, 3, 20000000);
	el = now_ns() - t0;
	cr_assert_eq(rc, -ETIMEDOUT);
	cr_assert(el < 2 * NS_PER_S);
	exp[2] = 1; /* one of them differs */
	t0 = now_ns();
	cr_assert_eq(fs_futex_waitv(words, exp, 3, 20 * NS_PER_S), 0);
	cr_assert(now_ns() - t0 < 10 * NS_PER_S);
	free(w);
}

struct waker_arg {
	uint32_t *word;
	uint64_t delay_ns;
};

static void *waker(void *arg)
{
	struct waker_arg *a = arg;
	struct timespec ts = {0, (long)a->delay_ns};
	nanosleep(&ts, NULL);
	__atomic_fetch_add(a->word, 1, __ATOMIC_SEQ_CST);
	fs_futex_wake(a->word, 1);
	return NULL;
}

Test(futex, waitv_wakes_on_any_word, .timeout = 30)
{
	uint32_t *w = aligned_alloc(64, 4096);
	cr_assert_not_null(w);
	memset(w, 0, 4096);
	uint32_t *words[NRINGS];
	uint32_t exp[NRINGS];
	for (int i = 0; i < NRINGS; i++) {
		words[i] = w + 16 * i;
		exp[i] = 0;
	}
	for (int target = 0; target < NRINGS; target++) {
		for (int i = 0; i < NRINGS; i++)
			exp[i] = __atomic_load_n(words[i], __ATOMIC_RELAXED);
		struct waker_arg a = {words[target], 20000000};
		pthread_t th;
		cr_assert_eq(pthread_create(&th, NULL, waker, &a), 0);
		uint64_t t0 = now_ns();
		int rc;
		do
			rc = fs_futex_waitv(words, exp, NRINGS, 5 * NS_PER_S);
		while (rc == 0 && __atomic_load_n(words[target], __ATOMIC_RELAXED) == exp[target] &&
		       now_ns() - t0 < 5 * NS_PER_S);
		uint64_t el = now_ns() - t0;
		pthread_join(th, NULL);
		cr_assert_eq(rc, 0, "word %d: rc %d", target, rc);
		cr_assert(el < 4 * NS_PER_S, "word %d: woke after %llu ns", target, (unsigned long long)el);
	}
	free(w);
}
