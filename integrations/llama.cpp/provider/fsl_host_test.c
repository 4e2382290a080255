/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The provider's core against a real foresightd on the host backend, with a
 * host stand-in for the GPU runtime: the "device" reads host pointers, the
 * route "kernel" posts usage from the host.  What a CUDA build adds is the
 * runtime calls and the kernel (fsl_cuda.cu, checked on the GPU machine:
 * bench/llama); what is here is every table entry, every claim and check,
 * and the daemon going away and coming back.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "foresight/foresight.h"
#include "fs_harness.h"
#include "fs_arena.h"
#include "fsg_types.h"
#include "fsgw.h"
#include "fsl.h"
#include "fsl_stage.h"

/* ---- the host stand-in ---------------------------------------------------- */

struct host {
	fs_client *c; /* for the route stand-in: posts from the host */
	uint64_t routes;
};
static struct host g_host;

static int h_map_host(void *ctx, const void *base, uint64_t bytes, uint64_t *dev)
{
	(void)ctx, (void)bytes;
	*dev = (uint64_t)(uintptr_t)base;
	return 0;
}
/* The provider leaves its device and pinned blocks to the runtime until
 * the process ends (fsl_close: a captured kernel may still name them); the
 * stand-in runtime frees them at the test's end (teardown), so a test that
 * opens two providers leaks nothing under LeakSanitizer. */
static void *g_blocks[64];
static unsigned g_nblocks;

static int h_alloc(void *ctx, uint64_t bytes, void **p)
{
	(void)ctx;
	if (g_nblocks == sizeof(g_blocks) / sizeof(g_blocks[0]))
		return -ENOMEM;
	*p = calloc(1, bytes);
	if (*p)
		g_blocks[g_nblocks++] = *p;
	return *p ? 0 : -ENOMEM;
}
static int h_alloc_mapped(void *ctx, uint64_t bytes, void **host, void **dev)
{
	int r = h_alloc(ctx, bytes, host);
	*dev = *host;
	return r;
}
static int h_copy_in(void *ctx, void *dev, const void *host, uint64_t bytes, uint32_t slot)
{
	(void)ctx, (void)slot;
	memcpy(dev, host, bytes);
	return 0;
}
static int h_copy_done(void *ctx, uint32_t slot)
{
	(void)ctx, (void)slot;
	return 1;
}
static int h_download(void *ctx, void *host, const void *dev, uint64_t bytes)
{
	(void)ctx;
	memcpy(host, dev, bytes);
	return 0;
}
static int h_upload(void *ctx, void *dev, const void *host, uint64_t bytes, void *stream)
{
	(void)ctx, (void)stream;
	memcpy(dev, host, bytes);
	return 0;
}
static int h_mark(void *ctx, unsigned k, void *stream)
{
	(void)ctx, (void)k, (void)stream;
	return 0;
}
static int h_passed(void *ctx, unsigned k)
{
	(void)ctx, (void)k;
	return 1; /* the stand-in's "device" is done when the call returns */
}
static int h_ring(void *ctx, fs_client *c, void **desc)
{
	((struct host *)ctx)->c = c;
	*desc = NULL;
	return 0;
}
/* The route kernel's job on the host: each distinct expert once, hit when
 * its table entry is not in the arena. */
