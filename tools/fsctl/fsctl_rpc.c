/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsctl_rpc.c: one control round trip, with fsctl's messages and exit
 * statuses on top of common/fs_ctl (the same code the client library uses,
 * so fsctl and engines see the daemon the same way).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs_ctl.h"
#include "fsctl.h"

struct fsctl_conn {
	nng_socket s;
	const char *path;
};

int fsctl_connect(const struct fsctl *g, struct fsctl_conn **out)
{
	char err[512];
	struct fsctl_conn *c = calloc(1, sizeof(*c));
	if (!c) {
		fprintf(stderr, "fsctl: out of memory\n");
		return FSCTL_DOWN;
	}
	/* fs_ctl_open dials with flags 0: it fails at once when nobody
	 * listens, with "foresightd is not running at PATH (connect: ...)". */
	int r = fs_ctl_open(&c->s, g->socket, g->timeout_ms, err, sizeof(err));
	if (r != 0) {
		fprintf(stderr, "fsctl: %s\n", err);
		free(c);
		/* A socket this user may not use is a refusal, not a daemon that is down. */
		return r == -EACCES ? FSCTL_REFUSED : FSCTL_DOWN;
	}
	c->path = g->socket;
	*out = c;
	return FSCTL_OK;
}

/* Failures of the transport rather than answers of the daemon. */
static int is_transport(int rc)
{
	return rc == -ETIMEDOUT || rc == -ENOTCONN || rc == -EBADMSG || rc == -ENOMEM;
}

int fsctl_call(struct fsctl_conn *c, const char *verb, cJSON **reply)
{
	cJSON *req = fs_ctl_request(verb);
	if (!req) {
		fprintf(stderr, "fsctl: out of memory\n");
		return FSCTL_DOWN;
	}
	int rc = fsctl_call_req(c, req, reply);
	cJSON_Delete(req);
	return rc;
}

int fsctl_call_req(struct fsctl_conn *c, const cJSON *req, cJSON **reply)
{
	char err[512];
	int rc = fs_ctl_call(c->s, req, reply, err, sizeof(err));
	if (rc == 0)
		return FSCTL_OK;
	if (is_transport(rc)) {
		fprintf(stderr, "fsctl: %s (socket %s)\n", err, c->path);
		return FSCTL_DOWN;
	}
	/* The daemon's own refusals may already say "refused: ...". */
	const char *msg = strncmp(err, "refused: ", 9) == 0 ? err + 9 : err;
	const char *code = strerrorname_np(-rc);
	fprintf(stderr, "fsctl: refused: %s%s%s%s\n", msg, code ? " (" : "", code ? code : "",
		code ? ")" : "");
	return FSCTL_REFUSED;
}

void fsctl_disconnect(struct fsctl_conn *c)
{
	if (!c)
		return;
	nng_close(c->s);
	free(c);
}

int fsctl_call_once(const struct fsctl *g, const char *verb, cJSON **reply)
{
	struct fsctl_conn *c;
	int rc = fsctl_connect(g, &c);
	if (rc)
		return rc;
	rc = fsctl_call(c, verb, reply);
	fsctl_disconnect(c);
	return rc;
}
