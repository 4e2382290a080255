/* SPDX-License-Identifier: Apache-2.0 */
#include "fs_ctl.h"

#include <errno.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/protocol/reqrep0/req.h>

#include "fs_proto.h"

static int code_errno(const char *code)
{
	static const struct {
		const char *name;
		int e;
	} map[] = {{"EACCES", EACCES},     {"EPROTO", EPROTO},     {"EINVAL", EINVAL},
		   {"ENOENT", ENOENT},     {"EBUSY", EBUSY},       {"ENOSYS", ENOSYS},
		   {"EALREADY", EALREADY}, {"EMSGSIZE", EMSGSIZE}, {"EAGAIN", EAGAIN}};
	for (size_t i = 0; code && i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(code, map[i].name) == 0)
			return map[i].e;
	return EIO;
}

int fs_ctl_open(nng_socket *s, const char *path, int recv_ms, char *err, size_t errlen)
{
	return fs_ctl_open_dialer(s, NULL, path, recv_ms, err, errlen);
}

int fs_ctl_open_dialer(nng_socket *s, nng_dialer *d, const char *path, int recv_ms, char *err, size_t errlen)
{
	char url[160];
	int r;
	snprintf(url, sizeof(url), "ipc://%s", path);
	if ((r = nng_req0_open(s)) != 0) {
		snprintf(err, errlen, "nng_req0_open: %s", nng_strerror(r));
		return -EIO;
	}
	nng_socket_set_ms(*s, NNG_OPT_RECVTIMEO, recv_ms);
	nng_socket_set_ms(*s, NNG_OPT_SENDTIMEO, recv_ms);
	nng_socket_set_ms(*s, NNG_OPT_RECONNMINT, 50);
	nng_socket_set_ms(*s, NNG_OPT_RECONNMAXT, 200);
	if ((r = nng_dial(*s, url, d, 0)) != 0) {
		/* Say which way to look: no socket, a socket nobody serves, a
		 * socket this user may not use, or something else at the path. */
		struct stat st;
		int e = stat(path, &st) < 0 ? errno : 0;
		nng_close(*s);
		if (e == EACCES || r == NNG_EPERM) {
			snprintf(
				err, errlen,
				"permission denied on %s: foresightd may be running, but this user may not use "
				"its socket (ls -l shows the socket's group; the daemon's 'group' key names who "
				"may)",
				path);
			return -EACCES;
		}
		if (e == 0 && !S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s is not a socket (wrong --socket or $FORESIGHT_SOCKET?)",
				 path);
			return -ENOTSOCK;
		}
		if (e == ENOENT || e == ENOTDIR)
			snprintf(err, errlen, "foresightd is not running at %s (connect: no socket there)",
				 path);
		else
			snprintf(err, errlen, "foresightd is not running at %s (connect: %s)", path,
				 e ? strerror(e) : nng_strerror(r));
		return -ENOTCONN;
	}
	return 0;
}

int fs_ctl_redial(nng_socket s, nng_dialer *d, const char *path)
{
	char url[160];
	nng_dialer nd;
	snprintf(url, sizeof(url), "ipc://%s", path);
	if (nng_dialer_id(*d) > 0)
		nng_dialer_close(*d); /* its connection too, if it had one that no request could use */
	*d = (nng_dialer)NNG_DIALER_INITIALIZER;
	if (nng_dialer_create(&nd, s, url) != 0)
		return -EIO;
	/* Not waiting: it connects on its own when a daemon listens, and
	 * redials like the first one did. */
	if (nng_dialer_start(nd, NNG_FLAG_NONBLOCK) != 0) {
		nng_dialer_close(nd);
		return -EIO;
	}
	*d = nd;
	return 0;
}

cJSON *fs_ctl_request(const char *verb)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "verb", verb);
	cJSON_AddNumberToObject(o, "proto", FS_PROTO_VERSION);
	return o;
}

int fs_ctl_call(nng_socket s, const cJSON *req, cJSON **rep, char *err, size_t errlen)
{
	return fs_ctl_call_unsent(s, req, rep, err, errlen, NULL);
}

int fs_ctl_call_unsent(nng_socket s, const cJSON *req, cJSON **rep, char *err, size_t errlen, int *unsent)
{
	*rep = NULL;
	if (unsent)
		*unsent = 0;
	char *txt = cJSON_PrintUnformatted(req);
	if (!txt) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int r = nng_send(s, txt, strlen(txt), 0);
	free(txt);
	if (r != 0) {
		snprintf(err, errlen, "control request failed: %s", nng_strerror(r));
		if (unsent)
			*unsent = r == NNG_ETIMEDOUT; /* no connection to send on, the whole send timeout */
		return -ENOTCONN;
	}
	char *buf;
	size_t len;
	if ((r = nng_recv(s, &buf, &len, NNG_FLAG_ALLOC)) != 0) {
		snprintf(err, errlen, "no reply from foresightd: %s", nng_strerror(r));
		return r == NNG_ETIMEDOUT ? -ETIMEDOUT : -ENOTCONN;
	}
	cJSON *o = cJSON_ParseWithLength(buf, len);
	nng_free(buf, len);
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		snprintf(err, errlen, "foresightd sent a reply that is not a JSON object");
		return -EBADMSG;
	}
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "ok"))) {
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "error");
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "code");
		snprintf(err, errlen, "%s", cJSON_IsString(m) ? m->valuestring : "request refused");
		int e = code_errno(cJSON_IsString(c) ? c->valuestring : NULL);
		cJSON_Delete(o);
		return -e;
	}
	*rep = o;
	return 0;
}
