/* SPDX-License-Identifier: Apache-2.0 */
/* fs_hostile.h: the hostile client of the fault suite (fs_hostile.c). */
#ifndef FS_HOSTILE_H
#define FS_HOSTILE_H

#include <stddef.h>
#include <stdint.h>

#include "fs_counters.h"
#include "fs_regions.h"

/* What a hostile client attached with: the regions mapped as they were
 * handed over (its own client region read-write). */
struct me {
	const char *sock;
	const char *name; /* the attach name; NULL: "hostile" */
	int quiet;        /* no message on a refused attach (m->err has it) */
	char err[256];
	char fd_sock[160];
	uint32_t id;
	uint8_t token[16];
	int fds[3 + FS_MAX_CARDS];
	unsigned nfds;
	const struct fs_daemon_hdr *dh;
	size_t dh_bytes;
	struct fs_client_hdr *ch;
	size_t ch_bytes;
	long daemon_pid;
	const uint64_t *ctr;
};

/* Attach (hello, attach, the fd handshake) without the library and wait
 * for ATTACHED: 0 or -1. */
int fault_hostile_attach(struct me *m);
/* The fd handshake alone: the reply status (0 with fds) or < 0. */
int fault_fd_handshake(const char *path, uint32_t id, const uint8_t *token, int *fds, unsigned max,
		       unsigned *n);

/* fs-fault-engine hostile SOCKET [pids=P1,P2] [victim=ID]: attack the
 * daemon and the other clients; prints one line per attack and a summary;
 * exits 0 when every attack was refused (and counted where the daemon can
 * count it), 1 when one succeeded, 2 when it could not attach at all. */
int fault_hostile(const char *sock, int argc, char **argv);

/* fs-fault-engine iso SOCKET ATTACK [key=value ...]: one isolation attack
 * (tests/fault/fs_iso.c). */
int fault_iso(const char *sock, int argc, char **argv);

#endif /* FS_HOSTILE_H */
