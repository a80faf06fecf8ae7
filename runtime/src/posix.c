/* POSIX layer: descriptors, data calls, metadata calls, exec.
 *
 * Each family of calls has one template macro below; the lists at the end
 * of each section expand them once per function (and per 32/64-bit or
 * fortified alias), so a new alias is one line.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/stat.h>
#include <aio.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core.h"
#include "behind.h"
#include "direct.h"

/* ------------------------------------------------------------------ */
/* Opening.  Variadic mode argument only when a file may be created. */

static int wants_mode(int flags) {
    return (flags & O_CREAT) || ((flags & O_TMPFILE) == O_TMPFILE);
}

/* The optional third argument of open: read it only when it was passed. */
#define TAKE_MODE(flags, mode)         \
    mode_t mode = 0;                   \
    if (wants_mode(flags)) {           \
        va_list ap;                    \
        va_start(ap, flags);           \
        mode = va_arg(ap, mode_t);     \
        va_end(ap);                    \
    }

static void opened_id(int fd, uint64_t id, int flags, mode_t mode, double t1, double t2) {
    if (fd < 0) return;
    iop_fd_set(IOP_LAYER_POSIX, fd, id, (flags & O_APPEND) ? IOP_OFFSET_END : 0);
    iop_open *o = iop_fd(fd);
    if (!o) return;
    if (mode) iop_set(o->st, IOP_C_MODE, (int64_t)mode); /* as Darshan: the mode asked for */
    iop_meta_op(o->st, IOP_OP_OPEN, IOP_C_OPENS, t1, t2, 0);
}

/* IOPILOT_ASYNC: may this descriptor's writes be deferred? */
static void behind_decide(int fd, int flags) {
    iop_open *o = iop_fd(fd);
    if (!o) return;
    /* a file with another name may be opened by others: not ours alone */
    o->behind_ok = o->regular && o->ident && !o->linked && !iop_inside_mpi_open &&
                   !(flags & (O_APPEND | O_DIRECT | O_SYNC | O_DSYNC | O_PATH)) &&
                   (flags & O_ACCMODE) != O_RDONLY;
}

static void opened(int fd, const char *path, int flags, mode_t mode, double t1, double t2) {
    if (fd < 0) return;
    opened_id(fd, iop_register_path(path), flags, mode, t1, t2);
    if (IOP_UNLIKELY(iop_direct_on)) iop_direct_opened(iop_fd(fd), fd, AT_FDCWD, path, flags);
    if (IOP_UNLIKELY(iop_behind_on)) behind_decide(fd, flags);
}

#define WRAP_OPEN(name)                                                 \
    REAL_DECL(int, name, (const char *, int, ...));                     \
    IOP_EXPORT int name(const char *path, int flags, ...) {             \
        TAKE_MODE(flags, mode);                                         \
        if (!iop_active()) return REAL(name)(path, flags, mode);        \
        if (IOP_UNLIKELY(iop_behind_pending) && (flags & O_TRUNC))      \
            iop_behind_fence_at(AT_FDCWD, path, 0);                     \
        double t1 = iop_now();                                          \
        int fd = REAL(name)(path, flags, mode);                         \
        int e = errno;                                                  \
        opened(fd, path, flags, mode, t1, iop_now());                   \
        errno = e;                                                      \
        return fd;                                                      \
    }

#define WRAP_OPENAT(name)                                               \
    REAL_DECL(int, name, (int, const char *, int, ...));                \
    IOP_EXPORT int name(int dirfd, const char *path, int flags, ...) {  \
        TAKE_MODE(flags, mode);                                         \
        if (!iop_active()) return REAL(name)(dirfd, path, flags, mode); \
        if (IOP_UNLIKELY(iop_behind_pending) && (flags & O_TRUNC))      \
            iop_behind_fence_at(dirfd, path, 0);                        \
        double t1 = iop_now();                                          \
        int fd = REAL(name)(dirfd, path, flags, mode);                  \
        int e = errno;                                                  \
        double t2 = iop_now();                                          \
        if (fd >= 0) {                                                  \
            if (path[0] == '/' || dirfd == AT_FDCWD)                    \
                opened(fd, path, flags, mode, t1, t2);                  \
            else { /* relative to a directory: the kernel knows the name */ \
                opened_id(fd, iop_register_fd_path(fd), flags, mode, t1, t2); \
                if (IOP_UNLIKELY(iop_direct_on))                        \
                    iop_direct_opened(iop_fd(fd), fd, dirfd, path, flags); \
                if (IOP_UNLIKELY(iop_behind_on)) behind_decide(fd, flags); \
            }                                                           \
        }                                                               \
        errno = e;                                                      \
        return fd;                                                      \
    }

/* glibc's fortified open: (path, flags) with no mode. */
#define WRAP_OPEN_2(name)                                    \
    REAL_DECL(int, name, (const char *, int));               \
    IOP_EXPORT int name(const char *path, int flags) {       \
        if (!iop_active()) return REAL(name)(path, flags);   \
        if (IOP_UNLIKELY(iop_behind_pending) && (flags & O_TRUNC)) \
            iop_behind_fence_at(AT_FDCWD, path, 0);          \
        double t1 = iop_now();                               \
        int fd = REAL(name)(path, flags);                    \
        int e = errno;                                       \
        opened(fd, path, flags, 0, t1, iop_now());           \
        errno = e;                                           \
        return fd;                                           \
    }

#define WRAP_CREAT(name)                                                \
    REAL_DECL(int, name, (const char *, mode_t));                       \
    IOP_EXPORT int name(const char *path, mode_t mode) {                \
        if (!iop_active()) return REAL(name)(path, mode);               \
        if (IOP_UNLIKELY(iop_behind_pending)) iop_behind_fence_at(AT_FDCWD, path, 0); \
        double t1 = iop_now();                                          \
        int fd = REAL(name)(path, mode);                                \
        int e = errno;                                                  \
        opened(fd, path, O_CREAT | O_WRONLY | O_TRUNC, mode, t1, iop_now()); \
        errno = e;                                                      \
        return fd;                                                      \
    }

WRAP_OPEN(open)
WRAP_OPEN(open64)
WRAP_OPENAT(openat)
WRAP_OPENAT(openat64)
WRAP_OPEN_2(__open_2)
WRAP_OPEN_2(__open64_2)
WRAP_CREAT(creat)
WRAP_CREAT(creat64)

IOP_EXPORT int __openat_2(int dirfd, const char *path, int flags) {
    return openat(dirfd, path, flags);
}
IOP_EXPORT int __openat64_2(int dirfd, const char *path, int flags) {
    return openat64(dirfd, path, flags);
}

