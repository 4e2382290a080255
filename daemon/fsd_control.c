/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_control.c: the control socket.  nng REP over ipc://, JSON bodies.
 * Every request is {"verb": "...", "proto": N, ...}; every reply is
 * {"ok": true, ...} or {"ok": false, "error": "...", "code": "EACCES"}.
 * proto/README.md lists the verbs and their fields.
 *
 * The peer's uid/gid/pid come from the kernel (SO_PEERCRED via nng), never
 * from the message.  Only root, the daemon's own user or members of the
 * configured group may do anything but hello and ping.
 *
 * fsd_control_reply() is the whole request handling, bytes in, reply text
 * out (fuzz/control_fuzz.c fuzzes it); every refusal is counted once there.
 * The socket, its connections and the queued replies: fsd_control_io.c.
 */
#include <errno.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "fs_counters.h"
#include "fs_hex.h"
#include "fs_time.h"
#include "fsd_backend.h"
#include "fsd_control.h"
#include "fsd_hot.h"
#include "fsd_loop.h"
#include "fsr.h"

static const char *errno_code(int e)
{
	switch (e) {
	case EACCES:
		return "EACCES";
	case EPROTO:
		return "EPROTO";
	case EINVAL:
		return "EINVAL";
	case ENOENT:
		return "ENOENT";
	case EBUSY:
		return "EBUSY";
	case ENOSYS:
		return "ENOSYS";
	case EMSGSIZE:
		return "EMSGSIZE";
	case EALREADY:
		return "EALREADY";
	case EAGAIN:
		return "EAGAIN";
	default:
		return "EIO";
	}
}

static cJSON *reply_err(int e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cJSON *reply_err(int e, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "ok", 0);
	cJSON_AddStringToObject(o, "error", msg);
	cJSON_AddStringToObject(o, "code", errno_code(e));
	return o;
}

static cJSON *reply_ok(void)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "ok", 1);
	return o;
}

/* Is gid among the supplementary groups of pid?  (/proc/PID/status "Groups:") */
static int pid_in_group(uint64_t pid, gid_t gid)
{
	char path[64], line[1024];
	snprintf(path, sizeof(path), "/proc/%llu/status", (unsigned long long)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	int found = 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "Groups:", 7) != 0)
			continue;
		char *p = line + 7, *end;
		for (;;) {
			unsigned long g = strtoul(p, &end, 10);
			if (end == p)
				break;
			if ((gid_t)g == gid)
				found = 1;
			p = end;
		}
		break;
	}
	fclose(f);
	return found;
}

static int peer_allowed(struct fsd *d, const struct fsd_peer *pe, char *why, size_t len)
{
	if (!pe->have) {
		snprintf(why, len, "peer credentials unavailable");
		return 0;
	}
	if (pe->uid == 0 || pe->uid == (uint64_t)geteuid())
		return 1;
	if (d->cfg.group[0]) {
		/* Only the loop thread looks groups up: getgrnam's static buffer is safe. */
		// cppcheck-suppress getgrnamCalled
		struct group *g = getgrnam(d->cfg.group);
		if (g && (pe->gid == (uint64_t)g->gr_gid || pid_in_group(pe->pid, g->gr_gid)))
			return 1;
		snprintf(why, len, "uid %llu is not root, not foresightd's user and not in group '%s'",
			 (unsigned long long)pe->uid, d->cfg.group);
		return 0;
	}
	snprintf(why, len,
		 "uid %llu is not root and not foresightd's user (uid %d), and no group is configured",
		 (unsigned long long)pe->uid, (int)geteuid());
	return 0;
}

static int peer_admin(const struct fsd_peer *pe)
{
	return pe->have && (pe->uid == 0 || pe->uid == (uint64_t)geteuid());
}

