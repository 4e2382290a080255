/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_hostile.c: a hostile client.  It attaches as an engine may, then does
 * what an engine must not be able to do harm with:
 *   - writes garbage into its own region: records, an impossible tail,
 *     the consumer's head, the wake-up words, the header the daemon wrote,
 *     epoch numbers in its holds that cannot exist, a heartbeat from the
 *     future;
 *   - tries to reach another client's region or to write the read-only
 *     ones: /proc/<pid>/fd of the daemon and of other engines, memfd names
 *     in /dev/shm, fd numbers it was not given, reopening its read-only fds
 *     read-write, mapping them writable, mprotect;
 *   - asks the fd socket for another client's fds, floods it with silent
 *     connections, sends it garbage;
 *   - sends oversized, malformed and slow control messages.
 * Each attack prints "attack NAME: refused|SUCCEEDED (detail)".  Where the
 * daemon counts the attack, the line says by how much the counter moved
 * (read from the daemon region).  Runs as whichever user the test chose.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "fs_atomic.h"
#include "fs_counters.h"
#include "fs_ctl.h"
#include "fs_fdpass.h"
#include "fs_fdproto.h"
#include "fs_hex.h"
#include "fs_hostile.h"
#include "fs_regions.h"
#include "fs_ring.h"

static int n_attacks, n_refused, n_succeeded;

static void report(const char *name, int refused, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report(const char *name, int refused, const char *fmt, ...)
{
	char detail[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	n_attacks++;
	if (refused)
		n_refused++;
	else
		n_succeeded++;
	printf("attack %s: %s (%s)\n", name, refused ? "refused" : "SUCCEEDED", detail);
	fflush(stdout);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* One raw request on a fresh connection: 0 and the reply, or -1 (none
 * within timeout_ms). */
static int raw_request(const char *sock, const void *msg, size_t len, char *rep, size_t replen,
		       int timeout_ms)
{
	nng_socket s;
	char url[160];
	snprintf(url, sizeof(url), "ipc://%s", sock);
	if (nng_req0_open(&s) != 0)
		return -1;
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, timeout_ms);
	nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, timeout_ms);
	nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, 1 << 20);
	int rc = -1;
	char *buf = NULL;
	size_t n = 0;
	if (nng_dial(s, url, NULL, 0) == 0 && nng_send(s, (void *)msg, len, 0) == 0 &&
	    nng_recv(s, &buf, &n, NNG_FLAG_ALLOC) == 0) {
		size_t k = n < replen - 1 ? n : replen - 1;
		memcpy(rep, buf, k);
		rep[k] = 0;
		nng_free(buf, n);
		rc = 0;
	}
	nng_close(s);
	return rc;
}

/* A request far over the limit, written on a plain socket in nng's IPC
 * framing (SP header, then 0x01 and a big-endian 64-bit length): 1 when the
 * daemon dropped the connection rather than read it.  Plain socket calls
 * with timeouts, so nothing here can wait on a half-sent message (an nng
 * REQ socket closed with such a send in flight has hung this client). */
static int huge_dropped(const char *sock, size_t len)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.107s", sock);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return 0;
	struct timeval tv = {.tv_sec = 2};
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	int dropped = 0;
	static const unsigned char hdr[8] = {0, 'S', 'P', 0, 0x00, 0x30, 0, 0}; /* REQ */
	unsigned char peer[8];
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0 && send(s, hdr, 8, MSG_NOSIGNAL) == 8 &&
	    recv(s, peer, 8, MSG_WAITALL) == 8) {
		uint64_t n = (uint64_t)len + 4; /* the request id, then the body */
		unsigned char fh[13] = {1};
		for (int i = 0; i < 8; i++)
			fh[1 + i] = (unsigned char)(n >> (56 - 8 * i));
		fh[9] = 0x80; /* request id 0x80000001 */
		fh[12] = 1;
		char chunk[4096];
		memset(chunk, ' ', sizeof(chunk));
		size_t sent = 0;
		if (send(s, fh, sizeof(fh), MSG_NOSIGNAL) == (ssize_t)sizeof(fh))
			while (sent < len) {
				ssize_t k = send(s, chunk,
						 len - sent < sizeof(chunk) ? len - sent : sizeof(chunk),
						 MSG_NOSIGNAL);
				if (k <= 0)
					break;
				sent += (size_t)k;
			}
		/* Dropped: the write failed, or the peer closes without a reply. */
		char c;
		dropped = sent < len || recv(s, &c, 1, 0) == 0;
	}
	close(s);
	return dropped;
}

