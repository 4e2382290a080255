/* SPDX-License-Identifier: Apache-2.0 */
/* fsr_core.c: configuration, create/destroy, introspection. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fsr_internal.h"

void fsr_config_defaults(struct fsr_config *cfg)
{
	if (cfg->max_inflight == 0)
		cfg->max_inflight = 32;
	if (cfg->want_max_age == 0)
		cfg->want_max_age = 2;
}

static int config_valid(const struct fsr_config *cfg)
{
	if (cfg == NULL)
		return 0;
	if (cfg->cards < 1 || cfg->cards > FS_MAX_CARDS)
		return 0;
	if (cfg->layers < 1 || cfg->layers > FS_MAX_LAYERS)
		return 0;
	if (cfg->experts < 1 || cfg->experts > FS_MAX_EXPERTS)
		return 0;
	if (cfg->max_clients < 1 || cfg->max_clients > FSR_MAX_CLIENTS)
		return 0;
	/* A slot index must stay below FSR_NONE; a want queue of 2 * slots
	 * must fit a uint32_t. */
	for (uint32_t c = 0; c < cfg->cards; c++)
		if (cfg->slots[c] < 1 || cfg->slots[c] > (UINT32_MAX >> 2))
			return 0;
	if (cfg->max_inflight < 1)
		return 0;
	/* Window ages are compared as signed 32-bit differences. */
	if (cfg->want_max_age > (uint32_t)INT32_MAX)
		return 0;
	return 1;
}

static int card_init(struct fsr *r, uint32_t c, uint32_t nslots)
{
	struct fsr_card *cd = &r->card[c];
	size_t n = (size_t)r->layers * r->experts;

	cd->nslots = nslots;
	cd->slot = calloc(nslots, sizeof(*cd->slot));
	cd->slot_of = malloc(n * sizeof(*cd->slot_of));
	cd->wanted = calloc(n, 1);
	cd->wq_cap = nslots * 2 > FSR_WANTS_MIN ? nslots * 2 : FSR_WANTS_MIN;
	cd->wq = calloc(cd->wq_cap, sizeof(*cd->wq));
	if (!cd->slot || !cd->slot_of || !cd->wanted || !cd->wq)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		cd->slot_of[i] = FSR_NONE;
	for (uint32_t s = 0; s < nslots; s++) {
		struct fsr_slot *sl = &cd->slot[s];
		sl->state = FSR_FREE;
		sl->gen = FS_GEN_NONE;
		sl->prev = FSR_NONE;
		sl->next = s + 1 < nslots ? s + 1 : FSR_NONE;
		sl->prot_client = FSR_NONE;
	}
	cd->free_head = 0;
	cd->nfree = nslots;
	cd->lru_old = cd->lru_new = FSR_NONE;
	cd->ret_head = cd->ret_tail = FSR_NONE;
	cd->ctr = r->c_card + (uint64_t)c * FS_N_CARD;
	fsr_gauges(cd);
	return 0;
}

struct fsr *fsr_create(const struct fsr_config *cfg)
{
	if (!config_valid(cfg)) {
		errno = EINVAL;
		return NULL;
	}
	struct fsr *r = calloc(1, sizeof(*r));
	if (r == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	r->cards = cfg->cards;
	r->layers = cfg->layers;
	r->experts = cfg->experts;
	r->max_clients = cfg->max_clients;
	r->max_inflight = cfg->max_inflight;
	r->want_max_age = cfg->want_max_age;
	r->uniform_bytes = cfg->uniform_bytes;

	size_t n = (size_t)r->layers * r->experts;
	size_t priv = 0;
	if (cfg->counters.daemon == NULL)
		priv += FS_N_DAEMON;
	if (cfg->counters.card == NULL)
		priv += (size_t)r->cards * FS_N_CARD;
	if (cfg->counters.layer == NULL)
		priv += (size_t)r->layers * FS_N_LAYER;
	if (cfg->counters.client == NULL)
		priv += (size_t)r->max_clients * FS_N_CLIENT;
	r->c_priv = calloc(priv ? priv : 1, sizeof(uint64_t));
	r->home = malloc(r->layers * sizeof(*r->home));
	if (cfg->expert_bytes != NULL)
		r->expert_bytes = malloc(n * sizeof(*r->expert_bytes));
	if (r->c_priv == NULL || r->home == NULL || (cfg->expert_bytes != NULL && r->expert_bytes == NULL))
		goto nomem;
	if (cfg->expert_bytes != NULL)
		memcpy(r->expert_bytes, cfg->expert_bytes, n * sizeof(*r->expert_bytes));

	uint64_t *p = r->c_priv;
	if (cfg->counters.daemon) {
		r->c_daemon = cfg->counters.daemon;
	} else {
		r->c_daemon = p;
		p += FS_N_DAEMON;
	}
	if (cfg->counters.card) {
		r->c_card = cfg->counters.card;
	} else {
		r->c_card = p;
		p += (size_t)r->cards * FS_N_CARD;
	}
	if (cfg->counters.layer) {
		r->c_layer = cfg->counters.layer;
	} else {
		r->c_layer = p;
		p += (size_t)r->layers * FS_N_LAYER;
	}
	r->c_client = cfg->counters.client ? cfg->counters.client : p;

	for (uint32_t l = 0; l < r->layers; l++)
		r->home[l] = (uint16_t)((uint64_t)l * r->cards / r->layers);
	for (uint32_t c = 0; c < r->cards; c++)
		if (card_init(r, c, cfg->slots[c]) != 0)
			goto nomem;
	return r;
nomem:
	fsr_destroy(r);
	errno = ENOMEM;
	return NULL;
}

void fsr_destroy(struct fsr *r)
{
	if (r == NULL)
		return;
	for (uint32_t c = 0; c < FS_MAX_CARDS; c++) {
		free(r->card[c].slot);
		free(r->card[c].slot_of);
		free(r->card[c].wanted);
		free(r->card[c].wq);
	}
	free(r->home);
	free(r->expert_bytes);
	free(r->c_priv);
	free(r);
}

int fsr_slot_info(const struct fsr *r, uint32_t card, uint32_t slot, struct fsr_slot_info *out)
{
	if (card >= r->cards || slot >= r->card[card].nslots || out == NULL)
		return -EINVAL;
	const struct fsr_slot *sl = &r->card[card].slot[slot];
	*out = (struct fsr_slot_info){
		.state = (enum fsr_slot_state)sl->state,
		.gen = sl->gen,
		.layer = sl->state == FSR_FREE ? 0 : sl->layer,
		.expert = sl->state == FSR_FREE ? 0 : sl->expert,
		.retire = sl->state == FSR_RETIRING ? sl->retire : 0,
	};
	return 0;
}

uint32_t fsr_lookup(const struct fsr *r, uint32_t card, uint32_t layer, uint32_t expert)
{
	if (card >= r->cards || layer >= r->layers || expert >= r->experts)
		return FSR_NONE;
	return r->card[card].slot_of[fsr_idx(r, layer, expert)];
}
