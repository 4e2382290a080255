/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_core_config.c: the residency core's configuration (struct
 * fsr_config) from foresightd's options (struct fsd_config): the only
 * place one is assembled from settings.  foresightd's start and
 * fuzz/hot_fuzz.c call it; it needs neither libuv nor nng (the fsd_opts
 * library), so a host of the core other than foresightd can link it.
 */
#include <string.h>

#include "fsd_options.h"
#include "fsr.h"

void fsd_config_residency(const struct fsd_config *c, struct fsr_config *rc)
{
	memset(rc, 0, sizeof(*rc));
	rc->cards = c->cards;
	for (uint32_t i = 0; i < c->cards && i < FS_MAX_CARDS; i++)
		rc->slots[i] = c->slots;
	rc->layers = c->layers;
	rc->experts = c->experts;
	rc->max_clients = c->max_clients;
	rc->max_inflight = c->max_inflight;
	rc->uniform_bytes = c->expert_bytes;
	if (c->tiers) {
		fsr_config_tiers(rc);
		/* each per-layer tier's size (fs_tiers.h); -1: the core's FSR_AUTO */
#define SLOTS_CARD(name)
#define SLOTS_LAYER(name) rc->name##_slots = c->name##_slots < 0 ? FSR_AUTO : (uint32_t)c->name##_slots;
#define SLOTS_ROW(A, NAME, name, what, SCOPE, ...) SLOTS_##SCOPE(name)
		FS_TIERS(SLOTS_ROW, ~)
#undef SLOTS_ROW
#undef SLOTS_LAYER
#undef SLOTS_CARD
		rc->spare_slots = c->spare_slots < 0 ? FSR_AUTO : (uint32_t)c->spare_slots;
		rc->bus_share_pct = c->bus_share_pct;
		rc->freq_decay = (float)c->freq_decay;
		rc->admit_value = c->admit_value;
		rc->tier_adapt = c->tier_adapt;
		rc->cross_window = c->cross_window ? FSR_CROSS_DEFAULT : 0;
		rc->demand_late = c->demand_late;
		rc->pred_value = c->pred_value;
		rc->pred_adapt = c->pred_adapt;
		rc->learn = c->learn;
		rc->learn_min_p = (float)c->learn_min_p;
		rc->learn_decay = (float)c->learn_decay;
		rc->bus_gbps =
			c->bus_gbps; /* the host backend's emulated link; a card's x8 Gen4 by default */
	}
	fsr_config_defaults(rc); /* the core's own defaults for what the options leave 0 */
}
