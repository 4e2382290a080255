/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-bench-ring: records/s and post-to-observe latency of the fs_ring
 * (proto/fs_ring.h) between two processes, side by side with a baseline
 * queue built on a process-shared pthread mutex + condition variables
 * (bq.h), in one run on one machine.  bench/README.md explains every row.
 *
 * The producer is a child made with fork(); the consumer is this process.
 * Both queues live in one memfd mapped MAP_SHARED.  With two or more CPUs
 * the consumer and the producer are pinned to different CPUs.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bq.h"
#include "fs_futex.h"
#include "fs_opt.h"
#include "fs_ring.h"

#define BATCH 32u
#define CONS_MAX 1024u                   /* records a consumer takes per call */
#define WAIT_NS 100000000ull             /* one futex / condvar wait, at most */
#define RUN_DEADLINE_NS 120000000000ull  /* any single measurement, at most */
#define READY_DEADLINE_NS 10000000000ull /* child start-up, at most */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

static inline uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline uint64_t rec_u64(const struct fs_rec *r)
{
	return ((uint64_t)r->window << 32) | r->value;
}

static inline void rec_set_u64(struct fs_rec *r, uint64_t v)
{
	r->window = (uint32_t)(v >> 32);
	r->value = (uint32_t)v;
}

/* ---- options ------------------------------------------------------------ */

struct opts {
	uint64_t records; /* per throughput run */
	uint32_t entries; /* capacity of both queues */
	uint32_t reps;    /* throughput repetitions (best is reported) */
	uint32_t samples; /* latency samples per row (after warm-up) */
	uint32_t warmup;
	uint64_t pace_ns;       /* latency: one post every pace_ns */
	uint64_t sleep_pace_ns; /* the same for the rows whose consumer sleeps */
	uint64_t cap_ns;        /* a throughput run stops after this long */
	const char *only;       /* run only the rows whose mode contains this */
};

static const char usage[] =
	"usage: fs-bench-ring [--records N] [--max-run-ms N] [--entries N] [--reps N]\n"
	"                     [--samples N] [--pace-ns N] [--sleep-pace-ns N] [--cpus A,B]\n"
	"                     [--only TEXT] [--quick] [--help]\n"
	"\n"
	"Measures the fs_ring between two processes (producer: a forked child,\n"
	"consumer: this process) against a pthread mutex+condvar queue in shared\n"
	"memory, one after the other in one run.\n"
	"\n";
static const char tail[] = "\n"
			   "The last two lines are `ring records/s: N` and\n"
			   "`ring/baseline throughput ratio: X`.  See bench/README.md.\n";

/* --entries: a ring's capacity, a power of two. */
static int entries_arg(void *dst, const char *v, char *err, size_t len)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 0);
	if (errno || end == v || *end || v[0] == '-' || x < FS_RING_MIN_ENTRIES || x > FS_RING_MAX_ENTRIES ||
	    (x & (x - 1)) != 0) {
		snprintf(err, len, "give a power of two from %u to %u", FS_RING_MIN_ENTRIES,
			 FS_RING_MAX_ENTRIES);
		return -1;
	}
	*(uint32_t *)dst = (uint32_t)x;
	return 0;
}

static int cpus_arg(void *dst, const char *v, char *err, size_t len); /* --cpus, below */

static int parse_opts(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){.records = 20000000u,
			   .entries = 4096u,
			   .reps = 3u,
			   .samples = 100000u,
			   .warmup = 2000u,
			   .pace_ns = 10000u,
			   .sleep_pace_ns = 100000u,
			   .cap_ns = 2500000000u};
	int quick = 0;
	uint64_t cap_ms = o->cap_ns / 1000000u;
	const struct fs_opt opts[] = {
		FS_OPT_U64(
			"records", "N", &o->records, BATCH, UINT64_MAX,
			"records per throughput run; a run also stops after --max-run-ms (slow queues would take "
			"minutes)"),
		FS_OPT_U64("max-run-ms", "N", &cap_ms, 10, 600000, "time cap of one throughput run"),
		FS_OPT_FN("entries", "N", &o->entries, entries_arg,
			  "capacity of both queues, power of two (default: 4096)"),
		FS_OPT_U32("reps", "N", &o->reps, 1, 100, "throughput repetitions, the best is reported"),
		FS_OPT_U32("samples", "N", &o->samples, 100, 100000000u, "latency samples per latency row"),
		FS_OPT_U64("pace-ns", "N", &o->pace_ns, 100, 100000000u,
			   "latency runs: the producer posts one record every N ns (busy-wait pacing)"),
		FS_OPT_U64(
			"sleep-pace-ns", "N", &o->sleep_pace_ns, 100, 100000000u,
			"the same for the rows whose consumer sleeps (longer than the daemon's 50 us spin, so "
			"each record finds the consumer asleep); those rows take a tenth of --samples"),
		FS_OPT_FN("cpus", "A,B", NULL, cpus_arg,
			  "consumer on CPU A, producer on CPU B (default: two cores, one L3 where the "
			  "topology says so)"),
		FS_OPT_STR("only", "TEXT", &o->only,
			   "run only the rows whose mode contains TEXT (to profile or compare a few; "
			   "no summary lines then)"),
		FS_OPT_FLAG("quick", 0, &quick, "small counts (a smoke test: about a second)"),
	};
	const struct fs_opt_cmd cmd = {"fs-bench-ring", usage, tail, opts, FS_OPT_N(opts)};
	fs_opt_parse_or_exit(&cmd, argc, argv);
	o->cap_ns = cap_ms * 1000000u;
	if (quick) {
		o->records = 200000u;
		o->reps = 1;
		o->samples = 2000u;
		o->warmup = 200u;
		o->cap_ns = 1000000000u;
	}
	o->records -= o->records % BATCH;
	return 0;
}

