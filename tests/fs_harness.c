/* SPDX-License-Identifier: Apache-2.0 */
#include "fs_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#ifndef FS_DAEMON_BIN
#error "FS_DAEMON_BIN must name the foresightd binary"
#endif

const char *fsh_daemon_bin(void)
{
	const char *e = getenv("FS_TEST_DAEMON");
	return e && *e ? e : FS_DAEMON_BIN;
}

uint64_t fsh_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

char *const *fsh_argv(const char *a0, ...)
{
	static _Thread_local char *v[32];
	va_list ap;
	va_start(ap, a0);
	int n = 0;
	v[n++] = (char *)a0;
	const char *s;
	while ((s = va_arg(ap, const char *)) != NULL && n < 31)
		v[n++] = (char *)s;
	v[n] = NULL;
	va_end(ap);
	return v;
}

pid_t fsh_spawn(char *const argv[], const char *out_path)
{
	pid_t pid = fork();
	if (pid == 0) {
		/* A failed test exits at once: take its processes with it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (out_path) {
			int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd >= 0) {
				dup2(fd, 1);
				close(fd);
			}
		}
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

int fsh_wait(pid_t pid, int timeout_ms)
{
	uint64_t end = fsh_now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		int st;
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (r < 0)
			return -1;
		if (fsh_now_ms() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		usleep(2000);
	}
}

int fsh_run(char *const argv[], char *buf, size_t len, int timeout_ms)
{
	char tmpl[] = "/tmp/fsh-out-XXXXXX";
	int fd = mkstemp(tmpl);
	if (fd < 0)
		return -1;
	close(fd);
	pid_t pid = fsh_spawn(argv, tmpl);
	int st = pid > 0 ? fsh_wait(pid, timeout_ms) : -1;
	if (buf) {
		long n = fsh_read_file(tmpl, buf, len);
		if (n < 0)
			buf[0] = 0;
	}
	unlink(tmpl);
	return st;
}

long fsh_read_file(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, len - 1, f);
	buf[n] = 0;
	fclose(f);
	return (long)n;
}

int fsh_request(const char *sock, const char *json, char *buf, size_t len)
{
	nng_socket s;
	char url[160];
	snprintf(url, sizeof(url), "ipc://%s", sock);
	if (nng_req0_open(&s) != 0)
		return -1;
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 3000);
	int rc = -1;
	char *rep = NULL;
	size_t rl = 0;
	if (nng_dial(s, url, NULL, 0) == 0 && nng_send(s, (void *)json, strlen(json), 0) == 0 &&
	    nng_recv(s, &rep, &rl, NNG_FLAG_ALLOC) == 0) {
		size_t n = rl < len - 1 ? rl : len - 1;
		memcpy(buf, rep, n);
		buf[n] = 0;
		nng_free(rep, rl);
		rc = 0;
	}
	nng_close(s);
	return rc;
}

static int daemon_launch(struct fsh_daemon *d, const char *const *extra, int append)
{
	char *argv[64];
	int n = 0;
	argv[n++] = (char *)fsh_daemon_bin();
	argv[n++] = (char *)"--socket";
	argv[n++] = d->sock;
	for (int i = 0; extra && extra[i] && n < 62; i++)
		argv[n++] = (char *)extra[i];
	argv[n] = NULL;
	d->pid = fork();
	if (d->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(d->log, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0644);
		if (fd >= 0) {
			dup2(fd, 2);
			close(fd);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	/* A TSan daemon ($FS_TEST_DAEMON) on a loaded machine starts slower. */
	uint64_t end = fsh_now_ms() + (getenv("FS_TEST_DAEMON") ? 30000 : 10000);
	char buf[512];
	while (fsh_now_ms() < end) {
		/* Ready: ping answers ok (EAGAIN while the arena loads). */
		if (fsh_request(d->sock, "{\"verb\":\"ping\",\"proto\":1}", buf, sizeof(buf)) == 0 &&
		    !strstr(buf, "EAGAIN"))
			return 0;
		int st;
		if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
			d->pid = 0;
			return -1;
		}
		usleep(10000);
	}
	kill(d->pid, SIGKILL);
	waitpid(d->pid, NULL, 0);
	d->pid = 0;
	return -1;
}

int fsh_daemon_start(struct fsh_daemon *d, const char *const *extra)
{
	snprintf(d->dir, sizeof(d->dir), "/tmp/fsh-XXXXXX");
	if (!mkdtemp(d->dir))
		return -1;
	snprintf(d->sock, sizeof(d->sock), "%s/control.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/foresightd.log", d->dir);
	return daemon_launch(d, extra, 0);
}

int fsh_daemon_restart(struct fsh_daemon *d, const char *const *extra)
{
	return daemon_launch(d, extra, 1);
}

int fsh_daemon_stop(struct fsh_daemon *d)
{
	int rc = -1;
	if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		rc = fsh_wait(d->pid, 10000);
		d->pid = 0;
	}
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->dir);
	if (getenv("FSH_KEEP") == NULL && d->dir[0])
		(void)!system(cmd);
	return rc;
}
