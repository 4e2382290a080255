#include <criterion/criterion.h>
#include <stdlib.h>
#include "fs_ring.h"
Test(ring, smoke)
{
	void *mem = aligned_alloc(64, fs_ring_bytes(16));
	struct fs_ring_cons c;
	struct fs_ring_prod p;
	cr_assert_eq(fs_ring_format(&c, mem, fs_ring_bytes(16), 16), 0);
	cr_assert_eq(fs_ring_prod_init(&p, mem, fs_ring_bytes(16)), 0);
	struct fs_rec r = {.type = FS_REC_USAGE, .aux = FS_USE_HIT, .layer = 3};
	cr_assert_eq(fs_ring_post(&p, &r), 0);
	struct fs_rec out[4];
	cr_assert_eq(fs_ring_consume(&c, out, 4), 1);
	cr_assert_eq(out[0].layer, 3);
	free(mem);
}
