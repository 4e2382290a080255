/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_config.c: one table of settings feeds the command-line flags, the
 * JSON config file keys and --help, so the three can never disagree.
 * Precedence: flag > $FORESIGHT_SOCKET (socket only) > config file > default.
 */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fsd.h"

enum opt_type { OPT_STR, OPT_U32, OPT_U64, OPT_DBL, OPT_MODE, OPT_INT, OPT_FLAG /* u32 0/1, no value */ };

struct opt {
	const char *key; /* config key; the flag is --key with '_' -> '-' */
	enum opt_type type;
	size_t off, size;
	double min, max;
	const char *help;
};

#define O(k, t, field, lo, hi, h)                                                                            \
	{                                                                                                    \
		k, t, offsetof(struct fsd_config, field), sizeof(((struct fsd_config *)0)->field), lo, hi, h \
	}

static const struct opt opts[] = {
	O("socket", OPT_STR, socket_path, 0, 0, "control socket path (default " FS_DEFAULT_SOCKET_PATH ")"),
	O("backend", OPT_STR, backend, 0, 0,
	  "backend: host (stand-in cards in host memory) or cuda (every visible GPU; default host)"),
	O("group", OPT_STR, group, 0, 0, "group whose members may attach (default: none)"),
	O("socket_mode", OPT_MODE, socket_mode, 0, 0777, "permissions of the sockets, octal (default 0660)"),
	O("cards", OPT_U32, cards, 1, FS_MAX_CARDS,
	  "host: stand-in cards (default 2); cuda: use at most this many"),
	O("pool_mib", OPT_U32, pool_mib, 0, 1u << 24, "cuda: slot pool MiB per card (instead of --slots)"),
	O("leave_free_mib", OPT_U32, leave_free_mib, 0, 1u << 24,
	  "cuda: size each pool to leave this many MiB free (instead of --slots)"),
	O("streams", OPT_U32, streams, 1, 8, "cuda: prefetch streams per card (default 2)"),
	O("slots", OPT_U32, slots, 1, 1 << 24, "slots per card (default 128)"),
	O("bus_gbps", OPT_DBL, bus_gbps, 0.01, 10000,
	  "host backend: emulated bus per card, GB/s (default 13.5)"),
	O("model", OPT_STR, model_path, 0, 0, "a GGUF MoE model file to serve (default: a synthetic arena)"),
	O("model_name", OPT_STR, model, 0, 0, "name of the served model (default: the file's general.name)"),
	O("describe", OPT_FLAG, describe, 0, 1, "with --model: print the arena plan as JSON and exit"),
	O("allow_unlocked", OPT_FLAG, allow_unlocked, 0, 1,
	  "serve the --model arena even when it cannot be locked in memory (mlock)"),
	O("layers", OPT_U32, layers, 1, FS_MAX_LAYERS, "synthetic arena: MoE layers (default 16)"),
	O("experts", OPT_U32, experts, 1, FS_MAX_EXPERTS, "synthetic arena: experts per layer (default 64)"),
	O("experts_used", OPT_U32, experts_used, 0, FS_MAX_EXPERTS, "synthetic arena: top-k (default 8)"),
	O("expert_bytes", OPT_U64, expert_bytes, 64, 1ull << 32,
	  "synthetic arena: bytes per expert (default 65536)"),
	O("seed", OPT_U64, seed, 0, 1.8e19, "synthetic arena: byte generator seed (default 1)"),
	O("max_clients", OPT_U32, max_clients, 1, FSD_MAX_CLIENTS,
	  "engines attached at once (default 32, max 64)"),
	O("ring_entries", OPT_U32, ring_entries, FS_RING_MIN_ENTRIES, FS_RING_MAX_ENTRIES,
	  "records per client ring, power of two (default 4096)"),
	O("epoch_bufs", OPT_U32, epoch_bufs, 3, FS_MAX_EPOCH_BUFS, "epoch buffers (default 16)"),
	O("heartbeat_ms", OPT_U32, heartbeat_ms, 10, 60000, "daemon heartbeat period (default 100)"),
	O("liveness_ms", OPT_U32, liveness_ms, 50, 600000,
	  "a client whose heartbeat is older is dropped (default 5000)"),
	O("hold_timeout_ms", OPT_U32, hold_timeout_ms, 10, 3600000,
	  "an epoch held longer is revoked, the client dropped (default 10000)"),
	O("publish_us", OPT_U32, publish_us, 0, 1000000, "minimum interval between epochs (default 200)"),
	O("spin_us", OPT_U32, spin_us, 0, 10000000,
	  "hot thread: spin this long with nothing to do before sleeping (default 50; more: lower latency, "
	  "a busy core)"),
	O("max_inflight", OPT_U32, max_inflight, 1, 4096, "copies in flight per card (default 32)"),
	O("log_level", OPT_INT, log_level, 0, 7, "3 errors .. 7 debug (default 6)"),
	O("tiers", OPT_U32, tiers, 0, 1,
	  "residency tiers and the copy scheduler: 1 on, 0 the untiered policy (default 1)"),
	O("recency_slots", OPT_INT, recency_slots, -1, 1 << 24,
	  "recency tier slots per layer, -1 auto: a 16th of a layer's share (default -1)"),
	O("predicted_slots", OPT_INT, predicted_slots, -1, 1 << 24,
	  "predicted tier slots per layer, -1 auto: a 16th of the share, 1..4 (default -1)"),
	O("spare_slots", OPT_INT, spare_slots, -1, 1 << 24,
	  "free slots per card outside the tiers, -1 auto: one per layer, at most 1 % of slots (default -1)"),
	O("bus_share_pct", OPT_U32, bus_share_pct, 1, 100,
	  "share of the bus the copy scheduler plans with; the rest is the engines' (default 80)"),
	O("freq_decay", OPT_DBL, freq_decay, 0.000001, 1,
	  "static tier: decay of use counts per token (default 0.95)"),
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

void fsd_config_defaults(struct fsd_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->socket_path, sizeof(c->socket_path), "%s", FS_DEFAULT_SOCKET_PATH);
	snprintf(c->backend, sizeof(c->backend), "host");
	snprintf(c->model, sizeof(c->model), "synthetic");
	c->socket_mode = 0660;
	c->cards = 2;
	c->slots = 128;
	c->bus_gbps = 13.5;
	c->layers = 16;
	c->experts = 64;
	c->experts_used = 8;
	c->expert_bytes = 65536;
	c->seed = 1;
	c->max_clients = 32;
	c->ring_entries = 4096;
	c->epoch_bufs = 16;
	c->heartbeat_ms = 100;
	c->liveness_ms = 5000;
	c->hold_timeout_ms = 10000;
	c->publish_us = 200;
	c->max_inflight = 32;
	c->spin_us = 50;
	c->streams = 2;
	c->log_level = FSD_INFO;
	/* Tiers on: the daemon runs the policies fs-replay measured.  The sizes
	 * and the decay default to the core's (fsr_core.c gives the reasons);
	 * the copy scheduler leaves a fifth of the bus to the engines' own
	 * demand copies, which the discussion found must not be starved. */
	c->tiers = 1;
	c->recency_slots = c->predicted_slots = c->spare_slots = -1;
	c->bus_share_pct = 80;
	c->freq_decay = 0.95;
}

