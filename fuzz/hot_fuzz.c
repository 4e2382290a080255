/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hot_fuzz.c: libFuzzer harness for the daemon's consume path: the hot
 * thread's passes (the hot engine daemon/engine/, hosted by daemon/fsd_hot.c,
 * fsd_hot_pass: commands, ring drain
 * with the model's bounds, completions, copies, publish, holds, reclaim,
 * liveness) over the ring consumer (proto/fs_ring.h, common/fs_ring.c)
 * and the real residency core, with one client region the input controls
 * byte for byte: records, tail, head, wake-up words, the header the daemon
 * wrote, holds, heartbeat.  A second, honest client acquires epochs by the
 * protocol and keeps a copy of what its held epoch maps.
 *
 * Checked: no crash, no sanitizer report, no hang; the residency core stays
 * consistent (fsr_check) after every pass; and no copy is ever issued into
 * a slot that the honest client's held epoch maps (the grace period holds
 * whatever the hostile client writes).  Op 0x7f takes a card down
 * (fsd_card_down): no copy goes to it after, and once the header says it
 * is down the current epoch maps nothing to it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_counters.h"
#include "fs_time.h"
#include "fsd.h"
#include "fsd_backend.h"
#include "fsd_hot.h"
#include "fse.h"
#include "fsr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CARDS 2u
#define SLOTS 8u
#define LAYERS 4u
#define EXPERTS 8u
#define RING 64u

void fsd_log(int prio, const char *fmt, ...)
{
	(void)prio;
	(void)fmt;
}

static struct fsd d;
/* A client region: header, the host ring, the device ring (GPU kernels'). */
#define RING_BYTES (FS_RING_REC_OFFSET + RING * 16u)
static _Alignas(64) unsigned char region[2][sizeof(struct fs_client_hdr) + 2 * RING_BYTES];

/* ---- a backend whose copies land when the input says so --------------- */

static struct fse_copy pending[256];
static unsigned npending;

static void land(unsigned i)
{
	struct fse_copy cp = pending[i];
	pending[i] = pending[--npending];
	fs_store_release(&fsd_ready(&d, cp.card)[cp.slot], cp.gen);
	struct fse_done done = {.card = cp.card, .slot = cp.slot, .gen = cp.gen, .bytes = cp.bytes};
	fse_copy_landed(d.eng, &done);
}

/* The honest client's held epoch, as it saw it when it acquired. */
static uint64_t held_epoch;
static uint64_t held_tab[CARDS * LAYERS * EXPERTS];

static void submit(void *ctx, const struct fse_copy *cp)
{
	(void)ctx;
	if (cp->card >= CARDS || cp->slot >= SLOTS)
		abort();
	if (fse_cards_down(d.eng) >> cp->card & 1u)
		abort(); /* no copy goes to a card reported down */
	if (cp->bytes != cp->core.bytes || cp->bytes > d.slot_bytes)
		abort(); /* the length is the core's, bounded by the slot */
	/* The grace period: nothing held may be rewritten. */
	if (held_epoch)
		for (uint32_t i = 0; i < CARDS * LAYERS * EXPERTS; i++)
			if (held_tab[i] != FS_ENTRY_NONE && i / (LAYERS * EXPERTS) == cp->card &&
			    FS_ENTRY_SLOT(held_tab[i]) == cp->slot)
				abort();
	fs_store_release(&fsd_ready(&d, cp->card)[cp->slot], 0u);
	if (npending == 256)
		land(0);
	pending[npending++] = *cp;
}

static const struct fsd_backend backend = {.name = "fuzz", .ops = {.submit = submit}};

/* ---- the two clients --------------------------------------------------- */

static struct fs_client_hdr *hdr(unsigned row)
{
	return (struct fs_client_hdr *)region[row];
}

static struct fs_ring_hdr *ring(unsigned row, unsigned dev)
{
	return (struct fs_ring_hdr *)(region[row] + sizeof(struct fs_client_hdr) + dev * RING_BYTES);
}

