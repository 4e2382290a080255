/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_cuda.c: open a CUDA card's slot pool in this process, and the peer
 * path: other cards' pools opened in a card's context (end of the file).
 *
 * The library does not link the CUDA runtime: engines bring their own (a
 * PyTorch process already has one loaded), and an engine without a GPU must
 * not need it.  The runtime is found with dlopen at attach time, only when
 * the daemon serves CUDA cards, and used only here: attach and detach, never
 * on a per-layer path.  Pools are cached per process (by IPC handle), since a
 * process may open one handle only once.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_client_internal.h"
#include "fs_hex.h"

/* cudaIpcMemHandle_t is a struct of 64 bytes, passed by value. */
struct fs_ipc_handle {
	char reserved[64];
};

struct cudart {
	void *h;
	int (*GetDevice)(int *);
	int (*SetDevice)(int);
	int (*DeviceGetByPCIBusId)(int *, const char *);
	int (*IpcOpenMemHandle)(void **, struct fs_ipc_handle, unsigned int);
	int (*IpcCloseMemHandle)(void *);
	const char *(*GetErrorString)(int);
	/* device posting (fs_dev_ring.c) */
	int (*HostAlloc)(void **, size_t, unsigned int);
	int (*FreeHost)(void *);
	int (*HostRegister)(void *, size_t, unsigned int);
	int (*HostUnregister)(void *);
	int (*HostGetDevicePointer)(void **, void *, unsigned int);
};

struct pool_ref {
	struct fs_ipc_handle handle;
	int dev;
	void *ptr;
	int refs;
	struct pool_ref *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct cudart rt;
static int rt_state; /* 0 untried, 1 loaded, -1 unavailable */
static struct pool_ref *pools;

static int load_runtime(char *err, size_t len)
{
	if (rt_state)
		return rt_state > 0 ? 0 : -ENOSYS;
	static const char *const names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !rt.h; i++)
		rt.h = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
	if (!rt.h) {
		snprintf(err, len, "no CUDA runtime (libcudart.so) could be loaded");
		rt_state = -1;
		return -ENOSYS;
	}
#define SYM(f) (*(void **)&rt.f = dlsym(rt.h, "cuda" #f))
	if (!SYM(GetDevice) || !SYM(SetDevice) || !SYM(DeviceGetByPCIBusId) || !SYM(IpcOpenMemHandle) ||
	    !SYM(IpcCloseMemHandle) || !SYM(GetErrorString) || !SYM(HostAlloc) || !SYM(FreeHost) ||
	    !SYM(HostRegister) || !SYM(HostUnregister) || !SYM(HostGetDevicePointer)) {
		snprintf(err, len, "libcudart.so lacks an IPC entry point");
		rt_state = -1;
		return -ENOSYS;
	}
#undef SYM
	rt_state = 1;
	return 0;
}

static void peer_open_wanted(struct pool_ref *p);
static void peer_close_all(const struct pool_ref *p);

int fs_cuda_open_pool(const char *ipc_hex, const char *pci, void **dev_ptr, int *dev, char *err, size_t len)
{
	struct fs_ipc_handle h;
	if (fs_hex_decode(ipc_hex, &h, sizeof(h)) < 0 || !pci) {
		snprintf(err, len, "attach: malformed IPC handle or PCI bus id for a CUDA card");
		return -EPROTO;
	}
	pthread_mutex_lock(&lock);
	int r = load_runtime(err, len);
	if (r < 0) {
		char why[160];
		snprintf(why, sizeof(why), "%s", err);
		snprintf(err, len, "the daemon serves CUDA cards but %s", why);
		goto out;
	}
	for (struct pool_ref *p = pools; p; p = p->next) {
		if (memcmp(&p->handle, &h, sizeof(h)) == 0) {
			p->refs++;
			*dev_ptr = p->ptr;
			*dev = p->dev;
			goto out;
		}
	}
	/* The daemon's card, as this process numbers its devices. */
	int d, prev = 0, e;
	if ((e = rt.DeviceGetByPCIBusId(&d, pci)) != 0) {
		snprintf(err, len, "CUDA card %s is not visible in this process: %s", pci,
			 rt.GetErrorString(e));
		r = -ENODEV;
		goto out;
	}
	rt.GetDevice(&prev);
	rt.SetDevice(d);
	void *ptr = NULL;
	e = rt.IpcOpenMemHandle(&ptr, h, 1 /* cudaIpcMemLazyEnablePeerAccess */);
	rt.SetDevice(prev);
	if (e != 0) {
		snprintf(err, len, "cudaIpcOpenMemHandle for card %s: %s", pci, rt.GetErrorString(e));
		r = -EIO;
		goto out;
	}
	struct pool_ref *p = calloc(1, sizeof(*p));
	if (!p) {
		rt.IpcCloseMemHandle(ptr);
		r = -ENOMEM;
		goto out;
	}
	p->handle = h;
	p->dev = d;
	p->ptr = ptr;
	p->refs = 1;
	p->next = pools;
	pools = p;
	*dev_ptr = ptr;
	*dev = d;
	peer_open_wanted(p); /* the peer path, when fs_peer_open asked for it */
out:
	pthread_mutex_unlock(&lock);
	return r;
}