static int h_route(void *ctx, const struct fsl_route *r, void *stream)
{
	(void)stream;
	struct host *h = ctx;
	uint8_t seen[1024] = {0};
	struct fsl_counters *cnt = (struct fsl_counters *)r->counters;
	if (r->used)
		memset(r->used + FSL_USED_BITS, 0, (r->experts + 31) / 32 * sizeof(uint32_t));
	for (int64_t j = 0; j < r->n_tokens; j++)
		for (int64_t i = 0; i < r->n_used; i++) {
			int32_t e = r->ids[i + j * r->ids_stride];
			if (e < 0 || (uint32_t)e >= r->experts || seen[e])
				continue;
			seen[e] = 1;
			uint64_t p = (uint64_t)(uintptr_t)r->table[e];
			int hit = p < r->arena_dev || p >= r->arena_dev + r->arena_bytes;
			cnt->uses++;
			cnt->hits += hit;
			if (r->post)
				cnt->posted += fs_post_usage(h->c, *r->window, r->layer, (uint32_t)e, r->card,
							     hit) == 0;
			if (r->used)
				r->used[FSL_USED_BITS + e / 32] |= 1u << (e % 32);
		}
	if (r->used)
		r->used[FSL_USED_WINDOW] = *r->window + 1u;
	/* staging, as fsl_stage_kernel then fsl_route_kernel do it */
	uint32_t list[FSL_STAGE_MAX_IDS];
	uint32_t n = fsl_stage_list(r, list);
	for (uint32_t m = 0; m < n; m++)
		memcpy(r->stage + m * r->stage_stride, fsl_stage_src(r, list[m]),
		       (r->blob_bytes + 15) / 16 * 16);
	for (uint32_t m = 0; m < n; m++)
		for (int k = 0; k < 4; k++)
			if (r->tables[k])
				r->tables[k][list[m]] = r->stage + m * r->stage_stride + r->part_off[k];
	cnt->staged += n;
	h->routes++;
	return 0;
}

static struct fsl_gpu host_gpu(void)
{
	return (struct fsl_gpu){.ctx = &g_host,
				.map_host = h_map_host,
				.alloc_dev = h_alloc,
				.download = h_download,
				.alloc_mapped = h_alloc_mapped,
				.copy_in = h_copy_in,
				.copy_done = h_copy_done,
				.alloc_pinned = h_alloc,
				.upload = h_upload,
				.mark = h_mark,
				.passed = h_passed,
				.wait = h_passed,
				.route = h_route,
				.ring = h_ring,
				.host_slots = 1,
				.device = -1};
}

/* ---- the model and the daemon --------------------------------------------- */

static char g_dir[64], g_model[128];
static struct fsgw_model g_m;
static struct fsh_daemon g_d;

static void setup(void)
{
	snprintf(g_dir, sizeof(g_dir), "/tmp/fsl-host-XXXXXX");
	cr_assert_not_null(mkdtemp(g_dir));
	fsgw_model_defaults(&g_m, "qwen3moe");
	g_m.layers = 3;
	g_m.experts = 16;
	g_m.used = 2;
	g_m.embd = 256;
	g_m.ff = 256; /* whole Q4_K blocks for down too */
	g_m.type = fsg_type_by_name("Q4_K");
	snprintf(g_model, sizeof(g_model), "%s/m.gguf", g_dir);
	char err[256];
	cr_assert_eq(fsgw_model_write(&g_m, g_model, err, sizeof(err)), 0, "%s", err);
	memset(&g_host, 0, sizeof(g_host));
}

static void teardown(void)
{
	if (g_d.pid > 0)
		fsh_daemon_stop(&g_d);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
	cr_expect_eq(system(cmd), 0);
	while (g_nblocks)
		free(g_blocks[--g_nblocks]);
}

TestSuite(fsl_host, .init = setup, .fini = teardown, .timeout = 120);

static void start_daemon(const char *slots)
{
	const char *extra[] = {"--model", g_model, "--allow-unlocked", "--slots", slots, "--cards",
			       "1",       NULL};
	cr_assert_eq(fsh_daemon_start(&g_d, extra), 0, "foresightd did not start");
}

static struct fsl *open_provider_opts(int check, uint64_t lru_mib, uint32_t stage)
{
	struct fsl_opts o = {.socket = g_d.sock,
			     .name = "fsl_host_test",
			     .wait_s = 30,
			     .check = check,
			     .lru_mib = lru_mib,
			     .stage = stage};
	struct fsl_gpu gpu = host_gpu();
	struct fsl *p = NULL;
	int r = fsl_open(&p, &o, &gpu);
	cr_assert_eq(r, 0, "fsl_open: %s", fsl_error());
	return p;
}

