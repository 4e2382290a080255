/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control_fuzz.c: libFuzzer harness for the control plane's request
 * handling (daemon/fsd_control.c, fsd_control_reply): arbitrary bytes from
 * an arbitrary peer.  The daemon around it is a stand-in (a client table
 * of four rows, stats stubs); the parsing, the checks of every verb's
 * fields, the credential rules and the counting are the daemon's own code.
 *
 * Input: byte 0 picks the peer (root, the daemon's user, a stranger, no
 * credentials) and whether attach fails; the rest is the request.
 * Checked: a reply always comes, is a JSON object with a boolean "ok"; a
 * refusal carries "error" and "code" and moved exactly one of the counters
 * refused / bad_requests / oversized (EIO moves none); a stranger is never
 * allowed more than hello and ping.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "fs_counters.h"
#include "fsd_backend.h"
#include "fsd_control.h"
#include "fsd_hot.h"
#include "fsd_loop.h"
#include "fsr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fsd d;
static uint64_t counters[FS_N_DAEMON];
static _Alignas(64) unsigned char dregion[sizeof(struct fs_daemon_hdr) + 4 * sizeof(struct fs_card_desc)];
static _Alignas(64) struct fs_client_hdr chdr;
static const struct fsd_backend backend = {.name = "fuzz"};
static int attach_fails;

/* ---- the daemon around fsd_control.c ---------------------------------- */

void fsd_log(int prio, const char *fmt, ...)
{
	(void)prio;
	(void)fmt;
}

int fsd_client_attach(struct fsd *dd, pid_t pid, uid_t uid, gid_t gid, const char *name,
		      uint32_t ring_entries, struct fsd_client **out, char *err, size_t errlen)
{
	(void)pid, (void)uid, (void)gid;
	if (name && strlen(name) > (1u << 20))
		abort();
	if (attach_fails) {
		snprintf(err, errlen, "too many clients");
		return -EBUSY;
	}
	if (ring_entries && (ring_entries & (ring_entries - 1))) {
		snprintf(err, errlen, "ring_entries %u", ring_entries);
		return -EINVAL;
	}
	struct fsd_client *c = &dd->clients[1];
	c->phase = FSD_CL_PENDING;
	c->row = 1;
	c->region.base = &chdr;
	c->region.bytes = sizeof(chdr);
	chdr.ring_entries = ring_entries ? ring_entries : 1024;
	*out = c;
	return 0;
}

struct fsd_client *fsd_client_by_row(struct fsd *dd, uint32_t row)
{
	if (row >= dd->cfg.max_clients || dd->clients[row].phase == FSD_CL_FREE)
		return NULL;
	return &dd->clients[row];
}

void fsd_client_detach(struct fsd *dd, struct fsd_client *c, uint32_t reason)
{
	(void)dd, (void)reason;
	if (c->phase == FSD_CL_FREE)
		abort(); /* the control plane detached a row that is not there */
}

struct cJSON *fsd_stats_json(struct fsd *dd)
{
	(void)dd;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "ok", 1);
	return o;
}

struct cJSON *fsd_clients_json(struct fsd *dd)
{
	return fsd_stats_json(dd);
}

int fsd_hot_call(struct fsd *dd, int (*fn)(struct fsd *dd, void *arg), void *arg)
{
	return fn(dd, arg);
}

int fsr_profile_load(struct fsr *r, const uint32_t *counts)
{
	(void)r;
	return counts[0] == 7 ? -EINVAL : 0;
}

void fsr_profile_save(const struct fsr *r, uint32_t *counts)
{
	(void)r;
	counts[0] = 1;
}

/* Card 1 is down already: the verb's EALREADY path. */
static uint32_t cards_down;

int fsd_card_down_sync(struct fsd *dd, uint32_t card, const char *reason)
{
	if (card >= dd->cfg.cards || !reason || !*reason)
		abort(); /* the verb checks the number and always gives a reason */
	if (cards_down >> card & 1u)
		return -EALREADY;
	cards_down |= 1u << card;
	return 0;
}

int fsd_card_state(struct fsd *dd, uint32_t card, char *reason, size_t len, uint64_t *epoch)
{
	(void)dd;
	int down = card < 32 && (cards_down >> card & 1u);
	if (down && reason && len)
		snprintf(reason, len, "fuzz");
	if (epoch)
		*epoch = down ? 7 : 0;
	return down;
}

