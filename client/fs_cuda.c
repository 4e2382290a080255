/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_cuda.c: open a CUDA card's slot pool in this process.
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
		snprintf(err, len,
			 "the daemon serves CUDA cards but no CUDA runtime (libcudart.so) could be loaded");
		rt_state = -1;
		return -ENOSYS;
	}
#define SYM(f) (*(void **)&rt.f = dlsym(rt.h, "cuda" #f))
	if (!SYM(GetDevice) || !SYM(SetDevice) || !SYM(DeviceGetByPCIBusId) || !SYM(IpcOpenMemHandle) ||
	    !SYM(IpcCloseMemHandle) || !SYM(GetErrorString)) {
		snprintf(err, len, "libcudart.so lacks an IPC entry point");
		rt_state = -1;
		return -ENOSYS;
	}
#undef SYM
	rt_state = 1;
	return 0;
}

int fs_cuda_open_pool(const char *ipc_hex, const char *pci, void **dev_ptr, int *dev, char *err, size_t len)
{
	struct fs_ipc_handle h;
	if (fs_hex_decode(ipc_hex, &h, sizeof(h)) < 0 || !pci) {
		snprintf(err, len, "attach: malformed IPC handle or PCI bus id for a CUDA card");
		return -EPROTO;
	}
	pthread_mutex_lock(&lock);
	int r = load_runtime(err, len);
	if (r < 0)
		goto out;
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
