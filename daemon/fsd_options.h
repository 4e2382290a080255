/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_options.h: foresightd's options, one row each.  FSD_OPTIONS is the
 * only place an option is written down; it generates
 *  - the struct fsd_config members (below),
 *  - the defaults (fsd_config_defaults, fsd_options.c),
 *  - the option table fsd_opt_rows: the command-line flag --KEY (with '_'
 *    as '-'), the config file key KEY, the type check and range, the
 *    reload rule (fsd_options.c; foresightd's command line and reload in
 *    fsd_config.c),
 *  - fs-replay's policy options and its reading of the same config file
 *    (the rows flagged FSD_POLICY),
 *  - `foresightd --help` (the help text, then "(default: X)" from the row),
 *  - the man page lists: `foresightd --config-reference` prints every row,
 *    and docs/man builds foresightd(8) OPTIONS and foresightd.json(5) KEYS
 *    from it; man_test fails when a page and this list disagree.
 * So a help text never states a default: the row's default column does.
 *
 * A row: X(key, field, type, size, default, min, max, flags, help)
 *  - key: the config key and, with '_' as '-', the flag;
 *  - field: the member of struct fsd_config;
 *  - type: STR (char[size]), U32, U64, DBL, INT (int), MODE (octal
 *    permissions), FLAG (u32 0/1, no value on the command line; true/false
 *    in the file), ONOFF (u32 0/1 written "on"/"off");
 *  - size: a STR's buffer (0 for the others);
 *  - min, max: the accepted range of a number (0, 0 for STR, FLAG, ONOFF);
 *  - flags: 0, or any of
 *    FSD_RELOAD: SIGHUP applies a change to the running daemon
 *    (fsd_config_reload: only for a STR read by the loop thread alone, or
 *    a 4-byte number that other threads read with relaxed atomic loads;
 *    fsd_options.c checks this at compile time); without it a change
 *    needs a restart;
 *    FSD_POLICY: residency policy, or the cards, slots and epochs it
 *    runs with: fs-replay takes the option too, with this key, flag, type,
 *    range, help and default, on its command line and from the same config
 *    file (tools/replay/replay_opts.c; replay_opts_test pins the set).  Only
 *    three defaults are fs-replay's own, its model of the machine rather
 *    than the daemon's: cards 1, slots a share of the trace's experts
 *    (--slots-frac), publish_us 0 (replay_opts.c: replay_own_defaults).
 */
#ifndef FSD_OPTIONS_H
#define FSD_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fs_regions.h" /* FS_MAX_CARDS, FS_MAX_LAYERS, FS_MAX_EXPERTS, FS_MAX_EPOCH_BUFS */
#include "fs_ring.h"    /* FS_RING_MIN_ENTRIES, FS_RING_MAX_ENTRIES */
#include "fs_tiers.h"   /* FS_TIERS: each per-layer tier's <name>_slots row */

/* A per-layer tier's size option, from its FS_TIERS row; a card-wide tier
 * (what the layers' tiers leave) has none. */
