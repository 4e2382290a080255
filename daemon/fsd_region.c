/* SPDX-License-Identifier: Apache-2.0 */
/* fsd_region.c: lay out and create the daemon region (read-only to clients). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsd.h"
#include "fsd_stamps.h"

static uint64_t line_round(uint64_t x)
{
	return (x + FS_CACHELINE - 1) / FS_CACHELINE * FS_CACHELINE;
}

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
	uint64_t entries = (uint64_t)c->cards * c->layers * c->experts;
	uint64_t off = sizeof(struct fs_daemon_hdr);
	uint64_t off_cards = off;
	off = line_round(off + (uint64_t)c->cards * sizeof(struct fs_card_desc));
	uint64_t buf_bytes = line_round(sizeof(struct fs_epoch_buf_hdr) + entries * sizeof(uint64_t));
	uint64_t off_epochs = off;
	off += (uint64_t)c->epoch_bufs * buf_bytes;
	uint64_t off_ready = off;
	uint64_t off_ready_card[FS_MAX_CARDS] = {0};
	for (uint32_t i = 0; i < c->cards; i++) {
		off_ready_card[i] = off;
		off = line_round(off + FS_ISSUED_OFFSET(c->slots) + (uint64_t)c->slots * sizeof(uint64_t));
	}
	uint64_t off_layer_ready = off; /* the arena's per-layer ready words */
	off = line_round(off + (uint64_t)c->layers * sizeof(uint32_t));
	uint64_t off_counters = off;
	uint64_t counters_bytes = fs_counters_bytes(c->cards, c->layers, c->max_clients);
	off = line_round(off + counters_bytes);

	int r = fs_shm_create(&d->daemon_shm, "foresight-daemon", off);
	if (r < 0)
		return r;
	struct fs_daemon_hdr *h = d->daemon_shm.base;
	d->dh = h;
	h->magic = FS_DAEMON_MAGIC;
	h->version = FS_PROTO_VERSION;
	h->region_bytes = d->daemon_shm.bytes;
	h->instance = d->instance;
	h->cards = c->cards;
	h->layers = c->layers;
	h->experts = c->experts;
	h->epoch_bufs = c->epoch_bufs;
	h->epoch_buf_bytes = buf_bytes;
	h->off_cards = off_cards;
	h->off_epochs = off_epochs;
	h->off_ready = off_ready;
	memcpy(h->off_ready_card, off_ready_card, sizeof(off_ready_card));
	h->off_counters = off_counters;
	h->off_layer_ready = off_layer_ready;
	d->layer_ready = (uint32_t *)((char *)h + off_layer_ready); /* 0: not in yet */
	h->counters_bytes = counters_bytes;
	h->max_clients = c->max_clients;
	h->heartbeat_ms = c->heartbeat_ms;
	h->state = FS_DAEMON_STARTING;
	publish_reach(h, c->cards, (int)c->peer);

	struct fs_card_desc *cd = (struct fs_card_desc *)((char *)h + off_cards);
	for (uint32_t i = 0; i < c->cards; i++) {
		cd[i].id = i;
		cd[i].slots = c->slots;
		cd[i].slot_bytes = d->slot_bytes;
		cd[i].pool_bytes = fs_page_round((size_t)(c->slots * d->slot_bytes));
		cd[i].fd_index = 3 + i;       /* daemon, client, arena, then pools (the
					   CUDA backend overwrites this) */
		cd[i].kind = FS_BACKEND_HOST; /* the CUDA backend overwrites it */
		snprintf(cd[i].name, sizeof(cd[i].name), "host%u", i);
	}

	struct fs_counters_hdr *ch = (struct fs_counters_hdr *)((char *)h + off_counters);
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
