/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_backend.h: foresightd's copy backends (host: fsd_backend_host.c;
 * CUDA: fsd_backend_cuda.c).  A backend is its file, which defines
 * `const struct fsd_backend fsd_backend_<name>` (a stub without `start`
 * where this build lacks what it needs: cuda without nvcc), and its row in
 * FS_BACKENDS (proto/fs_regions.h), from which the declarations below and
 * the table of fsd_backends.c are generated.  A backend is the hot engine's one backend
 * interface (struct fse_backend, daemon/engine/fse.h: bind, submit, poll,
 * card_down, on its own state) plus what the daemon needs around it: probe,
 * start (its state: d->backend_priv, the ops' ctx), stop.  The engine hands
 * it its callbacks at bind (a copy landed, a card broken, the cards down):
 * a backend never names the hot thread.
 */
#ifndef FSD_BACKEND_H
#define FSD_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "fs_regions.h"
#include "fse.h"

struct fsd;
struct fsd_backend {
	const char *name;
	enum fs_backend_kind kind; /* its row of FS_BACKENDS (proto/fs_regions.h) */
	/* Before the regions exist: discover cards, size pools (may be NULL). */
	int (*probe)(struct fsd *d);
	/* Create its state (d->backend_priv: the ops' ctx), the pools, its threads. */
	int (*start)(struct fsd *d);
	/* The engine's backend interface, ctx left NULL (fsd_hot.c sets it to
	 * d->backend_priv).  submit: one copy of cp->bytes bytes from arena
	 * offset cp->src into cp->slot (the engine decided both); the backend
	 * stores ready word 0 before the copy and gen after it, then reports it
	 * through the landed callback or poll. */
	struct fse_backend ops;
	void (*stop)(struct fsd *d);
	/* The attach reply's handle for card `card` where its pool is device
	 * memory an engine opens by handle (may be NULL: the pool is mapped
	 * through its fd, d->pool_ro_fd): the IPC handle in hex and the
	 * card's PCI bus id.  0 or -errno. */
	int (*card_handle)(struct fsd *d, uint32_t card, char *ipc_hex, size_t ipc_len, char *pci,
			   size_t pci_len);
	/* The arena is whole (loaded or kept): the loop thread calls it once,
	 * after start and before the engines are told (layer ready words,
	 * READY=1), so work that needs every byte in (the CUDA backend pins
	 * the arena) is not done by the hot thread at its first copy.  May be
	 * NULL. */
	void (*arena_whole)(struct fsd *d);
	/* 1: its cards' links are stand-ins paced at cfg.bus_gbps (the stats show it). */
	int emulated_bus;
};
/* fsd_backends.c: the backend named `name`, or NULL: *known (may be NULL)
 * says whether the name is a backend at all (1: it is, but this build does
 * not have it).  fsd_backends_list: the names, comma-separated (built: only
 * those this build has). */
const struct fsd_backend *fsd_backend_find(const char *name, int *known);
void fsd_backends_list(char *buf, size_t len, int built);
#define FSD_BACKEND_DECL_ROW(A, NAME, name) extern const struct fsd_backend fsd_backend_##name;
FS_BACKENDS(FSD_BACKEND_DECL_ROW, ~)
#undef FSD_BACKEND_DECL_ROW
/* Record when a copy into (card, slot) was issued (the issued_ns array). */
void fsd_issued(struct fsd *d, uint32_t card, uint32_t slot, uint64_t now);

#endif /* FSD_BACKEND_H */
