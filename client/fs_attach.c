/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_attach.c: one attach: hello, attach, the fd handshake, and mapping and
 * checking every region the daemon handed over.  The daemon is trusted to be
 * the daemon, but its regions are still checked against their own headers so
 * that a version skew or a bug becomes an error message, not a crash.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fs_client_internal.h"
#include "fs_ctl.h"
#include "fs_fdpass.h"
#include "fs_fdproto.h"
#include "fs_hex.h"
#include "fs_time.h"

/* fs_card_info.kind is the wire's fs_card_desc.kind. */
_Static_assert(FS_CARD_HOST == FS_BACKEND_HOST && FS_CARD_CUDA == FS_BACKEND_CUDA,
	       "the public card kinds are the daemon's backend kinds");

static int fetch_fds(struct fs_client *c, const char *path, uint32_t id, const uint8_t *token, int *fds,
		     unsigned max, unsigned *n, pid_t *daemon_pid)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fs_set_error(c, "fd socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	struct timeval tv = {.tv_sec = 2};
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;
		fs_set_error(c, "cannot connect to the fd socket %s: %s", path, strerror(errno));
		close(s);
		return e;
	}
	struct fs_fd_request rq = {.magic = FS_FD_MAGIC, .version = FS_PROTO_VERSION, .client_id = id};
	memcpy(rq.token, token, 16);
	if (send(s, &rq, sizeof(rq), MSG_NOSIGNAL) != (ssize_t)sizeof(rq)) {
		int e = -errno;
		fs_set_error(c, "fd socket: send failed: %s", strerror(errno));
		close(s);
		return e;
	}
	struct fs_fd_reply rp;
	long r = fs_fd_recv(s, &rp, sizeof(rp), fds, max, n);
	/* The daemon's pid as this process's namespace numbers it: the
	 * background thread watches it through a pidfd to see the daemon die. */
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	if (daemon_pid)
		*daemon_pid = getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 ? cred.pid : 0;
	close(s);
	if (r < 0) {
		fs_set_error(c, "fd socket: receive failed: %s", strerror((int)-r));
		return (int)r;
	}
	if (r != (long)sizeof(rp) || rp.magic != FS_FD_MAGIC || rp.status != 0 || rp.nfds != *n) {
		for (unsigned i = 0; i < *n; i++)
			close(fds[i]);
		*n = 0;
		fs_set_error(c, "fd socket: daemon refused the handshake (%s)",
			     r == (long)sizeof(rp) && rp.status < 0 ? strerror(-rp.status) : "bad reply");
		return r == (long)sizeof(rp) && rp.status < 0 ? rp.status : -EPROTO;
	}
	return 0;
}

