/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_trace_csv.c: reader of the CSV route traces
 * (../shared/data/route-traces/README.md):
 *
 *   # route_trace v1
 *   # model=PATH arch=A n_layer=N n_expert=E n_expert_used=K
 *   # layer=L expert_bytes=B dense_bytes=D        (one per layer, optional)
 *   turn,phase,step,layer,slot,expert,weight,residency,expert_bytes
 *   0,1,28,0,0,49,0.22,0,3059712
 *
 * Columns are found by name, so their order may change and extra columns
 * are ignored.  The file is untrusted: every field is checked and every
 * failure is a message naming the line, never a crash.  Rows are collected
 * first and sorted by (phase, turn, step, layer, slot): the recorder writes
 * prefill layer by layer and decode token by token, and nothing here should
 * depend on that.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_trace.h"
#include "fs_trace_int.h"

enum col { C_TURN, C_PHASE, C_STEP, C_LAYER, C_SLOT, C_EXPERT, C_N };
static const char *const col_name[C_N] = {"turn", "phase", "step", "layer", "slot", "expert"};

#define MAX_FIELDS 64

struct row {
	uint32_t turn, step;
	uint32_t line;
	uint16_t layer, expert;
	uint8_t phase, slot;
};

struct parser {
	const char *name;
	char *err;
	size_t errlen;
	unsigned long line;

	int seen_magic, seen_model, seen_columns;
	uint32_t layers, experts, topk;
	char model[128], arch[32];
	uint64_t *expert_bytes;
	unsigned char *bytes_seen;

	int ncol;
	int col[C_N]; /* field index of each column, -1 when absent */

	struct row *rows;
	size_t n, cap;
};

#define FAIL(p, ...) fs_trace_fail((p)->err, (p)->errlen, -EINVAL, __VA_ARGS__)

static const char *phase_name(unsigned phase)
{
	return phase ? "decode" : "prefill";
}

/* Strict unsigned decimal: digits only, no sign or blanks, at most max. */
static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		unsigned d = (unsigned)(*s - '0');
		if (v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

static int parse_u32(const char *s, uint32_t max, uint32_t *out)
{
	uint64_t v;
	if (parse_u64(s, max, &v))
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src);
}

/* Split "# k=v k=v ..." in place; calls fn(p, ctx, key, value) per pair. */
typedef int (*kv_fn)(struct parser *p, void *ctx, const char *key, const char *val);
static int each_kv(struct parser *p, char *s, kv_fn fn, void *ctx)
{
	char *save = NULL;
	for (char *tok = strtok_r(s + 1, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq)
			continue; /* free text in a header line: not ours to judge */
		*eq = '\0';
		int rc = fn(p, ctx, tok, eq + 1);
		if (rc)
			return rc;
	}
	return 0;
}

static int model_kv(struct parser *p, void *ctx, const char *key, const char *val)
{
	(void)ctx;
	struct {
		const char *key;
		uint32_t *dst;
	} nums[] = {{"n_layer", &p->layers}, {"n_expert", &p->experts}, {"n_expert_used", &p->topk}};
	if (strcmp(key, "model") == 0)
		copy_str(p->model, sizeof(p->model), val);
	else if (strcmp(key, "arch") == 0)
		copy_str(p->arch, sizeof(p->arch), val);
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
		if (strcmp(key, nums[i].key) == 0 && parse_u32(val, UINT32_MAX, nums[i].dst))
			return FAIL(p, "%s line %lu: %s='%s' is not an unsigned integer", p->name, p->line,
				    key, val);
	return 0;
}

static int model_line(struct parser *p, char *s)
{
	if (p->seen_model)
		return FAIL(p, "%s line %lu: second '# model=' line", p->name, p->line);
	p->layers = p->experts = p->topk = 0;
	int rc = each_kv(p, s, model_kv, NULL);
	if (rc)
		return rc;
	const char *msg;
	if (!p->layers || !p->experts || !p->topk)
		return FAIL(p,
			    "%s line %lu: model line needs n_layer=, n_expert= and n_expert_used=", p->name,
			    p->line);
	if (fs_trace_check_dims(p->layers, p->experts, p->topk, &msg))
		return FAIL(p, "%s line %lu: n_layer=%u n_expert=%u n_expert_used=%u: %s", p->name, p->line,
			    p->layers, p->experts, p->topk, msg);
	p->expert_bytes = calloc(p->layers, sizeof(uint64_t));
	p->bytes_seen = calloc(p->layers, 1);
	if (!p->expert_bytes || !p->bytes_seen)
		return fs_trace_fail(p->err, p->errlen, -ENOMEM, "%s: out of memory", p->name);
	p->seen_model = 1;
	return 0;
}

