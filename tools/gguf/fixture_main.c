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

#include "fsg_types.h"
#include "fsgw.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: fs-gguf-fixture --arch ARCH [options] --out FILE\n"
		"       fs-gguf-fixture --set DIR\n\n"
		"Writes a small valid GGUF MoE model: tensors named as ARCH's converter names\n"
		"them, every metadata value type, nested arrays, deterministic tensor bytes.\n\n"
		"  --arch ARCH       %s\n"
		"  --layers N        blocks (default 4)\n"
		"  --experts N       experts per MoE layer (default 8)\n"
		"  --used K          experts per token (default 2)\n"
		"  --embd N          hidden size, a multiple of 32 (default 256)\n"
		"  --ff N            expert FFN size, a multiple of 32 (default 64)\n"
		"  --version V       GGUF version 2 or 3 (default 3)\n"
		"  --alignment A     general.alignment, a power of two (default: none, i.e. 32)\n"
		"  --type T          ggml type of every expert weight (Q4_K, MXFP4, F16, ...);\n"
		"                    default: mixed per layer and part\n"
		"  --seed N          tensor bytes seed (default 1)\n"
		"  --name S          general.name\n"
		"  --no-counts       leave <arch>.expert_count/expert_used_count out\n"
		"  --set DIR         write the fixture set of the tests into DIR\n",
		fsgw_model_archs());
}

static int num(const char *flag, const char *v, unsigned long long max, unsigned long long *out)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v ? v : "", &end, 0);
	if (!v || errno || *end || end == v || x > max) {
		fprintf(stderr, "fs-gguf-fixture: %s '%s': not a number in 0..%llu\n", flag, v ? v : "", max);
		return -1;
	}
	*out = x;
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
	const char *out = NULL, *arch = NULL;
	fsgw_model_defaults(&m, NULL);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		unsigned long long x = 0;
		int rc = 0, takes = 1;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--set")) {
			if (!v) {
				usage(stderr);
				return 2;
			}
			return write_set(v);
		} else if (!strcmp(a, "--no-counts")) {
			m.no_metadata_counts = 1;
			takes = 0;
		} else if (!v) {
			fprintf(stderr, "fs-gguf-fixture: %s needs a value (try --help)\n", a);
			return 2;
		} else if (!strcmp(a, "--arch")) {
			arch = v;
		} else if (!strcmp(a, "--out")) {
			out = v;
		} else if (!strcmp(a, "--name")) {
			m.name = v;
		} else if (!strcmp(a, "--type")) {
			m.type = fsg_type_by_name(v);
			if (m.type < 0) {
				fprintf(stderr, "fs-gguf-fixture: --type '%s': not a ggml type name\n", v);
				return 2;
			}
		} else if (!strcmp(a, "--layers") && !(rc = num(a, v, 1024, &x))) {
			m.layers = (uint32_t)x;
		} else if (!strcmp(a, "--experts") && !(rc = num(a, v, 4096, &x))) {
			m.experts = (uint32_t)x;
		} else if (!strcmp(a, "--used") && !(rc = num(a, v, 4096, &x))) {
			m.used = (uint32_t)x;
		} else if (!strcmp(a, "--embd") && !(rc = num(a, v, 1 << 20, &x))) {
			m.embd = (uint32_t)x;
		} else if (!strcmp(a, "--ff") && !(rc = num(a, v, 1 << 20, &x))) {
			m.ff = (uint32_t)x;
		} else if (!strcmp(a, "--version") && !(rc = num(a, v, 3, &x))) {
			m.version = (uint32_t)x;
		} else if (!strcmp(a, "--alignment") && !(rc = num(a, v, 1u << 30, &x))) {
			m.alignment = (uint32_t)x;
		} else if (!strcmp(a, "--seed") && !(rc = num(a, v, UINT64_MAX, &x))) {
			m.seed = x;
		} else if (rc == 0) {
			fprintf(stderr, "fs-gguf-fixture: unknown option '%s' (try --help)\n", a);
			return 2;
		}
		if (rc)
			return 2;
		i += takes;
	}
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