static cJSON *layout_json(struct fsd *d, const struct fsd_client *c)
{
	cJSON *l = cJSON_CreateObject();
	cJSON_AddNumberToObject(l, "layers", d->cfg.layers);
	cJSON_AddNumberToObject(l, "experts", d->cfg.experts);
	cJSON_AddNumberToObject(l, "experts_used", d->cfg.experts_used);
	cJSON_AddNumberToObject(l, "daemon_bytes", (double)d->daemon_shm.bytes);
	cJSON_AddNumberToObject(l, "client_bytes", (double)c->region.bytes);
	cJSON_AddNumberToObject(l, "arena_bytes", (double)d->arena_shm.bytes);
	cJSON_AddNumberToObject(l, "ring_entries", ((struct fs_client_hdr *)c->region.base)->ring_entries);
	cJSON *fds = cJSON_AddArrayToObject(l, "fds");
	cJSON_AddItemToArray(fds, cJSON_CreateString("daemon"));
	cJSON_AddItemToArray(fds, cJSON_CreateString("client"));
	cJSON_AddItemToArray(fds, cJSON_CreateString("arena"));
	cJSON *cards = cJSON_AddArrayToObject(l, "cards");
	const struct fs_card_desc *desc = (const struct fs_card_desc *)((const char *)d->dh +
									d->dh->off_cards);
	for (uint32_t i = 0; i < d->cfg.cards; i++) {
		cJSON *cd = cJSON_CreateObject();
		cJSON_AddNumberToObject(cd, "id", i);
		cJSON_AddNumberToObject(cd, "slots", d->cfg.slots);
		cJSON_AddNumberToObject(cd, "slot_bytes", (double)d->slot_bytes);
		cJSON_AddNumberToObject(cd, "pool_bytes", (double)desc[i].pool_bytes);
		cJSON_AddStringToObject(cd, "backend", fs_backend_name(desc[i].kind));
		if (d->pool_ro_fd[i] >= 0) { /* a pool mapped through its fd (fsd_fdsock.c sends it) */
			char nm[16];
			snprintf(nm, sizeof(nm), "pool%u", i);
			cJSON_AddItemToArray(fds, cJSON_CreateString(nm));
		}
		char hex[160], pci[64];
		if (d->backend->card_handle &&
		    d->backend->card_handle(d, i, hex, sizeof(hex), pci, sizeof(pci)) == 0) {
			cJSON_AddStringToObject(cd, "ipc_handle", hex);
			cJSON_AddStringToObject(cd, "pci_bus_id", pci);
		}
		cJSON_AddItemToArray(cards, cd);
	}
	return l;
}

static cJSON *do_attach(struct fsd *d, const cJSON *req, const struct fsd_peer *pe)
{
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(req, "model");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(req, "name");
	const cJSON *ring = cJSON_GetObjectItemCaseSensitive(req, "ring_entries");
	if (model && !cJSON_IsNull(model)) {
		if (!cJSON_IsString(model))
			return reply_err(EINVAL, "attach: 'model' must be a string");
		if (strcmp(model->valuestring, d->cfg.model) != 0)
			return reply_err(ENOENT, "attach: model '%.64s' is not served here (serving '%s')",
					 model->valuestring, d->cfg.model);
	}
	if (name && !cJSON_IsString(name))
		return reply_err(EINVAL, "attach: 'name' must be a string");
	uint32_t ring_entries = 0;
	if (ring) {
		if (!cJSON_IsNumber(ring) || ring->valuedouble < 0 || ring->valuedouble > FS_RING_MAX_ENTRIES)
			return reply_err(EINVAL, "attach: 'ring_entries' must be a number in 0..%u",
					 FS_RING_MAX_ENTRIES);
		ring_entries = (uint32_t)ring->valuedouble;
	}
	if (d->stopping)
		return reply_err(EBUSY, "attach: foresightd is stopping");
	struct fsd_client *c;
	char err[256];
	int r = fsd_client_attach(d, (pid_t)pe->pid, (uid_t)pe->uid, (gid_t)pe->gid,
				  name ? name->valuestring : NULL, ring_entries, &c, err, sizeof(err));
	if (r < 0)
		return reply_err(-r, "attach: %s", err);
	cJSON *o = reply_ok();
	char tok[33], inst[17];
	fs_hex_encode(c->token, sizeof(c->token), tok);
	snprintf(inst, sizeof(inst), "%016llx", (unsigned long long)d->instance);
	cJSON_AddNumberToObject(o, "client_id", c->row);
	cJSON_AddStringToObject(o, "token", tok);
	cJSON_AddStringToObject(o, "fd_socket", d->cfg.fd_socket_path);
	cJSON_AddStringToObject(o, "instance", inst);
	cJSON_AddStringToObject(o, "model", d->cfg.model);
	cJSON_AddItemToObject(o, "layout", layout_json(d, c));
	/* Attached while the arena loads: how many layers are in so far (the
	 * ready words say which). */
	cJSON_AddBoolToObject(o, "arena_loading", __atomic_load_n(&d->loading, __ATOMIC_ACQUIRE) != 0);
	cJSON_AddNumberToObject(
		o, "layers_loaded",
		(double)__atomic_load_n(&d->counters_daemon[FS_C_arena_layers_loaded], __ATOMIC_RELAXED));
	return o;
}

