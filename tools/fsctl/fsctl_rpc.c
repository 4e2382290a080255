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
#include "fs_name.h"
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

/* Every string of a reply reduced to printable ASCII (fs_name.h) before
 * anything prints it: a client's name, a card's down reason, the model's
 * name.  The daemon escapes client names at attach; this is the second
 * line, for a daemon of another version and for every other string. */
void fsctl_safe_strings(cJSON *o)
{
	for (cJSON *it = o ? o->child : NULL; it; it = it->next) {
		if (cJSON_IsString(it) && it->valuestring) {
			const char *v = it->valuestring;
			size_t i = 0;
			while (v[i] && fs_name_plain((unsigned char)v[i]))
				i++;
			if (v[i]) {
				char safe[512];
				fs_name_safe(safe, sizeof(safe), v);
				cJSON_SetValuestring(it, safe);
			}
		} else {
			fsctl_safe_strings(it);
		}
	}
}

int fsctl_call_req(struct fsctl_conn *c, const cJSON *req, cJSON **reply)
{
	char err[512];
	int rc = fs_ctl_call(c->s, req, reply, err, sizeof(err));
	if (rc == 0) {
		fsctl_safe_strings(*reply);
		return FSCTL_OK;
	}
	if (is_transport(rc)) {
		fprintf(stderr, "fsctl: %s (socket %s)\n", err, c->path);
		return FSCTL_DOWN;
	}
	/* The daemon's own refusals may already say "refused: ...". */
	char safe[512];
	fs_name_safe(safe, sizeof(safe), err);
	const char *msg = strncmp(safe, "refused: ", 9) == 0 ? safe + 9 : safe;
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