static struct fsl *open_provider_lru(int check, uint64_t lru_mib)
{
	return open_provider_opts(check, lru_mib, 0);
}

static struct fsl *open_provider(int check)
{
	return open_provider_opts(check, 0, 0);
}

static const char *const k_roles[] = {"gate", "up", "down"};

/* llama.cpp's view of blk.L.ffn_<role>_exps.weight in this model. */
static void weight_of(uint32_t layer, const char *role, char *name, size_t n, int64_t ne[4], size_t nb[4])
{
	snprintf(name, n, "blk.%u.ffn_%s_exps.weight", layer, role);
	int down = strcmp(role, "down") == 0;
	ne[0] = down ? g_m.ff : g_m.embd;
	ne[1] = down ? g_m.embd : g_m.ff;
	ne[2] = g_m.experts;
	ne[3] = 1;
	uint64_t row = 0;
	cr_assert_eq(fsg_row_bytes((uint32_t)g_m.type, (uint64_t)ne[0], &row), 0);
	nb[0] = fsg_type((uint32_t)g_m.type)->block_bytes;
	nb[1] = row;
	nb[2] = row * (uint64_t)ne[1];
	nb[3] = nb[2] * (uint64_t)ne[2];
}

struct claimed {
	const void *const *t[8][3];
};

static void claim_all(struct fsl *p, struct claimed *cl)
{
	for (uint32_t l = 0; l < g_m.layers; l++)
		for (int r = 0; r < 3; r++) {
			char name[64];
			int64_t ne[4];
			size_t nb[4];
			weight_of(l, k_roles[r], name, sizeof(name), ne, nb);
			cl->t[l][r] = fsl_claim(p, 0, name, g_m.type, ne, nb);
			cr_assert_not_null(cl->t[l][r], "%s: %s", name, fsl_error());
		}
}

/* The arena's bytes of (layer, expert)'s part for role r, and its size. */
static const uint8_t *arena_part(fs_client *c, uint32_t l, uint32_t e, uint32_t role, uint64_t *bytes)
{
	struct fs_expert_blob b;
	struct fs_expert_part parts[12];
	cr_assert_eq(fs_arena_expert(c, l, e, &b), 0);
	int n = fs_arena_expert_parts(c, l, e, parts, 12);
	for (int i = 0; i < n; i++)
		if (parts[i].role == role && parts[i].what == FS_WHAT_WEIGHT) {
			*bytes = parts[i].bytes;
			return (const uint8_t *)b.data + parts[i].offset;
		}
	cr_assert_fail("no part %u in layer %u", role, l);
	return NULL;
}

/* Whether p points into the arena the provider reads misses from. */
static int in_arena(const void *p)
{
	struct fs_arena_region reg;
	const void *pin = fs_arena_pin(g_host.c);
	cr_assert_eq(fs_arena_pin_region(pin, &reg), 0);
	const uint8_t *lo = reg.base, *q = p;
	int in = q >= lo && q < lo + reg.bytes;
	fs_arena_unpin(g_host.c, pin);
	return in;
}

/* What a kernel would read through layer l's entries: the arena's bytes,
 * then the zero tail.  Returns how many entries pointed at a slot (or a
 * staged copy: outside the arena). */
static unsigned read_layer(fs_client *c, const struct claimed *cl, uint32_t l)
{
	unsigned slots = 0;
	struct fs_arena_region reg;
	const void *pin = fs_arena_pin(c);
	cr_assert_eq(fs_arena_pin_region(pin, &reg), 0);
	for (int r = 0; r < 3; r++)
		for (uint32_t e = 0; e < g_m.experts; e++) {
			uint64_t bytes;
			const uint8_t *want = arena_part(c, l, e, (uint32_t)(r + 1), &bytes);
			const uint8_t *got = cl->t[l][r][e];
			cr_assert_not_null(got);
			cr_assert_eq(memcmp(got, want, bytes), 0, "layer %u %s expert %u: wrong bytes", l,
				     k_roles[r], e);
			uint64_t tail = 0;
			cr_assert_eq(fsg_row_bytes((uint32_t)g_m.type, FS_ARENA_PART_TAIL_ELEMS, &tail), 0);
			for (uint64_t i = 0; i < tail; i++)
				cr_assert_eq(got[bytes + i], 0, "layer %u %s expert %u: tail byte %llu is %u",
					     l, k_roles[r], e, (unsigned long long)i, got[bytes + i]);
			slots += got < (const uint8_t *)reg.base ||
				 got >= (const uint8_t *)reg.base + reg.bytes;
		}
	fs_arena_unpin(c, pin);
	return slots;
}

