/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_stats.c: the stats and clients replies.  Every counter comes from the
 * X-macro lists in proto/fs_counters.h, so a counter added there appears
 * here (and in fsctl, which renders whatever the lists name) by itself.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "fs_arena.h"
#include "fs_counters.h"
#include "fs_time.h"
#include "fsd_backend.h"
#include "fsd_hot.h"
#include "fsd_loop.h"

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

static uint64_t rd(const uint64_t *p)
{
	return fs_load_relaxed(p);
}

static void add_card_counters(cJSON *o, const uint64_t *row)
{
#define X(name, help) cJSON_AddNumberToObject(o, #name, (double)rd(&row[FS_CC_##name]));
	FS_COUNTERS_CARD(X)
#undef X
}

static void add_layer_counters(cJSON *o, const uint64_t *row)
{
#define X(name, help) cJSON_AddNumberToObject(o, #name, (double)rd(&row[FS_CL_##name]));
	FS_COUNTERS_LAYER(X)
#undef X
}

static void add_client_counters(cJSON *o, const uint64_t *row)
{
#define X(name, help) cJSON_AddNumberToObject(o, #name, (double)rd(&row[FS_CCL_##name]));
	FS_COUNTERS_CLIENT(X)
#undef X
}

static cJSON *clients_array(struct fsd *d)
{
	cJSON *arr = cJSON_CreateArray();
	uint64_t now = fs_now_ns();
	for (uint32_t row = 0; row < d->cfg.max_clients; row++) {
		const struct fsd_client *c = &d->clients[row];
		if (c->phase != FSD_CL_ACTIVE)
			continue;
		const uint64_t *cc = d->counters_client + (uint64_t)row * FS_N_CLIENT;
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "id", row);
		cJSON_AddStringToObject(o, "name", c->name);
		cJSON_AddNumberToObject(o, "attached_s", (double)(now - c->attach_ns) / 1e9);
		add_client_counters(o, cc);
		uint64_t h = rd(&cc[FS_CCL_hits]), m = rd(&cc[FS_CCL_misses]);
		cJSON_AddNumberToObject(o, "hit_rate", ratio(h, h + m));
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}

cJSON *fsd_clients_json(struct fsd *d)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "ok", 1);
	cJSON_AddItemToObject(o, "clients", clients_array(d));
	return o;
}

cJSON *fsd_stats_json(struct fsd *d)
{
	const struct fsd_config *cfg = &d->cfg;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "ok", 1);
	cJSON_AddStringToObject(o, "version", FSD_VERSION);
	cJSON_AddNumberToObject(o, "pid", getpid());
	cJSON_AddNumberToObject(o, "uptime_s", (double)(fs_now_ns() - d->start_ns) / 1e9);
	cJSON_AddStringToObject(o, "backend", d->backend->name);
	cJSON_AddNumberToObject(o, "epoch", (double)FS_CUR_EPOCH(fs_load_acquire(&d->dh->current)));

	cJSON *m = cJSON_AddObjectToObject(o, "model");
	cJSON_AddStringToObject(m, "name", cfg->model);
	cJSON_AddNumberToObject(m, "layers", cfg->layers);
	cJSON_AddNumberToObject(m, "experts", cfg->experts);
	cJSON_AddNumberToObject(m, "experts_used", cfg->experts_used);
	cJSON_AddNumberToObject(m, "max_expert_bytes", (double)d->arena->max_expert_bytes);
	cJSON_AddNumberToObject(m, "arena_bytes", (double)d->arena_shm.bytes);
	/* Which memory a model's arena got (hugetlb, shmem with 2 MiB or 4 KiB
	 * pages) and why: the load's speed depends on it (fsg_load.c). */
	cJSON_AddStringToObject(m, "arena_pages",
				d->arena_pages[0] ? d->arena_pages :
						    "not recorded (an arena kept across a restart)");

	cJSON *dm = cJSON_AddObjectToObject(o, "daemon");
#define X(name, help) cJSON_AddNumberToObject(dm, #name, (double)rd(&d->counters_daemon[FS_C_##name]));
	FS_COUNTERS_DAEMON(X)