static int ping_ms(const char *sock)
{
	char rep[512];
	uint64_t t0 = now_ns();
	const char *p = "{\"verb\":\"ping\",\"proto\":1}";
	if (raw_request(sock, p, strlen(p), rep, sizeof(rep), 3000) < 0 || !strstr(rep, "\"ok\":true"))
		return -1;
	return (int)((now_ns() - t0) / 1000000);
}

static uint64_t ctr(const struct me *m, unsigned i)
{
	return fs_load_relaxed(&m->ctr[i]);
}

/* The fd handshake; returns the reply status (0 with fds, or < 0). */
int fault_fd_handshake(const char *path, uint32_t id, const uint8_t *token, int *fds, unsigned max,
		       unsigned *n)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.107s", path);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	struct timeval tv = {.tv_sec = 2};
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct fs_fd_request rq = {.magic = FS_FD_MAGIC, .version = FS_PROTO_VERSION, .client_id = id};
	memcpy(rq.token, token, 16);
	struct fs_fd_reply rp = {0};
	*n = 0;
	long r = -EIO;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    send(s, &rq, sizeof(rq), MSG_NOSIGNAL) == sizeof(rq))
		r = fs_fd_recv(s, &rp, sizeof(rp), fds, max, n);
	close(s);
	if (r != (long)sizeof(rp))
		return -EPROTO;
	return rp.status;
}

int fault_hostile_attach(struct me *m)
{
	nng_socket s;
	char err[256];
	cJSON *rep = NULL;
	if (fs_ctl_open(&s, m->sock, 3000, err, sizeof(err)) < 0) {
		if (!m->quiet)
			fprintf(stderr, "hostile: %s\n", err);
		return -1;
	}
	cJSON *req = fs_ctl_request("hello");
	int r = fs_ctl_call(s, req, &rep, err, sizeof(err));
	cJSON_Delete(req);
	const cJSON *pid = rep ? cJSON_GetObjectItemCaseSensitive(rep, "pid") : NULL;
	m->daemon_pid = cJSON_IsNumber(pid) ? (long)pid->valuedouble : 0;
	cJSON_Delete(rep);
	rep = NULL;
	req = fs_ctl_request("attach");
	cJSON_AddStringToObject(req, "name", m->name ? m->name : "hostile");
	if (r == 0)
		r = fs_ctl_call(s, req, &rep, err, sizeof(err));
	cJSON_Delete(req);
	nng_close(s);
	if (r < 0) {
		if (!m->quiet)
			fprintf(stderr, "hostile: attach: %s\n", err);
		snprintf(m->err, sizeof(m->err), "%s", err);
		cJSON_Delete(rep);
		return -1;
	}
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(rep, "client_id");
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(rep, "token");
	const cJSON *fdp = cJSON_GetObjectItemCaseSensitive(rep, "fd_socket");
	if (!cJSON_IsNumber(id) || !cJSON_IsString(tok) || !cJSON_IsString(fdp) ||
	    fs_hex_decode(tok->valuestring, m->token, 16) < 0) {
		cJSON_Delete(rep);
		return -1;
	}
	m->id = (uint32_t)id->valuedouble;
	snprintf(m->fd_sock, sizeof(m->fd_sock), "%s", fdp->valuestring);
	cJSON_Delete(rep);
	if (fault_fd_handshake(m->fd_sock, m->id, m->token, m->fds, 3 + FS_MAX_CARDS, &m->nfds) != 0 ||
	    m->nfds < 3)
		return -1;
	struct stat st;
	fstat(m->fds[0], &st);
	m->dh_bytes = (size_t)st.st_size;
	m->dh = mmap(NULL, m->dh_bytes, PROT_READ, MAP_SHARED, m->fds[0], 0);
	fstat(m->fds[1], &st);
	m->ch_bytes = (size_t)st.st_size;
	m->ch = mmap(NULL, m->ch_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, m->fds[1], 0);
	if (m->dh == MAP_FAILED || m->ch == MAP_FAILED)
		return -1;
	m->ctr = (const uint64_t *)((const char *)m->dh + m->dh->off_counters +
				    sizeof(struct fs_counters_hdr));
	/* Wait for ATTACHED, as the library does. */
	uint64_t end = now_ns() + 3000000000ull;
	fs_store_release(&m->ch->heartbeat_ns, now_ns());
	while (fs_load_acquire(&m->ch->state) != FS_CLIENT_ATTACHED && now_ns() < end)
		sleep_ms(1);
	return fs_load_acquire(&m->ch->state) == FS_CLIENT_ATTACHED ? 0 : -1;
}

