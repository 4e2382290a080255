/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_config.c: foresightd's command line over the option table
 * (fsd_options.c: the rows, their checks, the config file, the help
 * lines), the checks across options, --help and the reload (SIGHUP).
 * Precedence: flag > $FORESIGHT_SOCKET (socket only) > config file > default.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsd_backend.h"
#include "fsd_loop.h"

static void usage(FILE *out)
{
	fprintf(out, "usage: foresightd [--config FILE] [--OPTION VALUE ...]\n"
		     "       foresightd --check-config [FILE] [--OPTION VALUE ...]\n"
		     "       foresightd --help | --version | --config-reference[=json|flags]\n\n"
		     "Serves a shared MoE expert tier to inference engines.  Runs in the\n"
		     "foreground until SIGTERM or `fsctl shutdown`; SIGHUP re-reads the config.\n\n"
		     "  --config FILE   JSON object whose keys are the options below\n"
		     "  --check-config [FILE]  validate the settings (FILE: as --config), print\n"
		     "                  OK and exit 0, or name the bad key and exit 2\n"
		     "  --config-reference[=json|flags]  print every config key (json) or option\n"
		     "                  (flags) with its type and default, as scdoc(5) text (the\n"
		     "                  man pages foresightd.json(5) and foresightd(8) are built from it)\n");
	struct fsd_config def;
	fsd_config_defaults(&def);
	fsd_opt_help(out, 0, &def);
	fprintf(out, "\nThe socket is, in order: --socket, $FORESIGHT_SOCKET, the config key, %s.\n",
		FS_DEFAULT_SOCKET_PATH);
}

/* Parse the config file and argv over c's contents.  Exits on --help,
 * --version and --config-reference (never during a reload: the first parse
 * exited).  0 or -1 (message printed). */
