/* SPDX-License-Identifier: Apache-2.0 */
/*
 * demo_predict.c: the demo engine's stand-ins for a real engine's
 * predictors.  The oracle is a router-ahead predictor of known recall (it
 * peeks at the trace, then forgets some of it and adds noise); recency is
 * "what this layer used last window".
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

int demo_predictor_init(struct demo_predictor *p, const struct demo_opts *o, uint32_t layers,
			uint32_t experts, uint32_t cards, uint32_t cap)
{
	*p = (struct demo_predictor){.kind = o->predict,
				     .recall = o->recall,
				     .decoys = o->decoys,
				     .layers = layers,
				     .experts = experts,
				     .cards = cards,
				     .cap = cap};
	/* Its own stream: changing the predictor never changes the trace. */
	fs_rng_seed(&p->rng, o->seed ^ 0x70726564696374ull);
	p->prev = calloc((size_t)layers * cap, sizeof(uint16_t));
	p->nprev = calloc(layers, sizeof(uint32_t));
	if (!p->prev || !p->nprev) {
		demo_predictor_free(p);
		return -ENOMEM;
	}
	return 0;
}

static int in_sorted(const uint16_t *v, uint32_t n, uint16_t x)
{
	uint32_t lo = 0, hi = n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (v[mid] == x)
			return 1;
		if (v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

static void post(struct demo_predictor *p, fs_client *c, uint32_t window, uint32_t layer, uint32_t expert,
		 float score)
{
	uint32_t card = demo_card_of(layer, p->layers, p->cards);
	if (fs_post_predict(c, window, layer, expert, card, score, 1, FS_SOURCE_HOST) == 0)
		p->posted++;
}

void demo_predict_layer(struct demo_predictor *p, fs_client *c, uint32_t window, uint32_t layer,
			const uint16_t *truth, uint32_t n)
{
	if (layer >= p->layers)
		return;
	if (p->kind == PREDICT_RECENCY) {
		const uint16_t *prev = p->prev + (size_t)layer * p->cap;
		for (uint32_t i = 0; i < p->nprev[layer]; i++)
			post(p, c, window, layer, prev[i], 1.0f);
		return;
	}
	if (p->kind != PREDICT_ORACLE)
		return;
	for (uint32_t i = 0; i < n; i++)
		if (fs_rng_double(&p->rng) < p->recall)
			post(p, c, window, layer, truth[i], 1.0f);
	/* Decoys: experts the layer will not use, at a lower score.  A few
	 * draws per decoy at most, so a layer whose experts are nearly all in
	 * use does not spin. */
	uint32_t posted = 0;
	for (uint32_t tries = 0; posted < p->decoys && tries < 4 * p->decoys; tries++) {
		uint16_t e = (uint16_t)fs_rng_below(&p->rng, p->experts);
		if (in_sorted(truth, n, e))
			continue;
		post(p, c, window, layer, e, 0.5f);
		posted++;
	}
}

void demo_predict_learn(struct demo_predictor *p, uint32_t layer, const uint16_t *used, uint32_t n)
{
	if (p->kind != PREDICT_RECENCY || layer >= p->layers)
		return;
	if (n > p->cap)
		n = p->cap;
	memcpy(p->prev + (size_t)layer * p->cap, used, n * sizeof(uint16_t));
	p->nprev[layer] = n;
}

void demo_predictor_free(struct demo_predictor *p)
{
	free(p->prev);
	free(p->nprev);
	p->prev = NULL;
	p->nprev = NULL;
}
