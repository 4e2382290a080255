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
 *   fs-fault-engine iso SOCKET rehold [seconds=S] [holds=N] [part=I parts=P] [fresh=1]
 *       attach and hold the current epoch, then each newly published one
 *       too, up to N (default 1) at once, never releasing; when revoked,
 *       attach again at once (every 20 ms while refused), as the same
 *       process under the same name (2: the hold budget over time; with
 *       N = 8 and parts=2, two of these hold every epoch buffer of the default
 *       16: each holds only the epochs e with e % P == I); fresh=1: each
 *       attachment from a new process under a new name (issue 33).
 *   fs-fault-engine iso SOCKET future-hold [seconds=S] [ahead=A] [fresh=1]
 *       attach and write the epoch A (default 2) past the current one into
 *       holds[0]: in no buffer when written (issue 33); re-attach as rehold.
 *   fs-fault-engine iso SOCKET old-hold [seconds=S] [fresh=1]
 *       attach and keep holds[0] on the oldest epoch any buffer still
 *       holds: superseded long ago, never acquired (issue 33).
 *   fs-fault-engine iso SOCKET flip-hold [seconds=S]
 *       write one impossible epoch into holds[1] once and leave it (9: the
 *       daemon must count it once, not once per pass).
 *   fs-fault-engine iso SOCKET rows [seconds=S] [keep=K]
 *       take client rows: attach as fast as the daemon answers and never
 *       make the fd handshake (half-open rows), except for the first K
 *       (default 32) attaches that do, and stay attached (3).
 *   fs-fault-engine iso SOCKET fd-flood [seconds=S] [procs=P]
 *       connect to the fd socket as fast as it accepts, never saying a
 *       word, holding up to 900 connections, from P processes (5).
 *   fs-fault-engine iso SOCKET no-read [seconds=S] [conns=N]
 *       N (default 20) control connections that send stats requests one
 *       after another and never read a reply (4).
 *   fs-fault-engine iso SOCKET idle-conns [seconds=S] [conns=N]
 *       hold N (default 2000) idle control connections, opening a new one
 *       for each the daemon closes (6).
 *   fs-fault-engine iso SOCKET spin [seconds=S] [procs=P]
 *       not an attack: P processes that only burn CPU, never touching the
 *       daemon: the control for the floods (what the same number of busy
 *       processes costs the honest engines on this machine's cores).
 *   no-read and idle-conns ping the daemon every 50 ms on a connection of
 *   their own and print the slowest ping ("ping max N ms", -1: one failed).
 */
#include <errno.h>
#include <stdio.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <nng/nng.h>

#include "fs_atomic.h"
#include "fs_counters.h"
#include "fs_ctl.h"
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

/* What a holder attack writes into its hold words (iso_holder). */
enum hold_mode {
	HOLD_CURRENT, /* the current epoch, and each new one, up to N at once, never released */
	HOLD_FUTURE,  /* an epoch `ahead` of the current one: in no buffer when written */
	HOLD_OLD,     /* the oldest epoch in a buffer: superseded long ago, never acquired */
};

struct hold_how {
	enum hold_mode mode;
	unsigned nholds, part, parts, ahead;
};

/* The oldest epoch any epoch buffer holds now, 0: none. */
static uint64_t oldest_buffered(const struct fs_daemon_hdr *dh)
{
	uint64_t old = 0;
	for (uint32_t b = 0; b < dh->epoch_bufs; b++) {
		const struct fs_epoch_buf_hdr *bh = (const void *)((const char *)dh + dh->off_epochs +
								   (uint64_t)b * dh->epoch_buf_bytes);
		uint64_t ep = fs_load_acquire(&bh->epoch);
		if (ep && (old == 0 || ep < old))
			old = ep;
	}
	return old;
}

/* One attachment: hold as `how` says until dropped or `end`.  1 when the
 * daemon dropped it. */
static int hold_session(struct me *m, const struct hold_how *how, uint64_t end)
{
	unsigned n = 0;
	while (iso_now_ns() < end && fs_load_acquire(&m->ch->state) == FS_CLIENT_ATTACHED) {
		uint64_t cur = FS_CUR_EPOCH(fs_load_acquire(&m->dh->current));
		if (how->mode == HOLD_CURRENT) {
			int have = 0;
			for (unsigned k = 0; k < n; k++)
				have |= fs_load_relaxed(&m->ch->holds[k]) == cur;
			if (!have && n < how->nholds && cur % how->parts == how->part)
				fs_store_release(&m->ch->holds[n++], cur); /* as an acquire does */
		} else if (how->mode == HOLD_FUTURE) {
			if (n == 0) {
				fs_store_release(&m->ch->holds[0], cur + how->ahead);
				n = 1;
			}
		} else {
			uint64_t old = oldest_buffered(m->dh);
			if (old && old < cur && fs_load_relaxed(&m->ch->holds[0]) != old)
				fs_store_release(&m->ch->holds[0], old);
		}
		fs_store_release(&m->ch->heartbeat_ns, iso_now_ns());
		iso_sleep_ms(1);
	}
	return fs_load_acquire(&m->ch->state) == FS_CLIENT_DETACHED;
}

/* What one attachment of a holder came to (iso_holder). */
struct hold_tally {
	unsigned attaches, refused, revoked, told;
	uint64_t held_ns;
	char why[256]; /* the latest refusal */
};

static void tally_add(struct hold_tally *sum, const struct hold_tally *one)
{
	sum->attaches += one->attaches;
	sum->refused += one->refused;
	sum->revoked += one->revoked;
	sum->told += one->told;
	sum->held_ns += one->held_ns;
	if (one->refused)
		snprintf(sum->why, sizeof(sum->why), "%s", one->why);
}

/* One attachment under `name`: hold as `how` says until dropped or `end`. */
static void hold_once(const char *sock, const char *name, const struct hold_how *how, uint64_t end,
		      struct hold_tally *one)
{
	memset(one, 0, sizeof(*one));
	struct me m = {.sock = sock, .name = name, .quiet = 1};
	if (fault_hostile_attach(&m) < 0) {
		one->refused = 1;
		snprintf(one->why, sizeof(one->why), "%s", m.err);
	} else {
		one->attaches = 1;
		uint64_t t0 = iso_now_ns();
		one->revoked = (unsigned)hold_session(&m, how, end);
		one->held_ns = iso_now_ns() - t0;
		one->told = fs_load_acquire(&m.ch->holds_refused);
	}
	iso_unmap(&m);
}

/*
 * Attach and hold (how), attach again at once when dropped (every 20 ms
 * while refused).  fresh = 0: as the same process under the same name;
 * fresh = 1: each attachment from a new process under a new name (a bar
 * keyed on the pid or the name does not see it), its tally sent back
 * through a pipe.
 */
static int iso_holder(const char *sock, const char *what, unsigned secs, const struct hold_how *how,
		      int fresh)
{
	uint64_t end = iso_now_ns() + secs * 1000000000ull;
	struct hold_tally sum = {0}, one;
	printf("iso %s: attached (first try follows)\n", what);
	fflush(stdout);
	for (unsigned serial = 0; iso_now_ns() < end; serial++) {
		char name[48];
		snprintf(name, sizeof(name), fresh ? "iso-%s-%u" : "iso-%s", what, serial);
		if (!fresh) {
			hold_once(sock, name, how, end, &one);
		} else {
			int pfd[2];
			if (pipe(pfd) < 0)
				return 2;
			pid_t kid = fork();
			if (kid < 0)
				return 2;
			if (kid == 0) {
				close(pfd[0]);
				hold_once(sock, name, how, end, &one);
				_exit(write(pfd[1], &one, sizeof(one)) == (ssize_t)sizeof(one) ? 0 : 2);
			}
			close(pfd[1]);
			memset(&one, 0, sizeof(one));
			ssize_t k = read(pfd[0], &one, sizeof(one));
			close(pfd[0]);
			waitpid(kid, NULL, 0);
			if (k != (ssize_t)sizeof(one))
				memset(&one, 0, sizeof(one));
		}
		tally_add(&sum, &one);
		if (one.refused)
			iso_sleep_ms(20);
	}
	printf("iso %s: %u attaches, %u revoked, %u refused (%s), attached %.1f s of %u s, holds refused %u "
	       "(told in its region)\n",
	       what, sum.attaches, sum.revoked, sum.refused, sum.why, (double)sum.held_ns / 1e9, secs,
	       sum.told);
	fflush(stdout);
	return 0;
}

static int iso_rehold(const char *sock, unsigned secs, unsigned nholds, unsigned part, unsigned parts,
		      int fresh)
{
	if (parts == 0)
		parts = 1;
	if (nholds < 1 || nholds > FS_MAX_HOLDS)
		nholds = 1;
	struct hold_how how = {.mode = HOLD_CURRENT, .nholds = nholds, .part = part % parts, .parts = parts};
	return iso_holder(sock, "rehold", secs, &how, fresh);
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

/* An attach without the fd handshake: 0 (a half-open row), -1 refused
 * (why in err). */
static int iso_attach_only(nng_socket s, char *err, size_t errlen)
{
	cJSON *req = fs_ctl_request("attach"), *rep = NULL;
	cJSON_AddStringToObject(req, "name", "iso-rows");
	int r = fs_ctl_call(s, req, &rep, err, errlen);
	cJSON_Delete(req);
	cJSON_Delete(rep);
	return r < 0 ? -1 : 0;
}

static int iso_rows(const char *sock, unsigned secs, unsigned keep)
{
	enum { MAX_KEEP = 64 };
	static struct me kept[MAX_KEEP];
	unsigned nkept = 0, half = 0, refused = 0;
	char why[256] = "";
	if (keep > MAX_KEEP)
		keep = MAX_KEEP;
	uint64_t end = iso_now_ns() + secs * 1000000000ull;
	/* The rows it can keep, first (whole attaches, heartbeats kept). */
	for (unsigned i = 0; i < keep && iso_now_ns() < end; i++) {
		struct me *m = &kept[nkept];
		memset(m, 0, sizeof(*m));
		m->sock = sock;
		m->name = "iso-rows";
		m->quiet = 1;
		if (fault_hostile_attach(m) < 0) {
			snprintf(why, sizeof(why), "%s", m->err);
			iso_unmap(m);
			refused++;
			break;
		}
		nkept++;
	}
	printf("iso rows: attached %u whole rows (%s)\n", nkept, why);
	fflush(stdout);
	nng_socket s;
	char err[256];
	if (fs_ctl_open(&s, sock, 3000, err, sizeof(err)) < 0) {
		printf("iso rows: %s\n", err);
		return 2;
	}
	uint64_t last_hb = 0;
	while (iso_now_ns() < end) {
		if (iso_attach_only(s, err, sizeof(err)) == 0) {
			half++;
		} else {
			refused++;
			snprintf(why, sizeof(why), "%s", err);
			iso_sleep_ms(1);
		}
		if (iso_now_ns() - last_hb > 20000000ull) {
			last_hb = iso_now_ns();
			for (unsigned i = 0; i < nkept; i++)
				fs_store_release(&kept[i].ch->heartbeat_ns, last_hb);
		}
	}
	nng_close(s);
	unsigned still = 0;
	for (unsigned i = 0; i < nkept; i++) {
		still += fs_load_acquire(&kept[i].ch->state) == FS_CLIENT_ATTACHED;
		iso_unmap(&kept[i]);
	}
	printf("iso rows: %u whole rows (%u still attached), %u half-open attaches, %u refused (%s)\n", nkept,
	       still, half, refused, why);
	fflush(stdout);
	return 0;
}

static int iso_fd_flood(const char *sock, unsigned secs, unsigned procs)
{
	enum { MAX_CONNS = 900 };
	static int fds[MAX_CONNS];
	/* The fd socket is the control socket's path and ".fd" (fsd_config.c):
	 * no attach needed, so a flood already running cannot stop this one. */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.100s.fd", sock);
	printf("iso fd-flood: attached to nothing, flooding %s with %u process(es)\n", sa.sun_path,
	       procs ? procs : 1);
	fflush(stdout);
	/* More flooding processes: the listen backlog stays full. */
	pid_t kids[16];
	unsigned nkids = 0, total = procs ? procs : 1;
	for (unsigned i = 1; i < procs && nkids < 16; i++) {
		pid_t k = fork();
		if (k == 0) {
			procs = 0; /* a child: floods, prints nothing */
			break;
		}
		if (k > 0)
			kids[nkids++] = k;
	}
	unsigned n = 0, next = 0, closed = 0;
	unsigned long long connects = 0, failed = 0;
	for (unsigned i = 0; i < MAX_CONNS; i++)
		fds[i] = -1;
	uint64_t end = iso_now_ns() + secs * 1000000000ull;
	while (iso_now_ns() < end) {
		/* Reuse the oldest slot once every one is in use. */
		if (fds[next] >= 0) {
			char c;
			if (recv(fds[next], &c, 1, MSG_DONTWAIT) >= 0)
				closed++;
			close(fds[next]);
			fds[next] = -1;
			n--;
		}
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			fds[next] = fd;
			n++;
			connects++;
		} else {
			failed++;
			if (fd >= 0)
				close(fd);
			iso_sleep_ms(1);
		}
		next = (next + 1) % MAX_CONNS;
	}
	for (unsigned i = 0; i < MAX_CONNS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (procs == 0)
		_exit(0);
	for (unsigned i = 0; i < nkids; i++)
		waitpid(kids[i], NULL, 0);
	printf("iso fd-flood (one process of %u): %llu connections (%u held at the end), %llu failed, %u answered or closed by the daemon\n",
	       total, connects, n, failed, closed);
	fflush(stdout);
	return 0;
}

static int iso_spin(unsigned secs, unsigned procs)
{
	printf("iso spin: attached to nothing, burning CPU with %u process(es)\n", procs ? procs : 1);
	fflush(stdout);
	pid_t kids[16];
	unsigned nkids = 0;
	for (unsigned i = 1; i < procs && nkids < 16; i++) {
		pid_t k = fork();
		if (k == 0) {
			procs = 0; /* a child */
			break;
		}
		if (k > 0)
			kids[nkids++] = k;
	}
	volatile uint64_t x = 0;
	uint64_t end = iso_now_ns() + secs * 1000000000ull;
	while (iso_now_ns() < end)
		for (int i = 0; i < 100000; i++)
			x = x + (uint64_t)i;
	if (procs == 0)
		_exit(0);
	for (unsigned i = 0; i < nkids; i++)
		waitpid(kids[i], NULL, 0);
	printf("iso spin: done\n");
	fflush(stdout);
	return 0;
}

/* A control connection without nng: the SP header of a REQ socket sent
 * and the REP's read (nng's IPC framing, as fs_hostile.c's huge_dropped).
 * The fd (non-blocking once connected), or -1. */
static int sp_connect(const char *sock)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.107s", sock);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	struct timeval tv = {.tv_sec = 1};
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	static const unsigned char hdr[8] = {0, 'S', 'P', 0, 0x00, 0x30, 0, 0}; /* REQ */
	unsigned char peer[8];
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || send(s, hdr, 8, MSG_NOSIGNAL) != 8 ||
	    recv(s, peer, 8, MSG_WAITALL) != 8) {
		close(s);
		return -1;
	}
	return s;
}

