/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_iso.c: the adversarial clients of the isolation tests (issue 22,
 * tests/fault/iso_test.c).  Each does one thing an engine of the group can
 * do to take the shared tier from the others, for `seconds`, then prints
 * one line "iso ATTACK: ..." with what it saw, and exits 0 (2: it could not
 * even start).  Whether the attack hurt is for the test to judge, from the
 * honest engines beside it and the daemon's counters.
 *
 *   fs-fault-engine iso SOCKET name [seconds=S]
 *       attach with a name holding a newline, "<3>", a terminal escape and
 *       more bytes than a row keeps (log forging, 8).
 *   fs-fault-engine iso SOCKET stale-hold [seconds=S] [epoch=E]
 *       attach, then keep writing a long-superseded epoch (default 2) into
 *       holds[0] of its own region (1).
 *   fs-fault-engine iso SOCKET rehold [seconds=S] [holds=N] [part=I parts=P]
 *       attach and hold the current epoch, then each newly published one
 *       too, up to N (default 1) at once, never releasing; when revoked,
 *       attach again at once (every 20 ms while refused), as the same
 *       process under the same name (2: the hold budget over time; with
 *       N = 8 and parts=2, two of these hold every epoch buffer of the default
 *       16: each holds only the epochs e with e % P == I).
 *   fs-fault-engine iso SOCKET flip-hold [seconds=S]
 *       write one impossible epoch into holds[1] once and leave it (9: the
 *       daemon must count it once, not once per pass).
 */
#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs_atomic.h"
#include "fs_counters.h"
#include "fs_hostile.h"
#include "fs_regions.h"

