/* The runtime's own files, through raw system calls only: no wrapper of ours
 * sees them, none is a cancellation point, all are async-signal-safe.
 *
 * No descriptor stays open between two writes: a program that closes every
 * descriptor, or reuses every number, can never receive trace data.  Each
 * file is made relative to the trace directory, opened afresh for that one
 * operation without following a link, and only while it is the directory
 * found at start-up (device and inode): a trace directory swapped for a link
 * while the program runs leads nothing elsewhere.  Files are created
 * exclusively without following links, and re-opened only when the name
 * still leads to the file we created (device and inode). */
#define _GNU_SOURCE
#include "core_private.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static int sys_openat(int dir, const char *name, int flags, int mode) {
    return (int)syscall(SYS_openat, dir, name, flags, mode);
}

int sys_open(const char *path, int flags, int mode) {
    return sys_openat(AT_FDCWD, path, flags, mode);
}

int sys_close(int fd) { return (int)syscall(SYS_close, fd); }

ssize_t sys_read(int fd, void *buf, size_t n) { return syscall(SYS_read, fd, buf, n); }

ssize_t sys_readlink(const char *path, char *buf, size_t n) {
    return syscall(SYS_readlinkat, AT_FDCWD, path, buf, n);
}

int sys_getcwd(char *buf, size_t n) { return (int)syscall(SYS_getcwd, buf, n); }

static int sys_fstat(int fd, struct stat *sb) {
#ifdef SYS_fstat
    return (int)syscall(SYS_fstat, fd, sb);
#else
    return (int)syscall(SYS_newfstatat, fd, "", sb, AT_EMPTY_PATH);
#endif
}

int sys_stat_cwd(struct stat *sb) {
    return (int)syscall(SYS_newfstatat, AT_FDCWD, ".", sb, 0);
}

static int sys_renameat(int dir, const char *from, const char *to) {
#ifdef SYS_renameat
    return (int)syscall(SYS_renameat, dir, from, dir, to);
#else
    return (int)syscall(SYS_renameat2, dir, from, dir, to, 0);
#endif
}

static int sys_unlinkat(int dir, const char *name) {
    return (int)syscall(SYS_unlinkat, dir, name, 0);
}

/* ------------------------------------------------------------------ */
/* Why writing the trace failed: the first error is kept for the summary
 * ("write_error") and, since the summary may not fit either, named by an
 * empty file S.error-NAME, which needs no room for data. */

static const struct { int e; const char *name, *text; } errors[] = {
    {ENOSPC, "ENOSPC", "no space left on device"},
    {EDQUOT, "EDQUOT", "disk quota exceeded"},
    {EIO, "EIO", "input/output error"},
    {EFBIG, "EFBIG", "file too large"},
    {EROFS, "EROFS", "read-only file system"},
    {EACCES, "EACCES", "permission denied"},
    {EPERM, "EPERM", "operation not permitted"},
    {EMFILE, "EMFILE", "too many open files"},
    {ENFILE, "ENFILE", "too many open files in the system"},
    {ENOMEM, "ENOMEM", "out of memory"},
    {ESTALE, "ESTALE", "moved, replaced or removed"},
    {ENOENT, "ENOENT", "moved, replaced or removed"},
    {ENOTDIR, "ENOTDIR", "moved, replaced or removed"},
    {ELOOP, "ELOOP", "moved, replaced or removed"},
    {ENXIO, "ENXIO", "moved, replaced or removed"}, /* a FIFO in a file's place */
};

const char *trace_error_name(void) {
    static char other[16];
    int e = iop_proc.write_error;
    if (!e) return NULL;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].e == e) return errors[i].name;
    snprintf(other, sizeof other, "E%d", e);
    return other;
}

const char *trace_failure(void) {
    static char why[100];
    const char *text = trace_error_name(); /* an error without a text: its name */
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].e == iop_proc.write_error) text = errors[i].text;
    if (!text || !strcmp(text, "moved, replaced or removed"))
        return "the trace files can no longer be opened (moved, replaced or removed)";
    snprintf(why, sizeof why, "writing the trace failed: %s", text);
    return why;
}

