/* The iopilot runtime core: what every module uses.
 *
 * The core (core.c, process.c, cpu.c, tables.c, records.c, sites.c, output.c, files.c)
 * starts tracing, keeps the tables and records, and writes the trace; it
 * names no module.  A module is a layer (posix*.c, stdio.c, mpiio.c,
 * hdf5*.c, fortran.c: wrappers that record calls) or a feature (settings.c,
 * direct.c, behind.c, signals.c); each ends with its ``iop_module`` (below)
 * and is listed in modules.c, and the core reaches it only through its
 * hooks.  Adding a layer: its .c file (wrappers built on this header, its
 * ``iop_module`` at the end), its line in modules.c, its layer and counters
 * in src/iopilot/vocabulary.py (then tools/gen_vocabulary.py); plus a test.
 *
 * A wrapper follows one pattern:
 *
 *     if tracing is off or we are inside the runtime: call the real function
 *     t1 = now(); ret = real(...); saved = errno; t2 = now()
 *     record + count (iop_data_op / iop_meta_op)
 *     errno = saved; return ret
 *
 * Timing stays outside any lock; counters take a per-file lock; the record
 * goes into a per-thread buffer without a lock.  Everything after the real
 * call runs under the thread's busy guard (a signal handler that calls a
 * wrapper meanwhile is passed straight through), and the runtime's own file
 * I/O uses raw system calls: no cancellation point, no wrapper, no stdio.
 */
#ifndef IOPILOT_CORE_H
#define IOPILOT_CORE_H

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../include/iopilot_format.h"

#define IOP_EXPORT __attribute__((visibility("default")))
#define IOP_LIKELY(x) __builtin_expect(!!(x), 1)
#define IOP_UNLIKELY(x) __builtin_expect(!!(x), 0)

typedef volatile int iop_lock_t; /* see iop_lock() */

/* Per-(layer, file) counters of this process. */
typedef struct iop_stats {
    uint64_t file_id;
    int layer;
    iop_lock_t lock;
    int64_t c[IOP_NCOUNTERS];
    double f[IOP_NFCOUNTERS];
    /* Darshan's last byte read / written (0 after open and close), from
     * which sequential, consecutive and stride are counted */
    int64_t last_read, last_write;
    int last_op; /* IOP_OP_READ / IOP_OP_WRITE / -1: read-write switches */
    struct iop_common_pair *common; /* access sizes and strides, from the first data op */
    struct iop_stats *next_in_bucket;
} iop_stats;

/* What the runtime knows about an open descriptor or handle. */
typedef struct iop_open {
    iop_stats *st;      /* counters of the file in the handle's layer */
    int64_t offset;     /* current position, tracked without system calls */
    int64_t alignment;  /* file-system block size at open */
    int append;         /* O_APPEND: each write lands at the end of the moment */
    /* [posix] direct: a second descriptor of the same file, opened by us with
     * O_DIRECT (-1: none), the file it must still name, and whether a request
     * through it was refused (the program's descriptor is used from then on). */
    int direct_fd;
    int direct_refused;
    int behind_ok; /* IOPILOT_ASYNC: writes on this descriptor may be deferred */
    int regular;   /* a regular file (fstat at open) */
    int linked;    /* more than one name (st_nlink > 1 at open) */
    uint64_t ident; /* the file itself (device and inode at open); 0 unknown */
    uint64_t direct_dev, direct_ino;
} iop_open;

/* Initial-exec TLS: a plain %fs-relative load instead of a __tls_get_addr
 * call on every wrapped function (we are preloaded, so static TLS exists). */
#define IOP_TLS __thread __attribute__((tls_model("initial-exec")))

extern int iop_enabled; /* 0: pass every call straight through */

/* Per-thread re-entrancy guard, one word in three parts:
 *   low 16 bits   the runtime's own calls into libraries (iop_enter)
 *   bits 16-23    bookkeeping that may hold a lock (iop_busy_enter): a signal
 *                 handler that interrupts it passes through, counted as nested
 *   bit 24 up     set by our vfork in the child, which shares the parent's
 *                 memory and so must not change anything of ours
 * Any non-zero value makes wrappers pass calls straight through, so a thread
 * never waits for a lock it holds itself. */
