/* The POSIX layer's declarations shared by its files (posix.c and posix_*.c). */
#ifndef IOP_POSIX_PRIVATE_H
#define IOP_POSIX_PRIVATE_H

/* posix_data.c: asynchronous I/O's table of submissions. */
extern long aio_overflows; /* submissions not followed: the table was full */
void aio_after_fork(void);

#endif
