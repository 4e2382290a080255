/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_client.c: the handle's life: open, close, errors, and the background
 * thread that keeps the heartbeat, notices the daemon leaving and attaches
 * again when it returns.  Nothing here runs on an engine's per-layer path.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_client_internal.h"
#include "fs_ctl.h"
#include "fs_futex.h"
#include "fs_time.h"

#define BG_PERIOD_NS 100000000ull /* heartbeat and daemon check */
#define CTL_TIMEOUT_MS 2000
#define REATTACH_TIMEOUT_MS 500 /* one re-attach try (background thread) */

extern char *program_invocation_short_name;

void fs_set_error(const struct fs_client *c, const char *fmt, ...)
{
	struct fs_client *mc = (struct fs_client *)c;
	char msg[sizeof(mc->err)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&mc->err_lock);
	memcpy(mc->err, msg, sizeof(msg));
	pthread_mutex_unlock(&mc->err_lock);
}

/* A copy per calling thread: the background thread may write the handle's
 * message (a failed re-attach) while an engine thread reads it. */
const char *fs_client_last_error(const fs_client *c)
{
	static _Thread_local char copy[sizeof(c->err)];
	if (!c)
		return "no handle";
	struct fs_client *mc = (struct fs_client *)c;
	pthread_mutex_lock(&mc->err_lock);
	memcpy(copy, mc->err, sizeof(copy));
	pthread_mutex_unlock(&mc->err_lock);
	return copy;
}

const char *fs_strerror(int err)
{
	switch (-err) {
	case 0:
		return "success";
	case ENOBUFS:
		return "ring full: record dropped";
	case ENOTCONN:
		return "not attached to foresightd";
	case EPROTO:
		return "protocol version mismatch";
	case EACCES:
		return "refused by foresightd";
	case EBUSY:
		return "busy: all epoch holds in use, or foresightd at its client limit";
	case EAGAIN:
		return "foresightd is loading the arena: retry";
	default:
		return strerror(-err);
	}
}

/* Is the daemon behind this attachment still there and still ours?  Death
 * is seen at once through a pidfd; the heartbeat only catches a daemon that
 * hangs, so it gets a generous 50 periods (5 s by default): a loaded machine
 * must not make engines give up a live daemon. */
static int att_alive(const struct fs_att *a, uint64_t now)
{
	uint32_t st = fs_load_acquire(&a->dh->state);
	if (st != FS_DAEMON_RUNNING)
		return 0;
	if (fs_load_acquire(&a->ch->state) != FS_CLIENT_ATTACHED)
		return 0;
	if (a->daemon_pidfd >= 0) {
		struct pollfd p = {.fd = a->daemon_pidfd, .events = POLLIN};
		if (poll(&p, 1, 0) > 0)
			return 0;
	}
	/* A heartbeat newer than `now` was written after it was taken: fresh. */
	uint64_t hb = fs_load_acquire(&a->dh->heartbeat_ns);
	uint64_t period = (uint64_t)a->dh->heartbeat_ms * 1000000ull;
	return hb >= now || now - hb <= 50 * period;
}

static void retire(struct fs_client *c, struct fs_att *a)
{
	fs_store_release(&a->dead, 1);
	a->retired_qs = fs_load_acquire(&c->qs);
	a->next = c->retired;
	c->retired = a;
}

/* Free retired attachments no engine call can still be using. */
static void reap(struct fs_client *c, int all)
{
	struct fs_att **pp = &c->retired;
	while (*pp) {
		struct fs_att *a = *pp;
		int idle = fs_load_acquire(&a->views) == 0 && fs_load_acquire(&c->qs) != a->retired_qs;
		if (all || idle) {
			*pp = a->next;
			fs_att_destroy(c, a, 0);
		} else {
			pp = &a->next;
		}
	}
}

/* Does an attachment (the current one or a retired one) map arena m? */
static int arena_attached(const struct fs_client *c, const struct fs_arena_map *m)
{
	const struct fs_att *cur = fs_load_relaxed(&c->att);
	if (cur && cur->arena == m)
		return 1;
	for (const struct fs_att *a = c->retired; a; a = a->next)
		if (a->arena == m)
			return 1;
	return 0;
}

/* Unmap retired arenas nothing can read any more, oldest first (the rule
 * is in fs_client_internal.h).  The pins are read after c->arena_cur moved
 * on (seq_cst both): a reader that pins this arena later sees the new
 * c->arena_cur and lets it go without reading it (fs_arena_get). */
static void arena_reap(struct fs_client *c)
{
	while (c->arena_old) {
		struct fs_arena_map *m = c->arena_old;
		if (__atomic_load_n(&m->pins, __ATOMIC_SEQ_CST) != 0 ||
		    fs_load_acquire(&c->qs) == m->retired_qs || arena_attached(c, m))
			return;
		c->arena_old = m->next;
		fs_arena_unmap(c, m);
		__atomic_fetch_add(&c->arenas_unmapped, 1, __ATOMIC_RELAXED);
	}
}

