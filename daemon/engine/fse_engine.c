/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fse_engine.c: the hot engine's life, and what other threads hand it:
 * client commands, calls to run on its thread, copy completions (a mutex
 * and a futex wake each; the passes take them in).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs_futex.h"
#include "fs_time.h"
#include "fse_internal.h"

static uint64_t mono_clock(void *host)
{
	(void)host;
	return fs_now_ns();
}

/* The backend's callbacks (struct fse_backend_cb): the engine's own calls. */
static void cb_landed(void *ctx, const struct fse_done *done)
{
	fse_copy_landed(ctx, done);
}

static int cb_card_down(void *ctx, uint32_t card, const char *reason)
{
	return fse_card_down(ctx, card, reason);
}

static uint32_t cb_cards_down(void *ctx)
{
	return fse_cards_down(ctx);
}

struct fse *fse_create(const struct fse_config *cfg)
{
	if (!cfg || !cfg->core || !cfg->dh || !cfg->backend.submit || cfg->max_clients > FSE_MAX_CLIENTS ||
	    cfg->cards > FS_MAX_CARDS || cfg->epoch_bufs < 2 || cfg->epoch_bufs > FS_MAX_EPOCH_BUFS) {
		errno = EINVAL;
		return NULL;
	}
	struct fse *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->cfg = *cfg;
	if (!e->cfg.clock)
		e->cfg.clock = mono_clock;
	e->core = cfg->core;
	e->dh = cfg->dh;
	pthread_mutex_init(&e->lock, NULL);
	pthread_mutex_init(&e->done_lock, NULL);
	e->backend_cb = (struct fse_backend_cb){
		.ctx = e, .landed = cb_landed, .card_down = cb_card_down, .cards_down = cb_cards_down};
	if (e->cfg.backend.bind)
		e->cfg.backend.bind(e->cfg.backend.ctx, &e->backend_cb);
	return e;
}

void fse_destroy(struct fse *e)
{
	if (!e)
		return;
	/* Calls nobody ran: their callers timed out and left them to us. */
	while (e->cmd_head != e->cmd_tail) {
		struct fse_cmd *c = &e->cmdq[e->cmd_head++ % FSE_CMDQ];
		if (c->type == FSE_CMD_CALL)
			free(c->call);
	}
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->done_lock);
	free(e->doneq);
	free(e);
}

void fse_note(struct fse *e, const struct fse_notice *n)
{
	if (e->cfg.notice)
		e->cfg.notice(e->cfg.host, n);
}

void fse_log(struct fse *e, int prio, const char *fmt, ...)
{
	if (!e->cfg.notice)
		return;
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	fse_note(e, &(struct fse_notice){.kind = FSE_NOTE_LOG, .prio = prio, .text = text});
}

void fse_wake(struct fse *e)
{
	__atomic_fetch_add(&e->wake, 1u, __ATOMIC_SEQ_CST);
	fs_futex_wake(&e->wake, 1);
}

static int push_cmd(struct fse *e, const struct fse_cmd *c)
{
	pthread_mutex_lock(&e->lock);
	if (e->cmd_tail - e->cmd_head >= FSE_CMDQ) {
		pthread_mutex_unlock(&e->lock);
		return -EAGAIN;
	}
	e->cmdq[e->cmd_tail % FSE_CMDQ] = *c;
	e->cmd_tail++;
	pthread_mutex_unlock(&e->lock);
	fse_wake(e);
	return 0;
}

int fse_cmd_add(struct fse *e, uint32_t row, const struct fse_client_in *in)
{
	if (row >= e->cfg.max_clients || !in || !in->hdr)
		return -EINVAL;
	return push_cmd(e, &(struct fse_cmd){.type = FSE_CMD_ADD, .row = row, .in = *in});
}

int fse_cmd_drop(struct fse *e, uint32_t row, uint32_t reason)
{
	if (row >= e->cfg.max_clients)
		return -EINVAL;
	return push_cmd(e, &(struct fse_cmd){.type = FSE_CMD_DROP, .row = row, .reason = reason});
}