/* ---- the control socket -------------------------------------------------- */

static void attack_control(struct me *m, int admin)
{
	static const char *bad[] = {
		"",
		"\x01\x02\x03garbage",
		"{",
		"[]",
		"null",
		"{\"verb\":1}",
		"{\"verb\":\"attach\",\"proto\":1,\"ring_entries\":3}",
		"{\"verb\":\"attach\",\"proto\":1,\"ring_entries\":-1}",
		"{\"verb\":\"attach\",\"proto\":1,\"ring_entries\":1e300}",
		"{\"verb\":\"attach\",\"proto\":1,\"name\":{\"a\":[1,2]}}",
		"{\"verb\":\"detach\",\"proto\":1,\"client_id\":1e20}",
		"{\"verb\":\"detach\",\"proto\":1,\"client_id\":0,\"token\":\"00000000000000000000000000000000\"}",
		"{\"verb\":\"profile\",\"proto\":1,\"action\":\"load\",\"layers\":1,\"experts\":1,\"counts\":[1]}",
		"{\"verb\":\"profile\",\"proto\":1,\"action\":[]}",
		"{\"verb\":\"shutdown\",\"proto\":1}",
		"{\"verb\":\"hello\",\"proto\":\"1\"}",
		"{\"verb\":\"\\u0000nul\",\"proto\":1}",
	};
	unsigned n = 0, ok = 0;
	uint64_t before = ctr(m, FS_C_bad_requests) + ctr(m, FS_C_refused);
	char rep[2048];
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		/* Run as the daemon's own user, these are an admin's rights. */
		if (admin && (strstr(bad[i], "shutdown") || strstr(bad[i], "\"client_id\":0") ||
			      strstr(bad[i], "load")))
			continue;
		n++;
		ok += raw_request(m->sock, bad[i], strlen(bad[i]), rep, sizeof(rep), 3000) == 0 &&
		      strstr(rep, "\"ok\":false") != NULL;
	}
	/* Deep nesting and a long run of random bytes. */
	size_t big = 64 * 1024;
	char *junk = malloc(big + 1);
	for (size_t i = 0; i < 20000 && junk; i++)
		junk[i] = '[';
	if (junk) {
		ok += raw_request(m->sock, junk, 20000, rep, sizeof(rep), 3000) == 0 &&
		      strstr(rep, "\"ok\":false");
		(void)!getrandom(junk, big, 0);
		ok += raw_request(m->sock, junk, big, rep, sizeof(rep), 3000) == 0 &&
		      strstr(rep, "\"ok\":false");
		n += 2;
	}
	free(junk);
	uint64_t counted = ctr(m, FS_C_bad_requests) + ctr(m, FS_C_refused) - before;
	report("control-malformed", ok == n && counted >= n, "%u of %u refused with a reply, %llu counted",
	       ok, n, (unsigned long long)counted);

	/* Oversized: over the 1 MiB limit (a counted refusal), and far over it
	 * (nng drops the connection).  The daemon answers pings after both. */
	size_t over = (3u << 20) / 2;
	char *o = malloc(3u << 20);
	if (o) {
		memset(o, ' ', 3u << 20);
		o[0] = '{';
		before = ctr(m, FS_C_oversized);
		int got = raw_request(m->sock, o, over, rep, sizeof(rep), 5000) == 0 &&
			  strstr(rep, "EMSGSIZE");
		int huge = !huge_dropped(m->sock, 3u << 20);
		int p = ping_ms(m->sock);
		report("control-oversized", got && !huge && p >= 0 && ctr(m, FS_C_oversized) > before,
		       "1.5 MiB: %s, counted %llu; 3 MiB: %s; ping after: %d ms",
		       got ? "EMSGSIZE" : "no refusal", (unsigned long long)(ctr(m, FS_C_oversized) - before),
		       huge ? "answered" : "connection dropped", p);
		free(o);
	}

	/* Slow: an SP connection that trickles its header and a message one byte
	 * every 50 ms for a second; pings on other connections stay fast. */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.107s", m->sock);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int worst = 0, failed = 0;
	if (s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		static const unsigned char hdr[] = {0, 'S', 'P', 0, 0x00, 0x30, 0, 0, /* REQ */
						    1, 0,   0,   0, 0,    0,    0, 0, 64};
		for (unsigned i = 0; i < 20; i++) {
			if (i < sizeof(hdr))
				(void)!send(s, &hdr[i], 1, MSG_NOSIGNAL);
			else
				(void)!send(s, "{", 1, MSG_NOSIGNAL);
			int p = ping_ms(m->sock);
			if (p < 0)
				failed++;
			else if (p > worst)
				worst = p;
			sleep_ms(50);
		}
		close(s);
	}
	report("control-slow", s >= 0 && failed == 0 && worst < 1000,
	       "20 pings during a trickled message: %d failed, worst %d ms", failed, worst);
}