static uint64_t iso_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void iso_sleep_ms(unsigned ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static unsigned long iso_opt(int argc, char **argv, const char *key, unsigned long def)
{
	size_t n = strlen(key);
	for (int i = 0; i < argc; i++)
		if (strncmp(argv[i], key, n) == 0 && argv[i][n] == '=')
			return strtoul(argv[i] + n + 1, NULL, 10);
	return def;
}

static uint64_t iso_ctr(const struct me *m, unsigned i)
{
	return fs_load_relaxed(&m->ctr[i]);
}

/* Keep the heartbeat fresh while waiting, as a live engine does. */
static int iso_alive_for(struct me *m, uint64_t end)
{
	while (iso_now_ns() < end) {
		if (fs_load_acquire(&m->ch->state) != FS_CLIENT_ATTACHED)
			return 0;
		fs_store_release(&m->ch->heartbeat_ns, iso_now_ns());
		iso_sleep_ms(10);
	}
	return 1;
}

static int iso_name(const char *sock, unsigned secs)
{
	struct me m = {.sock = sock,
		       .name = "x\n<3>forged by a client\r\x1b[2J\xff"
			       "0123456789012345678901234567890123456789"};
	if (fault_hostile_attach(&m) < 0)
		return 2;
	printf("iso name: attached as client %u\n", m.id);
	fflush(stdout);
	iso_alive_for(&m, iso_now_ns() + secs * 1000000000ull);
	return 0;
}

static int iso_stale_hold(const char *sock, unsigned secs, uint64_t epoch)
{
	struct me m = {.sock = sock, .name = "iso-stale-hold"};
	if (fault_hostile_attach(&m) < 0)
		return 2;
	printf("iso stale-hold: attached as client %u, holding epoch %llu\n", m.id,
	       (unsigned long long)epoch);
	fflush(stdout);
	uint64_t end = iso_now_ns() + secs * 1000000000ull, rewrites = 0;
	int attached = 1;
	while (iso_now_ns() < end) {
		if (fs_load_acquire(&m.ch->state) != FS_CLIENT_ATTACHED) {
			attached = 0;
			break;
		}
		if (fs_load_relaxed(&m.ch->holds[0]) != epoch) {
			fs_store_release(&m.ch->holds[0], epoch);
			rewrites++;
		}
		fs_store_release(&m.ch->heartbeat_ns, iso_now_ns());
		iso_sleep_ms(1);
	}
	printf("iso stale-hold: %s, current epoch %llu, bad_holds %llu, %llu rewrites\n",
	       attached ? "still attached" : "dropped",
	       (unsigned long long)FS_CUR_EPOCH(fs_load_acquire(&m.dh->current)),
	       (unsigned long long)iso_ctr(&m, FS_C_bad_holds), (unsigned long long)rewrites);
	fflush(stdout);
	return 0;
}

static void iso_unmap(struct me *m)
{
	if (m->dh && m->dh != MAP_FAILED)
		munmap((void *)m->dh, m->dh_bytes);
	if (m->ch && m->ch != MAP_FAILED)
		munmap(m->ch, m->ch_bytes);
	for (unsigned i = 0; i < m->nfds; i++)
		close(m->fds[i]);
	m->dh = NULL;
	m->ch = NULL;
	m->nfds = 0;
}

static int iso_rehold(const char *sock, unsigned secs, unsigned nholds, unsigned part, unsigned parts)
{
	if (parts == 0)
		parts = 1;
	if (nholds < 1 || nholds > FS_MAX_HOLDS)
		nholds = 1;
	uint64_t end = iso_now_ns() + secs * 1000000000ull;
	unsigned attaches = 0, refused = 0, revoked = 0;
	uint64_t held_ns = 0;
	char why[256] = "";
	printf("iso rehold: attached (first try follows), holding %u epochs at once\n", nholds);
	fflush(stdout);
	while (iso_now_ns() < end) {
		struct me m = {.sock = sock, .name = "iso-rehold", .quiet = 1};
		if (fault_hostile_attach(&m) < 0) {
			iso_unmap(&m);
			refused++;
			snprintf(why, sizeof(why), "%s", m.err);
			iso_sleep_ms(20);
			continue;
		}
		attaches++;
		uint64_t t0 = iso_now_ns();
		unsigned n = 0;
		while (iso_now_ns() < end && fs_load_acquire(&m.ch->state) == FS_CLIENT_ATTACHED) {
			uint64_t cur = FS_CUR_EPOCH(fs_load_acquire(&m.dh->current));
			int have = 0;
			for (unsigned k = 0; k < n; k++)
				have |= fs_load_relaxed(&m.ch->holds[k]) == cur;
			if (!have && n < nholds && cur % parts == part)
				fs_store_release(&m.ch->holds[n++], cur); /* as an acquire does */
			fs_store_release(&m.ch->heartbeat_ns, iso_now_ns());
			iso_sleep_ms(1);
		}
		held_ns += iso_now_ns() - t0;
		revoked += fs_load_acquire(&m.ch->state) == FS_CLIENT_DETACHED;
		iso_unmap(&m);
	}
	printf("iso rehold: %u attaches, %u revoked, %u refused (%s), attached %.1f s of %u s\n", attaches,
	       revoked, refused, why, (double)held_ns / 1e9, secs);
	fflush(stdout);
	return 0;
}

static int iso_flip_hold(const char *sock, unsigned secs)
{
	struct me m = {.sock = sock, .name = "iso-flip-hold"};
	if (fault_hostile_attach(&m) < 0)
		return 2;
	uint64_t before = iso_ctr(&m, FS_C_bad_holds);
	fs_store_release(&m.ch->holds[1], ~0ull - 7);
	printf("iso flip-hold: attached as client %u, wrote one impossible epoch\n", m.id);
	fflush(stdout);
	iso_alive_for(&m, iso_now_ns() + secs * 1000000000ull);
	printf("iso flip-hold: bad_holds +%llu\n",
	       (unsigned long long)(iso_ctr(&m, FS_C_bad_holds) - before));
	fflush(stdout);
	return 0;
}

int fault_iso(const char *sock, int argc, char **argv)
{
	if (argc < 1) {
		fprintf(stderr, "iso: which attack?\n");
		return 2;
	}
	const char *what = argv[0];
	unsigned secs = (unsigned)iso_opt(argc, argv, "seconds", 3);
	if (strcmp(what, "name") == 0)
		return iso_name(sock, secs);
	if (strcmp(what, "stale-hold") == 0)
		return iso_stale_hold(sock, secs, iso_opt(argc, argv, "epoch", 2));
	if (strcmp(what, "rehold") == 0)
		return iso_rehold(sock, secs, (unsigned)iso_opt(argc, argv, "holds", 1),
				  (unsigned)iso_opt(argc, argv, "part", 0),
				  (unsigned)iso_opt(argc, argv, "parts", 1));
	if (strcmp(what, "flip-hold") == 0)
		return iso_flip_hold(sock, secs);
	fprintf(stderr, "iso: no attack '%s'\n", what);
	return 2;
}