/* One framed request, without waiting: 1 sent, 0 would block, -1 closed. */
static int sp_request(int s, uint32_t id, const char *body)
{
	size_t len = strlen(body);
	unsigned char buf[256];
	uint64_t n = (uint64_t)len + 4;
	buf[0] = 1;
	for (int i = 0; i < 8; i++)
		buf[1 + i] = (unsigned char)(n >> (56 - 8 * i));
	id |= 0x80000000u;
	for (int i = 0; i < 4; i++)
		buf[9 + i] = (unsigned char)(id >> (24 - 8 * i));
	memcpy(buf + 13, body, len);
	ssize_t k = send(s, buf, 13 + len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (k == (ssize_t)(13 + len))
		return 1;
	if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	return -1; /* closed, or a partial frame: the connection is spent */
}

/* Closed by the daemon? (EOF or an error; data waiting is not.) */
static int sp_closed(int s)
{
	struct pollfd p = {.fd = s, .events = POLLIN};
	if (poll(&p, 1, 0) <= 0)
		return 0;
	if (p.revents & (POLLHUP | POLLERR))
		return 1;
	char c;
	return recv(s, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* A ping on a connection of our own: ms, or -1. */
static long iso_ping_ms(nng_socket s)
{
	uint64_t t0 = iso_now_ns();
	cJSON *req = fs_ctl_request("ping"), *rep = NULL;
	char err[256];
	int r = fs_ctl_call(s, req, &rep, err, sizeof(err));
	cJSON_Delete(req);
	cJSON_Delete(rep);
	return r < 0 ? -1 : (long)((iso_now_ns() - t0) / 1000000u);
}

static int iso_conns(const char *sock, unsigned secs, unsigned nconns, int noread)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < nconns + 64)
		nconns = rl.rlim_cur > 64 ? (unsigned)rl.rlim_cur - 64 : 1;
	int *fd = calloc(nconns, sizeof(int));
	if (!fd)
		return 2;
	for (unsigned i = 0; i < nconns; i++)
		fd[i] = -1;
	const char *what = noread ? "no-read" : "idle-conns";
	printf("iso %s: attached: no; %u connections\n", what, nconns);
	fflush(stdout);
	/* The pings come from a process of their own: the daemon's caps are
	 * per process, and this one is the attacker. */
	pid_t pinger = fork();
	if (pinger == 0) {
		nng_socket ps;
		char err[256];
		uint64_t pend = iso_now_ns() + secs * 1000000000ull;
		long ping_max = 0;
		unsigned pings = 0, ping_fail = 0;
		if (fs_ctl_open(&ps, sock, 3000, err, sizeof(err)) < 0)
			_exit(2);
		while (iso_now_ns() < pend) {
			long ms = iso_ping_ms(ps);
			pings++;
			if (ms < 0)
				ping_fail++;
			else if (ms > ping_max)
				ping_max = ms;
			iso_sleep_ms(50);
		}
		nng_close(ps);
		printf("iso %s: pinger: %u pings, %u failed, ping max %ld ms\n", what, pings, ping_fail,
		       ping_fail ? -1L : ping_max);
		fflush(stdout);
		_exit(0);
	}
	uint64_t end = iso_now_ns() + secs * 1000000000ull;
	unsigned long long opened = 0, closed = 0, sent = 0, failed = 0;
	uint32_t rid = 1;
	while (iso_now_ns() < end) {
		unsigned held = 0, reconnects = 0;
		for (unsigned i = 0; i < nconns && iso_now_ns() < end; i++) {
			if (fd[i] >= 0 && sp_closed(fd[i])) {
				close(fd[i]);
				fd[i] = -1;
				closed++;
			}
			if (fd[i] < 0) {
				if (opened >= nconns && reconnects++ >= 20)
					continue; /* after the first round, 20 a pass: about 1000 a second */
				fd[i] = sp_connect(sock);
				if (fd[i] < 0) {
					failed++;
					continue;
				}
				opened++;
			}
			held++;
			if (noread) {
				int r;
				while ((r = sp_request(fd[i], rid++, "{\"verb\":\"stats\",\"proto\":1}")) ==
				       1)
					sent++;
				if (r < 0) {
					close(fd[i]);
					fd[i] = -1;
					closed++;
				}
			}
		}
		(void)held;
		iso_sleep_ms(noread ? 5 : 20);
	}
	unsigned held = 0;
	for (unsigned i = 0; i < nconns; i++)
		if (fd[i] >= 0) {
			held++;
			close(fd[i]);
		}
	free(fd);
	if (pinger > 0)
		waitpid(pinger, NULL, 0);
	printf("iso %s: %llu opened, %llu closed by the daemon, %llu failed, %u held at the end, %llu "
	       "requests sent unread\n",
	       what, opened, closed, failed, held, sent);
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
	int fresh = iso_opt(argc, argv, "fresh", 0) != 0;
	if (strcmp(what, "rehold") == 0)
		return iso_rehold(sock, secs, (unsigned)iso_opt(argc, argv, "holds", 1),
				  (unsigned)iso_opt(argc, argv, "part", 0),
				  (unsigned)iso_opt(argc, argv, "parts", 1), fresh);
	if (strcmp(what, "future-hold") == 0) {
		struct hold_how how = {.mode = HOLD_FUTURE,
				       .ahead = (unsigned)iso_opt(argc, argv, "ahead", 2)};
		return iso_holder(sock, what, secs, &how, fresh);
	}
	if (strcmp(what, "old-hold") == 0) {
		struct hold_how how = {.mode = HOLD_OLD};
		return iso_holder(sock, what, secs, &how, fresh);
	}
	if (strcmp(what, "flip-hold") == 0)
		return iso_flip_hold(sock, secs);
	if (strcmp(what, "rows") == 0)
		return iso_rows(sock, secs, (unsigned)iso_opt(argc, argv, "keep", 32));
	if (strcmp(what, "no-read") == 0)
		return iso_conns(sock, secs, (unsigned)iso_opt(argc, argv, "conns", 20), 1);
	if (strcmp(what, "idle-conns") == 0)
		return iso_conns(sock, secs, (unsigned)iso_opt(argc, argv, "conns", 2000), 0);
	if (strcmp(what, "fd-flood") == 0)
		return iso_fd_flood(sock, secs, (unsigned)iso_opt(argc, argv, "procs", 1));
	if (strcmp(what, "spin") == 0)
		return iso_spin(secs, (unsigned)iso_opt(argc, argv, "procs", 1));
	fprintf(stderr, "iso: no attack '%s'\n", what);
	return 2;
}
