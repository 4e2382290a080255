/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_opts_test.c: fs-replay takes foresightd's policy options, the
 * rows of daemon/fsd_options.h marked FSD_POLICY, with the same flags,
 * ranges and defaults and from the same config file, and builds its core
 * configuration from them through the daemon's fsd_config_residency.
 * Every case walks the row list, so a row added or re-marked is checked
 * without a change here.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "replay.h"
#include "replay_opts.h"

/* foresightd's flags that fs-replay has as options of its own, with
 * another meaning (the synthetic trace's shape, the predictor's seed, the
 * calibrated routing model): the only rows outside FSD_POLICY it takes. */
static const char *const own_meaning[] = {"layers", "experts", "seed", "expert_bytes", "model"};

static int is_own_meaning(const char *key)
{
	for (size_t i = 0; i < sizeof(own_meaning) / sizeof(own_meaning[0]); i++)
		if (strcmp(own_meaning[i], key) == 0)
			return 1;
	return 0;
}

/* fs-replay's parse of `--synthetic ARGS...`: 0, 1 (help) or -1. */
static int replay_parse(struct replay_opts *o, const char *a1, const char *a2, const char *a3, const char *a4)
{
	char *argv[8] = {"fs-replay", "--synthetic"};
	int argc = 2;
	const char *a[] = {a1, a2, a3, a4};
	for (int i = 0; i < 4 && a[i]; i++)
		argv[argc++] = (char *)a[i];
	argv[argc] = NULL;
	return replay_opts_parse(o, argc, argv);
}

/* foresightd's reading of one flag over its defaults (fsd_opt_set, as
 * fsd_config.c's command line calls it): 0 or -1. */
static int daemon_set(struct fsd_config *c, const struct fsd_opt *r, const char *val)
{
	struct fsd_opt_src s;
	fsd_opt_src_init(&s, "foresightd");
	fsd_config_defaults(c);
	return fsd_opt_set(&s, c, r, val, "--test");
}

/* Values at and past a row's range ("" where there is none). */
static void edge_values(const struct fsd_opt *r, char in[2][64], char out[2][64])
{
	memset(in, 0, 2 * 64);
	memset(out, 0, 2 * 64);
	switch (r->type) {
	case FSD_OPT_ONOFF:
		snprintf(in[0], 64, "on");
		snprintf(in[1], 64, "off");
		snprintf(out[0], 64, "maybe");
		break;
	case FSD_OPT_DBL:
		snprintf(in[0], 64, "%.17g", r->min);
		snprintf(in[1], 64, "%.17g", r->max);
		snprintf(out[0], 64, "%.17g", r->min / 2);
		snprintf(out[1], 64, "%.17g", r->max * 2);
		break;
	default: /* the integer types */
		snprintf(in[0], 64, "%.0f", r->min);
		snprintf(in[1], 64, "%.0f", r->max);
		snprintf(out[0], 64, "%.0f", r->min - 1);
		snprintf(out[1], 64, "%.0f", r->max + 1);
		if (r->type != FSD_OPT_INT && r->min == 0)
			snprintf(out[0], 64, "x");
		break;
	}
}

Test(replay_opts, every_policy_row_is_a_flag_with_foresightds_checks)
{
	unsigned rows = 0;
	for (size_t i = 0; i < FSD_NOPTS; i++) {
		const struct fsd_opt *r = &fsd_opt_rows[i];
		if (!(r->flags & FSD_POLICY))
			continue;
		rows++;
		char flag[48], in[2][64], out[2][64];
		fsd_opt_flag(r, flag, sizeof(flag));
		edge_values(r, in, out);
		for (int k = 0; k < 2; k++) {
			struct replay_opts o;
			struct fsd_config d;
			cr_assert_eq(daemon_set(&d, r, in[k]), 0, "foresightd %s %s", flag, in[k]);
			cr_assert_eq(replay_parse(&o, flag, in[k], NULL, NULL), 0, "fs-replay %s %s", flag,
				     in[k]);
			cr_expect_eq(memcmp((char *)&o.model.daemon + r->off, (char *)&d + r->off, r->size),
				     0, "%s %s: fs-replay stored another value than foresightd", flag, in[k]);
			if (!out[k][0])
				continue;
			cr_expect_neq(daemon_set(&d, r, out[k]), 0, "foresightd took %s %s", flag, out[k]);
			cr_expect_neq(replay_parse(&o, flag, out[k], NULL, NULL), 0, "fs-replay took %s %s",
				      flag, out[k]);
		}
	}
	cr_assert_geq(rows, 8u, "the policy rows: %u", rows);
}

