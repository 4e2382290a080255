/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs-llama-route-check: does llama.cpp route as the trace says?  Reads a
 * route trace (CSV or .fstrace) and the routes fs-llama-driver dumped
 * (--routes: 'pos token layer id...' lines, the ids llama.cpp's
 * ffn_moe_topk-L tensors held), and checks that every (token, layer)
 * routed to the trace's experts for decode token `token mod tokens`, in
 * rank order, and that every position 0..positions-1 was seen at every
 * layer exactly once.
 *
 *   fs-llama-route-check --trace qwen.route.csv --routes routes.txt --layers 4 --positions 64 --vocab 512
 *
 * Exit status: 0 all equal; 1 a mismatch, a gap or a bad line; 2 usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_opt.h"
#include "fs_trace.h"
#include "fsgw_llama.h"

static const char usage[] =
	"usage: fs-llama-route-check --trace FILE --routes FILE --layers L --positions N\n\n"
	"Checks fs-llama-driver --routes output against a route trace.\n\n";

/* One line: pos token layer, then topk ids.  1 read, 0 comment/blank,
 * -1 malformed. */
static int parse_line(char *line, uint32_t topk, uint32_t *pos, uint32_t *tok, uint32_t *layer, long *ids)
{
	if (line[0] == '#' || line[0] == '\n' || line[0] == 0)
		return 0;
	char *p = line, *end;
	unsigned long v[3];
	for (int i = 0; i < 3; i++) {
		errno = 0;
		v[i] = strtoul(p, &end, 10);
		if (end == p || errno || v[i] > UINT32_MAX)
			return -1;
		p = end;
	}
	for (uint32_t k = 0; k < topk; k++) {
		ids[k] = strtol(p, &end, 10);
		if (end == p)
			return -1;
		p = end;
	}
	while (*p == ' ' || *p == '\n')
		p++;
	if (*p)
		return -1; /* more ids than the trace's top-k */
	*pos = (uint32_t)v[0];
	*tok = (uint32_t)v[1];
	*layer = (uint32_t)v[2];
	return 1;
}

int main(int argc, char **argv)
{
	const char *trace = NULL, *routes = NULL;
	uint32_t layers = 0, positions = 0, vocab = 0, first = 0;
	const struct fs_opt opts[] = {
		FS_OPT_STR("trace", "FILE", &trace, "the route trace the model was written from"),
		FS_OPT_STR("routes", "FILE", &routes, "fs-llama-driver --routes output"),
		FS_OPT_U32("layers", "L", &layers, 1, 4096, "the model's MoE layers"),
		FS_OPT_U32("positions", "N", &positions, 1, 1u << 24, "positions the driver fed (pp + tg)"),
		FS_OPT_U32("vocab", "V", &vocab, 0, UINT32_MAX,
			   "with it, check each line's token is (first-token + pos) mod V (0: no check)"),
		FS_OPT_U32("first-token", "T", &first, 0, UINT32_MAX, "the driver's --first-token"),
	};
	const struct fs_opt_cmd cmd = {"fs-llama-route-check", usage, NULL, opts, FS_OPT_N(opts)};
	fs_opt_parse_or_exit(&cmd, argc, argv);
	if (!trace || !routes || !layers || !positions) {
		fprintf(stderr,
			"fs-llama-route-check: --trace, --routes, --layers, --positions are required\n");
		return 2;
	}
	struct fs_trace tr;
	char err[FS_TRACE_ERRLEN];
	if (fs_trace_load(&tr, trace, err, sizeof(err)) < 0) {
		fprintf(stderr, "fs-llama-route-check: %s\n", err);
		return 1;
	}
	FILE *f = fopen(routes, "r");
	uint8_t *seen = calloc((size_t)positions * layers, 1);
	long *ids = calloc(tr.topk, sizeof(*ids));
	if (!f || !seen || !ids || layers > tr.layers) {
		fprintf(stderr, "fs-llama-route-check: %s\n",
			!f                 ? strerror(errno) :
			layers > tr.layers ? "more layers than the trace" :
					     "out of memory");
		return 1;
	}
	char line[4096];
	uint64_t rows = 0, bad = 0, lineno = 0;
	while (fgets(line, sizeof(line), f)) {
		uint32_t pos, tok, layer;
		lineno++;
		int r = parse_line(line, tr.topk, &pos, &tok, &layer, ids);
		if (r == 0)
			continue;
		if (r < 0 || pos >= positions || layer >= layers ||
		    (vocab && tok != (uint32_t)(((uint64_t)first + pos) % vocab))) {
			fprintf(stderr, "%s:%llu: malformed or out of range: %s", routes,
				(unsigned long long)lineno, line);
			bad++;
			continue;
		}
		if (seen[(size_t)pos * layers + layer]++ && bad++ < 10)
			fprintf(stderr, "position %u layer %u: seen twice\n", pos, layer);
		rows++;
		for (uint32_t k = 0; k < tr.topk; k++) {
			long want = fsgw_llama_route(&tr, tok, layer, k);
			if (ids[k] != want) {
				if (bad++ < 10)
					fprintf(stderr,
						"position %u token %u layer %u rank %u: routed to %ld, the trace's "
						"token %u says %ld\n",
						pos, tok, layer, k, ids[k], tok % tr.tokens, want);
				break;
			}
		}
	}
	fclose(f);
	uint64_t missing = 0;
	for (size_t i = 0; i < (size_t)positions * layers; i++)
		missing += !seen[i];
	printf("%llu (position, layer) rows checked against %s (%u tokens, top-%u): %llu wrong, %llu missing\n",
	       (unsigned long long)rows, trace, tr.tokens, tr.topk, (unsigned long long)bad,
	       (unsigned long long)missing);
	free(seen);
	free(ids);
	fs_trace_free(&tr);
	return bad || missing ? 1 : 0;
}
