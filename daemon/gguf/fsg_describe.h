/* SPDX-License-Identifier: Apache-2.0 */
/* fsg_describe.h: a GGUF MoE model and its arena plan as JSON. */
#ifndef FSG_DESCRIBE_H
#define FSG_DESCRIBE_H

#include <cjson/cJSON.h>

#include "fsg_arena.h"

/* {file, gguf_version, architecture, name, alignment, tensors, layers,
 *  moe_layers, dense_layers[], experts, experts_used, expert_bytes[] (per
 *  layer), max_expert_bytes, expert_data_bytes, arena_bytes, parts[] (per
 *  MoE layer), left_out[], left_out_bytes}.  NULL when out of memory. */
cJSON *fsg_describe(const char *path, const struct fsg_file *f, const struct fsg_plan *p,
		    const struct fsg_layout *lo);

#endif /* FSG_DESCRIBE_H */