/* ---- the fd socket ------------------------------------------------------- */

static void attack_fdsock(struct me *m, long victim)
{
	uint64_t before = ctr(m, FS_C_refused) + ctr(m, FS_C_bad_requests);
	unsigned got = 0, tries = 0;
	for (uint32_t id = 0; id < 8; id++) {
		if (id == m->id)
			continue;
		if (victim >= 0 && id != (uint32_t)victim)
			continue;
		uint8_t tok[16];
		(void)!getrandom(tok, sizeof(tok), 0);
		int fds[3 + FS_MAX_CARDS];
		unsigned nf = 0;
		int st = fault_fd_handshake(m->fd_sock, id, tok, fds, 3 + FS_MAX_CARDS, &nf);
		tries++;
		for (unsigned i = 0; i < nf; i++)
			close(fds[i]);
		got += st == 0 || nf > 0;
	}
	/* Our own id and token again (a replay after the handshake). */
	int fds[3 + FS_MAX_CARDS];
	unsigned nf = 0;
	int st = fault_fd_handshake(m->fd_sock, m->id, m->token, fds, 3 + FS_MAX_CARDS, &nf);
	for (unsigned i = 0; i < nf; i++)
		close(fds[i]);
	got += st == 0 || nf > 0;
	tries++;
	report("fd-other-client",
	       got == 0 && ctr(m, FS_C_refused) + ctr(m, FS_C_bad_requests) - before >= tries,
	       "%u handshakes for other ids or a replayed token, %u got fds, %llu counted", tries, got,
	       (unsigned long long)(ctr(m, FS_C_refused) + ctr(m, FS_C_bad_requests) - before));

	/* Garbage and a flood of silent connections. */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.107s", m->fd_sock);
	int idle[40];
	unsigned nidle = 0;
	for (unsigned i = 0; i < 40; i++) {
		int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0)
			break;
		if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			close(s);
			break;
		}
		if (i % 4 == 0) {
			char junk[7] = "garbage";
			(void)!send(s, junk, sizeof(junk), MSG_NOSIGNAL);
		}
		idle[nidle++] = s;
	}
	int p = ping_ms(m->sock);
	for (unsigned i = 0; i < nidle; i++)
		close(idle[i]);
	report("fd-flood", p >= 0, "%u silent or garbage connections; ping during: %d ms", nidle, p);
}

/* ---- other regions ------------------------------------------------------- */

static int is_foresight_memfd(const char *link)
{
	return strncmp(link, "/memfd:foresight-", 17) == 0;
}