/* "# layer=L expert_bytes=B dense_bytes=D": collects L and B. */
struct layer_kv {
	uint64_t layer, bytes;
	int have_layer, have_bytes;
};

static int layer_kv_fn(struct parser *p, void *ctx, const char *key, const char *val)
{
	struct layer_kv *kv = ctx;
	if (strcmp(key, "layer") == 0) {
		if (parse_u64(val, UINT32_MAX, &kv->layer))
			return FAIL(p, "%s line %lu: layer='%s' is not an unsigned integer", p->name, p->line,
				    val);
		kv->have_layer = 1;
	} else if (strcmp(key, "expert_bytes") == 0) {
		if (parse_u64(val, UINT64_MAX, &kv->bytes))
			return FAIL(p, "%s line %lu: expert_bytes='%s' is not an unsigned integer", p->name,
				    p->line, val);
		kv->have_bytes = 1;
	}
	return 0;
}

static int layer_line(struct parser *p, char *s)
{
	if (!p->seen_model)
		return FAIL(p, "%s line %lu: '# layer=' line before the '# model=... n_layer=...' line",
			    p->name, p->line);
	struct layer_kv kv = {0};
	int rc = each_kv(p, s, layer_kv_fn, &kv);
	if (rc)
		return rc;
	if (!kv.have_layer || !kv.have_bytes)
		return FAIL(p, "%s line %lu: layer line needs layer= and expert_bytes=", p->name, p->line);
	if (kv.layer >= p->layers)
		return FAIL(p, "%s line %lu: layer=%llu out of range (n_layer=%u)", p->name, p->line,
			    (unsigned long long)kv.layer, p->layers);
	if (p->bytes_seen[kv.layer])
		return FAIL(p, "%s line %lu: second line for layer=%llu", p->name, p->line,
			    (unsigned long long)kv.layer);
	p->bytes_seen[kv.layer] = 1;
	p->expert_bytes[kv.layer] = kv.bytes;
	return 0;
}

static int comment_line(struct parser *p, char *s)
{
	if (!p->seen_magic) {
		if (strcmp(s, "# route_trace v1") == 0) {
			p->seen_magic = 1;
			return 0;
		}
		if (strncmp(s, "# route_trace ", 14) == 0)
			return FAIL(p, "%s line %lu: unsupported '%s' (this reader knows '# route_trace v1')",
				    p->name, p->line, s);
		return FAIL(p, "%s line %lu: not a route trace (expected '# route_trace v1')", p->name,
			    p->line);
	}
	if (p->seen_columns)
		return 0; /* comments among the rows */
	if (strncmp(s, "# layer=", 8) == 0)
		return layer_line(p, s);
	if (strstr(s, "n_layer="))
		return model_line(p, s);
	return 0;
}

static int split(char *s, char **f)
{
	int n = 0;
	for (;;) {
		if (n == MAX_FIELDS)
			return -1;
		f[n++] = s;
		char *c = strchr(s, ',');
		if (!c)
			return n;
		*c = '\0';
		s = c + 1;
	}
}

static int column_header(struct parser *p, char *s)
{
	char *f[MAX_FIELDS];
	if (!p->seen_model)
		return FAIL(p, "%s line %lu: column header before the '# model=... n_layer=...' line",
			    p->name, p->line);
	int n = split(s, f);
	if (n < 0)
		return FAIL(p, "%s line %lu: more than %d columns", p->name, p->line, MAX_FIELDS);
	for (int c = 0; c < C_N; c++)
		p->col[c] = -1;
	for (int i = 0; i < n; i++)
		for (int c = 0; c < C_N; c++)
			if (strcmp(f[i], col_name[c]) == 0) {
				if (p->col[c] >= 0)
					return FAIL(p, "%s line %lu: column '%s' appears twice", p->name,
						    p->line, col_name[c]);
				p->col[c] = i;
			}
	for (int c = C_PHASE; c < C_N; c++) /* turn is optional */
		if (p->col[c] < 0)
			return FAIL(p, "%s line %lu: no '%s' column in the header", p->name, p->line,
				    col_name[c]);
	p->ncol = n;
	p->seen_columns = 1;
	return 0;
}

