/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_control.h: the control plane's request handling as one function from
 * request bytes to reply text, so that it can be tested and fuzzed without
 * a socket (fuzz/control_fuzz.c).
 */
#ifndef FSD_CONTROL_H
#define FSD_CONTROL_H

#include <stddef.h>
#include <stdint.h>

struct fsd;

/* Requests above this are refused (counted in `oversized`); nng drops a
 * message above FSD_CONTROL_RECV_MAX before we see it. */
#define FSD_CONTROL_MAX_MSG (1u << 20) /* a profile of 1024 layers x 512 experts fits */
#define FSD_CONTROL_RECV_MAX (2u * FSD_CONTROL_MAX_MSG)

/* Who sent a request, as the kernel says (SO_PEERCRED through nng). */
struct fsd_peer {
	uint64_t pid, uid, gid;
	int have; /* 0: credentials unavailable (only hello and ping are answered) */
};

/* Handle one request: `len` bytes of (untrusted) JSON from `pe`.  Returns
 * the reply as NUL-terminated JSON text (free() it), NULL only when out of
 * memory.  Every refused or malformed request is counted exactly once
 * (refused, bad_requests or oversized). */
char *fsd_control_reply(struct fsd *d, const void *req, size_t len, const struct fsd_peer *pe);

#endif /* FSD_CONTROL_H */