/* Bounds of a part inside a region. */
static int part_ok(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

static int map_daemon(struct fs_client *c, struct fs_att *a)
{
	const struct fs_daemon_hdr *h = a->dshm.base;
	uint64_t sz = a->dshm.bytes;
	/* Every size and offset read once, into private memory: what is
	 * checked is what is used (the region is the daemon's to write). */
	struct fs_daemon_hdr hc;
	memcpy(&hc, h, sizeof(hc));
	if (hc.magic != FS_DAEMON_MAGIC || hc.version != FS_PROTO_VERSION) {
		fs_set_error(c, "daemon region: bad magic or layout version %u (this library: %u)",
			     hc.version, FS_PROTO_VERSION);
		return -EPROTO;
	}
	if (hc.cards == 0 || hc.cards > FS_MAX_CARDS || hc.layers == 0 || hc.layers > FS_MAX_LAYERS ||
	    hc.experts == 0 || hc.experts > FS_MAX_EXPERTS || hc.epoch_bufs == 0 ||
	    hc.epoch_bufs > FS_MAX_EPOCH_BUFS || hc.region_bytes > sz ||
	    !part_ok(hc.off_cards, (uint64_t)hc.cards * sizeof(struct fs_card_desc), sz) ||
	    hc.epoch_buf_bytes < sizeof(struct fs_epoch_buf_hdr) + 8ull * hc.cards * hc.layers * hc.experts ||
	    !part_ok(hc.off_epochs, hc.epoch_buf_bytes * hc.epoch_bufs, sz)) {
		fs_set_error(c, "daemon region: inconsistent header");
		return -EBADMSG;
	}
	/* The layers' ready words (the arena may still be loading): read the
	 * offset once, check it, keep the pointer. */
	uint64_t off_lr = hc.off_layer_ready;
	if (!fs_layer_ready_ok(off_lr, hc.layers, sz)) {
		fs_set_error(c, "daemon region: layer ready words out of bounds");
		return -EBADMSG;
	}
	a->layer_ready = off_lr ? (const uint32_t *)((const char *)h + off_lr) : NULL;
	const struct fs_card_desc *cd = (const void *)((const char *)h + hc.off_cards);
	for (uint32_t i = 0; i < hc.cards; i++) {
		struct fs_card_desc d = cd[i];
		if (d.slots == 0 ||
		    !part_ok(hc.off_ready_card[i], FS_ISSUED_OFFSET(d.slots) + 8ull * d.slots, sz)) {
			fs_set_error(c, "daemon region: card %u ready words out of bounds", i);
			return -EBADMSG;
		}
		a->ready[i] = (const uint32_t *)((const char *)h + hc.off_ready_card[i]);
		a->slots[i] = d.slots;
		a->slot_bytes[i] = d.slot_bytes;
		a->card_info[i].id = d.id;
		a->card_info[i].slots = d.slots;
		a->card_info[i].slot_bytes = d.slot_bytes;
		a->card_info[i].kind = d.kind;
		memcpy(a->card_info[i].name, d.name, sizeof(d.name));
		a->card_info[i].name[sizeof(a->card_info[i].name) - 1] = 0;
	}
	a->dh = h;
	a->cards = hc.cards;
	a->layers = hc.layers;
	a->experts = hc.experts;
	a->epoch_bufs = hc.epoch_bufs;
	a->instance = hc.instance;
	return 0;
}

void fs_arena_unmap(struct fs_client *c, struct fs_arena_map *m)
{
	fs_shm_close(&m->shm);
	m->ah = NULL;
	m->idx = NULL;
	m->layers = m->experts = 0;
	m->dev = m->ino = 0;
	m->next = c->arena_spare;
	c->arena_spare = m;
}

static int map_arena(struct fs_client *c, struct fs_att *a, int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	/* The same memfd as the current arena, handed over across a restart
	 * (the fd store): map nothing.  A retired arena is never taken back,
	 * even when it is this memfd: its unmapping goes in order (see
	 * fs_client_internal.h), and a second mapping of the same pages costs
	 * no memory while the first one waits for its readers. */
	struct fs_arena_map *cur = fs_load_acquire(&c->arena_cur);
	if (cur && cur->dev == (uint64_t)st.st_dev && cur->ino == (uint64_t)st.st_ino &&
	    cur->layers == a->layers && cur->experts == a->experts) {
		close(fd);
		a->arena = cur;
		return 0;
	}
	/* A struct of an unmapped arena, or a new one.  Its `pins` are left as
	 * they are: a reader that loaded it as c->arena_cur long ago may still
	 * add and take back one (fs_arena_get); nothing is read through it
	 * until it is published as c->arena_cur again. */
	struct fs_arena_map *m = c->arena_spare;
	if (m) {
		c->arena_spare = m->next;
	} else if (!(m = calloc(1, sizeof(*m)))) {
		close(fd);
		return -ENOMEM;
	}
	m->next = NULL;
	for (unsigned i = 0; i < FS_MAX_LAYERS / 64; i++)
		fs_store_relaxed(&m->layer_in[i], 0ull);
	int r = fs_shm_map_fd(&m->shm, fd, sizeof(struct fs_arena_hdr), 0);
	if (r < 0) {
		fs_set_error(c, "mapping the arena failed: %s", strerror(-r));
		fs_arena_unmap(c, m);
		return r;
	}
	const struct fs_arena_hdr *h = m->shm.base;
	uint64_t sz = m->shm.bytes;
	/* Read once: the sizes checked are the sizes kept (see map_daemon). */
	struct fs_arena_hdr hc;
	memcpy(&hc, h, sizeof(hc));
	uint64_t n = (uint64_t)hc.layers * hc.experts;
	int ok = hc.magic == FS_ARENA_MAGIC && hc.version == FS_PROTO_VERSION && hc.layers == a->layers &&
		 hc.experts == a->experts && part_ok(hc.off_index, n * sizeof(struct fs_arena_entry), sz);
	const struct fs_arena_entry *e = (const void *)((const char *)h + hc.off_index);
	for (uint64_t i = 0; ok && i < n; i++)
		ok = part_ok(e[i].offset, e[i].bytes, sz);
	if (!ok) {
		fs_set_error(c, "arena: bad header or an expert out of bounds");
		fs_arena_unmap(c, m);
		return -EBADMSG;
	}
	m->ah = h;
	m->idx = e;
	m->layers = hc.layers;
	m->experts = hc.experts;
	m->dev = (uint64_t)st.st_dev;
	m->ino = (uint64_t)st.st_ino;
	a->arena = m;
	return 0;
}

static int map_client(struct fs_client *c, struct fs_att *a)
{
	struct fs_client_hdr *h = a->cshm.base;
	if (h->magic != FS_CLIENT_MAGIC || h->version != FS_PROTO_VERSION ||
	    !part_ok(h->off_ring, h->ring_bytes, a->cshm.bytes) || h->client_id != a->client_id) {
		fs_set_error(c, "client region: bad header");
		return -EBADMSG;
	}
	int r = fs_ring_prod_init(&a->prod, (char *)h + h->off_ring, (size_t)h->ring_bytes);
	if (r < 0) {
		fs_set_error(c, "client region: bad ring (%s)", strerror(-r));
		return r;
	}
	a->ch = h;
	fs_store_release(&h->heartbeat_ns, fs_now_ns());
	/* This library says what it reads through its holds (fs_lookup_live
	 * stores its reach): the daemon then keeps only those tables' slots
	 * for it.  1: none newer than what it holds, so far. */
	fs_store_release(&h->reach, 1ull);
	/* The daemon marks us ATTACHED once its residency core counts our holds;
	 * no epoch may be acquired before that (it would not protect its slots). */
	uint64_t until = fs_now_ns() + 2000000000ull;
	while (fs_load_acquire(&h->state) != FS_CLIENT_ATTACHED) {
		if (fs_now_ns() > until || fs_load_acquire(&h->state) == FS_CLIENT_DETACHED) {
			fs_set_error(c, "attach: the daemon did not activate this client within 2 s");
			return -ETIMEDOUT;
		}
		struct timespec ts = {.tv_nsec = 200000};
		nanosleep(&ts, NULL);
	}
	return 0;
}

int fs_att_create(struct fs_client *c, struct fs_att **out)
{
	char err[256];
	cJSON *rep = NULL;
	int r;
	struct fs_att *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->dshm.fd = a->cshm.fd = -1;
	a->daemon_pidfd = -1;
	int arena_fd = -1;
	for (unsigned i = 0; i < FS_MAX_CARDS; i++)
		a->pool[i].fd = -1;

	cJSON *req = fs_ctl_request("hello");
	r = fs_ctl_call_unsent(c->req, req, &rep, err, sizeof(err), &c->hello_unsent);
	cJSON_Delete(req);
	cJSON_Delete(rep);
	rep = NULL;
	if (r < 0) {
		fs_set_error(c, "hello: %s", err);
		goto fail;
	}
	req = fs_ctl_request("attach");
	cJSON_AddStringToObject(req, "name", c->name);
	if (c->model[0])
		cJSON_AddStringToObject(req, "model", c->model);
	if (c->ring_entries)
		cJSON_AddNumberToObject(req, "ring_entries", c->ring_entries);
	/* We check the layers' ready words (fs_arena_expert): serve us while
	 * the arena loads. */
	cJSON_AddTrueToObject(req, "partial_arena");
	r = fs_ctl_call(c->req, req, &rep, err, sizeof(err));
	cJSON_Delete(req);
	if (r < 0) {
		fs_set_error(c, "%s", err);
		goto fail;
	}
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(rep, "client_id");
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(rep, "token");
	const cJSON *fdp = cJSON_GetObjectItemCaseSensitive(rep, "fd_socket");
	const cJSON *lay = cJSON_GetObjectItemCaseSensitive(rep, "layout");
	const cJSON *cards = lay ? cJSON_GetObjectItemCaseSensitive(lay, "cards") : NULL;
	if (!cJSON_IsNumber(id) ||
	    fs_hex_decode(cJSON_IsString(tok) ? tok->valuestring : NULL, a->token, sizeof(a->token)) < 0 ||
	    !cJSON_IsString(fdp) || !cJSON_IsArray(cards) || cJSON_GetArraySize(cards) < 1 ||
	    cJSON_GetArraySize(cards) > (int)FS_MAX_CARDS) {
		fs_set_error(c, "attach: malformed reply");
		r = -EPROTO;
		goto fail;
	}
	a->client_id = (uint32_t)id->valuedouble;
	unsigned ncards = (unsigned)cJSON_GetArraySize(cards), nhost = 0;
	for (unsigned i = 0; i < ncards; i++) {
		const cJSON *b = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cards, (int)i),
								  "backend");
		nhost += !(cJSON_IsString(b) && strcmp(b->valuestring, "cuda") == 0);
	}
	int fds[3 + FS_MAX_CARDS];
	unsigned nfds = 0;
	pid_t dpid = 0;
	r = fetch_fds(c, fdp->valuestring, a->client_id, a->token, fds, 3 + nhost, &nfds, &dpid);
	if (r < 0)
		goto fail;
	if (nfds != 3 + nhost) {
		for (unsigned i = 0; i < nfds; i++)
			close(fds[i]);
		fs_set_error(c, "fd socket: got %u fds, expected %u", nfds, 3 + nhost);
		r = -EPROTO;
		goto fail;
	}
	/* Take ownership of every fd first, so any failure below closes them. */
	a->dshm.fd = fds[0];
	a->cshm.fd = fds[1];
	arena_fd = fds[2];
	for (unsigned i = 0, k = 3; i < ncards; i++) {
		const struct cJSON *cj = cJSON_GetArrayItem(cards, (int)i);
		const cJSON *b = cJSON_GetObjectItemCaseSensitive(cj, "backend");
		if (!(cJSON_IsString(b) && strcmp(b->valuestring, "cuda") == 0))
			a->pool[i].fd = fds[k++];
	}
	if ((r = fs_shm_map_fd(&a->dshm, fds[0], sizeof(struct fs_daemon_hdr), 0)) < 0 ||
	    (r = fs_shm_map_fd(&a->cshm, fds[1], sizeof(struct fs_client_hdr), 1)) < 0) {
		fs_set_error(c, "mapping a region failed: %s", strerror(-r));
		goto fail;
	}
	if ((r = map_daemon(c, a)) < 0)
		goto fail;
	r = map_arena(c, a, arena_fd); /* takes arena_fd in every case */
	arena_fd = -1;
	if (r < 0)
		goto fail;
	a->layers_all_in = fs_arena_note_ready(a);
	if (a->cards != ncards) {
		fs_set_error(c, "attach: %u cards in the reply, %u in the daemon region", ncards, a->cards);
		r = -EPROTO;
		goto fail;
	}
	for (unsigned i = 0; i < ncards; i++) {
		if (a->card_info[i].kind == FS_CARD_CUDA) {
			const cJSON *cj = cJSON_GetArrayItem(cards, (int)i);
			const cJSON *ipc = cJSON_GetObjectItemCaseSensitive(cj, "ipc_handle");
			const cJSON *pci = cJSON_GetObjectItemCaseSensitive(cj, "pci_bus_id");
			r = fs_cuda_open_pool(cJSON_IsString(ipc) ? ipc->valuestring : NULL,
					      cJSON_IsString(pci) ? pci->valuestring : NULL, &a->dev_base[i],
					      &a->dev_index[i], err, sizeof(err));
			if (r < 0) {
				fs_set_error(c, "%s", err);
				goto fail;
			}
			continue;
		}
		if ((r = fs_shm_map_fd(&a->pool[i], a->pool[i].fd, (size_t)(a->slots[i] * a->slot_bytes[i]),
				       0)) < 0) {
			fs_set_error(c, "mapping the pool of card %u failed: %s", i, strerror(-r));
			goto fail;
		}
		a->pool_base[i] = a->pool[i].base;
	}
	a->daemon_pidfd = dpid > 0 ? (int)syscall(SYS_pidfd_open, dpid, 0) : -1;
	/* Only now: the daemon activates us when we look for ATTACHED. */
	if ((r = map_client(c, a)) < 0 || (r = fs_dev_att_create(c, a)) < 0)
		goto fail;
	cJSON_Delete(rep);
	*out = a;
	return 0;
