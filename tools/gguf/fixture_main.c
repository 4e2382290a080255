/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-gguf-fixture: write small valid GGUF MoE files for tests.
 *
 *   fs-gguf-fixture --arch qwen3moe [--layers N ...] --out FILE
 *   fs-gguf-fixture --set DIR      (the fixture set: every preset)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs_opt.h"
#include "fsg_types.h"
#include "fsgw.h"

static const char usage[] = "usage: fs-gguf-fixture --arch ARCH [options] --out FILE\n"
			    "       fs-gguf-fixture --set DIR\n\n"
			    "Writes a small valid GGUF MoE model: tensors named as ARCH's converter names\n"
			    "them, every metadata value type, nested arrays, deterministic tensor bytes.\n\n";

/* --type: a ggml type name. */
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

static int write_set(const char *dir)
{
	struct fsgw_fixture fx[16];
	unsigned n = fsgw_fixtures(fx, 16);
	char path[4096], err[256];
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "fs-gguf-fixture: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	for (unsigned i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, fx[i].file);
		if (fsgw_model_write(&fx[i].m, path, err, sizeof(err)) < 0) {
			fprintf(stderr, "fs-gguf-fixture: %s: %s\n", path, err);
			return 1;
		}
		printf("%s\n", path);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct fsgw_model m;
	const char *out = NULL, *arch = NULL, *set = NULL;
	fsgw_model_defaults(&m, NULL);
	const struct fs_opt opts[] = {
		FS_OPT_STR("arch", "ARCH", &arch, fsgw_model_archs()),
		FS_OPT_U32("layers", "N", &m.layers, 0, 1024, "blocks"),
		FS_OPT_U32("experts", "N", &m.experts, 0, 4096, "experts per MoE layer"),
		FS_OPT_U32("used", "K", &m.used, 0, 4096, "experts per token"),
		FS_OPT_U32("embd", "N", &m.embd, 0, 1 << 20, "hidden size, a multiple of 32"),
		FS_OPT_U32("ff", "N", &m.ff, 0, 1 << 20, "expert FFN size, a multiple of 32"),
		FS_OPT_U32("version", "V", &m.version, 0, 3, "GGUF version 2 or 3"),
		FS_OPT_U32("alignment", "A", &m.alignment, 0, 1u << 30,
			   "general.alignment, a power of two (default: none, i.e. 32)"),
		FS_OPT_FN(
			"type", "T", &m.type, type_arg,
			"ggml type of every expert weight (Q4_K, MXFP4, F16, ...); default: mixed per layer and "
			"part"),
		FS_OPT_U64("seed", "N", &m.seed, 0, UINT64_MAX, "tensor bytes seed"),
		FS_OPT_STR("name", "S", &m.name, "general.name"),
		FS_OPT_FLAG("no-counts", 0, &m.no_metadata_counts,
			    "leave <arch>.expert_count/expert_used_count out"),
		FS_OPT_STR("out", "FILE", &out, "the file to write"),
		FS_OPT_STR("set", "DIR", &set, "write the fixture set of the tests into DIR"),
	};
	const struct fs_opt_cmd cmd = {"fs-gguf-fixture", usage, NULL, opts, FS_OPT_N(opts)};
	fs_opt_parse_or_exit(&cmd, argc, argv);
	if (set)
		return write_set(set);
	if (!arch || !out) {
		fprintf(stderr, "fs-gguf-fixture: --arch and --out are required (try --help)\n");
		return 2;
	}
	m.arch = arch;
	char err[256];
	if (fsgw_model_write(&m, out, err, sizeof(err)) < 0) {
		fprintf(stderr, "fs-gguf-fixture: %s\n", err);
		return 1;
	}
	return 0;
}
