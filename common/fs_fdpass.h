/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_fdpass.h: hand file descriptors between processes over a unix socket
 * (SCM_RIGHTS).  The daemon's shared regions are memfds with no name in any
 * file system; the only way to reach one is to be handed its fd by the
 * daemon after the control plane has checked who is asking.
 */
#ifndef FS_FDPASS_H
#define FS_FDPASS_H

#include <stddef.h>

#define FS_FDPASS_MAX 32

/* Send `len` bytes of `buf` and `n` fds in one message.  0 or -errno. */
int fs_fd_send(int sock, const void *buf, size_t len, const int *fds, unsigned n);
/* Receive up to `len` bytes and up to `max` fds.  Returns the bytes received
 * (>= 0) and sets *n; fds beyond `max` or a truncated control message make
 * it fail with -EBADMSG (and every received fd is closed). */
long fs_fd_recv(int sock, void *buf, size_t len, int *fds, unsigned max, unsigned *n);
/* The same with recvmsg flags (MSG_DONTWAIT). */
long fs_fd_recv_flags(int sock, void *buf, size_t len, int *fds, unsigned max, unsigned *n, int flags);

#endif /* FS_FDPASS_H */