/* A new attachment is current: its arena becomes the one every reader
 * sees; the one before, if another, is retired (the newest). */
static void arena_switch(struct fs_client *c, struct fs_arena_map *na)
{
	struct fs_arena_map *old = c->arena_cur;
	if (old == na)
		return;
	__atomic_store_n(&c->arena_cur, na, __ATOMIC_SEQ_CST);
	if (!old)
		return;
	old->retired_qs = fs_load_acquire(&c->qs); /* after the switch: an acquire before it counts not */
	old->next = NULL;
	struct fs_arena_map **pp = &c->arena_old;
	while (*pp)
		pp = &(*pp)->next;
	*pp = old;
}

/*
 * The REQ socket's dialer redials on its own after a daemon goes, except
 * that nng 1.5.2's stops for good once a connection attempt is reset in
 * its handshake: a daemon killed -9 while the redial sat in its listener's
 * backlog.  The engine then never attached again, every hello "Timed out"
 * with no connect() at all, while the next daemon answered every other
 * process (fs_reconnect_test).  So when a re-attach try's hello found no
 * connection to send on for all of REATTACH_TIMEOUT_MS, where a live
 * dialer reconnects within 200 ms of a daemon listening, the dialer is
 * replaced.  Only then: closing a dialer in its handshake is what stops
 * nng 1.5.2's listener on the daemon's side (fsd_control_io.c's probe
 * recovers it, seconds later), and a broken connection is redialed by the
 * dialer itself.
 */
static int reattach_try(struct fs_client *c, struct fs_att **na)
{
	if (!c->req_open)
		return -ENOTCONN;
	int r = fs_att_create(c, na);
	if (r < 0 && c->hello_unsent) {
		(void)fs_ctl_redial(c->req, &c->dialer, c->socket);
		__atomic_fetch_add(&c->redials, 1, __ATOMIC_RELAXED);
	}
	return r;
}

static void *bg_main(void *arg)
{
	struct fs_client *c = arg;
	while (!fs_load_acquire(&c->bg_stop)) {
		uint64_t now = fs_now_ns();
		struct fs_att *a = fs_load_acquire(&c->att);
		if (a) {
			fs_store_release(&a->ch->heartbeat_ns, now);
			/* The handle's count, for the daemon's client row (its
			 * `redials` counter): a region is new at each attach. */
			fs_store_relaxed(&a->ch->redials, fs_load_relaxed(&c->redials));
			/* While the arena loads: the layers that came in since. */
			if (!a->layers_all_in)
				a->layers_all_in = fs_arena_note_ready(a);
			if (!att_alive(a, now)) {
				__atomic_store_n(&c->att, (struct fs_att *)NULL, __ATOMIC_RELEASE);
				retire(c, a);
			}
		} else if (!c->no_reattach) {
			struct fs_att *na;
			pthread_mutex_lock(&c->ctl_lock);
			/* A request sent while no daemon listens waits for one: cap
			 * each try, so a daemon that comes back is found on the next
			 * try (every BG_PERIOD_NS) rather than after a long wait. */
			if (c->req_open) {
				nng_socket_set_ms(c->req, NNG_OPT_RECVTIMEO, REATTACH_TIMEOUT_MS);
				nng_socket_set_ms(c->req, NNG_OPT_SENDTIMEO, REATTACH_TIMEOUT_MS);
			}
			int r = reattach_try(c, &na);
			if (c->req_open) {
				nng_socket_set_ms(c->req, NNG_OPT_RECVTIMEO, CTL_TIMEOUT_MS);
				nng_socket_set_ms(c->req, NNG_OPT_SENDTIMEO, CTL_TIMEOUT_MS);
			}
			pthread_mutex_unlock(&c->ctl_lock);
			if (r == 0) {
				arena_switch(c, na->arena);
				__atomic_store_n(&c->att, na, __ATOMIC_RELEASE);
				__atomic_fetch_add(&c->attach_count, 1, __ATOMIC_RELAXED);
				(void)fs_dev_sync(c); /* the kernels' ring, if enabled */
			}
		}
		reap(c, 0);
		arena_reap(c);
		uint32_t w = fs_load_acquire(&c->bg_wake);
		if (!fs_load_acquire(&c->bg_stop))
			fs_futex_wait(&c->bg_wake, w, BG_PERIOD_NS);
	}
	return NULL;
}

static void fill_model(struct fs_client *c, const struct fs_att *a)
{
	struct fs_model_info *m = &c->model_info;
	m->layers = a->layers;
	m->experts = a->experts;
	m->experts_used = a->arena->ah->experts_used;
	m->cards = a->cards;
	m->max_expert_bytes = a->arena->ah->max_expert_bytes;
	memcpy(m->model, a->arena->ah->model, sizeof(m->model));
	m->model[sizeof(m->model) - 1] = 0;
}

/* What a handle owns besides attachments: its arenas (engines may still
 * hold pointers into them until now), the REQ socket, itself. */