static int trace_dir(void);

/* Keeps the first error (errno, which it leaves as it found it); -1. */
static int failed(int dir) {
    int e = errno, none = 0;
    if (!__atomic_compare_exchange_n(&iop_proc.write_error, &none, e, 0, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
        return -1;
    char name[sizeof iop_proc.stem + 32];
    snprintf(name, sizeof name, "%s.error-%s", iop_proc.stem, trace_error_name());
    int d = dir >= 0 ? dir : trace_dir();
    if (d >= 0) {
        int fd = sys_openat(d, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) sys_close(fd);
        if (d != dir) sys_close(d);
    }
    errno = e;
    return -1;
}

int sys_write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        ssize_t w = syscall(SYS_write, fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w == 0) errno = EIO;
        if (w <= 0) return failed(-1);
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* One system call for the pieces together when it can, so that a signal
 * ending the process between calls cannot leave part of them written; the
 * rest of a short write piece by piece. */
int sys_writev_all(int fd, const struct iovec *v, int n) {
    ssize_t w;
    do w = syscall(SYS_writev, fd, v, n);
    while (w < 0 && errno == EINTR);
    if (w < 0) return failed(-1);
    size_t done = (size_t)w;
    for (int i = 0; i < n; i++) {
        if (done >= v[i].iov_len) {
            done -= v[i].iov_len;
            continue;
        }
        if (sys_write_all(fd, (const char *)v[i].iov_base + done, v[i].iov_len - done) != 0)
            return -1;
        done = 0;
    }
    return 0;
}

/* Move a descriptor above the numbers programs use, so that a thread of
 * the program that dup2()s onto a number it just closed cannot catch ours
 * during the few microseconds we hold it. */
static int raise_fd(int fd) {
    struct rlimit rl;
    long limit = 1024;
    if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        limit = (long)rl.rlim_cur;
    long target = limit - 64; /* never the last free numbers of a small limit */
    if (target > 4000) target = 4000; /* a huge limit: don't grow the kernel's table */
    if (target <= fd) return fd;
    int high = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, target);
    if (high < 0) return fd;
    sys_close(fd);
    return high;
}

/* A program that used every descriptor its limit allows must still get
 * its trace written: lift the soft limit by two (the directory and the
 * file) for the moment we need it (only up to the hard limit), then put it
 * back. */
static int open_even_at_limit(int dir, const char *name, int flags, int mode) {
    int fd = sys_openat(dir, name, flags, mode);
    if (fd >= 0 || errno != EMFILE) return fd;
    struct rlimit rl, more;
    if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
        return -1;
    more = rl;
    more.rlim_cur = rl.rlim_max - rl.rlim_cur >= 2 ? rl.rlim_cur + 2 : rl.rlim_max;
    if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &more, NULL) != 0) return -1;
    fd = sys_openat(dir, name, flags, mode);
    int e = errno;
    syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &rl, NULL);
    errno = e;
    return fd;
}

static int same_file(int fd, const iop_fileid *id, mode_t kind) {
    struct stat sb;
    return id->known && sys_fstat(fd, &sb) == 0 && (sb.st_mode & S_IFMT) == kind &&
           sb.st_dev == id->dev && sb.st_ino == id->ino;
}

#define DIR_FLAGS (O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

int trace_dir_start(void) {
    int fd = sys_open(iop_proc.dir, DIR_FLAGS, 0);
    if (fd < 0) return -1;
    struct stat sb;
    int ok = sys_fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode);
    sys_close(fd);
    iop_proc.dir_id = (iop_fileid){sb.st_dev, sb.st_ino, ok};
    return ok ? 0 : -1;
}

/* The trace directory for one operation, if it is still the one found at
 * start-up; closed by the caller before it writes. */
