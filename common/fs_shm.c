/* SPDX-License-Identifier: Apache-2.0 */
#include "fs_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

size_t fs_page_round(size_t bytes)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	return (bytes + pg - 1) / pg * pg;
}

static int create(struct fs_shm *s, const char *name, unsigned flags)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | flags);
	if (fd < 0)
		return -errno;
	/* A memfd is created 0777: no one but its owner may reopen it through
	 * /proc/PID/fd (read-only regions are then made 0400, fs_shm_ro_fd). */
	if (fchmod(fd, 0600) < 0 || ftruncate(fd, (off_t)s->bytes) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	void *p = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		int e = -errno;
		close(fd);
		return e;
	}
	s->fd = fd;
	s->base = p;
	return 0;
}

int fs_shm_create(struct fs_shm *s, const char *name, size_t bytes)
{
	s->fd = -1;
	s->base = NULL;
	s->bytes = fs_page_round(bytes);
	return create(s, name, 0);
}

int fs_shm_create_hugetlb(struct fs_shm *s, const char *name, size_t bytes, size_t huge)
{
	s->fd = -1;
	s->base = NULL;
	if (!huge || huge & (huge - 1) || bytes > SIZE_MAX - huge)
		return -EINVAL;
	/* A hugetlb file's size, mapping and unmapping go in whole huge pages
	 * (munmap of a part of one fails): the size is rounded up to them. */
	s->bytes = (bytes + huge - 1) / huge * huge;
	int r = create(s, name, MFD_HUGETLB);
	if (r < 0)
		s->bytes = 0;
	return r;
}

int fs_shm_map_fd(struct fs_shm *s, int fd, size_t min_bytes, int writable)
{
	struct stat st;
	s->fd = fd;
	s->base = NULL;
	s->bytes = 0;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_size <= 0 || (size_t)st.st_size < min_bytes)
		return -EBADMSG;
	/* A region we map must not be able to shrink under us (SIGBUS). */
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return -EPERM;
	int prot = PROT_READ | (writable ? PROT_WRITE : 0);
	void *p = mmap(NULL, (size_t)st.st_size, prot, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	s->base = p;
	s->bytes = (size_t)st.st_size;
	return 0;
}

void fs_shm_close(struct fs_shm *s)
{
	if (s->base && s->base != MAP_FAILED)
		munmap(s->base, s->bytes);
	if (s->fd >= 0)
		close(s->fd);
	s->base = NULL;
	s->fd = -1;
	s->bytes = 0;
}

int fs_shm_ro_fd(const struct fs_shm *s)
{
	/* A second, read-only open file description of the same memfd: a client
	 * handed this fd cannot mmap it writable (EACCES), and with the inode at
	 * mode 0400 a client of another user cannot reopen it read-write through
	 * /proc/self/fd either. */
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", s->fd);
	int ro = open(path, O_RDONLY | O_CLOEXEC);
	if (ro < 0)
		return -errno;
	if (fchmod(s->fd, 0400) < 0) {
		int e = -errno;
		close(ro);
		return e;
	}
	return ro;
}
