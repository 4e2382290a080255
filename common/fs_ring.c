/* SPDX-License-Identifier: Apache-2.0 */
/* fs_ring.c: the ring's cold paths (format, attach, sleep/wake). */
#include "fs_ring.h"

#include <linux/membarrier.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs_futex.h"

static long membarrier(int cmd)
{
	return syscall(SYS_membarrier, cmd, 0, 0);
}

int fs_ring_asym_available(void)
{
	static int avail = -1; /* asked once: the answer cannot change */
	int a = __atomic_load_n(&avail, __ATOMIC_RELAXED);
	if (a < 0) {
		const char *e = getenv("FS_RING_ASYM");
		long q = membarrier(MEMBARRIER_CMD_QUERY);
		a = !(e && strcmp(e, "0") == 0) && q > 0 && (q & MEMBARRIER_CMD_GLOBAL_EXPEDITED);
		__atomic_store_n(&avail, a, __ATOMIC_RELAXED);
	}
	return a;
}

void fs_ring_set_asym(struct fs_ring_cons *c, int on)
{
	c->asym = on && fs_ring_asym_available();
	c->hdr->features = c->asym ? FS_RING_F_ASYM : 0u;
}

static int is_pow2(uint32_t x)
{
	return x && !(x & (x - 1));
}

int fs_ring_format(struct fs_ring_cons *c, void *mem, size_t size, uint32_t entries)
{
	if (!is_pow2(entries) || entries < FS_RING_MIN_ENTRIES || entries > FS_RING_MAX_ENTRIES)
		return -EINVAL;
	if (mem == NULL || size < fs_ring_bytes(entries) || ((uintptr_t)mem % FS_CACHELINE) != 0)
		return -EINVAL;
	struct fs_ring_hdr *h = mem;
	memset(h, 0, sizeof(*h));
	h->magic = FS_RING_MAGIC;
	h->version = FS_PROTO_VERSION;
	h->entries = entries;
	h->rec_size = (uint32_t)sizeof(struct fs_rec);
	h->rec_offset = FS_RING_REC_OFFSET;
	memset((char *)mem + FS_RING_REC_OFFSET, 0, (size_t)entries * sizeof(struct fs_rec));
	*c = (struct fs_ring_cons){
		.hdr = h,
		.recs = (const struct fs_rec *)((char *)mem + FS_RING_REC_OFFSET),
		.mask = entries - 1,
		.entries = entries,
	};
	fs_ring_set_asym(c, 1);
	return 0;
}

int fs_ring_prod_init(struct fs_ring_prod *p, void *mem, size_t size)
{
	if (mem == NULL || size < sizeof(struct fs_ring_hdr))
		return -EINVAL;
	struct fs_ring_hdr *h = mem;
	if (h->magic != FS_RING_MAGIC || h->version != FS_PROTO_VERSION)
		return -EPROTO;
	uint32_t entries = h->entries;
	if (!is_pow2(entries) || entries < FS_RING_MIN_ENTRIES || entries > FS_RING_MAX_ENTRIES ||
	    h->rec_size != sizeof(struct fs_rec) || h->rec_offset != FS_RING_REC_OFFSET ||
	    size < fs_ring_bytes(entries))
		return -EINVAL;
	uint32_t tail = fs_load_relaxed(&h->tail); /* resume where we (or a
						      previous producer) left */
	/* The light post needs this process registered for the consumer's
	 * membarrier (idempotent, process-wide); without it, the seq_cst post. */
	uint32_t asym = (h->features & FS_RING_F_ASYM) &&
			membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
	*p = (struct fs_ring_prod){
		.hdr = h,
		.recs = (struct fs_rec *)((char *)mem + FS_RING_REC_OFFSET),
		.mask = entries - 1,
		.tail = tail,
		.head_cache = fs_load_acquire(&h->head),
		.asym = asym,
	};
	return 0;
}

void fs_ring_wake(struct fs_ring_hdr *hdr)
{
	/* Clear NEED first so a burst of posts makes one system call. */
	if (__atomic_exchange_n(&hdr->flags, 0u, __ATOMIC_SEQ_CST) & FS_RING_NEED_WAKEUP) {
		__atomic_fetch_add(&hdr->wake_seq, 1u, __ATOMIC_SEQ_CST);
		fs_futex_wake(&hdr->wake_seq, 1);
	}
}

void fs_ring_sleep_arm(struct fs_ring_cons *c, uint32_t *seq)
{
	*seq = fs_load_acquire(&c->hdr->wake_seq);
	/* seq_cst store, then (after the fence, if any) a seq_cst load:
	 * ordered against the producer's tail store and flags load in
	 * fs_ring_kick() (see fs_ring.h). */
	__atomic_store_n(&c->hdr->flags, FS_RING_NEED_WAKEUP, __ATOMIC_SEQ_CST);
}

int fs_ring_sleep_fence(int asym)
{
	/* Every registered producer runs a full barrier before this returns:
	 * its flags load now sees NEED, or our tail load sees its tail. */
	if (asym && membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0)
		return 1;
	return 0;
}

int fs_ring_sleep_check(struct fs_ring_cons *c)
{
	uint32_t tail = __atomic_load_n(&c->hdr->tail, __ATOMIC_SEQ_CST);
	if (tail != c->head) { /* records (or an insane tail: consume counts it) */
		fs_store_relaxed(&c->hdr->flags, 0u);
		return 1;
	}
	return 0;
}

int fs_ring_sleep_prepare(struct fs_ring_cons *c, uint32_t *seq)
{
	fs_ring_sleep_arm(c, seq);
	if (fs_ring_sleep_fence((int)c->asym)) {
		fs_store_relaxed(&c->hdr->flags, 0u);
		return 1; /* no barrier: do not sleep on it */
	}
	return fs_ring_sleep_check(c);
}

void fs_ring_sleep_done(struct fs_ring_cons *c)
{
	fs_store_relaxed(&c->hdr->flags, 0u);
}