static cJSON *do_detach(struct fsd *d, const cJSON *req, const struct fsd_peer *pe)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(req, "client_id");
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(req, "token");
	uint8_t t[16];
	if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= FSD_MAX_CLIENTS)
		return reply_err(EINVAL, "detach: 'client_id' must be a client number");
	struct fsd_client *c = fsd_client_by_row(d, (uint32_t)id->valuedouble);
	if (!c)
		return reply_err(ENOENT, "detach: no client %d", (int)id->valuedouble);
	int owner = cJSON_IsString(tok) && fs_hex_decode(tok->valuestring, t, sizeof(t)) == 0 &&
		    memcmp(t, c->token, 16) == 0;
	if (!owner && !peer_admin(pe))
		return reply_err(EACCES, "detach: client %u belongs to pid %d; give its token or be an admin",
				 c->row, (int)c->pid);
	fsd_client_detach(d, c, FS_DETACH_REQUESTED);
	return reply_ok();
}

/* ---- profile: the static tier's use counts, saved and loaded ---------- */

struct profile_arg {
	uint32_t *counts;
	int load;
};

static int profile_on_hot(struct fsd *d, void *p)
{
	struct profile_arg *a = p;
	if (a->load)
		return fsr_profile_load(d->core, a->counts);
	fsr_profile_save(d->core, a->counts);
	return 0;
}