/* ---- shared memory and processes ----------------------------------------- */

struct ctl {
	uint32_t ready; /* child: attached and pinned */
	uint32_t pad0[15];
	uint32_t go; /* parent: start */
	uint32_t pad1[15];
	uint32_t abort; /* parent: give up (the child exits 4) */
	uint32_t pad2[15];
	uint32_t stop; /* parent: enough records (the child exits 0) */
	uint32_t pad3[15];
};

struct shm {
	struct ctl *ctl;
	void *ring; /* fs_ring_bytes(entries) */
	struct bq *bq;
	size_t ring_bytes;
};

static int cpu_cons = -1, cpu_prod = -1;

static void pin_to(int cpu)
{
	if (cpu < 0)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		perror("fs-bench-ring: sched_setaffinity");
}

/* A line of /sys/devices/system/cpu/cpuN/<rel> into buf ("" when absent). */
static void cpu_attr(int cpu, const char *rel, char *buf, size_t len)
{
	char path[128];
	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/%s", cpu, rel);
	buf[0] = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	if (!fgets(buf, (int)len, f))
		buf[0] = 0;
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
}

/* Is `cpu` in the list ("0-3,8,10-11") of CPU `of`'s attribute `rel`? */
static int cpu_listed(int of, const char *rel, int cpu)
{
	char buf[256];
	cpu_attr(of, rel, buf, sizeof(buf));
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int a, b;
		int k = sscanf(t, "%d-%d", &a, &b);
		if (k == 1)
			b = a;
		if (k >= 1 && cpu >= a && cpu <= b)
			return 1;
	}
	return 0;
}

#define SIBLINGS "topology/thread_siblings_list"
#define L3_SHARED "cache/index3/shared_cpu_list"

/* The consumer on the first CPU we may use; the producer on another one
 * that is not an SMT sibling of it (two threads of one core share its
 * execution units: a pipeline between them measures the core, not the
 * queue), on the same L3 where there is one: where an engine and the
 * daemon's hot thread would be put.  --cpus overrides. */
static void choose_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return;
	int first = -1, any = -1, apart = -1, near = -1;
	for (int i = 0; i < CPU_SETSIZE; i++) {
		if (!CPU_ISSET(i, &set))
			continue;
		if (first < 0) {
			first = i;
			continue;
		}
		if (any < 0)
			any = i;
		if (cpu_listed(first, SIBLINGS, i))
			continue;
		if (apart < 0)
			apart = i;
		if (near < 0 && cpu_listed(first, L3_SHARED, i))
			near = i;
	}
	if (any < 0)
		return;
	cpu_cons = first;
	cpu_prod = near >= 0 ? near : apart >= 0 ? apart : any;
}

/* --cpus A,B: consumer on A, producer on B. */
static int cpus_arg(void *dst, const char *v, char *err, size_t len)
{
	int a, b;
	char extra;
	(void)dst;
	if (sscanf(v, "%d,%d%c", &a, &b, &extra) != 2 || a < 0 || b < 0 || a >= CPU_SETSIZE ||
	    b >= CPU_SETSIZE || a == b) {
		snprintf(err, len, "give two different CPU numbers, consumer,producer");
		return -1;
	}
	cpu_cons = a;
	cpu_prod = b;
	return 0;
}

/* What the pair shares: the figures depend on it. */
static void print_pair(void)
{
	char l3[256];
	cpu_attr(cpu_cons, L3_SHARED, l3, sizeof(l3));
	printf("pinning: consumer on CPU %d, producer on CPU %d (sched_setaffinity): %s, %s (CPU %d's L3: %s)\n",
	       cpu_cons, cpu_prod,
	       cpu_listed(cpu_cons, SIBLINGS, cpu_prod) ? "SMT siblings (one core)" : "two cores",
	       l3[0] == 0                                ? "L3 unknown" :
	       cpu_listed(cpu_cons, L3_SHARED, cpu_prod) ? "one L3" :
							   "different L3s",
	       cpu_cons, l3[0] ? l3 : "-");
}

