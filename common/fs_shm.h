/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_shm.h: memfd regions.  Created by the daemon, sized once, sealed
 * against growing and shrinking (so a mapping can never be made to fault by
 * a truncate), and mapped by clients with the protection the daemon chose.
 */
#ifndef FS_SHM_H
#define FS_SHM_H

#include <stddef.h>

struct fs_shm {
	int fd;
	void *base;
	size_t bytes;
};

/* Create a memfd of `bytes` (rounded up to the page size), sealed against
 * resizing, mapped read-write here.  0 or -errno. */
int fs_shm_create(struct fs_shm *s, const char *name, size_t bytes);
/* The same in hugetlb pages of `huge` bytes (MFD_HUGETLB, the default huge
 * page size: pass the size /proc/meminfo gives as Hugepagesize), `bytes`
 * rounded up to them.  The mapping reserves the pages: -ENOMEM when the
 * free pool (vm.nr_hugepages) cannot hold it, never a fault later. */
int fs_shm_create_hugetlb(struct fs_shm *s, const char *name, size_t bytes, size_t huge);
/* Map an fd received from the daemon.  Checks that the file is at least
 * `min_bytes` long and uses its real size.  writable: PROT_WRITE too. */
int fs_shm_map_fd(struct fs_shm *s, int fd, size_t min_bytes, int writable);
void fs_shm_close(struct fs_shm *s);
/* A read-only fd of the region for clients (see fs_shm.c); -errno on failure. */
int fs_shm_ro_fd(const struct fs_shm *s);
size_t fs_page_round(size_t bytes);

#endif /* FS_SHM_H */
