/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_fdproto.h: the fd handshake on the daemon's second socket
 * (<control socket>.fd, a plain unix stream socket).
 *
 * After a successful `attach` on the control socket the client connects
 * here and sends one struct fs_fd_request.  The daemon checks that the
 * kernel-reported peer pid (SO_PEERCRED) is the pid that attached and that
 * the token matches, then answers one struct fs_fd_reply carrying, with
 * SCM_RIGHTS, in this order: daemon region (read-only), client region
 * (read-write), arena (read-only), then one pool per card (read-only).
 * Then it closes the connection.  Any mismatch: a reply with status < 0
 * and no fds.
 */
#ifndef FS_FDPROTO_H
#define FS_FDPROTO_H

#include <stdint.h>

#define FS_FD_MAGIC 0x44465346u /* "FSFD" */

struct fs_fd_request {
	uint32_t magic;
	uint32_t version;
	uint32_t client_id;
	uint32_t pad;
	uint8_t token[16];
};
_Static_assert(sizeof(struct fs_fd_request) == 32, "fs_fd_request");

struct fs_fd_reply {
	uint32_t magic;
	int32_t status; /* 0 or -errno */
	uint32_t nfds;
	uint32_t pad;
};
_Static_assert(sizeof(struct fs_fd_reply) == 16, "fs_fd_reply");

#endif /* FS_FDPROTO_H */
