/* SPDX-License-Identifier: Apache-2.0 */
/* fsctl_fmt.c: number formatting and tolerant JSON field access (a reply
 * from a newer or older daemon may lack a field: show 0 or "-", not crash). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fsctl.h"

void fsctl_fmt_bytes(char *buf, size_t len, double bytes)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	int u = 0;
	if (!(bytes >= 0)) /* negative or NaN: nothing sensible to scale */
		bytes = 0;
	while (bytes >= 1024 && u < 5) {
		bytes /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%.0f B", bytes);
	else
		snprintf(buf, len, "%.1f %s", bytes, unit[u]);
}

void fsctl_fmt_count(char *buf, size_t len, double v, int width)
{
	static const char unit[] = "kMGTPE";
	if (!(v >= 0) || v > 1e21) /* negative, NaN or beyond the units: nothing sensible */
		v = v > 1e21 ? 1e21 : 0;
	/* as it is when it fits: "0", "3.5", "214", "11613" */
	snprintf(buf, len, v >= 100 || v == 0 ? "%.0f" : "%.1f", v);
	if ((int)strlen(buf) <= width)
		return;
	/* else in units of 1000, at most 5 characters: "11.6k", "352k", "4.2M" */
	int u = -1;
	do {
		v /= 1000;
		u++;
	} while (v >= 999.5 && u < 5);
	snprintf(buf, len, v < 99.95 ? "%.1f%c" : "%.0f%c", v, unit[u]);
	if ((int)strlen(buf) > width && v < 99.95) /* "12k" where "11.6k" is too wide */
		snprintf(buf, len, "%.0f%c", v, unit[u]);
}

void fsctl_fmt_duration(char *buf, size_t len, double s)
{
	if (!(s >= 0))
		s = 0;
	unsigned long long t = (unsigned long long)llround(s);
	if (s < 60)
		snprintf(buf, len, "%.1fs", s);
	else if (t < 3600)
		snprintf(buf, len, "%llum%02llus", t / 60, t % 60);
	else if (t < 86400)
		snprintf(buf, len, "%lluh%02llum", t / 3600, t / 60 % 60);
	else
		snprintf(buf, len, "%llud%02lluh", t / 86400, t / 3600 % 24);
}

double fsctl_num(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsNumber(v) ? v->valuedouble : 0.0;
}

const char *fsctl_str(const cJSON *obj, const char *key, const char *dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsString(v) && v->valuestring ? v->valuestring : dflt;
}
