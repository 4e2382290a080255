/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fse_region.c: the daemon region's layout, the one place it is decided.
 * foresightd lays out its whole region with it (daemon/fsd_region.c: the
 * memfd, then the daemon's own contents: card table, counters' header,
 * peer reach); fs-replay and the tests lay out the part the engine reads
 * (no ready words, no counters: their hosts keep those).  Clients read the
 * offsets from the header (client/fs_attach.c), never recompute them.
 *
 *   header | card table | epoch buffers | per card: ready words, issued_ns |
 *   layer ready words | counters
 *
 * every part starting on its own cache line.
 */
#include "fs_counters.h"
#include "fse.h"

static uint64_t line_round(uint64_t x)
{
	return (x + FS_CACHELINE - 1) / FS_CACHELINE * FS_CACHELINE;
}

void fse_region_layout(const struct fse_region_dims *dm, struct fse_region_layout *l)
{
	uint64_t entries = (uint64_t)dm->cards * dm->layers * dm->experts;
	uint64_t off = sizeof(struct fs_daemon_hdr);
	*l = (struct fse_region_layout){0};
	l->off_cards = off;
	off = line_round(off + (uint64_t)dm->cards * sizeof(struct fs_card_desc));
	l->epoch_buf_bytes = line_round(sizeof(struct fs_epoch_buf_hdr) + entries * sizeof(uint64_t));
	l->off_epochs = off;
	off += (uint64_t)dm->epoch_bufs * l->epoch_buf_bytes;
	l->off_ready = off;
	for (uint32_t i = 0; dm->slots && i < dm->cards && i < FS_MAX_CARDS; i++) {
		l->off_ready_card[i] = off;
		off = line_round(off + FS_ISSUED_OFFSET(dm->slots) + (uint64_t)dm->slots * sizeof(uint64_t));
	}
	l->off_layer_ready = off; /* the arena's per-layer ready words */
	off = line_round(off + (uint64_t)dm->layers * sizeof(uint32_t));
	l->off_counters = off;
	if (dm->counters) {
		l->counters_bytes = fs_counters_bytes(dm->cards, dm->layers, dm->max_clients);
		off = line_round(off + l->counters_bytes);
	}
	l->bytes = off;
}

void fse_region_format(struct fs_daemon_hdr *dh, const struct fse_region_dims *dm,
		       const struct fse_region_layout *l, uint64_t region_bytes)
{
	dh->magic = FS_DAEMON_MAGIC;
	dh->version = FS_PROTO_VERSION;
	dh->region_bytes = region_bytes;
	dh->cards = dm->cards;
	dh->layers = dm->layers;
	dh->experts = dm->experts;
	dh->epoch_bufs = dm->epoch_bufs;
	dh->epoch_buf_bytes = l->epoch_buf_bytes;
	dh->off_cards = l->off_cards;
	dh->off_epochs = l->off_epochs;
	dh->off_ready = l->off_ready;
	for (uint32_t i = 0; i < FS_MAX_CARDS; i++)
		dh->off_ready_card[i] = l->off_ready_card[i];
	dh->off_counters = l->off_counters;
	dh->off_layer_ready = l->off_layer_ready;
	dh->counters_bytes = l->counters_bytes;
}

static void engine_dims(struct fse_region_dims *dm, uint32_t cards, uint32_t layers, uint32_t experts,
			uint32_t epoch_bufs)
{
	*dm = (struct fse_region_dims){
		.cards = cards, .layers = layers, .experts = experts, .epoch_bufs = epoch_bufs};
}

size_t fse_region_bytes(uint32_t cards, uint32_t layers, uint32_t experts, uint32_t epoch_bufs)
{
	struct fse_region_dims dm;
	struct fse_region_layout l;
	engine_dims(&dm, cards, layers, experts, epoch_bufs);
	fse_region_layout(&dm, &l);
	return (size_t)l.bytes;
}

void fse_region_init(struct fs_daemon_hdr *dh, uint32_t cards, uint32_t layers, uint32_t experts,
		     uint32_t epoch_bufs)
{
	struct fse_region_dims dm;
	struct fse_region_layout l;
	engine_dims(&dm, cards, layers, experts, epoch_bufs);
	fse_region_layout(&dm, &l);
	fse_region_format(dh, &dm, &l, l.bytes);
	for (uint32_t i = 0; i < cards && i < FS_MAX_CARDS; i++)
		dh->peer_reach[i] = (uint16_t)((1u << cards) - 1u);
}

struct fs_epoch_buf_hdr *fse_epoch_buf(struct fs_daemon_hdr *dh, uint32_t buf)
{
	return (struct fs_epoch_buf_hdr *)((char *)dh + dh->off_epochs + (uint64_t)buf * dh->epoch_buf_bytes);
}