/* Every layer's entries (staging off: a staged copy holds only the layer
 * that ran last). */
static unsigned read_all(fs_client *c, const struct claimed *cl, const void *unused)
{
	(void)unused;
	unsigned slots = 0;
	for (uint32_t l = 0; l < g_m.layers; l++)
		slots += read_layer(c, cl, l);
	return slots;
}

/* One evaluation: begin, every layer's route with these ids, end. */
static void evaluate(struct fsl *p, const struct claimed *cl, const int32_t *ids, int64_t n_used,
		     int64_t n_tokens)
{
	fsl_begin(p, 0, NULL);
	for (uint32_t l = 0; l < g_m.layers; l++)
		for (int r = 0; r < 3; r++)
			fsl_route_layer(p, cl->t[l][r], ids, n_used, n_tokens, n_used, NULL);
	fsl_end(p, 0, NULL);
}

Test(fsl_host, claims_by_name_and_shape)
{
	start_daemon("32");
	struct fsl *p = open_provider(1);
	struct claimed cl;
	claim_all(p, &cl);
	char name[64];
	int64_t ne[4];
	size_t nb[4];
	weight_of(0, "up", name, sizeof(name), ne, nb);
	/* refused: another type, another shape, a layer or name foresightd has not */
	cr_expect_null(fsl_claim(p, 0, name, fsg_type_by_name("Q8_0"), ne, nb));
	cr_expect(strstr(fsl_error(), "is it serving this model file?") != NULL, "%s", fsl_error());
	int64_t ne2[4] = {ne[0], ne[1] * 2, ne[2], 1};
	cr_expect_null(fsl_claim(p, 0, name, g_m.type, ne2, nb));
	int64_t ne3[4] = {ne[0], ne[1], ne[2] + 1, 1};
	cr_expect_null(fsl_claim(p, 0, name, g_m.type, ne3, nb));
	cr_expect_null(fsl_claim(p, 0, "blk.9.ffn_up_exps.weight", g_m.type, ne, nb));
	cr_expect_null(fsl_claim(p, 0, "blk.0.attn_q.weight", g_m.type, ne, nb));
	cr_expect_null(fsl_claim(p, 0, "blk.0.ffn_up_exps.bias", g_m.type, ne, nb));
	uint32_t l, r;
	cr_expect_eq(fsl_parse_name("blk.12.ffn_gate_up_exps.weight", &l, &r), 0);
	cr_expect(l == 12 && r == FS_ROLE_GATE_UP);
	fsl_close(p);
}