static void add_client(unsigned row, uint64_t now)
{
	struct fsd_client *c = &d.clients[row];
	memset(region[row], 0, sizeof(region[row]));
	*c = (struct fsd_client){.phase = FSD_CL_ACTIVE, .row = row, .pid = 1000 + (int)row};
	c->region.base = region[row];
	c->region.bytes = sizeof(region[row]);
	c->region.fd = -1;
	struct fs_client_hdr *h = hdr(row);
	h->magic = FS_CLIENT_MAGIC;
	h->version = FS_PROTO_VERSION;
	h->ring_entries = RING;
	h->off_ring = sizeof(struct fs_client_hdr);
	h->ring_bytes = fs_ring_bytes(RING);
	h->off_dev_ring = sizeof(struct fs_client_hdr) + RING_BYTES;
	h->dev_ring_bytes = fs_ring_bytes(RING);
	h->heartbeat_ns = now;
	if (fs_ring_format(&c->ring, ring(row, 0), RING_BYTES, RING) != 0 ||
	    fs_ring_format(&c->dev_ring, ring(row, 1), RING_BYTES, RING) != 0)
		abort();
	d.n_dropped = 0; /* the loop thread reaped what was dropped */
	if (fsd_hot_add(&d, row) != 0)
		abort();
}

static void honest_acquire(void)
{
	if (held_epoch || !fse_client_active(d.eng, 1))
		return;
	struct fs_client_hdr *h = hdr(1);
	uint64_t cur;
	for (;;) {
		cur = fs_load_acquire(&d.dh->current);
		if (cur == 0)
			return;
		fs_store_relaxed(&h->holds[0], FS_CUR_EPOCH(cur));
		fs_smp_mb();
		if (fs_load_acquire(&d.dh->current) == cur)
			break;
	}
	held_epoch = FS_CUR_EPOCH(cur);
	memcpy(held_tab, fse_epoch_entries(d.dh, FS_CUR_BUF(cur)), sizeof(held_tab));
}

static void honest_release(void)
{
	fs_store_release(&hdr(1)->holds[0], 0ull);
	held_epoch = 0;
}

static void honest_post(uint8_t b)
{
	if (!fse_client_active(d.eng, 1))
		return;
	struct fs_ring_prod p;
	if (fs_ring_prod_init(&p, ring(1, b & 1), RING_BYTES) != 0)
		abort();
	float score = 1.0f;
	struct fs_rec r = {.type = FS_REC_PREDICT,
			   .aux = FS_PRED_AUX(1, 1),
			   .layer = (uint16_t)(b % LAYERS),
			   .expert = (uint16_t)((b / LAYERS) % EXPERTS),
			   .card = FS_CARD_NONE,
			   .window = b};
	memcpy(&r.value, &score, 4);
	(void)fs_ring_post(&p, &r);
	r.type = FS_REC_USAGE;
	r.aux = FS_USE_MISS;
	r.card = (uint16_t)(b % CARDS);
	(void)fs_ring_post(&p, &r);
}

/* ---- input ------------------------------------------------------------ */

struct in {
	const uint8_t *p;
	size_t n;
};

static int take(struct in *in, void *out, size_t k)
{
	if (in->n < k) {
		memset(out, 0, k);
		in->n = 0;
		return -1;
	}
	memcpy(out, in->p, k);
	in->p += k;
	in->n -= k;
	return 0;
}

