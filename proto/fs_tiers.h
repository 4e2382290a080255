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
 * gauge's place among the card counters: FS_PROTO_VERSION then moves, as
 * for any counter) and one file.
 *
 * X(A, NAME, name, what): A is passed through (the caller's own macro, for
 * lists built inside other lists), NAME and name the enum's and the
 * counter's spellings, `what` one line for docs and help.
 */
#ifndef FS_TIERS_H
#define FS_TIERS_H

#define FS_TIERS(X, A)                                                                 \
	X(A, STATIC, static, "the profile: the card's hottest experts by decayed use") \
	X(A, RECENCY, recency, "experts that just missed, per layer")                  \
	X(A, PREDICTED, predicted, "router-ahead candidates within a window, per layer")

/* The card counter rows (fs_counters.h): X(tier_<name>, help). */
#define FS_TIER_GAUGE_ROW(X, NAME, name, what) \
	X(tier_##name, "slots of the " #name " tier, landed or loading (gauge)")
#define FS_TIER_GAUGES(X) FS_TIERS(FS_TIER_GAUGE_ROW, X)
/* Each tier's reserved size (gauge) and its ghost hits (fs_counters.h, at
 * the end of the card rows): X(size_<name>, help), X(ghost_<name>, help). */
#define FS_TIER_SIZE_ROW(X, NAME, name, what) \
	X(size_##name, "reserved size of the " #name " tier, slots summed over its layers (gauge)")
#define FS_TIER_GHOST_ROW(X, NAME, name, what) \
	X(ghost_##name, "misses on experts the " #name " tier evicted lately (its ghost hits)")
#define FS_TIER_SIZES(X) FS_TIERS(FS_TIER_SIZE_ROW, X)
#define FS_TIER_GHOSTS(X) FS_TIERS(FS_TIER_GHOST_ROW, X)

#endif /* FS_TIERS_H */