static size_t round_up(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

static int shm_create(struct shm *s, uint32_t entries)
{
	size_t ctl_bytes = round_up(sizeof(struct ctl), 4096);
	s->ring_bytes = fs_ring_bytes(entries);
	size_t ring_sz = round_up(s->ring_bytes, 4096);
	size_t total = ctl_bytes + ring_sz + round_up(bq_bytes(entries), 4096);
	int fd = memfd_create("fs-bench-ring", MFD_CLOEXEC);
	if (fd < 0) {
		perror("fs-bench-ring: memfd_create");
		return -1;
	}
	if (ftruncate(fd, (off_t)total) != 0) {
		perror("fs-bench-ring: ftruncate");
		close(fd);
		return -1;
	}
	char *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		perror("fs-bench-ring: mmap");
		return -1;
	}
	s->ctl = (struct ctl *)m;
	s->ring = m + ctl_bytes;
	s->bq = (struct bq *)(m + ctl_bytes + ring_sz);
	return 0;
}

/* ---- one measurement ------------------------------------------------------ */

enum queue_kind { Q_RING, Q_BQ };

/* What the consumer does when it finds nothing (or too little) to take. */
enum cons_policy {
	C_SPIN,  /* take whatever is there; pause once and re-poll when empty */
	C_DRAIN, /* take whatever is there; POLL_PAUSES pauses after a poll
		  * that found nothing */
	C_LINES, /* ring: like C_DRAIN, but take whole cache lines of records
		  * only (the line the producer is filling stays in its cache);
		  * a partial line once the tail stopped moving for one poll.
		  * Baseline: same as C_DRAIN */
	C_SLEEP, /* ring: futex handshake; baseline: condvar wait */
	C_GROUP, /* like C_DRAIN, but wait for GROUP_MIN records while more keep
		  * coming, whatever is there once nothing came for one poll.
		  * Ring: fs_ring_consume_group() (one look at the tail line per
		  * group).  Baseline: the same rule on a peek at its counters
		  * without the lock (one lock hold per group) */
};

#define GROUP_MIN 64u

#define POLL_PAUSES 64u
#define LAT_SEGS 5u /* latency rows: segments, the rows taking turns */
#define RECS_PER_LINE (FS_CACHELINE / (uint32_t)sizeof(struct fs_rec))

struct meas {
	const char *queue;
	const char *mode;
	enum queue_kind q;
	uint32_t batch; /* records per post */
	enum cons_policy pol;
	int full;            /* the seq_cst handshake on both sides (FS_RING_F_ASYM off) */
	uint32_t kick_every; /* ring, one record per post: publish the tail once per
			      * this many posts (io_uring's submit model; NOT the
			      * protocol: a measurement for the decision) */
	int before;          /* ring: the post and consume of session 6 (no write prefetch,
			      * one record at a time copied and checked: consume_s6()),
			      * what the changes of issue 20's session 7 add */
	int latency;         /* paced, stamped records; else a throughput run */
	double best_rps;     /* throughput rows */
	uint64_t p50, p99, p999, max;
	int done;
	int failed; /* a latency segment failed */
};

/* Latency rows whose consumer sleeps post less often (each record should
 * find it asleep: the wake-up is what they measure), so they take fewer
 * samples in about the same time. */
static uint64_t pace_of(const struct meas *m, const struct opts *o)
{
	return m->pol == C_SLEEP ? o->sleep_pace_ns : o->pace_ns;
}

static uint32_t samples_of(const struct meas *m, const struct opts *o)
{
	uint32_t n = m->pol == C_SLEEP ? o->samples / 10 : o->samples;
	return n < 100 ? 100 : n;
}

static inline int ring_post(struct fs_ring_prod *p, const struct meas *m, const struct fs_rec *recs)
{
	if (m->kick_every) { /* fs_ring_post() with the kick deferred */
		if (fs_ring_space(p, 1) == 0)
			return -ENOBUFS;
		p->recs[p->tail & p->mask] = recs[0];
		p->tail++;
		if (p->tail % m->kick_every == 0)
			fs_ring_kick(p);
		return 0;
	}
	if (m->before)
		return fs_ring_post_ahead(p, recs, 0);
	if (m->batch > 1)
		return fs_ring_post_batch(p, recs, m->batch);
	return fs_ring_post(p, recs);
}

