/* SPDX-License-Identifier: Apache-2.0 */
/* fse_internal.h: the hot engine's state, shared by its files only. */
#ifndef FSE_INTERNAL_H
#define FSE_INTERNAL_H

#include <pthread.h>

#include "fse.h"

struct fse_client {
	int active;
	struct fs_client_hdr *hdr;
	struct fs_ring_cons ring;
	struct fs_ring_cons dev_ring;      /* its GPU kernels' ring (fs_ring_dev.h) */
	uint64_t hold_seen[FS_MAX_HOLDS];  /* last values read, bad ones as 0 */
	uint64_t hold_bad[FS_MAX_HOLDS];   /* the bad value a word last had (counted once) */
	uint64_t first_epoch;              /* current when it was added: it can hold no older */
	uint64_t refused_logged_ns;        /* a refused hold last logged */
	uint64_t hold_since[FS_MAX_HOLDS]; /* when the accepted value of each word was first read */
	uint64_t hold_typ_ns;              /* how long its holds last: up at once, down by 1/8 a hold */
	int pid;
	uint32_t uid;
	char name[48];
};

enum fse_cmd_type { FSE_CMD_ADD = 1, FSE_CMD_DROP, FSE_CMD_CALL };
struct fse_call;
struct fse_cmd {
	enum fse_cmd_type type;
	uint32_t row, reason;
	struct fse_call *call;
	struct fse_client_in in; /* ADD */
};

struct fse {
	struct fse_config cfg;
	struct fsr *core;
	struct fs_daemon_hdr *dh;

	/* epoch buffers: the engine's own record of what each holds */
	uint64_t buf_epoch[FS_MAX_EPOCH_BUFS];
	uint64_t buf_superseded_ns[FS_MAX_EPOCH_BUFS]; /* when its epoch stopped being current */
	uint32_t cur_buf;
	uint64_t hold_floor; /* current when the holds were last read: a new hold is this or newer */

	/* pass state */
	uint64_t last_publish, last_check, last_hb;
	int deferred;
	uint64_t deferred_since; /* when publication last found every buffer held */

	struct fse_client clients[FSE_MAX_CLIENTS];

	/* loop -> engine: commands, under lock */
	pthread_mutex_t lock;
	struct fse_cmd cmdq[FSE_CMDQ];
	uint32_t cmd_head, cmd_tail;

	/* cards that went down: the one record (fse_cards.c) */
	uint32_t cards_down;                    /* bit i: reported down; set under lock, read relaxed */
	uint32_t cards_applied;                 /* engine's thread: those the core has dropped */
	uint32_t cards_unpub;                   /* engine's thread: dropped, not in the header yet */
	uint64_t card_down_epoch[FS_MAX_CARDS]; /* under lock: first epoch without it, 0 until then */
	char card_reason[FS_MAX_CARDS][128];    /* under lock */

	/* completions, under done_lock */
	pthread_mutex_t done_lock;
	struct fse_done *doneq;
	uint32_t done_n, done_cap;

	uint32_t wake; /* futex word: bumped to wake the engine's thread */

	struct fse_backend_cb backend_cb; /* what the backend may call (bound at create) */
};

static inline uint64_t fse_now(const struct fse *e)
{
	return e->cfg.clock(e->cfg.host);
}
static inline uint32_t fse_live(const uint32_t *w)
{
	return w ? __atomic_load_n(w, __ATOMIC_RELAXED) : 0;
}
static inline uint64_t *fse_client_ctr(const struct fse *e, uint32_t row)
{
	return e->cfg.ctr.client + (uint64_t)row * FS_N_CLIENT;
}

void fse_note(struct fse *e, const struct fse_notice *n);
void fse_log(struct fse *e, int prio, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* fse_pass.c */
void fse_finish(struct fse *e, struct fse_client *c, uint32_t reason);
/* fse_holds.c: read every hold (after a publish's fence), free what no one
 * pins; each user's budget; the buffer holding an epoch (-1: none) */
uint32_t fse_holds(struct fse *e);
void fse_budget(struct fse *e, uint64_t now);
int fse_epoch_buf_of(const struct fse *e, uint64_t ep);
/* When epoch ep stopped being current, or 0 (current, or in no buffer). */
uint64_t fse_hold_superseded(const struct fse *e, uint64_t ep);
/* fse_cards.c: after a publish of epoch `e`: a card that went down, told */
void fse_cards_published(struct fse *e, uint64_t epoch);
/* fse_engine.c: the commands queued now */
void fse_apply_cmds(struct fse *e);

#endif /* FSE_INTERNAL_H */
