/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-gguf-model: write a MoE model llama.cpp loads and runs (random
 * weights, real shapes, valid blocks), optionally with routing replay
 * tables from a route trace or the calibrated routing model.
 *
 *   fs-gguf-model --shape qwen3-30b-a3b --out q.gguf
 *   fs-gguf-model --shape qwen3-30b-a3b --route qwen.route.csv --match-trace --out q-replay.gguf
 *   fs-gguf-model --shape tiny --route-model --out tiny.gguf
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs_opt.h"
#include "fs_trace.h"
#include "fs_trace_model.h"
#include "fsg_types.h"
#include "fsgw_llama.h"

static const char usage[] =
	"usage: fs-gguf-model [--shape NAME] [options] --out FILE\n\n"
	"Writes a MoE model llama.cpp loads: every key and tensor of the arch, valid quantized\n"
	"blocks written directly (sane scales: no NaN/Inf in the forward pass), random weights,\n"
	"a no_vocab tokenizer.  --route/--route-model add blk.N.ffn_gate_tid2eid tables: with\n"
	"integrations/llama.cpp/patches/0002-route-replay.patch, token id t then routes at every\n"
	"layer like the trace's decode token t mod (its length); the file's expert_used_count is\n"
	"the trace's top-k.  Shape options override the shape's values.\n\n";

static const char tail[] =
	"\nShapes:\n"
	"  tiny           qwen3moe 4 x 16 experts, top-4, embd 256, ff 128, vocab 512 (tests)\n"
	"  qwen3-30b-a3b  qwen3moe 48 x 128, top-8, embd 2048, ff 768, 32/4 heads x 128, "
	"vocab 151936, Q4_K experts\n"
	"  gemma-replay   qwen3moe 30 x 128, embd 2816, ff 704: Gemma-4-26B-A4B's experts "
	"(with --match-trace\n"
	"                 on the gemma trace: its bytes per layer, 3.76 MiB mean)\n"
	"  gpt-oss-20b    gpt-oss 24 x 32, top-4, 2880-wide rows, MXFP4 experts, biases, sinks\n"
	"  gpt-oss-120b   gpt-oss 36 x 128 (59 GiB)\n";

