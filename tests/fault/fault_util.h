/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fault_util.h: what the fault tests need beyond tests/fs_harness.h: a
 * daemon started the way systemd starts it (NOTIFY_SOCKET, LISTEN_FDS from
 * an emulated fd store), engines as another user, stats, and /proc figures.
 */
#ifndef FAULT_UTIL_H
#define FAULT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "fs_harness.h"

struct fdaemon {
	struct fsh_daemon h; /* pid, dir, sock, log (fs_harness.h) */
	char notify[128];    /* the emulated $NOTIFY_SOCKET */
	int notify_fd;       /* bound datagram socket, -1 without */
	int kept_fd;         /* the fd store: what FDSTORE=1 handed us, -1 none */
	int stored;          /* FDSTORE=1 messages received */
};

/* Make a private dir, bind the notify socket (with_notify).  0 or -1. */
int fd_init(struct fdaemon *d, int with_notify);
/* Start foresightd with extra args; give it the kept fd as LISTEN_FDS
 * (systemd's fd store) when pass_kept and there is one.  Waits until it
 * answers ping (10 s).  Returns ms to ready, or -1. */
long fd_start(struct fdaemon *d, const char *const *extra, int pass_kept);
/* Read notify messages until one carried FDSTORE=1 with an fd (kept_fd
 * replaced) or timeout_ms passed.  1 stored, 0 not. */
int fd_wait_store(struct fdaemon *d, int timeout_ms);
/* kill -9 and reap.  0 or -1. */
int fd_kill9(struct fdaemon *d);
/* SIGTERM, reap, remove the dir (FSH_KEEP keeps it). */
void fd_stop(struct fdaemon *d);

/* Spawn argv with stdout to out; uid/gid >= 0: become that user first. */
pid_t fault_spawn(char *const argv[], const char *out, long uid, long gid);

cJSON *fault_stats(const char *sock);
double fault_num(const cJSON *o, const char *obj, const char *key);
int fault_clients(const char *sock); /* attached clients, -1 on no answer */
/* Poll stats until daemon counter `key` >= want (deadline ms); its value. */
double fault_wait_counter(const char *sock, const char *key, double want, int timeout_ms);

struct fault_engine {
	unsigned long long windows, hits, misses, verified, mismatches, torn, attaches, posted, dropped, late;
};
int fault_parse_engine(const char *path, struct fault_engine *r);
/* Wait until the file at path contains needle (deadline ms).  0 or -1. */
int fault_wait_text(const char *path, const char *needle, int timeout_ms);

/* The last `max` bytes of the file at path on stderr, headed by `what`:
 * a failing test shows the daemon's log and the engines' output (the test's
 * directory is gone with the CI machine). */
void fault_print_tail(const char *what, const char *path, size_t max);

/* utime + stime of pid in seconds, RSS in KiB. */
double fault_cpu_s(pid_t pid);
long fault_rss_kb(pid_t pid);
/* getenv as a number, or def. */
unsigned long fault_env(const char *name, unsigned long def);
/* Wall-clock claims (a drop within 100 ms, an attach within 1 s) hold on a
 * quiet machine without sanitizers; on a loaded CI box the tests check them
 * by their mechanism (the counters that say how it happened) under a
 * generous bound, unless FS_TEST_TIMING=1 asks for the claim itself. */
int fault_timing_claims(void);

#endif /* FAULT_UTIL_H */