void fse_copy_landed(struct fse *e, const struct fse_done *done)
{
	pthread_mutex_lock(&e->done_lock);
	if (e->done_n == e->done_cap) {
		uint32_t cap = e->done_cap ? e->done_cap * 2 : 256;
		struct fse_done *q = realloc(e->doneq, cap * sizeof(*q));
		if (!q) {
			pthread_mutex_unlock(&e->done_lock);
			fse_log(e, 3, "out of memory queueing a copy completion");
			abort();
		}
		e->doneq = q;
		e->done_cap = cap;
	}
	e->doneq[e->done_n++] = *done;
	pthread_mutex_unlock(&e->done_lock);
	fse_wake(e);
}

struct fse_call {
	int (*fn)(void *arg);
	void *arg;
	int rc;
	int done;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

int fse_call(struct fse *e, int (*fn)(void *arg), void *arg, unsigned timeout_ms)
{
	struct fse_call *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->fn = fn;
	k->arg = arg;
	pthread_mutex_init(&k->lock, NULL);
	pthread_cond_init(&k->cond, NULL);
	if (push_cmd(e, &(struct fse_cmd){.type = FSE_CMD_CALL, .call = k}) != 0) {
		free(k);
		return -EAGAIN;
	}
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += timeout_ms / 1000u;
	dl.tv_nsec += (long)(timeout_ms % 1000u) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&k->lock);
	while (!k->done)
		if (pthread_cond_timedwait(&k->cond, &k->lock, &dl) != 0)
			break;
	int done = k->done, rc = k->rc;
	/* Timed out: the engine frees it when it gets there. */
	k->done = done ? 1 : -1;
	pthread_mutex_unlock(&k->lock);
	if (!done)
		return -ETIMEDOUT;
	free(k);
	return rc;
}

static void run_call(struct fse_call *k)
{
	pthread_mutex_lock(&k->lock);
	if (k->done == -1) { /* the caller gave up */
		pthread_mutex_unlock(&k->lock);
		free(k);
		return;
	}
	k->rc = k->fn(k->arg);
	k->done = 1;
	pthread_cond_signal(&k->cond);
	pthread_mutex_unlock(&k->lock);
}

static void add_client(struct fse *e, uint32_t row, const struct fse_client_in *in)
{
	struct fse_client *c = &e->clients[row];
	if (c->active)
		return;
	*c = (struct fse_client){
		.hdr = in->hdr, .ring = in->ring, .dev_ring = in->dev_ring, .pid = in->pid, .uid = in->uid};
	memcpy(c->name, in->name, sizeof(c->name));
	c->name[sizeof(c->name) - 1] = 0;
	/* Its engine acquires only once ATTACHED is set below, so no epoch
	 * older than the current one is ever its own. */
	c->first_epoch = e->buf_epoch[e->cur_buf];
	if (fsr_client_add(e->core, row) == 0) {
		c->active = 1;
		fs_store_release(&c->hdr->state, (uint32_t)FS_CLIENT_ATTACHED);
	}
}

void fse_apply_cmds(struct fse *e)
{
	struct fse_cmd cmds[FSE_CMDQ];
	uint32_t n = 0;
	pthread_mutex_lock(&e->lock);
	while (e->cmd_head != e->cmd_tail)
		cmds[n++] = e->cmdq[e->cmd_head++ % FSE_CMDQ];
	pthread_mutex_unlock(&e->lock);
	for (uint32_t i = 0; i < n; i++) {
		if (cmds[i].type == FSE_CMD_ADD)
			add_client(e, cmds[i].row, &cmds[i].in);
		else if (cmds[i].type == FSE_CMD_DROP)
			fse_finish(e, &e->clients[cmds[i].row], cmds[i].reason);
		else if (cmds[i].type == FSE_CMD_CALL)
			run_call(cmds[i].call);
	}
}

uint64_t fse_inflight(const struct fse *e)
{
	uint64_t n = 0;
	for (uint32_t card = 0; card < e->cfg.cards; card++)
		n += fs_load_relaxed(&e->cfg.ctr.card[(uint64_t)card * FS_N_CARD + FS_CC_loading]);
	return n;
}

uint64_t fse_publish_in(const struct fse *e, uint64_t now)
{
	if (!fsr_dirty(e->core) || e->deferred)
		return UINT64_MAX;
	uint64_t publish_ns = (uint64_t)fse_live(e->cfg.live.publish_us) * 1000u;
	return e->last_publish + publish_ns > now ? e->last_publish + publish_ns - now : 0;
}

int fse_client_active(const struct fse *e, uint32_t row)
{
	return row < e->cfg.max_clients && e->clients[row].active;
}
