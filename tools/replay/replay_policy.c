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
 * Our policies take the tier sizes, decay and bus share from the model
 * (defaults: the core's, fsr_config_tiers()).
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "replay.h"

static const char *const names[RP_N] = {"static", "lru",      "static+recency", "static+predicted",
					"all",    "lru-warm", "static-layer"};

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

uint32_t replay_slots(const struct replay_model *m, const struct fs_trace *t)
{
	uint64_t all = (uint64_t)t->layers * t->experts;
	uint64_t s = m->slots ? m->slots : (uint64_t)llround(m->slots_frac * (double)all);
	if (s < 1)
		s = 1;
	return s > all ? (uint32_t)all : (uint32_t)s;
}

int replay_policy_config(enum replay_policy_id p, const struct replay_model *m, const struct fs_trace *t,
			 struct fsr_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->cards = m->cards ? m->cards : 1;
	if (cfg->cards > FS_MAX_CARDS)
		return -EINVAL;
	for (uint32_t c = 0; c < cfg->cards; c++) /* per card, as foresightd's --slots */
		cfg->slots[c] = replay_slots(m, t);
	cfg->layers = t->layers;
	cfg->experts = t->experts;
	cfg->max_clients = m->clients ? m->clients : 1;
	fsr_config_tiers(cfg);
	cfg->layer_ns = (uint64_t)llround(m->intercept_ms * 1e6 / t->layers);
	switch (p) {
	case RP_STATIC:
	case RP_STATIC_LAYER: /* replay_run.c sets its slots to the experts chosen */
		cfg->recency_slots = cfg->predicted_slots = cfg->spare_slots = 0;
		cfg->adapt = 0;
		break;
	case RP_LRU:
	case RP_LRU_WARM:
		cfg->recency_slots = FSR_ALL;
		cfg->predicted_slots = cfg->spare_slots = 0;
		cfg->adapt = 0;
		cfg->bus_gbps = 0.0; /* lands a window later, whatever the bus */
		break;
	case RP_STATIC_RECENCY:
	case RP_STATIC_PREDICTED:
	case RP_ALL:
		cfg->recency_slots = p == RP_STATIC_PREDICTED ? 0 : m->recency;
		cfg->predicted_slots = p == RP_STATIC_RECENCY ? 0 : m->predicted;
		cfg->spare_slots = m->spare;
		cfg->adapt = m->adapt;
		cfg->freq_decay = m->decay;
		cfg->pred_min_score = m->pred_min_score;
		cfg->bus_gbps = m->bus_gbps;
		cfg->bus_share_pct = m->bus_share_pct;
		if (m->tier_adapt >= 0)
			cfg->tier_adapt = (uint32_t)m->tier_adapt;
		if (m->admit_value >= 0)
			cfg->admit_value = (uint32_t)m->admit_value;
		if (m->cross_window >= 0)
			cfg->cross_window = m->cross_window ? FSR_CROSS_DEFAULT : 0;
		break;
	default:
		return -EINVAL;
	}
	fsr_config_defaults(cfg); /* the core's defaults for what the model left 0 */
	return 0;
}
