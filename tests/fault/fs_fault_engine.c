/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-fault-engine: the engine of the fault suite (tests/fault/).
 *
 *   fs-fault-engine run SOCKET [windows=N] [seconds=S] [rate=W] [k=K]
 *                   [churn=N] [predict=0|1] [verify=1|0] [seed=N]
 *       Windows over the model's layers, K experts a layer (a slowly
 *       drifting set, or with churn=N a random one that changes every N
 *       windows: slots swap all the time), paced at W windows/s (0: flat out) for N windows or S
 *       seconds.  Every read is checked against the arena checksum: a hit's
 *       slot bytes when read, and again before the window's epoch is
 *       released (a slot rewritten while held shows up there); a miss's
 *       arena bytes.  A hit whose bytes are wrong while the slot's ready
 *       word still carries its generation is a mismatch; wrong bytes in a
 *       slot whose ready word moved on (the engine was detached, e.g.
 *       stopped past the liveness timeout, and its slot reused) is `torn`:
 *       the engine falls back to the arena, as a real one must.  Prints
 *       "windows W hits H misses M verified V mismatches X torn T attaches
 *        A posted P dropped D late L" and exits 1 on any mismatch.
 *       lag=1: each window's view (and the arena bytes read through it) is
 *       released only after the next window's fs_acquire, as a pipelining
 *       engine does, and those bytes are checked again then (a daemon
 *       restart in between must not unmap them: foresight.h, "the arena").
 *       pin=1: an fs_arena_pin from the start; expert (0, 0) of the arena
 *       current then is checked every window, across restarts.
 *       reader=1: a second thread reads the arena meanwhile, flat out, as a
 *       CPU path's worker does: pin, fs_arena_expert, check the bytes,
 *       unpin (it holds no view: the pin is what keeps the bytes).
 *   fs-fault-engine hold SOCKET
 *       attach, hold an epoch, print "holding epoch N", wait to be killed.
 *   fs-fault-engine segv SOCKET
 *       attach; fork children that write into the arena, the daemon region
 *       and a slot through the library's own mappings (each must die of
 *       SIGSEGV), and report the mode and access of every region fd.
 *   fs-fault-engine hostile SOCKET   (tests/fault/fs_hostile.c)
 *   fs-fault-engine iso SOCKET ATTACK ...   (tests/fault/fs_iso.c)
 *   fs-fault-engine peer SOCKET card=N ...   (tests/fault/fs_peer_reader.c)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <foresight/foresight.h>

#include "fs_hostile.h"
#include "fs_peer_reader.h"

static volatile sig_atomic_t stop_flag;

static void on_stop(int sig)
{
	(void)sig;
	stop_flag = 1;
}

struct run_opts {
	uint64_t windows, seconds, seed;
	unsigned rate, k, churn, predict, verify_all, lag, pin, reader;
};

struct held {
	const void *p;
	uint64_t bytes, sum;
	struct fs_slot s;
};

static uint64_t rng(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t opt(int argc, char **argv, const char *key, uint64_t def)
{
	size_t n = strlen(key);
	for (int i = 3; i < argc; i++)
		if (strncmp(argv[i], key, n) == 0 && argv[i][n] == '=')
			return strcmp(argv[i] + n + 1, "all") == 0 ? 1 : strtoull(argv[i] + n + 1, NULL, 0);
	return def;
}

static int open_client(const char *sock, const char *name, fs_client **c)
{
	struct fs_client_opts o = {.socket_path = sock, .name = name};
	/* A daemon that is restarting, or a loaded machine, may refuse for a
	 * moment: retry 20 s. */
	uint64_t end = mono_ns() + 20000000000ull;
	int r;
	while ((r = fs_client_open(c, &o)) < 0 && mono_ns() < end)
		usleep(20000);
	if (r < 0) /* the test's "no result line" then says why */
		fprintf(stderr, "%s: fs_client_open failed for 20 s: %d (%s)\n", name, r, strerror(-r));
	return r;
}

static void pick(const struct fs_model_info *m, const struct run_opts *o, uint64_t *seed, uint32_t w,
		 uint32_t l, uint32_t *out)
{
	for (uint32_t i = 0; i < o->k; i++) {
		uint32_t x;
		if (o->churn) {
			/* A random set that holds for `churn` windows: predictions
			 * land and are used, then the set moves on (slots swap). */
			uint64_t h = *seed ^ ((uint64_t)(w / o->churn) << 32) ^ ((uint64_t)l << 16) ^ i;
			uint32_t j;
			do {
				x = (uint32_t)(rng(&h) % m->experts);
				for (j = 0; j < i && out[j] != x; j++)
					;
			} while (j < i && o->k <= m->experts);
		} else {
			x = (i * 5 + l + w / 40) % m->experts;
		}
		out[i] = x;
	}
}

/* reader=1's thread and what it found. */
struct reader {
	fs_client *c;
	uint32_t layers, experts;
	unsigned long long reads, bad;
	volatile int stop;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	uint64_t s = 12345;
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		const void *pin = fs_arena_pin(r->c);
		struct fs_expert_blob b;
		uint64_t x = rng(&s);
		if (pin && fs_arena_expert(r->c, (uint32_t)(x % r->layers), (uint32_t)(x >> 32) % r->experts,
					   &b) == 0) {
			r->reads++;
			r->bad += fs_checksum(b.data, b.bytes) != b.checksum;
		}
		fs_arena_unpin(r->c, pin);
	}
	return NULL;
}

