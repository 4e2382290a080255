/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-llama-driver: load a model with llama.cpp's own parameters (layers on
 * the GPU, tensor buffer overrides as -ot, flash attention, threads,
 * ubatch), feed token ids first, first + 1, ... (a prefill of P tokens,
 * then D single-token decode steps), R repetitions from an empty KV
 * cache, and print pp/tg t/s, per-token decode times and a hash of the
 * logits of every output token; optionally dump the logits and the
 * routed experts per (token, layer).
 *
 * Same model, same flags, same tokens: two runs' logit hashes compare
 * byte for byte.  Token ids in order are what routing replay needs
 * (patches/0002-route-replay.patch: token t routes like the trace's
 * token t).
 *
 * Exit status: 0; 1 error; 2 usage; 3 non-finite logits; 4 repetitions'
 * logits differ (with --require-identical).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"
#include "fs_opt.h"
#include "ggml-backend.h"

static const char usage[] =
	"usage: fs-llama-driver -m MODEL [options]\n\n"
	"Feeds token ids FIRST, FIRST+1, ...: a prefill of P tokens, then D decode steps, R times\n"
	"(each from an empty KV cache, after W warm-up runs); prints pp/tg t/s per repetition and\n"
	"their medians, per-token decode times (--jsonl), and an FNV-1a 64 hash of every output\n"
	"token's logits (the prefill's last token, or all with --all-logits, and every decode step).\n\n";

static const char tail[] =
	"\nExit status: 0; 1 error; 2 usage; 3 non-finite logits; 4 repetitions differ (--require-identical).\n"
	"--routes needs the names llama.cpp gives the top-k tensors (ffn_moe_topk-L) and turns on\n"
	"--all-logits (the last layer then computes every token); its lines are 'pos token layer ids...'.\n";

const char *const drv_fa_choices[] = {"auto", "on", "off", NULL};
/* llama_load_mode_from_str()'s names (it throws on others), in enum order after "default" */
static const char *const load_choices[] = {"default", "auto",       "none", "mmap",
					   "mlock",   "mmap+mlock", "dio",  NULL};