#define FSD_TIER_SLOTS_CARD(X, name, help)
#define FSD_TIER_SLOTS_LAYER(X, name, help) \
	X(name##_slots, name##_slots, INT, 0, -1, -1, 1 << 24, FSD_POLICY, help)
#define FSD_TIER_SLOTS_ROW(X, NAME, name, what, SCOPE, help) FSD_TIER_SLOTS_##SCOPE(X, name, help)

#define FSD_RELOAD 1u
#define FSD_POLICY 2u

#define FS_DEFAULT_SOCKET_PATH "/run/foresight/control.sock"
#define FSD_MAX_CLIENTS 64u

/* clang-format off */
#define FSD_OPTIONS(X) \
	X(socket, socket_path, STR, 108, FS_DEFAULT_SOCKET_PATH, 0, 0, 0, \
	  "control socket path") \
	X(backend, backend, STR, 16, "host", 0, 0, 0, \
	  "backend: host (stand-in cards in host memory) or cuda (every visible GPU)") \
	X(group, group, STR, 64, "", 0, 0, 0, \
	  "group whose members may attach") \
	X(socket_mode, socket_mode, MODE, 0, 0660, 0, 0777, 0, \
	  "permissions of the sockets, octal") \
	X(cards, cards, U32, 0, 2, 1, FS_MAX_CARDS, FSD_POLICY, \
	  "host: stand-in cards; cuda: use at most this many, every visible GPU when not given") \
	X(pool_mib, pool_mib, U32, 0, 0, 0, 1u << 24, 0, \
	  "cuda: slot pool MiB per card instead of --slots; 0: --slots") \
	X(leave_free_mib, leave_free_mib, U32, 0, 0, 0, 1u << 24, 0, \
	  "cuda: size each pool to leave this many MiB free instead of --slots; 0: --slots") \
	X(streams, streams, U32, 0, 2, 1, 8, 0, \
	  "cuda: prefetch streams per card") \
	X(slots, slots, U32, 0, 128, 1, 1 << 24, FSD_POLICY, \
	  "slots per card") \
	X(bus_gbps, bus_gbps, DBL, 0, 13.5, 0.01, 10000, FSD_POLICY, \
	  "emulated bus per card, GB/s: the host backend's copy threads; cuda: when given, copies " \
	  "land no faster (a token bucket per card), else at the link's speed") \
	X(model, model_path, STR, 4096, "", 0, 0, 0, \
	  "a GGUF MoE model file to serve; none: a synthetic arena") \
	X(model_name, model, STR, 64, "synthetic", 0, 0, 0, \
	  "name of the served model; with --model and no name given: the file's general.name") \
	X(describe, describe, FLAG, 0, 0, 0, 1, 0, \
	  "with --model: print the arena plan as JSON and exit") \
	X(allow_unlocked, allow_unlocked, FLAG, 0, 0, 0, 1, 0, \
	  "serve the --model arena even when it cannot be locked in memory (mlock)") \
	X(layers, layers, U32, 0, 16, 1, FS_MAX_LAYERS, 0, \
	  "synthetic arena: MoE layers") \
	X(experts, experts, U32, 0, 64, 1, FS_MAX_EXPERTS, 0, \
	  "synthetic arena: experts per layer") \
	X(experts_used, experts_used, U32, 0, 8, 0, FS_MAX_EXPERTS, 0, \
	  "synthetic arena: top-k") \
	X(expert_bytes, expert_bytes, U64, 0, 65536, 64, 1ull << 32, 0, \
	  "synthetic arena: bytes per expert") \
	X(seed, seed, U64, 0, 1, 0, 18446744073709551615.0, 0, \
	  "synthetic arena: byte generator seed") \
	X(max_clients, max_clients, U32, 0, 32, 1, FSD_MAX_CLIENTS, 0, \
	  "engines attached at once") \
	X(ring_entries, ring_entries, U32, 0, 4096, FS_RING_MIN_ENTRIES, FS_RING_MAX_ENTRIES, 0, \
	  "records per client ring, a power of two") \
	X(epoch_bufs, epoch_bufs, U32, 0, 16, 3, FS_MAX_EPOCH_BUFS, 0, \
	  "epoch buffers") \
	X(heartbeat_ms, heartbeat_ms, U32, 0, 100, 10, 60000, 0, \
	  "daemon heartbeat period") \
	X(liveness_ms, liveness_ms, U32, 0, 5000, 50, 600000, FSD_RELOAD, \
	  "a client whose heartbeat is older is dropped") \
	X(hold_timeout_ms, hold_timeout_ms, U32, 0, 10000, 10, 3600000, FSD_RELOAD, \
	  "an epoch held longer is revoked, the client dropped") \
	X(hold_pressure_ms, hold_pressure_ms, U32, 0, 0, 0, 3600000, FSD_RELOAD, \
	  "when the slots an old hold keeps retired are an eighth of a card's pool, it is revoked this " \
	  "long after its epoch was superseded; 0: off, only hold_timeout_ms") \
	X(pin_share_pct, pin_share_pct, U32, 0, 100, 0, 100, FSD_RELOAD, \
	  "a user's holds may keep this % of its share of a card's slots (slots / users attached) " \
	  "from reuse; past it its holder is revoked at once and the user backs off; 0: off") \
	X(pin_grace_ms, pin_grace_ms, U32, 0, 1000, 0, 3600000, FSD_RELOAD, \
	  "a hold past its user's pin budget is charged once its epoch was superseded this long " \
	  "(an honest window, however loaded the host, is shorter)") \
	X(publish_us, publish_us, U32, 0, 200, 0, 1000000, FSD_RELOAD | FSD_POLICY, \
	  "minimum interval between epochs") \
	X(spin_us, spin_us, U32, 0, 50, 0, 10000000, FSD_RELOAD, \
	  "hot thread: spin this long with nothing to do before sleeping (more: lower latency, a " \
	  "busy core)") \
	X(spin_adapt_us, spin_adapt_us, U32, 0, 0, 0, 10000000, FSD_RELOAD, \
	  "hot thread: while work arrives after idle gaps no longer than this, spin through twice " \
	  "their mean instead of sleeping (past spin_us it yields the core each pass): the engines' " \
	  "rhythm, no wake-up on their path, a busy core while they post; 0: off (e.g. 1000: on)") \
	X(rhythm_us, rhythm_us, U32, 0, 2000, 0, 10000000, FSD_RELOAD, \
	  "hot thread: follow the engines' rhythm: from the idle gaps longer than spin_us and no " \
	  "longer than this (their layers and windows), sleep until just before the next post is due " \
	  "and spin through the moment it is, so it finds the thread awake; 0: off (spin spin_us, " \
	  "then sleep until woken)") \
	X(dev_poll_us, dev_poll_us, U32, 0, 50, 1, 1000000, 0, \
	  "hot thread: longest sleep while an engine's kernels may post to its device ring, which a " \
	  "GPU cannot wake") \
	X(max_inflight, max_inflight, U32, 0, 32, 1, 4096, FSD_POLICY, \
	  "copies in flight per card") \
	X(log_level, log_level, INT, 0, 6, 0, 7, FSD_RELOAD, \
	  "3 errors .. 7 debug") \
	/* Tiers on: the daemon runs the policies fs-replay measured.  The \
	 * sizes and the decay default to the core's (fsr_core.c gives the \
	 * reasons); the copy scheduler leaves a fifth of the bus to the \
	 * engines' own demand copies, which must not be starved. */ \
	X(tiers, tiers, U32, 0, 1, 0, 1, 0, \
	  "residency tiers and the copy scheduler: 1 on, 0 the untiered policy") \
	/* <name>_slots of each per-layer tier, from its row (fs_tiers.h) */ \
	FS_TIERS(FSD_TIER_SLOTS_ROW, X) \
	X(spare_slots, spare_slots, INT, 0, -1, -1, 1 << 24, FSD_POLICY, \
	  "free slots per card outside the tiers, -1 auto: one per layer, at most 1 % of slots") \
	X(bus_share_pct, bus_share_pct, U32, 0, 80, 1, 100, FSD_POLICY, \
	  "share of the bus the copy scheduler plans with; the rest is the engines'") \
	X(freq_decay, freq_decay, DBL, 0, 0.95, 0.000001, 1, FSD_POLICY, \
	  "static tier: decay of use counts per token") \
	/* Issue 18's levers, each measured alone in fs-replay \
	 * (docs/results/replay.md); on by default only what won there. */ \
	X(admit_value, admit_value, ONOFF, 0, 1, 0, 1, FSD_POLICY, \
	  "while demand copies fill most of the bus, copy an expert into the static or recency " \
	  "tier only when it has been used more than the slot it displaces") \
	X(tier_adapt, tier_adapt, ONOFF, 0, 0, 0, 1, FSD_POLICY, \
	  "size each layer's recency tier against the static tier from ghost hits (ARC-like)") \
	X(cross_window, cross_window, ONOFF, 0, 0, 0, 1, FSD_POLICY, \
	  "predict layers 0-2 of an engine's next window from the experts its last window used there") \
	X(demand_late, demand_late, ONOFF, 0, 0, 0, 1, FSD_POLICY, \
	  "hand a copy for a missed expert to the bus only when its deadline (the layer's next run) " \
	  "nears, leaving the bus to predictions until then") \
	X(pred_value, pred_value, ONOFF, 0, 0, 0, 1, FSD_POLICY, \
	  "the bus carries the likeliest predictions it can land in time, not the soonest due") \
	X(pred_adapt, pred_adapt, ONOFF, 0, 0, 0, 1, FSD_POLICY, \
	  "the auto-sized predicted tier gives slots back to the static tier while its copies " \
	  "are used much less often than the static tier's, and takes them back when they are not") \
	/* Issue 32: predictions from the usage records alone (fsr_learn.c). */ \
	X(learn, learn, U32, 0, 0, 0, 2, FSD_POLICY, \
	  "the learned predictor, which predicts the next layers' experts from the routing engines " \
	  "post: 0 off, 1 for engines that post no predictions of their own, 2 for every engine " \
	  "(on llama.cpp's cold decode its copies cost more bus than their hits save)") \
	X(fill, fill, ONOFF, 0, 1, 0, 1, 0, \
	  "when the pool has a slot for every expert, copy every expert in once the arena is " \
	  "loaded (the most used first), instead of each at its first use") \
	X(learn_min_p, learn_min_p, DBL, 0, 0.01, 0.001, 1, FSD_POLICY, \
	  "the learned predictor posts no candidate whose measured chance of use is below this") \
	X(learn_decay, learn_decay, DBL, 0, 0.9995, 0.5, 1, FSD_POLICY, \
	  "the learned predictor: decay of what it learned, per token") \
	X(metrics_listen, metrics_listen, STR, 64, "", 0, 0, FSD_RELOAD, \
	  "serve Prometheus metrics at http://ADDR:PORT/metrics; ADDR an IP literal, loopback " \
	  "unless metrics_allow_remote (e.g. 127.0.0.1:9464 or [::1]:9464; port 0: any free one; " \
	  "none: off)") \
	X(metrics_allow_remote, metrics_allow_remote, FLAG, 0, 0, 0, 1, FSD_RELOAD, \
	  "let metrics_listen be a non-loopback address (the endpoint has no authentication)") \
	X(peer, peer, ONOFF, 0, 1, 0, 1, 0, \
	  "on: cards whose engines can read each other's slots (CUDA peer access; every card on " \
	  "the host backend) share one expert tier; off: each card keeps its own")
/* clang-format on */

/* The members of each type. */
#define FSD_OPT_MEMBER_STR(f, n) char f[n];
#define FSD_OPT_MEMBER_U32(f, n) uint32_t f;
#define FSD_OPT_MEMBER_U64(f, n) uint64_t f;
#define FSD_OPT_MEMBER_DBL(f, n) double f;
#define FSD_OPT_MEMBER_INT(f, n) int f;
#define FSD_OPT_MEMBER_MODE(f, n) unsigned f;
#define FSD_OPT_MEMBER_FLAG(f, n) uint32_t f;
#define FSD_OPT_MEMBER_ONOFF(f, n) uint32_t f;
#define FSD_OPT_MEMBER(key, field, type, size, dflt, lo, hi, rl, help) FSD_OPT_MEMBER_##type(field, size)

struct fsd_config {
	FSD_OPTIONS(FSD_OPT_MEMBER)
	/* Set by the parse, not options: */
	char fd_socket_path[112]; /* socket_path + ".fd" */
	int cards_set;            /* --cards given (cuda: limit, else all devices) */
	int bus_gbps_set;         /* --bus-gbps given (cuda: throttle to it) */
	uint32_t check_config;    /* --check-config [FILE]: validate the settings, exit */
};

/* The option table: one entry per row, in row order (fsd_options.c). */
enum fsd_opt_type {
	FSD_OPT_STR,
	FSD_OPT_U32,
	FSD_OPT_U64,
	FSD_OPT_DBL,
	FSD_OPT_MODE,
	FSD_OPT_INT,
	FSD_OPT_FLAG,  /* u32 0/1, no value */
	FSD_OPT_ONOFF, /* u32 0/1: "on" or "off" (a flag with a value; in the file also true/false) */
};
struct fsd_opt {
	const char *key; /* config key; the flag is --key with '_' -> '-' */
	enum fsd_opt_type type;
	size_t off, size; /* the member of struct fsd_config */
	double min, max;
	const char *help;
	unsigned flags; /* FSD_RELOAD, FSD_POLICY */
};
#define FSD_OPT_ONE(...) +1
enum { FSD_NOPTS = 0 FSD_OPTIONS(FSD_OPT_ONE) };
extern const struct fsd_opt fsd_opt_rows[FSD_NOPTS];

/* One reading of the settings: who reads them (messages start "PROG: ",
 * during a reload "<3>PROG: reload: ") and where each value came from, as
 * the user wrote it: "--slots", "FILE:LINE:COL: key 'slots'",
 * "$FORESIGHT_SOCKET"; "" = the default.  Every later message about an
 * option names it this way. */
struct fsd_opt_src {
	const char *prog;
	int reloading;
	char origin[FSD_NOPTS][300];
};
void fsd_opt_src_init(struct fsd_opt_src *s, const char *prog);
void fsd_opt_err(const struct fsd_opt_src *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const struct fsd_opt *fsd_opt_find(const char *key); /* by config key; NULL: none */
/* "--recency-slots": the row's command-line flag. */
void fsd_opt_flag(const struct fsd_opt *o, char *out, size_t len);
/* Set one option from text (a flag's value, "1" for a FLAG), type and
 * range checked.  0, or -1 with a message naming `where`. */
int fsd_opt_set(const struct fsd_opt_src *s, struct fsd_config *c, const struct fsd_opt *o, const char *val,
		const char *where);
/* Note where `key` was set (fsd_opt_set leaves that to its caller). */
void fsd_opt_note(struct fsd_opt_src *s, const char *key, const char *where);
int fsd_opt_given(const struct fsd_opt_src *s, const char *key); /* set by a file or a flag */
/* How to name `key` in a message: where it was set, or "KEY (default)". */
const char *fsd_opt_origin(const struct fsd_opt_src *s, const char *key);
/* The config file (one flat JSON object of the rows' keys) over c.  0 or
 * -1 (message printed, naming file, line and column). */
int fsd_config_load(struct fsd_opt_src *s, struct fsd_config *c, const char *path);
/* A value as the config file writes it ("on", "0660" quoted; none). */
void fsd_opt_format(const struct fsd_opt *o, const struct fsd_config *c, char *out, size_t len);
/* --help's option lines: each row with any of `flags` (0: every row),
 * its help and "(default: X)" from def. */
void fsd_opt_help(FILE *out, unsigned flags, const struct fsd_config *def);
/* --config-reference[=json|flags]: scdoc text of every row; 0 or 2. */
int fsd_config_reference(const char *mode);

/* foresightd's reading of its settings, kept in struct fsd for a reload:
 * argv of the start (the flags win over the file then as they did at
 * start), the config file, and the settings as parsed (at start, then with
 * each reload's applied keys).  A reload compares against `parsed`, not the
 * running d->cfg, which the start fills in (a GGUF model's layers and name,
 * the CUDA backend's cards and slots): those are not changes of the file. */
struct fsd_settings {
	int argc;
	char **argv;
	const char *file;
	struct fsd_config parsed;
	struct fsd_opt_src src;
};

struct fsd;
struct fsr_config;
/* The rows' defaults (generated from FSD_OPTIONS). */
void fsd_config_defaults(struct fsd_config *c);
/* fsd_config.c: the config file and argv over c (the defaults); exits on
 * --help, --version and --config-reference.  0 or -1 (message printed). */
int fsd_config_parse(struct fsd_settings *st, struct fsd_config *c, int argc, char **argv);
/* fsd_core_config.c: the residency core's whole configuration from the
 * options (sizes, tiers, scheduler, then the core's own defaults): the only
 * place an fsr_config is assembled from settings.  The caller adds what a
 * running daemon has (counters, GGUF blob sizes) before fsr_create. */
void fsd_config_residency(const struct fsd_config *c, struct fsr_config *rc);
/* SIGHUP (loop thread): re-read the settings as at start (config file, then
 * the flags over it); apply the keys marked reloadable, log the changed
 * keys that need a restart.  An invalid file changes nothing.  0 or -1. */
int fsd_config_reload(struct fsd *d);

#endif /* FSD_OPTIONS_H */
