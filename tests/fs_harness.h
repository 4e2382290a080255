/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_harness.h: start and stop real processes for integration tests: a
 * foresightd on a private socket, engines, fsctl.  Everything is bounded in
 * time: a test that would hang fails instead.
 */
#ifndef FS_HARNESS_H
#define FS_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fsh_daemon {
	pid_t pid;
	char dir[64];   /* private temp dir */
	char sock[128]; /* control socket */
	char log[128];  /* its stderr */
};

/* The foresightd these tests run: $FS_TEST_DAEMON when set (tools/test.sh's
 * tsan stage points it at the TSan build's daemon, so its hot and loop
 * threads run under TSan while Criterion, which cannot start under TSan,
 * drives the test from the normal build), else the build's own. */
const char *fsh_daemon_bin(void);
/* Start foresightd with extra args (NULL-terminated), wait until it answers
 * ping (at most 10 s).  0 or -1. */
int fsh_daemon_start(struct fsh_daemon *d, const char *const *extra);
/* Start another foresightd on the same socket and log (after a stop or a
 * kill of the previous one).  0 or -1. */
int fsh_daemon_restart(struct fsh_daemon *d, const char *const *extra);
/* SIGTERM, wait (at most 10 s, then SIGKILL).  Returns its exit status
 * (0..255), 128+signal, or -1. */
int fsh_daemon_stop(struct fsh_daemon *d);
/* Spawn argv (execv), stdout to out_path if not NULL.  Returns pid. */
pid_t fsh_spawn(char *const argv[], const char *out_path);
/* Wait for pid at most timeout_ms; exit status, 128+signal, or -1 on timeout
 * (the process is then killed). */
int fsh_wait(pid_t pid, int timeout_ms);
/* Run a command to completion, capturing stdout into buf.  Exit status or -1. */
int fsh_run(char *const argv[], char *buf, size_t len, int timeout_ms);
/* Control request (JSON text), reply text into buf.  0 or -1. */
int fsh_request(const char *sock, const char *json, char *buf, size_t len);
/* Read a whole (small) file into buf; returns bytes or -1. */
long fsh_read_file(const char *path, char *buf, size_t len);
uint64_t fsh_now_ms(void);
/* A NULL-terminated argv from the arguments (NULL ends them; at most 31):
 * one static array per thread, valid until the next call. */
char *const *fsh_argv(const char *a0, ...);

#endif /* FS_HARNESS_H */
