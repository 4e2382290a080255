/* SPDX-License-Identifier: Apache-2.0 */
/* eb_ctl.c: the control-plane calls of the bench (common/fs_ctl.h): the
 * daemon's counters (stats) and loading the static profile (profile load,
 * as `fsctl profile load` does). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "eb.h"
#include "fs_ctl.h"

static double num(const cJSON *o, const char *k)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(x) ? x->valuedouble : 0.0;
}

static int call(const char *socket, const cJSON *req, cJSON **rep, char *err, size_t errlen)
{
	nng_socket s;
	int rc = fs_ctl_open(&s, socket, 10000, err, errlen);
	if (rc < 0)
		return rc;
	rc = fs_ctl_call(s, req, rep, err, errlen);
	nng_close(s);
	return rc;
}

int eb_ctl_stats(const char *socket, struct eb_stats *out, char *err, size_t errlen)
{
	cJSON *req = fs_ctl_request("stats"), *rep = NULL;
	int rc = call(socket, req, &rep, err, errlen);
	cJSON_Delete(req);
	if (rc < 0)
		return rc;
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(rep, "totals");
	if (!cJSON_IsObject(t)) {
		snprintf(err, errlen, "stats: no totals in the reply");
		cJSON_Delete(rep);
		return -EPROTO;
	}
	/* copied_bytes: the card counter (was "bytes" before fsctl top) */
	*out = (struct eb_stats){.bytes = num(t, "copied_bytes") + num(t, "bytes"),
				 .copied = num(t, "copied"),
				 .late = num(t, "late"),
				 .landed_late = num(t, "landed_late"),
				 .too_late = num(t, "too_late"),
				 .hits = num(t, "hits"),
				 .misses = num(t, "misses"),
				 .loading = num(t, "loading"),
				 .predicted = num(t, "predicted"),
				 .learned = num(t, "learned")};
	cJSON_Delete(rep);
	return 0;
}

int eb_ctl_profile_load(const char *socket, uint32_t L, uint32_t E, const uint32_t *counts, char *err,
			size_t errlen)
{
	cJSON *req = fs_ctl_request("profile"), *rep = NULL;
	cJSON_AddStringToObject(req, "action", "load");
	cJSON_AddNumberToObject(req, "layers", L);
	cJSON_AddNumberToObject(req, "experts", E);
	cJSON *arr = cJSON_AddArrayToObject(req, "counts");
	for (uint64_t i = 0; i < (uint64_t)L * E; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)counts[i]));
	int rc = call(socket, req, &rep, err, errlen);
	cJSON_Delete(req);
	cJSON_Delete(rep);
	return rc;
}

int eb_ctl_card_down(const char *socket, uint32_t card, char *err, size_t errlen)
{
	cJSON *req = fs_ctl_request("card"), *rep = NULL;
	cJSON_AddNumberToObject(req, "card", card);
	cJSON_AddStringToObject(req, "state", "down");
	int rc = call(socket, req, &rep, err, errlen);
	cJSON_Delete(req);
	cJSON_Delete(rep);
	return rc;
}