Test(fsl_host, checks_the_loaders_bytes)
{
	start_daemon("32");
	struct fsl *p = open_provider(2);
	struct claimed cl;
	claim_all(p, &cl);
	/* What llama.cpp loads: the file's tensor, every expert's slice in a row. */
	char name[64];
	int64_t ne[4];
	size_t nb[4];
	weight_of(1, "down", name, sizeof(name), ne, nb);
	size_t total = nb[3];
	uint8_t *w = malloc(total);
	cr_assert_not_null(w);
	for (uint32_t e = 0; e < g_m.experts; e++) {
		uint64_t bytes;
		const uint8_t *a = arena_part(g_host.c, 1, e, FS_ROLE_DOWN, &bytes);
		cr_assert_eq(bytes, nb[2]);
		memcpy(w + e * nb[2], a, bytes);
	}
	/* in pieces, as the loader may hand them */
	cr_expect_eq(fsl_check(p, cl.t[1][2], w, 0, total / 3), 0, "%s", fsl_error());
	cr_expect_eq(fsl_check(p, cl.t[1][2], w + total / 3, total / 3, total - total / 3), 0, "%s",
		     fsl_error());
	w[5 * nb[2] + nb[2] / 2] ^= 1; /* the middle of expert 5: only a full check sees it */
	cr_expect_neq(fsl_check(p, cl.t[1][2], w, 0, total), 0);
	cr_expect(strstr(fsl_error(), "expert 5") != NULL, "%s", fsl_error());
	fsl_close(p);
	/* the sampled check compares the ends of each slice only */
	p = open_provider(1);
	claim_all(p, &cl);
	cr_expect_eq(fsl_check(p, cl.t[1][2], w, 0, total), 0, "%s", fsl_error());
	w[6 * nb[2]] ^= 1;
	cr_expect_neq(fsl_check(p, cl.t[1][2], w, 0, total), 0);
	free(w);
	fsl_close(p);
}

/* Every entry reads the right bytes, window after window, while usage fills
 * slots; then with the daemon killed (the arena still reads), and after it
 * is back (slots again). */
Test(fsl_host, tables_read_the_right_bytes_through_a_restart)
{
	start_daemon("40");
	struct fsl *p = open_provider(1);
	struct claimed cl;
	claim_all(p, &cl);
	int32_t ids[2 * 4];
	unsigned slots = 0;
	/* A skewed routing: experts 0..3 every window, others now and then. */
	for (int w = 0; w < 200 && slots == 0; w++) {
		for (int j = 0; j < 4; j++) {
			ids[2 * j] = j;
			ids[2 * j + 1] = 4 + (w * 7 + j * 3) % 12;
		}
		evaluate(p, &cl, ids, 2, 4);
		usleep(5000);
		if (w % 10 == 9)
			slots = read_all(g_host.c, &cl, NULL);
	}
	cr_assert_gt(slots, 0, "no entry ever pointed at a slot");
	struct fsl_stats st;
	fsl_stats(p, &st);
	cr_expect_gt(st.dev.posted, 0);
	cr_expect_gt(st.slot_entries, 0);
	cr_expect_eq(st.empty_views, 0);

	/* kill -9: the next evaluations read everything from the arena */
	cr_assert_eq(kill(g_d.pid, SIGKILL), 0);
	cr_assert_eq(fsh_wait(g_d.pid, 5000), 128 + SIGKILL);
	g_d.pid = 0;
	usleep(300 * 1000); /* the library notices (heartbeat) */
	for (int w = 0; w < 5; w++)
		evaluate(p, &cl, ids, 2, 4);
	cr_expect_eq(read_all(g_host.c, &cl, NULL), 0, "an entry still points at a dead daemon's slot");
	fsl_stats(p, &st);
	cr_expect_gt(st.empty_views, 0);

	/* back: the library re-attaches, slots again */
	const char *extra[] = {"--model", g_model, "--allow-unlocked", "--slots", "40", "--cards", "1", NULL};
	cr_assert_eq(fsh_daemon_restart(&g_d, extra), 0);
	slots = 0;
	for (int w = 0; w < 400 && slots == 0; w++) {
		evaluate(p, &cl, ids, 2, 4);
		usleep(5000);
		if (w % 10 == 9)
			slots = read_all(g_host.c, &cl, NULL);
	}
	cr_expect_gt(slots, 0, "no slot after the restart");
	char js[1024];
	cr_expect_gt(fsl_stats_json(p, js, sizeof(js)), 0);
	cr_expect(strstr(js, "\"attaches\":2") != NULL, "%s", js);
	fsl_close(p);
}

/* The in-process LRU baseline: what a layer used is copied in for next
 * time, each layer keeps its share, and every entry still reads the right
 * bytes; foresightd serves only the arena (nothing posted). */