static cJSON *do_profile(struct fsd *d, const cJSON *req, const struct fsd_peer *pe)
{
	const cJSON *act = cJSON_GetObjectItemCaseSensitive(req, "action");
	uint64_t n = (uint64_t)d->cfg.layers * d->cfg.experts;
	if (!cJSON_IsString(act) || (strcmp(act->valuestring, "save") && strcmp(act->valuestring, "load")))
		return reply_err(EINVAL, "profile: 'action' must be \"save\" or \"load\"");
	int load = strcmp(act->valuestring, "load") == 0;
	if (load && !peer_admin(pe))
		return reply_err(EACCES,
				 "profile load: only root or foresightd's own user may change the profile");
	struct profile_arg a = {.counts = calloc(n, sizeof(uint32_t)), .load = load};
	if (!a.counts)
		return reply_err(EIO, "profile: out of memory");
	cJSON *rep = NULL;
	if (load) {
		const cJSON *l = cJSON_GetObjectItemCaseSensitive(req, "layers");
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(req, "experts");
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(req, "counts");
		if (!cJSON_IsNumber(l) || !cJSON_IsNumber(e) || l->valuedouble != d->cfg.layers ||
		    e->valuedouble != d->cfg.experts || !cJSON_IsArray(c) ||
		    (uint64_t)cJSON_GetArraySize(c) != n) {
			rep = reply_err(EINVAL, "profile load: need layers %u, experts %u and %llu counts",
					d->cfg.layers, d->cfg.experts, (unsigned long long)n);
			goto out;
		}
		uint64_t i = 0;
		for (const cJSON *x = c->child; x; x = x->next, i++) {
			if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > 4294967295.0) {
				rep = reply_err(EINVAL,
						"profile load: count %llu is not a number in 0..2^32-1",
						(unsigned long long)i);
				goto out;
			}
			a.counts[i] = (uint32_t)x->valuedouble;
		}
	}
	int r = fsd_hot_call(d, profile_on_hot, &a);
	if (r == -ETIMEDOUT) {
		a.counts = NULL; /* still the hot thread's to read: leak it rather than race */
		rep = reply_err(EBUSY, "profile: the hot thread did not answer within 2 s");
		goto out;
	}
	if (r < 0) {
		rep = reply_err(-r, "profile %s: %s%s", act->valuestring, strerror(-r),
				r == -EINVAL ? " (the tiers are off: --tiers 0)" : "");
		goto out;
	}
	rep = reply_ok();
	if (!load) {
		cJSON_AddNumberToObject(rep, "layers", d->cfg.layers);
		cJSON_AddNumberToObject(rep, "experts", d->cfg.experts);
		cJSON *arr = cJSON_AddArrayToObject(rep, "counts");
		for (uint64_t i = 0; i < n; i++)
			cJSON_AddItemToArray(arr, cJSON_CreateNumber(a.counts[i]));
	}
	fsd_log(FSD_INFO, "control: profile %s by pid %llu", act->valuestring, (unsigned long long)pe->pid);
out:
	free(a.counts);
	return rep;
}

/* ---- card: take a card down (drain it, or emulate its loss) ------------ */

static cJSON *do_card(struct fsd *d, const cJSON *req, const struct fsd_peer *pe)
{
	const cJSON *card = cJSON_GetObjectItemCaseSensitive(req, "card");
	const cJSON *state = cJSON_GetObjectItemCaseSensitive(req, "state");
	if (!peer_admin(pe))
		return reply_err(EACCES, "card: only root or foresightd's own user may take a card down");
	uint32_t last = d->cfg.cards ? d->cfg.cards - 1 : 0;
	if (!cJSON_IsNumber(card) || !(card->valuedouble >= 0 && card->valuedouble < 65536) ||
	    card->valuedouble != (double)(uint32_t)card->valuedouble)
		return reply_err(EINVAL, "card: 'card' must be a card number (this foresightd serves 0..%u)",
				 last);
	uint32_t n = (uint32_t)card->valuedouble;
	if (n >= d->cfg.cards)
		return reply_err(ENOENT, "card: no card %u (this foresightd serves cards 0..%u)", n, last);
	if (!cJSON_IsString(state) || strcmp(state->valuestring, "down") != 0)
		return reply_err(EINVAL,
				 "card: 'state' must be \"down\" (a card that is down stays down until "
				 "foresightd restarts: nothing brings one up)");
	char reason[128];
	snprintf(reason, sizeof(reason), "taken down by an admin (the card verb, pid %llu uid %llu)",
		 (unsigned long long)pe->pid, (unsigned long long)pe->uid);
	int r = fsd_card_down_sync(d, n, reason);
	if (r == -EALREADY) {
		char why[128] = "";
		fsd_card_state(d, n, why, sizeof(why), NULL);
		return reply_err(EALREADY, "card: card %u is already down (%s)", n, why);
	}
	if (r == -ETIMEDOUT)
		return reply_err(EBUSY, "card: the hot thread did not answer within 2 s: card %u is still up",
				 n);
	if (r < 0)
		return reply_err(-r, "card: card %u: %s", n, strerror(-r));
	fsd_log(FSD_INFO, "control: card %u taken down by pid %llu", n, (unsigned long long)pe->pid);
	cJSON *o = reply_ok();
	cJSON_AddNumberToObject(o, "card", n);
	cJSON_AddStringToObject(o, "state", "down");
	cJSON_AddStringToObject(o, "reason", reason);
	return o;
}

