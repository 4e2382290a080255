/* SPDX-License-Identifier: Apache-2.0 */
/* fs_peer_reader.h: `fs-fault-engine peer`, an engine reading through the
 * one tier across cards (fs_peer_reader.c). */
#ifndef FS_PEER_READER_H
#define FS_PEER_READER_H

/* fs-fault-engine peer SOCKET card=N [windows=W] [rate=R] [k=K] [churn=C]
 * [seed=S]: 0 when every read was right, no lookup returned a card seen
 * down and the output matches the arena; 1 otherwise; 2 on a setup error. */
int fault_peer_reader(const char *sock, int argc, char **argv);

#endif /* FS_PEER_READER_H */
