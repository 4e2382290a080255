/* SPDX-License-Identifier: Apache-2.0 */
/* fsg_value.h: checking a metadata value at the cursor (the reader's part). */
#ifndef FSG_VALUE_H
#define FSG_VALUE_H

#include "fsg_cursor.h"
#include "fsg_reader.h"

/* Check the value of `type` at the cursor and step over it; depth counts
 * the arrays around it.  0, -EAGAIN (need more of the file), -EBADMSG. */
int fsg_val_decode(struct fsg_cur *c, uint32_t type, unsigned depth, struct fsg_val *v);

#endif /* FSG_VALUE_H */