/* EAGAIN while the arena loads (main.c: d->loading until it is whole). */
static cJSON *loading_reply(struct fsd *d, const char *verb)
{
	uint64_t done = __atomic_load_n(&d->counters_daemon[FS_C_arena_loaded_bytes], __ATOMIC_RELAXED);
	uint64_t total = __atomic_load_n(&d->counters_daemon[FS_C_arena_bytes], __ATOMIC_RELAXED);
	uint64_t left = __atomic_load_n(&d->counters_daemon[FS_C_arena_load_left_ns], __ATOMIC_RELAXED);
	return reply_err(
		EAGAIN,
		"%s: foresightd is loading the arena (%.0f %%, about %.0f s left): retry when it is done",
		verb, total ? 100.0 * (double)done / (double)total : 0.0, (double)left / 1e9);
}

static cJSON *handle(struct fsd *d, const char *body, size_t len, const struct fsd_peer *pe)
{
	cJSON *req = cJSON_ParseWithLength(body, len);
	cJSON *rep;
	if (!req || !cJSON_IsObject(req)) {
		cJSON_Delete(req);
		return reply_err(EINVAL, "request is not a JSON object");
	}
	const cJSON *verb = cJSON_GetObjectItemCaseSensitive(req, "verb");
	const cJSON *proto = cJSON_GetObjectItemCaseSensitive(req, "proto");
	if (!cJSON_IsString(verb)) {
		rep = reply_err(EINVAL, "request has no string 'verb'");
		goto out;
	}
	const char *v = verb->valuestring;
	if (proto && (!cJSON_IsNumber(proto) || proto->valuedouble != (double)FS_PROTO_VERSION)) {
		char theirs[32] = "(not a number)";
		if (cJSON_IsNumber(proto))
			snprintf(theirs, sizeof(theirs), "%g", proto->valuedouble);
		rep = reply_err(
			EPROTO,
			"protocol mismatch: client speaks version %s, foresightd %s speaks version %u",
			theirs, FSD_VERSION, FS_PROTO_VERSION);
		goto out;
	}
	/* While the arena loads, ping says "not ready" (what scripts wait
	 * on); stats, clients and hello answer. */
	if (strcmp(v, "ping") == 0 && __atomic_load_n(&d->loading, __ATOMIC_ACQUIRE)) {
		rep = loading_reply(d, v);
		goto out;
	}
	if (strcmp(v, "hello") == 0 || strcmp(v, "ping") == 0) {
		if (!proto && strcmp(v, "hello") == 0) {
			rep = reply_err(EPROTO, "hello: 'proto' is required (foresightd speaks version %u)",
					FS_PROTO_VERSION);
			goto out;
		}
		rep = reply_ok();
		char inst[17];
		snprintf(inst, sizeof(inst), "%016llx", (unsigned long long)d->instance);
		cJSON_AddNumberToObject(rep, "proto", FS_PROTO_VERSION);
		cJSON_AddStringToObject(rep, "version", FSD_VERSION);
		cJSON_AddNumberToObject(rep, "pid", getpid());
		cJSON_AddNumberToObject(rep, "uptime_s", (double)(fs_now_ns() - d->start_ns) / 1e9);
		cJSON_AddStringToObject(rep, "instance", inst);
		cJSON_AddStringToObject(rep, "backend", d->backend->name);
		goto out;
	}
	char why[256];
	if (!peer_allowed(d, pe, why, sizeof(why))) {
		fsd_log(FSD_WARN, "control: refused '%.32s' from pid %llu: %s", v,
			(unsigned long long)pe->pid, why);
		rep = reply_err(EACCES, "refused: %s", why);
		goto out;
	}
	/* While the arena loads, an engine is served layer by layer only if it
	 * says it checks the layers' ready words ("partial_arena": true, as
	 * libforesight-client does): an older one would read a layer's bytes
	 * before they are in.  A profile would want experts not in yet. */
	if (__atomic_load_n(&d->loading, __ATOMIC_ACQUIRE) &&
	    ((!strcmp(v, "attach") &&
	      !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "partial_arena"))) ||
	     !strcmp(v, "profile")))
		rep = loading_reply(d, v);
	else if (strcmp(v, "attach") == 0)
		rep = do_attach(d, req, pe);
	else if (strcmp(v, "detach") == 0)
		rep = do_detach(d, req, pe);
	else if (strcmp(v, "stats") == 0)
		rep = fsd_stats_json(d);
	else if (strcmp(v, "clients") == 0)
		rep = fsd_clients_json(d);
	else if (strcmp(v, "profile") == 0)
		rep = do_profile(d, req, pe);
	else if (strcmp(v, "card") == 0)
		rep = do_card(d, req, pe);
	else if (strcmp(v, "shutdown") == 0) {
		if (!peer_admin(pe)) {
			rep = reply_err(EACCES, "shutdown: only root or foresightd's own user may stop it");
		} else {
			fsd_log(FSD_INFO, "control: shutdown requested by pid %llu",
				(unsigned long long)pe->pid);
			fsd_request_stop(d, "shutdown requested");
			rep = reply_ok();
		}
	} else {
		rep = reply_err(
			ENOSYS,
			"unknown verb '%.32s' (verbs: hello ping attach detach stats clients profile card shutdown)",
			v);
	}