/* Before a descriptor ``o`` we follow is closed: its O_DIRECT twin let go,
 * the file's deferred writes landed (their error returned, with ``take``),
 * and the descriptor forgotten. */
static int fd_closing(int fd, iop_open *o, int take) {
    if (IOP_UNLIKELY(o->direct_fd >= 0)) iop_direct_closing(o);
    int deferred = 0;
    if (IOP_UNLIKELY(iop_behind_on)) {
        iop_behind_closing(o->ident);
        if (take) deferred = iop_behind_take_error(o->ident);
    }
    iop_fd_clear(fd);
    return deferred;
}

REAL_DECL(int, close, (int));
IOP_EXPORT int close(int fd) {
    if (IOP_UNLIKELY(iop_behind_on) && iop_active()) iop_behind_losing(fd, fd);
    iop_open *o = iop_active() ? iop_fd(fd) : NULL;
    if (!o) return REAL(close)(fd);
    iop_stats *st = o->st;
    int deferred = fd_closing(fd, o, 1); /* a deferred write's error is the close's */
    double t1 = iop_now();
    int r = REAL(close)(fd);
    if (deferred && r == 0) {
        r = -1;
        errno = deferred;
    }
    int e = errno;
    iop_meta_op(st, IOP_OP_CLOSE, -1, t1, iop_now(), r < 0 ? IOP_FLAG_ERROR : 0);
    errno = e;
    return r;
}

/* A descriptor the C library closed on its own (fclose, freopen): what
 * close does for a descriptor we follow, without a close the program did
 * not call.  Its number is free again, and the next stream to get it must
 * not inherit this file's counters and position. */
void iop_posix_forget(int fd) {
    if (IOP_UNLIKELY(iop_behind_on)) iop_behind_losing(fd, fd);
    iop_open *o = iop_fd(fd);
    if (o) fd_closing(fd, o, 0);
}

/* ------------------------------------------------------------------ */
/* Data at the descriptor's position: read, write and their fortified and
 * vector forms.  ``CALL`` is the real call, ``BUF`` the buffer to check. */

/* An O_APPEND write went to the end of the file as it was at that moment,
 * wherever other descriptors or processes had taken it: ask where it ended. */
static void appended(int fd, iop_open *o, ssize_t r) {
    int e = errno;
    off_t end = (off_t)syscall(SYS_lseek, fd, 0, SEEK_CUR);
    if (end >= r) o->offset = (int64_t)end - r;
    errno = e;
}

/* ``N``: the request's length for [posix] direct (0: never direct, as for
 * the vector forms). */
#define DIRECT_OR(o, fd, op, BUF, N, OFF, CALL)                          \
    ssize_t r = IOP_DIRECT_NOT_TAKEN;                                   \
    unsigned rflags = 0;                                                \
    if (IOP_UNLIKELY((o)->behind_ok) && (op) == IOP_OP_WRITE && (N)) {  \
        r = iop_behind_write(o, fd, (BUF), (N), (OFF));                 \
        rflags = iop_behind_flags;                                      \
    } else                                                              \
        iop_behind_fence(o); /* reads and vector writes: after the pending ones */ \
    if (r == IOP_DIRECT_NOT_TAKEN && IOP_UNLIKELY((o)->direct_fd >= 0) && (N)) \
        r = iop_direct_io(o, fd, op, (void *)(BUF), (N), (OFF));        \
    if (r == IOP_DIRECT_NOT_TAKEN) r = CALL

/* A write to a pipe or socket may tell another process that the data is
 * there: pending writes land first.  (A terminal is read by a person.) */
static void publishing(int fd) {
    struct stat sb;
    int e = errno;
    if (syscall(SYS_fstat, fd, &sb) == 0 && (S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode)))
        iop_behind_fence_all();
    errno = e;
}
#define PUBLISHING(op)                                                      \
    if (IOP_UNLIKELY(iop_behind_pending) && (op) == IOP_OP_WRITE && iop_active()) \
        publishing(fd)

#define DATA_AT_POSITION(op, fd, BUF, N, CALL)                          \
    iop_open *o = iop_active() ? iop_fd(fd) : NULL;                     \
    if (!o) {                                                           \
        PUBLISHING(op);                                                 \
        return CALL;                                                    \
    }                                                                   \
    double t1 = iop_now();                                              \
    DIRECT_OR(o, fd, op, BUF, N, -1, CALL);                             \
    int e = errno;                                                      \
    double t2 = iop_now();                                              \
    if (IOP_UNLIKELY(o->append) && op == IOP_OP_WRITE && r > 0)         \
        appended(fd, o, r);                                             \
    iop_data_op_at(o->st, op, &o->offset, r, BUF, o->alignment, t1, t2, rflags); \
    errno = e;                                                          \
    return r

#define DATA_AT_OFFSET(op, fd, BUF, N, OFF, CALL)                       \
    iop_open *o = iop_active() ? iop_fd(fd) : NULL;                     \
    if (!o) {                                                           \
        PUBLISHING(op);                                                 \
        return CALL;                                                    \
    }                                                                   \
    double t1 = iop_now();                                              \
    DIRECT_OR(o, fd, op, BUF, N, (int64_t)(OFF) < 0 ? INT64_MAX : (int64_t)(OFF), CALL); \
    int e = errno;                                                      \
    double t2 = iop_now();                                              \
    iop_data_op(o->st, op, (int64_t)(OFF), r, BUF, o->alignment, t1, t2, rflags); \
    errno = e;                                                          \
    return r

#define WRAP_RW(name, op, BUFT)                                               \
    REAL_DECL(ssize_t, name, (int, BUFT, size_t));                            \
    IOP_EXPORT ssize_t name(int fd, BUFT buf, size_t n) {                     \
        DATA_AT_POSITION(op, fd, buf, n, REAL(name)(fd, buf, n));             \
    }

#define WRAP_PRW(name, op, BUFT, OFFT)                                        \
    REAL_DECL(ssize_t, name, (int, BUFT, size_t, OFFT));                      \
    IOP_EXPORT ssize_t name(int fd, BUFT buf, size_t n, OFFT off) {           \
        DATA_AT_OFFSET(op, fd, buf, n, off, REAL(name)(fd, buf, n, off));     \
    }

#define WRAP_RWV(name, op)                                                    \
    REAL_DECL(ssize_t, name, (int, const struct iovec *, int));               \
    IOP_EXPORT ssize_t name(int fd, const struct iovec *iov, int cnt) {       \
        DATA_AT_POSITION(op, fd, cnt > 0 ? iov[0].iov_base : NULL, 0,         \
                         REAL(name)(fd, iov, cnt));                           \
    }

