/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_query.c against a real foresightd: stats as JSON (the snprintf
 * contract), an expert's part table (GGUF arena: gate | up | down; a
 * synthetic arena: none), a host card's device, and the message of a
 * failed open.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "foresight/foresight.h"
#include "fs_harness.h"
#include "fsgw.h"

static fs_client *open_on(const struct fsh_daemon *d)
{
	fs_client *c = NULL;
	struct fs_client_opts o = {.socket_path = d->sock, .name = "fs_query_test"};
	int r = fs_client_open(&c, &o);
	cr_assert_eq(r, 0, "open: %s (%s)", fs_strerror(r), fs_open_error());
	cr_assert_str_empty(fs_open_error());
	return c;
}

Test(fs_query, stats_json_card_device_and_no_parts, .timeout = 60)
{
	struct fsh_daemon d;
	const char *extra[] = {"--layers", "3",       "--experts", "5", "--experts-used",
			       "2",        "--slots", "8",         NULL};
	cr_assert_eq(fsh_daemon_start(&d, extra), 0);
	fs_client *c = open_on(&d);

	char small[8];
	int n = fs_client_stats_json(c, small, sizeof(small));
	cr_assert_gt(n, (int)sizeof(small), "stats length %d", n);
	cr_assert_eq(strlen(small), sizeof(small) - 1, "truncated like snprintf");
	cr_assert_eq(fs_client_stats_json(c, NULL, 0) > 0, 1);
	/* Two replies may differ in length (uptime, counters): a roomy buffer
	 * takes the whole of the next one. */
	size_t cap = (size_t)n + 4096;
	char *buf = malloc(cap);
	int n2 = fs_client_stats_json(c, buf, cap);
	cr_assert(n2 > 0 && (size_t)n2 < cap, "stats length %d", n2);
	cr_assert_eq(strlen(buf), (size_t)n2);
	cJSON *o = cJSON_Parse(buf);
	cr_assert_not_null(o, "%s", buf);
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "model");
	cr_assert_eq(cJSON_GetObjectItemCaseSensitive(m, "layers")->valueint, 3);
	cr_assert_eq(cJSON_GetObjectItemCaseSensitive(m, "experts")->valueint, 5);
	cr_assert_null(cJSON_GetObjectItemCaseSensitive(o, "ok"), "the reply minus ok");
	cr_assert(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o, "clients")));
	cJSON_Delete(o);
	free(buf);

	cr_assert_eq(fs_card_device(c, 0), -ENODEV, "a host card has no CUDA device");
	cr_assert_eq(fs_card_device(c, 99), -EINVAL);

	struct fs_expert_part p[12];
	cr_assert_eq(fs_arena_expert_parts(c, 0, 0, p, 12), 0, "a synthetic arena has no part table");
	cr_assert_eq(fs_arena_expert_parts(c, 3, 0, p, 12), -EINVAL);
	cr_assert_eq(fs_arena_expert_parts(c, 0, 5, p, 12), -EINVAL);

	fs_client_close(c);
	cr_assert_eq(fsh_daemon_stop(&d), 0);
}

/* The daemon gone: stats fails with a message within the 2 s timeout. */
Test(fs_query, stats_fail_when_daemon_gone, .timeout = 60)
{
	struct fsh_daemon d;
	const char *extra[] = {"--layers", "2",       "--experts", "4", "--experts-used",
			       "2",        "--slots", "4",         NULL};
	cr_assert_eq(fsh_daemon_start(&d, extra), 0);
	fs_client *c = open_on(&d);
	cr_assert_eq(fsh_daemon_stop(&d), 0);
	char buf[64];
	int r = fs_client_stats_json(c, buf, sizeof(buf));
	cr_assert_lt(r, 0, "stats without a daemon: %d", r);
	cr_assert(strstr(fs_client_last_error(c), "stats") != NULL, "%s", fs_client_last_error(c));
	fs_client_close(c);
}

Test(fs_query, gguf_parts, .timeout = 60)
{
	char dir[] = "/tmp/fsq-XXXXXX", path[96], err[256];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/m.gguf", dir);
	struct fsgw_model mo;
	fsgw_model_defaults(&mo, "qwen3moe");
	mo.type = 30; /* BF16 */
	cr_assert_eq(fsgw_model_write(&mo, path, err, sizeof(err)), 0, "%s", err);

	struct fsh_daemon d;
	const char *extra[] = {"--model", path, "--allow-unlocked", "--slots", "8", NULL};
	cr_assert_eq(fsh_daemon_start(&d, extra), 0);
	fs_client *c = open_on(&d);
	struct fs_expert_part p[12];
	cr_assert_eq(fs_arena_expert_parts(c, 1, 2, p, 12), 3);
	const uint16_t roles[3] = {FS_ROLE_GATE, FS_ROLE_UP, FS_ROLE_DOWN};
	uint64_t end = 0;
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(p[i].role, roles[i]);
		cr_assert_eq(p[i].what, FS_WHAT_WEIGHT);
		cr_assert_eq(p[i].ggml_type, 30u);
		cr_assert_eq(p[i].offset % 256, 0u);
		cr_assert_geq(p[i].offset, end);
		end = p[i].offset + p[i].bytes;
	}
	cr_assert_eq(p[0].ne[0], mo.embd);
	cr_assert_eq(p[0].ne[1], mo.ff);
	cr_assert_eq(p[2].ne[0], mo.ff);
	cr_assert_eq(p[2].ne[1], mo.embd);
	cr_assert_eq(p[0].bytes, 2ull * mo.embd * mo.ff);
	struct fs_expert_blob b;
	cr_assert_eq(fs_arena_expert(c, 1, 2, &b), 0);
	cr_assert_leq(end, b.bytes);
	/* max bounds what is written, not the count. */
	struct fs_expert_part one[2];
	memset(one, 0xab, sizeof(one));
	cr_assert_eq(fs_arena_expert_parts(c, 1, 2, one, 1), 3);
	cr_assert_eq(one[1].role, 0xabab, "nothing written past max");
	fs_client_close(c);
	cr_assert_eq(fsh_daemon_stop(&d), 0);
	remove(path);
	remove(dir);
}

Test(fs_query, open_error_message, .timeout = 30)
{
	fs_client *c = (fs_client *)1;
	struct fs_client_opts o = {.socket_path = "/nonexistent-dir/fs.sock", .name = "fs_query_test"};
	int r = fs_client_open(&c, &o);
	cr_assert_lt(r, 0);
	cr_assert_null(c);
	cr_assert(strstr(fs_open_error(), "/nonexistent-dir/fs.sock") != NULL, "message: '%s'",
		  fs_open_error());
	char longp[200];
	memset(longp, 'x', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = 0;
	o.socket_path = longp;
	cr_assert_eq(fs_client_open(&c, &o), -ENAMETOOLONG);
	cr_assert(strstr(fs_open_error(), "too long") != NULL, "message: '%s'", fs_open_error());
}
