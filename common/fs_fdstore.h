/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_fdstore.h: the receiving end of foresightd's fd store, for whoever
 * stands in for systemd (the fault tests, fs-engine-bench).  foresightd
 * sends "FDSTORE=1\nFDNAME=arena" with the arena's memfd once it is built,
 * and "FDSTOREREMOVE=1" when a kept one did not match the model
 * (daemon/fsd_arena_keep.c, fsd_notify.c); the next start gets the kept fd back.
 */
#ifndef FS_FDSTORE_H
#define FS_FDSTORE_H

enum {
	FS_FDSTORE_OTHER = 0, /* a message that stores nothing (READY=1, STATUS=...) */
	FS_FDSTORE_NEW = 1,   /* an arena fd stored: another file than the one kept */
	FS_FDSTORE_SAME = 2,  /* an arena fd stored: the file already kept */
};

/* Receive one datagram from `sock` (non-blocking when `nonblock`) and apply
 * it to *kept (an fd or -1): FDSTOREREMOVE=1 closes it, an arena fd
 * replaces it; any other fd that came along is closed.  Returns one of the
 * values above, or -errno (-EAGAIN: nothing waiting). */
int fs_fdstore_recv(int sock, int nonblock, int *kept);

#endif /* FS_FDSTORE_H */
