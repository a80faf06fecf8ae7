/* POSIX layer: data calls (read, write, their vector, fortified and
 * asynchronous forms), see posix.c. */
#define _GNU_SOURCE
#include <sys/stat.h>
#include <aio.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core.h"
#include "behind.h"
#include "direct.h"
#include "posix_private.h"

/* ------------------------------------------------------------------ */
/* Data at the descriptor's position: read, write and their fortified and
 * vector forms.  ``CALL`` is the real call, ``BUF`` the buffer to check.
 * A call of IOP_IO_CPU_MIN bytes or more also has its CPU time measured
 * (core.h; the vector forms, whose ``N`` is 0, are not). */

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
        iop_fence(o); /* reads and vector writes: after the pending ones */ \
    if (r == IOP_DIRECT_NOT_TAKEN && IOP_UNLIKELY((o)->direct_fd >= 0) && (N)) \
        r = iop_direct_io(o, fd, op, (void *)(BUF), (N), (OFF));        \
    if (r == IOP_DIRECT_NOT_TAKEN) r = CALL

/* A write to a pipe or socket may tell another process that the data is
 * there: pending writes land first.  (A terminal is read by a person.) */
static void publishing(int fd) {
    struct stat sb;
    int e = errno;
    if (syscall(SYS_fstat, fd, &sb) == 0 && (S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode)))
        iop_fence_all();
    errno = e;
}
#define PUBLISHING(op)                                                      \
    if (iop_fence_needed() && (op) == IOP_OP_WRITE && iop_active())         \
        publishing(fd)

#define DATA_AT_POSITION(op, fd, BUF, N, CALL)                          \
    iop_open *o = iop_active() ? iop_fd(fd) : NULL;                     \
    if (!o) {                                                           \
        PUBLISHING(op);                                                 \
        return CALL;                                                    \
    }                                                                   \
    int64_t c1 = iop_io_cpu_start(N);                                   \
    double t1 = iop_now();                                              \
    DIRECT_OR(o, fd, op, BUF, N, -1, CALL);                             \
    int e = errno;                                                      \
    double t2 = iop_now();                                              \
    iop_io_cpu_end(c1, r, t1, t2);                                      \
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
    int64_t c1 = iop_io_cpu_start(N);                                   \
    double t1 = iop_now();                                              \
    DIRECT_OR(o, fd, op, BUF, N, (int64_t)(OFF) < 0 ? INT64_MAX : (int64_t)(OFF), CALL); \
    int e = errno;                                                      \
    double t2 = iop_now();                                              \
    iop_io_cpu_end(c1, r, t1, t2);                                      \
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
long aio_overflows; /* submissions not followed: the table was full */

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
        iop_fence(iop_fd(cb->aio_fildes));                                   \
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

void aio_after_fork(void) {
    aio_lock = 0;
    aio_overflows = 0;
}
