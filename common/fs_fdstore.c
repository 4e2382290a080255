/* SPDX-License-Identifier: Apache-2.0 */
#include "fs_fdstore.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs_fdpass.h"

static int same_file(int a, int b)
{
	struct stat sa, sb;
	return a >= 0 && b >= 0 && fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_ino == sb.st_ino &&
	       sa.st_dev == sb.st_dev;
}

int fs_fdstore_recv(int sock, int nonblock, int *kept)
{
	char buf[4096];
	int fds[FS_FDPASS_MAX];
	unsigned n = 0;
	long r = fs_fd_recv_flags(sock, buf, sizeof(buf) - 1, fds, FS_FDPASS_MAX, &n,
				  nonblock ? MSG_DONTWAIT : 0);
	if (r < 0)
		return (int)r;
	buf[r] = 0;
	/* One fd per store message: keep the first, close the rest. */
	for (unsigned i = 1; i < n; i++)
		close(fds[i]);
	int got = n ? fds[0] : -1;
	if (strstr(buf, "FDSTOREREMOVE=1") && *kept >= 0) {
		close(*kept);
		*kept = -1;
	}
	if (got >= 0 && strstr(buf, "FDSTORE=1") && strstr(buf, "FDNAME=arena")) {
		int same = same_file(*kept, got);
		if (*kept >= 0)
			close(*kept);
		*kept = got;
		return same ? FS_FDSTORE_SAME : FS_FDSTORE_NEW;
	}
	if (got >= 0)
		close(got);
	return FS_FDSTORE_OTHER;
}
