/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_dev_ring.c: the device ring, seen from the engine (proto/fs_ring_dev.h).
 *
 * fs_dev_ring_enable() allocates the descriptor in pinned, device-mapped
 * host memory and registers the current client region with CUDA, so a
 * kernel can write records into its device ring.  Every later attachment
 * (a restarted daemon) is registered by the background thread as it
 * attaches, and the descriptor's one word is swapped to the new ring.
 *
 * A registered region is never unmapped before fs_client_close: a kernel
 * still in flight (or a graph replayed later) may hold the old address.
 * Each restart of the daemon thus keeps one small region (a header and two
 * rings) until close; restarts are rare, and this is the price of never
 * letting a GPU write to memory the process has given back.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs_client_internal.h"

struct fs_dev_keep {
	struct fs_shm shm;
	struct fs_dev_keep *next;
};

static uint32_t log2u(uint32_t x)
{
	uint32_t l = 0;
	while ((1u << l) < x)
		l++;
	return l;
}

/* Map the attachment's device ring (every attach; no CUDA involved). */
static int dev_ring_map(struct fs_client *c, struct fs_att *a)
{
	const struct fs_client_hdr *h = a->ch;
	uint64_t off = h->off_dev_ring, len = h->dev_ring_bytes;
	if (off == 0)
		return 0; /* a daemon without device rings: enable says so */
	if (off % FS_CACHELINE || off > a->cshm.bytes || len > a->cshm.bytes - off) {
		fs_set_error(c, "client region: bad device ring bounds");
		return -EBADMSG;
	}
	struct fs_ring_prod p;
	int r = fs_ring_prod_init(&p, (char *)a->cshm.base + off, (size_t)len);
	if (r < 0) {
		fs_set_error(c, "client region: bad device ring (%s)", strerror(-r));
		return r;
	}
	a->dev_hdr = p.hdr;
	a->dev_log2e = log2u(p.mask + 1);
	return 0;
}

/* Register the attachment's region with CUDA (once) and point the
 * descriptor at its ring.  Called with dev_lock held and c->dev_desc set. */
static int dev_publish(struct fs_client *c, struct fs_att *a)
{
	char err[256];
	if (!a->dev_hdr) {
		fs_set_error(c, "the daemon offers no device ring (an older foresightd)");
		return -ENOTSUP;
	}
	if (!a->dev_registered) {
		void *dev = NULL;
		int r = fs_cuda_register(a->cshm.base, a->cshm.bytes, &dev, err, sizeof(err));
		if (r < 0) {
			fs_set_error(c, "device ring: %s", err);
			return r;
		}
		a->dev_registered = 1;
		a->dev_addr = (uint64_t)(uintptr_t)dev +
			      (uint64_t)((char *)a->dev_hdr - (char *)a->cshm.base);
	}
	if (FS_DEV_DESC_ADDR(a->dev_addr) != a->dev_addr) {
		fs_set_error(c, "device ring: device address %#llx does not fit the descriptor",
			     (unsigned long long)a->dev_addr);
		return -ERANGE;
	}
	fs_store_release(&a->ch->dev_armed, 1);
	fs_store_release(&c->dev_desc->word, FS_DEV_DESC(a->dev_addr, a->dev_log2e));
	return 0;
}

int fs_dev_att_create(struct fs_client *c, struct fs_att *a)
{
	return dev_ring_map(c, a);
}

int fs_dev_sync(struct fs_client *c)
{
	int r = 0;
	pthread_mutex_lock(&c->dev_lock);
	struct fs_att *a = fs_load_acquire(&c->att);
	if (c->dev_desc && a && !fs_load_relaxed(&a->dead))
		r = dev_publish(c, a);
	pthread_mutex_unlock(&c->dev_lock);
	return r;
}

/* Returns 1 when it took the attachment's client region (registered with
 * CUDA: kept mapped until close), 0 when the caller unmaps it. */
int fs_dev_att_destroy(struct fs_client *c, struct fs_att *a)
{
	if (!a->dev_registered)
		return 0;
	pthread_mutex_lock(&c->dev_lock);
	/* Kernels launched from now on count their records as dropped, until
	 * a new attachment takes the word. */
	if (FS_DEV_DESC_ADDR(fs_load_acquire(&c->dev_desc->word)) == a->dev_addr)
		fs_store_release(&c->dev_desc->word, 0);
	struct fs_dev_keep *k = calloc(1, sizeof(*k));
	if (k) {
		k->shm = a->cshm;
		k->next = c->dev_keep;
		c->dev_keep = k;
	} /* else: leak the mapping rather than unmap memory a GPU may write */
	a->cshm = (struct fs_shm){.fd = -1};
	pthread_mutex_unlock(&c->dev_lock);
	return 1;
}