static void attack_regions(struct me *m, const char *pids, int admin)
{
	/* /proc/<pid>/fd of the daemon and of the other engines. */
	char list[512];
	snprintf(list, sizeof(list), "%ld,%s", m->daemon_pid, pids ? pids : "");
	unsigned opened = 0, tried = 0;
	char *save = NULL;
	for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		long pid = strtol(t, NULL, 10);
		if (pid <= 0 || pid == (long)getpid())
			continue;
		for (int fd = 0; fd < 256; fd++) {
			char path[64], link[256];
			snprintf(path, sizeof(path), "/proc/%ld/fd/%d", pid, fd);
			ssize_t n = readlink(path, link, sizeof(link) - 1);
			link[n > 0 ? n : 0] = 0;
			if (n > 0 && !is_foresight_memfd(link))
				continue; /* readable link, not a region: nothing to learn */
			tried++;
			int f = open(path, O_RDWR | O_CLOEXEC);
			if (f < 0)
				f = open(path, O_RDONLY | O_CLOEXEC);
			if (f >= 0) {
				opened++;
				printf("hostile: opened %s (%s)\n", path, link);
				close(f);
			}
		}
	}
	if (!admin) /* the daemon's own user may read /proc/PID/fd: it is trusted */
		report("proc-fd", opened == 0,
		       "%u guesses at /proc/PID/fd of the daemon and engines, %u opened", tried, opened);

	/* memfds have no name in any file system. */
	unsigned found = 0;
	DIR *dir = opendir("/dev/shm");
	struct dirent *de;
	// cppcheck-suppress readdirCalled ; one thread reads this directory
	while (dir && (de = readdir(dir)) != NULL)
		if (strstr(de->d_name, "foresight"))
			found++;
	if (dir)
		closedir(dir);
	report("shm-names", found == 0, "%u foresight names in /dev/shm", found);

	/* fd numbers we were not given. */
	unsigned extra = 0;
	for (int fd = 0; fd < 1024; fd++) {
		char path[64], link[256];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		int ours = 0;
		for (unsigned i = 0; i < m->nfds; i++)
			ours |= m->fds[i] == fd;
		extra += is_foresight_memfd(link) && !ours;
	}
	report("fd-guess", extra == 0, "%u foresight memfds among our fds that the handshake did not give us",
	       extra);

	/* The read-only regions: reopen read-write, map writable, mprotect. */
	unsigned writable = 0, checked = 0;
	for (unsigned i = 0; i < m->nfds; i++) {
		if (i == 1)
			continue; /* our own client region is ours to write */
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", m->fds[i]);
		int f = admin ? -1 : open(path, O_RDWR | O_CLOEXEC); /* root may: mode 0400 */
		if (f >= 0) {
			writable++;
			close(f);
		}
		struct stat st;
		fstat(m->fds[i], &st);
		void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fds[i], 0);
		if (p != MAP_FAILED) {
			writable++;
			munmap(p, (size_t)st.st_size);
		}
		p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, m->fds[i], 0);
		if (p != MAP_FAILED) {
			writable += mprotect(p, (size_t)st.st_size, PROT_READ | PROT_WRITE) == 0;
			munmap(p, (size_t)st.st_size);
		}
		checked++;
	}
	report("readonly-regions", writable == 0 && checked >= 2,
	       "%u read-only regions: reopen O_RDWR, mmap writable, mprotect: %u succeeded", checked,
	       writable);
}

/* ---- our own region ------------------------------------------------------ */

static void wake(struct fs_ring_hdr *r)
{
	__atomic_fetch_add(&r->wake_seq, 1u, __ATOMIC_SEQ_CST);
	fs_ring_wake(r); /* whatever flags say */
}

/* Wait until counter i moved past `before` (at most 2 s). */
static uint64_t moved(const struct me *m, unsigned i, uint64_t before)
{
	uint64_t end = now_ns() + 2000000000ull;
	while (ctr(m, i) == before && now_ns() < end)
		sleep_ms(2);
	return ctr(m, i) - before;
}

static int daemon_alive(const struct me *m)
{
	uint64_t hb = fs_load_acquire(&m->dh->heartbeat_ns);
	uint64_t end = now_ns() + 2000000000ull;
	while (fs_load_acquire(&m->dh->heartbeat_ns) == hb && now_ns() < end)
		sleep_ms(5);
	return fs_load_acquire(&m->dh->state) == FS_DAEMON_RUNNING &&
	       fs_load_acquire(&m->dh->heartbeat_ns) != hb;
}