/* Set one option from text.  0, or -1 with a message naming `where`. */
static int opt_set(struct fsd_config *c, const struct opt *o, const char *val, const char *where)
{
	char *p = (char *)c + o->off;
	char *end;
	errno = 0;
	switch (o->type) {
	case OPT_STR:
		if (strlen(val) >= o->size) {
			fprintf(stderr, "foresightd: %s: value too long (max %zu)\n", where, o->size - 1);
			return -1;
		}
		strcpy(p, val);
		return 0;
	case OPT_FLAG:
		if (strcmp(val, "1") && strcmp(val, "0") && strcmp(val, "true") && strcmp(val, "false")) {
			fprintf(stderr, "foresightd: %s: '%s' is not true or false\n", where, val);
			return -1;
		}
		*(uint32_t *)p = val[0] == '1' || val[0] == 't';
		return 0;
	case OPT_MODE: {
		unsigned long v = strtoul(val, &end, 8);
		if (errno || *end || end == val || v > 0777) {
			fprintf(stderr, "foresightd: %s: '%s' is not an octal mode\n", where, val);
			return -1;
		}
		*(unsigned *)p = (unsigned)v;
		return 0;
	}
	default:
		break;
	}
	double v = strtod(val, &end);
	if (errno || *end || end == val || v < o->min || v > o->max) {
		fprintf(stderr, "foresightd: %s: '%s' is not a number in %g..%g\n", where, val, o->min,
			o->max);
		return -1;
	}
	if (o->type != OPT_DBL && v != (o->type == OPT_INT ? (double)(int64_t)v : (double)(uint64_t)v)) {
		fprintf(stderr, "foresightd: %s: '%s' must be a whole number\n", where, val);
		return -1;
	}
	if (strcmp(o->key, "cards") == 0)
		c->cards_set = 1;
	switch (o->type) {
	case OPT_U32:
		*(uint32_t *)p = (uint32_t)v;
		break;
	case OPT_U64:
		*(uint64_t *)p = (uint64_t)v;
		break;
	case OPT_INT:
		*(int *)p = (int)v;
		break;
	default:
		/* p points at the double member the table names (offsetof) */
		// cppcheck-suppress invalidPointerCast
		*(double *)p = v;
		break;
	}
	return 0;
}

