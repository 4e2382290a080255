/* SPDX-License-Identifier: Apache-2.0 */
#include "fsg_describe.h"

#include "fsg_types.h"

static cJSON *shape(const uint64_t *ne, uint32_t n)
{
	cJSON *a = cJSON_CreateArray();
	for (uint32_t i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)ne[i]));
	return a;
}

static cJSON *layer_parts(const struct fsg_file *f, const struct fsg_plan *p, uint32_t l)
{
	const struct fsg_layer *ly = &p->layer[l];
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "layer", l);
	cJSON_AddNumberToObject(o, "expert_bytes", (double)ly->blob_bytes);
	cJSON *arr = cJSON_AddArrayToObject(o, "parts");
	for (uint32_t i = 0; i < ly->nparts; i++) {
		const struct fsg_part *pt = &ly->part[i];
		cJSON *q = cJSON_CreateObject();
		cJSON_AddStringToObject(q, "role", fsg_role_name(pt->role));
		cJSON_AddStringToObject(q, "what", fsg_what_name(pt->what));
		cJSON_AddStringToObject(q, "tensor", f->t[pt->tensor].name);
		cJSON_AddBoolToObject(q, "one_tensor_per_expert", pt->split != NULL);
		cJSON_AddStringToObject(q, "type", fsg_type_name(pt->type));
		cJSON_AddItemToObject(q, "shape", shape(pt->ne, 2));
		cJSON_AddNumberToObject(q, "offset", (double)pt->blob_off);
		cJSON_AddNumberToObject(q, "bytes", (double)pt->bytes);
		cJSON_AddItemToArray(arr, q);
	}
	return o;
}

cJSON *fsg_describe(const char *path, const struct fsg_file *f, const struct fsg_plan *p,
		    const struct fsg_layout *lo)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "file", path);
	cJSON_AddNumberToObject(o, "file_bytes", (double)f->file_size);
	cJSON_AddNumberToObject(o, "gguf_version", f->version);
	cJSON_AddStringToObject(o, "architecture", p->arch);
	cJSON_AddStringToObject(o, "name", p->name);
	cJSON_AddNumberToObject(o, "alignment", f->alignment);
	cJSON_AddNumberToObject(o, "tensors", (double)f->n_tensors);
	cJSON_AddNumberToObject(o, "layers", p->layers);
	cJSON_AddNumberToObject(o, "moe_layers", p->moe_layers);
	cJSON *dense = cJSON_AddArrayToObject(o, "dense_layers");
	for (uint32_t l = 0; l < p->layers; l++)
		if (!p->layer[l].nparts)
			cJSON_AddItemToArray(dense, cJSON_CreateNumber(l));
	cJSON_AddNumberToObject(o, "experts", p->experts);
	cJSON_AddStringToObject(o, "experts_from", p->experts_from_tensors ? "tensors" : "metadata");
	cJSON_AddNumberToObject(o, "experts_used", p->experts_used);
	cJSON *eb = cJSON_AddArrayToObject(o, "expert_bytes");
	for (uint32_t l = 0; l < p->layers; l++)
		cJSON_AddItemToArray(eb, cJSON_CreateNumber((double)p->layer[l].blob_bytes));
	cJSON_AddNumberToObject(o, "max_expert_bytes", (double)p->max_blob);
	cJSON_AddNumberToObject(o, "expert_data_bytes", (double)p->member_bytes);
	cJSON_AddNumberToObject(o, "arena_bytes", (double)lo->bytes);
	cJSON *parts = cJSON_AddArrayToObject(o, "parts");
	for (uint32_t l = 0; l < p->layers; l++)
		if (p->layer[l].nparts)
			cJSON_AddItemToArray(parts, layer_parts(f, p, l));
	cJSON *left = cJSON_AddArrayToObject(o, "left_out");
	for (uint32_t i = 0; i < p->nleft; i++) {
		const struct fsg_tensor *t = &f->t[p->left[i].tensor];
		cJSON *q = cJSON_CreateObject();
		cJSON_AddStringToObject(q, "name", t->name);
		cJSON_AddStringToObject(q, "why", p->left[i].why);
		cJSON_AddStringToObject(q, "type", fsg_type_name(t->type));
		cJSON_AddItemToObject(q, "shape", shape(t->ne, t->n_dims));
		cJSON_AddNumberToObject(q, "bytes", (double)t->bytes);
		cJSON_AddItemToArray(left, q);
	}
	cJSON_AddNumberToObject(o, "left_out_bytes", (double)p->left_bytes);
	return o;
}
