/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_ctl.h: one control-plane round trip (nng REQ, JSON bodies), shared by
 * libforesight-client and fsctl.
 */
#ifndef FS_CTL_H
#define FS_CTL_H

#include <stddef.h>

#include <cjson/cJSON.h>
#include <nng/nng.h>

/* Open a REQ socket dialed to ipc://path.  Fails at once (and says why in
 * err) when nobody listens there.  recv_ms bounds every round trip. */
int fs_ctl_open(nng_socket *s, const char *path, int recv_ms, char *err, size_t errlen);
/* The same, keeping its dialer in *d for fs_ctl_redial. */
int fs_ctl_open_dialer(nng_socket *s, nng_dialer *d, const char *path, int recv_ms, char *err, size_t errlen);
/*
 * Replace the dialer *d of s (closed) with a new one to ipc://path, started
 * without waiting: 0, or -EIO with *d left closed.  For a REQ socket kept
 * across daemon restarts that has had no connection for a while: nng
 * 1.5.2's dialer stops redialing for good once a connection attempt is
 * reset in the SP handshake (a foresightd killed -9 with the redial in its
 * listener's backlog does that; fs_reconnect_test), and the socket would
 * then time out every send to the next daemon.  Not while it may be in a
 * handshake: a dialer closed there stops nng 1.5.2's listener on the
 * daemon's side.
 */
int fs_ctl_redial(nng_socket s, nng_dialer *d, const char *path);
/* Send req (not consumed), wait for the reply.  0 with *rep set (an object
 * whose "ok" is true); -errno with err filled otherwise ("code" of a refusal
 * mapped back to its errno: EACCES, EPROTO, ...). */
int fs_ctl_call(nng_socket s, const cJSON *req, cJSON **rep, char *err, size_t errlen);
/* A request object {"verb": verb, "proto": FS_PROTO_VERSION}. */
cJSON *fs_ctl_request(const char *verb);
/* fs_ctl_call; *unsent set to 1 when the request never left: no
 * connection to send on for the socket's whole send timeout. */
int fs_ctl_call_unsent(nng_socket s, const cJSON *req, cJSON **rep, char *err, size_t errlen, int *unsent);

#endif /* FS_CTL_H */
