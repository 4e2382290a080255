/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The layers' ready words as the library reads them, against hostile or
 * corrupted input: an offset outside the daemon region (or inside its
 * header, misaligned, wrapping) rejects the region; a word is in only when
 * it is exactly FS_LAYER_READY (0, 1, all ones, a neighbour of the value:
 * not in); what was seen in stays in (the word never goes back, the bytes
 * were read in); a daemon gone, or another arena's, tells nothing new.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "fs_client_internal.h"

Test(fs_layer_ready, region_bounds)
{
	const uint64_t hdr = sizeof(struct fs_daemon_hdr), size = 1 << 16;
	cr_expect(fs_layer_ready_ok(0, 1024, size), "0: a daemon before the words, every layer in");
	cr_expect(fs_layer_ready_ok(hdr, 8, size));
	cr_expect(fs_layer_ready_ok(size - 64, 16, size), "the last line, exactly");
	cr_expect_not(fs_layer_ready_ok(size - 64, 17, size), "one word past the end");
	cr_expect_not(fs_layer_ready_ok(64, 8, size), "inside the header");
	cr_expect_not(fs_layer_ready_ok(hdr + 4, 8, size), "not on a cache line");
	cr_expect_not(fs_layer_ready_ok(size, 1, size), "at the end");
	cr_expect_not(fs_layer_ready_ok(size + 64, 1, size), "past the end");
	cr_expect_not(fs_layer_ready_ok(UINT64_MAX - 63, 1, size), "wraps");
	cr_expect_not(fs_layer_ready_ok(hdr, UINT32_MAX, size), "more layers than the region holds");
}

Test(fs_layer_ready, only_the_exact_word_is_in)
{
	static struct fs_arena_map m, other;
	static struct fs_att a;
	uint32_t words[8] = {0, FS_LAYER_READY, 1, UINT32_MAX, FS_LAYER_READY ^ 1u, FS_LAYER_READY << 1,
			     0, FS_LAYER_READY};
	m.layers = other.layers = a.layers = 8;
	a.arena = &m;
	a.layer_ready = words;
	int want[8] = {0, 1, 0, 0, 0, 0, 0, 1};
	for (uint32_t l = 0; l < 8; l++)
		cr_expect_eq(fs_arena_layer_in(&a, &m, l), want[l], "layer %u word %#x", l, words[l]);
	/* A word that goes back (a daemon bug, memory corrupted): what was
	 * seen in stays in, the rest stays out. */
	memset(words, 0, sizeof(words));
	for (uint32_t l = 0; l < 8; l++)
		cr_expect_eq(fs_arena_layer_in(&a, &m, l), want[l], "layer %u after the words cleared", l);
	/* No attachment, or one for another arena: nothing new is learnt. */
	words[2] = FS_LAYER_READY;
	cr_expect_eq(fs_arena_layer_in(NULL, &m, 2), 0);
	cr_expect_eq(fs_arena_layer_in(&a, &other, 2), 0);
	cr_expect_eq(fs_arena_layer_in(NULL, &m, 1), 1, "seen in before");
	cr_expect_eq(fs_arena_layer_in(&a, &m, 2), 1);
	/* A daemon without the words (layer_ready NULL) served whole arenas. */
	static struct fs_arena_map old;
	old.layers = 8;
	a.arena = &old;
	a.layer_ready = NULL;
	fs_arena_note_ready(&a);
	for (uint32_t l = 0; l < 8; l++)
		cr_expect_eq(fs_arena_layer_in(NULL, &old, l), 1, "layer %u of an old daemon's arena", l);
}
