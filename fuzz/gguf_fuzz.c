/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gguf_fuzz.c: libFuzzer harness for the GGUF reader, expert discovery and
 * the arena layout.  Whatever the bytes, the reader returns 0, -EAGAIN or
 * -EBADMSG, and anything it accepts can be decoded, planned and laid out
 * without a crash or a sanitizer report.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs_arena.h"
#include "fsg_arena.h"
#include "fsg_moe.h"
#include "fsg_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void values(const struct fsg_file *f)
{
	for (uint64_t i = 0; i < f->n_kv; i++) {
		const struct fsg_val *v = &f->kv[i].val;
		uint64_t u;
		int64_t s;
		double d;
		int b;
		struct fsg_str str;
		(void)fsg_val_uint(f, v, &u);
		(void)fsg_val_int(f, v, &s);
		(void)fsg_val_float(f, v, &d);
		(void)fsg_val_bool(f, v, &b);
		(void)fsg_val_str(f, v, &str);
		if (v->type == FSG_V_ARR && v->n) {
			struct fsg_val e;
			if (fsg_val_at(f, v, 0, &e) != 0 || fsg_val_at(f, v, v->n - 1, &e) != 0)
				abort(); /* a parsed array must be walkable */
		}
	}
}

static void layout(const struct fsg_plan *p)
{
	struct fsg_layout lo;
	if (fsg_layout_build(p, &lo, NULL) != 0)
		return;
	if (lo.bytes <= (4u << 20)) {
		uint8_t *a = calloc(1, (size_t)lo.bytes);
		if (a) {
			fsg_layout_write(p, &lo, a, lo.bytes, "fuzz");
			const struct fs_arena_hdr *h = (const void *)a;
			const struct fs_arena_entry *e = (const void *)(a + h->off_index);
			for (uint64_t i = 0; i < (uint64_t)p->layers * p->experts; i++)
				if (e[i].offset + e[i].bytes > lo.bytes ||
				    !fs_arena_parts_ok(h, lo.bytes, &e[i]))
					abort(); /* the layout must hold what the plan says */
			free(a);
		}
	}
	fsg_layout_free(&lo);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fsg_file f;
	struct fsg_err err;
	/* Half the file in the buffer: "need more" or an error, nothing else. */
	int r = fsg_parse(&f, data, size / 2, size, &err);
	if (r != 0 && r != -EAGAIN && r != -EBADMSG)
		abort();
	fsg_close(&f);
	r = fsg_parse(&f, data, size, size, &err);
	if (r != 0 && r != -EBADMSG)
		abort();
	if (r == 0) {
		values(&f);
		struct fsg_plan p;
		if (fsg_plan_build(&f, &p, &err) == 0) {
			layout(&p);
			fsg_plan_free(&p);
		}
	}
	fsg_close(&f);
	return 0;
}
