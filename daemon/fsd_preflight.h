/* SPDX-License-Identifier: Apache-2.0 */
/* fsd_preflight.h: the start-up checks that hold nothing (fsd_preflight.c). */
#ifndef FSD_PREFLIGHT_H
#define FSD_PREFLIGHT_H

#include <stddef.h>

struct fsd_config;

/* Group, socket directory and paths, model file, metrics address.  report:
 * a line per check on stdout (--check-config); else failures are logged.
 * 0, or -1 when a check failed. */
int fsd_preflight(const struct fsd_config *c, int report);
/* fsd_arena_gguf.c: the model file parses and plans; msg: what it holds or why not. */
int fsd_arena_gguf_check(const char *path, char *msg, size_t len);

#endif