static int run(const char *sock, const struct run_opts *o)
{
	fs_client *c;
	/* A name of its own, as the daemon's back-off asks of engines
	 * (fsd_clients.c): the identity is the uid with the pid or the name,
	 * so engines sharing "fault-run" under one uid shared a revocation's
	 * back-off too; an honest engine starved past hold_timeout_ms on a
	 * loaded box then kept the next phase's engines out for 20 s
	 * (iso_test "no result line"). */
	char name[32];
	snprintf(name, sizeof(name), "fault-run-%d", (int)getpid());
	if (open_client(sock, name, &c) < 0)
		return 2;
	struct fs_model_info m;
	fs_client_model(c, &m);
	uint64_t seed = o->seed ? o->seed : (uint64_t)getpid() * 0x9e37u;
	uint32_t *sel = calloc((size_t)m.layers * o->k, sizeof(*sel));
	struct held *hs = calloc((size_t)m.layers * o->k, sizeof(*hs));
	if (!sel || !hs)
		return 2;
	unsigned long long hits = 0, misses = 0, verified = 0, bad = 0, torn = 0, posted = 0, late = 0;
	uint64_t t0 = mono_ns(), end = o->seconds ? t0 + o->seconds * 1000000000ull : UINT64_MAX;
	uint64_t w;
	signal(SIGTERM, on_stop); /* stop after this window and report */
	/* lag=1: the window before's view and one arena blob read through it. */
	struct fs_view prev = {0};
	struct fs_expert_blob prev_b = {0};
	int have_prev = 0;
	/* pin=1: the first arena, pinned, and one of its blobs. */
	const void *pin = NULL;
	struct fs_expert_blob pin_b = {0};
	struct reader rd = {.c = c, .layers = m.layers, .experts = m.experts};
	pthread_t rt;
	if ((o->pin && ((pin = fs_arena_pin(c)) == NULL || fs_arena_expert(c, 0, 0, &pin_b) != 0)) ||
	    (o->reader && pthread_create(&rt, NULL, reader_main, &rd) != 0)) {
		free(sel);
		free(hs);
		return 2;
	}
	printf("started pid %d\n", (int)getpid());
	fflush(stdout);
	uint64_t detached_ns = 0, said_ns = 0;
	for (w = 1; (!o->windows || w <= o->windows) && mono_ns() < end && !stop_flag; w++) {
		struct fs_view v;
		/* Detached for over a second: say why, once a second (a test that
		 * waits for the re-attach prints this file when it fails). */
		uint64_t now_ns = mono_ns();
		if (fs_client_attached(c)) {
			detached_ns = 0;
		} else if (!detached_ns) {
			detached_ns = now_ns;
		} else if (now_ns - detached_ns > 1000000000ull && now_ns - said_ns > 1000000000ull) {
			said_ns = now_ns;
			fprintf(stderr, "detached for %llu ms: %s\n",
				(unsigned long long)((now_ns - detached_ns) / 1000000u),
				fs_client_last_error(c));
		}
		posted += fs_window_begin(c, (uint32_t)w, 1) == 0;
		fs_acquire(c, &v);
		if (have_prev) { /* the window before, still held: its bytes are still there */
			if (prev_b.data) {
				verified++;
				bad += fs_checksum(prev_b.data, prev_b.bytes) != prev_b.checksum;
			}
			prev_b.data = NULL;
			fs_release(c, &prev);
			have_prev = 0;
		}
		if (pin) {
			verified++;
			bad += fs_checksum(pin_b.data, pin_b.bytes) != pin_b.checksum;
		}
		uint32_t nh = 0;
		for (uint32_t l = 0; l < m.layers; l++)
			pick(&m, o, &seed, (uint32_t)w, l, sel + (size_t)l * o->k);
		for (uint32_t l = 0; l < m.layers; l++) {
			uint32_t card = l * m.cards / m.layers;
			const uint32_t *cur = sel + (size_t)l * o->k;
			if (o->predict && l + 1 < m.layers)
				for (uint32_t i = 0; i < o->k; i++)
					posted += fs_post_predict(c, (uint32_t)w, l + 1, cur[o->k + i],
								  FS_ANY_CARD, 1.0f, 1, FS_SOURCE_HOST) == 0;
			for (uint32_t i = 0; i < o->k; i++) {
				uint32_t x = cur[i];
				struct fs_slot s;
				struct fs_expert_blob b;
				if (fs_arena_expert(c, l, x, &b) < 0)
					continue;
				int hit = fs_lookup_live(c, &v, card, l, x, &s);
				int check = o->verify_all || i == 0;
				if (hit && check) {
					verified++;
					if (fs_checksum(s.host, s.bytes) != b.checksum) {
						if (fs_slot_ready(c, &s))
							bad++;
						else
							torn++; /* detached and reused: the CPU path */
						hit = 0;
					} else {
						hs[nh++] = (struct held){s.host, s.bytes, b.checksum, s};
					}
				}
				if (!hit && check) {
					verified++;
					bad += fs_checksum(b.data, b.bytes) != b.checksum;
				}
				if (o->lag)
					prev_b = b;
				hits += hit;
				misses += !hit;
				posted += fs_post_usage(c, (uint32_t)w, l, x, card, hit) == 0;
			}
		}
		/* Everything read in this window is still what it was: the epoch
		 * we hold keeps its slots from being rewritten. */
		for (uint32_t i = 0; i < nh; i++) {
			verified++;
			if (fs_checksum(hs[i].p, hs[i].bytes) != hs[i].sum) {
				if (fs_slot_ready(c, &hs[i].s))
					bad++;
				else
					torn++;
			}
		}
		posted += fs_window_end(c, (uint32_t)w) == 0;
		if (o->rate) {
			uint64_t due = t0 + w * 1000000000ull / o->rate;
			uint64_t now = mono_ns();
			if (now > due + 1000000000ull / o->rate)
				late++;
			if (due > now) {
				struct timespec ts = {(time_t)(due / 1000000000ull),
						      (long)(due % 1000000000ull)};
				while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR &&
				       !stop_flag)
					;
			}
		}
		if (o->lag) {
			prev = v;
			have_prev = 1;
		} else {
			fs_release(c, &v);
		}
	}
	if (have_prev)
		fs_release(c, &prev);
	if (pin)
		fs_arena_unpin(c, pin);
	if (o->reader) {
		__atomic_store_n(&rd.stop, 1, __ATOMIC_RELEASE);
		pthread_join(rt, NULL);
		verified += rd.reads;
		bad += rd.bad;
		fprintf(stderr, "reader: %llu arena reads, %llu wrong\n", rd.reads, rd.bad);
	}
	printf("windows %llu hits %llu misses %llu verified %llu mismatches %llu torn %llu attaches %llu "
	       "posted %llu dropped %llu late %llu\n",
	       (unsigned long long)(w - 1), hits, misses, verified, bad, torn,
	       (unsigned long long)fs_client_attach_count(c), posted,
	       (unsigned long long)fs_client_dropped(c), late);
	fflush(stdout);
	fs_client_close(c);
	free(sel);
	free(hs);
	return bad ? 1 : 0;
}