#define WRAP_PRWV(name, op, OFFT)                                             \
    REAL_DECL(ssize_t, name, (int, const struct iovec *, int, OFFT));         \
    IOP_EXPORT ssize_t name(int fd, const struct iovec *iov, int cnt, OFFT off) { \
        DATA_AT_OFFSET(op, fd, cnt > 0 ? iov[0].iov_base : NULL, 0, off,      \
                       REAL(name)(fd, iov, cnt, off));                        \
    }

#define WRAP_PRWV2(name, op, OFFT)                                            \
    REAL_DECL(ssize_t, name, (int, const struct iovec *, int, OFFT, int));    \
    IOP_EXPORT ssize_t name(int fd, const struct iovec *iov, int cnt, OFFT off, int fl) { \
        DATA_AT_OFFSET(op, fd, cnt > 0 ? iov[0].iov_base : NULL, 0, off,      \
                       REAL(name)(fd, iov, cnt, off, fl));                    \
    }

WRAP_RW(read, IOP_OP_READ, void *)
WRAP_RW(write, IOP_OP_WRITE, const void *)
WRAP_PRW(pread, IOP_OP_READ, void *, off_t)
WRAP_PRW(pwrite, IOP_OP_WRITE, const void *, off_t)
WRAP_PRW(pread64, IOP_OP_READ, void *, off64_t)
WRAP_PRW(pwrite64, IOP_OP_WRITE, const void *, off64_t)
WRAP_RWV(readv, IOP_OP_READ)
WRAP_RWV(writev, IOP_OP_WRITE)
WRAP_PRWV(preadv, IOP_OP_READ, off_t)
WRAP_PRWV(pwritev, IOP_OP_WRITE, off_t)
WRAP_PRWV(preadv64, IOP_OP_READ, off64_t)
WRAP_PRWV(pwritev64, IOP_OP_WRITE, off64_t)
WRAP_PRWV2(preadv2, IOP_OP_READ, off_t)
WRAP_PRWV2(pwritev2, IOP_OP_WRITE, off_t)

/* Fortified reads (-D_FORTIFY_SOURCE): an extra buffer-length argument. */
REAL_DECL(ssize_t, __read_chk, (int, void *, size_t, size_t));
IOP_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen) {
    DATA_AT_POSITION(IOP_OP_READ, fd, buf, n, REAL(__read_chk)(fd, buf, n, buflen));
}
REAL_DECL(ssize_t, __pread_chk, (int, void *, size_t, off_t, size_t));
IOP_EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen) {
    DATA_AT_OFFSET(IOP_OP_READ, fd, buf, n, off, REAL(__pread_chk)(fd, buf, n, off, buflen));
}
REAL_DECL(ssize_t, __pread64_chk, (int, void *, size_t, off64_t, size_t));
IOP_EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen) {
    DATA_AT_OFFSET(IOP_OP_READ, fd, buf, n, off,
                   REAL(__pread64_chk)(fd, buf, n, off, buflen));
}

/* ------------------------------------------------------------------ */
/* Asynchronous I/O (OMPIO's non-blocking and split collectives use it):
 * the submission time is kept per control block, and the operation is
 * counted when aio_return hands back what it moved. */

#define AIO_SLOTS 1024
static iop_inflight aio_pending[AIO_SLOTS];
static iop_lock_t aio_lock;
static long aio_overflows; /* submissions not followed: the table was full */

static void aio_submitted(const void *cb, int op, double t1) {
    iop_inflight e = {(uintptr_t)cb, t1, 0, 0, NULL, op};
    iop_inflight_put(aio_pending, AIO_SLOTS, &aio_lock, &aio_overflows, &e);
}

static int aio_finished(const void *cb, double *t1, int *op) {
    iop_inflight e;
    if (!iop_inflight_take(aio_pending, AIO_SLOTS, &aio_lock, (uintptr_t)cb, &e)) return 0;
    *t1 = e.t1;
    *op = e.op;
    return 1;
}

#define WRAP_AIO_SUBMIT(name, op, CB)                               \
    REAL_DECL(int, name, (CB *));                                   \
    IOP_EXPORT int name(CB *cb) {                                   \
        if (!iop_active() || !iop_fd(cb->aio_fildes)) return REAL(name)(cb); \
        iop_behind_fence(iop_fd(cb->aio_fildes));                   \
        double t1 = iop_now();                                      \
        int r = REAL(name)(cb);                                     \
        if (r == 0) aio_submitted((const void *)cb, op, t1);        \
        return r;                                                   \
    }
WRAP_AIO_SUBMIT(aio_read, IOP_OP_READ, struct aiocb)
WRAP_AIO_SUBMIT(aio_write, IOP_OP_WRITE, struct aiocb)
WRAP_AIO_SUBMIT(aio_read64, IOP_OP_READ, struct aiocb64)
WRAP_AIO_SUBMIT(aio_write64, IOP_OP_WRITE, struct aiocb64)

#define WRAP_AIO_RETURN(name, CB)                                             \
    REAL_DECL(ssize_t, name, (CB *));                                         \
    IOP_EXPORT ssize_t name(CB *cb) {                                         \
        ssize_t r = REAL(name)(cb);                                           \
        double t1;                                                            \
        int op;                                                               \
        if (iop_active() && aio_finished((const void *)cb, &t1, &op)) {       \
            int e = errno;                                                    \
            iop_open *o = iop_fd(cb->aio_fildes);                             \
            if (o)                                                            \
                iop_data_op(o->st, op, (int64_t)cb->aio_offset, r, (const void *)cb->aio_buf, \
                            o->alignment, t1, iop_now(), IOP_FLAG_NONBLOCKING);  \
            errno = e;                                                        \
        }                                                                     \
        return r;                                                             \
    }
WRAP_AIO_RETURN(aio_return, struct aiocb)
WRAP_AIO_RETURN(aio_return64, struct aiocb64)

/* ------------------------------------------------------------------ */
/* Metadata on a descriptor: seek, sync, truncate, stat, mmap. */

#define WRAP_SEEK(name, OFFT)                                             \
    REAL_DECL(OFFT, name, (int, OFFT, int));                              \
    IOP_EXPORT OFFT name(int fd, OFFT off, int whence) {                  \
        iop_open *o = iop_active() ? iop_fd(fd) : NULL;                   \
        if (!o) return REAL(name)(fd, off, whence);                       \
        if (whence != SEEK_SET && whence != SEEK_CUR) iop_behind_fence(o); \
        double t1 = iop_now();                                            \
        OFFT r = REAL(name)(fd, off, whence);                             \
        int e = errno;                                                    \
        if (r >= 0) o->offset = (int64_t)r;                               \
        iop_meta_op(o->st, IOP_OP_SEEK, IOP_C_SEEKS, t1, iop_now(), 0);   \
        errno = e;                                                        \
        return r;                                                         \
    }
