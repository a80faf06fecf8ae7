/* The iopilot runtime core: what every layer module uses.
 *
 * A wrapper follows one pattern:
 *
 *     if tracing is off or we are inside the runtime: call the real function
 *     t1 = now(); ret = real(...); saved = errno; t2 = now()
 *     record + count (iop_data_op / iop_meta_op)
 *     errno = saved; return ret
 *
 * Timing stays outside any lock; counters take a per-file spin lock; the
 * record goes into a per-thread buffer without a lock.
 */
#ifndef IOPILOT_CORE_H
#define IOPILOT_CORE_H

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../include/iopilot_format.h"

#define IOP_EXPORT __attribute__((visibility("default")))
#define IOP_LIKELY(x) __builtin_expect(!!(x), 1)
#define IOP_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Per-(layer, file) counters of this process. */
typedef struct iop_stats {
    uint64_t file_id;
    int layer;
    volatile int lock;
    int64_t c[IOP_NCOUNTERS];
    double f[IOP_NFCOUNTERS];
    int64_t next_read; /* offset just after the last read: sequentiality */
    int64_t next_write;
    int last_op; /* IOP_OP_READ / IOP_OP_WRITE / -1: read-write switches */
    struct iop_stats *next_in_bucket;
} iop_stats;

/* What the runtime knows about an open descriptor or handle. */
typedef struct iop_open {
    iop_stats *st;      /* counters of the file in the handle's layer */
    int64_t offset;     /* current position, tracked without system calls */
    int64_t alignment;  /* file-system block size at open */
} iop_open;

/* Initial-exec TLS: a plain %fs-relative load instead of a __tls_get_addr
 * call on every wrapped function (we are preloaded, so static TLS exists). */
#define IOP_TLS __thread __attribute__((tls_model("initial-exec")))

extern int iop_enabled;               /* 0: pass every call straight through */
extern IOP_TLS int iop_in_runtime;    /* >0 while the runtime itself does I/O */

/* Resolve the next definition of a symbol (libc's, libmpi's, libhdf5's). */
void *iop_resolve(const char *name);
/* unused: a file may declare more real functions than it ends up calling */
#define REAL_DECL(ret, name, params) static __attribute__((unused)) ret(*real_##name) params
#define REAL(name)                                                              \
    ({                                                                          \
        if (IOP_UNLIKELY(real_##name == NULL))                                  \
            real_##name = (__typeof__(real_##name))iop_resolve(#name);          \
        real_##name;                                                            \
    })

static inline int iop_active(void) { return iop_enabled && !iop_in_runtime; }

/* Time in ticks since this process's t0: the TSC on x86-64 (half the cost of
 * clock_gettime here), else nanoseconds.  Ticks become seconds only when
 * written out, with a factor measured over the whole run. */
extern int iop_use_tsc;
extern uint64_t iop_tsc0;
double iop_clock_ticks(void);
#if defined(__x86_64__)
#include <x86intrin.h>
static inline double iop_now(void) {
    return IOP_LIKELY(iop_use_tsc) ? (double)(__rdtsc() - iop_tsc0) : iop_clock_ticks();
}
#else
static inline double iop_now(void) { return iop_clock_ticks(); }
#endif

/* Files: a stable 64-bit id from the path; the name is kept once.  Id 0 means
 * "excluded" (system paths): every table then treats the file as untracked. */
uint64_t iop_register_path(const char *path);
uint64_t iop_register_fd_path(int fd); /* name of an fd we did not see opened */
iop_stats *iop_stats_for(int layer, uint64_t file_id);

/* Open descriptors (POSIX fds, indexed directly). */
iop_open *iop_fd(int fd); /* NULL when the fd is not tracked */
#define IOP_OFFSET_END (-2) /* iop_fd_set: start at the end of the file (O_APPEND) */
void iop_fd_set(int fd, uint64_t file_id, int64_t offset);
void iop_fd_clear(int fd);
void iop_fd_copy(int from, int to);

/* Handles of other layers (FILE*, MPI_File, hid_t) in one small map. */
iop_open *iop_handle(int layer, uintptr_t key);
iop_open *iop_handle_set(int layer, uintptr_t key, uint64_t file_id, int64_t offset);
void iop_handle_clear(int layer, uintptr_t key);

/* Record and count one data operation.  ``offset`` -1 when unknown; ``bytes``
 * is what the call moved (< 0: it failed); ``buf`` is checked for alignment. */
void iop_data_op(iop_stats *st, int op, int64_t offset, int64_t bytes, const void *buf,
                 int64_t alignment, double t1, double t2, unsigned flags);
/* Record and count one metadata operation (open, close, seek, stat, ...). */
void iop_meta_op(iop_stats *st, int op, int counter, double t1, double t2, unsigned flags);
/* Change counters under the file's lock. */
void iop_count(iop_stats *st, int counter, int64_t delta);
void iop_set(iop_stats *st, int counter, int64_t value);

/* Remember a key/value for the process metadata (e.g. MPI-IO hints per file). */
void iop_note(const char *kind, uint64_t file_id, const char *key, const char *value);

/* Rank and size once MPI knows them (environment variables give them earlier). */
void iop_set_rank(int rank, int size);

/* Write everything out now (at MPI_Finalize); before exec, also count it. */
void iop_flush_all(void);
void iop_before_exec(void);

/* The runtime's own I/O must not be traced: bracket it with these. */
static inline void iop_enter(void) { iop_in_runtime++; }
static inline void iop_leave(void) { iop_in_runtime--; }

#endif