void fs_dev_close(struct fs_client *c)
{
	while (c->dev_keep) {
		struct fs_dev_keep *k = c->dev_keep;
		c->dev_keep = k->next;
		fs_cuda_unregister(k->shm.base);
		fs_shm_close(&k->shm);
		free(k);
	}
	if (c->dev_desc)
		fs_cuda_pinned_free(c->dev_desc);
	c->dev_desc = NULL;
}

int fs_dev_ring_enable(fs_client *c, void **desc_dev)
{
	char err[256];
	if (!c || !desc_dev)
		return -EINVAL;
	pthread_mutex_lock(&c->dev_lock);
	if (!c->dev_desc) {
		void *host = NULL, *dev = NULL;
		int r = fs_cuda_pinned_alloc(sizeof(struct fs_dev_desc), &host, &dev, err, sizeof(err));
		if (r < 0) {
			fs_set_error(c, "device ring: %s", err);
			pthread_mutex_unlock(&c->dev_lock);
			return r;
		}
		memset(host, 0, sizeof(struct fs_dev_desc));
		c->dev_desc = host;
		c->dev_desc_dev = dev;
	}
	pthread_mutex_unlock(&c->dev_lock);
	/* The current attachment now, later ones as the background thread
	 * installs them (it calls fs_dev_sync too: whichever runs last sees
	 * the newest attachment). */
	int r = fs_dev_sync(c);
	if (r < 0)
		return r;
	*desc_dev = c->dev_desc_dev;
	return 0;
}

uint64_t fs_dev_ring_dropped(const fs_client *c)
{
	uint64_t n = 0;
	if (c->dev_desc)
		n += fs_load_relaxed(&c->dev_desc->detached);
	struct fs_att *a = fs_load_acquire(&((fs_client *)c)->att);
	if (a && a->dev_hdr)
		n += fs_load_relaxed(&a->dev_hdr->full);
	return n;
}

/* The CPU twin of the kernel's post: the same stateless producer (tail read
 * back from the ring), then the host ring's wake-up handshake. */
int fs_dev_ring_post_predict(fs_client *c, uint32_t window, uint32_t layer, uint32_t expert, uint32_t card,
			     float score, unsigned horizon)
{
	/* What does not fit the record's fields; the rest is fs_rec_check's. */
	if (layer > 0xffff || expert > 0xffff || card > 0xffff || horizon > FS_PRED_HORIZON_MAX)
		return -EINVAL;
	struct fs_rec r = {.type = FS_REC_PREDICT,
			   .aux = FS_PRED_AUX(horizon, FS_SRC_KERNEL),
			   .layer = (uint16_t)layer,
			   .expert = (uint16_t)expert,
			   .card = (uint16_t)card,
			   .window = window};
	memcpy(&r.value, &score, sizeof(score));
	if (fs_rec_arg_check(&r) != 0)
		return -EINVAL;
	struct fs_att *a = fs_load_acquire(&c->att);
	if (!a || fs_load_relaxed(&a->dead) || !a->dev_hdr) {
		__atomic_fetch_add(&c->dropped, 1, __ATOMIC_RELAXED);
		return a && !a->dev_hdr ? -ENOTSUP : -ENOTCONN;
	}
	if (fs_rec_post_check(a, &r) != 0)
		return -EINVAL;
	struct fs_ring_hdr *h = a->dev_hdr;
	uint32_t mask = (1u << a->dev_log2e) - 1u;
	uint32_t tail = fs_load_relaxed(&h->tail), head = fs_load_acquire(&h->head);
	if (tail - head > mask) { /* full (or a head we cannot believe) */
		fs_store_relaxed(&h->full, fs_load_relaxed(&h->full) + 1);
		__atomic_fetch_add(&c->dropped, 1, __ATOMIC_RELAXED);
		return -ENOBUFS;
	}
	struct fs_rec *recs = (struct fs_rec *)((char *)h + FS_RING_REC_OFFSET);
	recs[tail & mask] = r;
	/* seq_cst store of our tail, then seq_cst load of the host ring's
	 * flags: the daemon's sleep stores those flags, then loads this tail. */
	__atomic_store_n(&h->tail, tail + 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&a->prod.hdr->flags, __ATOMIC_SEQ_CST) & FS_RING_NEED_WAKEUP)
		fs_ring_wake(a->prod.hdr);
	return 0;
}