static int load_file(struct fsd_config *c, const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		fprintf(stderr, "foresightd: config %s: %s\n", path, strerror(errno));
		return -1;
	}
	char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (len + 4096 > cap) {
			cap = cap ? cap * 2 : 8192;
			if (cap > (1u << 20)) {
				fprintf(stderr, "foresightd: config %s: larger than 1 MiB\n", path);
				free(buf);
				fclose(f);
				return -1;
			}
			char *nb = realloc(buf, cap);
			if (!nb) {
				fprintf(stderr, "foresightd: config %s: out of memory\n", path);
				free(buf);
				fclose(f);
				return -1;
			}
			buf = nb;
		}
		size_t n = fread(buf + len, 1, cap - len, f);
		if (n == 0)
			break;
		len += n;
	}
	fclose(f);
	cJSON *root = cJSON_ParseWithLength(buf, len);
	free(buf);
	if (!cJSON_IsObject(root)) {
		fprintf(stderr, "foresightd: config %s: not a JSON object\n", path);
		cJSON_Delete(root);
		return -1;
	}
	int rc = 0;
	for (cJSON *it = root->child; it && rc == 0; it = it->next) {
		const struct opt *o = NULL;
		for (size_t i = 0; i < NOPTS; i++)
			if (strcmp(opts[i].key, it->string) == 0)
				o = &opts[i];
		char where[128];
		snprintf(where, sizeof(where), "config %s: key '%s'", path, it->string);
		if (!o) {
			fprintf(stderr, "foresightd: %s: unknown key\n", where);
			rc = -1;
		} else if (cJSON_IsString(it)) {
			rc = opt_set(c, o, it->valuestring, where);
		} else if (cJSON_IsBool(it) && o->type == OPT_FLAG) {
			rc = opt_set(c, o, cJSON_IsTrue(it) ? "1" : "0", where);
		} else if (cJSON_IsNumber(it) && o->type != OPT_STR) {
			/* socket_mode 660 reads as octal, like the string "0660" */
			char num[64];
			snprintf(num, sizeof(num), "%.17g", it->valuedouble);
			rc = opt_set(c, o, num, where);
		} else {
			fprintf(stderr, "foresightd: %s: wrong type\n", where);
			rc = -1;
		}
	}
	cJSON_Delete(root);
	return rc;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: foresightd [--config FILE] [--OPTION VALUE ...]\n"
		     "       foresightd --check-config [FILE] [--OPTION VALUE ...]\n"
		     "       foresightd --help | --version\n\n"
		     "Serves a shared MoE expert tier to inference engines.  Runs in the\n"
		     "foreground until SIGTERM or `fsctl shutdown`.\n\n"
		     "  --config FILE   JSON object whose keys are the options below\n"
		     "  --check-config [FILE]  validate the settings (FILE: as --config), print\n"
		     "                  OK and exit 0, or name the bad key and exit 2\n");
	for (size_t i = 0; i < NOPTS; i++) {
		char flag[40];
		snprintf(flag, sizeof(flag), "--%s", opts[i].key);
		for (char *p = flag; *p; p++)
			if (*p == '_')
				*p = '-';
		fprintf(out, "  %-18s %s\n", flag, opts[i].help);
	}
	fprintf(out, "\nThe socket is, in order: --socket, $FORESIGHT_SOCKET, the config key, %s.\n",
		FS_DEFAULT_SOCKET_PATH);
}

