/* SPDX-License-Identifier: Apache-2.0 */
/* fsd_options_test.c: the option list (FSD_OPTIONS, fsd_options.h) is sound
 * row by row: a key is unique and spelled as a flag can be; every default
 * lies in its row's range (a string's fits its buffer); no help text states
 * a default of its own (--help appends the row's); fsd_config_defaults
 * writes each row's default column.  The man pages are checked against the
 * same list by man_test (docs/man). */
#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "fsd.h"
#include "fsr.h"

enum kind { K_STR, K_NUM, K_FLAG };
struct row {
	const char *key;
	enum kind kind;
	size_t size;
	double dflt, lo, hi;
	const char *sdflt;
	int reload;
	const char *help;
};

/* A row's default as a number or a string, whichever its type is. */
#define NUM(d) _Generic((d), char * : 0.0, const char * : 0.0, default : (d))
#define STRD(d) _Generic((d), char * : (d), const char * : (d), default : NULL)
#define KIND_STR K_STR
#define KIND_U32 K_NUM
#define KIND_U64 K_NUM
#define KIND_DBL K_NUM
#define KIND_INT K_NUM
#define KIND_MODE K_NUM
#define KIND_FLAG K_FLAG
#define KIND_ONOFF K_FLAG
#define ROW(key, field, type, n, d, lo, hi, rl, h) \
	{#key, KIND_##type, sizeof(((struct fsd_config *)0)->field), (double)NUM(d), lo, hi, STRD(d), rl, h},
static const struct row rows[] = {FSD_OPTIONS(ROW)};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

Test(options, keys_unique_and_flag_shaped)
{
	cr_assert_gt(NROWS, 20u);
	for (size_t i = 0; i < NROWS; i++) {
		const char *k = rows[i].key;
		cr_expect(strlen(k) > 0 && strlen(k) < 32, "%s", k);
		for (const char *p = k; *p; p++)
			cr_expect((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_',
				  "key %s: '%c'", k, *p);
		cr_expect(strcmp(k, "config") && strcmp(k, "help") && strcmp(k, "version") &&
				  strcmp(k, "check_config") && strcmp(k, "config_reference"),
			  "key %s is a built-in flag", k);
		for (size_t j = 0; j < i; j++)
			cr_expect(strcmp(k, rows[j].key) != 0, "key %s twice", k);
	}
}

Test(options, defaults_in_range)
{
	for (size_t i = 0; i < NROWS; i++) {
		const struct row *r = &rows[i];
		switch (r->kind) {
		case K_STR:
			cr_expect_not_null(r->sdflt, "%s: a string's default is a string", r->key);
			if (r->sdflt)
				cr_expect_lt(strlen(r->sdflt), r->size, "%s: default longer than its buffer",
					     r->key);
			break;
		case K_FLAG:
			cr_expect(r->dflt == 0 || r->dflt == 1, "%s: default %g", r->key, r->dflt);
			break;
		case K_NUM:
			cr_expect(r->lo < r->hi, "%s: range %g to %g", r->key, r->lo, r->hi);
			cr_expect(r->dflt >= r->lo && r->dflt <= r->hi, "%s: default %g outside %g to %g",
				  r->key, r->dflt, r->lo, r->hi);
			break;
		}
	}
}

/* An unsigned option's range fits its member: no row may let a negative
 * value (or one past UINT32_MAX) be cast into a uint32_t or uint64_t. */
#define UNSIGNED_U32 1
#define UNSIGNED_U64 2
#define UNSIGNED_STR 0
#define UNSIGNED_DBL 0
#define UNSIGNED_INT 0
#define UNSIGNED_MODE 0
#define UNSIGNED_FLAG 0
#define UNSIGNED_ONOFF 0
#define URANGE(key, field, type, n, d, lo, hi, rl, h) {#key, UNSIGNED_##type, (double)(lo), (double)(hi)},
Test(options, unsigned_ranges_fit_their_members)
{
	static const struct {
		const char *key;
		int u;
		double lo, hi;
	} r[] = {FSD_OPTIONS(URANGE)};
	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
		if (!r[i].u)
			continue;
		cr_expect_geq(r[i].lo, 0.0, "%s: an unsigned option with a negative minimum", r[i].key);
		if (r[i].u == 1)
			cr_expect_leq(r[i].hi, 4294967295.0, "%s: a uint32_t option past UINT32_MAX",
				      r[i].key);
	}
	/* And should a row ever allow one, the setter still refuses it. */
	struct fsd_opt o = {"test_u32",
			    FSD_OPT_U32,
			    offsetof(struct fsd_config, slots),
			    sizeof(uint32_t),
			    -5,
			    10,
			    "a test row",
			    0};
	struct fsd_config c;
	struct fsd_opt_src src;
	fsd_config_defaults(&c);
	fsd_opt_src_init(&src, "fsd_options_test");
	uint32_t before = c.slots;
	cr_expect_eq(fsd_opt_set(&src, &c, &o, "-1", "--test-u32"), -1);
	cr_expect_eq(c.slots, before, "a refused value is not stored");
	cr_expect_eq(fsd_opt_set(&src, &c, &o, "7", "--test-u32"), 0);
	cr_expect_eq(c.slots, 7u);
	o.type = FSD_OPT_INT; /* an int row takes a negative value in its range */
	o.off = offsetof(struct fsd_config, recency_slots);
	o.size = sizeof(int);
	cr_expect_eq(fsd_opt_set(&src, &c, &o, "-1", "--test-int"), 0);
	cr_expect_eq(c.recency_slots, -1);
}

/* A default lives in its row only: a help text that states one would
 * be a second copy that can go stale. */
Test(options, help_states_no_default)
{
	for (size_t i = 0; i < NROWS; i++) {
		const char *h = rows[i].help;
		cr_expect(strlen(h) > 5, "%s: no help", rows[i].key);
		cr_expect_null(strstr(h, "default"), "%s: help states a default: %s", rows[i].key, h);
		cr_expect(h[strlen(h) - 1] != '.', "%s: help ends in '.' (the pages add one)", rows[i].key);
	}
}

/* fsd_config_defaults writes each row's default; the rest is zero. */
#define CHECK_STR(f, d) cr_expect_str_eq(c.f, STRD(d), #f);
#define CHECK_NUM(f, d) cr_expect(fabs((double)c.f - (double)NUM(d)) <= 1e-12 * fabs((double)NUM(d)), #f);
#define CHECK_U32(f, d) CHECK_NUM(f, d)
#define CHECK_U64(f, d) CHECK_NUM(f, d)
#define CHECK_DBL(f, d) CHECK_NUM(f, d)
#define CHECK_INT(f, d) CHECK_NUM(f, d)
#define CHECK_MODE(f, d) CHECK_NUM(f, d)
#define CHECK_FLAG(f, d) CHECK_NUM(f, d)
#define CHECK_ONOFF(f, d) CHECK_NUM(f, d)
#define CHECK(key, field, type, n, d, lo, hi, rl, h) CHECK_##type(field, d)
Test(options, defaults_written)
{
	struct fsd_config c;
	memset(&c, 0xa5, sizeof(c));
	fsd_config_defaults(&c);
	FSD_OPTIONS(CHECK)
	cr_expect_eq(c.cards_set, 0);
	cr_expect_eq(c.bus_gbps_set, 0);
	cr_expect_eq(c.check_config, 0u);
	cr_expect_str_eq(c.fd_socket_path, "");
}

/* fsd_config_residency: the whole fsr_config from the options, one place;
 * what it makes from the defaults is a core that starts. */
Test(options, core_config_from_the_options)
{
	struct fsd_config c;
	fsd_config_defaults(&c);
	c.cards = 3;
	c.slots = 40;
	c.recency_slots = 2;
	c.freq_decay = 0.5;
	struct fsr_config rc;
	memset(&rc, 0xa5, sizeof(rc));
	fsd_config_residency(&c, &rc);
	cr_expect_eq(rc.cards, 3u);
	for (uint32_t i = 0; i < FS_MAX_CARDS; i++)
		cr_expect_eq(rc.slots[i], i < 3 ? 40u : 0u, "card %u", i);
	cr_expect_eq(rc.layers, c.layers);
	cr_expect_eq(rc.experts, c.experts);
	cr_expect_eq(rc.max_clients, c.max_clients);
	cr_expect_eq(rc.max_inflight, c.max_inflight);
	cr_expect_eq(rc.uniform_bytes, c.expert_bytes);
	cr_expect_null(rc.expert_bytes);
	cr_expect_eq(rc.tiers, 1u);
	cr_expect_eq(rc.adapt, 1u);
	cr_expect_eq(rc.recency_slots, 2u);
	cr_expect_eq(rc.predicted_slots, FSR_AUTO);
	cr_expect_eq(rc.spare_slots, FSR_AUTO);
	cr_expect_eq(rc.bus_share_pct, c.bus_share_pct);
	cr_expect_eq(rc.freq_decay, 0.5f);
	cr_expect_eq(rc.bus_gbps, c.bus_gbps);
	cr_expect_eq(rc.admit_value, c.admit_value);
	cr_expect_eq(rc.tier_adapt, c.tier_adapt);
	cr_expect_eq(rc.cross_window, c.cross_window ? FSR_CROSS_DEFAULT : 0u);
	cr_expect_eq(rc.demand_late, c.demand_late);
	cr_expect_gt(rc.cand_per_layer, 0u); /* the core's own defaults filled in */
	cr_expect_gt(rc.layer_ns, 0u);
	struct fsr *core = fsr_create(&rc);
	cr_assert_not_null(core);
	fsr_destroy(core);

	c.tiers = 0; /* the untiered policy: no tier settings */
	fsd_config_residency(&c, &rc);
	cr_expect_eq(rc.tiers, 0u);
	cr_expect_eq(rc.recency_slots, 0u);
	cr_expect_eq(rc.bus_gbps, 0.0);
	core = fsr_create(&rc);
	cr_assert_not_null(core);
	fsr_destroy(core);
}
