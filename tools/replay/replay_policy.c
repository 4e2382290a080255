/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_policy.c: each policy of --compare as a configuration of the one
 * residency core.  The baselines are fixed here, so no option can tune
 * them:
 *  - static: the profile built from the trace's own prefill rows (or
 *    warm-up windows) fills every slot and never changes; a miss is
 *    computed on the CPU and copies nothing.
 *  - lru: every slot is a per-layer recency slot (one LRU per layer over
 *    the same slots), empty at the start; every miss is copied in and
 *    usable from the next window on, whatever the bus (the core is given
 *    no bus limit and no spare slots).
 *  - static-layer (not in --compare): static with each layer's own share
 *    of the slots, the definition of ../shared/tools/replay_ref.py
 *    (replay_layer.c; tests/replay_oracle_test.sh compares the two).
 *  - strata-adapt (not in --compare: one card, one engine): the peer users
 *    of Strata run, static then adapted in batches from decayed use; not a
 *    core configuration, its own loop (replay_strata.c).
 * Every policy's core configuration is foresightd's, assembled from
 * foresightd's options by the daemon's own fsd_config_residency
 * (daemon/fsd_core_config.c): ours from the options fs-replay was given
 * (its FSD_POLICY rows, the same flags and config file as foresightd's),
 * the baselines from the rows' defaults, then each policy's sizes.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "replay.h"

static const char *const names[RP_N] = {"static",  "lru",      "static+recency", "static+predicted", "all",
					"learned", "lru-warm", "static-layer",   "strata-adapt"};

const char *replay_policy_name(enum replay_policy_id p)
{
	return (unsigned)p < RP_N ? names[p] : "?";
}

int replay_policy_by_name(const char *name)
{
	for (int i = 0; i < RP_N; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

int replay_policy_uses_profile(enum replay_policy_id p)
{
	return p != RP_LRU;
}

int replay_policy_predicts(enum replay_policy_id p)
{
	return p == RP_STATIC_PREDICTED || p == RP_ALL;
}

int replay_policy_ours(enum replay_policy_id p)
{
	return p == RP_STATIC_RECENCY || p == RP_STATIC_PREDICTED || p == RP_ALL || p == RP_LEARNED;
}

uint32_t replay_slots(const struct replay_model *m, const struct fs_trace *t)
{
	uint64_t all = (uint64_t)t->layers * t->experts;
	uint64_t s = m->slots ? m->slots : (uint64_t)llround(m->slots_frac * (double)all);
	if (s < 1)
		s = 1;
	return s > all ? (uint32_t)all : (uint32_t)s;
}

/* The baselines keep no per-layer tier: every one of FS_TIERS' LAYER rows
 * is zeroed here, so a new tier needs no line in this file. */
static void no_layer_tiers(struct fsr_config *cfg)
{
#define ZERO_CARD(name)
#define ZERO_LAYER(name) cfg->name##_slots = 0;
#define ZERO_TIER(A, NAME, name, what, SCOPE, ...) ZERO_##SCOPE(name)
	FS_TIERS(ZERO_TIER, ~)
#undef ZERO_TIER
#undef ZERO_LAYER
#undef ZERO_CARD
}

int replay_policy_config(enum replay_policy_id p, const struct replay_model *m, const struct fs_trace *t,
			 struct fsr_config *cfg)
{
	int ours = replay_policy_ours(p);
	if (!ours && p != RP_STATIC && p != RP_STATIC_LAYER && p != RP_LRU && p != RP_LRU_WARM &&
	    p != RP_STRATA_ADAPT)
		return -EINVAL;
	/* foresightd's options: ours as given, the baselines at the defaults
	 * (no option tunes them); the machine is the model's. */
	struct fsd_config fc;
	if (ours)
		fc = m->daemon;
	else
		fsd_config_defaults(&fc);
	fc.cards = m->cards ? m->cards : 1;
	if (fc.cards > FS_MAX_CARDS)
		return -EINVAL;
	fc.slots = replay_slots(m, t); /* per card, as foresightd's --slots */
	fc.layers = t->layers;
	fc.experts = t->experts;
	fc.max_clients = m->clients ? m->clients : 1;
	fc.expert_bytes = m->expert_bytes; /* replay_run.c gives the core each expert's size */
	fc.bus_gbps = m->bus_gbps;
	fc.tiers = 1;
	fsd_config_residency(&fc, cfg); /* the daemon's own assembly */
	cfg->layer_ns = (uint64_t)llround(m->intercept_ms * 1e6 / t->layers);
	switch (p) {
	case RP_STATIC:
	case RP_STRATA_ADAPT: /* its start; replay_strata.c runs it, no option tunes it */
	case RP_STATIC_LAYER: /* replay_run.c sets its slots to the experts chosen */
		no_layer_tiers(cfg);
		cfg->spare_slots = 0;
		cfg->adapt = 0;
		cfg->bus_gbps = 0.0; /* copies nothing */
		break;
	case RP_LRU:
	case RP_LRU_WARM:
		no_layer_tiers(cfg);
		cfg->recency_slots = FSR_ALL;
		cfg->spare_slots = 0;
		cfg->adapt = 0;
		cfg->bus_gbps = 0.0; /* lands a window later, whatever the bus */
		break;
	default:
		if (m->recency_override)
			cfg->recency_slots = m->recency_override;
		if (p == RP_STATIC_PREDICTED)
			cfg->recency_slots = 0;
		if (p == RP_STATIC_RECENCY)
			cfg->predicted_slots = 0;
		cfg->adapt = (uint32_t)m->adapt;
		cfg->pred_min_score = m->pred_min_score;
		/* learned: the engine posts its routing only, the core predicts
		 * (fsr_learn.c); the others as foresightd's learn option says
		 * (auto: silent for an engine that posts predictions). */
		if (p == RP_LEARNED)
			cfg->learn = FSR_LEARN_ON;
		break;
	}
	if (!ours)
		cfg->learn = FSR_LEARN_OFF; /* the baselines predict nothing */
	fsr_config_defaults(cfg);           /* the core's defaults for what is left 0 */
	return 0;
}
