/* SPDX-License-Identifier: Apache-2.0 */
/*
 * router_ahead_stage.h: the router-ahead kernel's stages one at a time, for
 * its benchmark (bench/kernels/fs_bench_ra.cu: the stage table) and its
 * device test (each variant against the CPU reference).  Not installed:
 * engines call fs_ra_launch(), which is fs_ra_launch_stage(p, stream,
 * FS_RA_STAGE_GEMV | FS_RA_STAGE_SELECT).
 */
#ifndef FS_ROUTER_AHEAD_STAGE_H
#define FS_ROUTER_AHEAD_STAGE_H

#include "foresight/router_ahead.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Stages (any subset, run in this order; each reads what the previous
 * launch on the same scratch left there). */
#define FS_RA_STAGE_GEMV 0x1u   /* the logits, into the scratch */
#define FS_RA_STAGE_SELECT 0x2u /* top-M, votes, ranking; posts when p->desc */
#define FS_RA_STAGE_POST 0x4u   /* posting alone: the scratch's records, again */
/* Variants. */
#define FS_RA_OPT_NO_PDL 0x200u /* the selection as an ordinary launch */

FS_RA_API int fs_ra_launch_stage(const struct fs_ra_params *p, void *stream, unsigned flags);

#ifdef __cplusplus
}
#endif

#endif /* FS_ROUTER_AHEAD_STAGE_H */
