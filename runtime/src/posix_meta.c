/* POSIX layer: metadata calls on a descriptor and by path, see posix.c. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core.h"
#include "behind.h"

/* ------------------------------------------------------------------ */
/* Metadata on a descriptor: seek, sync, truncate, stat, mmap. */

#define WRAP_SEEK(name, OFFT)                                             \
    REAL_DECL(OFFT, name, (int, OFFT, int));                              \
    IOP_EXPORT OFFT name(int fd, OFFT off, int whence) {                  \
        iop_open *o = iop_active() ? iop_fd(fd) : NULL;                   \
        if (!o) return REAL(name)(fd, off, whence);                       \
        if (whence != SEEK_SET && whence != SEEK_CUR) iop_fence(o);       \
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
        iop_fence(o); /* sizes and contents include pending writes */     \
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
        if (r == IOP_BEHIND_NOT_TAKEN) {                                  \
            int64_t c1 = iop_sync_cpu_begin();                            \
            double s1 = iop_now();                                        \
            r = REAL(name)(fd);                                           \
            iop_sync_cpu_end(c1, s1, iop_now());                          \
        }                                                                 \
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

/* sync_file_range: write-back of a range of the file's pages (no metadata,
 * no device cache), counted apart (RANGE_SYNCS); the file's pending writes
 * land first. */
REAL_DECL(int, sync_file_range, (int, off64_t, off64_t, unsigned));
IOP_EXPORT int sync_file_range(int fd, off64_t off, off64_t n, unsigned fl) {
    iop_open *o = iop_active() ? iop_fd(fd) : NULL;
    if (!o) return REAL(sync_file_range)(fd, off, n, fl);
    iop_fence(o);
    double t1 = iop_now();
    int r = REAL(sync_file_range)(fd, off, n, fl);
    int e = errno;
    iop_meta_op(o->st, IOP_OP_SYNC, IOP_C_RANGE_SYNCS, t1, iop_now(), r < 0 ? IOP_FLAG_ERROR : 0);
    errno = e;
    return r;
}

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
        iop_fence(o);                                                              \
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
        if (iop_fence_needed()) FENCE;                               \
        double t1 = iop_now();                                       \
        ret r = REAL(name) args;                                     \
        int e = errno;                                               \
        path_meta(path, op, counter, t1, iop_now());                 \
        errno = e;                                                   \
        return r;                                                    \
    }

#define WRAP_PATH_META(ret, name, params, args, path, op, counter) \
    WRAP_PATH_META_F(ret, name, params, args, path, op, counter, iop_fence_path(path))
#define WRAP_AT_META(ret, name, params, args, d, p, fl, op, counter) \
    WRAP_PATH_META_F(ret, name, params, args, AT_PATH(d, p), op, counter, \
                     iop_fence_at(d, p, fl))

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
    if (iop_fence_needed()) iop_fence_all();
    double t1 = iop_now();
    int r = REAL(rename)(from, to);
    renamed(from, to, t1);
    return r;
}

REAL_DECL(int, renameat, (int, const char *, int, const char *));
IOP_EXPORT int renameat(int fd1, const char *from, int fd2, const char *to) {
    if (!iop_active()) return REAL(renameat)(fd1, from, fd2, to);
    if (iop_fence_needed()) iop_fence_all();
    double t1 = iop_now();
    int r = REAL(renameat)(fd1, from, fd2, to);
    renamed(AT_PATH(fd1, from), AT_PATH(fd2, to), t1);
    return r;
}

REAL_DECL(int, renameat2, (int, const char *, int, const char *, unsigned));
IOP_EXPORT int renameat2(int fd1, const char *from, int fd2, const char *to, unsigned fl) {
    if (!iop_active()) return REAL(renameat2)(fd1, from, fd2, to, fl);
    if (iop_fence_needed()) iop_fence_all();
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
    if (iop_fence_needed()) iop_fence_all();
    int r = REAL(link)(from, to);
    if (r == 0) linked(AT_FDCWD, to);
    return r;
}

REAL_DECL(int, linkat, (int, const char *, int, const char *, int));
IOP_EXPORT int linkat(int fd1, const char *from, int fd2, const char *to, int fl) {
    if (!iop_active()) return REAL(linkat)(fd1, from, fd2, to, fl);
    if (iop_fence_needed()) iop_fence_all();
    int r = REAL(linkat)(fd1, from, fd2, to, fl);
    if (r == 0) linked(fd2, to);
    return r;
}