WRAP_SEEK(lseek, off_t)
WRAP_SEEK(lseek64, off64_t)

/* One template for calls whose first argument is the descriptor. */
#define WRAP_FD_META(ret, name, params, args, op, counter)                \
    REAL_DECL(ret, name, params);                                         \
    IOP_EXPORT ret name params {                                          \
        iop_open *o = iop_active() ? iop_fd(fd) : NULL;                   \
        if (!o) return REAL(name) args;                                   \
        iop_behind_fence(o); /* sizes and contents include pending writes */ \
        double t1 = iop_now();                                            \
        ret r = REAL(name) args;                                          \
        int e = errno;                                                    \
        iop_meta_op(o->st, op, counter, t1, iop_now(), 0);                \
        errno = e;                                                        \
        return r;                                                         \
    }

/* fsync, fdatasync: pending writes first (queued, in relaxed mode), and a
 * deferred write error is the call's. */
#define WRAP_SYNC(name, counter, data_only)                               \
    REAL_DECL(int, name, (int));                                          \
    IOP_EXPORT int name(int fd) {                                         \
        iop_open *o = iop_active() ? iop_fd(fd) : NULL;                   \
        if (!o) return REAL(name)(fd);                                    \
        double t1 = iop_now();                                            \
        int r = IOP_BEHIND_NOT_TAKEN, deferred = 0;                       \
        unsigned rflags = 0;                                              \
        if (IOP_UNLIKELY(iop_behind_on)) {                                \
            r = iop_behind_sync(o, fd, data_only);                        \
            rflags = iop_behind_flags;                                    \
            deferred = r == IOP_BEHIND_NOT_TAKEN ? iop_behind_take_error(o->ident) : 0; \
        }                                                                 \
        if (r == IOP_BEHIND_NOT_TAKEN) r = REAL(name)(fd);                \
        if (deferred && r == 0) {                                         \
            r = -1;                                                       \
            errno = deferred;                                             \
        }                                                                 \
        int e = errno;                                                    \
        iop_meta_op(o->st, IOP_OP_SYNC, counter, t1, iop_now(), rflags | (r < 0 ? IOP_FLAG_ERROR : 0)); \
        errno = e;                                                        \
        return r;                                                         \
    }
WRAP_SYNC(fsync, IOP_C_FSYNCS, 0)
WRAP_SYNC(fdatasync, IOP_C_FDSYNCS, 1)
WRAP_FD_META(int, ftruncate, (int fd, off_t len), (fd, len), IOP_OP_TRUNCATE, -1)
WRAP_FD_META(int, ftruncate64, (int fd, off64_t len), (fd, len), IOP_OP_TRUNCATE, -1)
WRAP_FD_META(int, fstat, (int fd, struct stat *sb), (fd, sb), IOP_OP_STAT, IOP_C_STATS)
WRAP_FD_META(int, fstat64, (int fd, struct stat64 *sb), (fd, sb), IOP_OP_STAT, IOP_C_STATS)
WRAP_FD_META(int, __fxstat, (int ver, int fd, struct stat *sb), (ver, fd, sb), IOP_OP_STAT,
             IOP_C_STATS)
WRAP_FD_META(int, __fxstat64, (int ver, int fd, struct stat64 *sb), (ver, fd, sb),
             IOP_OP_STAT, IOP_C_STATS)

#define WRAP_MMAP(name, OFFT)                                                      \
    REAL_DECL(void *, name, (void *, size_t, int, int, int, OFFT));                \
    IOP_EXPORT void *name(void *addr, size_t len, int prot, int flags, int fd, OFFT off) { \
        iop_open *o = iop_active() ? iop_fd(fd) : NULL;                            \
        if (!o) return REAL(name)(addr, len, prot, flags, fd, off);                \
        iop_behind_fence(o);                                                       \
        double t1 = iop_now();                                                     \
        void *r = REAL(name)(addr, len, prot, flags, fd, off);                     \
        int e = errno;                                                             \
        iop_meta_op(o->st, IOP_OP_MMAP, IOP_C_MMAPS, t1, iop_now(), 0);            \
        errno = e;                                                                 \
        return r;                                                                  \
    }
WRAP_MMAP(mmap, off_t)
WRAP_MMAP(mmap64, off64_t)

/* ------------------------------------------------------------------ */
/* Metadata by path: stat, unlink, rename, mkdir, truncate. */

static void path_meta(const char *path, int op, int counter, double t1, double t2) {
    if (!path) return;
    iop_stats *st = iop_stats_for(IOP_LAYER_POSIX, iop_register_path(path));
    iop_meta_op(st, op, counter, t1, t2, 0);
}

/* ``FENCE``: pending writes of the file the name leads to land first. */
#define WRAP_PATH_META_F(ret, name, params, args, path, op, counter, FENCE) \
    REAL_DECL(ret, name, params);                                    \
    IOP_EXPORT ret name params {                                     \
        if (!iop_active()) return REAL(name) args;                   \
        if (IOP_UNLIKELY(iop_behind_pending)) FENCE;                 \
        double t1 = iop_now();                                       \
        ret r = REAL(name) args;                                     \
        int e = errno;                                               \
        path_meta(path, op, counter, t1, iop_now());                 \
        errno = e;                                                   \
        return r;                                                    \
    }

#define WRAP_PATH_META(ret, name, params, args, path, op, counter) \
    WRAP_PATH_META_F(ret, name, params, args, path, op, counter, iop_behind_fence_path(path))
#define WRAP_AT_META(ret, name, params, args, d, p, fl, op, counter) \
    WRAP_PATH_META_F(ret, name, params, args, AT_PATH(d, p), op, counter, \
                     iop_behind_fence_at(d, p, fl))

WRAP_PATH_META(int, stat, (const char *p, struct stat *sb), (p, sb), p, IOP_OP_STAT,
               IOP_C_STATS)
WRAP_PATH_META(int, lstat, (const char *p, struct stat *sb), (p, sb), p, IOP_OP_STAT,
               IOP_C_STATS)
WRAP_PATH_META(int, stat64, (const char *p, struct stat64 *sb), (p, sb), p, IOP_OP_STAT,
               IOP_C_STATS)
WRAP_PATH_META(int, lstat64, (const char *p, struct stat64 *sb), (p, sb), p, IOP_OP_STAT,
               IOP_C_STATS)
