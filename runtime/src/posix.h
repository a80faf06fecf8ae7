/* What the POSIX layer offers the other layers. */
#ifndef IOPILOT_POSIX_H
#define IOPILOT_POSIX_H

/* ``fd`` was closed inside the C library (fclose): forget it (posix.c). */
void iop_posix_forget(int fd);

#endif