extern IOP_TLS int iop_in_runtime;
#define IOP_BUSY_ONE (1 << 16)
#define IOP_BUSY_MASK (0xff << 16)
#define IOP_VFORK_ONE (1 << 24)
extern long iop_nested_calls;

/* A sample of this host's clock against the job's reference clock: at
 * ``when`` (epoch seconds, this host's clock) the reference read ``offset``
 * seconds more, known to within ``uncertainty``.  Written into the summary;
 * the first IOP_NCLOCK samples are kept. */
void iop_clock_sample(double when, double offset, double uncertainty);

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

/* A wrapper of a library function that programs may also link statically
 * (HDF5), defined as ``IOP_WRAPPED(name)(...)``.  Preloaded, it is the
 * function itself.  In the archive linked into programs (IOP_LINK, see
 * runtime/link/), it is iop_wrapped_<name>: the program's calls reach it
 * through ``__wrap_<name>`` (ld --wrap), an entry point of its own member
 * of the archive, and the real function is ``__real_<name>``, which the
 * layer looks up itself.  Functions of shared system libraries (libc,
 * libmpi) keep their names in both builds: the program then defines and
 * exports them, and sees the calls of every library, as preloading does. */
#ifdef IOP_LINK
#define IOP_WRAPPED(name) iop_wrapped_##name
#else
#define IOP_WRAPPED(name) name
#endif

static inline int iop_active(void) {
    if (IOP_LIKELY(iop_enabled && !iop_in_runtime)) return 1;
    /* A call from a signal handler that interrupted our bookkeeping. */
    if (iop_enabled && (iop_in_runtime & IOP_BUSY_MASK) && iop_in_runtime < IOP_VFORK_ONE)
        __atomic_add_fetch(&iop_nested_calls, 1, __ATOMIC_RELAXED);
    return 0;
}

/* One lock for every table of every layer: a test-and-set word.  Holders
 * never block and never call out, so waiting is short; a waiter spins a
 * little, then yields the processor. */
