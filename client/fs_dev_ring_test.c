/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The device ring against a real foresightd (host backend): records posted
 * the way the router-ahead kernel posts them arrive in the daemon, turn
 * into copies, and keep arriving after the daemon restarts (the ring moves
 * to the new client region).  Enabling kernel posting without a usable CUDA
 * runtime fails with a message, never silently.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "foresight/foresight.h"
#include "fs_harness.h"

/* This client's `field` in the daemon's stats (-1: not found). */
static double client_num(fs_client *c, const char *field)
{
	static char buf[1 << 20];
	int n = fs_client_stats_json(c, buf, sizeof(buf));
	if (n < 0 || (size_t)n >= sizeof(buf))
		return -1;
	cJSON *o = cJSON_Parse(buf);
	double v = -1;
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(o, "clients"))
	{
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
		if (cJSON_IsString(name) && strcmp(name->valuestring, "dev-ring-test") == 0)
			v = cJSON_GetObjectItemCaseSensitive(it, field)->valuedouble;
	}
	cJSON_Delete(o);
	return v;
}

static double dev_records(fs_client *c)
{
	return client_num(c, "dev_records");
}

static int wait_records(fs_client *c, double want)
{
	uint64_t until = fsh_now_ms() + 5000;
	while (fsh_now_ms() < until) {
		if (dev_records(c) >= want)
			return 0;
		struct timespec ts = {.tv_nsec = 5000000};
		nanosleep(&ts, NULL);
	}
	return -1;
}

static fs_client *open_client(const struct fsh_daemon *d)
{
	struct fs_client_opts o = {.socket_path = d->sock, .name = "dev-ring-test"};
	fs_client *c = NULL;
	cr_assert_eq(fs_client_open(&c, &o), 0, "fs_client_open");
	return c;
}

Test(dev_ring, predictions_arrive_and_become_copies, .timeout = 60)
{
	struct fsh_daemon d;
	cr_assert_eq(fsh_daemon_start(&d, NULL), 0, "foresightd did not start");
	fs_client *c = open_client(&d);
	struct fs_model_info mi;
	cr_assert_eq(fs_client_model(c, &mi), 0);
	cr_assert_geq(mi.layers, 4u);
	/* Ten candidates for layer 3, as the kernel posts them (no window and
	 * no usage: the engine's clock stays unknown, so no deadline can pass
	 * on a slow machine; which candidates the predicted tier keeps is
	 * fsr_tier_test's business). */
	for (uint32_t e = 0; e < 10; e++)
		cr_assert_eq(fs_dev_ring_post_predict(c, 1, 3, e, FS_ANY_CARD, 1.0f - 0.05f * (float)e, 1),
			     0);
	cr_assert_eq(wait_records(c, 10), 0, "the daemon did not consume the device ring's 10 records");
	/* ... and copied predicted experts into a card's slots. */
	unsigned landed = 0;
	uint64_t until = fsh_now_ms() + 5000;
	while (!landed && fsh_now_ms() < until) {
		struct fs_view v;
		cr_assert_eq(fs_acquire(c, &v), 0);
		for (uint32_t card = 0; card < mi.cards; card++)
			for (uint32_t e = 0; e < 10; e++) {
				struct fs_slot s;
				landed += (unsigned)fs_lookup_live(c, &v, card, 3, e, &s);
			}
		fs_release(c, &v);
	}
	cr_assert_geq(landed, 1u, "none of the 10 predicted experts landed");
	/* Bad arguments never reach the ring. */
	cr_assert_eq(fs_dev_ring_post_predict(c, 1, 3, 0, 0, -1.0f, 1), -EINVAL);
	cr_assert_eq(fs_dev_ring_post_predict(c, 1, 3, 0, 0, 1.0f, 0), -EINVAL);
	/* ... nor do records the daemon would count bad (proto/fs_rec.h, one
	 * check for both: the client once let +Inf through). */
	cr_assert_eq(fs_dev_ring_post_predict(c, 1, 3, 0, 0, INFINITY, 1), -EINVAL);
	cr_assert_eq(fs_dev_ring_post_predict(c, 1, 3, 0, 0, NAN, 1), -EINVAL);
	cr_assert_eq(fs_dev_ring_post_predict(c, 1, mi.layers, 0, 0, 1.0f, 1), -EINVAL);
	cr_assert_eq(fs_dev_ring_post_predict(c, 1, 3, mi.experts, 0, 1.0f, 1), -EINVAL);
	cr_assert_eq(fs_dev_ring_post_predict(c, 1, 3, 0, mi.cards, 1.0f, 1), -EINVAL);
	cr_assert_eq(fs_post_predict(c, 1, 3, 0, 0, INFINITY, 1, FS_SOURCE_HOST), -EINVAL);
	cr_assert_eq(fs_post_predict(c, 1, 3, 0, 0, -INFINITY, 1, FS_SOURCE_HOST), -EINVAL);
	cr_assert_eq(fs_post_predict(c, 1, mi.layers, 0, 0, 1.0f, 1, FS_SOURCE_HOST), -EINVAL);
	cr_assert_eq(fs_post_usage(c, 1, 3, mi.experts, 0, 1), -EINVAL);
	cr_assert_eq(fs_post_usage(c, 1, 3, 0, mi.cards, 1), -EINVAL);
	cr_assert_eq(fs_post_predict(c, 1, 3, 0, FS_ANY_CARD, 0.0f, 1, FS_SOURCE_HOST), 0);
	uint64_t until2 = fsh_now_ms() + 5000;
	while (client_num(c, "records") < 11 && fsh_now_ms() < until2) {
		struct timespec ts = {.tv_nsec = 5000000};
		nanosleep(&ts, NULL);
	}
	cr_assert_eq(client_num(c, "records"), 11.0, "not 10 device records and the one valid host post");
	cr_assert_eq(client_num(c, "bad_records"), 0.0, "a refused record reached the daemon");
	cr_assert_eq(fs_dev_ring_dropped(c), 0u);
	fs_client_close(c);
	cr_assert_eq(fsh_daemon_stop(&d), 0);
}

