/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_counters.h: the one list of telemetry counters.
 *
 * Each X(name, help) line below generates the shared-memory layout, the
 * `fsctl stats` text, the JSON of the stats reply and the Prometheus text:
 * add a counter here and it appears in every output (varnishstat's VSC).
 * All counters are uint64_t, written only by the daemon with relaxed
 * atomics, read by anyone at any time.
 */
#ifndef FS_COUNTERS_H
#define FS_COUNTERS_H

#include <stdint.h>

#include "fs_proto.h"
#include "fs_tiers.h"

/* Whole daemon. */
#define FS_COUNTERS_DAEMON(X)                                                                                \
	X(epochs, "residency epochs published (each a new slot map for the engines)")                        \
	X(publish_deferred, "publishes put off: every epoch buffer held")                                    \
	X(attaches, "clients attached")                                                                      \
	X(detaches, "clients detached (any reason)")                                                         \
	X(deaths, "clients found dead (process exited)")                                                     \
	X(stale, "clients dropped for a stale heartbeat or an overlong hold")                                \
	X(refused, "control requests refused (credentials, version, limits)")                                \
	X(bad_requests, "malformed control requests")                                                        \
	X(windows, "decode windows ended (all clients)")                                                     \
	X(records, "ring records consumed")                                                                  \
	X(bad_records, "ring records rejected (type, fields, bounds)")                                       \
	X(bad_index, "impossible ring head/tail seen")                                                       \
	X(bad_holds, "hold words refused: no epoch the client acquired")                                     \
	X(hot_wakeups, "times the hot thread woke from sleep")                                               \
	X(arena_loaded_bytes, "arena bytes read from the model file so far")                                 \
	X(arena_bytes, "arena bytes to read from the model file (gauge; 0: synth)")                          \
	X(arena_load_ns, "nanoseconds spent loading the arena")                                              \
	X(arena_reused, "1: arena taken over from the fd store, not loaded (gauge)")                         \
	X(oversized, "control requests over the size limit, refused")                                        \
	X(bad_heartbeats, "client heartbeats from the future (client dropped)")                              \
	X(bad_names, "attach names escaped or cut to printable ASCII (fs_name.h)")                           \
	X(arena_load_bps, "arena load rate so far, bytes per second (gauge)")                                \
	X(arena_load_left_ns, "arena load: nanoseconds left at that rate (gauge)")                           \
	X(arena_layers_loaded, "layers whose experts are all in the arena (gauge)")                          \
	X(arena_unloaded_recs, "uses/predictions of layers not in yet (no action)")                          \
	X(backoff_refused, "attaches refused: revoked for an overlong hold, backing off")                    \
	X(attach_capped, "attaches refused, or half-open rows taken, for a user's or process's share")       \
	X(pending_expired, "attaches dropped: no fd handshake within 2 s")                                   \
	X(replies_dropped, "control replies dropped: not read within 1 s, or requests piled up behind them") \
	X(conns_refused, "control connections closed at once: over a process's, user's or the fd budget")    \
	X(conns_reaped, "idle control connections closed to keep half the connection budget free")           \
	X(control_relistens, "control socket listened on anew: its listener had stopped taking connections") \
	X(over_budget, "clients revoked at once: their user's holds pinned more slots than its budget")

/* Per card. */
#define FS_COUNTERS_CARD(X)                                                                \
	X(hits, "expert uses served from this card's slots")                               \
	X(misses, "expert uses on this card served by the CPU path")                       \
	X(predicted, "predictions received for this card")                                 \
	X(copied, "copies landed in this card's slots")                                    \
	X(late, "uses that missed while the expert's copy was in flight")                  \
	X(dropped, "predictions and wants the daemon dropped (dup, no slot, stale, down)") \
	X(evicted, "slots evicted")                                                        \
	X(copied_bytes, "bytes copied into this card's slots")                             \
	X(bus_busy_ns, "nanoseconds the copy path was busy")                               \
	X(resident, "slots holding a landed expert (gauge)")                               \
	X(loading, "slots with a copy in flight (gauge)")                                  \
	FS_TIER_GAUGES(X) /* tier_<name>, one per row of fs_tiers.h */                     \
	X(landed_late, "copies that landed after their deadline")                          \
	X(too_late, "wants not copied: the bus could not land them in time")               \
	X(promoted, "experts moved into the static tier by measured use")                  \
	X(up, "1 while the card serves, 0 once it is down until a restart (gauge)")        \
	X(abandoned, "copies in flight when the card went down: they never land")          \
	X(done_after_down, "copy completions reported after the card went down, ignored")  \
	X(freed_past_holds, "reused past an older hold: in no table its holder reads")     \
	FS_TIER_SIZES(X)  /* size_<name>: each tier's reserved size (gauge) */             \
	FS_TIER_GHOSTS(X) /* ghost_<name>: misses its ghost list caught */                 \
	X(learned, "predictions foresightd's learned predictor made for this card (learn)")

/* Per layer (all cards). */
#define FS_COUNTERS_LAYER(X)                                          \
	X(hits, "expert uses of this layer served from slots")        \
	X(misses, "expert uses of this layer served by the CPU path") \
	X(predicted, "predictions for this layer")                    \
	X(copied, "copies landed for this layer")                     \
	X(late, "uses that missed while the copy was in flight")      \
	X(landed_late, "copies for this layer that landed after their deadline")

/* Per attached client (indexed by its slot in the daemon's client table). */
#define FS_COUNTERS_CLIENT(X)                                                                     \
	X(pid, "process id (gauge)")                                                              \
	X(uid, "user id (gauge)")                                                                 \
	X(records, "records consumed from its ring")                                              \
	X(bad_records, "records rejected")                                                        \
	X(windows, "windows ended")                                                               \
	X(hits, "expert uses served from slots")                                                  \
	X(misses, "expert uses served by the CPU path")                                           \
	X(predicted, "predictions posted")                                                        \
	X(ring_full, "posts its ring refused (client's own count)")                               \
	X(dev_records, "records consumed from its device ring")                                   \
	X(dev_full, "device-ring posts refused (its kernels' count)")                             \
	X(dev_seen_ns, "when a device-ring record was last consumed (gauge, CLOCK_MONOTONIC ns)") \
	X(holds, "epochs held now (gauge)")                                                       \
	X(holds_refused, "hold words refused: no epoch it acquired (its region says why)")        \
	X(pinned, "RETIRING slots its holds keep from reuse, all cards (gauge)")                  \
	X(redials, "control dialers it replaced: requests found no connection (client's own count)")

#define FS_X_ENUM(name, help) FS_C_##name,
enum fs_counter_daemon { FS_COUNTERS_DAEMON(FS_X_ENUM) FS_N_DAEMON };
#undef FS_X_ENUM
#define FS_X_ENUM(name, help) FS_CC_##name,
enum fs_counter_card { FS_COUNTERS_CARD(FS_X_ENUM) FS_N_CARD };
#undef FS_X_ENUM
#define FS_X_ENUM(name, help) FS_CL_##name,
enum fs_counter_layer { FS_COUNTERS_LAYER(FS_X_ENUM) FS_N_LAYER };
#undef FS_X_ENUM
#define FS_X_ENUM(name, help) FS_CCL_##name,
enum fs_counter_client { FS_COUNTERS_CLIENT(FS_X_ENUM) FS_N_CLIENT };
#undef FS_X_ENUM

/*
 * Layout at fs_daemon_hdr.off_counters:
 *   struct fs_counters_hdr
 *   uint64_t daemon[FS_N_DAEMON]
 *   uint64_t card[cards][FS_N_CARD]
 *   uint64_t layer[layers][FS_N_LAYER]
 *   uint64_t client[max_clients][FS_N_CLIENT]
 */
struct fs_counters_hdr {
	uint32_t n_daemon, n_card, n_layer, n_client; /* as compiled into the daemon */
	uint32_t cards, layers, max_clients, pad;
	uint64_t client_active; /* bitmap of client rows in use (max_clients <= 64) */
	uint64_t pad2[3];
};
_Static_assert(sizeof(struct fs_counters_hdr) == 64, "counters header is one line");

static inline uint64_t fs_counters_bytes(uint32_t cards, uint32_t layers, uint32_t max_clients)
{
	return sizeof(struct fs_counters_hdr) +
	       8ull * (FS_N_DAEMON + (uint64_t)cards * FS_N_CARD + (uint64_t)layers * FS_N_LAYER +
		       (uint64_t)max_clients * FS_N_CLIENT);
}

#endif /* FS_COUNTERS_H */