WRAP_PATH_META(int, __xstat, (int v, const char *p, struct stat *sb), (v, p, sb), p,
               IOP_OP_STAT, IOP_C_STATS)
WRAP_PATH_META(int, __lxstat, (int v, const char *p, struct stat *sb), (v, p, sb), p,
               IOP_OP_STAT, IOP_C_STATS)
WRAP_PATH_META(int, __xstat64, (int v, const char *p, struct stat64 *sb), (v, p, sb), p,
               IOP_OP_STAT, IOP_C_STATS)
WRAP_PATH_META(int, __lxstat64, (int v, const char *p, struct stat64 *sb), (v, p, sb), p,
               IOP_OP_STAT, IOP_C_STATS)
WRAP_PATH_META(int, unlink, (const char *p), (p), p, IOP_OP_UNLINK, -1)
/* The *at forms: the path names a file by itself when absolute or cwd-relative. */
#define AT_PATH(dirfd, p) ((dirfd) == AT_FDCWD || (p)[0] == '/' ? (p) : NULL)
WRAP_AT_META(int, fstatat, (int d, const char *p, struct stat *sb, int fl), (d, p, sb, fl), d, p,
             fl, IOP_OP_STAT, IOP_C_STATS)
WRAP_AT_META(int, fstatat64, (int d, const char *p, struct stat64 *sb, int fl), (d, p, sb, fl),
             d, p, fl, IOP_OP_STAT, IOP_C_STATS)
WRAP_AT_META(int, __fxstatat, (int v, int d, const char *p, struct stat *sb, int fl),
             (v, d, p, sb, fl), d, p, fl, IOP_OP_STAT, IOP_C_STATS)
WRAP_AT_META(int, __fxstatat64, (int v, int d, const char *p, struct stat64 *sb, int fl),
             (v, d, p, sb, fl), d, p, fl, IOP_OP_STAT, IOP_C_STATS)
WRAP_AT_META(int, statx, (int d, const char *p, int fl, unsigned m, struct statx *sb),
             (d, p, fl, m, sb), d, p, fl, IOP_OP_STAT, IOP_C_STATS)
WRAP_AT_META(int, unlinkat, (int d, const char *p, int fl), (d, p, fl), d, p, 0, IOP_OP_UNLINK,
             -1)
WRAP_AT_META(int, mkdirat, (int d, const char *p, mode_t m), (d, p, m), d, p, 0, IOP_OP_MKDIR,
             -1)
WRAP_PATH_META(int, mkdir, (const char *p, mode_t m), (p, m), p, IOP_OP_MKDIR, -1)
WRAP_PATH_META(int, truncate, (const char *p, off_t l), (p, l), p, IOP_OP_TRUNCATE, -1)
WRAP_PATH_META(int, truncate64, (const char *p, off64_t l), (p, l), p, IOP_OP_TRUNCATE, -1)

/* A file renamed or linked into place is how programs publish it (write a
 * temporary, then rename): its pending writes land first.  A file given a
 * second name may be opened by others through it: written at once from then
 * on. */
static void renamed(const char *from, const char *to, double t1) {
    int e = errno;
    double t2 = iop_now();
    path_meta(from, IOP_OP_RENAME, IOP_C_RENAME_SOURCES, t1, t2);
    path_meta(to, IOP_OP_RENAME, IOP_C_RENAME_TARGETS, t1, t2);
    errno = e;
}

REAL_DECL(int, rename, (const char *, const char *));
IOP_EXPORT int rename(const char *from, const char *to) {
    if (!iop_active()) return REAL(rename)(from, to);
    if (IOP_UNLIKELY(iop_behind_pending)) iop_behind_fence_all();
    double t1 = iop_now();
    int r = REAL(rename)(from, to);
    renamed(from, to, t1);
    return r;
}

REAL_DECL(int, renameat, (int, const char *, int, const char *));
IOP_EXPORT int renameat(int fd1, const char *from, int fd2, const char *to) {
    if (!iop_active()) return REAL(renameat)(fd1, from, fd2, to);
    if (IOP_UNLIKELY(iop_behind_pending)) iop_behind_fence_all();
    double t1 = iop_now();
    int r = REAL(renameat)(fd1, from, fd2, to);
    renamed(AT_PATH(fd1, from), AT_PATH(fd2, to), t1);
    return r;
}

REAL_DECL(int, renameat2, (int, const char *, int, const char *, unsigned));
IOP_EXPORT int renameat2(int fd1, const char *from, int fd2, const char *to, unsigned fl) {
    if (!iop_active()) return REAL(renameat2)(fd1, from, fd2, to, fl);
    if (IOP_UNLIKELY(iop_behind_pending)) iop_behind_fence_all();
    double t1 = iop_now();
    int r = REAL(renameat2)(fd1, from, fd2, to, fl);
    renamed(AT_PATH(fd1, from), AT_PATH(fd2, to), t1);
    return r;
}

/* After a link: the file the new name leads to is shared. */
static void linked(int dirfd, const char *name) {
    if (!iop_behind_on) return;
    struct stat sb;
    int e = errno;
    if (syscall(SYS_newfstatat, dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode))
        iop_behind_shared(iop_ident((uint64_t)sb.st_dev, (uint64_t)sb.st_ino));
    errno = e;
}

REAL_DECL(int, link, (const char *, const char *));
IOP_EXPORT int link(const char *from, const char *to) {
    if (!iop_active()) return REAL(link)(from, to);
    if (IOP_UNLIKELY(iop_behind_pending)) iop_behind_fence_all();
    int r = REAL(link)(from, to);
    if (r == 0) linked(AT_FDCWD, to);
    return r;
}

REAL_DECL(int, linkat, (int, const char *, int, const char *, int));
IOP_EXPORT int linkat(int fd1, const char *from, int fd2, const char *to, int fl) {
    if (!iop_active()) return REAL(linkat)(fd1, from, fd2, to, fl);
    if (IOP_UNLIKELY(iop_behind_pending)) iop_behind_fence_all();
    int r = REAL(linkat)(fd1, from, fd2, to, fl);
    if (r == 0) linked(fd2, to);
    return r;
}

/* ------------------------------------------------------------------ */
/* Duplicated descriptors refer to the same open file. */

/* A second descriptor for a file we follow counts as an open of it, of the
 * kind DUPS, as Darshan counts it (dup, dup2, dup3, fcntl F_DUPFD). */
static void duplicated(int fd, int r, double t1) {
    if (r < 0) return;
    int e = errno;
    iop_open *o = iop_fd(fd);
    if (o) {
        iop_fd_copy(fd, r);
        iop_count(o->st, IOP_C_OPENS, 1);
        iop_meta_op(o->st, IOP_OP_OPEN, IOP_C_DUPS, t1, iop_now(), 0);
    } else {
        iop_fd_clear(r); /* whatever was known of the old descriptor there */
    }
    errno = e;
}

