/* SPDX-License-Identifier: Apache-2.0 */
/* fsd_region.c: create the daemon region (read-only to clients), laid out
 * by the engine's fse_region_layout, and fill in the daemon's part. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs_counters.h"
#include "fsd.h"
#include "fsd_backend.h"
#include "fsd_stamps.h"
#include "fse.h"

uint32_t *fsd_ready(struct fsd *d, uint32_t card)
{
	return (uint32_t *)((char *)d->dh + d->dh->off_ready_card[card]);
}

uint64_t *fsd_issued_ns(struct fsd *d, uint32_t card)
{
	return (uint64_t *)((char *)fsd_ready(d, card) + FS_ISSUED_OFFSET(d->cfg.slots));
}

void fsd_issued(struct fsd *d, uint32_t card, uint32_t slot, uint64_t now)
{
	fs_store_relaxed(&fsd_issued_ns(d, card)[slot], now);
	fsd_stamp_issued(card, slot, now); /* bench builds only (fsd_stamps.h) */
}

/*
 * Which card reads which (fs_daemon_hdr.peer_reach).  Published here for
 * the host backend, whose pools are host memory that an engine reads from
 * any card's thread: every card reaches every card.  The CUDA backend
 * narrows it at start to what cudaDeviceCanAccessPeer says.  The
 * residency core takes whatever is published (main.c, fsr_set_reach), so
 * the placement and the engines' peer path follow one matrix.  The config
 * key `peer` off publishes only each card's own bit: every card keeps its
 * own tier (a benchmark's baseline, bench/peer/).  A card that goes down
 * later leaves the matrix (fsd_cards.c).
 */
static void publish_reach(struct fs_daemon_hdr *h, uint32_t cards, int peer)
{
	/* The environment switch this key replaced: said once, never read. */
	if (getenv("FORESIGHT_PEER"))
		fsd_log(FSD_WARN,
			"FORESIGHT_PEER is set but no longer read: the config key `peer` (--peer on|off) "
			"says whether cards share one tier (now %s)",
			peer ? "on" : "off");
	uint16_t all = (uint16_t)((1u << cards) - 1u);
	for (uint32_t i = 0; i < FS_MAX_CARDS; i++)
		h->peer_reach[i] = i >= cards ? 0 : !peer ? (uint16_t)(1u << i) : all;
}

int fsd_regions_create(struct fsd *d)
{
	const struct fsd_config *c = &d->cfg;
	struct fse_region_dims dm = {.cards = c->cards,
				     .layers = c->layers,
				     .experts = c->experts,
				     .epoch_bufs = c->epoch_bufs,
				     .slots = c->slots,
				     .max_clients = c->max_clients,
				     .counters = 1};
	struct fse_region_layout l;
	fse_region_layout(&dm, &l); /* daemon/engine/fse_region.c: the one layout */
	int r = fs_shm_create(&d->daemon_shm, "foresight-daemon", l.bytes);
	if (r < 0)
		return r;
	struct fs_daemon_hdr *h = d->daemon_shm.base;
	d->dh = h;
	fse_region_format(h, &dm, &l, d->daemon_shm.bytes);
	h->instance = d->instance;
	d->layer_ready = (uint32_t *)((char *)h + l.off_layer_ready); /* 0: not in yet */
	h->max_clients = c->max_clients;
	h->heartbeat_ms = c->heartbeat_ms;
	h->state = FS_DAEMON_STARTING;
	publish_reach(h, c->cards, (int)c->peer);

	struct fs_card_desc *cd = (struct fs_card_desc *)((char *)h + l.off_cards);
	for (uint32_t i = 0; i < c->cards; i++) {
		cd[i].id = i;
		cd[i].slots = c->slots;
		cd[i].slot_bytes = d->slot_bytes;
		cd[i].pool_bytes = fs_page_round((size_t)(c->slots * d->slot_bytes));
		cd[i].fd_index = 3 + i; /* daemon, client, arena, then pools (the
					   CUDA backend overwrites this) */
		cd[i].kind = d->backend->kind;
		snprintf(cd[i].name, sizeof(cd[i].name), "%s%u", d->backend->name,
			 i); /* a backend may name it */
	}

	struct fs_counters_hdr *ch = (struct fs_counters_hdr *)((char *)h + l.off_counters);
	ch->n_daemon = FS_N_DAEMON;
	ch->n_card = FS_N_CARD;
	ch->n_layer = FS_N_LAYER;
	ch->n_client = FS_N_CLIENT;
	ch->cards = c->cards;
	ch->layers = c->layers;
	ch->max_clients = c->max_clients;
	d->counters_daemon = (uint64_t *)(ch + 1);
	d->counters_card = d->counters_daemon + FS_N_DAEMON;
	d->counters_layer = d->counters_card + (uint64_t)c->cards * FS_N_CARD;
	d->counters_client = d->counters_layer + (uint64_t)c->layers * FS_N_LAYER;

	d->daemon_ro_fd = fs_shm_ro_fd(&d->daemon_shm);
	if (d->daemon_ro_fd < 0)
		return d->daemon_ro_fd;
	return 0;
}

void fsd_regions_destroy(struct fsd *d)
{
	if (d->daemon_ro_fd >= 0)
		close(d->daemon_ro_fd);
	fs_shm_close(&d->daemon_shm);
	d->dh = NULL;
}
