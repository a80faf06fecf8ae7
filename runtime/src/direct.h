/* [posix] direct (direct.c): an O_DIRECT twin of each file the program
 * opens, used for its large aligned requests. */
#ifndef IOPILOT_DIRECT_H
#define IOPILOT_DIRECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core.h"

extern int iop_direct_on; /* the setting is on and descriptors can be spared */

/* After the program opened ``path`` (relative to ``dirfd``) as ``fd``. */
void iop_direct_opened(iop_open *o, int fd, int dirfd, const char *path, int flags);
/* Before the program closes the descriptor ``o`` follows. */
void iop_direct_closing(iop_open *o);
/* Make a read or write of ``n`` bytes at ``off`` (-1: the descriptor's
 * position) through the twin: the call's result (bytes, or -1 with errno),
 * or IOP_DIRECT_NOT_TAKEN when the caller is to make the call itself.  (A
 * return value, not an out-parameter: a wrapper's frame with an
 * address-taken local is what a thread cancelled inside the real call
 * leaves poisoned under AddressSanitizer.) */
#define IOP_DIRECT_NOT_TAKEN (-2)
ssize_t iop_direct_io(iop_open *o, int fd, int op, void *buf, size_t n, int64_t off);

#endif
