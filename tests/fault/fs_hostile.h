/* SPDX-License-Identifier: Apache-2.0 */
/* fs_hostile.h: the hostile client of the fault suite (fs_hostile.c). */
#ifndef FS_HOSTILE_H
#define FS_HOSTILE_H

/* fs-fault-engine hostile SOCKET [pids=P1,P2] [victim=ID]: attack the
 * daemon and the other clients; prints one line per attack and a summary;
 * exits 0 when every attack was refused (and counted where the daemon can
 * count it), 1 when one succeeded, 2 when it could not attach at all. */
int fault_hostile(const char *sock, int argc, char **argv);

#endif /* FS_HOSTILE_H */
