/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_query.c: calls that bindings and tools want and engines' per-layer
 * paths never make: the daemon's stats (one control round trip), an
 * expert's part table, the CUDA device of a card's pool in this process,
 * and why the last fs_client_open of this thread failed.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_client_internal.h"
#include "fs_ctl.h"

_Static_assert(sizeof(struct fs_expert_part) == sizeof(struct fs_arena_part),
	       "fs_expert_part mirrors fs_arena_part");
_Static_assert((int)FS_ROLE_GATE == (int)FS_PART_GATE && (int)FS_ROLE_UP == (int)FS_PART_UP &&
		       (int)FS_ROLE_DOWN == (int)FS_PART_DOWN && (int)FS_ROLE_GATE_UP == (int)FS_PART_GATE_UP,
	       "part roles");
_Static_assert((int)FS_WHAT_WEIGHT == (int)FS_PART_WEIGHT && (int)FS_WHAT_BIAS == (int)FS_PART_BIAS &&
		       (int)FS_WHAT_SCALE == (int)FS_PART_SCALE,
	       "part kinds");

static _Thread_local char open_err[256];

void fs_note_open_error(const char *msg)
{
	snprintf(open_err, sizeof(open_err), "%s", msg ? msg : "");
}

const char *fs_open_error(void)
{
	return open_err;
}

int fs_client_stats_json(fs_client *c, char *buf, size_t len)
{
	if (!c || (!buf && len))
		return -EINVAL;
	char err[256] = "";
	cJSON *rep = NULL;
	cJSON *req = fs_ctl_request("stats");
	if (!req)
		return -ENOMEM;
	/* The REQ socket is shared with the background thread's re-attach.  A
	 * request that found no connection for its whole send timeout (2 s)
	 * replaces the dialer, as a re-attach does (fs_client.c, reattach_try):
	 * an attached engine's dialer that nng 1.5.2 stopped (a relisten on
	 * the daemon's side resets its redial) would otherwise fail every
	 * request until the engine detaches. */
	pthread_mutex_lock(&c->ctl_lock);
	int unsent = 0;
	int r = c->req_open ? fs_ctl_call_unsent(c->req, req, &rep, err, sizeof(err), &unsent) : -ENOTCONN;
	if (r < 0 && unsent) {
		(void)fs_ctl_redial(c->req, &c->dialer, c->socket);
		__atomic_fetch_add(&c->redials, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&c->ctl_lock);
	cJSON_Delete(req);
	if (r < 0) {
		fs_set_error(c, "stats: %s", err[0] ? err : fs_strerror(r));
		return r;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(rep, "ok");
	char *s = cJSON_PrintUnformatted(rep);
	cJSON_Delete(rep);
	if (!s)
		return -ENOMEM;
	size_t n = strlen(s);
	if (len)
		snprintf(buf, len, "%s", s);
	cJSON_free(s);
	if (n > INT_MAX)
		return -EOVERFLOW;
	return (int)n;
}

static int arena_parts(const struct fs_arena_map *m, uint32_t layer, uint32_t expert,
		       struct fs_expert_part *out, unsigned max)
{
	if (layer >= m->layers || expert >= m->experts)
		return -EINVAL;
	const struct fs_arena_entry *e = &m->idx[(uint64_t)layer * m->experts + expert];
	if (e->parts == 0)
		return 0;
	if (!fs_arena_parts_ok(m->ah, m->shm.bytes, e))
		return -EBADMSG;
	const struct fs_arena_parts *p = (const void *)((const char *)m->ah + e->parts);
	for (uint32_t i = 0; i < p->count && i < max; i++) {
		const struct fs_arena_part *s = &p->part[i];
		out[i] = (struct fs_expert_part){.role = s->role,
						 .what = s->what,
						 .ggml_type = s->ggml_type,
						 .offset = s->offset,
						 .bytes = s->bytes,
						 .ne = {s->ne[0], s->ne[1]}};
	}
	return (int)p->count;
}

int fs_arena_expert_parts(const fs_client *c, uint32_t layer, uint32_t expert, struct fs_expert_part *out,
			  unsigned max)
{
	if (!c || (!out && max))
		return -EINVAL;
	struct fs_arena_map *m = fs_arena_get(c); /* pinned while we read it */
	if (!m)
		return -ENOTCONN;
	int r = arena_parts(m, layer, expert, out, max);
	fs_arena_put(m);
	return r;
}

int fs_card_device(const fs_client *c, uint32_t card)
{
	if (!c)
		return -EINVAL;
	const struct fs_att *a = fs_load_acquire(&c->att);
	if (!a)
		return -ENOTCONN;
	if (card >= a->cards)
		return -EINVAL;
	return a->dev_base[card] ? a->dev_index[card] : -ENODEV;
}