int fsd_config_parse(struct fsd_config *c, int argc, char **argv)
{
	static char names[NOPTS][40];
	struct option lo[NOPTS + 5];
	size_t n = 0;
	for (size_t i = 0; i < NOPTS; i++) {
		snprintf(names[i], sizeof(names[i]), "%s", opts[i].key);
		for (char *p = names[i]; *p; p++)
			if (*p == '_')
				*p = '-';
		lo[n++] = (struct option){names[i],
					  opts[i].type == OPT_FLAG ? no_argument : required_argument, NULL,
					  1000 + (int)i};
	}
	lo[n++] = (struct option){"config", required_argument, NULL, 'c'};
	lo[n++] = (struct option){"help", no_argument, NULL, 'h'};
	lo[n++] = (struct option){"version", no_argument, NULL, 'V'};
	lo[n++] = (struct option){"check-config", optional_argument, NULL, 'k'};
	lo[n] = (struct option){0};

	/* `--check-config FILE` is `--check-config --config FILE`. */
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--check-config") == 0 && i + 1 < argc && argv[i + 1][0] != '-') {
			c->check_config = 1;
			argv[i] = (char *)"--config";
		}
	}
	/* Pass 1: --config, --check-config, --help, --version. */
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
		}
	}
	if (cfgfile && load_file(c, cfgfile) < 0)
		return -1;
	const char *env = getenv("FORESIGHT_SOCKET");
	if (env && *env) {
		if (strlen(env) >= sizeof(c->socket_path)) {
			fprintf(stderr, "foresightd: FORESIGHT_SOCKET too long\n");
			return -1;
		}
		strcpy(c->socket_path, env);
	}
	/* Pass 2: flags override. */
	opterr = 1;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (ch >= 1000) {
			char where[64];
			snprintf(where, sizeof(where), "--%s", names[ch - 1000]);
			if (opt_set(c, &opts[ch - 1000], optarg ? optarg : "1", where) < 0)
				return -1;
		} else if (ch == '?') {
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "foresightd: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
#ifdef FSD_HAVE_CUDA
	if (strcmp(c->backend, "host") != 0 && strcmp(c->backend, "cuda") != 0) {
		fprintf(stderr, "foresightd: --backend %s: unknown (backends: host, cuda)\n", c->backend);
		return -1;
	}
#else
	if (strcmp(c->backend, "host") != 0) {
		fprintf(stderr,
			"foresightd: --backend %s: not built here (this build has: host; cuda needs nvcc "
			"at build time)\n",
			c->backend);
		return -1;
	}
#endif
	if (c->max_clients > 64) {
		fprintf(stderr, "foresightd: --max-clients: at most 64\n");
		return -1;
	}
	if ((c->ring_entries & (c->ring_entries - 1)) != 0) {
		fprintf(stderr, "foresightd: --ring-entries %u: must be a power of two\n", c->ring_entries);
		return -1;
	}
	if (c->describe && !c->model_path[0]) {
		fprintf(stderr, "foresightd: --describe needs --model FILE\n");
		return -1;
	}
	if (c->experts_used > c->experts) {
		fprintf(stderr, "foresightd: --experts-used %u exceeds --experts %u\n", c->experts_used,
			c->experts);
		return -1;
	}
	if ((uint64_t)c->layers * c->experts * c->cards > (1ull << 26)) {
		fprintf(stderr, "foresightd: cards x layers x experts too large for the epoch tables\n");
		return -1;
	}
	if (snprintf(c->fd_socket_path, sizeof(c->fd_socket_path), "%s.fd", c->socket_path) >=
		    (int)sizeof(c->fd_socket_path) ||
	    strlen(c->fd_socket_path) >= 108) {
		fprintf(stderr, "foresightd: socket path too long (%zu bytes, max 104)\n",
			strlen(c->socket_path));
		return -1;
	}
	fsd_log_level = c->log_level;
	return 0;
}

void fsd_config_residency(const struct fsd_config *c, struct fsr_config *rc)
{
	if (!c->tiers)
		return;
	fsr_config_tiers(rc);
	rc->recency_slots = c->recency_slots < 0 ? FSR_AUTO : (uint32_t)c->recency_slots;
	rc->predicted_slots = c->predicted_slots < 0 ? FSR_AUTO : (uint32_t)c->predicted_slots;
	rc->spare_slots = c->spare_slots < 0 ? FSR_AUTO : (uint32_t)c->spare_slots;
	rc->bus_share_pct = c->bus_share_pct;
	rc->freq_decay = (float)c->freq_decay;
	rc->bus_gbps = c->bus_gbps; /* the host backend's emulated link; a card's x8 Gen4 by default */
}
