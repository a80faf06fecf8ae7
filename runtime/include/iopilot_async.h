/* iopilot's asynchronous I/O engine: event sets of POSIX operations run by a
 * background thread, so a program computes while its I/O proceeds.
 *
 *     iopilot_es *es = iopilot_es_create();
 *     iopilot_es_write(es, fd, buf, n, off, 0);      // buf may be reused at once
 *     iopilot_es_fsync(es, fd);                      // durable, in order
 *     ... compute ...
 *     size_t pending;
 *     iopilot_es_failure f[8];
 *     size_t nf = 8;
 *     iopilot_es_wait(es, -1.0, &pending, f, &nf);   // all done; nf failures
 *     iopilot_es_close(es);
 *
 * Contract.  The operations of one event set run one at a time, in the order
 * they were submitted, on one background thread: a write submitted before a
 * read or fsync of the same bytes is on the file before they run.  A write
 * copies the caller's buffer before returning, unless IOPILOT_ES_NOCOPY
 * promises the buffer stays unchanged until the write is complete (wait
 * says when).  A read fills the caller's buffer in the background: it is
 * the caller's again after a wait that reports nothing pending.  A failure
 * (EIO, ENOSPC, EFBIG ...) is kept with the operation's number and errno and
 * reported by the next wait; a write that fails part-way keeps the bytes it
 * wrote.  Copies wait for room when more than the event set's memory cap
 * (IOPILOT_ASYNC_MAX_BYTES, default 1 GiB) is queued, so memory stays
 * bounded.  Nothing about an event set survives fork(): a child must not
 * use its parent's sets.  Operations submitted by several threads of the
 * program to one event set run in the order the submissions took the
 * set's lock.
 *
 * Link with libiopilot_async.so (or compile async.c into the program) and
 * -pthread.  When the iopilot tracer is preloaded, each operation's queued,
 * issued and completed times go into the trace.
 */
#ifndef IOPILOT_ASYNC_H
#define IOPILOT_ASYNC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct iopilot_es iopilot_es;

enum { IOPILOT_ES_WRITE = 1, IOPILOT_ES_READ = 2, IOPILOT_ES_FSYNC = 3 };
/* What the engine tells the tracer of its threads (iopilot_async_event's
 * ``op``; not operations): one starts, one ends. */
enum { IOPILOT_ES_THREAD_START = -1, IOPILOT_ES_THREAD_END = -2 };
#define IOPILOT_ES_NOCOPY 1 /* iopilot_es_write: the caller keeps the buffer unchanged */

/* One failed operation, as iopilot_es_wait reports it. */
typedef struct {
    uint64_t id;   /* the number its submission returned */
    int op;        /* IOPILOT_ES_WRITE, _READ or _FSYNC */
    int fd;
    int64_t offset;
    size_t bytes;  /* asked for */
    size_t done;   /* moved before the error */
    int error;     /* errno */
} iopilot_es_failure;

/* Counters of an event set since it was created. */
typedef struct {
    uint64_t submitted, completed, failed;
    uint64_t bytes_written, bytes_read;
    double copy_seconds;    /* the callers' time copying buffers */
    double busy_seconds;    /* the background thread's time in system calls */
    double wait_seconds;    /* the callers' time blocked in wait (and for memory) */
    double queued_seconds;  /* summed time operations waited before they ran */
    size_t max_queued_bytes;
} iopilot_es_stats;

/* A new event set with its background thread; NULL with errno on failure. */
iopilot_es *iopilot_es_create(void);

/* Queue an operation.  Returns its number (1, 2, ...), or 0 with errno
 * (EINVAL: bad arguments or a closed set; ENOMEM: no memory for the copy). */
uint64_t iopilot_es_write(iopilot_es *es, int fd, const void *buf, size_t n, int64_t offset,
                          int flags);
/* *got (may be NULL) receives the bytes read once the read is complete:
 * fewer than ``n`` at the end of the file. */
uint64_t iopilot_es_read(iopilot_es *es, int fd, void *buf, size_t n, int64_t offset,
                         size_t *got);
uint64_t iopilot_es_fsync(iopilot_es *es, int fd);

/* Wait until nothing is pending, or ``timeout`` seconds (< 0: no limit;
 * 0: just look).  *pending (may be NULL) gets the operations not yet
 * complete.  Up to *nfailures failures since the last wait are copied to
 * ``failures`` (may be NULL) and *nfailures set to how many there were in
 * all; reported failures are forgotten.  Returns 0 when all is complete and
 * nothing failed, 1 when operations are still pending, 2 when some failed,
 * -1 with errno on bad arguments. */
int iopilot_es_wait(iopilot_es *es, double timeout, size_t *pending,
                    iopilot_es_failure *failures, size_t *nfailures);

void iopilot_es_get_stats(iopilot_es *es, iopilot_es_stats *out);

/* What the engine costs on this machine, from ``n`` one-byte writes to a
 * temporary file: the seconds one submission takes the caller while the
 * thread is busy, the extra seconds of a round trip to an idle thread (its
 * wake-up), and the thread's own seconds per operation beyond the system
 * call.  0, or -1 with errno. */
int iopilot_es_calibrate(int n, double *submit_seconds, double *wakeup_seconds,
                         double *thread_seconds);

/* Wait for everything, stop the thread, free the set.  Returns what a
 * final iopilot_es_wait would (0, or 2 when some operation failed and was
 * never reported). */
int iopilot_es_close(iopilot_es *es);

#ifdef __cplusplus
}
#endif
#endif