static int type_arg(void *dst, const char *v, char *err, size_t len)
{
	int t = fsg_type_by_name(v);
	if (t < 0) {
		snprintf(err, len, "not a ggml type name");
		return -1;
	}
	*(int *)dst = t;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The shape, then every option given over it (0 / -1: not given). */
struct overrides {
	const char *arch, *name;
	uint32_t layers, experts, used, embd, ff, vocab, heads, kv_heads, head_dim, ctx;
	int expert_type, down_type, dense_type;
	uint64_t seed;
};

static void apply(struct fsgw_llama *m, const struct overrides *o)
{
#define OV(f)                        \
	do {                         \
		if (o->f)            \
			m->f = o->f; \
	} while (0)
	OV(arch);
	OV(name);
	OV(layers);
	OV(experts);
	OV(used);
	OV(embd);
	OV(ff);
	OV(vocab);
	OV(heads);
	OV(kv_heads);
	OV(head_dim);
	OV(ctx);
	OV(seed);
#undef OV
	if (o->expert_type >= 0)
		m->expert_type = o->expert_type;
	if (o->down_type >= 0)
		m->down_type = o->down_type;
	if (o->dense_type >= 0)
		m->dense_type = o->dense_type;
}

static int sync_file(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	int r = fsync(fd);
	close(fd);
	return r;
}

int main(int argc, char **argv)
{
	struct overrides o;
	memset(&o, 0, sizeof(o));
	o.expert_type = o.down_type = o.dense_type = -1;
	const char *shape = "tiny", *out = NULL, *route = NULL, *route_save = NULL;
	int route_model = 0, match = 0, sync = 0;
	uint32_t route_tokens = 4096, route_session = 500;
	uint64_t route_seed = 1;
	const struct fs_opt opts[] = {
		FS_OPT_STR("shape", "NAME", &shape,
			   "tiny, qwen3-30b-a3b, gemma-replay, gpt-oss-20b, gpt-oss-120b"),
		FS_OPT_STR("arch", "ARCH", &o.arch, "qwen3moe or gpt-oss (default: the shape's)"),
		FS_OPT_U32("layers", "N", &o.layers, 1, 512, "blocks (default: the shape's)"),
		FS_OPT_U32("experts", "N", &o.experts, 1, 1024, "experts per layer (default: the shape's)"),
		FS_OPT_U32("used", "K", &o.used, 1, 1024,
			   "top-k, expert_used_count (default: the shape's; a route's top-k wins)"),
		FS_OPT_U32("embd", "N", &o.embd, 1, 1 << 20, "hidden size (default: the shape's)"),
		FS_OPT_U32("ff", "N", &o.ff, 1, 1 << 20, "expert FFN size (default: the shape's)"),
		FS_OPT_U32("vocab", "N", &o.vocab, 1, 1 << 24, "vocabulary size (default: the shape's)"),
		FS_OPT_U32("heads", "N", &o.heads, 1, 1024, "query heads (default: the shape's)"),
		FS_OPT_U32("kv-heads", "N", &o.kv_heads, 1, 1024, "key/value heads (default: the shape's)"),
		FS_OPT_U32("head-dim", "N", &o.head_dim, 1, 1024, "head size (default: the shape's)"),
		FS_OPT_U32("ctx", "N", &o.ctx, 1, 1u << 24, "context_length (default: the shape's)"),
		FS_OPT_FN("expert-type", "T", &o.expert_type, type_arg,
			  "gate/up experts' ggml type (default: the shape's, Q4_K or MXFP4)"),
		FS_OPT_FN("down-type", "T", &o.down_type, type_arg,
			  "down experts' type (default: the expert type where ff allows it, else Q8_0)"),
		FS_OPT_FN("dense-type", "T", &o.dense_type, type_arg,
			  "attention, embedding and output type (default: Q8_0)"),
		FS_OPT_U64("seed", "N", &o.seed, 1, UINT64_MAX, "weights seed (default: 1)"),
		FS_OPT_STR("name", "S", &o.name, "general.name (default: fs-ARCH)"),
		FS_OPT_STR("route", "FILE", &route,
			   "route trace (.route.csv or .fstrace): tid2eid tables from its decode tokens"),
		FS_OPT_FLAG(
			"route-model", 0, &route_model,
			"tid2eid tables from the calibrated routing model (tools/trace/fs_trace_model.h)"),
		FS_OPT_U32("route-tokens", "N", &route_tokens, 1, 1u << 24,
			   "--route-model: tokens generated"),
		FS_OPT_U32("route-session", "N", &route_session, 0, 1u << 24,
			   "--route-model: tokens per session (0: one session)"),
		FS_OPT_U64("route-seed", "N", &route_seed, 0, UINT64_MAX, "--route-model: generator seed"),
		FS_OPT_STR(
			"route-save", "FILE", &route_save,
			"write the route the tables come from as a .fstrace (fs-llama-route-check reads it)"),
		FS_OPT_FLAG("match-trace", 0, &match,
			    "with --route: per layer, the down type that makes one expert the trace's "
			    "expert_bytes"),
		FS_OPT_FLAG("sync", 0, &sync, "fsync the file before reporting the time"),
		FS_OPT_STR("out", "FILE", &out, "the file to write"),
	};
	const struct fs_opt_cmd cmd = {"fs-gguf-model", usage, tail, opts, FS_OPT_N(opts)};
	fs_opt_parse_or_exit(&cmd, argc, argv);

	struct fsgw_llama m;
	if (fsgw_llama_shape(&m, shape) < 0) {
		fprintf(stderr, "fs-gguf-model: --shape %s: one of %s\n", shape, fsgw_llama_shapes());
		return 2;
	}
	apply(&m, &o);
	if (!out || (route && route_model) || (match && !route)) {
		fprintf(stderr, "fs-gguf-model: --out is required; --route and --route-model exclude each "
				"other; --match-trace needs --route (try --help)\n");
		return 2;
	}
	struct fs_trace tr;
	memset(&tr, 0, sizeof(tr));
	char err[FS_TRACE_ERRLEN];
	int rc = 0;
	if (route)
		rc = fs_trace_load(&tr, route, err, sizeof(err));
	else if (route_model)
		rc = fs_trace_model_simple(&tr, m.layers, m.experts, m.used, route_tokens, route_session,
					   route_seed, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "fs-gguf-model: %s\n", err);
		return 1;
	}
	if (route_save && (route || route_model) &&
	    fs_trace_write_bin(&tr, route_save, err, sizeof(err)) < 0) {
		fprintf(stderr, "fs-gguf-model: %s\n", err);
		rc = -1;
	}
	if (route || route_model) {
		if (m.used != tr.topk)
			fprintf(stderr, "fs-gguf-model: expert_used_count %u (the route's top-k), not %u\n",
				tr.topk, m.used);
		m.used = tr.topk;
		m.route = &tr;
	}
	uint8_t *down = NULL;
	if (match && rc == 0) {
		int recorded = tr.layers >= m.layers;
		for (uint32_t l = 0; recorded && l < m.layers; l++)
			recorded = tr.expert_bytes[l] != 0;
		down = calloc(m.layers, 1);
		if (!recorded || !down) {
			fprintf(stderr, "fs-gguf-model: --match-trace: %s\n",
				down ? "the trace records no expert_bytes for some layer of the model" :
				       "out of memory");
			rc = -1;
		} else {
			m.down_types = down;
			rc = fsgw_llama_match_bytes(&m, tr.expert_bytes, err, sizeof(err));
			if (rc < 0)
				fprintf(stderr, "fs-gguf-model: --match-trace: %s\n", err);
		}
	}
	double t0 = now_s();
	if (rc == 0 && (rc = fsgw_llama_write(&m, out, err, sizeof(err))) < 0)
		fprintf(stderr, "fs-gguf-model: %s\n", err);
	if (rc == 0 && sync && (rc = sync_file(out)) < 0)
		fprintf(stderr, "fs-gguf-model: %s: fsync: %s\n", out, strerror(errno));
	if (rc == 0) {
		double s = now_s() - t0;
		uint64_t bytes = fsgw_llama_data_bytes(&m);
		printf("%s: %s %u layers x %u experts, top-%u, embd %u, ff %u, vocab %u; expert %s/%s %.2f MiB "
		       "(layer 0); %.2f GiB of tensors in %.1f s (%.0f MB/s%s)%s\n",
		       out, m.arch, m.layers, m.experts, m.used, m.embd, m.ff, m.vocab,
		       fsg_type_name((uint32_t)m.expert_type), fsg_type_name(fsgw_llama_down_type(&m, 0)),
		       (double)fsgw_llama_expert_bytes(&m, 0) / 1048576.0, (double)bytes / 1073741824.0, s,
		       (double)bytes / 1e6 / (s > 0 ? s : 1), sync ? ", fsync'd" : ", page cache",
		       m.route ? "; with tid2eid" : "");
	}
	free(down);
	fs_trace_free(&tr);
	return rc == 0 ? 0 : 1;
}