/* What the child does: pin, attach, wait for go, post. */
static void producer(struct shm *s, const struct meas *m, const struct opts *o, uint64_t n)
{
	struct ctl *ctl = s->ctl;
	struct fs_ring_prod p;
	pin_to(cpu_prod);
	if (m->q == Q_RING && fs_ring_prod_init(&p, s->ring, s->ring_bytes) != 0)
		_exit(3);
	fs_store_release(&ctl->ready, 1u);
	while (!fs_load_acquire(&ctl->go)) {
		if (fs_load_relaxed(&ctl->abort))
			_exit(4);
		cpu_relax();
	}
	struct fs_rec recs[BATCH];
	for (uint32_t i = 0; i < BATCH; i++)
		recs[i] = (struct fs_rec){.type = FS_REC_USAGE, .aux = FS_USE_HIT, .layer = 1, .expert = 2};
	uint64_t next = now_ns();
	for (uint64_t i = 0; i < n; i += m->batch) {
		if ((i & 255) == 0 && fs_load_relaxed(&ctl->stop))
			_exit(0);
		if (m->latency) {
			next += pace_of(m, o);
			uint64_t t;
			while ((t = now_ns()) < next)
				cpu_relax();
			if (t - next > 10 * pace_of(m, o))
				next = t; /* we were descheduled: do not burst to catch up */
			recs[0].type = FS_REC_WIN_BEGIN;
			recs[0].aux = 0;
			rec_set_u64(&recs[0], now_ns());
		} else {
			for (uint32_t j = 0; j < m->batch; j++)
				rec_set_u64(&recs[j], i + j);
		}
		if (m->q == Q_RING) {
			uint32_t spins = 0;
			while (ring_post(&p, m, recs) != 0) {
				if (m->kick_every)
					fs_ring_kick(&p); /* full: what is written must be seen */
				cpu_relax();
				if ((++spins & 1023) == 0 &&
				    (fs_load_relaxed(&ctl->abort) || fs_load_relaxed(&ctl->stop)))
					_exit(fs_load_relaxed(&ctl->abort) ? 4 : 0);
			}
		} else {
			while (bq_push(s->bq, recs, m->batch, WAIT_NS) != 0)
				if (fs_load_relaxed(&ctl->abort) || fs_load_relaxed(&ctl->stop))
					_exit(fs_load_relaxed(&ctl->abort) ? 4 : 0);
		}
	}
	if (m->q == Q_RING)
		fs_ring_kick(&p);
	_exit(0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Child still alive and within the deadline?  0 = yes. */
static int check_child(pid_t pid, uint64_t deadline, int *status, int *reaped)
{
	if (now_ns() > deadline) {
		fprintf(stderr, "fs-bench-ring: measurement ran past its deadline\n");
		return -1;
	}
	if (!*reaped && waitpid(pid, status, WNOHANG) == pid) {
		*reaped = 1;
		if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
			fprintf(stderr, "fs-bench-ring: producer died (status 0x%x)\n", *status);
			return -1;
		}
	}
	return 0;
}

/* fs_ring_consume() as it was before session 7 (issue 20): each record
 * copied from the ring and checked in turn (for the `before` row only). */
static uint32_t consume_s6(struct fs_ring_cons *c, struct fs_rec *out, uint32_t max)
{
	uint32_t avail = fs_load_acquire(&c->hdr->tail) - c->head;
	if (avail == 0 || avail > c->entries)
		return avail ? fs_ring_consume(c, out, max) : 0; /* let it count */
	if (avail > max)
		avail = max;
	uint32_t n = 0;
	for (uint32_t i = 0; i < avail; i++) {
		memcpy(&out[n], &c->recs[(c->head + i) & c->mask], sizeof(struct fs_rec));
		if (fs_likely(fs_rec_valid(&out[n])))
			n++;
		else
			c->bad_record++;
	}
	c->head += avail;
	c->consumed += avail;
	fs_store_release(&c->hdr->head, c->head);
	return n;
}

/* One poll of the ring consumer under m's policy. */
static uint32_t ring_take(struct fs_ring_cons *c, struct fs_rec *buf, const struct meas *m, uint32_t *last)
{
	uint32_t (*consume)(struct fs_ring_cons *, struct fs_rec *, uint32_t) = m->before ? consume_s6 :
											    fs_ring_consume;
	switch (m->pol) {
	case C_SPIN:
	case C_DRAIN:
		return consume(c, buf, CONS_MAX);
	case C_LINES: {
		uint32_t pend = fs_ring_pending(c);
		if (pend == 0)
			return 0;
		/* Records up to the last line boundary at or below the tail: the
		 * line the producer is still filling stays in its cache. */
		uint32_t upto = ((c->head + pend) & ~(RECS_PER_LINE - 1)) - c->head;
		if (upto == 0 || upto > pend) {
			if (pend != *last) { /* the tail moved: more is coming */
				*last = pend;
				return 0;
			}
			upto = pend; /* the producer paused: take the partial line */
		}
		*last = 0;
		return consume(c, buf, upto < CONS_MAX ? upto : CONS_MAX);
	}
	case C_GROUP:
		if (!m->before)
			return fs_ring_consume_group(c, buf, CONS_MAX, GROUP_MIN, last);
		{ /* fs_ring_consume_group() on consume_s6() */
			uint32_t pend = fs_ring_pending(c);
			if (pend == 0)
				return 0;
			if (pend < GROUP_MIN && pend != *last) {
				*last = pend;
				return 0;
			}
			*last = 0;
			return consume_s6(c, buf, CONS_MAX);
		}
	case C_SLEEP: {
		uint32_t k = fs_ring_consume(c, buf, CONS_MAX);
		if (k)
			return k;
		uint32_t seq;
		if (!fs_ring_sleep_prepare(c, &seq)) {
			fs_futex_wait(&c->hdr->wake_seq, seq, WAIT_NS);
			fs_ring_sleep_done(c);
		}
		return 0;
	}
	}
	return 0;
}

/* The baseline under C_GROUP: peek at the counters without the lock (a
 * stale view only delays the take), take the lock once per group. */
static uint32_t bq_pop_group(struct bq *q, struct fs_rec *buf, uint32_t *last)
{
	uint32_t pend = __atomic_load_n(&q->tail, __ATOMIC_RELAXED) -
			__atomic_load_n(&q->head, __ATOMIC_RELAXED);
	if (pend == 0 || pend > q->entries)
		return 0;
	if (pend < GROUP_MIN && pend != *last) {
		*last = pend;
		return 0;
	}
	*last = 0;
	return bq_pop(q, buf, CONS_MAX, 0, 0);
}

/* Run one measurement: fork the producer, consume n records (a throughput
 * run: or as many as arrive within o->cap_ns).  Fills the throughput (rps)
 * or the latency samples.  0 on success. */
/* A latency run's share: `warm` posts not counted, then `count` samples
 * into lat[0..count) (a throughput run: all zero, unused). */
struct lat_seg {
	uint64_t *lat;
	uint32_t warm, count;
};

static int run_one(struct shm *s, struct meas *m, const struct opts *o, double *rps, const struct lat_seg *ls)
{
	uint64_t n = m->latency ? (uint64_t)ls->warm + ls->count : o->records;
	struct fs_ring_cons c;
	if (m->q == Q_RING) {
		if (fs_ring_format(&c, s->ring, s->ring_bytes, o->entries) != 0)
			return -1;
		fs_ring_set_asym(&c, !m->full);
	} else {
		if (bq_init(s->bq, o->entries) != 0)
			return -1;
	}
	memset(s->ctl, 0, sizeof(*s->ctl));
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fs-bench-ring: fork");
		return -1;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		producer(s, m, o, n);
	}
	int status = 0, reaped = 0, rc = 0;
	uint64_t deadline = now_ns() + READY_DEADLINE_NS;
	while (!fs_load_acquire(&s->ctl->ready)) {
		if (check_child(pid, deadline, &status, &reaped) != 0) {
			rc = -1;
			goto out;
		}
		usleep(100);
	}
	deadline = now_ns() + RUN_DEADLINE_NS;
	struct fs_rec buf[CONS_MAX];
	uint64_t got = 0;
	uint32_t idle = 0, last = 0, polls = 0;
	uint64_t t0 = now_ns();
	fs_store_release(&s->ctl->go, 1u);
	while (got < n) {
		if (!m->latency && (++polls & 1023) == 0 && now_ns() - t0 > o->cap_ns)
			break; /* time cap: the rate of what arrived so far */
		uint32_t k;
		if (m->q == Q_RING)
			k = ring_take(&c, buf, m, &last);
		else if (m->pol == C_GROUP)
			k = bq_pop_group(s->bq, buf, &last);
		else
			k = bq_pop(s->bq, buf, CONS_MAX, m->pol == C_SLEEP, WAIT_NS);
		if (k == 0) {
			if (m->pol == C_LINES || m->pol == C_DRAIN || m->pol == C_GROUP)
				for (uint32_t i = 0; i < POLL_PAUSES; i++)
					cpu_relax();
			else
				cpu_relax();
			/* Now and then (every poll when sleeping): is the child alive? */
			idle += m->pol == C_SLEEP ? 0x10000u : 1u;
			if ((idle & 0xffffu) == 0 && check_child(pid, deadline, &status, &reaped) != 0) {
				rc = -1;
				goto out;
			}
			continue;
		}
		if (m->latency) {
			uint64_t t = now_ns();
			for (uint32_t j = 0; j < k; j++) {
				if (buf[j].type != FS_REC_WIN_BEGIN) {
					fprintf(stderr, "fs-bench-ring: %s %s: bad record\n", m->queue,
						m->mode);
					rc = -1;
					goto out;
				}
				if (got + j >= ls->warm)
					ls->lat[got + j - ls->warm] = t - rec_u64(&buf[j]);
			}
		} else {
			for (uint32_t j = 0; j < k; j++) {
				if (rec_u64(&buf[j]) != got + j) {
					fprintf(stderr,
						"fs-bench-ring: %s %s: record %" PRIu64 " out of order\n",
						m->queue, m->mode, got + j);
					rc = -1;
					goto out;
				}
			}
		}
		got += k;
	}
	uint64_t t1 = now_ns();
	*rps = (double)got * 1e9 / (double)(t1 - t0);
	fs_store_relaxed(&s->ctl->stop, 1u);
	if (m->q == Q_BQ) { /* a producer waiting for room: let it see stop */
		pthread_mutex_lock(&s->bq->mu);
		pthread_cond_broadcast(&s->bq->not_full);
		pthread_mutex_unlock(&s->bq->mu);
	}
out:
	if (rc != 0)
		fs_store_relaxed(&s->ctl->abort, 1u);
	if (!reaped && waitpid(pid, &status, 0) != pid)
		rc = -1;
	if (rc == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
		fprintf(stderr, "fs-bench-ring: producer exited with status 0x%x\n", status);
		rc = -1;
	}
	if (m->q == Q_BQ)
		bq_destroy(s->bq);
	return rc;
}

