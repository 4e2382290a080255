/* SPDX-License-Identifier: Apache-2.0 */
#include "fault_util.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "fs_fdstore.h"

extern char **environ;

/* One REQ socket kept open per control socket path: a poll loop measures
 * the daemon, not a dial per request. */
static nng_socket stats_sock;
static char stats_path[128];
static int stats_open;

int fd_init(struct fdaemon *d, int with_notify)
{
	memset(d, 0, sizeof(*d));
	d->notify_fd = d->kept_fd = -1;
	snprintf(d->h.dir, sizeof(d->h.dir), "/tmp/fsf-XXXXXX");
	if (!mkdtemp(d->h.dir))
		return -1;
	snprintf(d->h.sock, sizeof(d->h.sock), "%s/control.sock", d->h.dir);
	snprintf(d->h.log, sizeof(d->h.log), "%s/foresightd.log", d->h.dir);
	if (!with_notify)
		return 0;
	snprintf(d->notify, sizeof(d->notify), "%s/notify.sock", d->h.dir);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.107s", d->notify);
	d->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (d->notify_fd < 0 || bind(d->notify_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -1;
	int one = 1; /* systemd checks the sender; so do we, for the log */
	setsockopt(d->notify_fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	return 0;
}

static void stats_close(void)
{
	if (stats_open)
		nng_close(stats_sock);
	stats_open = 0;
}

long fd_start(struct fdaemon *d, const char *const *extra, int pass_kept)
{
	stats_close(); /* a new daemon: the next stats call dials it afresh */
	char *argv[64];
	int n = 0;
	argv[n++] = (char *)fsh_daemon_bin(); /* $FS_TEST_DAEMON: tools/test.sh's tsan stage */
	argv[n++] = (char *)"--socket";
	argv[n++] = d->h.sock;
	argv[n++] = (char *)"--allow-unlocked";
	for (int i = 0; extra && extra[i] && n < 62; i++)
		argv[n++] = (char *)extra[i];
	argv[n] = NULL;
	/* The environment is built before fork: the child only dups and execs. */
	static char env_notify[200], env_fds[] = "LISTEN_FDS=1", env_names[] = "LISTEN_FDNAMES=arena";
	static char env_pid[64];
	char *envp[256];
	int e = 0;
	for (char **p = environ; *p && e < 240; p++)
		if (strncmp(*p, "NOTIFY_SOCKET=", 14) && strncmp(*p, "LISTEN_", 7))
			envp[e++] = *p;
	if (d->notify_fd >= 0) {
		snprintf(env_notify, sizeof(env_notify), "NOTIFY_SOCKET=%s", d->notify);
		envp[e++] = env_notify;
	}
	int give = pass_kept && d->kept_fd >= 0;
	if (give) {
		envp[e++] = env_fds;
		envp[e++] = env_names;
		envp[e++] = env_pid; /* filled in the child: its own pid */
	}
	envp[e] = NULL;
	uint64_t t0 = fsh_now_ms();
	d->h.pid = fork();
	if (d->h.pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(d->h.log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 2);
			close(fd);
		}
		if (give) {
			/* LISTEN_PID: as systemd sets it, this process's pid. */
			char num[24];
			int k = 0;
			for (long v = (long)getpid(); v; v /= 10)
				num[k++] = (char)('0' + v % 10);
			memcpy(env_pid, "LISTEN_PID=", 11);
			for (int i = 0; i < k; i++)
				env_pid[11 + i] = num[k - 1 - i];
			env_pid[11 + k] = 0;
			if (d->kept_fd == 3)
				fcntl(3, F_SETFD, 0);
			else if (dup2(d->kept_fd, 3) < 0)
				_exit(126);
		}
		execve(argv[0], argv, envp);
		_exit(127);
	}
	char buf[512];
	while (fsh_now_ms() < t0 + 10000) {
		if (fsh_request(d->h.sock, "{\"verb\":\"ping\",\"proto\":1}", buf, sizeof(buf)) == 0 &&
		    strstr(buf, "\"ok\":true"))
			return (long)(fsh_now_ms() - t0);
		int st;
		if (waitpid(d->h.pid, &st, WNOHANG) == d->h.pid) {
			d->h.pid = 0;
			return -1;
		}
		usleep(2000);
	}
	return -1;
}

int fd_wait_store(struct fdaemon *d, int timeout_ms)
{
	uint64_t end = fsh_now_ms() + (uint64_t)timeout_ms;
	while (d->notify_fd >= 0) {
		long left = (long)(end - fsh_now_ms());
		struct pollfd p = {.fd = d->notify_fd, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return 0;
		int r = fs_fdstore_recv(d->notify_fd, 0, &d->kept_fd);
		if (r == FS_FDSTORE_NEW || r == FS_FDSTORE_SAME) {
			d->stored++;
			return 1;
		}
	}
	return 0;
}

int fd_kill9(struct fdaemon *d)
{
	if (d->h.pid <= 0)
		return -1;
	kill(d->h.pid, SIGKILL);
	int st;
	pid_t r = waitpid(d->h.pid, &st, 0);
	d->h.pid = 0;
	return r > 0 ? 0 : -1;
}

void fd_stop(struct fdaemon *d)
{
	fsh_daemon_stop(&d->h);
	if (d->notify_fd >= 0)
		close(d->notify_fd);
	if (d->kept_fd >= 0)
		close(d->kept_fd);
	d->notify_fd = d->kept_fd = -1;
}

pid_t fault_spawn(char *const argv[], const char *out, long uid, long gid)
{
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (out) {
			int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0666);
			if (fd >= 0) {
				dup2(fd, 1);
				dup2(fd, 2); /* the library's messages, for a failed test */
				close(fd);
			}
		}
		if (gid >= 0 && (setgroups(0, NULL) < 0 || setgid((gid_t)gid) < 0))
			_exit(125);
		if (uid >= 0 && setuid((uid_t)uid) < 0)
			_exit(125);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

cJSON *fault_stats(const char *sock)
{
	if (stats_open && strcmp(stats_path, sock) != 0) {
		nng_close(stats_sock);
		stats_open = 0;
	}
	if (!stats_open) {
		char url[160];
		snprintf(url, sizeof(url), "ipc://%s", sock);
		if (nng_req0_open(&stats_sock) != 0)
			return NULL;
		nng_socket_set_ms(stats_sock, NNG_OPT_RECVTIMEO, 3000);
		nng_socket_set_ms(stats_sock, NNG_OPT_REQ_RESENDTIME, 3600000);
		nng_socket_set_size(stats_sock, NNG_OPT_RECVMAXSZ, 0);
		if (nng_dial(stats_sock, url, NULL, 0) != 0) {
			nng_close(stats_sock);
			return NULL;
		}
		snprintf(stats_path, sizeof(stats_path), "%s", sock);
		stats_open = 1;
	}
	const char *q = "{\"verb\":\"stats\",\"proto\":1}";
	char *rep = NULL;
	size_t n = 0;
	if (nng_send(stats_sock, (void *)q, strlen(q), 0) != 0 ||
	    nng_recv(stats_sock, &rep, &n, NNG_FLAG_ALLOC) != 0) {
		/* A daemon restarted on the same path: dial again next time. */
		nng_close(stats_sock);
		stats_open = 0;
		return NULL;
	}
	cJSON *j = cJSON_ParseWithLength(rep, n);
	nng_free(rep, n);
	return j;
}

double fault_num(const cJSON *o, const char *obj, const char *key)
{
	const cJSON *x = obj ? cJSON_GetObjectItemCaseSensitive(o, obj) : o;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, key);
	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

int fault_clients(const char *sock)
{
	cJSON *s = fault_stats(sock);
	int n = s ? cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(s, "clients")) : -1;
	cJSON_Delete(s);
	return n;
}

double fault_wait_counter(const char *sock, const char *key, double want, int timeout_ms)
{
	uint64_t end = fsh_now_ms() + (uint64_t)timeout_ms;
	double v = -1;
	do {
		cJSON *s = fault_stats(sock);
		v = s ? fault_num(s, "daemon", key) : -1;
		cJSON_Delete(s);
		if (v >= want)
			break;
		usleep(2000);
	} while (fsh_now_ms() < end);
	return v;
}

int fault_parse_engine(const char *path, struct fault_engine *r)
{
	char buf[4096];
	if (fsh_read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	const char *p = strstr(buf, "windows ");
	memset(r, 0, sizeof(*r));
	return p && sscanf(p,
			   "windows %llu hits %llu misses %llu verified %llu mismatches %llu torn %llu attaches "
			   "%llu posted %llu dropped %llu late %llu",
			   &r->windows, &r->hits, &r->misses, &r->verified, &r->mismatches, &r->torn,
			   &r->attaches, &r->posted, &r->dropped, &r->late) == 10 ?
		       0 :
		       -1;
}

int fault_wait_text(const char *path, const char *needle, int timeout_ms)
{
	uint64_t end = fsh_now_ms() + (uint64_t)timeout_ms;
	static char buf[1 << 16];
	do {
		if (fsh_read_file(path, buf, sizeof(buf)) > 0 && strstr(buf, needle))
			return 0;
		usleep(2000);
	} while (fsh_now_ms() < end);
	return -1;
}

double fault_cpu_s(pid_t pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (fsh_read_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	const char *p = strrchr(buf, ')'); /* the command may hold spaces */
	unsigned long long ut = 0, st = 0;
	/* after ") ": state(3) ... utime is field 14, stime 15 */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

long fault_rss_kb(pid_t pid)
{
	char path[64], buf[8192];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (fsh_read_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	const char *p = strstr(buf, "VmRSS:");
	long kb = -1;
	if (p)
		sscanf(p, "VmRSS: %ld", &kb);
	return kb;
}

unsigned long fault_env(const char *name, unsigned long def)
{
	const char *v = getenv(name);
	return v && *v ? strtoul(v, NULL, 10) : def;
}

int fault_timing_claims(void)
{
	const char *t = getenv("FS_TEST_TIMING");
	return t && strcmp(t, "1") == 0;
}

void fault_print_tail(const char *what, const char *path, size_t max)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "---- %s (%s): cannot open: %s\n", what, path, strerror(errno));
		return;
	}
	long skip = 0;
	if (fseek(f, 0, SEEK_END) == 0) {
		long size = ftell(f);
		skip = size > (long)max ? size - (long)max : 0;
	}
	fseek(f, skip, SEEK_SET);
	fprintf(stderr, "---- %s (%s)%s:\n", what, path, skip ? ", its end" : "");
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		fwrite(buf, 1, n, stderr);
	fprintf(stderr, "---- end of %s\n", what);
	fclose(f);
}
