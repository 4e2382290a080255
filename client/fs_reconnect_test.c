/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The library finds a restarted foresightd even after a connection was
 * reset in its handshake.  nng 1.5.2's dialer stops redialing for good
 * when a connection attempt is reset during the SP handshake (the peer
 * closes it before reading the header): a foresightd killed -9 while the
 * dialer's redial sat in its listener's backlog does that.  An engine then
 * never attached again ("hello: control request failed: Timed out" every
 * second, no connect() at all) while the next foresightd answered every
 * other process; iso_test's restart test hit it about one run in twenty
 * under load.  Here a plain socket at the control path plays the dying
 * daemon deterministically: it accepts the library's redials and closes
 * them unread, then the next foresightd starts there.  The dialers the
 * library replaced on the way are counted and exported: 0 on a plain
 * attach, more after this one, in fs_client_redials() and in the daemon's
 * row for the client (`redials`, the stats reply, fsctl, /metrics).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "foresight/foresight.h"
#include "fs_harness.h"

#define SMALL \
	"--layers", "2", "--experts", "8", "--experts-used", "2", "--expert-bytes", "4096", "--slots", "8"

static int wait_attached(fs_client *c, int want, int timeout_ms)
{
	uint64_t end = fsh_now_ms() + (uint64_t)timeout_ms;
	while (fs_client_attached(c) != want) {
		if (fsh_now_ms() > end)
			return -1;
		usleep(10000);
	}
	return 0;
}

/* The daemon's `redials` counter of the client row named `name`, from the
 * stats reply; -1 when no such row (or no reply). */
static double stats_redials(fs_client *c, const char *name)
{
	static char buf[1 << 16];
	int n = fs_client_stats_json(c, buf, sizeof(buf));
	if (n < 0 || (size_t)n >= sizeof(buf))
		return -1;
	cJSON *o = cJSON_Parse(buf);
	double v = -1;
	const cJSON *row;
	cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(o, "clients"))
	{
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(row, "name");
		const cJSON *r = cJSON_GetObjectItemCaseSensitive(row, "redials");
		if (cJSON_IsString(nm) && strcmp(nm->valuestring, name) == 0 && cJSON_IsNumber(r))
			v = r->valuedouble;
	}
	cJSON_Delete(o);
	return v;
}

/* Listen at path; accept what comes for about ms and close each at once,
 * its handshake unread (the peer's read sees ECONNRESET).  The number
 * accepted. */
static int reset_connections(const char *path, int ms)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.107s", path);
	unlink(path);
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(l, 0);
	cr_assert_eq(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind %s: %s", path, strerror(errno));
	cr_assert_eq(listen(l, 16), 0);
	int n = 0;
	uint64_t end = fsh_now_ms() + (uint64_t)ms;
	while (fsh_now_ms() < end) {
		struct pollfd p = {.fd = l, .events = POLLIN};
		if (poll(&p, 1, 20) <= 0)
			continue;
		int c = accept(l, NULL, NULL);
		if (c >= 0) {
			close(c);
			n++;
		}
	}
	close(l);
	unlink(path);
	return n;
}

Test(fs_reconnect, a_handshake_reset_does_not_stop_the_reattach, .timeout = 90)
{
	struct fsh_daemon d;
	const char *extra[] = {SMALL, NULL};
	cr_assert_eq(fsh_daemon_start(&d, extra), 0, "foresightd did not start");
	fs_client *c = NULL;
	struct fs_client_opts o = {.socket_path = d.sock, .name = "fs_reconnect_test"};
	int r = fs_client_open(&c, &o);
	cr_assert_eq(r, 0, "open: %s (%s)", fs_strerror(r), fs_open_error());
	cr_assert_eq(fs_client_attach_count(c), 1);
	/* A plain attach replaced no dialer, and the daemon's row says so
	 * (after a pass has read the client's header: 10 ms at most). */
	usleep(200000);
	cr_expect_eq(fs_client_redials(c), 0u);
	cr_expect_eq(stats_redials(c, "fs_reconnect_test"), 0.0,
		     "the daemon's row: redials of a plain attach");

	kill(d.pid, SIGKILL);
	cr_assert_eq(waitpid(d.pid, NULL, 0), d.pid);
	d.pid = 0;
	cr_assert_eq(wait_attached(c, 0, 20000), 0, "the library did not see its daemon die");
	/* Its redials land on a socket that resets them, for 1.5 s: at least
	 * one does (it redials every 50-200 ms while no daemon listens). */
	int resets = reset_connections(d.sock, 1500);
	cr_assert_geq(resets, 1, "the library did not redial the control socket within 1.5 s");

	cr_assert_eq(fsh_daemon_restart(&d, extra), 0, "foresightd did not start again");
	/* Normally back within a second; a loaded 2-core machine gets 30 s. */
	uint64_t t0 = fsh_now_ms();
	int back = wait_attached(c, 1, 30000);
	static char log[65536];
	long n = back != 0 ? fsh_read_file(d.log, log, sizeof(log)) : 0;
	cr_assert_eq(back, 0,
		     "the library did not re-attach within 30 s after %d handshake resets (%s); the daemon "
		     "log's tail:\n%s",
		     resets, fs_client_last_error(c), n > 4096 ? log + n - 4096 : log);
	fprintf(stderr, "fs_reconnect: %d handshake resets, re-attached %llu ms after the restart\n", resets,
		(unsigned long long)(fsh_now_ms() - t0));
	cr_expect_eq(fs_client_attach_count(c), 2);
	/* Every re-attach try that found no connection replaced the dialer
	 * (about two a second while no daemon listened): counted by the
	 * library, and shown in the new daemon's row once the background
	 * thread (100 ms) and a pass (10 ms) carried it over. */
	uint64_t redials = fs_client_redials(c);
	cr_expect_geq(redials, 1u, "no dialer replaced while the daemon was away");
	double shown = -1;
	for (uint64_t end = fsh_now_ms() + 5000; fsh_now_ms() < end; usleep(50000))
		if ((shown = stats_redials(c, "fs_reconnect_test")) >= 1)
			break;
	fprintf(stderr, "fs_reconnect: %llu dialers replaced, the daemon's row shows %.0f\n",
		(unsigned long long)redials, shown);
	cr_expect_geq(shown, 1.0, "the daemon's row does not show the client's redials");
	cr_expect_leq(shown, (double)fs_client_redials(c));
	fs_client_close(c);
	fsh_daemon_stop(&d);
}