static void setup_daemon(uint32_t tiers)
{
	/* The daemon region is made once (a memfd per input would be most of
	 * the time); each input starts from zeroed epochs, ready words and
	 * counters. */
	static struct fs_shm shm = {.fd = -1};
	static int ro = -1;
	static struct fs_daemon_hdr *dh;
	static uint64_t *ctr[4];
	memset(&d, 0, sizeof(d));
	d.cfg.cards = CARDS;
	d.cfg.slots = SLOTS;
	d.cfg.layers = LAYERS;
	d.cfg.experts = EXPERTS;
	d.cfg.experts_used = 2;
	d.cfg.expert_bytes = 4096;
	d.cfg.max_clients = 2;
	d.cfg.epoch_bufs = 4;
	d.cfg.heartbeat_ms = 100;
	d.cfg.liveness_ms = 5000;
	d.cfg.hold_timeout_ms = 10000;
	d.cfg.publish_us = 0;
	d.cfg.max_inflight = 4;
	d.cfg.tiers = tiers;
	d.cfg.recency_slots = d.cfg.predicted_slots = d.cfg.spare_slots = -1;
	d.cfg.bus_share_pct = 80;
	d.cfg.freq_decay = 0.01;
	d.cfg.bus_gbps = 10;
	d.cfg.peer = 1;
	d.slot_bytes = 4096;
	d.daemon_ro_fd = -1;
	d.daemon_shm.fd = -1;
	d.backend = &backend;
	pthread_mutex_init(&d.drop_lock, NULL);
	if (!dh) {
		if (fsd_regions_create(&d) != 0)
			abort();
		shm = d.daemon_shm;
		ro = d.daemon_ro_fd;
		dh = d.dh;
		ctr[0] = d.counters_daemon, ctr[1] = d.counters_card, ctr[2] = d.counters_layer,
		ctr[3] = d.counters_client;
	}
	d.daemon_shm = shm;
	d.daemon_ro_fd = ro;
	d.dh = dh;
	d.counters_daemon = ctr[0], d.counters_card = ctr[1], d.counters_layer = ctr[2],
	d.counters_client = ctr[3];
	memset((char *)dh + dh->off_epochs, 0, dh->off_counters - dh->off_epochs);
	memset((char *)dh + dh->off_counters + sizeof(struct fs_counters_hdr), 0,
	       dh->counters_bytes - sizeof(struct fs_counters_hdr));
	dh->current = 0;
	dh->cards_down = 0; /* the header outlives an input: every card up again */
	for (uint32_t i = 0; i < CARDS; i++)
		dh->peer_reach[i] = (uint16_t)((1u << CARDS) - 1u); /* as published with peer on */
	struct fsr_config rc;
	fsd_config_residency(&d.cfg, &rc); /* as foresightd's start, from d.cfg above */
	rc.counters = (struct fsr_counters){d.counters_daemon, d.counters_card, d.counters_layer,
					    d.counters_client};
	d.core = fsr_create(&rc);
	if (!d.core || fsd_hot_init(&d) != 0)
		abort();
}

/* Once a card's fall is published, the current epoch maps nothing to it
 * and the header says so. */
static void check_down_cards(void)
{
	uint32_t unpub, told = fse_cards_applied(d.eng, &unpub) & ~unpub;
	if ((fs_load_acquire(&d.dh->cards_down) & ~told) != 0)
		abort(); /* told engines before the epoch without it was out */
	uint64_t cur = fs_load_acquire(&d.dh->current);
	if (!told || !cur)
		return;
	const uint64_t *e = fse_epoch_entries(d.dh, FS_CUR_BUF(cur));
	for (uint32_t c = 0; c < CARDS; c++)
		for (uint32_t i = 0; (told >> c & 1u) && i < LAYERS * EXPERTS; i++)
			if (e[c * LAYERS * EXPERTS + i] != FS_ENTRY_NONE)
				abort();
}

