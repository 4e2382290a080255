/* SPDX-License-Identifier: Apache-2.0 */
/* fsctl: command-line control of foresightd over its control socket. */
#include <stdlib.h>
#include <string.h>

#include "foresight/foresight.h" /* FS_DEFAULT_SOCKET */
#include "fsctl.h"

static const char main_help[] =
	"usage: fsctl [--socket PATH] [--timeout MS] COMMAND [OPTIONS]\n"
	"\n"
	"Commands:\n"
	"  ping       is foresightd running? (version, pid, uptime; --json)\n"
	"  top        one screen of rates per card, client and worst layer (like top)\n"
	"  stats      counters: totals, cards, layers, clients (--json, --watch)\n"
	"  clients    the attached engines (--json)\n"
	"  counters   what every counter means (no daemon needed)\n"
	"  profile    save FILE | load FILE: the static tier's use counts\n"
	"  card       down N: take card N out of the tier until a restart (admin)\n"
	"  shutdown   stop foresightd (admin)\n"
	"  help       this text; 'fsctl COMMAND --help' for a command's options\n"
	"\n"
	"Options:\n"
	"  --socket PATH  control socket (else $FORESIGHT_SOCKET, else " FS_DEFAULT_SOCKET ")\n"
	"  --timeout MS   how long to wait for each reply (default 3000)\n"
	"\n"
	"Exit status: 0 ok, 1 foresightd not running or not answering, 2 usage,\n"
	"3 refused (by foresightd, or the socket's permissions deny this user).\n";

static const struct {
	const char *name;
	int (*run)(const struct fsctl *g, int argc, char **argv);
} commands[] = {
	{"ping", fsctl_cmd_ping}, {"stats", fsctl_cmd_stats},       {"clients", fsctl_cmd_clients},
	{"top", fsctl_cmd_top},   {"counters", fsctl_cmd_counters}, {"profile", fsctl_cmd_profile},
	{"card", fsctl_cmd_card}, {"shutdown", fsctl_cmd_shutdown},
};

static const char *default_socket(void)
{
	const char *env = getenv("FORESIGHT_SOCKET");
	return env && *env ? env : FS_DEFAULT_SOCKET;
}

int main(int argc, char **argv)
{
	struct fsctl g = {.socket = NULL, .timeout_ms = FSCTL_TIMEOUT_MS};
	/* Global options may come before or after the command; everything
	 * else goes to the command, its name first. */
	char **rest = calloc((size_t)argc + 1, sizeof(*rest));
	int nrest = 0;
	if (!rest)
		return FSCTL_DOWN;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--socket") == 0 && i + 1 < argc) {
			g.socket = argv[++i];
		} else if (strncmp(a, "--socket=", 9) == 0) {
			g.socket = a + 9;
		} else if (strcmp(a, "--timeout") == 0 && i + 1 < argc) {
			char *end;
			long ms = strtol(argv[++i], &end, 10);
			if (*end || ms < 1 || ms > 3600000) {
				fprintf(stderr, "fsctl: --timeout '%s': give milliseconds, 1 to 3600000\n",
					argv[i]);
				free(rest);
				return FSCTL_USAGE;
			}
			g.timeout_ms = (int)ms;
		} else if (nrest == 0 &&
			   (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 || strcmp(a, "help") == 0)) {
			fputs(main_help, stdout);
			free(rest);
			return FSCTL_OK;
		} else if (nrest == 0 && a[0] == '-') {
			fprintf(stderr, "fsctl: unknown or incomplete option '%s' (try 'fsctl --help')\n", a);
			free(rest);
			return FSCTL_USAGE;
		} else {
			rest[nrest++] = argv[i];
		}
	}
	if (!g.socket || !*g.socket)
		g.socket = default_socket();
	int rc = FSCTL_USAGE;
	if (nrest == 0) {
		fputs(main_help, stderr);
	} else {
		size_t i;
		for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
			if (strcmp(rest[0], commands[i].name) == 0)
				break;
		if (i < sizeof(commands) / sizeof(commands[0]))
			rc = commands[i].run(&g, nrest, rest);
		else
			fprintf(stderr, "fsctl: unknown command '%s' (try 'fsctl --help')\n", rest[0]);
	}
	free(rest);
	return rc;
}
