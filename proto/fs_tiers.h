/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_tiers.h: the residency tiers, one row each.
 *
 * The one list every tier output is generated from: the residency core's
 * enum fsr_tier and its names (daemon/residency/fsr.h, fsr_tiers.c), and
 * each card's tier gauge in the counters (fs_counters.h: the rows keep
 * their place in the card counters, so the shared layout does not move).
 * What a tier does is its ops (daemon/residency/fsr_tier_<name>.c).
 *
 * Adding a tier: one row here (in eviction-table order, which is also its
 * gauge's place among the card counters; whether that moves
 * FS_PROTO_VERSION is proto/README.md's rule, an incompatible change to what
 * engines map) and its file, daemon/residency/fsr_tier_<name>.c (its
 * struct fsr_tier_ops: how it sizes itself, admits, is used, gives up a
 * slot).  What else names the tier is generated from the row: the core's
 * enum fsr_tier, its names and ops table, the gauges, fs-replay's
 * per-tier counters, fsctl top's column, and for a per-layer tier its size:
 * the fsr_config field <name>_slots, foresightd's option and config key
 * <name>_slots (fsd_options.h) and fs-replay's --<name>-slots.
 *
 * X(A, NAME, name, what, SCOPE, slots_help): A is passed through (the
 * caller's own macro, for lists built inside other lists), NAME and name
 * the enum's and the counter's spellings, `what` one line for docs and
 * help; SCOPE is CARD (one reserved size per card: what the layers' tiers
 * leave, no option) or LAYER (a reserved size per layer, the option
 * <name>_slots, whose --help is slots_help).  Macros that take rows end in
 * `...`, so a column added later changes only those that read it.
 */
#ifndef FS_TIERS_H
#define FS_TIERS_H

// clang-format off
#define FS_TIERS(X, A)                                                                             \
	X(A, STATIC, static, "the profile: the card's hottest experts by decayed use", CARD, "")     \
	X(A, RECENCY, recency, "experts that just missed, per layer", LAYER,                         \
	  "recency tier slots per layer beside a card-wide static tier, -1 auto: a 16th of the "     \
	  "share, rounded down")                                                                     \
	X(A, PREDICTED, predicted, "router-ahead candidates within a window, per layer", LAYER,      \
	  "predicted tier slots per layer, -1 auto: a 16th of the share, rounded down, at most the " \
	  "copies the bus lands per layer time (1..4)")
// clang-format on

/* The card counter rows (fs_counters.h): X(tier_<name>, help). */
#define FS_TIER_GAUGE_ROW(X, NAME, name, what, ...) \
	X(tier_##name, "slots of the " #name " tier, landed or loading (gauge)")
#define FS_TIER_GAUGES(X) FS_TIERS(FS_TIER_GAUGE_ROW, X)
/* Each tier's reserved size (gauge) and its ghost hits (fs_counters.h, at
 * the end of the card rows): X(size_<name>, help), X(ghost_<name>, help). */
#define FS_TIER_SIZE_ROW(X, NAME, name, what, ...) \
	X(size_##name, "reserved size of the " #name " tier, slots summed over its layers (gauge)")
#define FS_TIER_GHOST_ROW(X, NAME, name, what, ...) \
	X(ghost_##name, "misses on experts the " #name " tier evicted lately (its ghost hits)")
#define FS_TIER_SIZES(X) FS_TIERS(FS_TIER_SIZE_ROW, X)
#define FS_TIER_GHOSTS(X) FS_TIERS(FS_TIER_GHOST_ROW, X)

#endif /* FS_TIERS_H */