#define WRAP_DUP(name, params, args, fd)                  \
    REAL_DECL(int, name, params);                         \
    IOP_EXPORT int name params {                          \
        if (!iop_active()) return REAL(name) args;        \
        double t1 = iop_now();                            \
        int r = REAL(name) args;                          \
        duplicated(fd, r, t1);                            \
        return r;                                         \
    }
WRAP_DUP(dup, (int fd), (fd), fd)
/* dup2 and dup3 close the target first: its file's writes land before. */
#define WRAP_DUP_ONTO(name, params, args)                 \
    REAL_DECL(int, name, params);                         \
    IOP_EXPORT int name params {                          \
        if (!iop_active()) return REAL(name) args;        \
        iop_behind_fence(iop_fd(to));                     \
        if (IOP_UNLIKELY(iop_behind_on)) iop_behind_losing(to, to); \
        double t1 = iop_now();                            \
        int r = REAL(name) args;                          \
        duplicated(fd, r, t1);                            \
        return r;                                         \
    }
WRAP_DUP_ONTO(dup2, (int fd, int to), (fd, to))
WRAP_DUP_ONTO(dup3, (int fd, int to, int flags), (fd, to, flags))

/* F_SETFL changes how later writes land (O_APPEND): pending ones land first
 * (the call is made after the fence: its result is the macro's argument). */
#define set_flags(fd, flags, CALL)                                             \
    ({                                                                        \
        iop_open *o_ = iop_fd(fd);                                            \
        if (IOP_UNLIKELY(iop_behind_on)) iop_behind_flags_set(o_->ident, (flags)); \
        int r_ = (CALL);                                                      \
        if (r_ == 0) {                                                        \
            o_->append = ((flags) & O_APPEND) != 0;                           \
            if ((flags) & (O_APPEND | O_DIRECT | O_SYNC | O_DSYNC)) o_->behind_ok = 0; \
        }                                                                     \
        r_;                                                                   \
    })

/* fcntl's F_DUPFD forms are dups too; other commands pass straight through.
 * The third argument is read as a pointer-sized word whatever it is. */
#define WRAP_FCNTL(name)                                                      \
    REAL_DECL(int, name, (int, int, ...));                                    \
    IOP_EXPORT int name(int fd, int cmd, ...) {                               \
        va_list ap;                                                           \
        va_start(ap, cmd);                                                    \
        void *arg = va_arg(ap, void *);                                       \
        va_end(ap);                                                           \
        if (cmd == F_SETFL && iop_active() && iop_fd(fd))                     \
            return set_flags(fd, (long)arg, REAL(name)(fd, cmd, arg));        \
        if (!iop_active() || (cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC))      \
            return REAL(name)(fd, cmd, arg);                                  \
        double t1 = iop_now();                                                \
        int r = REAL(name)(fd, cmd, arg);                                     \
        duplicated(fd, r, t1);                                                \
        return r;                                                             \
    }
WRAP_FCNTL(fcntl)
WRAP_FCNTL(fcntl64)

/* Descriptors closed where no close() of ours sees it (fclose, a raw system
 * call, a close-all loop) leave their number in our table: every call that
 * hands out a new number for something else forgets what we knew of it. */
#define WRAP_NEW_FD(ret, name, params, args)                                  \
    REAL_DECL(ret, name, params);                                             \
    IOP_EXPORT ret name params {                                              \
        ret r = REAL(name) args;                                              \
        if (r >= 0 && iop_active()) iop_fd_clear((int)r);                     \
        return r;                                                             \
    }
WRAP_NEW_FD(int, socket, (int d, int t, int p), (d, t, p))
WRAP_NEW_FD(int, accept, (int fd, struct sockaddr *a, socklen_t *l), (fd, a, l))
WRAP_NEW_FD(int, accept4, (int fd, struct sockaddr *a, socklen_t *l, int f), (fd, a, l, f))
WRAP_NEW_FD(int, epoll_create, (int n), (n))
WRAP_NEW_FD(int, epoll_create1, (int f), (f))
WRAP_NEW_FD(int, eventfd, (unsigned v, int f), (v, f))
WRAP_NEW_FD(int, memfd_create, (const char *n, unsigned f), (n, f))
WRAP_NEW_FD(int, timerfd_create, (int c, int f), (c, f))
WRAP_NEW_FD(int, inotify_init, (void), ())
WRAP_NEW_FD(int, inotify_init1, (int f), (f))

#define WRAP_NEW_FD_PAIR(name, params, args)                                  \
    REAL_DECL(int, name, params);                                             \
    IOP_EXPORT int name params {                                              \
        int r = REAL(name) args;                                              \
        if (r == 0 && iop_active()) {                                         \
            iop_fd_clear(sv[0]);                                              \
            iop_fd_clear(sv[1]);                                              \
        }                                                                     \
        return r;                                                             \
    }
WRAP_NEW_FD_PAIR(pipe, (int sv[2]), (sv))
WRAP_NEW_FD_PAIR(pipe2, (int sv[2], int f), (sv, f))
WRAP_NEW_FD_PAIR(socketpair, (int d, int t, int p, int sv[2]), (d, t, p, sv))

/* Closing many at once (daemons, launchers, Python's subprocess). */
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
REAL_DECL(int, close_range, (unsigned, unsigned, int));
IOP_EXPORT int close_range(unsigned first, unsigned last, int flags) {
    if (IOP_UNLIKELY(iop_behind_on) && iop_active() && !(flags & CLOSE_RANGE_CLOEXEC))
        iop_behind_losing((int)(first > INT32_MAX ? INT32_MAX : first),
                          (int)(last > INT32_MAX ? INT32_MAX : last));
    int r = REAL(close_range)(first, last, flags);
    if (r == 0 && !(flags & CLOSE_RANGE_CLOEXEC) && iop_active())
        for (unsigned fd = first; fd <= last && fd < (unsigned)INT32_MAX && iop_fd_known_below((int)fd);
             fd++)
            iop_fd_clear((int)fd);
    return r;
}
REAL_DECL(void, closefrom, (int));
IOP_EXPORT void closefrom(int lowfd) {
    if (IOP_UNLIKELY(iop_behind_on) && iop_active()) iop_behind_losing(lowfd, INT32_MAX);
    if (iop_active())
        for (int fd = lowfd < 0 ? 0 : lowfd; iop_fd_known_below(fd); fd++) iop_fd_clear(fd);
    REAL(closefrom)(lowfd);
}

