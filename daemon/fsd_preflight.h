/* SPDX-License-Identifier: Apache-2.0 */
/* fsd_preflight.h: the start-up checks that hold nothing (fsd_preflight.c). */
#ifndef FSD_PREFLIGHT_H
#define FSD_PREFLIGHT_H

#include <stddef.h>
#include <stdint.h>

struct fsd_config;

/* Group (exists, this user may give it its sockets), socket directory
 * (exists, this user can create the sockets there) and paths, model file,
 * host memory (the arena and host slot pools fit in RAM), metrics address.  report:
 * a line per check on stdout (--check-config); else failures are logged.
 * 0, or -1 when a check failed. */
int fsd_preflight(const struct fsd_config *c, int report);
/* fsd_arena_gguf.c: the model file parses and plans; msg: what it holds or
 * why not; *arena_bytes: the arena it makes, *slot_bytes: its largest
 * expert as a slot holds it. */
int fsd_arena_gguf_check(const char *path, char *msg, size_t len, uint64_t *arena_bytes,
			 uint64_t *slot_bytes);

#endif
