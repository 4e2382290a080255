/* SPDX-License-Identifier: Apache-2.0 */
/*
 * eb_driver.c: `fs-engine-bench run`, the benchmark.  For one shape (cards,
 * engines, bus budget) and each slot budget (--budget, a list: one config
 * each) it runs every mode side by side on the same routing and the same
 * slot budget, --reps times, the modes interleaved within a repetition
 * (static strata-adapt lru zero recency predict both [perfect], then again):
 *
 *   daemon A (--predicted-slots 0)   the peers and zero (arena only), recency
 *   daemon B (--recency-slots 0)     predict
 *   daemon C (defaults: both tiers)  both
 *   daemon D (defaults)              perfect
 *   daemon E (defaults + --alt-arg)  alt: `both` with other daemon options
 *
 * Every daemon serves the same arena (same shape and seed) with the same
 * slots per card and bus budget (--bus-gbps: the host backend's copy
 * threads, the CUDA backend's per-card landing throttle).  The arena is
 * built once per run: the driver speaks the systemd fd-store protocol
 * (NOTIFY_SOCKET, FDSTORE=1, LISTEN_FDS) and hands the first daemon's
 * arena memfd to every later start (daemon/fsd_arena_keep.c).  The peers
 * and zero use the daemon only for the arena: their slots are their own
 * (eb_pool.c), like an engine today.  In the daemon modes engine 0 loads
 * the same profile into the static tier and waits until its copies have
 * landed; then every engine of the mode is started at once (READY / GO on
 * their stdin).  The tables (eb_report.c): medians over the repetitions
 * with bootstrap intervals, the best peer, every mode against it.
 *
 * Each engine writes one checksum per window; every window's checksum
 * must be equal in every mode and every engine (the engines of a mode
 * decode the same windows in rotated order), else the run fails (exit 1).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include <foresight/router_ahead.h>

#include "eb.h"
#include "fs_fdstore.h"
#include "fs_opt.h"
#include "replay.h"
#include "replay_bound.h"

#define EB_MAX_ENGINES 8
#define EB_MAX_DARGS 16

/* Extra foresightd arguments, in the order given. */
struct eb_dargs {
	const char *v[EB_MAX_DARGS];
	int n;
};

struct drv {
	const char *self, *daemon, *model, *csv, *label, *workdir_opt;
	struct eb_dargs dargs;   /* --daemon-arg: every daemon */
	struct eb_dargs altargs; /* --alt-arg: mode alt's daemon only */
	int pred_charged;        /* --pred-cost charged */
	int dp;                  /* --placement dp */
	int peer_off;            /* --peer off: foresightd --peer off, engines read their own card only */
	int predictor_kernel;
	uint32_t ra_dim, ra_top;
	const char *recall[3]; /* --pred-recall, passed on */
	const char *card_down; /* --card-down C@W, passed to engine 0 of the daemon's modes */
	int nrecall;
	enum eb_device device;
	uint32_t cards, engines, layers, experts, topk, dense_iters, cpu_threads, pred_max, late_wait_us,
		warm;
	uint64_t expert_bytes;
	double budget, scale, bus_gbps, cpu_gbps, dense_us;
	double budgets[8];
	int nbudgets, reps, rep;
	const char *adapt_every, *adapt_decay, *adapt_swaps, *lru_inserts;
	double bound[8]; /* --bound-mplw per budget (-1: none) */
	int nbound;
	/* the fd store: the arena memfd kept across daemon starts */
	int notify_fd, kept_fd;
	char notify[320];
	uint32_t arena_builds, arena_reuses;
	struct eb_route_opts ro;
	int modes[EB_NMODES], nmodes;
	int fault_mode; /* tests: this mode's engine 0 corrupts one checksum (-1: none) */
	unsigned timeout_s;
	int keep;
	/* derived */
	char work[256], sock[300];
	uint64_t slots_card;
};

struct row {
	int ran, ok;
	double tps, hit, mplw, late_seen, late_cpu, late_daemon, bus_gbps, secs, predictions, too_late;
	double landed_late, dropped, layer_windows, peer, down_reads, down_seen, held, held_twice;
	double copies, swaps, pool_bytes;
	double learned;  /* predictions foresightd's learned predictor made (the daemon's count) */
	char recall[96]; /* --predictor kernel: engine 0's measured recall */
	uint64_t uses, windows;
};

static pid_t g_pids[EB_MAX_ENGINES + 1];

/* Modes run unless --modes says otherwise: all but perfect (a bound) and
 * alt (an A/B of daemon options, on request with --alt-arg). */
static int default_mode(int m)
{
	return m != EB_PERFECT && m != EB_ALT;
}

static void on_alarm(int sig)
{
	(void)sig;
	for (int i = 0; i <= EB_MAX_ENGINES; i++)
		if (g_pids[i] > 0)
			kill(g_pids[i], SIGKILL);
	static const char msg[] = "fs-engine-bench run: FAILED: timed out (--timeout)\n";
	ssize_t w = write(2, msg, sizeof(msg) - 1);
	(void)w;
	_exit(3);
}

/* The FS_OPT_FN rows of `run`: each checks its value whole ('12x' is
 * refused) before it is stored. */

/* A list of up to 8 numbers, each in (lo, hi] ([lo, hi] with lo_in):
 * "0.26,0.52". */
static int num_list(const char *val, double lo, int lo_in, double hi, double *out, int *n, char *err,
		    size_t errlen)
{
	char buf[256], *save = NULL;
	int k = 0;
	if (strlen(val) >= sizeof(buf) || !*val || val[strlen(val) - 1] == ',')
		goto bad;
	snprintf(buf, sizeof(buf), "%s", val);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *end;
		errno = 0;
		double v = strtod(t, &end);
		if (k == 8 || errno || end == t || *end || !((v > lo || (lo_in && v == lo)) && v <= hi))
			goto bad;
		out[k++] = v;
	}
	if (k == 0)
		goto bad;
	*n = k;
	return 0;
bad:
	snprintf(err, errlen, "give up to 8 numbers, each %s %g and at most %g, comma-separated",
		 lo_in ? "at least" : "above", lo, hi);
	return -1;
}

static int opt_budget(void *dst, const char *val, char *err, size_t errlen)
{
	struct drv *d = dst;
	return num_list(val, 0, 0, 1, d->budgets, &d->nbudgets, err, errlen);
}

static int opt_bound(void *dst, const char *val, char *err, size_t errlen)
{
	struct drv *d = dst;
	return num_list(val, 0, 1, 1e9, d->bound, &d->nbound, err, errlen);
}

static int opt_modes(void *dst, const char *val, char *err, size_t errlen)
{
	struct drv *d = dst;
	int modes[EB_NMODES] = {0};
	char buf[256], *save = NULL;
	if (strlen(val) >= sizeof(buf)) {
		snprintf(err, errlen, "too long");
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", val);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int m;
		if (eb_opt_mode(&m, t, err, errlen) < 0)
			return -1;
		modes[m] = 1;
	}
	memcpy(d->modes, modes, sizeof(modes));
	return 0;
}

