/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_sockpath.c: who owns the socket paths.  Before foresightd touches
 * either path (the control socket S and its peer S.fd) it takes S.lock with
 * flock(2) and holds it for life, so a second daemon on the same socket
 * finds the lock held and exits having touched nothing of the first one.
 * Under the lock a socket file at S or S.fd is a stale one of a daemon that
 * died (no live daemon can own it); anything else there (a file, a folder,
 * a link) is refused, never unlinked.  At exit only the socket files this
 * daemon bound (same device and inode) are removed, then the lock file,
 * still held, so the next daemon's open-then-lock sees a fresh file (it
 * compares the inode it locked with the path's and retries otherwise).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsd.h"
#include "fsd_sockpath.h"

static int lock_fd = -1;
static char lock_path[PATH_MAX];
static struct {
	dev_t dev;
	ino_t ino;
	int set;
} bound[FSD_SOCK_N];

static const char *kind_name(mode_t m)
{
	if (S_ISREG(m))
		return "a regular file";
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISLNK(m))
		return "a symbolic link";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISCHR(m) || S_ISBLK(m))
		return "a device node";
	return "not a socket";
}

const char *fsd_sock_path(const struct fsd_config *c, enum fsd_sock which)
{
	return which == FSD_SOCK_CONTROL ? c->socket_path : c->fd_socket_path;
}

void fsd_sock_dir(const char *path, char *dir, size_t len)
{
	snprintf(dir, len, "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, len, ".");
	else if (slash == dir)
		dir[1] = 0;
	else
		*slash = 0;
}

int fsd_sock_dir_check(const char *path, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	fsd_sock_dir(path, dir, sizeof(dir));
	struct stat st;
	if (stat(dir, &st) < 0) {
		snprintf(err, errlen, "socket directory %s: %s", dir, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "socket directory %s: not a directory", dir);
		return -ENOTDIR;
	}
	return 0;
}

int fsd_sock_path_check(const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "%s exists and is %s, not a socket: foresightd will not replace it",
			 path, kind_name(st.st_mode));
		return -EEXIST;
	}
	return 1;
}

/* The pid the lock's holder wrote into it, or 0. */
static long holder_pid(int fd)
{
	char buf[32] = {0};
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	return n > 0 ? strtol(buf, NULL, 10) : 0;
}

int fsd_sock_lock_held(const struct fsd_config *c, long *pid)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s.lock", c->socket_path);
	int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	int held = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	if (held && pid)
		*pid = holder_pid(fd);
	close(fd);
	return held;
}

int fsd_sock_claim(struct fsd_config *c)
{
	char err[PATH_MAX + 128];
	int r;
	if ((r = fsd_sock_dir_check(c->socket_path, err, sizeof(err))) < 0) {
		fsd_log(FSD_ERR, "%s", err);
		return r;
	}
	if (snprintf(lock_path, sizeof(lock_path), "%s.lock", c->socket_path) >= (int)sizeof(lock_path))
		return -ENAMETOOLONG;
	for (int tries = 0;; tries++) {
		int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
		if (fd < 0) {
			r = -errno;
			fsd_log(FSD_ERR, "lock %s: %s", lock_path, strerror(errno));
			return r;
		}
		struct stat fst, pst;
		if (fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode)) {
			fsd_log(FSD_ERR, "lock %s: not a regular file; foresightd will not use it",
				lock_path);
			close(fd);
			return -EEXIST;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			r = -errno;
			if (errno == EWOULDBLOCK) {
				long pid = holder_pid(fd);
				fsd_log(FSD_ERR,
					"another foresightd (pid %ld) serves %s (it holds %s); this one exits "
					"without touching it",
					pid, c->socket_path, lock_path);
				r = -EADDRINUSE;
			} else {
				fsd_log(FSD_ERR, "lock %s: %s", lock_path, strerror(errno));
			}
			close(fd);
			return r;
		}
		/* The holder we waited on may have removed the file meanwhile. */
		if (stat(lock_path, &pst) == 0 && pst.st_dev == fst.st_dev && pst.st_ino == fst.st_ino) {
			char pid[24];
			int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
			if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n)
				fsd_log(FSD_WARN, "lock %s: writing the pid: %s", lock_path, strerror(errno));
			lock_fd = fd;
			break;
		}
		close(fd);
		if (tries == 8) {
			fsd_log(FSD_ERR, "lock %s: replaced under us again and again", lock_path);
			return -EAGAIN;
		}
	}
	/* Under the lock: a socket at either path is a dead daemon's. */
	for (int w = 0; w < FSD_SOCK_N; w++) {
		const char *p = fsd_sock_path(c, (enum fsd_sock)w);
		r = fsd_sock_path_check(p, err, sizeof(err));
		if (r < 0) {
			fsd_log(FSD_ERR, "%s", err);
			fsd_sock_release(c);
			return r;
		}
		if (r == 1) {
			fsd_log(FSD_INFO, "removing %s, a stale socket (no daemon holds %s)", p, lock_path);
			if (unlink(p) < 0 && errno != ENOENT) {
				r = -errno;
				fsd_log(FSD_ERR, "%s: %s", p, strerror(errno));
				fsd_sock_release(c);
				return r;
			}
		}
	}
	return 0;
}

void fsd_sock_bound(const struct fsd_config *c, enum fsd_sock which)
{
	struct stat st;
	if (lstat(fsd_sock_path(c, which), &st) == 0 && S_ISSOCK(st.st_mode)) {
		bound[which].dev = st.st_dev;
		bound[which].ino = st.st_ino;
		bound[which].set = 1;
	}
}

void fsd_sock_unlink(const struct fsd_config *c, enum fsd_sock which)
{
	struct stat st;
	const char *p = fsd_sock_path(c, which);
	if (bound[which].set && lstat(p, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == bound[which].dev &&
	    st.st_ino == bound[which].ino)
		unlink(p);
	bound[which].set = 0;
}

void fsd_sock_release(const struct fsd_config *c)
{
	for (int w = 0; w < FSD_SOCK_N; w++)
		fsd_sock_unlink(c, (enum fsd_sock)w);
	if (lock_fd < 0)
		return;
	unlink(lock_path); /* still held: see the top of the file */
	close(lock_fd);
	lock_fd = -1;
}
