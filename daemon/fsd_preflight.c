/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_preflight.c: every start-up check that holds nothing, in one place.
 * The start runs it before the arena is allocated (so a missing group or
 * socket directory stops it in milliseconds, not after minutes of loading);
 * --check-config runs the same list, prints one line per check and names
 * what it could not check without starting.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fs_arena.h"

#include "fsd.h"
#include "fsd_preflight.h"
#include "fsd_sockpath.h"

#define PATH_MAX_MSG 4352

struct pf {
	int report; /* --check-config: a line per check on stdout */
	int failed;
};

static void result(struct pf *pf, int ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void result(struct pf *pf, int ok, const char *fmt, ...)
{
	char msg[PATH_MAX_MSG];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!ok)
		pf->failed = 1;
	if (pf->report)
		printf("  %-5s %s\n", ok ? "ok" : "FAIL", msg);
	else if (!ok)
		fsd_log(FSD_ERR, "%s", msg);
}

static void check_group(struct pf *pf, const struct fsd_config *c)
{
	if (!c->group[0]) {
		if (pf->report)
			printf("  %-5s group: none set (the sockets keep the daemon's group)\n", "ok");
		return;
	}
	/* Only the loop thread (or main before it) looks groups up. */
	// cppcheck-suppress getgrnamCalled
	struct group *g = getgrnam(c->group);
	if (!g) {
		result(pf, 0, "group '%s' does not exist (key 'group'; systemd-sysusers creates 'foresight')",
		       c->group);
		return;
	}
	/* The start gives its sockets this group (chown): root may name any
	 * group, another user only one it is in. */
	gid_t gid = g->gr_gid, groups[NGROUPS_MAX];
	int n = getgroups(NGROUPS_MAX, groups), member = geteuid() == 0 || getegid() == gid;
	for (int i = 0; i < n && !member; i++)
		member = groups[i] == gid;
	if (member)
		result(pf, 1, "group '%s' exists (gid %u) and this user may give it its sockets", c->group,
		       (unsigned)gid);
	else
		result(pf, 0,
		       "group '%s' (gid %u): this user (uid %u) is not in it, so it cannot give its sockets "
		       "that group (add it: usermod -aG %s USER; or run as the unit's User=)",
		       c->group, (unsigned)gid, (unsigned)geteuid(), c->group);
}

static void check_socket(struct pf *pf, const struct fsd_config *c)
{
	char err[PATH_MAX_MSG];
	if (fsd_sock_dir_check(c->socket_path, err, sizeof(err)) < 0) {
		result(pf, 0, "%s", err);
		return;
	}
	/* The start creates the sockets and their lock there. */
	char dir[PATH_MAX];
	fsd_sock_dir(c->socket_path, dir, sizeof(dir));
	if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) < 0) {
		result(pf, 0, "socket directory %s: this user (uid %u) cannot create files there: %s", dir,
		       (unsigned)geteuid(), strerror(errno));
		return;
	}
	result(pf, 1, "socket directory of %s exists and this user can create its sockets there",
	       c->socket_path);
	long pid = 0;
	int held = fsd_sock_lock_held(c, &pid);
	for (int w = 0; w < FSD_SOCK_N; w++) {
		const char *p = fsd_sock_path(c, (enum fsd_sock)w);
		int r = fsd_sock_path_check(p, err, sizeof(err));
		if (r < 0)
			result(pf, 0, "%s", err);
		else if (pf->report)
			printf("  %-5s %s: %s\n", "ok", p,
			       r == 0 ? "free" :
			       held   ? "the running daemon's socket" :
					"a stale socket (replaced at start)");
	}
	if (held && pf->report)
		printf("  note  foresightd pid %ld serves %s now: a second start there fails until it stops\n",
		       pid, c->socket_path);
}

/* A /proc/meminfo line in bytes, 0 when absent. */
static uint64_t meminfo(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "r");
	if (!f)
		return 0;
	char line[256];
	uint64_t v = 0;
	size_t n = strlen(key);
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, n) == 0 && line[n] == ':') {
			v = strtoull(line + n + 1, NULL, 10) * 1024u;
			break;
		}
	fclose(f);
	return v;
}

/*
 * What the start puts in host memory: the arena (locked in memory when
 * the memlock limit allows), and on the host backend a slot pool per card.
 * Larger than the machine's RAM, the start was OOM-killed or thrashed
 * after minutes of loading; larger than what is free now, it may be.
 */
