/* SPDX-License-Identifier: Apache-2.0 */
/*
 * eb_route.c: the routing every mode replays, cut into windows.
 *
 * Windows: window w of the whole token sequence holds
 * floor((w + 1) * tpw) - floor(w * tpw) tokens, so a mean of 2.5 gives
 * 2, 3, 2, 3, ... (the discussion's coding windows, T ~ 2.5).  The first
 * `profile_windows` windows (plus a route CSV's prefill rows) only build
 * the static profile, the way an engine profiles before it serves; the
 * next `windows` are decoded.  Synthetic routing, by default: the
 * calibrated routing model of tools/trace (fs_trace_model.h: per-layer
 * popularity with a heavy core and a long tail, per-session topics shared
 * across layers that drift, short-term reuse; fitted to the discussion's
 * static hit rates and the real traces' reuse, fs-replay --calibrate),
 * sessions of `session_tokens` (500: the 200 profile windows are the first
 * session, "a profile from earlier sessions of the same kind");
 * `--routing zipf`: the older generator (Zipf popularity of exponent `skew`
 * per layer, `locality` = chance that a token keeps each expert of the
 * previous token), which has half the discussion's misses at 26 % slots
 * and almost no temporal structure.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eb.h"
#include "fs_trace_model.h"

void eb_route_defaults(struct eb_route_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->skew = 1.7; /* docs/results/replay.md: the static profile's hit rate of the discussion */
	o->locality = 0.25;
	o->gen_seed = 1;
	o->session_tokens = 500;
	o->tpw = 2.5;
	o->profile_windows = 200;
	o->windows = 400;
}

const char *const eb_route_choices[] = {"model", "zipf", NULL};

static uint32_t win_tokens(double tpw, uint32_t w)
{
	return (uint32_t)(floor((w + 1) * tpw) - floor(w * tpw));
}

int eb_route_build(struct eb_route *r, const struct eb_route_opts *o, uint32_t L, uint32_t E, uint32_t K,
		   char *err, size_t errlen)
{
	memset(r, 0, sizeof(*r));
	if (!(o->tpw >= 1.0 && o->tpw <= EB_MAX_T)) {
		snprintf(err, errlen, "tokens per window %.2f: must be in 1..%u", o->tpw, EB_MAX_T);
		return -1;
	}
	uint32_t total_w = o->profile_windows + o->windows;
	uint64_t need = (uint64_t)floor(total_w * o->tpw) + 1;
	int rc;
	if (o->trace) {
		rc = fs_trace_load(&r->t, o->trace, err, errlen);
		if (rc == 0 && (r->t.layers != L || r->t.experts != E)) {
			snprintf(err, errlen, "%s: %u layers x %u experts, but the model has %u x %u",
				 o->trace, r->t.layers, r->t.experts, L, E);
			rc = -1;
		}
	} else if (!o->zipf) {
		rc = fs_trace_model_simple(&r->t, L, E, K, (uint32_t)need, o->session_tokens, o->gen_seed,
					   err, errlen);
	} else {
		struct fs_trace_gen g;
		fs_trace_gen_defaults(&g);
		g.layers = L;
		g.experts = E;
		g.topk = K;
		g.tokens_per_window = 1;
		g.windows = (uint32_t)need;
		g.skew = o->skew;
		g.locality = o->locality;
		g.seed = o->gen_seed;
		rc = fs_trace_generate(&r->t, &g, err, errlen);
	}
	if (rc)
		return -1;
	if (r->t.topk * o->tpw > 255 || r->t.topk > 64) {
		snprintf(err, errlen, "top-%u routing is too wide", r->t.topk);
		return -1;
	}
	/* Windows over the decode tokens. */
	uint32_t cap = total_w;
	r->first = calloc(cap, sizeof(*r->first));
	r->ntok = calloc(cap, 1);
	r->profile = calloc((size_t)L * E, sizeof(*r->profile));
	if (!r->first || !r->ntok || !r->profile) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	uint32_t tok = 0, w = 0;
	for (; w < total_w; w++) {
		uint32_t n = win_tokens(o->tpw, w);
		if (tok + n > r->t.tokens)
			break;
		if (w < o->profile_windows) {
			r->profile_tokens += n;
		} else {
			r->first[r->nwin] = tok;
			r->ntok[r->nwin] = (uint8_t)n;
			r->nwin++;
		}
		tok += n;
	}
	if (r->nwin == 0) {
		snprintf(err, errlen, "the trace has %u decode tokens: none left after %u profile windows",
			 r->t.tokens, o->profile_windows);
		return -1;
	}
	/* The profile: prefill rows and the profile windows' tokens. */
	for (uint32_t p = 0; p < r->t.prefill_tokens; p++)
		for (uint32_t l = 0; l < L; l++) {
			const uint16_t *e = r->t.prefill + ((size_t)p * L + l) * r->t.topk;
			for (uint32_t k = 0; k < r->t.topk; k++)
				if (e[k] < E)
					r->profile[(size_t)l * E + e[k]]++;
		}
	for (uint32_t t = 0; t < r->profile_tokens; t++)
		for (uint32_t l = 0; l < L; l++) {
			const uint16_t *e = fs_trace_token(&r->t, t, l);
			for (uint32_t k = 0; k < r->t.topk; k++)
				r->profile[(size_t)l * E + e[k]]++;
		}
	return 0;
}

void eb_route_describe(const struct eb_route_opts *o, char *out, size_t len)
{
	if (o->trace) {
		const char *slash = strrchr(o->trace, '/');
		snprintf(out, len, "%s", slash ? slash + 1 : o->trace);
	} else if (o->zipf) {
		snprintf(out, len, "zipf %.3g/%.3g", o->skew, o->locality);
	} else {
		snprintf(out, len, "calibrated model, sessions of %u tokens", o->session_tokens);
	}
	for (char *c = out; *c; c++)
		if (*c == ',')
			*c = ';'; /* a CSV field */
}

void eb_route_free(struct eb_route *r)
{
	fs_trace_free(&r->t);
	free(r->first);
	free(r->ntok);
	free(r->profile);
	memset(r, 0, sizeof(*r));
}

uint32_t eb_route_uses(const struct eb_route *r, uint32_t w, uint32_t layer, struct eb_use *out)
{
	uint32_t n = 0;
	for (uint32_t t = 0; t < r->ntok[w]; t++) {
		const uint16_t *e = fs_trace_token(&r->t, r->first[w] + t, layer);
		for (uint32_t k = 0; k < r->t.topk; k++) {
			uint32_t i = 0;
			while (i < n && out[i].expert != e[k])
				i++;
			if (i == n)
				out[n++] = (struct eb_use){e[k], 0};
			out[i].mask |= (uint8_t)(1u << t);
		}
	}
	return n;
}