/* One field of a row, checked against its bound (inclusive max). */
static int field(struct parser *p, char **f, enum col c, uint32_t max, const char *bound, uint32_t *out)
{
	const char *s = f[p->col[c]];
	uint64_t v;
	if (parse_u64(s, UINT32_MAX, &v))
		return FAIL(p, "%s line %lu: %s '%s' is not an unsigned integer", p->name, p->line,
			    col_name[c], s);
	if (v > max)
		return FAIL(p, "%s line %lu: %s %llu out of range (%s)", p->name, p->line, col_name[c],
			    (unsigned long long)v, bound);
	*out = (uint32_t)v;
	return 0;
}

static int data_row(struct parser *p, char *s)
{
	char *f[MAX_FIELDS];
	int n = split(s, f);
	if (n != p->ncol)
		return FAIL(p, "%s line %lu: %d fields, the header has %d", p->name, p->line,
			    n < 0 ? MAX_FIELDS : n, p->ncol);
	char b_layer[40], b_slot[40], b_expert[40];
	snprintf(b_layer, sizeof(b_layer), "n_layer=%u", p->layers);
	snprintf(b_slot, sizeof(b_slot), "n_expert_used=%u", p->topk);
	snprintf(b_expert, sizeof(b_expert), "n_expert=%u", p->experts);
	uint32_t turn = 0, phase, step, layer, slot, expert;
	int rc = 0;
	if (p->col[C_TURN] >= 0)
		rc = field(p, f, C_TURN, UINT32_MAX, "", &turn);
	if (!rc)
		rc = field(p, f, C_PHASE, 1, "0 prefill or 1 decode", &phase);
	if (!rc)
		rc = field(p, f, C_STEP, UINT32_MAX, "", &step);
	if (!rc)
		rc = field(p, f, C_LAYER, p->layers - 1, b_layer, &layer);
	if (!rc)
		rc = field(p, f, C_SLOT, p->topk - 1, b_slot, &slot);
	if (!rc)
		rc = field(p, f, C_EXPERT, p->experts - 1, b_expert, &expert);
	if (rc)
		return rc;
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 4096;
		struct row *r = realloc(p->rows, cap * sizeof(*r));
		if (!r)
			return fs_trace_fail(p->err, p->errlen, -ENOMEM, "%s: out of memory", p->name);
		p->rows = r;
		p->cap = cap;
	}
	p->rows[p->n++] = (struct row){.turn = turn,
				       .step = step,
				       .line = (uint32_t)p->line,
				       .layer = (uint16_t)layer,
				       .expert = (uint16_t)expert,
				       .phase = (uint8_t)phase,
				       .slot = (uint8_t)slot};
	return 0;
}

static int one_line(struct parser *p, char *s, size_t len)
{
	if (strlen(s) != len)
		return FAIL(p, "%s line %lu: NUL byte in the line (binary file?)", p->name, p->line);
	while (len && (s[len - 1] == '\n' || s[len - 1] == '\r' || s[len - 1] == ' ' || s[len - 1] == '\t'))
		s[--len] = '\0';
	if (!len)
		return 0;
	if (s[0] == '#' || !p->seen_magic)
		return comment_line(p, s);
	if (!p->seen_columns)
		return column_header(p, s);
	return data_row(p, s);
}

/* ---- from rows to a trace --------------------------------------------- */

static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->phase != y->phase)
		return x->phase < y->phase ? -1 : 1;
	if (x->turn != y->turn)
		return x->turn < y->turn ? -1 : 1;
	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	if (x->slot != y->slot)
		return x->slot < y->slot ? -1 : 1;
	return (x->line > y->line) - (x->line < y->line);
}

static int same_token(const struct row *a, const struct row *b)
{
	return a->phase == b->phase && a->turn == b->turn && a->step == b->step;
}

static int same_cell(const struct row *a, const struct row *b)
{
	return same_token(a, b) && a->layer == b->layer;
}

/* Duplicated ranks and repeated experts within one (token, layer). */
static int check_cell(struct parser *p, const struct row *r, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (r[i].slot == r[i - 1].slot)
			return FAIL(
				p,
				"%s line %u: duplicate row: %s turn %u step %u layer %u slot %u (first at line %u)",
				p->name, r[i].line, phase_name(r[i].phase), r[i].turn, r[i].step, r[i].layer,
				r[i].slot, r[i - 1].line);
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (r[i].expert == r[j].expert) {
				const struct row *late = r[i].line > r[j].line ? &r[i] : &r[j];
				const struct row *early = late == &r[i] ? &r[j] : &r[i];
				return FAIL(
					p,
					"%s line %u: expert %u twice in %s turn %u step %u layer %u (also at line %u)",
					p->name, late->line, late->expert, phase_name(late->phase),
					late->turn, late->step, late->layer, early->line);
			}
	return 0;
}

