/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_notify.c: the sd_notify(3) protocol without libsystemd.  One datagram
 * of "KEY=VALUE\n..." text to the unix socket named by $NOTIFY_SOCKET (a
 * path, or an abstract name written with a leading '@').  Outside systemd
 * (no $NOTIFY_SOCKET) every call is a no-op.  fsd_notify_fds() attaches
 * fds (SCM_RIGHTS): with "FDSTORE=1\nFDNAME=arena" systemd keeps the arena
 * memfd across a restart of the daemon (daemon/fsd_arena_keep.c).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "fsd.h"

int fsd_notify_fds(const char *state, const int *fds, unsigned nfds)
{
	const char *path = getenv("NOTIFY_SOCKET");
	if (!path || !*path || !state)
		return 0;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path) || nfds > FSD_NOTIFY_MAX_FDS)
		return -EINVAL;
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract namespace: not NUL-terminated */
	socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/'));
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct iovec iov = {.iov_base = (void *)state, .iov_len = strlen(state)};
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * FSD_NOTIFY_MAX_FDS)];
	} ctl;
	memset(&ctl, 0, sizeof(ctl));
	struct msghdr mh = {.msg_name = &sa, .msg_namelen = salen, .msg_iov = &iov, .msg_iovlen = 1};
	if (nfds > 0) {
		/* SCM_RIGHTS: how FDSTORE=1 hands systemd the fds it keeps. */
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	int r = n < 0 ? -errno : 1;
	close(fd);
	return r;
}

int fsd_notify(const char *state)
{
	return fsd_notify_fds(state, NULL, 0);
}

uint64_t fsd_notify_watchdog_usec(void)
{
	const char *usec = getenv("WATCHDOG_USEC");
	if (!usec || !*usec)
		return 0;
	const char *pid = getenv("WATCHDOG_PID");
	if (pid && *pid && strtol(pid, NULL, 10) != (long)getpid())
		return 0; /* meant for another process */
	char *end;
	errno = 0;
	unsigned long long v = strtoull(usec, &end, 10);
	if (errno || *end || end == usec)
		return 0;
	return (uint64_t)v;
}