void fsd_request_stop(struct fsd *dd, const char *why)
{
	(void)why;
	dd->stopping = 1;
}

/* ---- the harness ------------------------------------------------------ */

static void setup(void)
{
	d.cfg.layers = 4;
	d.cfg.experts = 8;
	d.cfg.experts_used = 2;
	d.cfg.cards = 2;
	d.cfg.slots = 16;
	d.cfg.max_clients = 4;
	snprintf(d.cfg.model, sizeof(d.cfg.model), "fuzz-model");
	snprintf(d.cfg.fd_socket_path, sizeof(d.cfg.fd_socket_path), "/nonexistent/control.sock.fd");
	d.counters_daemon = counters;
	d.backend = &backend;
	d.dh = (struct fs_daemon_hdr *)dregion;
	d.dh->off_cards = sizeof(struct fs_daemon_hdr);
	struct fs_card_desc *cd = (struct fs_card_desc *)(dregion + d.dh->off_cards);
	for (int i = 0; i < 2; i++)
		cd[i] = (struct fs_card_desc){
			.id = (uint32_t)i, .slots = 16, .slot_bytes = 4096, .pool_bytes = 65536};
	d.slot_bytes = 4096;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	if (!ready) {
		setup();
		ready = 1;
	}
	if (size < 1)
		return 0;
	d.stopping = 0;
	cards_down = 2u;
	for (uint32_t i = 0; i < FSD_MAX_CLIENTS; i++)
		d.clients[i].phase = FSD_CL_FREE;
	d.clients[0] = (struct fsd_client){.phase = FSD_CL_ACTIVE, .row = 0, .pid = 1}; /* someone's */
	d.clients[2] = (struct fsd_client){.phase = FSD_CL_PENDING, .row = 2, .pid = 2};
	memset(d.clients[0].token, 0xab, 16);
	attach_fails = (data[0] >> 2) & 1;
	struct fsd_peer pe = {.pid = (uint64_t)getpid(), .have = 1};
	switch (data[0] & 3) {
	case 0:
		pe.uid = 0; /* root: an admin */
		break;
	case 1:
		pe.uid = (uint64_t)geteuid() == 0 ? 0 : geteuid(); /* the daemon's user */
		break;
	case 2:
		pe.uid = 4242; /* a stranger: no group is configured */
		pe.gid = 4242;
		break;
	default:
		pe.have = 0; /* no credentials */
		break;
	}
	uint64_t before[FS_N_DAEMON];
	memcpy(before, counters, sizeof(before));
	/* The request, in its own allocation: ASan sees any read past it. */
	size_t n = size - 1;
	char *req = malloc(n ? n : 1);
	if (!req)
		return 0;
	memcpy(req, data + 1, n);
	char *txt = fsd_control_reply(&d, req, n, &pe);
	free(req);
	if (!txt)
		abort(); /* out of memory is not what a fuzzer finds */
	cJSON *rep = cJSON_Parse(txt);
	const cJSON *ok = cJSON_GetObjectItemCaseSensitive(rep, "ok");
	if (!cJSON_IsObject(rep) || !cJSON_IsBool(ok))
		abort();
	uint64_t moved = (counters[FS_C_refused] - before[FS_C_refused]) +
			 (counters[FS_C_bad_requests] - before[FS_C_bad_requests]) +
			 (counters[FS_C_oversized] - before[FS_C_oversized]);
	if (cJSON_IsFalse(ok)) {
		const cJSON *err = cJSON_GetObjectItemCaseSensitive(rep, "error");
		const cJSON *code = cJSON_GetObjectItemCaseSensitive(rep, "code");
		if (!cJSON_IsString(err) || !cJSON_IsString(code))
			abort();
		if (moved != (strcmp(code->valuestring, "EIO") != 0))
			abort(); /* every refusal counted once */
	} else {
		if (moved != 0)
			abort();
		/* A stranger or a peer without credentials: hello and ping only. */
		if ((data[0] & 3) >= 2 && cJSON_GetObjectItemCaseSensitive(rep, "proto") == NULL)
			abort();
	}
	cJSON_Delete(rep);
	free(txt);
	return 0;
}
