/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsr_clock.c: where each engine runs and how fast, from its records and
 * the caller's times (the core has no clock: the daemon passes fs_now_ns(),
 * fs-replay its virtual clock).
 *
 * An engine's newest usage record says which layer's routing it knows now;
 * WIN_BEGIN says a window started.  From their times the core keeps two
 * moving averages: the time per layer and the window period (which includes
 * whatever the engine does between windows).  A copy candidate's deadline
 * is the time its layer next needs its experts: later in this window when
 * the engine has not reached the layer yet, else in the next window.
 */
#include "fsr_internal.h"

/* Weight of a new sample in the moving averages: 1/8, a few windows' worth
 * of layers, so a transient stall does not swing every deadline. */
#define EWMA_SHIFT 3

static void ewma(uint64_t *avg, uint64_t sample)
{
	*avg = *avg - (*avg >> EWMA_SHIFT) + (sample >> EWMA_SHIFT);
}

static uint64_t period(const struct fsr *r)
{
	return r->window_ns ? r->window_ns : (uint64_t)r->layers * r->layer_ns;
}

static void layer_sample(struct fsr *r, uint64_t ns)
{
	if (ns == 0)
		return;
	if (!r->layer_measured) {
		r->layer_ns = ns; /* the configured guess gives way to the first measurement */
		r->layer_measured = 1;
	} else {
		ewma(&r->layer_ns, ns);
	}
	if (r->layer_ns == 0)
		r->layer_ns = 1;
}

static void window_begin(struct fsr *r, struct fsr_client *cl, uint32_t window, uint32_t tokens, uint64_t now)
{
	if (cl->pos_valid && window != cl->pos_window && now > cl->win_t) {
		uint64_t p = now - cl->win_t;
		if (r->window_ns == 0)
			r->window_ns = p;
		else
			ewma(&r->window_ns, p);
	}
	cl->pos_valid = 1;
	cl->pos_window = window;
	cl->pos_layer = FSR_NONE;                        /* before its first layer */
	cl->win_tokens = tokens <= 4096 ? tokens : 4096; /* client memory: bounded */
	cl->win_t = cl->layer_t = now;
}

static void usage(struct fsr *r, struct fsr_client *cl, uint32_t layer, uint32_t window, uint64_t now)
{
	if (cl->pos_valid && window != cl->pos_window) {
		if ((int32_t)(window - cl->pos_window) < 0)
			return; /* a straggler of an older window */
		/* A new window without WIN_BEGIN: place its start by the layer. */
		uint64_t back = (uint64_t)layer * r->layer_ns;
		cl->pos_window = window;
		cl->pos_layer = layer;
		cl->layer_t = now;
		cl->win_t = now > back ? now - back : 0;
		return;
	}
	if (!cl->pos_valid) {
		uint64_t back = (uint64_t)layer * r->layer_ns;
		cl->pos_valid = 1;
		cl->pos_window = window;
		cl->pos_layer = layer;
		cl->layer_t = now;
		cl->win_t = now > back ? now - back : 0;
		return;
	}
	if (cl->pos_layer != FSR_NONE && layer <= cl->pos_layer)
		return; /* more of the same layer, or out of order */
	if (cl->pos_layer != FSR_NONE && now > cl->layer_t)
		layer_sample(r, (now - cl->layer_t) / (layer - cl->pos_layer));
	cl->pos_layer = layer;
	cl->layer_t = now;
}

void fsr_clock_record(struct fsr *r, uint32_t client, const struct fs_rec *rec, uint64_t now)
{
	if (client >= r->max_clients)
		return;
	struct fsr_client *cl = &r->client[client];
	if (rec->type == FS_REC_WIN_BEGIN)
		window_begin(r, cl, rec->window, rec->value, now);
	else if (rec->type == FS_REC_USAGE)
		usage(r, cl, rec->layer, rec->window, now);
}

uint64_t fsr_clock_deadline(const struct fsr *r, uint32_t client, uint32_t layer, uint64_t now)
{
	uint64_t p = period(r);
	if (client >= r->max_clients || !r->client[client].pos_valid)
		return now + p;
	const struct fsr_client *cl = &r->client[client];
	if (cl->pos_layer == FSR_NONE)
		return cl->win_t + (uint64_t)layer * r->layer_ns;
	if (layer > cl->pos_layer)
		return cl->layer_t + (uint64_t)(layer - cl->pos_layer) * r->layer_ns;
	uint64_t d = cl->win_t + p + (uint64_t)layer * r->layer_ns;
	if (d <= now) /* the engine is behind its usual pace */
		d = now + (uint64_t)(r->layers - cl->pos_layer + layer) * r->layer_ns;
	return d;
}

int fsr_clock_passed(const struct fsr *r, uint32_t client, uint32_t layer, uint32_t window)
{
	if (client >= r->max_clients || !r->client[client].pos_valid)
		return 0;
	const struct fsr_client *cl = &r->client[client];
	if ((int32_t)(cl->pos_window - window) > 0)
		return 1;
	return cl->pos_window == window && cl->pos_layer != FSR_NONE && layer <= cl->pos_layer;
}

/* Is the engine within its usual pace: its current window started less
 * than a period ago?  Past that (a pause, an idle engine) its deadlines
 * are extrapolated from `now` and move with it (fsr_clock_deadline). */
int fsr_clock_on_pace(const struct fsr *r, uint32_t client, uint64_t now)
{
	if (client >= r->max_clients || !r->client[client].pos_valid)
		return 0;
	return now < r->client[client].win_t + period(r);
}

uint64_t fsr_clock_period(const struct fsr *r)
{
	return period(r);
}