/* ------------------------------------------------------------------ */
/* exec replaces the image without running destructors: write out first.
 * The new program inherits LD_PRELOAD and starts its own trace. */

REAL_DECL(int, execve, (const char *, char *const[], char *const[]));
IOP_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
    iop_before_exec();
    return REAL(execve)(path, argv, envp);
}
REAL_DECL(int, execv, (const char *, char *const[]));
IOP_EXPORT int execv(const char *path, char *const argv[]) {
    iop_before_exec();
    return REAL(execv)(path, argv);
}
REAL_DECL(int, execvp, (const char *, char *const[]));
IOP_EXPORT int execvp(const char *file, char *const argv[]) {
    iop_before_exec();
    return REAL(execvp)(file, argv);
}
REAL_DECL(int, execvpe, (const char *, char *const[], char *const[]));
IOP_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
    iop_before_exec();
    return REAL(execvpe)(file, argv, envp);
}

REAL_DECL(int, fexecve, (int, char *const[], char *const[]));
IOP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
    iop_before_exec();
    return REAL(fexecve)(fd, argv, envp);
}
REAL_DECL(int, execveat, (int, const char *, char *const[], char *const[], int));
IOP_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
                        int flags) {
    iop_before_exec();
    return REAL(execveat)(dirfd, path, argv, envp, flags);
}

/* Programs started without fork or our exec (posix_spawn, and system and
 * popen, which glibc builds on it) read what we wrote. */
REAL_DECL(int, posix_spawn, (pid_t *, const char *, const posix_spawn_file_actions_t *,
                             const posix_spawnattr_t *, char *const[], char *const[]));
IOP_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    if (iop_active()) iop_behind_fence_all();
    return REAL(posix_spawn)(pid, path, fa, attr, argv, envp);
}
REAL_DECL(int, posix_spawnp, (pid_t *, const char *, const posix_spawn_file_actions_t *,
                              const posix_spawnattr_t *, char *const[], char *const[]));
IOP_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                            const posix_spawnattr_t *attr, char *const argv[],
                            char *const envp[]) {
    if (iop_active()) iop_behind_fence_all();
    return REAL(posix_spawnp)(pid, file, fa, attr, argv, envp);
}
REAL_DECL(int, system, (const char *));
IOP_EXPORT int system(const char *command) {
    if (iop_active()) iop_behind_fence_all();
    return REAL(system)(command);
}
REAL_DECL(FILE *, popen, (const char *, const char *));
IOP_EXPORT FILE *popen(const char *command, const char *type) {
    if (iop_active()) iop_behind_fence_all();
    return REAL(popen)(command, type);
}

/* clone() and the clone system call: a child with memory of its own has no
 * background thread, so pending writes land before it starts and it forgets
 * the queue (as fork's handlers do); one sharing our memory shares the
 * thread.  Threads (CLONE_THREAD) are left alone. */
#ifndef CLONE_VM
#define CLONE_VM 0x00000100
#define CLONE_FILES 0x00000400
#define CLONE_THREAD 0x00010000
#endif
struct clone_start {
    int (*fn)(void *);
    void *arg;
    int flags;
};
static int clone_child(void *p) {
    struct clone_start c = *(struct clone_start *)p; /* our copy of the parent's frame */
    iop_behind_after_clone(c.flags & CLONE_FILES);
    return c.fn(c.arg);
}
REAL_DECL(int, clone, (int (*)(void *), void *, int, void *, ...));
IOP_EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...) {
    va_list ap; /* read as libc reads them: only used when the flags say so */
    va_start(ap, arg);
    void *ptid = va_arg(ap, void *), *tls = va_arg(ap, void *), *ctid = va_arg(ap, void *);
    va_end(ap);
    if (!iop_behind_on || (flags & CLONE_THREAD) || !iop_active())
        return REAL(clone)(fn, stack, flags, arg, ptid, tls, ctid);
    iop_behind_fence_all();
    if (flags & CLONE_VM) return REAL(clone)(fn, stack, flags, arg, ptid, tls, ctid);
    struct clone_start c = {fn, arg, flags};
    return REAL(clone)(clone_child, stack, flags, &c, ptid, tls, ctid);
}

/* The runtime's own system calls come here too: the test is one compare.
 * Six arguments are read whatever was passed, as libc's own stub reads
 * them (the sanitizer would call reading the caller's frame an error). */
REAL_DECL(long, syscall, (long, ...));
IOP_EXPORT __attribute__((no_sanitize("address"))) long syscall(long n, ...) {
    va_list ap;
    va_start(ap, n);
    long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long),
         d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
    va_end(ap);
    if (IOP_LIKELY(n != SYS_clone && n != SYS_clone3 && n != SYS_fork) || !iop_behind_on)
        return REAL(syscall)(n, a, b, c, d, e, f);
    /* clone's flags: the first argument, or the first field of clone3's */
    unsigned long flags = n == SYS_fork ? 0 : n == SYS_clone ? (unsigned long)a
                                        : a ? *(const unsigned long *)a : 0;
    if ((flags & CLONE_THREAD) || !iop_active()) return REAL(syscall)(n, a, b, c, d, e, f);
    iop_behind_fence_all();
    long r = REAL(syscall)(n, a, b, c, d, e, f);
    if (r == 0 && !(flags & CLONE_VM)) iop_behind_after_clone(flags & CLONE_FILES);
    return r;
}

/* Other ways the data may be seen elsewhere, or that the program asked to
 * be on disk: pending writes land first. */
#define WRAP_FENCE_ALL(ret, name, params, args)                               \
    REAL_DECL(ret, name, params);                                             \
    IOP_EXPORT ret name params {                                              \
        if (IOP_UNLIKELY(iop_behind_pending) && iop_active()) iop_behind_fence_all(); \
        return REAL(name) args;                                               \
    }
WRAP_FENCE_ALL(ssize_t, send, (int fd, const void *b, size_t n, int fl), (fd, b, n, fl))
WRAP_FENCE_ALL(ssize_t, sendto, (int fd, const void *b, size_t n, int fl,
                                 const struct sockaddr *to, socklen_t l), (fd, b, n, fl, to, l))