Test(replay_opts, no_other_row_of_foresightd_is_taken)
{
	for (size_t i = 0; i < FSD_NOPTS; i++) {
		const struct fsd_opt *r = &fsd_opt_rows[i];
		if ((r->flags & FSD_POLICY) || is_own_meaning(r->key))
			continue;
		char flag[48];
		fsd_opt_flag(r, flag, sizeof(flag));
		struct replay_opts o;
		FILE *keep = stderr;
		stderr = fopen("/dev/null", "w"); /* fs-replay prints its usage */
		int rc = replay_parse(&o, flag, "1", NULL, NULL);
		fclose(stderr);
		stderr = keep;
		cr_expect_eq(rc, -1, "fs-replay takes %s, which is not a policy row", flag);
	}
}

Test(replay_opts, defaults_are_the_rows_but_the_three_of_the_machine)
{
	struct replay_opts o;
	struct fsd_config d;
	cr_assert_eq(replay_parse(&o, NULL, NULL, NULL, NULL), 0);
	fsd_config_defaults(&d);
	unsigned own = 0;
	for (size_t i = 0; i < FSD_NOPTS; i++) {
		const struct fsd_opt *r = &fsd_opt_rows[i];
		if (!(r->flags & FSD_POLICY))
			continue;
		if (replay_own_default(r->key)) {
			own++;
			continue;
		}
		cr_expect_eq(memcmp((char *)&o.model.daemon + r->off, (char *)&d + r->off, r->size), 0,
			     "%s: fs-replay's default is not foresightd's", r->key);
	}
	cr_expect_eq(own, 3u);
	cr_expect(replay_own_default("cards") && replay_own_default("slots") &&
		  replay_own_default("publish_us"));
	cr_expect_eq(o.model.cards, 1u);
	cr_expect_eq(o.model.publish_us, 0u);
	cr_expect_eq(o.model.slots, 0u); /* --slots-frac */
	cr_expect_eq(o.model.bus_gbps, d.bus_gbps);
}

/* A value other than the default, inside the range. */
static void other_value(const struct fsd_opt *r, const struct fsd_config *def, char *out, size_t len)
{
	double v;
	switch (r->type) {
	case FSD_OPT_ONOFF: {
		uint32_t u;
		memcpy(&u, (const char *)def + r->off, sizeof(u));
		snprintf(out, len, "%s", u ? "\"off\"" : "\"on\"");
		return;
	}
	case FSD_OPT_DBL:
		memcpy(&v, (const char *)def + r->off, sizeof(v));
		snprintf(out, len, "%.17g", v == r->max ? r->min : r->max);
		return;
	default:
		snprintf(out, len, "%.0f", r->min + 2 <= r->max ? r->min + 2 : r->max);
		return;
	}
}

Test(replay_opts, the_config_file_is_foresightds_and_the_flags_win)
{
	char path[] = "/tmp/replay_opts_test.XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	FILE *f = fdopen(fd, "w");
	cr_assert_not_null(f);
	struct fsd_config def;
	fsd_config_defaults(&def);
	/* every policy key at another value, and keys of the daemon alone */
	fprintf(f, "{\"socket\": \"/tmp/elsewhere.sock\", \"group\": \"wheel\", \"spin_us\": 7");
	for (size_t i = 0; i < FSD_NOPTS; i++) {
		const struct fsd_opt *r = &fsd_opt_rows[i];
		if (!(r->flags & FSD_POLICY))
			continue;
		char v[64];
		other_value(r, &def, v, sizeof(v));
		fprintf(f, ",\n \"%s\": %s", r->key, v);
	}
	fprintf(f, "}\n");
	fclose(f);

	struct fsd_opt_src s;
	struct fsd_config d;
	fsd_opt_src_init(&s, "foresightd");
	fsd_config_defaults(&d);
	cr_assert_eq(fsd_config_load(&s, &d, path), 0);
	struct replay_opts o;
	cr_assert_eq(replay_parse(&o, "--config", path, NULL, NULL), 0);
	for (size_t i = 0; i < FSD_NOPTS; i++) {
		const struct fsd_opt *r = &fsd_opt_rows[i];
		if (!(r->flags & FSD_POLICY))
			continue;
		cr_expect_eq(memcmp((char *)&o.model.daemon + r->off, (char *)&d + r->off, r->size), 0,
			     "key %s: fs-replay read another value than foresightd", r->key);
		cr_expect(memcmp((char *)&o.model.daemon + r->off, (char *)&def + r->off, r->size) != 0 ||
				  replay_own_default(r->key),
			  "key %s: still the default", r->key);
	}
	/* the machine's rows reach the model */
	cr_expect_eq(o.model.slots, d.slots);
	cr_expect_eq(o.model.cards, d.cards);
	cr_expect_eq(o.model.publish_us, d.publish_us);
	cr_expect_eq(o.model.bus_gbps, d.bus_gbps);
	/* a flag wins over the file, before or after --config */
	cr_assert_eq(replay_parse(&o, "--slots", "77", "--config", path), 0);
	cr_expect_eq(o.model.slots, 77u);
	cr_assert_eq(replay_parse(&o, "--config", path, "--freq-decay", "0.5"), 0);
	cr_expect_eq(o.model.daemon.freq_decay, 0.5);
	/* --slots-frac after the file's slots: the fraction, as on a command line */
	cr_assert_eq(replay_parse(&o, "--config", path, "--slots-frac", "0.25"), 0);
	cr_expect_eq(o.model.slots, 0u);
	unlink(path);
}