/* ---- main ---------------------------------------------------------------- */

enum {
	R_RING_ONE_SPIN,
	R_RING_ONE_LINES,
	R_RING_ONE_GROUP,
	R_RING_ONE_FULL,
	R_RING_ONE_DEFER,
	R_RING_ONE_BEFORE,
	R_RING_BATCH,
	R_RING_BATCH_POLL,
	R_RING_ONE_SLEEP,
	R_BQ_ONE_WAIT,
	R_BQ_ONE_POLL,
	R_BQ_ONE_GROUP,
	R_BQ_BATCH,
	R_BQ_BATCH_POLL,
	R_RING_LAT_SPIN,
	R_RING_LAT_SLEEP,
	R_RING_LAT_SLEEP_FULL,
	R_BQ_LAT_POLL,
	R_BQ_LAT_WAIT,
	R_COUNT
};

static int best_of(const struct meas *ms, int a, int b)
{
	return ms[b].best_rps > ms[a].best_rps ? b : a;
}

/* What going to sleep costs the consumer: fs_ring_sleep_prepare() on an
 * empty ring, mean of 2000 calls (the asymmetric one is a membarrier). */
static double sleep_entry_ns(void *mem, size_t bytes, uint32_t entries, int asym)
{
	struct fs_ring_cons c;
	if (fs_ring_format(&c, mem, bytes, entries) != 0)
		return -1;
	fs_ring_set_asym(&c, asym);
	uint32_t seq;
	uint64_t t0 = now_ns();
	for (int i = 0; i < 2000; i++) {
		if (fs_ring_sleep_prepare(&c, &seq))
			return -1; /* an empty ring with no producer: cannot be */
		fs_ring_sleep_done(&c);
	}
	return (double)(now_ns() - t0) / 2000.0;
}

