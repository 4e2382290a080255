/* SPDX-License-Identifier: Apache-2.0 */
/*
 * eb_main.c: fs-engine-bench's subcommands.
 *   fs-engine-bench run [options]        the benchmark (bench/engine/README.md)
 *   fs-engine-bench engine [options]     one engine process (the driver starts them)
 *   fs-engine-bench calibrate [options]  dense-part iterations for a time per layer
 *   fs-engine-bench report FILE.csv...   the tables of the CSVs `run` wrote
 */
#include <stdlib.h>
#include <string.h>

#include "eb.h"
#include "fs_opt.h"

#define EB_MODE_ROW(id, name, peer, daemon, predicts) {name, peer, daemon, predicts},
static const struct {
	const char *name;
	int peer, daemon, predicts;
} mode_tab[EB_NMODES] = {EB_MODES(EB_MODE_ROW)};
#undef EB_MODE_ROW

const char *eb_mode_name(int m)
{
	return m >= 0 && m < EB_NMODES ? mode_tab[m].name : "?";
}

int eb_mode_by_name(const char *s)
{
	if (strcmp(s, "baseline") == 0) /* issue #10's name for static */
		return EB_STATIC;
	for (int i = 0; i < EB_NMODES; i++)
		if (strcmp(s, mode_tab[i].name) == 0)
			return i;
	return -1;
}

int eb_mode_peer(int m)
{
	return m >= 0 && m < EB_NMODES && mode_tab[m].peer;
}

int eb_mode_daemon(int m)
{
	return m >= 0 && m < EB_NMODES && mode_tab[m].daemon;
}

int eb_mode_predicts(int m)
{
	return m >= 0 && m < EB_NMODES && mode_tab[m].predicts;
}

int eb_opt_mode(void *dst, const char *val, char *err, size_t errlen)
{
	int m = eb_mode_by_name(val);
	if (m < 0) {
		size_t n = (size_t)snprintf(err, errlen, "give one of");
		for (int i = 0; i < EB_NMODES && n < errlen; i++)
			n += (size_t)snprintf(err + n, errlen - n, "%s%s", i ? ", " : " ", mode_tab[i].name);
		return -1;
	}
	*(int *)dst = m;
	return 0;
}

/* A decimal number below `max`, the whole of s[0, len). */
static int dec(const char *s, size_t len, uint32_t max, uint32_t *out)
{
	uint64_t v = 0;
	if (len == 0 || len > 10)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v >= max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int eb_card_down_parse(const char *val, uint32_t *card, uint32_t *window)
{
	const char *at = strchr(val, '@');
	if (!at || dec(val, (size_t)(at - val), EB_MAX_CARDS, card) < 0 ||
	    dec(at + 1, strlen(at + 1), UINT32_MAX, window) < 0)
		return -1;
	return 0;
}

int eb_opt_card_down(void *dst, const char *val, char *err, size_t errlen)
{
	uint32_t c, w;
	if (eb_card_down_parse(val, &c, &w) < 0) {
		snprintf(err, errlen, "give CARD@WINDOW (CARD below %u)", EB_MAX_CARDS);
		return -1;
	}
	*(const char **)dst = val;
	return 0;
}

/* Iterations of the dense loop that take `us` per layer on this device
 * (card 0), at 3 tokens a window.  Prints "dense_iters N us X". */
int eb_calibrate_main(int argc, char **argv)
{
	static const char *const devices[] = {"host", "cuda", NULL};
	int dev = 0;
	double us = 250;
	const struct fs_opt opts[] = {
		FS_OPT_CHOICE("device", "host|cuda", &dev, devices,
			      "the device whose dense loop is timed (card 0)"),
		FS_OPT_DBL("dense-us", "US", &us, 0.001, 1e9,
			   "the time per layer to calibrate for, microseconds"),
	};
	const struct fs_opt_cmd cmd = {
		"fs-engine-bench calibrate",
		"usage: fs-engine-bench calibrate --device host|cuda --dense-us US\n\n"
		"Prints \"dense_iters N us X\": the dense loop's iterations that take US\n"
		"per layer at 3 tokens a window, and the time they took.\n\n",
		NULL, opts, FS_OPT_N(opts)};
	fs_opt_parse_or_exit(&cmd, argc, argv);
	enum eb_device kind = dev == 1 ? EB_DEV_CUDA : EB_DEV_HOST;
	struct eb_dev *d;
	char err[256];
	if (eb_dev_open(&d, kind, 1, err, sizeof(err)) != 0) {
		fprintf(stderr, "fs-engine-bench calibrate: %s\n", err);
		return 2;
	}
	double iters = 256, t = 0;
	for (int round = 0; round < 6; round++) {
		t = eb_dev_dense_time(d, (uint32_t)iters, 7);
		if (t <= 0)
			break;
		double want = iters * (us * 1e-6) / t;
		if (want < 1)
			want = 1;
		if (want > 4e9)
			want = 4e9;
		if (round >= 2 && want > iters * 0.97 && want < iters * 1.03)
			break;
		iters = want;
	}
	t = eb_dev_dense_time(d, (uint32_t)iters, 7);
	printf("dense_iters %u us %.1f\n", (uint32_t)iters, t * 1e6);
	eb_dev_close(d);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "engine") == 0)
		return eb_engine_main(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "calibrate") == 0)
		return eb_calibrate_main(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "report") == 0)
		return eb_report_main(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "run") == 0)
		return eb_driver_main(argc - 1, argv + 1, argv[0]);
	fprintf(stderr,
		"usage: fs-engine-bench run|report|engine|calibrate [options]   (--help after one of them)\n");
	return 2;
}
