/* SPDX-License-Identifier: Apache-2.0 */
#include "fs_fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int fs_fd_send(int sock, const void *buf, size_t len, const int *fds, unsigned n)
{
	if (n > FS_FDPASS_MAX || len == 0)
		return -EINVAL;
	union {
		char raw[CMSG_SPACE(sizeof(int) * FS_FDPASS_MAX)];
		struct cmsghdr align;
	} ctl;
	memset(&ctl, 0, sizeof(ctl));
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (n > 0) {
		msg.msg_control = ctl.raw;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	}
	ssize_t r;
	do
		r = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return (size_t)r == len ? 0 : -EMSGSIZE;
}

long fs_fd_recv(int sock, void *buf, size_t len, int *fds, unsigned max, unsigned *n)
{
	return fs_fd_recv_flags(sock, buf, len, fds, max, n, 0);
}

long fs_fd_recv_flags(int sock, void *buf, size_t len, int *fds, unsigned max, unsigned *n, int flags)
{
	union {
		char raw[CMSG_SPACE(sizeof(int) * FS_FDPASS_MAX)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.raw, .msg_controllen = sizeof(ctl.raw)};
	*n = 0;
	ssize_t r;
	do
		r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	int bad = (msg.msg_flags & MSG_CTRUNC) != 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		unsigned k = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int tmp[FS_FDPASS_MAX];
		if (k > FS_FDPASS_MAX)
			k = FS_FDPASS_MAX;
		memcpy(tmp, CMSG_DATA(c), k * sizeof(int));
		for (unsigned i = 0; i < k; i++) {
			if (*n < max && !bad)
				fds[(*n)++] = tmp[i];
			else {
				close(tmp[i]);
				bad = 1;
			}
		}
	}
	if (bad) {
		for (unsigned i = 0; i < *n; i++)
			close(fds[i]);
		*n = 0;
		return -EBADMSG;
	}
	return (long)r;
}
