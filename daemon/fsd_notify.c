/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_notify.c: the sd_notify(3) protocol without libsystemd.  One datagram
 * of "KEY=VALUE\n..." text to the unix socket named by $NOTIFY_SOCKET (a
 * path, or an abstract name written with a leading '@').  Outside systemd
 * (no $NOTIFY_SOCKET) every call is a no-op.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fsd.h"

int fsd_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	if (!path || !*path || !state)
		return 0;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract namespace: not NUL-terminated */
	socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/'));
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	ssize_t n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
	int r = n < 0 ? -errno : 1;
	close(fd);
	return r;
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