Test(fsl_host, the_lru_baseline_keeps_what_was_used)
{
	start_daemon("40");
	struct fsl *p = open_provider_lru(1, 1); /* 1 MiB: 9 blobs of ~112 KiB, 3 a layer */
	struct claimed cl;
	claim_all(p, &cl);
	int32_t ids[2] = {3, 9};
	evaluate(p, &cl, ids, 2, 1);
	cr_expect_eq(read_all(g_host.c, &cl, NULL), 0, "nothing is cached before a use");
	evaluate(p, &cl, ids, 2, 1); /* learns the first's use: 3 and 9 copied in */
	cr_expect_eq(read_all(g_host.c, &cl, NULL), 2 * 3 * g_m.layers,
		     "experts 3 and 9 of every layer and role");
	int32_t ids2[2] = {5, 3};
	evaluate(p, &cl, ids2, 2, 1);
	evaluate(p, &cl, ids2, 2, 1); /* 5 in: 3, 9, 5 */
	cr_expect_eq(read_all(g_host.c, &cl, NULL), 3 * 3 * g_m.layers);
	int32_t ids3[2] = {7, 3};
	evaluate(p, &cl, ids3, 2, 1);
	evaluate(p, &cl, ids3, 2, 1); /* 7 in over 9, the least recently used; 3 and 5 stay */
	struct fsl_stats st;
	fsl_stats(p, &st);
	cr_expect_eq(st.dev.posted, 0, "the baseline posts nothing to foresightd");
	cr_expect_eq(read_all(g_host.c, &cl, NULL), 3 * 3 * g_m.layers);
	for (uint32_t l = 0; l < g_m.layers; l++) {
		cr_expect(in_arena(cl.t[l][1][9]), "layer %u: 9, the least recently used, was evicted", l);
		cr_expect(!in_arena(cl.t[l][1][5]), "layer %u: 5 stays", l);
	}
	fsl_close(p);
}

/* Staging: the first stage_cap misses of a layer are copied and every
 * claimed role's entry points at the copy (the right bytes and tails: the
 * products read them); the rest stay in the arena. */
Test(fsl_host, stages_the_first_misses)
{
	start_daemon("1");
	struct fsl *p = open_provider_opts(1, 0, 1);
	struct claimed cl;
	claim_all(p, &cl);
	int32_t ids[2] = {3, 9};
	/* As the device runs it: each layer's products right after its
	 * staging (the next layer's staging reuses the buffer). */
	fsl_begin(p, 0, NULL);
	for (uint32_t l = 0; l < g_m.layers; l++) {
		for (int r = 0; r < 3; r++)
			fsl_route_layer(p, cl.t[l][r], ids, 2, 1, 2, NULL);
		cr_expect_eq(read_layer(g_host.c, &cl, l), 3, "layer %u: expert 3's three parts staged", l);
	}
	fsl_end(p, 0, NULL);
	for (uint32_t l = 0; l < g_m.layers; l++) /* the pointers stay; the last layer's bytes do */
		for (int r = 0; r < 3; r++) {
			cr_expect(!in_arena(cl.t[l][r][3]), "layer %u role %d: 3, the first miss, staged", l,
				  r);
			cr_expect(in_arena(cl.t[l][r][9]), "layer %u role %d: 9 past the cap, in place", l,
				  r);
		}
	struct fsl_stats st;
	fsl_stats(p, &st);
	cr_expect_eq(st.dev.staged, g_m.layers);
	fsl_close(p);
}

Test(fsl_host, says_why_it_cannot_attach)
{
	struct fsl_opts o = {.socket = "/tmp/fsl-no-such.sock", .wait_s = 1, .check = 1};
	struct fsl_gpu gpu = host_gpu();
	struct fsl *p = NULL;
	cr_expect_lt(fsl_open(&p, &o, &gpu), 0);
	cr_expect(strstr(fsl_error(), "cannot attach to foresightd") != NULL, "%s", fsl_error());
}