static int ot_arg(void *dst, const char *v, char *err, size_t len)
{
	struct drv_opts *o = dst;
	if (!strchr(v, '=') || o->n_ot == DRV_MAX_OT) {
		snprintf(err, len, "PATTERN=BUFFER_TYPE, at most %d", DRV_MAX_OT);
		return -1;
	}
	o->ot[o->n_ot++] = v;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int verbose_log;

static void log_cb(enum ggml_log_level level, const char *text, void *user)
{
	(void)user;
	if (verbose_log || level == GGML_LOG_LEVEL_ERROR)
		fputs(text, stderr);
}

/* ---- buffer types by name: each device's default, host and extra ones
 * (where a backend registers one of its own, -ot can name it) ---- */

static int buft_is(ggml_backend_buffer_type_t b, const char *name)
{
	return b && strcmp(ggml_backend_buft_name(b), name) == 0;
}

static ggml_backend_buffer_type_t buft_by_name(const char *name, int list)
{
	for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
		ggml_backend_dev_t dev = ggml_backend_dev_get(i);
		ggml_backend_buffer_type_t c[2] = {ggml_backend_dev_buffer_type(dev),
						   ggml_backend_dev_host_buffer_type(dev)};
		for (int k = 0; k < 2; k++) {
			if (list && c[k])
				fprintf(stderr, "  %s\n", ggml_backend_buft_name(c[k]));
			if (!list && buft_is(c[k], name))
				return c[k];
		}
		ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
		ggml_backend_dev_get_extra_bufts_t extra =
			reg ? (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(
				      reg, "ggml_backend_dev_get_extra_bufts") :
			      NULL;
		for (ggml_backend_buffer_type_t *e = extra ? extra(dev) : NULL; e && *e; e++) {
			if (list)
				fprintf(stderr, "  %s\n", ggml_backend_buft_name(*e));
			else if (buft_is(*e, name))
				return *e;
		}
	}
	return NULL;
}

/* -ot rules, then --n-cpu-moe's (llama.cpp's LLM_FFN_EXPS_REGEX per layer),
 * ended by {NULL, NULL}; the strings live as long as the process. */
static struct llama_model_tensor_buft_override *overrides(const struct drv_opts *o)
{
	size_t n = o->n_ot + o->n_cpu_moe;
	struct llama_model_tensor_buft_override *v = calloc(n + 1, sizeof(*v));
	if (!v)
		return NULL;
	for (unsigned i = 0; i < o->n_ot; i++) {
		const char *eq = strrchr(o->ot[i], '=');
		char *pat = strndup(o->ot[i], (size_t)(eq - o->ot[i]));
		v[i].pattern = pat;
		v[i].buft = buft_by_name(eq + 1, 0);
		if (!pat || !v[i].buft) {
			fprintf(stderr, "fs-llama-driver: --ot %s: unknown buffer type; available:\n",
				o->ot[i]);
			buft_by_name(NULL, 1);
			return NULL;
		}
	}
	ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
	for (unsigned l = 0; l < o->n_cpu_moe; l++) {
		char *pat = malloc(64);
		if (!pat || !cpu)
			return NULL;
		snprintf(pat, 64, "blk\\.%u\\.ffn_(up|down|gate|gate_up)_(ch|)exps", l);
		v[o->n_ot + l].pattern = pat;
		v[o->n_ot + l].buft = ggml_backend_dev_buffer_type(cpu);
	}
	return v;
}

/* ---- a run -------------------------------------------------------------- */

struct run {
	const struct drv_opts *o;
	struct llama_context *ctx;
	struct llama_batch batch;
	uint32_t n_vocab;
	uint64_t first; /* token id of position 0 in this run */
	struct drv_routes routes;
	FILE *logits_out, *logits_raw; /* the first measured repetition only */
};

/* Hash one output's logits into the repetition; dump it when asked. */
static int take_logits(struct run *x, struct drv_rep *r, int32_t idx, uint32_t pos, int dump)
{
	const float *lg = llama_get_logits_ith(x->ctx, idx);
	if (!lg) {
		fprintf(stderr, "fs-llama-driver: no logits for output %d (position %u)\n", idx, pos);
		return -1;
	}
	uint64_t h = drv_fnv1a(DRV_FNV_INIT, lg, (size_t)x->n_vocab * sizeof(float));
	for (uint32_t i = 0; i < x->n_vocab; i++)
		r->nonfinite += !isfinite(lg[i]);
	r->logits_hash = drv_fnv1a(r->logits_hash, &h, sizeof(h));
	r->outputs++;
	if (dump && x->logits_out)
		fprintf(x->logits_out, "%u %016llx\n", pos, (unsigned long long)h);
	if (dump && x->logits_raw && fwrite(lg, sizeof(float), x->n_vocab, x->logits_raw) != x->n_vocab)
		return -1;
	return 0;
}

static uint32_t token_at(const struct run *x, uint32_t pos)
{
	return (uint32_t)((x->first + pos) % x->n_vocab);
}

static void batch_set(struct run *x, uint32_t pos, uint32_t n, int all_logits, int last_logits)
{
	struct llama_batch *b = &x->batch;
	b->n_tokens = (int32_t)n;
	for (uint32_t i = 0; i < n; i++) {
		b->token[i] = (llama_token)token_at(x, pos + i);
		b->pos[i] = (llama_pos)(pos + i);
		b->n_seq_id[i] = 1;
		b->seq_id[i][0] = 0;
		b->logits[i] = (int8_t)(all_logits || (last_logits && i == n - 1));
	}
}

/* Decode the batch and wait for it: its wall time, or -1. */
static double decode(struct run *x, uint32_t pos)
{
	drv_routes_batch(&x->routes, pos);
	double t0 = now_s();
	int rc = llama_decode(x->ctx, x->batch);
	llama_synchronize(x->ctx);
	double t = now_s() - t0;
	if (rc != 0) {
		fprintf(stderr, "fs-llama-driver: llama_decode at position %u: %d\n", pos, rc);
		return -1;
	}
	return t;
}

static int one_rep(struct run *x, struct drv_rep *r, int dump)
{
	const struct drv_opts *o = x->o;
	llama_memory_clear(llama_get_memory(x->ctx), true);
	r->logits_hash = DRV_FNV_INIT;
	r->nonfinite = 0;
	r->outputs = 0;
	r->pp_s = r->tg_s = 0;
	x->routes.on = dump;
	for (uint32_t pos = 0; pos < o->pp; pos += o->batch) {
		uint32_t n = o->pp - pos < o->batch ? o->pp - pos : o->batch;
		batch_set(x, pos, n, o->all_logits, pos + n == o->pp);
		double t = decode(x, pos);
		if (t < 0)
			return -1;
		r->pp_s += t;
		for (uint32_t i = 0; i < n; i++)
			if (x->batch.logits[i] && take_logits(x, r, (int32_t)i, pos + i, dump) < 0)
				return -1;
	}
	for (uint32_t s = 0; s < o->tg; s++) {
		batch_set(x, o->pp + s, 1, 1, 1);
		double t = decode(x, o->pp + s);
		if (t < 0)
			return -1;
		r->tg_ms[s] = t * 1e3;
		r->tg_s += t;
		if (take_logits(x, r, 0, o->pp + s, dump) < 0)
			return -1;
	}
	x->routes.on = 0;
	return 0;
}

static FILE *open_or_null(const char *path, const char *mode, int *err)
{
	if (!path)
		return NULL;
	FILE *f = fopen(path, mode);
	if (!f) {
		perror(path);
		*err = 1;
	}
	return f;
}

static int run_all(const struct drv_opts *o, struct llama_model *model)
{
	struct run x;
	memset(&x, 0, sizeof(x));
	x.o = o;
	x.n_vocab = (uint32_t)llama_vocab_n_tokens(llama_model_get_vocab(model));
	int err = 0, rc = 0;
	if (o->routes_out &&
	    drv_routes_open(&x.routes, o->routes_out, (uint32_t)llama_model_n_layer(model),
			    (uint32_t)((o->first_token + (uint64_t)o->warmup * o->rep_stride) % x.n_vocab),
			    x.n_vocab) < 0) {
		perror(o->routes_out);
		return 1;
	}
	struct llama_context_params cp = llama_context_default_params();
	cp.n_ctx = o->ctx ? o->ctx : (o->pp + o->tg + 255) / 256 * 256;
	cp.n_batch = o->batch;
	cp.n_ubatch = o->ubatch;
	cp.n_threads = (int32_t)o->threads;
	cp.n_threads_batch = (int32_t)o->threads;
	cp.flash_attn_type = o->fa == 1 ? LLAMA_FLASH_ATTN_TYPE_ENABLED :
			     o->fa == 2 ? LLAMA_FLASH_ATTN_TYPE_DISABLED :
					  LLAMA_FLASH_ATTN_TYPE_AUTO;
	cp.no_perf = true;
	if (o->routes_out) {
		cp.cb_eval = drv_routes_cb;
		cp.cb_eval_user_data = &x.routes;
	}
	x.ctx = llama_init_from_model(model, cp);
	x.batch = llama_batch_init((int32_t)o->batch, 0, 1);
	FILE *jsonl = open_or_null(o->jsonl, "a", &err), *csv = open_or_null(o->csv, "a", &err);
	x.logits_out = open_or_null(o->logits_out, "w", &err);
	x.logits_raw = open_or_null(o->logits_raw, "wb", &err);
	struct drv_rep *reps = calloc(o->reps, sizeof(*reps));
	double *ms = calloc((size_t)(o->reps + 1) * (o->tg ? o->tg : 1), sizeof(*ms));
	if (!x.ctx || !reps || !ms || err) {
		fprintf(stderr, "fs-llama-driver: %s\n",
			!x.ctx ? "cannot create the context" : "cannot start");
		rc = 1;
		goto out;
	}
	if (csv && ftell(csv) == 0)
		fprintf(csv,
			"label,model,ngl,n_cpu_moe,n_ot,fa,threads,ubatch,pp,tg,rep,pp_tps,tg_tps,tg_ms_p50,logits_fnv,"
			"nonfinite\n");
	printf("model %s: ngl %d, %u -ot rules, --n-cpu-moe %u, fa %s, %u threads, ubatch %u, batch %u, ctx %u; "
	       "pp%u tg%u x %u (+%u warm-up), tokens from %u, +%u per run\n",
	       o->model, o->ngl, o->n_ot, o->n_cpu_moe, drv_fa_choices[o->fa], o->threads, o->ubatch,
	       o->batch, cp.n_ctx, o->pp, o->tg, o->reps, o->warmup, o->first_token, o->rep_stride);
	printf("| rep |     pp t/s |     tg t/s | tg ms p50 | logits fnv-1a 64 | nonfinite |\n"
	       "|-----|------------|------------|-----------|------------------|-----------|\n");
	struct drv_rep warm = {.tg_ms = ms + (size_t)o->reps * (o->tg ? o->tg : 1)};
	int identical = 1;
	uint64_t warm_hash = 0;
	for (uint32_t w = 0; w < o->warmup && rc == 0; w++) {
		x.first = o->first_token + (uint64_t)w * o->rep_stride;
		rc = one_rep(&x, &warm, 0) < 0 ? 1 : 0;
		warm_hash = warm.logits_hash;
	}
	for (uint32_t i = 0; i < o->reps && rc == 0; i++) {
		reps[i].tg_ms = ms + (size_t)i * (o->tg ? o->tg : 1);
		x.first = o->first_token + (uint64_t)(o->warmup + i) * o->rep_stride;
		if (one_rep(&x, &reps[i], i == 0) < 0) {
			rc = 1;
			break;
		}
		/* other tokens (--rep-stride), other logits: nothing to compare */
		identical &= o->rep_stride || (reps[i].logits_hash == reps[0].logits_hash &&
					       (o->warmup == 0 || warm_hash == reps[0].logits_hash));
		drv_report_rep(o, jsonl, csv, i, &reps[i]);
	}
	if (rc == 0) {
		drv_report_summary(o, jsonl, csv, reps, o->reps, identical);
		for (uint32_t i = 0; i < o->reps; i++)
			rc = reps[i].nonfinite ? 3 : rc;
		if (rc == 0 && !identical && o->require_identical)
			rc = 4;
	}
	if (o->routes_out) {
		uint64_t rows = x.routes.rows;
		int r = drv_routes_close(&x.routes);
		if (r < 0 || rows == 0) {
			fprintf(stderr, "fs-llama-driver: --routes %s: %s\n", o->routes_out,
				r == -2   ? "a top-k tensor that is not I32 [k, n]" :
				rows == 0 ? "no ffn_moe_topk-L tensor seen (not a MoE graph?)" :
					    "write failed");
			rc = rc ? rc : 1;
		}
	}
out:
	if (x.logits_out && fclose(x.logits_out) != 0)
		rc = rc ? rc : 1;
	if (x.logits_raw && fclose(x.logits_raw) != 0)
		rc = rc ? rc : 1;
	if (jsonl)
		fclose(jsonl);
	if (csv)
		fclose(csv);
	if (o->routes_out && x.routes.f)
		drv_routes_close(&x.routes);
	free(reps);
	free(ms);
	llama_batch_free(x.batch);
	if (x.ctx)
		llama_free(x.ctx);
	return rc;
}

int main(int argc, char **argv)
{
	struct drv_opts o;
	memset(&o, 0, sizeof(o));
	o.ngl = 99;
	o.threads = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
	o.ubatch = 512;
	o.batch = 2048;
	o.pp = 512;
	o.tg = 128;
	o.reps = 5;
	o.warmup = 1;
	const struct fs_opt opts[] = {
		{.name = "model",
		 .alias = 'm',
		 .type = FS_OPT_T_STR,
		 .dst = &o.model,
		 .arg = "FILE",
		 .help = "the GGUF model"},
		FS_OPT_INT("ngl", "N", &o.ngl, -1, 100000, "layers on the GPU (llama.cpp -ngl; -1: all)"),
		FS_OPT_FN("ot", "PAT=BUFT", &o, ot_arg,
			  "tensor buffer override, as llama.cpp's -ot (repeatable; first match wins)"),
		FS_OPT_U32("n-cpu-moe", "N", &o.n_cpu_moe, 0, 4096,
			   "the experts of layers 0..N-1 in host memory (llama.cpp --n-cpu-moe)"),
		FS_OPT_CHOICE("fa", "auto|on|off", &o.fa, drv_fa_choices, "flash attention"),
		FS_OPT_U32("threads", "N", &o.threads, 1, 4096, "CPU threads (default: online CPUs)"),
		FS_OPT_U32("ubatch", "N", &o.ubatch, 1, 1 << 20, "physical batch (llama.cpp -ub)"),
		FS_OPT_U32("batch", "N", &o.batch, 1, 1 << 20,
			   "logical batch: prefill tokens per llama_decode"),
		FS_OPT_U32("ctx", "N", &o.ctx, 0, 1 << 24,
			   "context size (default: pp + tg rounded up to 256)"),
		FS_OPT_U32("pp", "P", &o.pp, 0, 1 << 20, "prefill tokens"),
		FS_OPT_U32("tg", "D", &o.tg, 0, 1 << 20, "decode steps"),
		FS_OPT_U32("reps", "R", &o.reps, 1, 100000, "measured repetitions"),
		FS_OPT_U32("warmup", "W", &o.warmup, 0, 100, "unmeasured repetitions first"),
		FS_OPT_U32("first-token", "T", &o.first_token, 0, UINT32_MAX,
			   "token id of position 0 (ids wrap at the vocabulary size)"),
		FS_OPT_U32("rep-stride", "S", &o.rep_stride, 0, UINT32_MAX,
			   "run k (warm-ups first) starts at token FIRST + k*S: fresh routing per repetition "
			   "(0: every run the same tokens, and their logits are compared)"),
		FS_OPT_FLAG("all-logits", 0, &o.all_logits,
			    "the prefill outputs (and hashes) every token's logits"),
		FS_OPT_STR("logits-out", "FILE", &o.logits_out,
			   "'pos fnv1a64' per output token of the first repetition"),
		FS_OPT_STR("logits-raw", "FILE", &o.logits_raw,
			   "raw float32 logits of every output token of the first repetition"),
		FS_OPT_STR("routes", "FILE", &o.routes_out,
			   "routed experts per (token, layer) of the first repetition (eval callback)"),
		FS_OPT_STR("label", "S", &o.label,
			   "names the configuration in --jsonl/--csv lines (no commas)"),
		FS_OPT_STR("jsonl", "FILE", &o.jsonl, "append a JSON line per repetition and a summary line"),
		FS_OPT_STR("csv", "FILE", &o.csv, "append a CSV line per repetition and a summary line"),
		FS_OPT_FLAG("require-identical", 0, &o.require_identical,
			    "exit 4 when a repetition's logits differ from the first's"),
		FS_OPT_FLAG(
			"no-repack", 0, &o.no_repack,
			"no extra CPU buffer types (llama_model_params.use_extra_bufts = false): CPU weights "
			"stay in the mapped file instead of a repacked copy"),
		FS_OPT_CHOICE(
			"load-mode", "MODE", &o.load_mode, load_choices,
			"llama_model_params.load_mode: default, auto, none, mmap, mlock, mmap+mlock, dio"),
		FS_OPT_FLAG("verbose", 'v', &o.verbose, "llama.cpp's log on stderr"),
	};
	const struct fs_opt_cmd cmd = {"fs-llama-driver", usage, tail, opts, FS_OPT_N(opts)};
	fs_opt_parse_or_exit(&cmd, argc, argv);
	if (!o.model || o.pp + o.tg == 0) {
		fprintf(stderr, "fs-llama-driver: --model is required, and pp + tg >= 1 (try --help)\n");
		return 2;
	}
	if (o.routes_out)
		o.all_logits = 1;
	if (o.batch > o.pp && o.pp)
		o.batch = o.pp;
	verbose_log = o.verbose;
	llama_log_set(log_cb, NULL);
	llama_backend_init();
	ggml_backend_load_all();
	struct llama_model_params mp = llama_model_default_params();
	mp.n_gpu_layers = o.ngl;
	if (o.no_repack)
		mp.use_extra_bufts = false;
	if (o.load_mode > 0)
		mp.load_mode = (enum llama_load_mode)(o.load_mode - 2); /* "auto" is -1 */
	if (o.n_ot + o.n_cpu_moe) {
		mp.tensor_buft_overrides = overrides(&o);
		if (!mp.tensor_buft_overrides)
			return 2;
	}
	struct llama_model *model = llama_model_load_from_file(o.model, mp);
	if (!model) {
		fprintf(stderr, "fs-llama-driver: %s: cannot load the model (-v for llama.cpp's log)\n",
			o.model);
		return 1;
	}
	char desc[256];
	llama_model_desc(model, desc, sizeof(desc));
	printf("%s, %.2f GiB, %llu parameters, %d layers, vocab %d\n", desc,
	       (double)llama_model_size(model) / 1073741824.0,
	       (unsigned long long)llama_model_n_params(model), llama_model_n_layer(model),
	       llama_vocab_n_tokens(llama_model_get_vocab(model)));
	int rc = run_all(&o, model);
	llama_model_free(model);
	llama_backend_free();
	return rc;
}