/* --only: this row is run. */
static int wanted(const struct opts *o, const struct meas *m)
{
	return !o->only || strstr(m->mode, o->only) != NULL;
}

static double loadavg1(void)
{
	double l = -1;
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		if (fscanf(f, "%lf", &l) != 1)
			l = -1;
		fclose(f);
	}
	return l;
}

int main(int argc, char **argv)
{
	struct opts o;
	if (parse_opts(argc, argv, &o) != 0)
		return 2;
	struct shm s;
	if (shm_create(&s, o.entries) != 0)
		return 1;
	if (cpu_cons < 0)
		choose_cpus();
	pin_to(cpu_cons);

	/* clang-format off */
	struct meas ms[R_COUNT] = {
		[R_RING_ONE_SPIN]    = {"ring", "one-at-a-time, consumer spins", Q_RING, .batch = 1, .pol = C_SPIN},
		[R_RING_ONE_LINES]   = {"ring", "one-at-a-time, consumer polls lines", Q_RING, .batch = 1, .pol = C_LINES},
		[R_RING_ONE_GROUP]   = {"ring", "one-at-a-time, consumer takes groups", Q_RING, .batch = 1, .pol = C_GROUP},
		[R_RING_ONE_FULL]    = {"ring", "one-at-a-time, seq_cst post, polls lines", Q_RING, .batch = 1, .pol = C_LINES,
					.full = 1},
		[R_RING_ONE_DEFER]   = {"ring", "one-at-a-time, kick per 32 (not used)", Q_RING, .batch = 1, .pol = C_GROUP,
					.kick_every = BATCH},
		[R_RING_ONE_BEFORE]  = {"ring", "one-at-a-time, groups, session 6 code", Q_RING, .batch = 1,
					.pol = C_GROUP, .before = 1},
		[R_RING_BATCH]       = {"ring", "batch of 32, consumer spins", Q_RING, .batch = BATCH, .pol = C_SPIN},
		[R_RING_BATCH_POLL]  = {"ring", "batch of 32, consumer polls", Q_RING, .batch = BATCH, .pol = C_DRAIN},
		[R_RING_ONE_SLEEP]   = {"ring", "one-at-a-time, consumer sleeps", Q_RING, .batch = 1, .pol = C_SLEEP},
		[R_BQ_ONE_WAIT]      = {"baseline", "one-at-a-time, consumer waits", Q_BQ, .batch = 1, .pol = C_SLEEP},
		[R_BQ_ONE_POLL]      = {"baseline", "one-at-a-time, consumer polls", Q_BQ, .batch = 1, .pol = C_DRAIN},
		[R_BQ_ONE_GROUP]     = {"baseline", "one-at-a-time, consumer takes groups", Q_BQ, .batch = 1, .pol = C_GROUP},
		[R_BQ_BATCH]         = {"baseline", "batch of 32, consumer waits", Q_BQ, .batch = BATCH, .pol = C_SLEEP},
		[R_BQ_BATCH_POLL]    = {"baseline", "batch of 32, consumer polls", Q_BQ, .batch = BATCH, .pol = C_DRAIN},
		[R_RING_LAT_SPIN]    = {"ring", "latency, consumer spins", Q_RING, .batch = 1, .pol = C_SPIN, .latency = 1},
		[R_RING_LAT_SLEEP]   = {"ring", "latency, consumer sleeps", Q_RING, .batch = 1, .pol = C_SLEEP, .latency = 1},
		[R_RING_LAT_SLEEP_FULL] = {"ring", "latency, consumer sleeps, seq_cst", Q_RING, .batch = 1, .pol = C_SLEEP,
					   .latency = 1, .full = 1},
		[R_BQ_LAT_POLL]      = {"baseline", "latency, consumer polls", Q_BQ, .batch = 1, .pol = C_SPIN, .latency = 1},
		[R_BQ_LAT_WAIT]      = {"baseline", "latency, consumer waits", Q_BQ, .batch = 1, .pol = C_SLEEP, .latency = 1},
	};
	/* clang-format on */

	printf("fs-bench-ring: fs_ring vs a pthread mutex+condvar queue (PTHREAD_PROCESS_SHARED), %u entries x "
	       "%zu B each; producer = forked child process, consumer = this process, memfd MAP_SHARED\n",
	       o.entries, sizeof(struct fs_rec));
	if (cpu_cons >= 0)
		print_pair();
	else
		printf("pinning: none (fewer than 2 CPUs available)\n");
	printf("load average (1 min) at start: %.2f on %ld online CPUs\n", loadavg1(),
	       sysconf(_SC_NPROCESSORS_ONLN));
	printf("throughput: each run moves %" PRIu64
	       " records or stops after %.1f s, best of %u runs (interleaved); "
	       "latency: %u samples per row after %u warm-up, one post every %" PRIu64
	       " ns (consumer sleeps: a tenth of them, one every %" PRIu64 " ns)\n",
	       o.records, (double)o.cap_ns / 1e9, o.reps, o.samples, o.warmup, o.pace_ns, o.sleep_pace_ns);
	printf("ring wake-up: %s\n",
	       fs_ring_asym_available() ?
		       "asymmetric (FS_RING_F_ASYM: seq_cst-free post, membarrier GLOBAL_EXPEDITED before the consumer "
		       "sleeps); the seq_cst rows measure the symmetric handshake" :
		       "symmetric only (membarrier GLOBAL_EXPEDITED unavailable or FS_RING_ASYM=0): every ring row "
		       "uses the seq_cst handshake");
	fflush(stdout);

	int failed = 0;
	for (uint32_t rep = 0; rep < o.reps; rep++) {
		for (size_t i = 0; i < R_COUNT; i++) {
			if (ms[i].latency || !wanted(&o, &ms[i]))
				continue;
			double rps = 0;
			const struct lat_seg none = {0};
			if (run_one(&s, &ms[i], &o, &rps, &none) != 0) {
				fprintf(stderr, "fs-bench-ring: %s %s: FAILED\n", ms[i].queue, ms[i].mode);
				failed = 1;
				continue;
			}
			if (rps > ms[i].best_rps)
				ms[i].best_rps = rps;
			ms[i].done = 1;
		}
	}
	/* Latency rows: LAT_SEGS segments each, the rows taking turns, so that
	 * the rows compared with each other (the sleeping consumer's two
	 * handshakes: ring-wake) see the same moments of the machine, not one
	 * of them a noisy second. */
	uint64_t *lat[R_COUNT] = {0};
	for (size_t i = 0; i < R_COUNT; i++) {
		if (ms[i].latency && wanted(&o, &ms[i]) &&
		    !(lat[i] = calloc(samples_of(&ms[i], &o), sizeof(uint64_t))))
			return 1;
	}
	for (uint32_t seg = 0; seg < LAT_SEGS; seg++) {
		for (size_t i = 0; i < R_COUNT; i++) {
			if (!lat[i] || ms[i].failed)
				continue;
			uint32_t ns = samples_of(&ms[i], &o);
			uint32_t from = (uint32_t)((uint64_t)ns * seg / LAT_SEGS);
			uint32_t to = (uint32_t)((uint64_t)ns * (seg + 1) / LAT_SEGS);
			struct lat_seg ls = {lat[i] + from, seg == 0 ? o.warmup : o.warmup / LAT_SEGS,
					     to - from};
			double rps;
			if (run_one(&s, &ms[i], &o, &rps, &ls) != 0) {
				fprintf(stderr, "fs-bench-ring: %s %s: FAILED\n", ms[i].queue, ms[i].mode);
				failed = 1;
				ms[i].failed = 1;
			}
		}
	}
	for (size_t i = 0; i < R_COUNT; i++) {
		if (!lat[i] || ms[i].failed) {
			free(lat[i]);
			continue;
		}
		uint32_t ns = samples_of(&ms[i], &o);
		qsort(lat[i], ns, sizeof(uint64_t), cmp_u64);
		ms[i].p50 = lat[i][(size_t)ns * 50 / 100];
		ms[i].p99 = lat[i][(size_t)ns * 99 / 100];
		ms[i].p999 = lat[i][(size_t)ns * 999 / 1000];
		ms[i].max = lat[i][ns - 1];
		ms[i].done = 1;
		free(lat[i]);
	}

	printf("\n%-9s %-37s %14s %9s %9s %9s %9s\n", "queue", "mode", "records/s", "p50 ns", "p99 ns",
	       "p99.9 ns", "max ns");
	for (size_t i = 0; i < R_COUNT; i++) {
		const struct meas *m = &ms[i];
		char a[32] = "-", b[4][24] = {"-", "-", "-", "-"};
		if (!wanted(&o, m)) {
			snprintf(a, sizeof(a), "not run");
		} else if (!m->done) {
			snprintf(a, sizeof(a), "FAILED");
		} else if (m->latency) {
			snprintf(b[0], sizeof(b[0]), "%" PRIu64, m->p50);
			snprintf(b[1], sizeof(b[1]), "%" PRIu64, m->p99);
			snprintf(b[2], sizeof(b[2]), "%" PRIu64, m->p999);
			snprintf(b[3], sizeof(b[3]), "%" PRIu64, m->max);
		} else {
			snprintf(a, sizeof(a), "%.0f", m->best_rps);
		}
		printf("%-9s %-37s %14s %9s %9s %9s %9s\n", m->queue, m->mode, a, b[0], b[1], b[2], b[3]);
	}
	if (o.only) { /* a part of the rows: no figure compares them */
		printf("\n--only %s: the rows above only, no summary lines\n", o.only);
		return failed ? 1 : 0;
	}
	/* Each figure: the queue with the better of its consumers (all of them
	 * measured in this run, side by side). */
	double se_asym = sleep_entry_ns(s.ring, s.ring_bytes, o.entries, 1);
	double se_full = sleep_entry_ns(s.ring, s.ring_bytes, o.entries, 0);
	if (se_asym < 0 || se_full < 0) {
		fprintf(stderr, "fs-bench-ring: sleep entry: FAILED\n");
		failed = 1;
	}
	int rone = best_of(ms, best_of(ms, R_RING_ONE_SPIN, R_RING_ONE_LINES), R_RING_ONE_GROUP);
	int rbat = best_of(ms, R_RING_BATCH, R_RING_BATCH_POLL);
	int bone = best_of(ms, best_of(ms, R_BQ_ONE_WAIT, R_BQ_ONE_POLL), R_BQ_ONE_GROUP);
	int bbat = best_of(ms, R_BQ_BATCH, R_BQ_BATCH_POLL);
	printf("\none-at-a-time: ring \"%s\" vs baseline \"%s\"\n", ms[rone].mode, ms[bone].mode);
	printf("batch of 32:   ring \"%s\" vs baseline \"%s\"\n", ms[rbat].mode, ms[bbat].mode);
	printf("ring batch records/s: %.0f (baseline %.0f)\n", ms[rbat].best_rps, ms[bbat].best_rps);
	if (ms[R_RING_ONE_FULL].best_rps > 0)
		printf("one-at-a-time, asymmetric / seq_cst post (consumer polls lines): %.2f\n",
		       ms[R_RING_ONE_LINES].best_rps / ms[R_RING_ONE_FULL].best_rps);
	if (ms[R_RING_ONE_DEFER].best_rps > 0)
		printf("one-at-a-time, kick per 32 posts / kick per post (consumer takes groups): %.2f\n",
		       ms[R_RING_ONE_DEFER].best_rps / ms[R_RING_ONE_GROUP].best_rps);
	if (ms[R_RING_ONE_BEFORE].best_rps > 0)
		printf("one-at-a-time, this code / session 6's (write prefetch, bulk copy; consumer takes groups): %.2f\n",
		       ms[R_RING_ONE_GROUP].best_rps / ms[R_RING_ONE_BEFORE].best_rps);
	printf("sleeping consumer, post -> observed p50 / p99 ns: asymmetric %" PRIu64 " / %" PRIu64
	       ", seq_cst %" PRIu64 " / %" PRIu64 "\n",
	       ms[R_RING_LAT_SLEEP].p50, ms[R_RING_LAT_SLEEP].p99, ms[R_RING_LAT_SLEEP_FULL].p50,
	       ms[R_RING_LAT_SLEEP_FULL].p99);
	printf("consumer going to sleep (fs_ring_sleep_prepare, mean of 2000): asymmetric %.0f ns, seq_cst %.0f ns\n",
	       se_asym, se_full);
	printf("ring records/s: %.0f\n", ms[rone].best_rps);
	if (ms[bone].best_rps > 0)
		printf("ring/baseline throughput ratio: %.2f\n", ms[rone].best_rps / ms[bone].best_rps);
	else
		printf("ring/baseline throughput ratio: n/a\n");
	fflush(stdout);
	return failed ? 1 : 0;
}
