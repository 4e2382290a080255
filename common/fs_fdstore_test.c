/* SPDX-License-Identifier: Apache-2.0 */
/* fs_fdstore: what a stand-in service manager keeps of foresightd's fd store. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fs_fdpass.h"
#include "fs_fdstore.h"

static int sv[2];

static void setup(void)
{
	cr_assert_eq(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv), 0);
}

static void teardown(void)
{
	close(sv[0]);
	close(sv[1]);
}

static void send_msg(const char *text, const int *fds, unsigned n)
{
	cr_assert_eq(fs_fd_send(sv[0], text, strlen(text), fds, n), 0);
}

static int is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

TestSuite(fdstore, .init = setup, .fini = teardown);

Test(fdstore, nothing_waiting_is_eagain_when_nonblocking)
{
	int kept = -1;
	cr_assert_eq(fs_fdstore_recv(sv[1], 1, &kept), -EAGAIN);
	cr_assert_eq(kept, -1);
}

Test(fdstore, keeps_the_arena_says_whether_it_is_the_same_file_and_removes_it)
{
	int a = memfd_create("a", MFD_CLOEXEC), b = memfd_create("b", MFD_CLOEXEC);
	int kept = -1;
	send_msg("FDSTORE=1\nFDNAME=arena", &a, 1);
	cr_assert_eq(fs_fdstore_recv(sv[1], 1, &kept), FS_FDSTORE_NEW);
	cr_assert_geq(kept, 0);
	int first = kept;
	send_msg("FDSTORE=1\nFDNAME=arena", &a, 1); /* a restart that reused it */
	cr_assert_eq(fs_fdstore_recv(sv[1], 1, &kept), FS_FDSTORE_SAME);
	cr_assert_not(is_open(first) && first != kept, "the previous fd was not closed");
	send_msg("FDSTORE=1\nFDNAME=arena", &b, 1);
	cr_assert_eq(fs_fdstore_recv(sv[1], 1, &kept), FS_FDSTORE_NEW);
	int held = kept;
	send_msg("FDSTOREREMOVE=1\nFDNAME=arena", NULL, 0);
	cr_assert_eq(fs_fdstore_recv(sv[1], 1, &kept), FS_FDSTORE_OTHER);
	cr_assert_eq(kept, -1);
	cr_assert_not(is_open(held), "a removed arena fd stayed open");
	close(a);
	close(b);
}

Test(fdstore, other_messages_and_stray_fds_store_nothing)
{
	int a = memfd_create("a", MFD_CLOEXEC);
	int kept = -1;
	send_msg("READY=1\nSTATUS=serving", NULL, 0);
	cr_assert_eq(fs_fdstore_recv(sv[1], 0, &kept), FS_FDSTORE_OTHER);
	send_msg("FDSTORE=1\nFDNAME=something-else", &a, 1);
	cr_assert_eq(fs_fdstore_recv(sv[1], 0, &kept), FS_FDSTORE_OTHER);
	cr_assert_eq(kept, -1, "an fd of another name was kept");
	int two[2] = {a, a};
	send_msg("FDSTORE=1\nFDNAME=arena", two, 2);
	cr_assert_eq(fs_fdstore_recv(sv[1], 0, &kept), FS_FDSTORE_NEW);
	cr_assert_geq(kept, 0);
	close(kept);
	close(a);
}