static void arena_list_free(struct fs_arena_map *m)
{
	while (m) {
		struct fs_arena_map *n = m->next;
		fs_shm_close(&m->shm);
		free(m);
		m = n;
	}
}

static void handle_free(struct fs_client *c)
{
	if (c->arena_cur)
		c->arena_cur->next = NULL;
	arena_list_free(c->arena_cur);
	arena_list_free(c->arena_old);
	arena_list_free(c->arena_spare);
	if (c->req_open)
		nng_close(c->req);
	pthread_mutex_destroy(&c->ctl_lock);
	pthread_mutex_destroy(&c->dev_lock);
	pthread_mutex_destroy(&c->err_lock);
	free(c);
}

int fs_client_open(fs_client **out, const struct fs_client_opts *opts)
{
	struct fs_client_opts none = {0};
	fs_note_open_error("");
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!opts)
		opts = &none;
	struct fs_client *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	const char *path = opts->socket_path;
	if (!path || !*path)
		path = getenv("FORESIGHT_SOCKET");
	if (!path || !*path)
		path = FS_DEFAULT_SOCKET;
	if (strlen(path) >= sizeof(c->socket) - 4) {
		fs_note_open_error("socket path too long");
		free(c); /* before any mutex exists */
		return -ENAMETOOLONG;
	}
	strcpy(c->socket, path);
	snprintf(c->name, sizeof(c->name), "%s",
		 opts->name && *opts->name ? opts->name : program_invocation_short_name);
	if (opts->model)
		snprintf(c->model, sizeof(c->model), "%s", opts->model);
	c->ring_entries = opts->ring_entries;
	c->no_reattach = opts->no_reattach;
	pthread_mutex_init(&c->ctl_lock, NULL);
	pthread_mutex_init(&c->dev_lock, NULL);
	pthread_mutex_init(&c->err_lock, NULL);

	char err[256];
	int r = fs_ctl_open_dialer(&c->req, &c->dialer, c->socket, CTL_TIMEOUT_MS, err, sizeof(err));
	if (r < 0) {
		fs_set_error(c, "%s", err);
		goto fail;
	}
	c->req_open = 1;
	struct fs_att *a;
	if ((r = fs_att_create(c, &a)) < 0)
		goto fail;
	fill_model(c, a);
	c->arena_cur = a->arena;
	c->att = a;
	c->attach_count = 1;
	if (pthread_create(&c->bg, NULL, bg_main, c) != 0) {
		fs_set_error(c, "cannot start the background thread");
		r = -EAGAIN;
		goto fail;
	}
	c->bg_started = 1;
	*out = c;
	return 0;
fail:
	/* Leave the message where the caller can read it: the handle is freed,
	 * so print it once here as well. */
	fprintf(stderr, "libforesight-client: %s\n", c->err);
	fs_note_open_error(c->err);
	if (c->att)
		fs_att_destroy(c, c->att, 1);
	handle_free(c);
	return r;
}

void fs_client_close(fs_client *c)
{
	if (!c)
		return;
	if (c->bg_started) {
		fs_store_release(&c->bg_stop, 1);
		__atomic_fetch_add(&c->bg_wake, 1, __ATOMIC_SEQ_CST);
		fs_futex_wake(&c->bg_wake, 1);
		pthread_join(c->bg, NULL);
	}
	struct fs_att *a = c->att;
	c->att = NULL;
	if (a)
		fs_att_destroy(c, a, 1);
	reap(c, 1);
	fs_dev_close(c); /* the regions kept for kernels, now that none run */
	handle_free(c);
}

int fs_client_model(const fs_client *c, struct fs_model_info *out)
{
	if (!c || !out)
		return -EINVAL;
	*out = c->model_info;
	return 0;
}

/* `down` went where the struct had tail padding: old callers' structs
 * have room for it. */
_Static_assert(sizeof(struct fs_card_info) == 64 && offsetof(struct fs_card_info, down) == 60,
	       "fs_card_info keeps its size and layout");

int fs_client_card(const fs_client *c, uint32_t card, struct fs_card_info *out)
{
	const struct fs_att *a = fs_load_acquire(&c->att);
	if (!a)
		return -ENOTCONN;
	if (card >= a->cards)
		return -EINVAL;
	*out = a->card_info[card];
	out->down = fs_load_acquire(&a->dh->cards_down) >> card & 1u;
	return 0;
}

int fs_client_attached(fs_client *c)
{
	struct fs_att *a = fs_load_acquire(&c->att);
	return a && !fs_load_acquire(&a->dead) && att_alive(a, fs_now_ns());
}

uint64_t fs_client_attach_count(const fs_client *c)
{
	return fs_load_relaxed(&c->attach_count);
}

uint64_t fs_client_dropped(const fs_client *c)
{
	return fs_load_relaxed(&c->dropped);
}

uint64_t fs_client_redials(const fs_client *c)
{
	return fs_load_relaxed(&c->redials);
}