static int parse(struct fsd_settings *st, struct fsd_config *c)
{
	int argc = st->argc;
	char **argv = st->argv;
	char names[FSD_NOPTS][40];
	struct option lo[FSD_NOPTS + 6];
	size_t n = 0;
	for (size_t i = 0; i < FSD_NOPTS; i++) {
		char flag[42];
		fsd_opt_flag(&fsd_opt_rows[i], flag, sizeof(flag));
		snprintf(names[i], sizeof(names[i]), "%s", flag + 2);
		lo[n++] = (struct option){
			names[i], fsd_opt_rows[i].type == FSD_OPT_FLAG ? no_argument : required_argument,
			NULL, 1000 + (int)i};
	}
	lo[n++] = (struct option){"config", required_argument, NULL, 'c'};
	lo[n++] = (struct option){"help", no_argument, NULL, 'h'};
	lo[n++] = (struct option){"version", no_argument, NULL, 'V'};
	lo[n++] = (struct option){"check-config", optional_argument, NULL, 'k'};
	lo[n++] = (struct option){"config-reference", optional_argument, NULL, 'r'};
	lo[n] = (struct option){0};

	/* `--check-config FILE` is `--check-config --config FILE`. */
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--check-config") == 0 && i + 1 < argc && argv[i + 1][0] != '-') {
			c->check_config = 1;
			argv[i] = (char *)"--config";
		}
	}
	/* Pass 1: --config, --check-config, --help, --version, --config-reference. */
	const char *cfgfile = NULL;
	int ch;
	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (ch == 'c')
			cfgfile = optarg;
		else if (ch == 'k') {
			c->check_config = 1;
			if (optarg)
				cfgfile = optarg;
		} else if (ch == 'h') {
			usage(stdout);
			exit(0);
		} else if (ch == 'V') {
			printf("foresightd %s (protocol %u)\n", FSD_VERSION, FS_PROTO_VERSION);
			exit(0);
		} else if (ch == 'r') {
			exit(fsd_config_reference(optarg));
		}
	}
	st->file = cfgfile;
	memset(st->src.origin, 0, sizeof(st->src.origin));
	if (cfgfile && fsd_config_load(&st->src, c, cfgfile) < 0)
		return -1;
	const char *env = getenv("FORESIGHT_SOCKET");
	if (env && *env) {
		if (strlen(env) >= sizeof(c->socket_path)) {
			fsd_opt_err(&st->src, "FORESIGHT_SOCKET too long\n");
			return -1;
		}
		strcpy(c->socket_path, env);
		fsd_opt_note(&st->src, "socket", "$FORESIGHT_SOCKET");
	}
	/* Pass 2: flags override. */
	opterr = 1;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (ch >= 1000) {
			char where[64];
			snprintf(where, sizeof(where), "--%s", names[ch - 1000]);
			if (fsd_opt_set(&st->src, c, &fsd_opt_rows[ch - 1000], optarg ? optarg : "1", where) <
			    0)
				return -1;
			fsd_opt_note(&st->src, fsd_opt_rows[ch - 1000].key, where);
		} else if (ch == '?') {
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fsd_opt_err(&st->src, "unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	int known;
	if (!fsd_backend_find(c->backend, &known)) {
		char all[64], built[64];
		fsd_backends_list(all, sizeof(all), 0);
		fsd_backends_list(built, sizeof(built), 1);
		if (!known)
			fsd_opt_err(&st->src, "%s: '%s' is not a backend (backends: %s)\n",
				    fsd_opt_origin(&st->src, "backend"), c->backend, all);
		else
			fsd_opt_err(
				&st->src,
				"%s: '%s': not built here (this build has: %s; cuda needs nvcc at build time)\n",
				fsd_opt_origin(&st->src, "backend"), c->backend, built);
		return -1;
	}
	if ((c->ring_entries & (c->ring_entries - 1)) != 0) {
		fsd_opt_err(&st->src, "%s: %u is not a power of two\n",
			    fsd_opt_origin(&st->src, "ring_entries"), c->ring_entries);
		return -1;
	}
	if (c->describe && !c->model_path[0]) {
		fsd_opt_err(&st->src, "--describe needs --model FILE\n");
		return -1;
	}
	if (c->experts_used > c->experts) {
		fsd_opt_err(&st->src, "%s: %u exceeds %s: %u\n", fsd_opt_origin(&st->src, "experts_used"),
			    c->experts_used, fsd_opt_origin(&st->src, "experts"), c->experts);
		return -1;
	}
	if ((uint64_t)c->layers * c->experts * c->cards > (1ull << 26)) {
		fsd_opt_err(&st->src,
			    "%s x %s x %s (%u x %u x %u) is more than the epoch tables hold (%llu)\n",
			    fsd_opt_origin(&st->src, "cards"), fsd_opt_origin(&st->src, "layers"),
			    fsd_opt_origin(&st->src, "experts"), c->cards, c->layers, c->experts, 1ull << 26);
		return -1;
	}
	if (snprintf(c->fd_socket_path, sizeof(c->fd_socket_path), "%s.fd", c->socket_path) >=
		    (int)sizeof(c->fd_socket_path) ||
	    strlen(c->fd_socket_path) >= 108) {
		fsd_opt_err(&st->src, "%s: the path is too long (%zu bytes, at most 104)\n",
			    fsd_opt_origin(&st->src, "socket"), strlen(c->socket_path));
		return -1;
	}
	if (c->metrics_listen[0]) {
		char url[128], err[256];
		if (fsd_metrics_url(c->metrics_listen, (int)c->metrics_allow_remote, url, sizeof(url), err,
				    sizeof(err)) < 0) {
			fsd_opt_err(&st->src, "%s: %s\n", fsd_opt_origin(&st->src, "metrics_listen"), err);
			return -1;
		}
	}
	return 0;
}

int fsd_config_parse(struct fsd_settings *st, struct fsd_config *c, int argc, char **argv)
{
	fsd_opt_src_init(&st->src, "foresightd");
	st->argc = argc;
	st->argv = argv;
	if (parse(st, c) < 0)
		return -1;
	st->parsed = *c;
	return 0;
}

static void append(char *dst, size_t len, const char *s)
{
	size_t n = strlen(dst);
	if (n + 1 < len)
		snprintf(dst + n, len - n, "%s%s", n ? ", " : "", s);
}

int fsd_config_reload(struct fsd *d)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	char msg[96];
	snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
		 (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000u);
	fsd_notify(msg);

	struct fsd_settings *st = &d->settings;
	struct fsd_config *parsed = &st->parsed;
	const char *file = st->file ? st->file : "(no --config file)";
	struct fsd_config *n = malloc(sizeof(*n));
	int rc = -1;
	if (!n) {
		fsd_log(FSD_ERR, "reload: out of memory");
		goto out;
	}
	fsd_config_defaults(n);
	st->src.reloading = 1;
	rc = parse(st, n);
	st->src.reloading = 0;
	if (rc < 0) {
		fsd_log(FSD_ERR, "reload: %s rejected, nothing changed: the running settings stay", file);
		goto out;
	}
	/* The reload's lines show under the old level or the new one,
	 * whichever is more verbose: lowering the level must not hide them. */
	int old_level = __atomic_load_n(&d->cfg.log_level, __ATOMIC_RELAXED), level = n->log_level;
	int verbose = level > old_level ? level : old_level;
	__atomic_store_n(&d->cfg.log_level, verbose, __ATOMIC_RELAXED);
	/* The endpoint first: it can fail (address in use), and then its two
	 * keys keep their running values and are not reported as applied. */
	if (strcmp(n->metrics_listen, parsed->metrics_listen) != 0 &&
	    fsd_metrics_start(d, n->metrics_listen, (int)n->metrics_allow_remote) < 0) {
		fsd_log(FSD_ERR, "reload: metrics_listen %s could not be served: kept %s",
			n->metrics_listen[0] ? n->metrics_listen : "(off)",
			parsed->metrics_listen[0] ? parsed->metrics_listen : "(off)");
		memcpy(n->metrics_listen, parsed->metrics_listen, sizeof(n->metrics_listen));
		n->metrics_allow_remote = parsed->metrics_allow_remote;
	}
	char applied[1024] = "", restart[1024] = "";
	for (size_t i = 0; i < FSD_NOPTS; i++) {
		const struct fsd_opt *o = &fsd_opt_rows[i];
		char *was_p = (char *)parsed + o->off, *cur = (char *)&d->cfg + o->off;
		const char *nv = (const char *)n + o->off;
		if (memcmp(was_p, nv, o->size) == 0)
			continue;
		if (!(o->flags & FSD_RELOAD) || (o->type != FSD_OPT_STR && o->size != sizeof(uint32_t))) {
			append(restart, sizeof(restart), o->key);
			continue;
		}
		char was[96], now[96], item[256];
		fsd_opt_format(o, parsed, was, sizeof(was));
		fsd_opt_format(o, n, now, sizeof(now));
		snprintf(item, sizeof(item), "%s %s -> %s", o->key, was, now);
		append(applied, sizeof(applied), item);
		memcpy(was_p, nv, o->size);
		if (o->type == FSD_OPT_STR) {
			memcpy(cur, nv, o->size); /* read by the loop thread only */
		} else {
			/* The hot thread reads these with relaxed atomic loads. */
			uint32_t v;
			_Static_assert(sizeof(int) == sizeof(uint32_t), "4-byte settings");
			memcpy(&v, nv, sizeof(v));
			__atomic_store_n((uint32_t *)(void *)cur, v, __ATOMIC_RELAXED);
		}
	}
	/* The loop stored the new log_level: the lines below still show
	 * under the more verbose of the two. */
	__atomic_store_n(&d->cfg.log_level, verbose, __ATOMIC_RELAXED);
	fsd_log(FSD_INFO, "reload: %s: %s%s", file, applied[0] ? "applied " : "no reloadable setting changed",
		applied);
	if (restart[0])
		fsd_log(FSD_WARN,
			"reload: changed, but only a restart applies them (still running the old values): %s",
			restart);
	__atomic_store_n(&d->cfg.log_level, level, __ATOMIC_RELAXED);
out:
	free(n);
	fsd_notify("READY=1");
	return rc < 0 ? -1 : 0;
}