static void attack_ring(struct me *m)
{
	struct fs_client_hdr *h = m->ch;
	struct fs_ring_hdr *r = (struct fs_ring_hdr *)((char *)h + h->off_ring);
	uint32_t entries = h->ring_entries;
	struct fs_rec *recs = (struct fs_rec *)((char *)r + FS_RING_REC_OFFSET);

	/* Garbage records under a plausible tail. */
	uint64_t before = ctr(m, FS_C_bad_records);
	for (int round = 0; round < 20; round++) {
		(void)!getrandom(recs, (size_t)entries * sizeof(*recs), 0);
		uint32_t head = fs_load_acquire(&r->head);
		fs_store_release(&r->tail, head + 1 + (uint32_t)round * (entries / 32));
		wake(r);
		sleep_ms(2);
	}
	uint64_t bad = moved(m, FS_C_bad_records, before);
	report("ring-garbage-records", bad > 0 && daemon_alive(m),
	       "%llu garbage records counted as bad_records", (unsigned long long)bad);

	/* Impossible tails: behind head, far ahead, every high bit. */
	before = ctr(m, FS_C_bad_index);
	uint32_t tails[] = {0xffffffffu, 0x80000000u, entries * 7u + 3u, 0x7fffffffu};
	for (unsigned i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		uint32_t head = fs_load_acquire(&r->head);
		fs_store_release(&r->tail, head + tails[i]);
		wake(r);
		sleep_ms(5);
	}
	uint64_t bi = moved(m, FS_C_bad_index, before);
	report("ring-bad-index", bi > 0 && daemon_alive(m), "impossible tails counted as bad_index: %llu",
	       (unsigned long long)bi);

	/* The consumer's words and the header the daemon wrote. */
	fs_store_release(&r->head, 0xdeadbeefu);
	fs_store_release(&r->flags, 0xffffffffu);
	r->magic = 0;
	r->entries = 3;
	r->rec_offset = 1u << 30;
	h->ring_entries = 0xffffffffu;
	h->off_ring = ~0ull;
	h->state = 77;
	h->client_id = 9999;
	for (int i = 0; i < 200; i++) { /* a storm of wake-ups */
		__atomic_fetch_add(&r->wake_seq, 12345u, __ATOMIC_SEQ_CST);
		wake(r);
	}
	report("ring-header-scribble", daemon_alive(m),
	       "head, flags, wake_seq, magic, entries, offsets scribbled");
}

static void attack_holds(struct me *m)
{
	struct fs_client_hdr *h = m->ch;
	uint64_t cur = FS_CUR_EPOCH(fs_load_acquire(&m->dh->current));
	uint64_t before = ctr(m, FS_C_bad_holds);
	uint64_t vals[] = {~0ull, cur + 1000000, 1ull << 63, cur + 2, 0xffffffffull};
	for (unsigned round = 0; round < 5; round++) {
		for (unsigned k = 0; k < FS_MAX_HOLDS; k++)
			fs_store_release(&h->holds[k], vals[(k + round) % 5]);
		sleep_ms(20);
	}
	uint64_t bh = moved(m, FS_C_bad_holds, before);
	for (unsigned k = 0; k < FS_MAX_HOLDS; k++)
		fs_store_release(&h->holds[k], 0ull);
	report("holds-impossible-epochs", bh > 0 && daemon_alive(m),
	       "epochs that cannot exist counted as bad_holds: %llu", (unsigned long long)bh);
}

static void attack_heartbeat(struct me *m)
{
	uint64_t before = ctr(m, FS_C_bad_heartbeats);
	uint64_t end = now_ns() + 3000000000ull;
	while (fs_load_acquire(&m->ch->state) != FS_CLIENT_DETACHED && now_ns() < end) {
		fs_store_release(&m->ch->heartbeat_ns, ~0ull); /* alive forever? */
		sleep_ms(2);
	}
	int dropped = fs_load_acquire(&m->ch->state) == FS_CLIENT_DETACHED &&
		      fs_load_acquire(&m->ch->reason) == FS_DETACH_STALE;
	report("heartbeat-future", dropped && ctr(m, FS_C_bad_heartbeats) > before,
	       "a heartbeat from the future: %s, bad_heartbeats +%llu",
	       dropped ? "dropped (stale)" : "still attached",
	       (unsigned long long)(ctr(m, FS_C_bad_heartbeats) - before));
}

int fault_hostile(const char *sock, int argc, char **argv)
{
	const char *pids = NULL;
	long victim = -1;
	int admin = 0;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "admin=1") == 0)
			admin = 1;
		if (strncmp(argv[i], "pids=", 5) == 0)
			pids = argv[i] + 5;
		else if (strncmp(argv[i], "victim=", 7) == 0)
			victim = strtol(argv[i] + 7, NULL, 10);
	}
	struct me m = {.sock = sock};
	if (fault_hostile_attach(&m) < 0) {
		fprintf(stderr, "hostile: could not attach\n");
		return 2;
	}
	printf("hostile: attached as client %u (uid %d), daemon pid %ld\n", m.id, (int)getuid(),
	       m.daemon_pid);
	attack_regions(&m, pids, admin);
	attack_fdsock(&m, victim);
	attack_control(&m, admin);
	attack_ring(&m);
	attack_holds(&m);
	attack_heartbeat(&m);
	printf("hostile: %d attacks, %d refused, %d succeeded\n", n_attacks, n_refused, n_succeeded);
	fflush(stdout);
	return n_succeeded ? 1 : 0;
}