/* --daemon-arg and --alt-arg (dst: its struct eb_dargs).  --alt-arg's go
 * to mode alt's daemon only, so a daemon option runs side by side with the
 * defaults (`both`) in one run: the same routing, interleaved
 * repetitions, one interval each. */
static int opt_daemon_arg(void *dst, const char *val, char *err, size_t errlen)
{
	struct eb_dargs *a = dst;
	if (a->n == EB_MAX_DARGS) {
		snprintf(err, errlen, "at most %d", EB_MAX_DARGS);
		return -1;
	}
	a->v[a->n++] = val;
	return 0;
}

static int opt_recall(void *dst, const char *val, char *err, size_t errlen)
{
	struct drv *d = dst;
	struct replay_recall rc;
	if (d->nrecall == 3 || replay_recall_parse(val, &rc) != 0) {
		snprintf(err, errlen, "give H:A,B,C (1 <= H <= 3; at most 3 of them)");
		return -1;
	}
	d->recall[d->nrecall++] = val;
	return 0;
}

/* The peers' knobs, passed on to each engine as typed: checked here so a
 * bad one fails the run at once, not in every engine. */
static int opt_count_text(void *dst, const char *val, char *err, size_t errlen)
{
	uint64_t v;
	if (fs_opt_uint(val, UINT32_MAX, &v) < 0) {
		snprintf(err, errlen, "give an integer from 0 to %u", UINT32_MAX);
		return -1;
	}
	*(const char **)dst = val;
	return 0;
}

static int opt_decay_text(void *dst, const char *val, char *err, size_t errlen)
{
	char *end;
	errno = 0;
	double v = strtod(val, &end);
	if (errno || end == val || *end || !(v > 0 && v < 1)) {
		snprintf(err, errlen, "give a number above 0 and below 1");
		return -1;
	}
	*(const char **)dst = val;
	return 0;
}

static int parse(struct drv *d, int argc, char **argv)
{
	static const char *const devices[] = {"host", "cuda", NULL};
	static const char *const costs[] = {"free", "charged", NULL};
	static const char *const placements[] = {"split", "dp", NULL};
	static const char *const peers[] = {"on", "off", NULL};
	static const char *const predictors[] = {"oracle", "kernel", NULL};
	eb_route_defaults(&d->ro);
	d->cards = d->engines = 1;
	d->layers = 16;
	d->experts = 512;
	d->topk = 10;
	d->budget = 0.26;
	d->scale = 4;
	d->bus_gbps = d->cpu_gbps = -1;
	d->dense_us = 250;
	d->cpu_threads = 4;
	d->pred_max = 8;
	d->warm = 40;
	d->timeout_s = 900;
	d->label = "";
	d->fault_mode = -1;
	d->reps = 1;
	d->kept_fd = d->notify_fd = -1;
	for (int i = 0; i < EB_NMODES; i++)
		d->modes[i] = default_mode(i);
	int device = 0;
	const struct fs_opt opts[] = {
		FS_OPT_STR("daemon", "PATH", &d->daemon, "foresightd to start per mode (required)"),
		FS_OPT_CHOICE("device", "host|cuda", &device, devices,
			      "where resident experts and the dense part run"),
		FS_OPT_U32("cards", "N", &d->cards, 1, 16, "cards the layers are split over"),
		FS_OPT_U32("engines", "N", &d->engines, 1, EB_MAX_ENGINES,
			   "engine processes on the one tier"),
		FS_OPT_FN("budget", "F[,F...]", d, opt_budget,
			  "slots as a share of layers x experts, all cards (default 0.26); a list runs one "
			  "config per share on the same arena (label LABEL-PCT)"),
		FS_OPT_INT("reps", "N", &d->reps, 1, EB_MAX_REPS,
			   "repetitions, modes interleaved within each"),
		FS_OPT_FN("adapt-every", "N", &d->adapt_every, opt_count_text,
			  "strata-adapt: windows between adaptations (default the engine's, 4)"),
		FS_OPT_FN("adapt-decay", "D", &d->adapt_decay, opt_decay_text,
			  "strata-adapt: the counts' decay per adaptation (default the engine's, 0.7)"),
		FS_OPT_FN("adapt-swaps", "N", &d->adapt_swaps, opt_count_text,
			  "strata-adapt: swaps per adaptation at most (default the engine's, 96)"),
		FS_OPT_FN("lru-inserts", "N", &d->lru_inserts, opt_count_text,
			  "lru: uploads per layer per window (default the engine's, 2)"),
		FS_OPT_FN("bound-mplw", "M[,M...]", d, opt_bound,
			  "the clairvoyant bound's misses per layer-window per budget (fs-replay); the "
			  "tables then report each mode's share of it (default: computed here)"),
		FS_OPT_DBL("scale", "S", &d->scale, 1e-9, 1e9,
			   "experts 1.8 MiB / S, bus 13.5 / S GB/s, CPU 32.6 / S GB/s"),
		FS_OPT_U32("layers", "N", &d->layers, 1, UINT32_MAX, "synthetic model: layers"),
		FS_OPT_U32("experts", "N", &d->experts, 1, UINT32_MAX, "synthetic model: experts per layer"),
		FS_OPT_U32("topk", "N", &d->topk, 1, UINT32_MAX, "synthetic model: experts per token"),
		FS_OPT_U64("expert-bytes", "B", &d->expert_bytes, 0, UINT64_MAX,
			   "override what --scale sets (default: from --scale)"),
		FS_OPT_DBL("bus-gbps", "G", &d->bus_gbps, 0, 1e9,
			   "override what --scale sets (default: from --scale)"),
		FS_OPT_DBL("cpu-gbps", "G", &d->cpu_gbps, 0, 1e9,
			   "override what --scale sets, 0: unpaced (default: from --scale)"),
		FS_OPT_STR("model", "FILE.gguf", &d->model,
			   "serve a GGUF model instead (shape from foresightd --describe)"),
		EB_ROUTE_OPTS(&d->ro),
		FS_OPT_U32("warm", "N", &d->warm, 0, UINT32_MAX, "windows before the measured ones"),
		FS_OPT_DBL("dense-us", "US", &d->dense_us, 0.001, 1e9,
			   "dense part per layer, calibrated once"),
		FS_OPT_U32("dense-iters", "N", &d->dense_iters, 0, UINT32_MAX,
			   "skip the calibration (default 0: calibrate)"),
		FS_OPT_U32("cpu-threads", "N", &d->cpu_threads, 1, 1024, "CPU threads per engine for misses"),
		FS_OPT_U32("pred-max", "N", &d->pred_max, 1, FS_RA_MAX_OUT,
			   "predictions per target layer and horizon"),
		FS_OPT_CHOICE(
			"pred-cost", "free|charged", &d->pred_charged, costs,
			"the oracle predictor's own work: computed before the run (free: a router-ahead "
			"kernel runs on the GPU, off the engine thread) or on the engine thread, per layer"),
		FS_OPT_U32("late-wait-us", "N", &d->late_wait_us, 0, UINT32_MAX,
			   "wait this long for a copy in flight, then CPU"),
		FS_OPT_CHOICE(
			"predictor", "oracle|kernel", &d->predictor_kernel, predictors,
			"oracle: the trace-oracle at the discussion's recall table; kernel: the "
			"router-ahead kernel (kernels/) on synthetic routers and hidden rows that carry "
			"the trace's routing (bench/engine/eb_ra.c), posting through the device ring"),
		FS_OPT_U32("ra-dim", "D", &d->ra_dim, 1, UINT32_MAX, "kernel: hidden size (default 2048)"),
		FS_OPT_U32("ra-top", "M", &d->ra_top, 1, FS_RA_MAX_TOP,
			   "kernel: top-M per token (default 24)"),
		FS_OPT_FN("card-down", "C@W", &d->card_down, eb_opt_card_down,
			  "engine 0 of each daemon mode takes card C down before its window W (the control "
			  "verb `card`: a lost card); fails the run if an expert is read from it afterwards "
			  "or an engine never sees it down"),
		FS_OPT_FN("pred-recall", "H:A,B,C", d, opt_recall,
			  "oracle: recall % within ranks 10/24/48 (scaled to top-k), H layers ahead "
			  "(repeatable; default 1:61,82,90 2:52,72,83 3:46,66,78)"),
		FS_OPT_CHOICE("placement", "split|dp", &d->dp, placements,
			      "layers split over the cards, or data parallel: engine i runs every layer on "
			      "card i % cards (the baseline's own pool there)"),
		FS_OPT_CHOICE("peer", "on|off", &d->peer_off, peers,
			      "on: one tier across cards that read each other, engines read experts in place "
			      "on the other card; off: foresightd --peer off, each card its own tier"),
		FS_OPT_FN("modes", "a,b,...", d, opt_modes,
			  "a subset (default all but perfect; a peer and zero are needed for the shares); "
			  "every one is promised: missing or failed fails the run"),
		FS_OPT_STR("csv", "FILE", &d->csv,
			   "append one row per (repetition, mode) (`fs-engine-bench report` reads it)"),
		FS_OPT_STR("label", "TEXT", &d->label, "first CSV column"),
		FS_OPT_FN("daemon-arg", "ARG", &d->dargs, opt_daemon_arg,
			  "extra foresightd argument (repeatable)"),
		FS_OPT_FN(
			"alt-arg", "ARG", &d->altargs, opt_daemon_arg,
			"a foresightd argument for mode alt's daemon only (repeatable, after --daemon-arg): "
			"alt is `both` with these, an A/B of daemon options in one run"),
		FS_OPT_STR("workdir", "DIR", &d->workdir_opt,
			   "logs and checksum files (default: a temporary "
			   "folder, removed unless --keep)"),
		FS_OPT_FLAG("keep", 0, &d->keep, "keep the work folder"),
		FS_OPT_U32("timeout", "S", &d->timeout_s, 0, UINT32_MAX, "whole run, seconds"),
		FS_OPT_FN("fault", "MODE", &d->fault_mode, eb_opt_mode,
			  "tests: that mode's engine 0 corrupts one window's checksum"),
	};
	const struct fs_opt_cmd cmd = {
		"fs-engine-bench run",
		"usage: fs-engine-bench run --daemon PATH [options]\n\n"
		"Runs every mode side by side, --reps times interleaved, and prints the tables: the peers\n"
		"(static, strata-adapt, lru: no daemon), the daemon's modes (recency, predict, both;\n"
		"perfect on request: both tiers, an oracle never wrong; alt on request: both with --alt-arg)\n"
		"and zero (every expert resident).\n\n",
		NULL, opts, FS_OPT_N(opts)};
	fs_opt_parse_or_exit(&cmd, argc, argv);
	d->device = device ? EB_DEV_CUDA : EB_DEV_HOST;
	if (d->nbudgets == 0)
		d->budgets[d->nbudgets++] = 0.26;
	d->budget = d->budgets[0];
	if (!d->daemon) {
		fprintf(stderr, "fs-engine-bench run: --daemon PATH is required (try --help)\n");
		return -1;
	}
	if (d->modes[EB_ALT] != (d->altargs.n > 0)) {
		fprintf(stderr, "fs-engine-bench run: %s\n",
			d->altargs.n ? "--alt-arg without mode alt in --modes" :
				       "mode alt needs --alt-arg (without it, it is `both`)");
		return -1;
	}
	if (d->nbound && d->nbound != d->nbudgets) {
		fprintf(stderr, "fs-engine-bench run: --bound-mplw: one per --budget (%d, not %d)\n",
			d->nbudgets, d->nbound);
		return -1;
	}
	if (!d->expert_bytes)
		d->expert_bytes = (uint64_t)llround(1.8 * 1048576.0 / d->scale / 64.0) * 64;
	if (d->bus_gbps < 0)
		d->bus_gbps = 13.5 / d->scale;
	if (d->cpu_gbps < 0)
		d->cpu_gbps = 32.6 / d->scale;
	return 0;
}