static void teardown_daemon(void)
{
	fse_destroy(d.eng);
	fsr_destroy(d.core);
	pthread_mutex_destroy(&d.drop_lock);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = {data, size};
	uint8_t first = 0;
	take(&in, &first, 1);
	setup_daemon(first & 1);
	npending = 0;
	held_epoch = 0;
	uint64_t now = fs_now_ns();
	fsd_hot_first(&d);
	add_client(0, now);
	add_client(1, now);
	struct fs_client_hdr *h = hdr(0);
	unsigned steps = 0;
	while (in.n > 0 && steps++ < 512) {
		uint8_t op = 0, b = 0;
		take(&in, &op, 1);
		/* Bit 7 of the op: the device ring instead of the host ring. */
		struct fs_ring_hdr *r = ring(0, op >> 7);
		struct fs_rec *recs = (struct fs_rec *)((char *)r + FS_RING_REC_OFFSET);
		op &= 0x7f;
		if (op == 0x7f) { /* a card goes down (fsd_cards.c): lost, or an admin's */
			take(&in, &b, 1);
			int rc = fsd_card_down(&d, b % (CARDS + 1), "fuzz");
			if (rc != 0 && rc != -EALREADY && !(rc == -EINVAL && b % (CARDS + 1) == CARDS))
				abort();
			continue;
		}
		switch (op % 13) {
		case 0: { /* records at the producer's tail, tail published */
			take(&in, &b, 1);
			uint32_t n = b % 32, tail = r->tail;
			for (uint32_t i = 0; i < n; i++)
				take(&in, &recs[(tail + i) % RING], sizeof(struct fs_rec));
			fs_store_release(&r->tail, tail + n);
			break;
		}
		case 1: { /* any tail */
			uint32_t t;
			take(&in, &t, 4);
			fs_store_release(&r->tail, t);
			break;
		}
		case 2: { /* any hold */
			uint64_t v;
			take(&in, &b, 1);
			take(&in, &v, 8);
			fs_store_release(&h->holds[b % FS_MAX_HOLDS], v);
			break;
		}
		case 3: { /* any heartbeat, or a fresh one */
			uint64_t v;
			take(&in, &b, 1);
			take(&in, &v, 8);
			fs_store_release(&h->heartbeat_ns, b & 1 ? now : v);
			break;
		}
		case 4: { /* scribble on any word of the header lines and the ring header */
			uint32_t off, v;
			take(&in, &off, 4);
			take(&in, &v, 4);
			off %= (uint32_t)sizeof(region[0]) / 4; /* headers, records, both rings */
			memcpy(region[0] + off * 4, &v, 4);
			break;
		}
		case 5: { /* a pass of the hot thread, some time later */
			uint16_t dt;
			take(&in, &dt, 2);
			now += (uint64_t)dt * 10000u;
			fs_store_relaxed(&hdr(1)->heartbeat_ns, now);
			fsd_hot_pass(&d, now);
			if (fsr_check(d.core) != 0)
				abort();
			check_down_cards();
			if (!fse_client_active(d.eng, 1))
				held_epoch = 0; /* dropped (an overlong hold): nothing protected */
			break;
		}
		case 6:
			honest_acquire();
			break;
		case 7:
			honest_release();
			break;
		case 8: /* copies land */
			take(&in, &b, 1);
			while (npending > 0 && b-- > 0)
				land(b % npending);
			break;
		case 9:
			take(&in, &b, 1);
			honest_post(b);
			break;
		case 10: { /* a plausible hold: the current epoch or one before it */
			uint64_t cur = FS_CUR_EPOCH(fs_load_acquire(&d.dh->current));
			take(&in, &b, 1);
			fs_store_release(&h->holds[b % FS_MAX_HOLDS], cur > (b >> 7) ? cur - (b >> 7) : cur);
			break;
		}
		case 11: /* dropped and attached again (a new region); the pass
			  * applies it, as the loop thread waits for the hot thread
			  * before a row is used again */
			if (fse_client_active(d.eng, 0))
				fsd_hot_drop(&d, 0, FS_DETACH_REQUESTED);
			else
				add_client(0, now);
			h = hdr(0);
			fsd_hot_pass(&d, now);
			if (!fse_client_active(d.eng, 1))
				held_epoch = 0;
			break;
		default: /* a burst of passes, time standing still */
			for (int i = 0; i < 4; i++)
				fsd_hot_pass(&d, now);
			if (!fse_client_active(d.eng, 1))
				held_epoch = 0;
			break;
		}
	}
	for (int i = 0; i < 4; i++) {
		while (npending > 0)
			land(0);
		now += 20000000u;
		fs_store_relaxed(&hdr(1)->heartbeat_ns, now);
		fsd_hot_pass(&d, now);
		if (!fse_client_active(d.eng, 1))
			held_epoch = 0;
	}
	if (fsr_check(d.core) != 0)
		abort();
	check_down_cards();
	teardown_daemon();
	return 0;
}