static inline void iop_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}
void iop_lock_wait(iop_lock_t *l); /* the slow path, in core.c */
static inline void iop_lock(iop_lock_t *l) {
    if (IOP_UNLIKELY(__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))) iop_lock_wait(l);
}
static inline void iop_unlock(iop_lock_t *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

/* Operations the runtime has to remember between two calls (an aio request
 * until aio_return, a split collective until its end): a fixed table of
 * slots keyed by a pointer.  A full table is counted, never silent. */
typedef struct {
    uintptr_t key; /* 0: free */
    double t1;
    int64_t offset, bytes;
    const void *buf;
    int op;
} iop_inflight;
/* Keep ``e`` until taken (a second put with the same key replaces it), under
 * the table's ``lock``.  Returns 0 and adds 1 to ``*overflow`` when it is full. */
int iop_inflight_put(iop_inflight *table, int n, iop_lock_t *lock, long *overflow,
                     const iop_inflight *e);
/* Take (and free) the entry of ``key``; 0 when there is none. */
int iop_inflight_take(iop_inflight *table, int n, iop_lock_t *lock, uintptr_t key,
                      iop_inflight *out);
/* Tables of the core that can be full: counted, reported in the summary. */
enum { IOP_OVERFLOW_HANDLES, IOP_OVERFLOW_NOTES, IOP_NOVERFLOWS };
extern long iop_overflows[IOP_NOVERFLOWS];
static inline void iop_overflow(long *count) { __atomic_add_fetch(count, 1, __ATOMIC_RELAXED); }

/* The summary's writer: a growing buffer of JSON text in pages from the
 * kernel (the summary is also written from _exit in a signal handler, which
 * may have interrupted malloc).  A module's summary hook appends its part
 * with these. */
typedef struct iop_json iop_json;
void iop_json_put(iop_json *b, const char *s, size_t len);
void iop_json_printf(iop_json *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void iop_json_str(iop_json *b, const char *s); /* a JSON string, bytes kept (surrogateescape) */

/* A module describes itself to the core with one of these, defined at the
 * end of its own file and listed in modules.c; the core names no module.
 * A layer module (posix*.c, stdio.c, mpiio*.c, hdf5*.c, fortran.c) records
 * under its layers; a feature (settings.c, direct.c, behind.c, signals.c)
 * has no layers and acts through its hooks only.  Every hook is optional
 * and called by the core in the order of modules.c.  A layer's names come
 * from the vocabulary (iopilot_vocab.h, generated from
 * src/iopilot/vocabulary.py). */
typedef struct {
    const char *name; /* "overflows" key in the summary */
    long *count;      /* operations or settings a full table made it drop */
} iop_overflow_count;

/* .name and .layers of the module called ``word`` in the vocabulary. */
#define IOP_MODULE_OF(word) .name = #word, .layers = IOP_SWITCH_##word

/* What a fence hook is asked to wait for (see iop_fence). */
enum { IOP_FENCE_FILE, IOP_FENCE_PATH, IOP_FENCE_ALL };

typedef struct iop_module {
    const char *name; /* a layer's word in IOPILOT_LAYERS ("POSIX", "HDF5" ...), a feature's name */
    unsigned layers;  /* the layers it records under: IOP_SWITCH_<name>; 0 for a feature */
    /* Start-up, before the first call is traced: every init hook, then
     * every settings hook (the settings file is read by then: take the
     * values this module applies from settings.h). */
    void (*init)(void);
    void (*settings)(void);
    /* The image ends (exit, _exit), before the final summary is written. */
    void (*exit)(void);
    /* Before exec.  Also called in a vfork child, which shares our memory:
     * wait if need be, change nothing. */
    void (*exec)(void);
    /* fork: before it, after it in the parent, and in the child, whose
     * other threads (which may have held the module's locks) are gone:
     * free its locks, zero its overflow counts, forget its threads. */
    void (*before_fork)(void);
    void (*after_fork_parent)(void);
    void (*after_fork)(void);
    /* Deferred work must land before a file is read, stat'ed or closed:
     * IOP_FENCE_FILE (``ident``, see iop_open.ident), IOP_FENCE_PATH
     * (``path`` relative to ``dirfd``, AT_* ``flags``), IOP_FENCE_ALL.
     * Called only while iop_deferred is non-zero. */
    void (*fence)(int kind, uint64_t ident, int dirfd, const char *path, int flags);
    /* Its part of the process summary: ",\n\"key\": value", or nothing. */
    void (*summary)(iop_json *out);
    /* Where in the program's own code this thread is, when its machine
     * stack cannot say (an interpreter running the program): 1 and a key
     * for the place, else 0.  With ``text`` (``len`` bytes), also what the
     * place is: one frame a line, "file<TAB>line<TAB>function", innermost
     * first.  Called only from traced calls, under the busy guard. */
    int (*where)(uint64_t *key, char *text, size_t len);
    const iop_overflow_count *overflows; /* its full tables; a NULL name ends */
    const char *const *env; /* environment variables the summary keeps; NULL ends */
} iop_module;

/* Whether a file is part of installed packages or the interpreter's own
 * library (site-packages, dist-packages, lib/python...): not the program. */
int iop_installed_path(const char *path);

/* Operations some module deferred and has not finished (write-behind's
 * queued writes).  While it is non-zero, a call that reads, stat's or
 * closes a file first waits through the fence hooks; the wrappers' one
 * check is this word. */
extern long iop_deferred;
void iop_fence_slow(int kind, uint64_t ident, int dirfd, const char *path, int flags);
/* The wrappers' one check: a plain load (the fence hooks load it again,
 * with acquire). */
/* relaxed: one plain load on x86-64 and arm64, and no data race with the
 * thread that counts the word down; the slow path reads it again, acquiring */
static inline int iop_fence_needed(void) {
    return IOP_UNLIKELY(__atomic_load_n(&iop_deferred, __ATOMIC_RELAXED) != 0);
}
static inline void iop_fence_all(void) {
    if (iop_fence_needed()) iop_fence_slow(IOP_FENCE_ALL, 0, 0, NULL, 0);
}
static inline void iop_fence_at(int dirfd, const char *path, int flags) {
    if (iop_fence_needed() && path) iop_fence_slow(IOP_FENCE_PATH, 0, dirfd, path, flags);
}
static inline void iop_fence_path(const char *path) { iop_fence_at(AT_FDCWD, path, 0); }
static inline void iop_fence(const iop_open *o) { /* the file ``o`` follows */
    if (iop_fence_needed() && o && o->st) iop_fence_slow(IOP_FENCE_FILE, o->ident, 0, NULL, 0);
}

/* Time in ticks since this process's t0: the TSC on x86-64 (half the cost of
 * clock_gettime here), else nanoseconds.  Ticks become seconds only when
 * written out, with a factor measured over the whole run. */
extern int iop_use_tsc;
extern uint64_t iop_tsc0;
double iop_clock_ticks(void);
double seconds_per_tick(void); /* of iop_now(), measured over the run so far */
#if defined(__x86_64__)
#include <x86intrin.h>
static inline double iop_now(void) {
    return IOP_LIKELY(iop_use_tsc) ? (double)(__rdtsc() - iop_tsc0) : iop_clock_ticks();
}
#else
static inline double iop_now(void) { return iop_clock_ticks(); }
#endif

/* The CPU time of the program's large data calls (cpu.c), the I/O's own
 * cost of copying to and from the kernel.  Reading the thread's CPU clock
 * is a system call (0.1-0.6 us, two per call), as long as a 64 KiB write
 * into the page cache may take (2.4 us here): calls of IOP_IO_CPU_MIN bytes
 * or more are measured only while the measuring has cost at most 1 % of
 * the time every large call took (the first one is), and the measured
 * calls' CPU time and the bytes they moved are summed per process: their
 * ratio is the CPU cost of a byte.
 *
 *     int64_t c = iop_io_cpu_start(n);  t1 ... real call ... t2
 *     iop_io_cpu_end(c, r, t1, t2);
 */
#define IOP_IO_CPU_MIN ((size_t)64 << 10)
enum { IOP_IO_SMALL = -1, IOP_IO_UNMEASURED = -2 };
/* cpu.c, out of line: the wrapper's frame, on the stack during the real
 * call (which a thread's cancellation may unwind), stays as it was. */
int64_t iop_io_cpu_begin(void); /* the thread's CPU clock, or IOP_IO_UNMEASURED */
void iop_io_cpu_slow(int64_t start, ssize_t moved, double t1, double t2);
/* An fsync or fdatasync, under a 1 % budget of its own: c =
 * iop_sync_cpu_begin(); t1 ... real call ... t2; iop_sync_cpu_end(c, t1, t2).
 * Both keep errno. */
int64_t iop_sync_cpu_begin(void);
void iop_sync_cpu_end(int64_t start, double t1, double t2);
static inline int64_t iop_io_cpu_start(size_t n) {
    return IOP_LIKELY(n < IOP_IO_CPU_MIN) ? IOP_IO_SMALL : iop_io_cpu_begin();
}
static inline void iop_io_cpu_end(int64_t start, ssize_t moved, double t1, double t2) {
    if (IOP_UNLIKELY(start != IOP_IO_SMALL)) iop_io_cpu_slow(start, moved, t1, t2);
}

/* Files: a stable 64-bit id from the path; the name is kept once.  Id 0 means
 * "excluded" (system paths): every table then treats the file as untracked.
 * A relative path is the program's, taken from its working directory, even
 * when it starts with '<'; a module's own names ("<STDOUT>") are registered
 * as they are with iop_register_name. */
uint64_t iop_register_path(const char *path);
uint64_t iop_register_name(const char *name);
uint64_t iop_register_fd_path(int fd); /* name of an fd we did not see opened */
iop_stats *iop_stats_for(int layer, uint64_t file_id);

/* Open descriptors (POSIX fds, indexed directly); inline: every call asks. */
extern iop_open *iop_fds;
extern int iop_nfds; /* size of the descriptor table */
static inline iop_open *iop_fd(int fd) { /* NULL when the fd is not tracked */
    if ((unsigned)fd >= (unsigned)iop_nfds) return NULL;
    iop_open *o = &iop_fds[fd];
    return __atomic_load_n(&o->st, __ATOMIC_ACQUIRE) ? o : NULL;
}
/* A file's identity from its device and inode (never 0). */
static inline uint64_t iop_ident(uint64_t dev, uint64_t ino) {
    uint64_t h = (dev * 0x9e3779b97f4a7c15ULL) ^ (ino + 0x632be59bd9b4e019ULL + (dev << 6));
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 29;
    return h ? h : 1;
}
#define IOP_OFFSET_END (-2) /* iop_fd_set: start at the end of the file (O_APPEND) */
/* Follow ``fd`` with the counters of ``file_id`` in ``layer`` (the POSIX
 * module's descriptors; STDIO's fileno hands its stream's descriptor on). */
void iop_fd_set(int layer, int fd, uint64_t file_id, int64_t offset);
void iop_fd_clear(int fd);
void iop_fd_copy(int from, int to);

static inline int iop_fd_known_below(int fd) { return fd >= 0 && fd < iop_nfds; }

/* Handles of other layers (FILE*, MPI_File, hid_t) in one small map. */
iop_open *iop_handle(int layer, uintptr_t key);
iop_open *iop_handle_set(int layer, uintptr_t key, uint64_t file_id, int64_t offset);
void iop_handle_clear(int layer, uintptr_t key);

/* Call sites (sites.c).  An upper layer's wrapper opens a scope for the
 * time of its real call (``IOP_SCOPE;`` before it takes t1): the calls the
 * library makes inside it (pwrite inside H5Dwrite, write inside fwrite)
 * take the site of the program's call.  The scope closes when the wrapper
 * returns, whichever way. */
int iop_scope_enter(void *frame);
void iop_scope_exit(int *entered);
#define IOP_SCOPE                                                               \
    int iop_scope_ __attribute__((cleanup(iop_scope_exit), unused)) =           \
        iop_scope_enter(__builtin_frame_address(0))

/* Record and count one data operation.  ``offset`` -1 when unknown; ``bytes``
 * is what the call moved (< 0: it failed); ``buf`` is checked for alignment. */
void iop_data_op(iop_stats *st, int op, int64_t offset, int64_t bytes, const void *buf,
                 int64_t alignment, double t1, double t2, unsigned flags);
/* The same at the descriptor's position ``*pos``, which it advances. */
void iop_data_op_at(iop_stats *st, int op, int64_t *pos, int64_t bytes, const void *buf,
                    int64_t alignment, double t1, double t2, unsigned flags);
/* Record and count one metadata operation (open, close, seek, stat, ...). */
void iop_meta_op(iop_stats *st, int op, int counter, double t1, double t2, unsigned flags);
/* The same, counted only (a layer that writes no records). */
void iop_meta_count(iop_stats *st, int op, int counter, double t1, double t2);
/* Record a background thread's operation on the program's behalf (queued,
 * issued and completed times); records only, counters untouched. */
void iop_background_op(int layer, int op, uint64_t file_id, int64_t offset, int64_t len,
                       double queued, double issued, double completed, int failed);
/* Darshan's size bin of a request of ``n`` bytes (SIZE_*_0_100 is bin 0). */
int iop_size_bin(int64_t n);
/* Whether ``layer`` is traced (IOPILOT_LAYERS): a module with a name to
 * build first asks, so an untraced layer costs no registration. */
int iop_layer_traced(int layer);
/* Change counters under the file's lock. */
void iop_count(iop_stats *st, int counter, int64_t delta);
void iop_set(iop_stats *st, int counter, int64_t value);

/* Remember a key/value for the process metadata (e.g. MPI-IO hints per file). */
void iop_note(const char *kind, uint64_t file_id, const char *key, const char *value);

/* Rank and size once MPI_Init returned (launcher variables give them earlier). */
void iop_set_rank(int rank, int size);

/* Write everything out now (at MPI_Finalize); before exec and _exit, say
 * how the image ends (these do nothing in a vfork child). */
void iop_flush_all(void);
void iop_before_exec(void);
void iop_before_exit(int status);

/* The runtime's own file I/O (files.c): raw system calls, no wrapper, no
 * cancellation point. */
int sys_open(const char *path, int flags, int mode);
int sys_close(int fd);
ssize_t sys_read(int fd, void *buf, size_t n);

/* Calls the runtime itself makes into libraries must not be traced:
 * bracket them with these. */
static inline void iop_enter(void) { iop_in_runtime++; }
static inline void iop_leave(void) { iop_in_runtime--; }
/* Bookkeeping that takes locks (see iop_in_runtime). */
static inline void iop_busy_enter(void) { iop_in_runtime += IOP_BUSY_ONE; }
static inline void iop_busy_leave(void) { iop_in_runtime -= IOP_BUSY_ONE; }

#endif