static int trace_dir(void) {
    int fd = open_even_at_limit(AT_FDCWD, iop_proc.dir, DIR_FLAGS, 0);
    if (fd < 0) return -1;
    if (!same_file(fd, &iop_proc.dir_id, S_IFDIR)) {
        sys_close(fd);
        errno = ESTALE;
        return -1;
    }
    return raise_fd(fd);
}

/* ``name`` in the trace directory; the directory is closed, errno kept. */
static int open_in_dir(const char *name, int flags, int mode) {
    int dir = trace_dir();
    if (dir < 0) return -1;
    int fd = open_even_at_limit(dir, name, flags, mode);
    int e = errno;
    sys_close(dir);
    errno = e;
    return fd;
}

int trace_file_create(const char *name, iop_fileid *id) {
    int fd = open_in_dir(name, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                         0644);
    if (fd < 0) return errno == EEXIST ? -1 : failed(-1); /* EEXIST: the caller tries another */
    struct stat sb;
    if (sys_fstat(fd, &sb) != 0) {
        failed(-1);
        sys_close(fd);
        return -1;
    }
    id->dev = sb.st_dev;
    id->ino = sb.st_ino;
    id->known = 1;
    return raise_fd(fd);
}

int trace_file_append(const char *name, const iop_fileid *id) {
    if (!id->known) return -1;
    /* O_NONBLOCK: a FIFO planted under our name must not hang the program. */
    int fd = open_in_dir(name, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd < 0) return failed(-1);
    if (!same_file(fd, id, S_IFREG)) {
        sys_close(fd);
        errno = ESTALE;
        return failed(-1);
    }
    return raise_fd(fd);
}

int choose_stem(void) {
    char name[sizeof iop_proc.stem + 8], host[sizeof iop_proc.host];
    /* the host name in the stem: letters, digits, '.' and '_' only, so that
     * '-' separates the stem's parts */
    memcpy(host, iop_proc.host, sizeof host);
    for (char *c = host; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '.' || *c == '_'))
            *c = '_';
    for (int n = 0; n < 100000; n++) {
        snprintf(iop_proc.stem, sizeof iop_proc.stem, "p%s-%d-%d", host,
                 (int)iop_proc.pid, n);
        snprintf(name, sizeof name, "%s.rec", iop_proc.stem);
        iop_proc.rec_id.known = 0;
        int fd = trace_file_create(name, &iop_proc.rec_id);
        if (fd < 0) {
            if (errno == EEXIST) continue; /* an earlier image of this pid */
            return -1;
        }
        struct iop_file_header h = {IOP_MAGIC, IOP_FORMAT_VERSION, sizeof(struct iop_record),
                                    iop_proc.rank_source ? iop_proc.rank : -1, iop_proc.pid,
                                    iop_proc.t0_epoch, iop_proc.ppid, n, 0};
        int ok = sys_write_all(fd, &h, sizeof h) == 0;
        sys_close(fd);
        iop_proc.image = n;
        iop_proc.names_id.known = 0;
        return ok ? 0 : -1;
    }
    errno = EEXIST;
    return -1;
}

/* Readers never see half a file; a link planted under either name is
 * replaced, never followed. */
int write_file_atomically(const char *name, const char *data, size_t n) {
    char tmp[sizeof iop_proc.stem + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    int dir = trace_dir();
    if (dir < 0) return failed(-1);
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = open_even_at_limit(dir, tmp, flags, 0644);
    if (fd < 0 && errno == EEXIST && sys_unlinkat(dir, tmp) == 0)
        fd = open_even_at_limit(dir, tmp, flags, 0644);
    int ok = fd >= 0 && sys_write_all(fd, data, n) == 0;
    if (fd >= 0) sys_close(fd);
    if (ok && sys_renameat(dir, tmp, name) == 0) {
        sys_close(dir);
        return 0;
    }
    failed(dir); /* a failed write was noted already: the first error counts */
    if (fd >= 0) sys_unlinkat(dir, tmp);
    sys_close(dir);
    return -1;
}