/* Our tiers' core configuration is fsd_config_residency's of the options;
 * the baselines' does not move with them. */
Test(replay_opts, one_assembly_of_the_core_configuration)
{
	struct fs_trace_gen g;
	fs_trace_gen_defaults(&g);
	g.layers = 4;
	g.experts = 32;
	g.topk = 4;
	g.windows = 50;
	struct fs_trace t;
	cr_assert_eq(fs_trace_generate(&t, &g, NULL, 0), 0);
	struct replay_opts o;
	cr_assert_eq(replay_parse(&o, "--admit-value", "off", "--bus-share-pct", "55"), 0);
	o.model.daemon.tier_adapt = 1;
	o.model.daemon.spare_slots = 3;
	o.model.daemon.max_inflight = 9;

	struct fsd_config fc = o.model.daemon;
	fc.cards = 1;
	fc.slots = replay_slots(&o.model, &t);
	fc.layers = t.layers;
	fc.experts = t.experts;
	fc.max_clients = 1;
	fc.bus_gbps = o.model.bus_gbps;
	struct fsr_config want, got;
	fsd_config_residency(&fc, &want);
	cr_assert_eq(replay_policy_config(RP_ALL, &o.model, &t, &got), 0);
	cr_expect_eq(got.admit_value, 0u);
	cr_expect_eq(got.bus_share_pct, 55u);
	cr_expect_eq(got.tier_adapt, want.tier_adapt);
	cr_expect_eq(got.spare_slots, 3u);
	cr_expect_eq(got.max_inflight, 9u);
	cr_expect_eq(got.recency_slots, want.recency_slots);
	cr_expect_eq(got.predicted_slots, want.predicted_slots);
	cr_expect_eq(got.freq_decay, want.freq_decay);
	cr_expect_eq(got.cross_window, want.cross_window);
	cr_expect_eq(got.demand_late, want.demand_late);
	cr_expect_eq(got.bus_gbps, want.bus_gbps);
	cr_expect_eq(got.slots[0], want.slots[0]);

	struct replay_opts plain;
	cr_assert_eq(replay_parse(&plain, NULL, NULL, NULL, NULL), 0);
	struct fsr_config a, b;
	for (int p = RP_STATIC; p < RP_N; p++) {
		if (replay_policy_ours((enum replay_policy_id)p))
			continue;
		cr_assert_eq(replay_policy_config((enum replay_policy_id)p, &o.model, &t, &a), 0);
		cr_assert_eq(replay_policy_config((enum replay_policy_id)p, &plain.model, &t, &b), 0);
		cr_expect_eq(memcmp(&a, &b, sizeof(a)), 0, "%s moved with the options",
			     replay_policy_name((enum replay_policy_id)p));
	}
	fs_trace_free(&t);
}

/* fs-replay's own flags of session 9: --why, --decoys none (and a bad one). */
Test(replay_opts, why_and_no_decoys)
{
	struct replay_opts o;
	cr_assert_eq(replay_parse(&o, "--why", "--decoys", "none", NULL), 0);
	cr_assert_eq(o.why, 1);
	cr_assert_eq(o.model.decoys, DECOYS_NONE);
	cr_assert_eq(replay_parse(&o, "--decoys", "some", NULL, NULL), -1);
}
