/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsg_err.h: how the GGUF code reports a bad file.  Every error names the
 * field that was wrong and, when the problem sits at a place in the file,
 * the byte offset of that place, so that a user can look at the file with
 * a hex dump and see what we saw.
 */
#ifndef FSG_ERR_H
#define FSG_ERR_H

#include <stdint.h>

#define FSG_NO_OFFSET UINT64_MAX

struct fsg_err {
	uint64_t offset; /* byte in the file the message is about, or FSG_NO_OFFSET */
	char msg[320];   /* "<field>: <problem> (at byte N)" */
};

/* Fill *e (when e is not NULL) and return -EBADMSG, the error of every
 * malformed file.  The offset is appended to the message. */
int fsg_fail(struct fsg_err *e, uint64_t offset, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same with another errno value (-ENOMEM, -EIO, ...) and no offset. */
int fsg_fail_errno(struct fsg_err *e, int neg_errno, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* FSG_ERR_H */
