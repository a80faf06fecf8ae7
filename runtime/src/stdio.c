/* STDIO layer: streams.  fwrite reaches the kernel through libc internals
 * that a write() wrapper never sees, so streams are traced here, keyed by
 * their FILE pointer, with the stream position tracked by us. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core.h"
#include "posix.h"
#include "settings.h"

/* ------------------------------------------------------------------ */
/* Settings: [stdio] buffer_size, given to each stream with setvbuf right
 * after a successful fopen, fdopen or freopen, before any I/O on it.
 * glibc keeps its own buffer size when setvbuf gets no buffer, so the
 * buffers come from a pool mapped once at start-up (pages are only
 * touched when a stream uses them); a stream gives its buffer back when
 * it is closed.  0 means unbuffered (_IONBF). */

#define NBUFFERS 64
#define POOL_MAX ((size_t)1 << 30) /* at most 1 GiB of address space */
static char *buffers;
static size_t buffer_bytes;
static int nbuffers;
static FILE *buffer_owner[NBUFFERS]; /* NULL: free */
static const char *pool_missing = "no buffer pool";

static void stdio_settings(void) {
    const iop_setting_value *v = iop_setting(IOP_SET_STDIO_BUFFER_SIZE);
    if (!v || v->i <= 0) return;
    size_t each = (size_t)v->i;
    int n = NBUFFERS;
    while (n > 0 && each > POOL_MAX / (size_t)n) n--;
    if (!n) {
        pool_missing = "larger than the buffer pool (1 GiB)";
        return;
    }
    void *p = mmap(NULL, each * (size_t)n, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        pool_missing = "no memory for the buffer pool";
        return;
    }
    buffers = p;
    buffer_bytes = each;
    nbuffers = n;
}

/* The pool slot of ``fp``, or -1. */
static int buffer_of(FILE *fp) {
    if (!fp) return -1;
    for (int i = 0; i < nbuffers; i++)
        if (__atomic_load_n(&buffer_owner[i], __ATOMIC_ACQUIRE) == fp) return i;
    return -1;
}

/* After the stream closed: its slot is free again.  The slot was found
 * before the close, so a new stream at the same address keeps its own. */