/* ---- processes ------------------------------------------------------------- */

/* Run argv, stdout into a pipe (*out), stdin from a pipe (*in), or files. */
static pid_t spawn(char *const argv[], int *in, int *out, const char *logpath)
{
	int pin[2] = {-1, -1}, pout[2] = {-1, -1};
	if ((in && pipe(pin) < 0) || (out && pipe(pout) < 0))
		return -1;
	pid_t p = fork();
	if (p < 0)
		return -1;
	if (p == 0) {
		if (in) {
			dup2(pin[0], 0);
			close(pin[0]);
			close(pin[1]);
		}
		if (out) {
			dup2(pout[1], 1);
			close(pout[0]);
			close(pout[1]);
		}
		if (logpath) {
			int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
			if (fd >= 0) {
				if (!out)
					dup2(fd, 1);
				dup2(fd, 2);
			}
		}
		execv(argv[0], argv);
		fprintf(stderr, "fs-engine-bench run: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	if (in) {
		close(pin[0]);
		*in = pin[1];
	}
	if (out) {
		close(pout[1]);
		*out = pout[0];
	}
	return p;
}

static int reap(pid_t p)
{
	int st;
	while (waitpid(p, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Run argv to completion, its stdout into buf. */
static int capture(char *const argv[], char *buf, size_t len)
{
	int out;
	pid_t p = spawn(argv, NULL, &out, NULL);
	if (p < 0)
		return -1;
	size_t n = 0;
	ssize_t r;
	while (n + 1 < len && (r = read(out, buf + n, len - n - 1)) > 0)
		n += (size_t)r;
	buf[n] = 0;
	close(out);
	return reap(p);
}

static pid_t daemon_start(struct drv *d, int policy, char *err, size_t errlen)
{
	char slots[32], cards[32], bus[32], L[32], E[32], K[32], B[32], log[320];
	snprintf(slots, sizeof(slots), "%llu", (unsigned long long)d->slots_card);
	snprintf(cards, sizeof(cards), "%u", d->cards);
	snprintf(bus, sizeof(bus), "%.6g", d->bus_gbps);
	snprintf(L, sizeof(L), "%u", d->layers);
	snprintf(E, sizeof(E), "%u", d->experts);
	snprintf(K, sizeof(K), "%u", d->topk);
	snprintf(B, sizeof(B), "%llu", (unsigned long long)d->expert_bytes);
	snprintf(log, sizeof(log), "%s/daemon-%s.log", d->work, eb_mode_name(policy));
	const char *av[64];
	int n = 0;
	av[n++] = d->daemon;
	av[n++] = "--backend";
	av[n++] = d->device == EB_DEV_CUDA ? "cuda" : "host";
	av[n++] = "--socket";
	av[n++] = d->sock;
	av[n++] = "--cards";
	av[n++] = cards;
	av[n++] = "--slots";
	av[n++] = slots;
	av[n++] = "--bus-gbps";
	av[n++] = bus;
	av[n++] = "--log-level";
	av[n++] = "5";
	if (d->model) {
		av[n++] = "--model";
		av[n++] = d->model;
	} else {
		av[n++] = "--layers";
		av[n++] = L;
		av[n++] = "--experts";
		av[n++] = E;
		av[n++] = "--experts-used";
		av[n++] = K;
		av[n++] = "--expert-bytes";
		av[n++] = B;
	}
	/* The policy: the tiers of the mode, nothing else differs. */
	if (policy == EB_RECENCY) {
		av[n++] = "--predicted-slots";
		av[n++] = "0";
	} else if (policy == EB_PREDICT) {
		av[n++] = "--recency-slots";
		av[n++] = "0";
	}
	if (d->peer_off) {
		av[n++] = "--peer";
		av[n++] = "off";
	}
	for (int i = 0; i < d->dargs.n; i++)
		av[n++] = d->dargs.v[i];
	if (policy == EB_ALT)
		for (int i = 0; i < d->altargs.n; i++)
			av[n++] = d->altargs.v[i];
	if (policy == EB_LEARNED) { /* the engine posts usage only: the learner predicts (auto) */
		av[n++] = "--learn";
		av[n++] = "1";
	}
	av[n] = NULL;
	unlink(d->sock);
	pid_t p = fork();
	if (p == 0) {
		/* The fd store: our notify socket, and the kept arena as fd 3
		 * (LISTEN_FDS, as systemd passes it). */
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (d->notify_fd >= 0)
			setenv("NOTIFY_SOCKET", d->notify, 1);
		if (d->kept_fd >= 0) {
			char pid[24];
			snprintf(pid, sizeof(pid), "%ld", (long)getpid());
			if (d->kept_fd == 3)
				fcntl(3, F_SETFD, 0);
			else if (dup2(d->kept_fd, 3) < 0)
				_exit(126);
			setenv("LISTEN_PID", pid, 1);
			setenv("LISTEN_FDS", "1", 1);
			setenv("LISTEN_FDNAMES", "arena", 1);
		}
		execv(av[0], (char *const *)av);
		fprintf(stderr, "fs-engine-bench run: exec %s: %s\n", av[0], strerror(errno));
		_exit(127);
	}
	if (p < 0) {
		snprintf(err, errlen, "cannot start %s", d->daemon);
		return -1;
	}
	g_pids[EB_MAX_ENGINES] = p;
	for (int i = 0; i < 3000; i++) { /* the arena is built before the socket opens */
		struct eb_stats s;
		char e2[256];
		if (eb_ctl_stats(d->sock, &s, e2, sizeof(e2)) == 0)
			return p;
		int st;
		if (waitpid(p, &st, WNOHANG) == p) {
			snprintf(err, errlen, "foresightd exited at start (log: %s)", log);
			g_pids[EB_MAX_ENGINES] = 0;
			return -1;
		}
		usleep(100000);
	}
	snprintf(err, errlen, "foresightd did not answer within 300 s (log: %s)", log);
	kill(p, SIGKILL);
	reap(p);
	g_pids[EB_MAX_ENGINES] = 0;
	return -1;
}

/* The fd store's messages (the daemon sends FDSTORE=1 with the arena's
 * memfd once it is built, FDSTOREREMOVE=1 when a kept one did not match):
 * keep the newest arena fd for the next start. */
static void notify_drain(struct drv *d)
{
	int r;
	while (d->notify_fd >= 0 && (r = fs_fdstore_recv(d->notify_fd, 1, &d->kept_fd)) >= 0) {
		if (r == FS_FDSTORE_SAME)
			d->arena_reuses++;
		else if (r == FS_FDSTORE_NEW)
			d->arena_builds++;
	}
}

static int notify_open(struct drv *d, const char *dir)
{
	snprintf(d->notify, sizeof(d->notify), "%s/n.sock", dir);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(d->notify) >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path, d->notify, strlen(d->notify) + 1);
	d->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (d->notify_fd < 0 || bind(d->notify_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (d->notify_fd >= 0)
			close(d->notify_fd);
		d->notify_fd = -1;
		return -1;
	}
	return 0;
}

static int daemon_stop(struct drv *d, pid_t p)
{
	kill(p, SIGTERM);
	int rc = reap(p);
	g_pids[EB_MAX_ENGINES] = 0;
	notify_drain(d); /* a daemon that reused the kept arena stores the same memfd again */
	return rc;
}

/* ---- one mode ---------------------------------------------------------------- */

static double kv(const char *line, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), " %s=", key);
	const char *p = strstr(line, pat);
	return p ? strtod(p + strlen(pat), NULL) : 0.0;
}

static int run_mode(struct drv *d, int mode, struct row *row, char *err, size_t errlen)
{
	char a[32][64];
	char *av[EB_MAX_ENGINES][128];
	int in[EB_MAX_ENGINES], out[EB_MAX_ENGINES];
	FILE *fo[EB_MAX_ENGINES];
	char ckpath[EB_MAX_ENGINES][320];
	uint32_t ne = d->engines;
	memset(row, 0, sizeof(*row));
	row->ran = 1;
	uint64_t t_spawn = eb_now_ns();
	for (uint32_t i = 0; i < ne; i++) {
		int n = 0, k = 0;
#define ARG(s) (av[i][n++] = (char *)(s))
#define ARGF(...) (snprintf(a[k], sizeof(a[k]), __VA_ARGS__), av[i][n++] = a[k++])
		(void)k;
		ARG(d->self);
		ARG("engine");
		ARG("--socket");
		ARG(d->sock);
		ARG("--mode");
		ARG(eb_mode_name(mode));
		ARG("--device");
		ARG(d->device == EB_DEV_CUDA ? "cuda" : "host");
		ARG("--cards");
		ARGF("%u", d->cards);
		ARG("--engine");
		ARGF("%u", i);
		ARG("--engines");
		ARGF("%u", ne);
		ARG("--budget");
		ARGF("%llu", (unsigned long long)(d->slots_card * d->cards));
		if (d->ro.trace) {
			ARG("--trace");
			ARG(d->ro.trace);
		}
		ARG("--routing");
		ARG(d->ro.zipf ? "zipf" : "model");
		ARG("--session-tokens");
		ARGF("%u", d->ro.session_tokens);
		ARG("--skew");
		ARGF("%.17g", d->ro.skew);
		ARG("--locality");
		ARGF("%.17g", d->ro.locality);
		ARG("--gen-seed");
		ARGF("%llu", (unsigned long long)d->ro.gen_seed);
		ARG("--tpw");
		ARGF("%.17g", d->ro.tpw);
		ARG("--profile-windows");
		ARGF("%u", d->ro.profile_windows);
		ARG("--windows");
		ARGF("%u", d->ro.windows);
		ARG("--warm");
		ARGF("%u", d->warm);
		ARG("--dense-iters");
		ARGF("%u", d->dense_iters);
		ARG("--cpu-threads");
		ARGF("%u", d->cpu_threads);
		ARG("--cpu-gbps");
		ARGF("%.17g", d->cpu_gbps);
		ARG("--pred-max");
		ARGF("%u", d->pred_max);
		if (d->pred_charged)
			ARG("--pred-charged");
		if (d->dp) {
			ARG("--placement");
			ARG("dp");
		}
		if (!d->peer_off)
			ARG("--peer");
		if (d->predictor_kernel) {
			ARG("--predictor");
			ARG("kernel");
		}
		if (d->ra_dim) {
			ARG("--ra-dim");
			ARGF("%u", d->ra_dim);
		}
		if (d->ra_top) {
			ARG("--ra-top");
			ARGF("%u", d->ra_top);
		}
		for (int r = 0; r < d->nrecall; r++) {
			ARG("--pred-recall");
			ARG(d->recall[r]);
		}
		if (d->card_down && i == 0 && eb_mode_daemon(mode)) {
			ARG("--card-down");
			ARG(d->card_down);
		}
		ARG("--late-wait-us");
		ARGF("%u", d->late_wait_us);
		ARG("--bus-gbps");
		ARGF("%.17g", d->bus_gbps);
		if (d->adapt_every) {
			ARG("--adapt-every");
			ARG(d->adapt_every);
		}
		if (d->adapt_decay) {
			ARG("--adapt-decay");
			ARG(d->adapt_decay);
		}
		if (d->adapt_swaps) {
			ARG("--adapt-swaps");
			ARG(d->adapt_swaps);
		}
		if (d->lru_inserts) {
			ARG("--lru-inserts");
			ARG(d->lru_inserts);
		}
		ARG("--checksums");
		snprintf(ckpath[i], sizeof(ckpath[i]), "%s/ck-%s-%u-r%d.txt", d->work, eb_mode_name(mode), i,
			 d->rep);
		ARG(ckpath[i]);
		ARG("--sync");
		if (i == 0 && eb_mode_daemon(mode))
			ARG("--load-profile");
		if (i == 0 && mode == d->fault_mode) {
			ARG("--fault-window");
			ARG("0");
		}
		av[i][n] = NULL;
#undef ARG
#undef ARGF
		pid_t p = spawn(av[i], &in[i], &out[i], NULL); /* the child has its own copy of a[] */
		if (p < 0) {
			snprintf(err, errlen, "cannot start an engine");
			return -1;
		}
		g_pids[i] = p;
		fo[i] = fdopen(out[i], "r");
	}
	char line[1024];
	int rc = 0;
	for (uint32_t i = 0; i < ne; i++)
		if (!fgets(line, sizeof(line), fo[i]) || strncmp(line, "READY", 5) != 0) {
			snprintf(err, errlen, "engine %u of mode %s did not start", i, eb_mode_name(mode));
			rc = -1;
		}
	struct eb_stats s0 = {0}, s1 = {0};
	char e2[256];
	eb_ctl_stats(d->sock, &s0, e2, sizeof(e2));
	uint64_t t0 = eb_now_ns();
	for (uint32_t i = 0; i < ne; i++) {
		if (rc == 0) {
			ssize_t w = write(in[i], "GO\n", 3);
			(void)w;
		}
		close(in[i]);
	}
	for (uint32_t i = 0; i < ne; i++) {
		int got = 0;
		while (fgets(line, sizeof(line), fo[i]))
			if (strncmp(line, "RESULT ", 7) == 0) {
				got = 1;
				printf("  %s", line);
				double secs = kv(line, "secs");
				row->tps += secs > 0 ? kv(line, "tokens") / secs : 0;
				row->secs = secs > row->secs ? secs : row->secs;
				row->uses += (uint64_t)kv(line, "uses");
				row->windows += (uint64_t)kv(line, "windows");
				row->hit += kv(line, "hits");
				row->peer += kv(line, "peer_hits");
				row->down_reads += kv(line, "down_reads");
				if (kv(line, "engine") == 0) {
					row->held = kv(line, "held");
					row->held_twice = kv(line, "held_twice");
				}
				row->down_seen += kv(line, "down_seen") > 0;
				const char *r10 = strstr(line, " ra_recall10=");
				if (r10 && !row->recall[0] && kv(line, "ra_launches") > 0) {
					const char *r48 = strstr(line, " ra_recall48=");
					snprintf(row->recall, sizeof(row->recall), "%.*s (within 48: %.*s)",
						 (int)strcspn(r10 + 13, " \n"), r10 + 13,
						 r48 ? (int)strcspn(r48 + 13, " \n") : 0,
						 r48 ? r48 + 13 : "");
				}
				row->mplw += kv(line, "misses");
				row->late_seen += kv(line, "late_seen");
				row->late_cpu += kv(line, "late_cpu");
				row->predictions += kv(line, "predictions");
				row->dropped += kv(line, "dropped");
				row->copies += kv(line, "pool_copies");
				row->swaps += kv(line, "pool_swaps");
				row->pool_bytes += kv(line, "pool_bytes");
				row->layer_windows += kv(line, "layer_windows");
			}
		fclose(fo[i]);
		int st = reap(g_pids[i]);
		g_pids[i] = 0;
		if (st != 0 || !got) {
			if (rc == 0)
				snprintf(err, errlen, "engine %u of mode %s failed (exit %d)", i,
					 eb_mode_name(mode), st);
			rc = -1;
		}
	}
	double wall = (double)(eb_now_ns() - t0) / 1e9;
	printf("  mode %s, repetition %d: set-up %.1f s, decode %.1f s\n", eb_mode_name(mode), d->rep,
	       (double)(t0 - t_spawn) / 1e9, wall);
	eb_ctl_stats(d->sock, &s1, e2, sizeof(e2));
	if (rc != 0)
		return rc;
	row->mplw = row->layer_windows > 0 ? row->mplw / row->layer_windows : 0;
	row->hit = row->uses ? row->hit / (double)row->uses : 0;
	row->peer = row->uses ? row->peer / (double)row->uses : 0;
	if (d->card_down && eb_mode_daemon(mode) && (row->down_reads > 0 || row->down_seen < ne)) {
		snprintf(err, errlen,
			 "mode %s: --card-down %s: %.0f expert reads from the card after it was seen down, "
			 "%.0f of %u engines saw it down",
			 eb_mode_name(mode), d->card_down, row->down_reads, row->down_seen, ne);
		return -1;
	}
	row->late_daemon = eb_mode_daemon(mode) ? s1.late - s0.late : 0;
	row->landed_late = eb_mode_daemon(mode) ? s1.landed_late - s0.landed_late : 0;
	row->too_late = eb_mode_daemon(mode) ? s1.too_late - s0.too_late : 0;
	row->learned = eb_mode_daemon(mode) ? s1.learned - s0.learned : 0;
	row->bus_gbps = eb_mode_daemon(mode) && wall > 0 ? (s1.bytes - s0.bytes) / wall / 1e9 : 0;
	if (eb_mode_peer(mode)) /* the peers' own copies, over the timed windows */
		row->bus_gbps = row->secs > 0 ? row->pool_bytes / row->secs / 1e9 : 0;
	row->ok = 1;
	return 0;
}

/* ---- checksums ------------------------------------------------------------------ */

/* Compare every engine's per-window checksums of `mode` with ref (filled by
 * the first file read).  Returns mismatches; prints the first few. */
static uint64_t check_sums(struct drv *d, int mode, uint64_t *ref, uint8_t *have, uint32_t nwin,
			   uint64_t *compared)
{
	uint64_t bad = 0;
	for (uint32_t i = 0; i < d->engines; i++) {
		char path[320];
		snprintf(path, sizeof(path), "%s/ck-%s-%u-r%d.txt", d->work, eb_mode_name(mode), i, d->rep);
		FILE *f = fopen(path, "r");
		if (!f) {
			fprintf(stderr, "fs-engine-bench run: FAILED: %s: %s\n", path, strerror(errno));
			return bad + 1;
		}
		unsigned w;
		unsigned long long v;
		uint32_t seen = 0;
		while (fscanf(f, "%u %llx", &w, &v) == 2) {
			if (w >= nwin) {
				bad++;
				continue;
			}
			seen++;
			(*compared)++;
			if (!have[w]) {
				have[w] = 1;
				ref[w] = v;
			} else if (ref[w] != v) {
				if (bad < 5)
					fprintf(stderr,
						"fs-engine-bench run: CHECKSUM MISMATCH: mode %s engine %u window %u: "
						"%016llx, expected %016llx\n",
						eb_mode_name(mode), i, w, v, (unsigned long long)ref[w]);
				bad++;
			}
		}
		fclose(f);
		if (seen != nwin) {
			fprintf(stderr, "fs-engine-bench run: FAILED: %s has %u windows, expected %u\n", path,
				seen, nwin);
			bad++;
		}
	}
	return bad;
}

/* ---- the table --------------------------------------------------------------------- */

/* The clairvoyant bound (tools/replay/replay_bound.h: the future known,
 * Belady eviction, copies at the bus rate) on the timed windows of this
 * routing with this config's slots: its misses per layer-window, or -1
 * (one card and one engine only: the bound models one card's slots and
 * link).  Its clock is nominal: per window, the dense part and the expert
 * compute of every layer (dense_us x 1.1) and the discussion's 58 us per
 * missed expert (the CPU path, scaled with the experts like the bus). */
static double bound_mplw(const struct drv *d, const struct eb_route *r)
{
	if (d->cards != 1 || d->engines != 1 || d->warm >= r->nwin || d->dp)
		return -1;
	struct replay_bound_in in = {.t = &r->t,
				     .nwin = r->nwin - d->warm,
				     .first = r->first + d->warm,
				     .ntok = r->ntok + d->warm,
				     .slots = (uint32_t)d->slots_card,
				     .intercept_ms = d->layers * d->dense_us * 1.1e-3,
				     .miss_ms = d->layers * 0.058,
				     .bus_gbps = d->bus_gbps,
				     .expert_bytes = d->expert_bytes};
	struct replay_result res;
	if (replay_bound(&in, &res) != 0)
		return -1;
	return res.misses_per_lw;
}

/* One repetition's rows as the protocol's records (eb_report.c). */
static void records(const struct drv *d, const struct row *rows, const char *label, double bound,
		    struct eb_rec *out, size_t *n)
{
	uint32_t promised = 0;
	for (int m = 0; m < EB_NMODES; m++)
		promised |= (uint32_t)(d->modes[m] != 0) << m;
	for (int m = 0; m < EB_NMODES; m++) {
		const struct row *r = &rows[m];
		if (!r->ran)
			continue;
		struct eb_rec *x = &out[(*n)++];
		memset(x, 0, sizeof(*x));
		snprintf(x->label, sizeof(x->label), "%s", label);
		snprintf(x->device, sizeof(x->device), "%s", d->device == EB_DEV_CUDA ? "cuda" : "host");
		eb_route_describe(&d->ro, x->routing, sizeof(x->routing));
		snprintf(x->predictor, sizeof(x->predictor), "%s",
			 d->predictor_kernel ? "router-ahead kernel" :
			 d->nrecall          ? "oracle, --pred-recall" :
					       "oracle at the recall table");
		x->rep = d->rep;
		x->mode = m;
		x->ok = r->ok;
		x->cards = d->cards, x->engines = d->engines, x->layers = d->layers, x->experts = d->experts;
		x->topk = d->topk, x->windows = d->ro.windows;
		x->slots = d->slots_card, x->expert_bytes = d->expert_bytes;
		x->budget = d->budget, x->bus_gbps = d->bus_gbps, x->cpu_gbps = d->cpu_gbps;
		x->tps = r->tps, x->hit = r->hit, x->mplw = r->mplw, x->late_seen = r->late_seen;
		x->late_daemon = r->late_daemon, x->bus = r->bus_gbps, x->copies = r->copies;
		x->swaps = r->swaps, x->peer = r->peer;
		x->bound_mplw = bound;
		x->promised_modes = promised;
		x->promised_reps = d->reps;
	}
}

/* One repetition's table (the log; the config's tables come from the
 * records at the end). */
static void table(struct drv *d, const struct row *rows)
{
	char recall[96] = "";
	printf("\nrepetition %d of %d: %u card(s), %u engine(s), %llu slots/card (%.0f %% of %u x %u experts), "
	       "expert %.2f MiB, bus %.3g GB/s per card, CPU path %.3g GB/s\n",
	       d->rep, d->reps, d->cards, d->engines, (unsigned long long)d->slots_card, d->budget * 100,
	       d->layers, d->experts, (double)d->expert_bytes / 1048576.0, d->bus_gbps, d->cpu_gbps);
	printf("predictor: %s\n",
	       d->predictor_kernel ?
		       "router-ahead kernel (kernels/router_ahead.cu; CPU reference on the host device)" :
	       d->pred_charged ? "trace oracle, ranked on the engine thread" :
				 "trace oracle, ranked before the run");
	for (int r = 0; r < d->nrecall; r++)
		printf("oracle recall (%% within ranks 10/24/48, H ahead): %s\n", d->recall[r]);
	if (d->card_down) {
		double reads = 0;
		for (int m = 0; m < EB_NMODES; m++)
			reads += rows[m].ran && eb_mode_daemon(m) ? rows[m].down_reads : 0;
		printf("card down: engine 0 of each daemon mode took card@window %s down mid-run; expert "
		       "reads from it once an engine had seen it down: %.0f (must be 0)\n",
		       d->card_down, reads);
	}
	printf("placement: %s; %s\n",
	       d->dp ? "data parallel (engine i runs every layer on card i % cards)" :
		       "layers split over the cards",
	       d->peer_off ? "peer off: each card its own tier" :
			     "peer on: one tier, experts read in place across cards");
	printf("| mode | tokens/s | hit rate | misses/layer-window | late: engine saw (-> CPU) | late: daemon "
	       "counted | bus GB/s | copies (swaps) |\n");
	printf("|---|---|---|---|---|---|---|---|\n");
	for (int m = 0; m < EB_NMODES; m++) {
		const struct row *r = &rows[m];
		if (!r->ran)
			continue;
		if (!r->ok) {
			printf("| %s | FAILED | | | | | | |\n", eb_mode_name(m));
			continue;
		}
		char hit[48];
		int n = snprintf(hit, sizeof(hit), "%.2f %%", 100.0 * r->hit);
		if (r->peer > 0)
			snprintf(hit + n, sizeof(hit) - (size_t)n, " (%.2f %% peer)", 100.0 * r->peer);
		printf("| %s | %.1f | %s | %.3f | %.0f (%.0f) | %.0f | %.2f | %.0f (%.0f) |\n",
		       eb_mode_name(m), r->tps, hit, r->mplw, r->late_seen, r->late_cpu, r->late_daemon,
		       r->bus_gbps, r->copies, r->swaps);
		if (r->recall[0])
			snprintf(recall, sizeof(recall), "%s", r->recall);
	}
	printf("predictions posted (the engines' own / foresightd's learned predictor's):");
	for (int m = 0; m < EB_NMODES; m++)
		if (rows[m].ok && eb_mode_daemon(m))
			printf(" %s %.0f / %.0f;", eb_mode_name(m), rows[m].predictions, rows[m].learned);
	printf("\n");
	printf("held at the end (one epoch, distinct experts / held on more than one card):");
	for (int m = 0; m < EB_NMODES; m++)
		if (rows[m].ok && eb_mode_daemon(m))
			printf(" %s %.0f / %.0f;", eb_mode_name(m), rows[m].held, rows[m].held_twice);
	printf("\n");
	if (recall[0])
		printf("router-ahead kernel, measured per-token recall within 10 candidates, 1/2/3 layers "
		       "ahead: %s\n",
		       recall);
	fflush(stdout);
}

static int model_shape(struct drv *d, char *err, size_t errlen)
{
	char buf[1 << 16];
	char *av[] = {(char *)d->daemon, (char *)"--model", (char *)d->model, (char *)"--describe", NULL};
	if (capture(av, buf, sizeof(buf)) != 0) {
		snprintf(err, errlen, "%s --model %s --describe failed", d->daemon, d->model);
		return -1;
	}
	cJSON *j = cJSON_Parse(buf);
	const cJSON *L = cJSON_GetObjectItemCaseSensitive(j, "layers");
	const cJSON *E = cJSON_GetObjectItemCaseSensitive(j, "experts");
	const cJSON *K = cJSON_GetObjectItemCaseSensitive(j, "experts_used");
	if (!cJSON_IsNumber(L) || !cJSON_IsNumber(E)) {
		snprintf(err, errlen, "--describe of %s: no layers/experts", d->model);
		cJSON_Delete(j);
		return -1;
	}
	d->layers = (uint32_t)L->valuedouble;
	d->experts = (uint32_t)E->valuedouble;
	d->topk = cJSON_IsNumber(K) && K->valuedouble > 0 ? (uint32_t)K->valuedouble : 8;
	cJSON_Delete(j);
	return 0;
}

int eb_driver_main(int argc, char **argv, const char *self)
{
	struct drv d;
	memset(&d, 0, sizeof(d));
	if (parse(&d, argc, argv) != 0)
		return 2;
	char err[512];
	static char selfpath[4096];
	if (!realpath(self, selfpath)) {
		fprintf(stderr, "fs-engine-bench run: cannot resolve %s\n", self);
		return 2;
	}
	d.self = selfpath;
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, on_alarm);
	alarm(d.timeout_s);
	if (d.workdir_opt) {
		snprintf(d.work, sizeof(d.work), "%s", d.workdir_opt);
		mkdir(d.work, 0755);
	} else {
		snprintf(d.work, sizeof(d.work), "/tmp/fs-engine-bench-XXXXXX");
		if (!mkdtemp(d.work)) {
			fprintf(stderr, "fs-engine-bench run: mkdtemp: %s\n", strerror(errno));
			return 2;
		}
	}
	/* The socket in a short folder of its own: a unix socket path has room
	 * for ~100 bytes, and --workdir may be deep. */
	char sockdir[] = "/tmp/fseb-XXXXXX";
	if (!mkdtemp(sockdir)) {
		fprintf(stderr, "fs-engine-bench run: mkdtemp: %s\n", strerror(errno));
		return 2;
	}
	snprintf(d.sock, sizeof(d.sock), "%s/s.sock", sockdir);
	if (d.model && model_shape(&d, err, sizeof(err)) != 0) {
		fprintf(stderr, "fs-engine-bench run: %s\n", err);
		return 2;
	}
	if (d.ro.trace) {
		struct fs_trace t = {0};
		if (fs_trace_load(&t, d.ro.trace, err, sizeof(err)) != 0) {
			fprintf(stderr, "fs-engine-bench run: %s\n", err);
			return 2;
		}
		if (!d.model) {
			d.layers = t.layers;
			d.experts = t.experts;
			d.topk = t.topk;
		}
		fs_trace_free(&t);
	}
	if (notify_open(&d, sockdir) != 0)
		fprintf(stderr,
			"fs-engine-bench run: no notify socket: every daemon start builds the arena\n");
	/* The same routing the engines build: the window count for the checks. */
	struct eb_route r;
	if (eb_route_build(&r, &d.ro, d.layers, d.experts, d.topk, err, sizeof(err)) != 0) {
		fprintf(stderr, "fs-engine-bench run: %s\n", err);
		return 2;
	}
	uint32_t nwin = r.nwin;
	char rdesc[160];
	eb_route_describe(&d.ro, rdesc, sizeof(rdesc));
	if (!d.dense_iters) {
		char buf[256], us[32];
		snprintf(us, sizeof(us), "%.6g", d.dense_us);
		char *av[] = {(char *)d.self,
			      (char *)"calibrate",
			      (char *)"--device",
			      (char *)(d.device == EB_DEV_CUDA ? "cuda" : "host"),
			      (char *)"--dense-us",
			      us,
			      NULL};
		unsigned it = 0;
		double got = 0;
		if (capture(av, buf, sizeof(buf)) != 0 ||
		    sscanf(buf, "dense_iters %u us %lf", &it, &got) != 2) {
			fprintf(stderr, "fs-engine-bench run: calibration failed: %s\n", buf);
			return 2;
		}
		d.dense_iters = it;
		printf("dense part: %u iterations = %.1f us per layer (target %.0f us)\n", it, got,
		       d.dense_us);
	}
	printf("shape: %u layers x %u experts, top-%u, %.2f MiB per expert, %.2f tokens per window, %u decode "
	       "windows (%u warm-up), %s routing; %d repetition(s), modes interleaved:",
	       d.layers, d.experts, d.topk, (double)d.expert_bytes / 1048576.0, d.ro.tpw, nwin, d.warm, rdesc,
	       d.reps);
	for (int m = 0; m < EB_NMODES; m++)
		if (d.modes[m])
			printf(" %s", eb_mode_name(m));
	printf("\n");
	if (d.altargs.n) {
		printf("alt: both, its daemon started with");
		for (int i = 0; i < d.altargs.n; i++)
			printf(" %s", d.altargs.v[i]);
		printf("\n");
	}
	fflush(stdout);
	d.ro.windows = nwin;

	FILE *csv = NULL;
	if (d.csv) {
		struct stat st;
		int fresh = stat(d.csv, &st) != 0 || st.st_size == 0;
		csv = fopen(d.csv, "a");
		if (!csv) {
			fprintf(stderr, "fs-engine-bench run: %s: %s\n", d.csv, strerror(errno));
			return 2;
		}
		if (fresh)
			eb_csv_header(csv);
	}
	size_t nrec = 0;
	struct eb_rec *recs = calloc((size_t)d.nbudgets * d.reps * EB_NMODES, sizeof(*recs));
	uint64_t *ref = calloc(nwin, sizeof(*ref));
	uint8_t *have = calloc(nwin, 1);
	if (!recs || !ref || !have) {
		fprintf(stderr, "fs-engine-bench run: out of memory\n");
		return 2;
	}
	int fail = 0;
	uint64_t bad = 0, compared = 0;
	int modes_checked = 0;
	/* daemon A: the peers and zero (arena only), recency; B: predict; C:
	 * both; D: learned; E: perfect; F: alt.  Each daemon mode on a fresh
	 * daemon (fresh tiers, and a fresh learner). */
	enum { NGROUPS = 6 };
	static const int groups[NGROUPS][5] = {{EB_STATIC, EB_STRATA, EB_LRU, EB_ZERO, EB_RECENCY},
					       {EB_PREDICT, -1, -1, -1, -1},
					       {EB_BOTH, -1, -1, -1, -1},
					       {EB_LEARNED, -1, -1, -1, -1},
					       {EB_PERFECT, -1, -1, -1, -1},
					       {EB_ALT, -1, -1, -1, -1}};
	static const int policy[NGROUPS] = {EB_RECENCY, EB_PREDICT, EB_BOTH, EB_LEARNED, EB_PERFECT, EB_ALT};
	for (int bi = 0; bi < d.nbudgets; bi++) {
		d.budget = d.budgets[bi];
		d.slots_card = (uint64_t)llround(d.budget * d.layers * d.experts / d.cards);
		if (d.slots_card < 1)
			d.slots_card = 1;
		char label[64];
		if (d.nbudgets > 1)
			snprintf(label, sizeof(label), "%s%s%.0f", d.label, d.label[0] ? "-" : "",
				 d.budget * 100);
		else
			snprintf(label, sizeof(label), "%s", d.label[0] ? d.label : "run");
		size_t first_rec = nrec;
		double bound = d.nbound ? d.bound[bi] : bound_mplw(&d, &r);
		if (bound >= 0)
			printf("clairvoyant bound (%s, %llu slots, the bus at %.3g GB/s): %.3f misses per layer-window\n",
			       d.nbound ? "--bound-mplw" : "tools/replay's replay_bound on this routing",
			       (unsigned long long)d.slots_card, d.bus_gbps, bound);
		for (d.rep = 1; d.rep <= d.reps; d.rep++) {
			struct row rows[EB_NMODES];
			memset(rows, 0, sizeof(rows));
			for (int g = 0; g < NGROUPS; g++) {
				int any = 0;
				for (int k = 0; k < 5; k++)
					any |= groups[g][k] >= 0 && d.modes[groups[g][k]];
				if (!any)
					continue;
				uint64_t ts = eb_now_ns();
				pid_t dp = daemon_start(&d, policy[g], err, sizeof(err));
				printf("  daemon for %s: %s in %.1f s\n", eb_mode_name(policy[g]),
				       dp < 0 ? "failed" : "answering", (double)(eb_now_ns() - ts) / 1e9);
				if (dp < 0) {
					fprintf(stderr, "fs-engine-bench run: FAILED: %s\n", err);
					fail = 1;
					for (int k = 0; k < 5; k++) /* promised: their rows say FAILED */
						if (groups[g][k] >= 0 && d.modes[groups[g][k]])
							rows[groups[g][k]].ran = 1;
					continue;
				}
				for (int k = 0; k < 5; k++) {
					int m = groups[g][k];
					if (m < 0 || !d.modes[m])
						continue;
					if (run_mode(&d, m, &rows[m], err, sizeof(err)) != 0) {
						fprintf(stderr, "fs-engine-bench run: FAILED: %s\n", err);
						fail = 1;
					}
				}
				int st = daemon_stop(&d, dp);
				if (st != 0) {
					fprintf(stderr,
						"fs-engine-bench run: FAILED: foresightd exited %d (log %s/daemon-%s.log)\n",
						st, d.work, eb_mode_name(policy[g]));
					fail = 1;
				}
			}
			/* Checksums: every window, every mode, every engine, every
			 * repetition and budget against the same reference. */
			for (int m = 0; m < EB_NMODES; m++)
				if (rows[m].ok) {
					uint64_t b = check_sums(&d, m, ref, have, nwin, &compared);
					if (b) {
						rows[m].ok = 0; /* its row says FAILED */
						bad += b;
					}
					modes_checked += d.rep == 1 && bi == 0;
				}
			table(&d, rows);
			size_t at = nrec;
			records(&d, rows, label, bound, recs, &nrec);
			for (size_t i = at; csv && i < nrec; i++)
				eb_csv_row(csv, &recs[i]);
			if (csv)
				fflush(csv);
		}
		printf("\n== %s: %d repetition(s)\n", label, d.reps);
		if (eb_report(stdout, recs + first_rec, nrec - first_rec) != 0)
			fail = 1;
	}
	if (csv)
		fclose(csv);
	uint64_t run_ck = EB_FNV_INIT;
	for (uint32_t w = 0; w < nwin; w++)
		run_ck = eb_fnv(run_ck, &ref[w], sizeof(ref[w]));
	free(ref);
	free(have);
	free(recs);
	eb_route_free(&r);
	printf("\narena: built %u time(s), reused by %u daemon start(s) (the fd store)\n", d.arena_builds,
	       d.arena_reuses);
	printf("checksums: %llu window results compared over %d modes x %u engine(s): %s\n",
	       (unsigned long long)compared, modes_checked, d.engines,
	       bad           ? "MISMATCH" :
	       modes_checked ? "all equal" :
			       "none");
	printf("run checksum %016llx\n", (unsigned long long)run_ck);
	if (bad) {
		fprintf(stderr, "fs-engine-bench run: FAILED: %llu checksum mismatches across modes\n",
			(unsigned long long)bad);
		fail = 1;
	}
	if (d.kept_fd >= 0)
		close(d.kept_fd);
	if (d.notify_fd >= 0) {
		close(d.notify_fd);
		unlink(d.notify);
	}
	unlink(d.sock);
	char fdsock[320];
	snprintf(fdsock, sizeof(fdsock), "%s.fd", d.sock);
	unlink(fdsock);
	rmdir(sockdir);
	if (!d.keep && !d.workdir_opt && !fail) {
		char cmd[400];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d.work);
		int sr = system(cmd);
		(void)sr;
	} else {
		printf("logs: %s\n", d.work);
	}
	if (fail)
		fprintf(stderr, "fs-engine-bench run: FAILED\n");
	return fail ? 1 : 0;
}