out:
	cJSON_Delete(req);
	return rep;
}

/* Count a refused or malformed request once, by its error code: EACCES,
 * EPROTO, EBUSY, ENOENT and EALREADY are refusals (credentials, version,
 * limits, a model or card not served, a card already down), EINVAL and
 * ENOSYS malformed requests, EMSGSIZE an oversized one.  EIO (the daemon's
 * own trouble) is neither. */
static void count_reply(struct fsd *d, const cJSON *rep)
{
	if (!rep || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rep, "ok")))
		return;
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(rep, "code");
	const char *c = cJSON_IsString(code) ? code->valuestring : "";
	if (!strcmp(c, "EACCES") || !strcmp(c, "EPROTO") || !strcmp(c, "EBUSY") || !strcmp(c, "ENOENT") ||
	    !strcmp(c, "EALREADY"))
		fsd_count(&d->counters_daemon[FS_C_refused], 1);
	else if (!strcmp(c, "EINVAL") || !strcmp(c, "ENOSYS"))
		fsd_count(&d->counters_daemon[FS_C_bad_requests], 1);
	else if (!strcmp(c, "EMSGSIZE"))
		fsd_count(&d->counters_daemon[FS_C_oversized], 1);
}

char *fsd_control_reply(struct fsd *d, const void *req, size_t len, const struct fsd_peer *pe)
{
	cJSON *rep;
	if (len > FSD_CONTROL_MAX_MSG) {
		fsd_log(FSD_WARN, "control: refused a request of %zu bytes from pid %llu (limit %u)", len,
			(unsigned long long)pe->pid, FSD_CONTROL_MAX_MSG);
		rep = reply_err(EMSGSIZE, "request of %zu bytes is over the limit of %u bytes", len,
				FSD_CONTROL_MAX_MSG);
	} else {
		rep = handle(d, req, len, pe);
	}
	count_reply(d, rep);
	char *txt = rep ? cJSON_PrintUnformatted(rep) : NULL;
	cJSON_Delete(rep);
	return txt;
}
