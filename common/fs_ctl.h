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
/* Send req (not consumed), wait for the reply.  0 with *rep set (an object
 * whose "ok" is true); -errno with err filled otherwise ("code" of a refusal
 * mapped back to its errno: EACCES, EPROTO, ...). */
int fs_ctl_call(nng_socket s, const cJSON *req, cJSON **rep, char *err, size_t errlen);
/* A request object {"verb": verb, "proto": FS_PROTO_VERSION}. */
cJSON *fs_ctl_request(const char *verb);

#endif /* FS_CTL_H */