fail:
	cJSON_Delete(rep);
	if (arena_fd >= 0)
		close(arena_fd);
	/* An arena this attach mapped anew is seen by no one else yet. */
	if (a->arena && a->arena != fs_load_acquire(&c->arena_cur))
		fs_arena_unmap(c, a->arena);
	a->arena = NULL;
	fs_att_destroy(c, a, 0);
	return r;
}

void fs_att_destroy(struct fs_client *c, struct fs_att *a, int detach)
{
	if (!a)
		return;
	if (detach && c->req_open && !fs_load_relaxed(&a->dead)) {
		char err[256], tok[33];
		cJSON *rep = NULL;
		cJSON *req = fs_ctl_request("detach");
		fs_hex_encode(a->token, sizeof(a->token), tok);
		cJSON_AddNumberToObject(req, "client_id", a->client_id);
		cJSON_AddStringToObject(req, "token", tok);
		(void)fs_ctl_call(c->req, req, &rep, err, sizeof(err));
		cJSON_Delete(req);
		cJSON_Delete(rep);
	}
	if (a->daemon_pidfd >= 0)
		close(a->daemon_pidfd);
	fs_shm_close(&a->dshm);
	fs_dev_att_destroy(c, a); /* keeps a region registered with CUDA mapped */
	fs_shm_close(&a->cshm);
	for (unsigned i = 0; i < FS_MAX_CARDS; i++) {
		fs_shm_close(&a->pool[i]);
		if (a->dev_base[i])
			fs_cuda_close_pool(a->dev_base[i]);
	}
	free(a);
}