WRAP_FENCE_ALL(ssize_t, sendmsg, (int fd, const struct msghdr *m, int fl), (fd, m, fl))
WRAP_FENCE_ALL(int, sendmmsg, (int fd, struct mmsghdr *m, unsigned n, int fl), (fd, m, n, fl))
WRAP_FENCE_ALL(int, kill, (pid_t pid, int sig), (pid, sig))
WRAP_FENCE_ALL(int, sigqueue, (pid_t pid, int sig, const union sigval v), (pid, sig, v))
WRAP_FENCE_ALL(int, msync, (void *a, size_t n, int fl), (a, n, fl))
WRAP_FENCE_ALL(void, sync, (void), ())
WRAP_FENCE_ALL(int, syncfs, (int fd), (fd))
WRAP_FENCE_ALL(ssize_t, sendfile, (int o, int i, off_t *off, size_t n), (o, i, off, n))
WRAP_FENCE_ALL(ssize_t, sendfile64, (int o, int i, off64_t *off, size_t n), (o, i, off, n))
WRAP_FENCE_ALL(ssize_t, copy_file_range, (int i, off64_t *oi, int o, off64_t *oo, size_t n,
                                          unsigned fl), (i, oi, o, oo, n, fl))
WRAP_FENCE_ALL(ssize_t, splice, (int i, off64_t *oi, int o, off64_t *oo, size_t n, unsigned fl),
               (i, oi, o, oo, n, fl))

/* sync_file_range: a durability point for the file's written pages. */
REAL_DECL(int, sync_file_range, (int, off64_t, off64_t, unsigned));
IOP_EXPORT int sync_file_range(int fd, off64_t off, off64_t n, unsigned fl) {
    if (IOP_UNLIKELY(iop_behind_pending) && iop_active()) iop_behind_fence(iop_fd(fd));
    return REAL(sync_file_range)(fd, off, n, fl);
}

/* RLIMIT_FSIZE decides which writes may be queued (see behind.c).  A
 * sanitizer's runtime sets limits before it can run instrumented code: the
 * real function is found with dlsym alone. */
#define WRAP_LIMIT(name, params, args)                                        \
    REAL_DECL(int, name, params);                                             \
    IOP_EXPORT __attribute__((no_sanitize("address", "undefined"))) int name params { \
        if (!real_##name) real_##name = (__typeof__(real_##name))dlsym(RTLD_NEXT, #name); \
        /* a lower RLIMIT_FSIZE must not fail writes already taken */         \
        if (IOP_UNLIKELY(iop_behind_pending) && !iop_in_runtime) iop_behind_fence_all(); \
        int r = real_##name args;                                             \
        if (r == 0 && iop_behind_on) iop_behind_limits_changed();             \
        return r;                                                             \
    }
WRAP_LIMIT(setrlimit, (__rlimit_resource_t res, const struct rlimit *rl), (res, rl))
WRAP_LIMIT(setrlimit64, (__rlimit_resource_t res, const struct rlimit64 *rl), (res, rl))
WRAP_LIMIT(prlimit, (pid_t pid, __rlimit_resource_t res, const struct rlimit *n, struct rlimit *o),
           (pid, res, n, o))
WRAP_LIMIT(prlimit64, (pid_t pid, __rlimit_resource_t res, const struct rlimit64 *n,
                       struct rlimit64 *o), (pid, res, n, o))

/* The list forms: collect the arguments, then use the vector forms. */
#define COLLECT_ARGS(first, argv, ap)                      \
    size_t n_ = 1;                                         \
    va_start(ap, first);                                   \
    while (va_arg(ap, char *)) n_++;                       \
    va_end(ap);                                            \
    char **argv = __builtin_alloca((n_ + 1) * sizeof(char *)); \
    argv[0] = (char *)(first);                             \
    va_start(ap, first);                                   \
    for (size_t i_ = 1; i_ <= n_; i_++) argv[i_] = va_arg(ap, char *);

IOP_EXPORT int execl(const char *path, const char *arg, ...) {
    va_list ap;
    COLLECT_ARGS(arg, argv, ap)
    va_end(ap);
    return execv(path, argv);
}
IOP_EXPORT int execlp(const char *file, const char *arg, ...) {
    va_list ap;
    COLLECT_ARGS(arg, argv, ap)
    va_end(ap);
    return execvp(file, argv);
}
IOP_EXPORT int execle(const char *path, const char *arg, ...) {
    va_list ap;
    COLLECT_ARGS(arg, argv, ap)
    char **envp = va_arg(ap, char **);
    va_end(ap);
    return execve(path, argv, envp);
}

/* _exit skips destructors (Python's os._exit, multiprocessing workers,
 * children after fork): write out first.  Nothing in a vfork child. */
REAL_DECL(void, _exit, (int));
IOP_EXPORT void _exit(int status) {
    iop_before_exit(status);
    REAL(_exit)(status);
    __builtin_unreachable();
}
REAL_DECL(void, _Exit, (int));
IOP_EXPORT void _Exit(int status) {
    iop_before_exit(status);
    REAL(_Exit)(status);
    __builtin_unreachable();
}

/* ------------------------------------------------------------------ */
/* vfork: the child borrows our memory and stack until it execs or exits, so
 * it must change nothing of ours.  The stub keeps the return address in a
 * register, as libc's does (the child may overwrite the stack), and sets
 * the vfork part of the child's guard; the parent clears it on resuming.
 * Elsewhere the exec and _exit wrappers check the process id instead. */
#if defined(__x86_64__)
__attribute__((used, visibility("hidden"))) long iop_vfork_failed(long err) {
    errno = (int)err;
    return -1;
}
__asm__(".text\n"
        ".globl vfork\n"
        ".type vfork,@function\n"
        "vfork:\n"
        "    popq %rdi\n"
        "    movl $58, %eax\n" /* SYS_vfork */
        "    syscall\n"
        "    pushq %rdi\n"
        "    movq iop_in_runtime@gottpoff(%rip), %rcx\n"
        "    testq %rax, %rax\n"
        "    jz 1f\n"
        "    andl $0xffffff, %fs:(%rcx)\n" /* parent, or no child */
        "    cmpq $-4095, %rax\n"
        "    jae 2f\n"
        "    ret\n"
        "1:  addl $0x1000000, %fs:(%rcx)\n" /* child */
        "    ret\n"
        "2:  negq %rax\n"
        "    movq %rax, %rdi\n"
        "    jmp iop_vfork_failed\n"
        ".size vfork, .-vfork\n"
        ".globl __vfork\n"
        ".set __vfork, vfork\n");
#endif

/* ------------------------------------------------------------------ */
/* The module, as the core sees it (modules.c). */

static void posix_after_fork(void) {
    iop_direct_after_fork();
    aio_lock = 0;
    aio_overflows = 0;
}

static const iop_overflow_count posix_overflows[] = {{"aio", &aio_overflows}, {NULL, NULL}};

const iop_module iop_posix_module = {
    IOP_MODULE_OF(POSIX),
    .after_fork = posix_after_fork,
    .overflows = posix_overflows,
};
