/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_ring.h: the single-producer / single-consumer record ring that an
 * engine (producer) shares with foresightd (consumer).
 *
 * Layout (offsets from the start of the ring; every part on its own line):
 *
 *     0  line 0  immutable: magic, version, entries, rec_size, rec_offset
 *    64  line 1  tail      producer-owned, free-running u32
 *   128  line 2  head      consumer-owned, free-running u32
 *   192  line 3  flags     FS_RING_NEED_WAKEUP (consumer sets, either clears)
 *                wake_seq  futex word the consumer sleeps on
 *   256  entries x struct fs_rec
 *
 * Rules (the whole memory-ordering story, in one screen):
 *  - head and tail run free; an index is (counter & (entries - 1)).
 *    Empty: tail == head.  Full: tail - head == entries.
 *  - Producer: write records, then store tail (seq_cst, at least release;
 *    see the wake-up).  It re-reads head with fs_load_acquire only when
 *    its cached view says "full".
 *  - Consumer: fs_load_acquire(tail), copy the records out (each read
 *    once, into private memory), then fs_store_release(head) so the
 *    producer cannot overwrite a record before it was copied.
 *  - Wake-up (io_uring SQPOLL's NEED_WAKEUP; a Dekker pair of seq_cst
 *    stores and loads, one total order over all four):
 *      consumer: s = wake_seq; store_seq_cst(flags, NEED);
 *                if load_seq_cst(tail) != head then clear flags and go on,
 *                else futex_wait(wake_seq, s)
 *      producer: store_seq_cst(tail); if load_seq_cst(flags) & NEED then
 *                clear NEED, wake_seq++, futex_wake(wake_seq)
 *    Either the consumer sees the new tail or the producer sees NEED;
 *    a post made while the consumer sleeps costs one system call.
 *    (Equivalent to store; fs_smp_mb(); load on each side, and it
 *    interoperates with a peer built that way, but the seq_cst store is
 *    one locked xchg on x86-64 with every compiler, where clang turns a
 *    seq_cst fence into a much slower mfence; on arm64 it is stlr + ldar
 *    instead of a dmb; and ThreadSanitizer models it, which it does not
 *    do for fences.)
 *  - Asymmetric wake-up (FS_RING_F_ASYM in `features`, line 0): the
 *    barrier above costs the producer a cross-core round trip on every
 *    post (~0.3-0.6 us), while the consumer goes to sleep rarely.  So the
 *    consumer pays for both: between its flags store and its tail load it
 *    calls membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED), which runs a full
 *    barrier on every CPU running a thread of a registered process, and a
 *    producer that registered (MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED)
 *    posts with store_release(tail), a compiler barrier, load_relaxed(flags):
 *    no locked instruction.  Either the producer's tail store precedes that
 *    barrier in its program order (then the consumer's tail load sees it)
 *    or its flags load follows it (then it sees NEED): the same guarantee
 *    (the pattern of liburcu's and the kernel's sys_membarrier users).  The
 *    consumer sets the feature at format time only where the kernel offers
 *    the command; a producer that cannot register, or an older one that
 *    does not know the bit, keeps the seq_cst post, which stays correct
 *    against either consumer (a full barrier is stronger).  The
 *    membarrier costs the consumer one system call and an IPI per engine
 *    CPU each time it goes to sleep; a wake-up costs what it did.
 *  - The consumer trusts nothing in the ring.  It keeps its own head and
 *    its own copy of entries (never re-read from shared memory); a tail
 *    more than `entries` ahead of head is counted (bad_index) and the ring
 *    is resynchronised; a record of unknown type or bad aux is counted
 *    (bad_record) and skipped.  Model bounds (layer, expert, card) are the
 *    caller's check.
 *  - A full ring refuses the post (-ENOBUFS); the producer counts it and
 *    drops the newest record.  The producer never blocks.
 */
#ifndef FS_RING_H
#define FS_RING_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "fs_atomic.h"
#include "fs_proto.h"
#include "fs_rec.h" /* fs_rec_valid: the structural check */

#define FS_RING_MAGIC 0x474e5246u /* "FRNG" little-endian */
#define FS_RING_NEED_WAKEUP 1u
#define FS_RING_F_ASYM 1u /* features: the consumer membarriers before it sleeps */
#define FS_RING_MIN_ENTRIES 16u
#define FS_RING_MAX_ENTRIES (1u << 24)

struct fs_ring_hdr {
	/* line 0: written once by the creator (the daemon), read-only after */
	uint32_t magic;
	uint32_t version;    /* FS_PROTO_VERSION */
	uint32_t entries;    /* power of two, FS_RING_MIN..MAX_ENTRIES */
	uint32_t rec_size;   /* sizeof(struct fs_rec) */
	uint32_t rec_offset; /* byte offset of record 0 from the header */
	uint32_t features;   /* FS_RING_F_*: what the consumer does (0: nothing extra) */
	uint32_t pad0[10];
	/* line 1: producer */
	uint32_t tail;
	uint32_t full; /* records the producer dropped on a full ring (its own
			  count; the device ring's producer keeps it here) */
	uint32_t pad1[14];
	/* line 2: consumer */
	uint32_t head;
	uint32_t pad2[15];
	/* line 3: wake-up handshake */
	uint32_t flags;
	uint32_t wake_seq;
	uint32_t pad3[14];
};

_Static_assert(sizeof(struct fs_ring_hdr) == 4 * FS_CACHELINE, "ring header is 4 lines");
_Static_assert(offsetof(struct fs_ring_hdr, tail) == 1 * FS_CACHELINE, "tail on line 1");
_Static_assert(offsetof(struct fs_ring_hdr, full) == 1 * FS_CACHELINE + 4, "full on line 1");
_Static_assert(offsetof(struct fs_ring_hdr, head) == 2 * FS_CACHELINE, "head on line 2");
_Static_assert(offsetof(struct fs_ring_hdr, flags) == 3 * FS_CACHELINE, "flags on line 3");
_Static_assert(offsetof(struct fs_ring_hdr, wake_seq) == 3 * FS_CACHELINE + 4, "wake_seq");

#define FS_RING_REC_OFFSET ((uint32_t)sizeof(struct fs_ring_hdr))

/* Bytes a ring of `entries` records occupies (header + records). */
static inline size_t fs_ring_bytes(uint32_t entries)
{
	return (size_t)FS_RING_REC_OFFSET + (size_t)entries * sizeof(struct fs_rec);
}

/* ---- producer (engine side) ------------------------------------------ */

struct fs_ring_prod {
	struct fs_ring_hdr *hdr;
	struct fs_rec *recs;
	uint32_t mask;
	uint32_t tail;       /* private: the producer's truth */
	uint32_t head_cache; /* last head read from the consumer */
	uint32_t asym;       /* FS_RING_F_ASYM offered and this process registered */
};

/* Slow path of the wake-up: clear NEED, bump wake_seq, futex_wake. */
void fs_ring_wake(struct fs_ring_hdr *hdr);

/* Publish the producer's tail (p->tail) and wake the consumer if it asked
 * for it: the producer half of the wake-up handshake.  fs_ring_post*()
 * call it; calling it again is harmless. */
static inline void fs_ring_kick(struct fs_ring_prod *p)
{
	uint32_t flags;
	if (fs_likely(p->asym)) {
		/* The consumer's membarrier orders these (see the rules above):
		 * only the compiler must keep the load after the store. */
		fs_store_release(&p->hdr->tail, p->tail);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		flags = fs_load_relaxed(&p->hdr->flags);
	} else {
		/* seq_cst store, then seq_cst load: ordered against the consumer's
		 * flags store and tail load in fs_ring_sleep_prepare(). */
		__atomic_store_n(&p->hdr->tail, p->tail, __ATOMIC_SEQ_CST);
		flags = __atomic_load_n(&p->hdr->flags, __ATOMIC_SEQ_CST);
	}
	if (fs_unlikely(flags & FS_RING_NEED_WAKEUP))
		fs_ring_wake(p->hdr);
}

/* Free records as far as the producer can tell (re-reads head if needed). */
static inline uint32_t fs_ring_space(struct fs_ring_prod *p, uint32_t want)
{
	uint32_t size = p->mask + 1;
	uint32_t used = p->tail - p->head_cache;
	if (size - used < want || used > size) {
		p->head_cache = fs_load_acquire(&p->hdr->head);
		used = p->tail - p->head_cache;
		if (used > size) /* consumer wrote nonsense: treat as full */
			return 0;
	}
	return size - used;
}

/* Ask for a cache line with the intent to write it (x86 PREFETCHW: a NOP
 * on the few CPUs without it).  FS_RING_PREFETCH_HOOK: a function a test
 * defines before it includes this header, to see which lines are asked for
 * (fs_ring_test); nothing elsewhere. */
static inline void fs_ring_prefetch_w(const void *a)
{
#ifdef FS_RING_PREFETCH_HOOK
	FS_RING_PREFETCH_HOOK(a);
#endif
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("prefetchw %0" ::"m"(*(const char *)a));
#else
	__builtin_prefetch(a, 1, 3);
#endif
}

#define FS_RING_RECS_PER_LINE (FS_CACHELINE / (uint32_t)sizeof(struct fs_rec))
/* Records: how far past its tail the producer asks for lines to write
 * (fs_ring_post_ahead, fs_ring_post_batch).  The producer only: the
 * consumer prefetches nothing, its one bulk copy in fs_ring_consume()
 * overlaps the lines' transfers by itself. */
#define FS_RING_AHEAD 64u

/*
 * 1 when the whole cache line holding record `pos` (a free-running index)
 * lies in the producer's free space [tail, tail + space): all of its
 * FS_RING_RECS_PER_LINE records, not only `pos`.  A line that starts
 * before tail may hold records the consumer has yet to read, and one that
 * ends at or past tail + space does.  (Records sit on line boundaries:
 * rec_offset is four lines and fs_ring_format() takes line-aligned memory
 * only; a prefetch is a hint, so a misaligned mapping would cost time,
 * never a record.)
 */
static inline int fs_ring_line_free(uint32_t tail, uint32_t space, uint32_t pos)
{
	uint32_t first = (pos & ~(FS_RING_RECS_PER_LINE - 1)) - tail; /* huge when before tail */
	return first < space && space - first >= FS_RING_RECS_PER_LINE;
}

/*
 * fs_ring_post() with the producer's prefetch `ahead` records ahead (0:
 * none; bench/ring measures both).  Why: the consumer read the line a lap
 * ago, so the producer's store to it waits for the line to come back, and
 * stores leave the CPU in order: one such store holds up every later one
 * (the tail's too).  Asking for the line `ahead` records early, once per
 * line, takes that wait off the post.  Only while the producer's (cached)
 * view says the line is free: never a line the consumer has yet to read.
 */
static inline int fs_ring_post_ahead(struct fs_ring_prod *p, const struct fs_rec *r, uint32_t ahead)
{
	uint32_t space = fs_ring_space(p, 1);
	if (fs_unlikely(space == 0))
		return -ENOBUFS;
	if (ahead && (p->tail & (FS_RING_RECS_PER_LINE - 1)) == 0 &&
	    fs_ring_line_free(p->tail, space, p->tail + ahead))
		fs_ring_prefetch_w(&p->recs[(p->tail + ahead) & p->mask]);
	p->recs[p->tail & p->mask] = *r;
	p->tail++;
	fs_ring_kick(p); /* publishes tail */
	return 0;
}

/* Post one record.  0, or -ENOBUFS when the ring is full (nothing written). */
static inline int fs_ring_post(struct fs_ring_prod *p, const struct fs_rec *r)
{
	return fs_ring_post_ahead(p, r, FS_RING_AHEAD);
}

/* Post n records with one tail update: all of them, or -ENOBUFS and none. */
static inline int fs_ring_post_batch(struct fs_ring_prod *p, const struct fs_rec *r, uint32_t n)
{
	if (fs_unlikely(n == 0))
		return 0;
	uint32_t space = fs_ring_space(p, n);
	if (fs_unlikely(space < n))
		return -ENOBUFS;
	uint32_t idx = p->tail & p->mask;
	uint32_t first = p->mask + 1 - idx;
	if (first > n)
		first = n;
	/* The lines after this batch, as fs_ring_post_ahead() does for one
	 * (further lines are further from tail: the first one not free ends it). */
	for (uint32_t i = 0; i < n && fs_ring_line_free(p->tail, space, p->tail + n + FS_RING_AHEAD + i);
	     i += FS_RING_RECS_PER_LINE)
		fs_ring_prefetch_w(&p->recs[(p->tail + n + FS_RING_AHEAD + i) & p->mask]);
	memcpy(&p->recs[idx], r, (size_t)first * sizeof(*r));
	memcpy(&p->recs[0], r + first, (size_t)(n - first) * sizeof(*r));
	p->tail += n;
	fs_ring_kick(p); /* publishes tail */
	return 0;
}

/* Attach a producer to a ring the daemon formatted in `mem` (`size` bytes).
 * Validates the header; -EPROTO on a bad magic/version, -EINVAL on a bad size.
 * Where the ring offers FS_RING_F_ASYM, registers this process for the
 * consumer's membarrier and posts without the full barrier (p->asym). */
int fs_ring_prod_init(struct fs_ring_prod *p, void *mem, size_t size);

/* ---- consumer (daemon side) ------------------------------------------ */

struct fs_ring_cons {
	struct fs_ring_hdr *hdr;
	const struct fs_rec *recs;
	uint32_t mask; /* private copies, never re-read from the ring */
	uint32_t entries;
	uint32_t head; /* private: the consumer's truth */
	uint32_t asym; /* private: FS_RING_F_ASYM offered (sleep must membarrier) */
	uint64_t consumed;
	uint64_t bad_index;  /* impossible tail seen (ring resynchronised) */
	uint64_t bad_record; /* unknown type / bad aux, skipped */
};

/* Format `mem` as an empty ring of `entries` (power of two) and attach a
 * consumer to it.  -EINVAL when entries is out of range or size too small.
 * Offers FS_RING_F_ASYM where fs_ring_asym_available(). */
int fs_ring_format(struct fs_ring_cons *c, void *mem, size_t size, uint32_t entries);

/* This kernel runs membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) and the
 * environment does not say FS_RING_ASYM=0 (asked once per process). */
int fs_ring_asym_available(void);

/* Before any producer attaches: offer FS_RING_F_ASYM (on = 1, where
 * available) or not (on = 0: the seq_cst handshake on both sides). */
void fs_ring_set_asym(struct fs_ring_cons *c, int on);

/*
 * Copy up to `max` valid records into `out` and release their space.
 * Returns how many were written to `out`.  Invalid records are counted and
 * dropped; an impossible tail resynchronises the ring.
 *
 * The records are copied out in one go (two memcpy across the array's
 * end: wide loads, the transfers of the lines from the producer's cache
 * overlapping), then checked in the private copy, which is the only one
 * read after that: the producer may rewrite the ring under us once head
 * moves, and a record is read from shared memory exactly once.
 */
static inline uint32_t fs_ring_consume(struct fs_ring_cons *c, struct fs_rec *out, uint32_t max)
{
	uint32_t tail = fs_load_acquire(&c->hdr->tail);
	uint32_t avail = tail - c->head;
	if (avail == 0)
		return 0;
	if (fs_unlikely(avail > c->entries)) {
		c->bad_index++;
		c->head = tail;
		fs_store_release(&c->hdr->head, c->head);
		return 0;
	}
	if (avail > max)
		avail = max;
	uint32_t idx = c->head & c->mask;
	uint32_t first = c->entries - idx;
	if (first > avail)
		first = avail;
	memcpy(out, &c->recs[idx], (size_t)first * sizeof(*out));
	memcpy(out + first, &c->recs[0], (size_t)(avail - first) * sizeof(*out));
	c->head += avail;
	c->consumed += avail;
	fs_store_release(&c->hdr->head, c->head);
	uint32_t n = 0;
	for (uint32_t i = 0; i < avail; i++) {
		if (fs_likely(fs_rec_valid(&out[i]))) {
			if (fs_unlikely(n != i))
				out[n] = out[i];
			n++;
		} else {
			c->bad_record++;
		}
	}
	return n;
}

/* Records pending, as the consumer sees them now (0 when tail is insane). */
static inline uint32_t fs_ring_pending(const struct fs_ring_cons *c)
{
	uint32_t avail = fs_load_acquire(&c->hdr->tail) - c->head;
	return avail > c->entries ? 1 : avail; /* insane: let consume() count it */
}

/*
 * A polling consumer's pace (issue 20): take records in groups of at least
 * `group` while the producer is still posting, and whatever is there once
 * the tail has not moved on since the previous call (*last: the pending
 * count that call saw; 0 to start).  Returns what fs_ring_consume()
 * returns, or 0 while it waits for the group to fill.
 *
 * Why: each look at the tail takes its line out of the producer's cache,
 * and the producer's next post then waits for it back (a cross-core round
 * trip); a consumer that looks once per group lets a streaming producer
 * post from its own cache.  The protocol is unchanged: every post is
 * visible at once, and a sleeping consumer is woken as before.  A record
 * waits at most one more call when the producer pauses, and at most
 * min(group, max) - 1 more calls while it keeps posting, however little
 * per call: it waits only while the pending count grows (a tail moved
 * back, a hostile producer's, ends the wait too), and the count stays
 * under the group.  The daemon does not use it: its hot pass drains each
 * ring until a look finds it empty (fse_pass.c, drain_ring), and the rest
 * of the pass spaces those looks from the next pass's; this is for a
 * consumer that does nothing but poll (bench/ring measures both).
 */
static inline uint32_t fs_ring_consume_group(struct fs_ring_cons *c, struct fs_rec *out, uint32_t max,
					     uint32_t group, uint32_t *last)
{
	uint32_t pend = fs_ring_pending(c);
	if (pend == 0)
		return 0;
	if (pend < group && pend < max && pend > *last) { /* the tail moved on: more is coming */
		*last = pend;
		return 0;
	}
	*last = 0;
	return fs_ring_consume(c, out, max);
}

/*
 * Sleep handshake, consumer side.  fs_ring_sleep_prepare() reads wake_seq
 * into *seq, sets NEED_WAKEUP and fences; it returns nonzero when records
 * arrived meanwhile (then it has cleared the flag again: do not sleep).
 * Otherwise wait with fs_futex_wait*(&hdr->wake_seq, *seq, ...) and call
 * fs_ring_sleep_done() when awake.
 *
 * A consumer of several rings splits it, so that one membarrier serves
 * them all: fs_ring_sleep_arm() on each (reads *seq, sets NEED), then
 * fs_ring_sleep_fence() once with nonzero `asym` when any ring has c->asym
 * (it returns nonzero when the barrier failed: do not sleep), then
 * fs_ring_sleep_check() on each (nonzero: records arrived, flag cleared).
 */
int fs_ring_sleep_prepare(struct fs_ring_cons *c, uint32_t *seq);
void fs_ring_sleep_arm(struct fs_ring_cons *c, uint32_t *seq);
int fs_ring_sleep_fence(int asym);
int fs_ring_sleep_check(struct fs_ring_cons *c);
void fs_ring_sleep_done(struct fs_ring_cons *c);

#endif /* FS_RING_H */
