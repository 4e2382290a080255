/* SPDX-License-Identifier: Apache-2.0 */
/* fsd_notify: the sd_notify datagrams reach a socket named by $NOTIFY_SOCKET. */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fsd.h"

/* Bind a datagram socket: a path in a fresh directory, or (abstract) an
 * abstract name; sets $NOTIFY_SOCKET to its name. */
static int listen_notify(int abstract, char *dir, size_t dirlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char name[sizeof(sa.sun_path)];
	socklen_t len;
	if (abstract) {
		snprintf(name, sizeof(name), "@fsd-notify-test-%d", (int)getpid());
		memcpy(sa.sun_path, name, strlen(name));
		sa.sun_path[0] = '\0';
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name));
	} else {
		snprintf(dir, dirlen, "/tmp/fsd-notify-XXXXXX");
		cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
		snprintf(name, sizeof(name), "%s/notify", dir);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", name);
		len = sizeof(sa);
	}
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert(fd >= 0, "socket: %s", strerror(errno));
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, len), 0, "bind: %s", strerror(errno));
	setenv("NOTIFY_SOCKET", name, 1);
	return fd;
}

static void expect(int fd, const char *want)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	cr_assert_eq(poll(&p, 1, 2000), 1, "no datagram for '%s'", want);
	char buf[512];
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
	cr_assert(n >= 0, "recv: %s", strerror(errno));
	buf[n] = '\0';
	cr_assert_str_eq(buf, want);
}

static void send_all(int fd)
{
	cr_assert_eq(fsd_notify("READY=1\nSTATUS=serving synthetic"), 1);
	expect(fd, "READY=1\nSTATUS=serving synthetic");
	cr_assert_eq(fsd_notify("WATCHDOG=1"), 1);
	expect(fd, "WATCHDOG=1");
	cr_assert_eq(fsd_notify("STOPPING=1"), 1);
	expect(fd, "STOPPING=1");
}

Test(notify, path_socket)
{
	char dir[64], path[96];
	int fd = listen_notify(0, dir, sizeof(dir));
	send_all(fd);
	close(fd);
	snprintf(path, sizeof(path), "%s/notify", dir);
	unlink(path);
	rmdir(dir);
}

Test(notify, abstract_socket)
{
	int fd = listen_notify(1, NULL, 0);
	send_all(fd);
	close(fd);
}

Test(notify, no_socket_is_a_noop)
{
	unsetenv("NOTIFY_SOCKET");
	cr_assert_eq(fsd_notify("READY=1"), 0);
	setenv("NOTIFY_SOCKET", "relative/path", 1);
	cr_assert_eq(fsd_notify("READY=1"), -EINVAL);
	setenv("NOTIFY_SOCKET", "/nonexistent/foresight/notify", 1);
	cr_assert_lt(fsd_notify("READY=1"), 0);
}

Test(notify, watchdog_usec)
{
	char pid[32];
	unsetenv("WATCHDOG_PID");
	unsetenv("WATCHDOG_USEC");
	cr_assert_eq(fsd_notify_watchdog_usec(), 0);
	setenv("WATCHDOG_USEC", "30000000", 1);
	cr_assert_eq(fsd_notify_watchdog_usec(), 30000000);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("WATCHDOG_PID", pid, 1);
	cr_assert_eq(fsd_notify_watchdog_usec(), 30000000);
	snprintf(pid, sizeof(pid), "%d", (int)getpid() + 1);
	setenv("WATCHDOG_PID", pid, 1);
	cr_assert_eq(fsd_notify_watchdog_usec(), 0, "WATCHDOG_PID of another process");
	unsetenv("WATCHDOG_PID");
	setenv("WATCHDOG_USEC", "junk", 1);
	cr_assert_eq(fsd_notify_watchdog_usec(), 0);
}
