/* SPDX-License-Identifier: Apache-2.0 */
/* fsd_sockpath.h: the socket paths' lock and ownership (fsd_sockpath.c). */
#ifndef FSD_SOCKPATH_H
#define FSD_SOCKPATH_H

#include <stddef.h>

struct fsd_config;

enum fsd_sock { FSD_SOCK_CONTROL, FSD_SOCK_FD, FSD_SOCK_N };

const char *fsd_sock_path(const struct fsd_config *c, enum fsd_sock which);
/* The socket's directory exists and is one: 0, or -errno and a message. */
int fsd_sock_dir_check(const char *path, char *err, size_t errlen);
/* The directory of a socket path ("." for a bare name). */
void fsd_sock_dir(const char *path, char *dir, size_t len);
/* Nothing at path: 0; a socket: 1; anything else: -EEXIST (or -errno) and a message. */
int fsd_sock_path_check(const char *path, char *err, size_t errlen);
/* 1 when a live daemon holds the socket's lock (its pid in *pid), else 0. */
int fsd_sock_lock_held(const struct fsd_config *c, long *pid);
/* Take S.lock for life, then clear stale sockets at S and S.fd; refuses a
 * path that is not a socket.  0 or -errno (logged). */
int fsd_sock_claim(struct fsd_config *c);
/* After bind: remember the socket file this daemon made. */
void fsd_sock_bound(const struct fsd_config *c, enum fsd_sock which);
/* Remove the socket file only when it is still the one this daemon bound. */
void fsd_sock_unlink(const struct fsd_config *c, enum fsd_sock which);
/* Both of the above for both paths, then the lock. */
void fsd_sock_release(const struct fsd_config *c);

#endif
