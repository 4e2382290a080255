/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_backend.h: foresightd's copy backends (host: fsd_backend_host.c;
 * CUDA: fsd_backend_cuda.c), one row each in FS_BACKENDS (proto/fs_regions.h)
 * and one line in fsd_backends.c.  The hot engine (daemon/engine/fse.h)
 * sees a backend through its narrow interface (submit a copy of N bytes
 * from an arena offset to a slot; report it landed; a card lost): the hot
 * thread (fsd_hot.c) adapts these ops to it.
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
	int (*start)(struct fsd *d);
	/* Hot thread: queue one copy of cp->bytes bytes from arena offset
	 * cp->src into cp->slot (the engine decided both).  The backend stores
	 * ready word 0 before the copy and gen after it, then reports it with
	 * fsd_copy_landed() or through poll. */
	void (*submit)(struct fsd *d, const struct fse_copy *cp);
	/* Hot thread: completions noticed since the last call (may be NULL:
	 * the backend then reports through fsd_copy_landed). */
	unsigned (*poll)(struct fsd *d, struct fse_done *out, unsigned max);
	/* Hot thread: `card` went down (fse_cards.c): drop its queued copies,
	 * forget those in flight; none is submitted to it again (may be NULL). */
	void (*card_down)(struct fsd *d, uint32_t card);
	void (*stop)(struct fsd *d);
};
/* fsd_backends.c: the backend named `name`, or NULL: *known (may be NULL)
 * says whether the name is a backend at all (1: it is, but this build does
 * not have it).  fsd_backends_list: the names, comma-separated (built: only
 * those this build has). */
const struct fsd_backend *fsd_backend_find(const char *name, int *known);
void fsd_backends_list(char *buf, size_t len, int built);
extern const struct fsd_backend fsd_backend_host;
#ifdef FSD_HAVE_CUDA
extern const struct fsd_backend fsd_backend_cuda;
const char *fsd_cuda_card_pci(struct fsd *d, uint32_t card);
int fsd_cuda_card_ipc(struct fsd *d, uint32_t card, char *hex, size_t len);
#endif
/* Record when a copy into (card, slot) was issued (the issued_ns array). */
void fsd_issued(struct fsd *d, uint32_t card, uint32_t slot, uint64_t now);
/* A copy landed (any thread): to the hot engine. */
void fsd_copy_landed(struct fsd *d, const struct fse_done *done);
/* The card is down, reported or applied (the engine's record). */
int fsd_card_is_down(struct fsd *d, uint32_t card);

#endif /* FSD_BACKEND_H */