/* A decode token must route every layer to exactly topk experts. */
static int check_decode_token(struct parser *p, const struct row *r, size_t n)
{
	uint32_t first = r[0].line;
	for (size_t i = 1; i < n; i++)
		if (r[i].line < first)
			first = r[i].line;
	size_t i = 0;
	for (uint32_t l = 0; l < p->layers; l++) {
		uint32_t have = 0;
		while (i < n && r[i].layer == l) {
			have++;
			i++;
		}
		if (have != p->topk)
			return FAIL(
				p,
				"%s line %u: decode turn %u step %u is incomplete: layer %u has %u of %u experts",
				p->name, first, r[0].turn, r[0].step, l, have, p->topk);
	}
	return 0;
}

static uint32_t count_tokens(const struct row *r, size_t n, unsigned phase)
{
	uint32_t tokens = 0;
	for (size_t i = 0; i < n; i++)
		if (r[i].phase == phase && (i == 0 || !same_token(&r[i], &r[i - 1])))
			tokens++;
	return tokens;
}

static int build(struct parser *p, struct fs_trace *t)
{
	if (!p->seen_magic)
		return FAIL(p, "%s line 1: empty file (expected '# route_trace v1')", p->name);
	if (!p->seen_model)
		return FAIL(p, "%s: no '# model=... n_layer=...' line", p->name);
	if (!p->seen_columns)
		return FAIL(p, "%s: no column header", p->name);
	qsort(p->rows, p->n, sizeof(*p->rows), cmp_row);
	uint32_t npre = count_tokens(p->rows, p->n, 0), ndec = count_tokens(p->rows, p->n, 1);
	if (!ndec)
		return FAIL(p, "%s line %lu: no decode rows (phase 1)", p->name, p->line);

	int rc = fs_trace_alloc(t, p->layers, p->experts, p->topk, ndec, npre);
	if (rc)
		return fs_trace_fail(p->err, p->errlen, rc, "%s: cannot hold %u tokens", p->name,
				     ndec + npre);
	memcpy(t->expert_bytes, p->expert_bytes, p->layers * sizeof(uint64_t));
	copy_str(t->model, sizeof(t->model), p->model);
	copy_str(t->arch, sizeof(t->arch), p->arch);

	int64_t tok = -1;
	for (size_t i = 0, end; i < p->n; i = end) {
		const struct row *r = &p->rows[i];
		if (i == 0 || !same_token(r, r - 1))
			tok = (i == 0 || r->phase != r[-1].phase) ? 0 : tok + 1;
		/* this token's rows */
		for (end = i + 1; end < p->n && same_token(&p->rows[end], r);)
			end++;
		for (size_t c = i, ce; c < end; c = ce) {
			for (ce = c + 1; ce < end && same_cell(&p->rows[ce], &p->rows[c]);)
				ce++;
			if ((rc = check_cell(p, &p->rows[c], ce - c)))
				return rc;
		}
		/* after check_cell: no repeated rank, so a count is a coverage */
		if (r->phase == 1 && (rc = check_decode_token(p, r, end - i)))
			return rc;
		uint16_t *base = r->phase ? t->decode : t->prefill;
		for (size_t k = i; k < end; k++) {
			const struct row *x = &p->rows[k];
			base[((size_t)tok * p->layers + x->layer) * p->topk + x->slot] = x->expert;
		}
	}
	return 0;
}

int fs_trace_parse_csv(struct fs_trace *t, FILE *f, const char *name, char *err, size_t errlen)
{
	struct parser p = {.name = name, .err = err, .errlen = errlen};
	char *buf = NULL;
	size_t bufcap = 0;
	ssize_t len;
	int rc = 0;
	memset(t, 0, sizeof(*t));
	while ((len = getline(&buf, &bufcap, f)) >= 0) {
		p.line++;
		if (p.line > UINT32_MAX) {
			rc = FAIL(&p, "%s line %lu: too many lines", name, p.line);
			break;
		}
		if ((rc = one_line(&p, buf, (size_t)len)))
			break;
	}
	if (!rc && ferror(f))
		rc = fs_trace_fail(err, errlen, -EIO, "%s line %lu: read error", name, p.line + 1);
	if (!rc)
		rc = build(&p, t);
	if (rc)
		fs_trace_free(t);
	free(buf);
	free(p.rows);
	free(p.expert_bytes);
	free(p.bytes_seen);
	return rc;
}

int fs_trace_load_csv(struct fs_trace *t, const char *path, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	FILE *f = fopen(path, "r");
	if (!f)
		return fs_trace_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
	int rc = fs_trace_parse_csv(t, f, path, err, errlen);
	fclose(f);
	return rc;
}