#undef X

	/* Totals: card counters summed, plus the derived rates. */
	uint64_t tot[FS_N_CARD] = {0};
	cJSON *cards = cJSON_AddArrayToObject(o, "cards");
	for (uint32_t i = 0; i < cfg->cards; i++) {
		const uint64_t *row = d->counters_card + (uint64_t)i * FS_N_CARD;
		cJSON *c = cJSON_CreateObject();
		char name[16];
		snprintf(name, sizeof(name), "%s%u", d->backend->name, i);
		cJSON_AddNumberToObject(c, "id", i);
		cJSON_AddStringToObject(c, "name", name);
		cJSON_AddNumberToObject(c, "slots", cfg->slots);
		cJSON_AddNumberToObject(c, "slot_bytes", (double)d->slot_bytes);
		if (d->backend->emulated_bus) /* a stand-in's link; a GPU's is its own */
			cJSON_AddNumberToObject(c, "bus_gbps", cfg->bus_gbps);
		/* Up, or down with why and since which epoch (fsd_cards.c; the
		 * epoch is 0 until the first epoch without it is out). */
		char why[FSD_CARD_REASON];
		uint64_t since = 0;
		int down = fsd_card_state(d, i, why, sizeof(why), &since);
		cJSON_AddStringToObject(c, "state", down ? "down" : "up");
		if (down) {
			cJSON_AddStringToObject(c, "down_reason", why);
			cJSON_AddNumberToObject(c, "down_epoch", (double)since);
		}
		/* The other cards whose slots an engine on this card reads
		 * directly (fs_daemon_hdr.peer_reach: fixed at start, less the
		 * cards that went down). */
		cJSON *reads = cJSON_AddArrayToObject(c, "reads");
		uint16_t reach = fs_load_relaxed(&d->dh->peer_reach[i]);
		for (uint32_t j = 0; j < cfg->cards; j++)
			if (j != i && (reach >> j & 1u))
				cJSON_AddItemToArray(reads, cJSON_CreateNumber(j));
		add_card_counters(c, row);
		uint64_t h = rd(&row[FS_CC_hits]), mi = rd(&row[FS_CC_misses]);
		cJSON_AddNumberToObject(c, "hit_rate", ratio(h, h + mi));
		cJSON_AddItemToArray(cards, c);
		for (unsigned k = 0; k < FS_N_CARD; k++)
			tot[k] += rd(&row[k]);
	}
	uint64_t windows = rd(&d->counters_daemon[FS_C_windows]);
	cJSON *t = cJSON_CreateObject();
#define X(name, help) cJSON_AddNumberToObject(t, #name, (double)tot[FS_CC_##name]);
	FS_COUNTERS_CARD(X)
#undef X
	/* Summed over the cards, the per-card `up` gauge counts cards: named so. */
	cJSON_DeleteItemFromObjectCaseSensitive(t, "up");
	cJSON_AddNumberToObject(t, "cards_up", (double)tot[FS_CC_up]);
	cJSON_AddNumberToObject(t, "windows", (double)windows);
	cJSON_AddNumberToObject(t, "hit_rate", ratio(tot[FS_CC_hits], tot[FS_CC_hits] + tot[FS_CC_misses]));
	cJSON_AddNumberToObject(t, "misses_per_layer_window",
				ratio(tot[FS_CC_misses], windows * (uint64_t)cfg->layers));
	cJSON_AddItemToObject(o, "totals", t);

	cJSON *layers = cJSON_AddArrayToObject(o, "layers");
	for (uint32_t l = 0; l < cfg->layers; l++) {
		const uint64_t *row = d->counters_layer + (uint64_t)l * FS_N_LAYER;
		cJSON *c = cJSON_CreateObject();
		cJSON_AddNumberToObject(c, "layer", l);
		add_layer_counters(c, row);
		uint64_t h = rd(&row[FS_CL_hits]), mi = rd(&row[FS_CL_misses]);
		cJSON_AddNumberToObject(c, "hit_rate", ratio(h, h + mi));
		cJSON_AddNumberToObject(c, "misses_per_window", ratio(mi, windows));
		cJSON_AddItemToArray(layers, c);
	}
	cJSON_AddItemToObject(o, "clients", clients_array(d));
	return o;
}