static int hold(const char *sock)
{
	fs_client *c;
	if (open_client(sock, "fault-hold", &c) < 0)
		return 2;
	struct fs_model_info m;
	fs_client_model(c, &m);
	struct fs_view v = {0};
	/* Post until an epoch maps something, then hold it. */
	for (int i = 0; i < 500; i++) {
		fs_post_predict(c, 1, 0, (uint32_t)(i % m.experts), FS_ANY_CARD, 1.0f, 1, FS_SOURCE_HOST);
		fs_post_usage(c, 1, 0, (uint32_t)(i % m.experts), 0, 0);
		fs_acquire(c, &v);
		struct fs_slot s;
		if (v.epoch > 1 && fs_lookup(c, &v, 0, 0, (uint32_t)(i % m.experts), &s))
			break;
		fs_release(c, &v);
		usleep(2000);
	}
	if (v.epoch == 0)
		fs_acquire(c, &v);
	printf("holding epoch %llu\n", (unsigned long long)v.epoch);
	fflush(stdout);
	for (;;)
		pause();
}

/* A child writes one byte at p: 1 when it died of SIGSEGV. */
static int write_faults(volatile unsigned char *p)
{
	if (!p)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		*p = (unsigned char)(*p + 1);
		_exit(0);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV;
}

static int segv(const char *sock)
{
	fs_client *c;
	if (open_client(sock, "fault-segv", &c) < 0)
		return 2;
	struct fs_model_info m;
	fs_client_model(c, &m);
	struct fs_expert_blob b;
	fs_arena_expert(c, 0, 0, &b);
	const uint32_t *ready = fs_card_ready_words(c, 0);
	/* A slot: predict until one lands. */
	const void *slot = NULL;
	struct fs_view v;
	for (int i = 0; i < 2000 && !slot; i++) {
		fs_post_predict(c, 1, 0, 0, FS_ANY_CARD, 1.0f, 1, FS_SOURCE_HOST);
		fs_post_usage(c, 1, 0, 0, 0, 0);
		fs_acquire(c, &v);
		struct fs_slot s;
		for (uint32_t card = 0; card < m.cards && !slot; card++)
			if (fs_lookup_live(c, &v, card, 0, 0, &s))
				slot = s.host;
		fs_release(c, &v);
		if (!slot)
			usleep(1000);
	}
	printf("segv arena %d daemon %d slot %d\n", write_faults((volatile unsigned char *)b.data),
	       write_faults((volatile unsigned char *)ready), write_faults((volatile unsigned char *)slot));
	/* The fds the library holds: memfds, their modes and access. */
	for (int fd = 3; fd < 1024; fd++) {
		char path[64], target[256];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		if (strncmp(target, "/memfd:foresight-", 17) != 0)
			continue;
		struct stat st;
		int fl = fcntl(fd, F_GETFL);
		if (fstat(fd, &st) < 0 || fl < 0)
			continue;
		char name[64];
		snprintf(name, sizeof(name), "%.63s", target + 17);
		char *sp = strchr(name, ' ');
		if (sp)
			*sp = 0;
		printf("fd %s mode %04o %s\n", name, (unsigned)(st.st_mode & 07777),
		       (fl & O_ACCMODE) == O_RDONLY ? "ro" : "rw");
	}
	fflush(stdout);
	fs_client_close(c);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "run") == 0) {
		struct run_opts o = {
			.windows = opt(argc, argv, "windows", 0),
			.seconds = opt(argc, argv, "seconds", 0),
			.seed = opt(argc, argv, "seed", 0),
			.rate = (unsigned)opt(argc, argv, "rate", 0),
			.k = (unsigned)opt(argc, argv, "k", 6),
			.churn = (unsigned)opt(argc, argv, "churn", 0),
			.predict = (unsigned)opt(argc, argv, "predict", 1),
			.verify_all = (unsigned)opt(argc, argv, "verify", 1),
			.lag = (unsigned)opt(argc, argv, "lag", 0),
			.pin = (unsigned)opt(argc, argv, "pin", 0),
			.reader = (unsigned)opt(argc, argv, "reader", 0),
		};
		if (!o.windows && !o.seconds)
			o.windows = UINT64_MAX - 1; /* until SIGTERM */
		if (o.k == 0)
			o.k = 1;
		return run(argv[2], &o);
	}
	if (argc >= 3 && strcmp(argv[1], "hold") == 0)
		return hold(argv[2]);
	if (argc >= 3 && strcmp(argv[1], "segv") == 0)
		return segv(argv[2]);
	if (argc >= 3 && strcmp(argv[1], "hostile") == 0)
		return fault_hostile(argv[2], argc - 3, argv + 3);
	if (argc >= 3 && strcmp(argv[1], "iso") == 0)
		return fault_iso(argv[2], argc - 3, argv + 3);
	if (argc >= 3 && strcmp(argv[1], "peer") == 0)
		return fault_peer_reader(argv[2], argc - 3, argv + 3);
	fprintf(stderr, "usage: fs-fault-engine run|hold|segv|hostile|iso|peer SOCKET [key=value ...]\n");
	return 2;
}