static void check_memory(struct pf *pf, const struct fsd_config *c, uint64_t arena, uint64_t slot_bytes)
{
	uint64_t pools = strcmp(c->backend, "host") == 0 ? (uint64_t)c->cards * c->slots * slot_bytes : 0;
	uint64_t need = arena + pools, total = meminfo("MemTotal"), avail = meminfo("MemAvailable");
	if (!total) {
		if (pf->report)
			printf("  note  host memory: /proc/meminfo unreadable, the arena's size not checked\n");
		return;
	}
	char what[160];
	snprintf(what, sizeof(what), "the arena (%.3f GB)%s%.3f GB of slot pools", (double)arena / 1e9,
		 pools ? " and " : "", (double)pools / 1e9);
	if (!pools)
		snprintf(what, sizeof(what), "the arena (%.3f GB)", (double)arena / 1e9);
	if (need > total) {
		result(pf, 0, "host memory: %s need %.3f GB, more than this machine's %.3f GB of RAM", what,
		       (double)need / 1e9, (double)total / 1e9);
		return;
	}
	result(pf, 1, "host memory: %s fit in %.3f GB of RAM", what, (double)total / 1e9);
	if (pf->report && avail && need > avail)
		printf("  note  host memory: only %.3f GB is available now: the start may not get it\n",
		       (double)avail / 1e9);
}

static void check_model(struct pf *pf, const struct fsd_config *c)
{
	if (!c->model_path[0]) {
		if (pf->report)
			printf("  %-5s model: none (a synthetic arena of %u layers x %u experts x %llu bytes)\n",
			       "ok", c->layers, c->experts, (unsigned long long)c->expert_bytes);
		/* As fsd_arena_synth.c lays it out. */
		uint64_t n = (uint64_t)c->layers * c->experts;
		uint64_t blob = (c->expert_bytes + FS_ARENA_ALIGN - 1) / FS_ARENA_ALIGN * FS_ARENA_ALIGN;
		check_memory(pf, c, sizeof(struct fs_arena_hdr) + n * (sizeof(struct fs_arena_entry) + blob),
			     blob);
		return;
	}
	char err[PATH_MAX_MSG];
	uint64_t arena = 0, slot_bytes = 0;
	if (fsd_arena_gguf_check(c->model_path, err, sizeof(err), &arena, &slot_bytes) < 0) {
		result(pf, 0, "model %s: %s", c->model_path, err);
		return;
	}
	result(pf, 1, "model %s: %s", c->model_path, err);
	check_memory(pf, c, arena, slot_bytes);
}

/* Bind the address and let it go: in use, or not this host's, shows now. */
static void check_metrics(struct pf *pf, const struct fsd_config *c)
{
	if (!c->metrics_listen[0])
		return;
	char host[64];
	const char *l = c->metrics_listen, *port;
	int v6 = l[0] == '[';
	const char *end = v6 ? strchr(l, ']') : strrchr(l, ':');
	if (!end || (size_t)(end - l) >= sizeof(host))
		return; /* parse() refused it already */
	memcpy(host, l + v6, (size_t)(end - l - v6));
	host[end - l - v6] = 0;
	port = end + (v6 ? 2 : 1);
	struct sockaddr_storage ss = {0};
	socklen_t len;
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)atoi(port));
		inet_pton(AF_INET6, host, &a->sin6_addr);
		len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)atoi(port));
		inet_pton(AF_INET, host, &a->sin_addr);
		len = sizeof(*a);
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0)
		result(pf, 0, "metrics_listen %s: %s", l, strerror(errno));
	else
		result(pf, 1, "metrics_listen %s: the address can be bound", l);
	if (fd >= 0)
		close(fd);
}

int fsd_preflight(const struct fsd_config *c, int report)
{
	struct pf pf = {report, 0};
	check_group(&pf, c);
	check_socket(&pf, c);
	check_model(&pf, c);
	check_metrics(&pf, c);
	if (report) {
		printf("  not checked (they need the start's resources): ");
		if (strcmp(c->backend, "cuda") == 0)
			printf("the GPUs, their memory for the slot pools and peer access; ");
		printf("locking the arena in memory (mlock, LimitMEMLOCK=) and the unit's MemoryMax=; the user "
		       "the service runs as (the unit's User=: this user's group and socket directory "
		       "access were checked) and its access to the model\n");
	}
	return pf.failed ? -1 : 0;
}