void fs_cuda_close_pool(void *dev_ptr)
{
	pthread_mutex_lock(&lock);
	for (struct pool_ref **pp = &pools; *pp; pp = &(*pp)->next) {
		struct pool_ref *p = *pp;
		if (p->ptr != dev_ptr)
			continue;
		if (--p->refs == 0) {
			peer_close_all(p);
			int prev = 0;
			rt.GetDevice(&prev);
			rt.SetDevice(p->dev);
			rt.IpcCloseMemHandle(p->ptr);
			rt.SetDevice(prev);
			*pp = p->next;
			free(p);
		}
		break;
	}
	pthread_mutex_unlock(&lock);
}

/* ---- pinned host memory for device posting (fs_dev_ring.c) ----------- */

/* cudaHostAllocPortable | cudaHostAllocMapped, and the same values for
 * cudaHostRegisterPortable | cudaHostRegisterMapped: every context of the
 * process may use it, and kernels reach it through a device address. */
#define FS_PINNED_FLAGS 3u

int fs_cuda_pinned_alloc(size_t bytes, void **host, void **dev, char *err, size_t len)
{
	pthread_mutex_lock(&lock);
	int r = load_runtime(err, len), e;
	if (r == 0 && (e = rt.HostAlloc(host, bytes, FS_PINNED_FLAGS)) != 0) {
		snprintf(err, len, "cudaHostAlloc(%zu): %s", bytes, rt.GetErrorString(e));
		r = -ENOMEM;
	} else if (r == 0 && (e = rt.HostGetDevicePointer(dev, *host, 0)) != 0) {
		snprintf(err, len, "cudaHostGetDevicePointer: %s", rt.GetErrorString(e));
		rt.FreeHost(*host);
		r = -EIO;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

void fs_cuda_pinned_free(void *host)
{
	pthread_mutex_lock(&lock);
	if (rt_state > 0)
		rt.FreeHost(host);
	pthread_mutex_unlock(&lock);
}

int fs_cuda_register(void *p, size_t bytes, void **dev, char *err, size_t len)
{
	pthread_mutex_lock(&lock);
	int r = load_runtime(err, len), e;
	if (r == 0 && (e = rt.HostRegister(p, bytes, FS_PINNED_FLAGS)) != 0) {
		snprintf(err, len, "cudaHostRegister(%zu bytes): %s", bytes, rt.GetErrorString(e));
		r = -EIO;
	} else if (r == 0 && (e = rt.HostGetDevicePointer(dev, p, 0)) != 0) {
		snprintf(err, len, "cudaHostGetDevicePointer: %s", rt.GetErrorString(e));
		rt.HostUnregister(p);
		r = -EIO;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

void fs_cuda_unregister(void *p)
{
	pthread_mutex_lock(&lock);
	if (rt_state > 0)
		rt.HostUnregister(p);
	pthread_mutex_unlock(&lock);
}

/* ---- the peer path (several cards) ------------------------------------ */
/*
 * An engine on card A reads card B's slots through B's pool opened in A's
 * device context: cudaIpcOpenMemHandle with A current and
 * cudaIpcMemLazyEnablePeerAccess maps B's memory into A's context over
 * P2P (NVLink or PCIe), where cudaDeviceCanAccessPeer(A, B) allows it.  A
 * process may open a handle once per device, so these mappings live here,
 * per process, beside the pools: one per (pool, reading device).  The
 * per-layer lookup (fs_lookup_from) finds them in a fixed table that it
 * reads without a lock: an entry is published by a release store of its
 * `local` pointer after its other fields, and retired by storing NULL
 * there before its mapping is closed.  An entry a lookup can match belongs
 * to a pool of an attachment the engine still holds a view of, and such a
 * pool is never closed (fs_att_destroy waits for the views), so a matched
 * mapping stays valid while the view is held.
 *
 * What fs_peer_open asked for (the reading devices) is remembered, so the
 * pools of a daemon attached later are opened for those devices as well.
 * A pairing that fails (no peer access, a lost card, an IPC error) is
 * simply absent: the lookup then answers FS_PLACE_UNREACHABLE and the
 * engine computes from the arena, which is always correct.  A card the
 * daemon marks down (fs_daemon_hdr.cards_down) keeps its mappings here
 * until its pool closes (a kernel may still read through one), but no
 * lookup hands one out again: slot_from_entry (fs_epoch.c) refuses the
 * card, and reach_of drops it.
 */
#define FS_PEER_MAX 256u

struct peer_map {
	void *local; /* the pool as its own device maps it (fs_att.dev_base); NULL: free */
	int dev;     /* the reading device */
	void *ptr;   /* the pool in dev's context */
};

static struct peer_map peer_tab[FS_PEER_MAX];
static uint32_t peer_hi;   /* entries in use are below it (atomic) */
static uint64_t peer_devs; /* devices fs_peer_open was called for (under `lock`) */
static int (*can_access_peer)(int *, int, int);

static void *peer_find(const void *local, int dev)
{
	uint32_t n = __atomic_load_n(&peer_hi, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++) {
		struct peer_map *m = &peer_tab[i];
		if (__atomic_load_n(&m->local, __ATOMIC_ACQUIRE) != local ||
		    __atomic_load_n(&m->dev, __ATOMIC_RELAXED) != dev)
			continue;
		void *p = __atomic_load_n(&m->ptr, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&m->local, __ATOMIC_RELAXED) == local)
			return p;
	}
	return NULL;
}

/* Under `lock`. */
static int peer_add(void *local, int dev, void *ptr)
{
	for (uint32_t i = 0; i < FS_PEER_MAX; i++) {
		struct peer_map *m = &peer_tab[i];
		if (m->local != NULL)
			continue;
		__atomic_store_n(&m->dev, dev, __ATOMIC_RELAXED);
		__atomic_store_n(&m->ptr, ptr, __ATOMIC_RELAXED);
		__atomic_store_n(&m->local, local, __ATOMIC_RELEASE);
		if (i >= peer_hi)
			__atomic_store_n(&peer_hi, i + 1, __ATOMIC_RELEASE);
		return 0;
	}
	return -ENOSPC;
}

/* Open pool p in device dev's context.  Under `lock`, runtime loaded.
 * 0 when the mapping exists (now or before). */
static int peer_open(struct pool_ref *p, int dev)
{
	if (dev == p->dev || peer_find(p->ptr, dev))
		return 0;
	if (!can_access_peer)
		*(void **)&can_access_peer = dlsym(rt.h, "cudaDeviceCanAccessPeer");
	int ok = 0;
	if (!can_access_peer || can_access_peer(&ok, dev, p->dev) != 0 || !ok)
		return -ENODEV;
	int prev = 0;
	rt.GetDevice(&prev);
	rt.SetDevice(dev);
	void *ptr = NULL;
	int e = rt.IpcOpenMemHandle(&ptr, p->handle, 1 /* cudaIpcMemLazyEnablePeerAccess */);
	if (e == 0 && peer_add(p->ptr, dev, ptr) < 0) {
		rt.IpcCloseMemHandle(ptr);
		e = -1;
	}
	rt.SetDevice(prev);
	return e == 0 ? 0 : -EIO;
}

/* A pool just opened: open it for every device fs_peer_open asked for. */
static void peer_open_wanted(struct pool_ref *p)
{
	for (int dev = 0; dev < 64; dev++)
		if ((peer_devs >> dev & 1u) && dev != p->dev)
			(void)peer_open(p, dev);
}

/* A pool about to close: its peer mappings first (under `lock`). */
static void peer_close_all(const struct pool_ref *p)
{
	for (uint32_t i = 0; i < peer_hi; i++) {
		struct peer_map *m = &peer_tab[i];
		if (m->local != p->ptr)
			continue;
		__atomic_store_n(&m->local, NULL, __ATOMIC_RELEASE);
		int prev = 0;
		rt.GetDevice(&prev);
		rt.SetDevice(m->dev);
		rt.IpcCloseMemHandle(m->ptr);
		rt.SetDevice(prev);
	}
}

/* What `card` reads now: the published reach less the cards that are
 * down (the daemon clears their bits too; this does not wait for it); 0
 * for a card that is down. */
static uint32_t reach_of(const struct fs_att *a, uint32_t card)
{
	uint32_t all = (uint32_t)((1ull << a->cards) - 1u);
	uint32_t down = fs_load_acquire(&a->dh->cards_down);
	if (down >> card & 1u)
		return 0;
	return (((uint32_t)fs_load_relaxed(&a->dh->peer_reach[card]) & all) | (1u << card)) & ~down;
}

uint32_t fs_card_reach(const fs_client *c, uint32_t card)
{
	const struct fs_att *a = __atomic_load_n(&c->att, __ATOMIC_ACQUIRE);
	if (!a || card >= a->cards)
		return 0;
	return reach_of(a, card);
}

int fs_peer_open(fs_client *c, uint32_t card)
{
	const struct fs_att *a = __atomic_load_n(&c->att, __ATOMIC_ACQUIRE);
	if (!a)
		return -ENOTCONN;
	if (card >= a->cards)
		return -EINVAL;
	uint32_t reach = reach_of(a, card), mask = 1u << card;
	if (reach == 0)
		return -ENODEV; /* the card is down: nothing opens from it */
	if (!a->dev_base[card]) {
		/* Host backend: every pool is mapped in this process already. */
		for (uint32_t j = 0; j < a->cards; j++)
			if ((reach >> j & 1u) && a->pool_base[j])
				mask |= 1u << j;
		return (int)mask;
	}
	pthread_mutex_lock(&lock);
	int dev = a->dev_index[card];
	if (rt_state > 0 && dev >= 0 && dev < 64) {
		peer_devs |= 1ull << dev;
		for (uint32_t j = 0; j < a->cards; j++) {
			if (j == card || !(reach >> j & 1u) || !a->dev_base[j])
				continue;
			for (struct pool_ref *p = pools; p; p = p->next)
				if (p->ptr == a->dev_base[j] && peer_open(p, dev) == 0)
					mask |= 1u << j;
		}
	}
	pthread_mutex_unlock(&lock);
	return (int)mask;
}

static int place(struct fs_place *out, enum fs_place_kind kind, const struct fs_slot *s, const void *host,
		 void *device)
{
	*out = (struct fs_place){
		.kind = (uint32_t)kind,
		.card = s->card,
		.slot = s->slot,
		.gen = s->gen,
		.host = host,
		.device = device,
		.bytes = s->bytes,
	};
	return (int)kind;
}

int fs_lookup_from(const fs_client *c, const struct fs_view *v, uint32_t from, uint32_t layer,
		   uint32_t expert, struct fs_place *out)
{
	struct fs_place tmp;
	if (!out)
		out = &tmp;
	*out = (struct fs_place){.kind = FS_PLACE_MISS};
	const struct fs_att *a = v->att_;
	if (!a || from >= a->cards)
		return FS_PLACE_MISS;
	uint32_t reach = reach_of(a, from);
	if (reach == 0)
		return FS_PLACE_MISS; /* `from` is down: nothing runs on it, the CPU path */
	struct fs_slot s;
	if (fs_lookup(c, v, from, layer, expert, &s))
		return place(out, FS_PLACE_LOCAL, &s, s.host, s.device);
	int unreachable = 0;
	for (uint32_t j = 0; j < a->cards; j++) {
		if (j == from || !fs_lookup(c, v, j, layer, expert, &s))
			continue;
		const void *host = NULL;
		void *device = NULL;
		if (reach >> j & 1u) {
			if (a->pool_base[j]) {
				host = s.host; /* host backend: one address space */
			} else if (a->dev_base[j] && a->dev_base[from]) {
				char *base = peer_find(a->dev_base[j], a->dev_index[from]);
				if (base)
					device = base + ((char *)s.device - (char *)a->dev_base[j]);
			}
		}
		if (host || device)
			return place(out, FS_PLACE_PEER, &s, host, device);
		if (!unreachable) {
			place(out, FS_PLACE_UNREACHABLE, &s, NULL, NULL);
			unreachable = 1;
		}
	}
	return unreachable ? FS_PLACE_UNREACHABLE : FS_PLACE_MISS;
}