Test(dev_ring, follows_the_client_across_a_daemon_restart, .timeout = 60)
{
	struct fsh_daemon d;
	cr_assert_eq(fsh_daemon_start(&d, NULL), 0, "foresightd did not start");
	fs_client *c = open_client(&d);
	cr_assert_eq(fs_dev_ring_post_predict(c, 1, 2, 5, FS_ANY_CARD, 0.5f, 1), 0);
	cr_assert_eq(wait_records(c, 1), 0);
	kill(d.pid, SIGTERM); /* not fsh_daemon_stop: that removes the directory */
	cr_assert_eq(fsh_wait(d.pid, 10000), 0);
	cr_assert_eq(fsh_daemon_restart(&d, NULL), 0, "foresightd did not restart");
	uint64_t until = fsh_now_ms() + 5000;
	while (fs_client_attach_count(c) < 2 && fsh_now_ms() < until) {
		struct timespec ts = {.tv_nsec = 10000000};
		nanosleep(&ts, NULL);
	}
	cr_assert_eq(fs_client_attach_count(c), 2u, "the client did not re-attach");
	for (uint32_t e = 0; e < 3; e++)
		cr_assert_eq(fs_dev_ring_post_predict(c, 2, 2, e, FS_ANY_CARD, 0.5f, 1), 0);
	cr_assert_eq(wait_records(c, 3), 0, "the restarted daemon did not see the device ring's records");
	fs_client_close(c);
	cr_assert_eq(fsh_daemon_stop(&d), 0);
}

Test(dev_ring, kernel_posting_needs_a_cuda_runtime_and_says_so, .timeout = 30)
{
	struct fsh_daemon d;
	cr_assert_eq(fsh_daemon_start(&d, NULL), 0, "foresightd did not start");
	fs_client *c = open_client(&d);
	void *desc = NULL;
	int r = fs_dev_ring_enable(c, &desc);
	if (r == 0) {
		/* A machine with a GPU: the descriptor is a device address. */
		cr_assert_not_null(desc);
		fprintf(stderr, "dev_ring: a CUDA runtime and device exist here: enable succeeded\n");
	} else {
		cr_assert_null(desc);
		cr_assert(strstr(fs_client_last_error(c), "CUDA") || strstr(fs_client_last_error(c), "cuda"),
			  "enable failed (%s) without naming CUDA: %s", fs_strerror(r),
			  fs_client_last_error(c));
	}
	fs_client_close(c);
	cr_assert_eq(fsh_daemon_stop(&d), 0);
}
