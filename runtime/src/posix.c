/* POSIX layer: opening and closing descriptors, and the calls that make,
 * copy or close them otherwise (dup, fcntl, pipes, sockets, close_range).
 * The other calls are in
 *   posix_data.c     data: read, write, their vector, fortified and asynchronous forms
 *   posix_meta.c     metadata: seek, sync, truncate, stat, mmap; by path: stat,
 *                    unlink, rename, link, mkdir
 *   posix_process.c  exec, spawn, clone, exit, and the calls after which pending
 *                    writes must have landed (send, kill, sync, rlimits)
 *
 * Each family of calls has one template macro; the lists at the end
 * of each section expand them once per function (and per 32/64-bit or
 * fortified alias), so a new alias is one line.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <sys/socket.h>

#include "core.h"
#include "behind.h"
#include "direct.h"
#include "posix.h"
#include "posix_private.h"

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
        if (iop_fence_needed() && (flags & O_TRUNC))                    \
            iop_fence_at(AT_FDCWD, path, 0);                            \
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
        if (iop_fence_needed() && (flags & O_TRUNC))                    \
            iop_fence_at(dirfd, path, 0);                               \
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
        if (iop_fence_needed() && (flags & O_TRUNC))         \
            iop_fence_at(AT_FDCWD, path, 0);                 \
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
        if (iop_fence_needed()) iop_fence_at(AT_FDCWD, path, 0);        \
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
        iop_fence(iop_fd(to));                            \
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
/* The module, as the core sees it (modules.c). */

static const iop_overflow_count posix_overflows[] = {{"aio", &aio_overflows}, {NULL, NULL}};

const iop_module iop_posix_module = {
    IOP_MODULE_OF(POSIX),
    .after_fork = aio_after_fork,
    .overflows = posix_overflows,
};