static void buffer_release(int slot, FILE *fp) {
    if (slot >= 0) __atomic_compare_exchange_n(&buffer_owner[slot], &fp, NULL, 0,
                                                __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

static void buffer_apply(FILE *fp, uint64_t file_id) {
    const iop_setting_value *v = iop_setting(IOP_SET_STDIO_BUFFER_SIZE);
    if (!v || !fp) return;
    int id = IOP_SET_STDIO_BUFFER_SIZE, e = errno;
    if (v->i == 0) {
        int r = setvbuf(fp, NULL, _IONBF, 0);
        iop_setting_outcome(id, file_id, NULL, v->text, r ? IOP_SO_REJECTED : IOP_SO_APPLIED,
                            r ? "setvbuf failed" : "unbuffered");
        errno = e;
        return;
    }
    if (!buffers) {
        iop_setting_outcome(id, file_id, NULL, v->text, IOP_SO_NOT_APPLICABLE, pool_missing);
        return;
    }
    int slot = -1;
    for (int i = 0; i < nbuffers && slot < 0; i++) {
        FILE *none = NULL;
        if (__atomic_compare_exchange_n(&buffer_owner[i], &none, fp, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            slot = i;
    }
    if (slot < 0) {
        iop_setting_outcome(id, file_id, NULL, v->text, IOP_SO_NOT_APPLICABLE,
                            "buffer pool full");
        return;
    }
    if (setvbuf(fp, buffers + (size_t)slot * buffer_bytes, _IOFBF, buffer_bytes) != 0) {
        buffer_release(slot, fp);
        iop_setting_outcome(id, file_id, NULL, v->text, IOP_SO_REJECTED, "setvbuf failed");
    } else {
        iop_setting_outcome(id, file_id, NULL, v->text, IOP_SO_APPLIED, "");
    }
    errno = e;
}

/* ------------------------------------------------------------------ */
/* Streams.  The C library opens and closes a stream's descriptor without
 * our open and close: fileno hands it to the POSIX layer (C++ fstreams read
 * and write through it), and fclose or freopen takes it back, so that the
 * next stream given the same number starts afresh. */

REAL_DECL(int, fileno, (FILE *));

/* Before the C library closes the descriptor of ``fp``. */
static void stream_fd_closing(FILE *fp) {
    int fd = REAL(fileno)(fp);
    if (fd >= 0) iop_posix_forget(fd);
}

static void stream_opened(FILE *fp, const char *path, const char *mode, double t1, double t2,
                          int counter) {
    if (!fp) return;
    int fd = REAL(fileno)(fp); /* new: whatever was known of its number is stale */
    if (IOP_UNLIKELY(iop_fd(fd) != NULL)) iop_fd_clear(fd);
    uint64_t id = iop_register_path(path);
    if (IOP_UNLIKELY(iop_settings_on)) buffer_apply(fp, id);
    iop_open *o = iop_handle_set(IOP_LAYER_STDIO, (uintptr_t)fp, id, 0);
    if (!o) return;
    if (mode && mode[0] == 'a') o->offset = -1; /* appends: position unknown */
    iop_meta_op(o->st, IOP_OP_OPEN, counter, t1, t2, 0);
}

/* Write-behind: a stream's own reads and writes bypass our wrappers, so a
 * file with pending writes is brought up to date when a stream opens it. */
#define WRAP_FOPEN(name)                                                  \
    REAL_DECL(FILE *, name, (const char *, const char *));                \
    IOP_EXPORT FILE *name(const char *path, const char *mode) {           \
        if (!iop_active()) return REAL(name)(path, mode);                 \
        iop_fence_path(path);                                             \
        IOP_SCOPE; double t1 = iop_now();                                            \
        FILE *fp = REAL(name)(path, mode);                                \
        int e = errno;                                                    \
        stream_opened(fp, path, mode, t1, iop_now(), IOP_C_OPENS);        \
        errno = e;                                                        \
        return fp;                                                        \
    }
WRAP_FOPEN(fopen)
WRAP_FOPEN(fopen64)

/* Streams closed so far (fclose, freopen): a scan's cached position is
 * stale after one, since a new stream may take the FILE and its buffer. */
static unsigned long stream_closes;

#define WRAP_FREOPEN(name)                                                         \
    REAL_DECL(FILE *, name, (const char *, const char *, FILE *));                 \
    IOP_EXPORT FILE *name(const char *path, const char *mode, FILE *old) {         \
        __atomic_add_fetch(&stream_closes, 1, __ATOMIC_RELAXED);                   \
        if (!iop_active()) return REAL(name)(path, mode, old);                     \
        iop_handle_clear(IOP_LAYER_STDIO, (uintptr_t)old);                         \
        stream_fd_closing(old);                                                    \
        iop_fence_path(path);                                                      \
        int slot = IOP_UNLIKELY(nbuffers) ? buffer_of(old) : -1;                   \
        IOP_SCOPE; double t1 = iop_now();                                                     \
        FILE *fp = REAL(name)(path, mode, old);                                    \
        int e = errno;                                                             \
        buffer_release(slot, old); /* freopen closed it: glibc let it go */        \
        if (path) stream_opened(fp, path, mode, t1, iop_now(), IOP_C_OPENS);       \
        errno = e;                                                                 \
        return fp;                                                                 \
    }
WRAP_FREOPEN(freopen)
WRAP_FREOPEN(freopen64)

REAL_DECL(FILE *, fdopen, (int, const char *));
IOP_EXPORT FILE *fdopen(int fd, const char *mode) {
    if (!iop_active()) return REAL(fdopen)(fd, mode);
    iop_fence(iop_fd(fd)); /* stdio's own reads and writes bypass ours */
    IOP_SCOPE; double t1 = iop_now();
    FILE *fp = REAL(fdopen)(fd, mode);
    int e = errno;
    double t2 = iop_now();
    if (fp) {
        uint64_t id = iop_register_fd_path(fd);
        if (IOP_UNLIKELY(iop_settings_on)) buffer_apply(fp, id);
        iop_open *o = iop_handle_set(IOP_LAYER_STDIO, (uintptr_t)fp, id, -1);
        if (o) { /* Darshan: an open, of the kind FDOPENS */
            iop_count(o->st, IOP_C_OPENS, 1);
            iop_meta_op(o->st, IOP_OP_OPEN, IOP_C_FDOPENS, t1, t2, 0);
        }
    }
    errno = e;
    return fp;
}

/* A stream's descriptor, followed from its first fileno: the stream may
 * have read ahead or written already, so its position is the kernel's. */
static void stream_fd_follow(int fd, uint64_t id) {
    long fl = syscall(SYS_fcntl, fd, F_GETFL);
    long pos = syscall(SYS_lseek, fd, 0L, SEEK_CUR);
    int64_t off = fl >= 0 && (fl & O_APPEND) ? IOP_OFFSET_END : pos > 0 ? (int64_t)pos : 0;
    iop_fd_set(IOP_LAYER_POSIX, fd, id, off);
}

/* fileno of a stream we follow: its descriptor is followed too, counted as
 * an open of the kind FILENOS in the POSIX layer, as Darshan does.  An
 * fdopen'd descriptor we already follow keeps its own position. */
IOP_EXPORT int fileno(FILE *fp) {
    iop_open *o = iop_active() ? iop_handle(IOP_LAYER_STDIO, (uintptr_t)fp) : NULL;
    if (!o) return REAL(fileno)(fp);
    IOP_SCOPE; double t1 = iop_now();
    int r = REAL(fileno)(fp);
    int e = errno;
    if (r >= 0) { /* every call counts, as in Darshan */
        if (!iop_fd(r)) stream_fd_follow(r, o->st->file_id);
        iop_open *p = iop_fd(r);
        if (p) {
            iop_count(p->st, IOP_C_OPENS, 1);
            iop_meta_op(p->st, IOP_OP_OPEN, IOP_C_FILENOS, t1, iop_now(), 0);
        }
    }
    errno = e;
    return r;
}

REAL_DECL(int, fclose, (FILE *));
IOP_EXPORT int fclose(FILE *fp) {
    __atomic_add_fetch(&stream_closes, 1, __ATOMIC_RELAXED); /* see scan_start */
    if (fp && iop_active()) stream_fd_closing(fp); /* followed or not: its number is freed */
    if (IOP_UNLIKELY(nbuffers)) {
        int slot = buffer_of(fp);
        if (slot >= 0) { /* our buffer: given back once the stream let it go */
            iop_open *o = iop_active() ? iop_handle(IOP_LAYER_STDIO, (uintptr_t)fp) : NULL;
            iop_stats *st = o ? o->st : NULL;
            if (o) iop_handle_clear(IOP_LAYER_STDIO, (uintptr_t)fp);
            IOP_SCOPE; double t1 = iop_now();
            int r = REAL(fclose)(fp);
            int e = errno;
            buffer_release(slot, fp);
            if (st) iop_meta_op(st, IOP_OP_CLOSE, -1, t1, iop_now(), 0);
            errno = e;
            return r;
        }
    }
    iop_open *o = iop_active() ? iop_handle(IOP_LAYER_STDIO, (uintptr_t)fp) : NULL;
    if (!o) return REAL(fclose)(fp);
    iop_stats *st = o->st;
    iop_handle_clear(IOP_LAYER_STDIO, (uintptr_t)fp);
    IOP_SCOPE; double t1 = iop_now();
    int r = REAL(fclose)(fp);
    int e = errno;
    iop_meta_op(st, IOP_OP_CLOSE, -1, t1, iop_now(), 0);
    errno = e;
    return r;
}

/* The standard streams exist before any fopen: name them once. */
static iop_open *stream(FILE *fp) {
    iop_open *o = iop_handle(IOP_LAYER_STDIO, (uintptr_t)fp);
    if (o || !fp) return o;
    const char *name = fp == stdout ? "<STDOUT>" : fp == stderr ? "<STDERR>"
                     : fp == stdin  ? "<STDIN>"  : NULL;
    if (!name) return NULL;
    return iop_handle_set(IOP_LAYER_STDIO, (uintptr_t)fp, iop_register_name(name), -1);
}

/* Data through a stream: ``BYTES`` turns the call's result into bytes moved. */
#define STREAM_DATA(op, fp, BUF, T, CALL, BYTES)                          \
    iop_open *o = iop_active() ? stream(fp) : NULL;                       \
    if (!o) return CALL;                                                  \
    IOP_SCOPE; double t1 = iop_now();                                                \
    T r = CALL;                                                           \
    int e = errno;                                                        \
    double t2 = iop_now();                                                \
    int64_t moved = (int64_t)(BYTES);                                     \
    int64_t off = o->offset;                                              \
    if (off >= 0 && moved > 0) o->offset += moved;                        \
    iop_data_op(o->st, op, off, moved, BUF, 0, t1, t2, 0);                \
    errno = e;                                                            \
    return r

#define WRAP_FRW(name, op, BUFT)                                                       \
    REAL_DECL(size_t, name, (BUFT, size_t, size_t, FILE *));                           \
    IOP_EXPORT size_t name(BUFT buf, size_t size, size_t n, FILE *fp) {                \
        STREAM_DATA(op, fp, buf, size_t, REAL(name)(buf, size, n, fp), r * size);      \
    }
/* glibc may define these as macros; we need the functions. */
#undef fread_unlocked
#undef fwrite_unlocked
WRAP_FRW(fread, IOP_OP_READ, void *)
WRAP_FRW(fwrite, IOP_OP_WRITE, const void *)
WRAP_FRW(fread_unlocked, IOP_OP_READ, void *)
WRAP_FRW(fwrite_unlocked, IOP_OP_WRITE, const void *)

REAL_DECL(int, fputs, (const char *, FILE *));
IOP_EXPORT int fputs(const char *s, FILE *fp) {
    STREAM_DATA(IOP_OP_WRITE, fp, s, int, REAL(fputs)(s, fp), r >= 0 ? strlen(s) : 0);
}
REAL_DECL(int, fputc, (int, FILE *));
IOP_EXPORT int fputc(int ch, FILE *fp) {
    STREAM_DATA(IOP_OP_WRITE, fp, NULL, int, REAL(fputc)(ch, fp), r != EOF ? 1 : 0);
}
/* One character at a time: each call is an operation, as Darshan counts it. */
#define WRAP_GETC(name)                                                          \
    REAL_DECL(int, name, (FILE *));                                              \
    IOP_EXPORT int name(FILE *fp) {                                              \
        STREAM_DATA(IOP_OP_READ, fp, NULL, int, REAL(name)(fp), r != EOF ? 1 : 0); \
    }
#undef getc
WRAP_GETC(fgetc)
WRAP_GETC(getc)
WRAP_GETC(_IO_getc)
#undef putc
REAL_DECL(int, putc, (int, FILE *));
IOP_EXPORT int putc(int ch, FILE *fp) {
    STREAM_DATA(IOP_OP_WRITE, fp, NULL, int, REAL(putc)(ch, fp), r != EOF ? 1 : 0);
}

/* fscanf reads what the stream position moved by (unknown when unseekable).
 * Asking ftell before and after costs two lseek system calls, five times
 * the call itself (80 ns).  glibc's stream keeps its read window in the
 * FILE: while a scan consumes bytes of the same buffer, the distance its
 * read pointer moved is the answer.  The position before a scan is the one
 * the thread's previous scan of the same stream ended at, if the window has
 * not moved since (no other read, pushback, seek or write in between);
 * otherwise, and after a refill, ftell says it: one system call per buffer
 * of input in a scanning loop, and exact whatever the program mixes in. */
static long stream_pos(FILE *fp) {
    iop_enter(); /* ftell is ours to call, not the program's */
    long pos = ftell(fp);
    iop_leave();
    return pos;
}
typedef struct {
    const char *base, *ptr, *end;
} read_window;
static inline read_window window_of(FILE *fp) {
#ifdef __GLIBC__
    return (read_window){fp->_IO_read_base, fp->_IO_read_ptr, fp->_IO_read_end};
#else
    (void)fp;
    return (read_window){NULL, NULL, NULL};
#endif
}
static inline int same_window(read_window a, read_window b) {
    return a.base && a.base == b.base && a.end == b.end;
}
/* Where the thread's last scan left a stream: its window and position.  A
 * stream closed since (by any thread) may have left its FILE and buffer to
 * a new one: the count of closes (in fclose and freopen) tells. */
static IOP_TLS struct {
    FILE *fp;
    read_window w;
    long pos;
    unsigned long closes;
} last_scan;
static inline long scan_start(FILE *fp, read_window w) {
    if (last_scan.fp == fp && same_window(last_scan.w, w) && last_scan.w.ptr == w.ptr &&
        last_scan.closes == __atomic_load_n(&stream_closes, __ATOMIC_RELAXED))
        return last_scan.pos;
    return stream_pos(fp);
}
static inline long scan_end(FILE *fp, read_window w1, long before) {
    read_window w2 = window_of(fp);
    long after = before >= 0 && same_window(w1, w2) && w2.ptr >= w1.ptr
                     ? before + (long)(w2.ptr - w1.ptr) : stream_pos(fp);
    last_scan.fp = after >= 0 ? fp : NULL;
    last_scan.w = w2;
    last_scan.pos = after;
    last_scan.closes = __atomic_load_n(&stream_closes, __ATOMIC_RELAXED);
    return after;
}
#define SCAN_BODY(CALL)                                                           \
    iop_open *o = iop_active() ? stream(fp) : NULL;                               \
    if (!o) return CALL;                                                          \
    read_window w1 = window_of(fp);                                               \
    long before = scan_start(fp, w1);                                             \
    IOP_SCOPE; double t1 = iop_now();                                                        \
    int r = CALL;                                                                 \
    int e = errno;                                                                \
    double t2 = iop_now();                                                        \
    long after = scan_end(fp, w1, before);                                        \
    int64_t moved = before >= 0 && after >= before ? after - before : 0;          \
    int64_t off = before >= 0 ? before : o->offset; /* a pushback moved it back */ \
    if (off >= 0) o->offset = after >= 0 ? after : off + moved;                   \
    iop_data_op(o->st, IOP_OP_READ, off, moved, NULL, 0, t1, t2, 0);              \
    errno = e;                                                                    \
    return r
/* The C library's headers rename fscanf to __isoc99_fscanf: our functions
 * take their symbol names from asm labels so that both names are wrapped. */
#define WRAP_VFSCANF(sym)                                                         \
    static int (*real_v_##sym)(FILE *, const char *, va_list);                    \
    IOP_EXPORT int iop_v_##sym(FILE *fp, const char *fmt, va_list ap) __asm__(#sym); \
    IOP_EXPORT int iop_v_##sym(FILE *fp, const char *fmt, va_list ap) {           \
        if (IOP_UNLIKELY(!real_v_##sym))                                          \
            real_v_##sym = (__typeof__(real_v_##sym))iop_resolve(#sym);           \
        SCAN_BODY(real_v_##sym(fp, fmt, ap));                                     \
    }
WRAP_VFSCANF(vfscanf)
WRAP_VFSCANF(__isoc99_vfscanf)
#define WRAP_FSCANF(sym, vsym)                                                    \
    IOP_EXPORT int iop_##sym(FILE *fp, const char *fmt, ...) __asm__(#sym);       \
    IOP_EXPORT int iop_##sym(FILE *fp, const char *fmt, ...) {                    \
        va_list ap;                                                               \
        va_start(ap, fmt);                                                        \
        int r = iop_v_##vsym(fp, fmt, ap);                                        \
        va_end(ap);                                                               \
        return r;                                                                 \
    }
WRAP_FSCANF(fscanf, vfscanf)
WRAP_FSCANF(__isoc99_fscanf, __isoc99_vfscanf)

REAL_DECL(char *, fgets, (char *, int, FILE *));
IOP_EXPORT char *fgets(char *s, int n, FILE *fp) {
    STREAM_DATA(IOP_OP_READ, fp, s, char *, REAL(fgets)(s, n, fp), r ? strlen(s) : 0);
}

REAL_DECL(int, vfprintf, (FILE *, const char *, va_list));
IOP_EXPORT int vfprintf(FILE *fp, const char *fmt, va_list ap) {
    STREAM_DATA(IOP_OP_WRITE, fp, NULL, int, REAL(vfprintf)(fp, fmt, ap), r > 0 ? r : 0);
}
IOP_EXPORT int fprintf(FILE *fp, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vfprintf(fp, fmt, ap);
    va_end(ap);
    return r;
}

/* What fprintf becomes in programs built with -D_FORTIFY_SOURCE. */
REAL_DECL(int, __vfprintf_chk, (FILE *, int, const char *, va_list));
IOP_EXPORT int __vfprintf_chk(FILE *fp, int flag, const char *fmt, va_list ap) {
    STREAM_DATA(IOP_OP_WRITE, fp, NULL, int, REAL(__vfprintf_chk)(fp, flag, fmt, ap),
                r > 0 ? r : 0);
}
IOP_EXPORT int __fprintf_chk(FILE *fp, int flag, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = __vfprintf_chk(fp, flag, fmt, ap);
    va_end(ap);
    return r;
}

/* Positioning and flushing. */
#define WRAP_FSEEK(name, OFFT)                                            \
    REAL_DECL(int, name, (FILE *, OFFT, int));                            \
    IOP_EXPORT int name(FILE *fp, OFFT off, int whence) {                 \
        iop_open *o = iop_active() ? iop_handle(IOP_LAYER_STDIO, (uintptr_t)fp) : NULL; \
        if (!o) return REAL(name)(fp, off, whence);                       \
        IOP_SCOPE; double t1 = iop_now();                                            \
        int r = REAL(name)(fp, off, whence);                              \
        int e = errno;                                                    \
        if (r == 0) o->offset = stream_pos(fp);                           \
        iop_meta_op(o->st, IOP_OP_SEEK, IOP_C_SEEKS, t1, iop_now(), 0);   \
        errno = e;                                                        \
        return r;                                                         \
    }
WRAP_FSEEK(fseek, long)
WRAP_FSEEK(fseeko, off_t)
WRAP_FSEEK(fseeko64, off64_t)

/* rewind and fsetpos move the stream as fseek does. */
static void stream_moved(iop_open *o, FILE *fp, double t1) {
    o->offset = stream_pos(fp);
    iop_meta_op(o->st, IOP_OP_SEEK, IOP_C_SEEKS, t1, iop_now(), 0);
}
REAL_DECL(void, rewind, (FILE *));
IOP_EXPORT void rewind(FILE *fp) {
    iop_open *o = iop_active() ? iop_handle(IOP_LAYER_STDIO, (uintptr_t)fp) : NULL;
    double t1 = o ? iop_now() : 0;
    REAL(rewind)(fp);
    if (o) {
        int e = errno;
        stream_moved(o, fp, t1);
        errno = e;
    }
}
#define WRAP_FSETPOS(name, POST)                                                  \
    REAL_DECL(int, name, (FILE *, const POST *));                                 \
    IOP_EXPORT int name(FILE *fp, const POST *pos) {                              \
        iop_open *o = iop_active() ? iop_handle(IOP_LAYER_STDIO, (uintptr_t)fp) : NULL; \
        if (!o) return REAL(name)(fp, pos);                                       \
        IOP_SCOPE; double t1 = iop_now();                                                    \
        int r = REAL(name)(fp, pos);                                              \
        int e = errno;                                                            \
        if (r == 0) stream_moved(o, fp, t1);                                      \
        errno = e;                                                                \
        return r;                                                                 \
    }
WRAP_FSETPOS(fsetpos, fpos_t)
WRAP_FSETPOS(fsetpos64, fpos64_t)

REAL_DECL(int, fflush, (FILE *));
IOP_EXPORT int fflush(FILE *fp) {
    iop_open *o = iop_active() && fp ? iop_handle(IOP_LAYER_STDIO, (uintptr_t)fp) : NULL;
    if (!o) return REAL(fflush)(fp);
    IOP_SCOPE; double t1 = iop_now();
    int r = REAL(fflush)(fp);
    int e = errno;
    iop_meta_op(o->st, IOP_OP_FLUSH, IOP_C_FLUSHES, t1, iop_now(), 0);
    errno = e;
    return r;
}

/* The module, as the core sees it (modules.c): it keeps no state of its own. */
const iop_module iop_stdio_module = {IOP_MODULE_OF(STDIO), .settings = stdio_settings};
