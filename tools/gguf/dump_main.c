/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-gguf-dump: what our reader sees in a GGUF file, one line per item, in
 * the format tools/gguf/gguf_npm_dump.mjs prints for the independent reader
 * (@huggingface/gguf) so that the two can be compared with diff:
 *
 *   tensor <name> <ggml type id> <ne0,ne1,..> <absolute data offset>
 *   kv <key> <type> <value>     (scalars; arrays: array[<n>]; floats: -)
 */
#include <stdio.h>
#include <string.h>

#include "fsg_reader.h"

static void value(const struct fsg_file *f, const struct fsg_val *v)
{
	struct fsg_str s;
	int64_t i;
	uint64_t u;
	int b;
	if (v->type == FSG_V_ARR)
		printf("array[%llu]", (unsigned long long)v->n);
	else if (v->type == FSG_V_STR && fsg_val_str(f, v, &s) == 0)
		fwrite(s.p, 1, (size_t)s.len, stdout);
	else if (v->type == FSG_V_BOOL && fsg_val_bool(f, v, &b) == 0)
		printf("%s", b ? "true" : "false");
	else if (v->type == FSG_V_U64 && fsg_val_uint(f, v, &u) == 0)
		printf("%llu", (unsigned long long)u);
	else if (fsg_val_int(f, v, &i) == 0)
		printf("%lld", (long long)i);
	else
		printf("-");
}

int main(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: fs-gguf-dump FILE.gguf\n");
		return 2;
	}
	struct fsg_file f;
	struct fsg_err err;
	if (fsg_open(&f, argv[1], &err) < 0) {
		fprintf(stderr, "fs-gguf-dump: %s: %s\n", argv[1], err.msg);
		return 1;
	}
	printf("version %u\n", f.version);
	printf("data_offset %llu\n", (unsigned long long)f.data_off);
	for (uint64_t i = 0; i < f.n_kv; i++) {
		const struct fsg_kv *kv = &f.kv[i];
		printf("kv %.*s %s ", (int)kv->key.len, kv->key.p, fsg_vtype_name(kv->val.type));
		value(&f, &kv->val);
		printf("\n");
	}
	for (uint64_t i = 0; i < f.n_tensors; i++) {
		const struct fsg_tensor *t = &f.t[i];
		printf("tensor %s %u ", t->name, t->type);
		for (uint32_t d = 0; d < t->n_dims; d++)
			printf("%s%llu", d ? "," : "", (unsigned long long)t->ne[d]);
		printf(" %llu\n", (unsigned long long)t->off);
	}
	fsg_close(&f);
	return 0;
}
