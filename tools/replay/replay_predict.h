/* SPDX-License-Identifier: Apache-2.0 */
/* replay_predict.h: the oracle-noised router-ahead predictor (replay_predict.c). */
#ifndef REPLAY_PREDICT_H
#define REPLAY_PREDICT_H

#include <stdint.h>

#include "replay.h"

struct replay_predictor {
	const struct fs_trace *t;
	uint64_t seed;
	enum replay_decoys decoys;
	uint32_t cut[3];     /* ends of the rank bands for this top-k */
	double recall[3][3]; /* [horizon - 1][band], cumulative */
	float prec[3][3];    /* chance that a candidate in the band is routed */
	double *cdf;         /* [layers][experts]: popularity, for decoys */
	uint16_t *list;      /* [cut[2]]: one token's ranked candidates */
	uint8_t *band;
	uint8_t *used;     /* [experts]: routed or listed for the token */
	float *best;       /* [experts]: the window's best score so far */
	uint16_t *touched; /* [experts]: experts with a score this call */
	uint32_t ntouched;
};

int replay_predictor_init(struct replay_predictor *p, const struct fs_trace *t, const struct replay_model *m);
void replay_predictor_free(struct replay_predictor *p);
/* Candidates for `layer` of the window's tokens, `horizon` (1..3) layers
 * ahead: writes up to `experts` entries (expert, score) in expert order and
 * returns how many.  The arrays need room for the trace's experts. */
uint32_t replay_predict(struct replay_predictor *p, uint32_t window, uint32_t first_token, uint32_t n_tokens,
			uint32_t layer, unsigned horizon, uint16_t *experts, float *scores);

#endif /* REPLAY_PREDICT_H */
