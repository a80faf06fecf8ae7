/* The runtime's own files, through raw system calls only: no wrapper of ours
 * sees them, none is a cancellation point, all are async-signal-safe.
 *
 * No descriptor stays open between two writes: a program that closes every
 * descriptor, or reuses every number, can never receive trace data.  Files
 * are created exclusively without following links, and re-opened only when
 * the name still leads to the file we created (device and inode). */
#define _GNU_SOURCE
#include "core_private.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

int sys_open(const char *path, int flags, int mode) {
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
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

static int sys_rename(const char *from, const char *to) {
#ifdef SYS_renameat
    return (int)syscall(SYS_renameat, AT_FDCWD, from, AT_FDCWD, to);
#else
    return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, 0);
#endif
}

static int sys_unlink(const char *path) { return (int)syscall(SYS_unlinkat, AT_FDCWD, path, 0); }

int sys_write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        ssize_t w = syscall(SYS_write, fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
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
 * its trace written: lift the soft limit by one for the moment we need it
 * (only up to the hard limit), then put it back. */
static int open_even_at_limit(const char *path, int flags, int mode) {
    int fd = sys_open(path, flags, mode);
    if (fd >= 0 || errno != EMFILE) return fd;
    struct rlimit rl, more;
    if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
        return -1;
    more = rl;
    more.rlim_cur++;
    if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &more, NULL) != 0) return -1;
    fd = sys_open(path, flags, mode);
    int e = errno;
    syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &rl, NULL);
    errno = e;
    return fd;
}

static int same_file(int fd, const iop_fileid *id) {
    struct stat sb;
    return sys_fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_dev == id->dev &&
           sb.st_ino == id->ino;
}

int trace_file_create(const char *path, iop_fileid *id) {
    int fd = open_even_at_limit(path, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                0644);
    if (fd < 0) return -1;
    struct stat sb;
    if (sys_fstat(fd, &sb) != 0) {
        sys_close(fd);
        return -1;
    }
    id->dev = sb.st_dev;
    id->ino = sb.st_ino;
    id->known = 1;
    return raise_fd(fd);
}

int trace_file_append(const char *path, const iop_fileid *id) {
    if (!id->known) return -1;
    /* O_NONBLOCK: a FIFO planted under our name must not hang the program. */
    int fd = open_even_at_limit(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (!same_file(fd, id)) {
        sys_close(fd);
        errno = ESTALE;
        return -1;
    }
    return raise_fd(fd);
}

int choose_stem(void) {
    char path[4500];
    for (int n = 0; n < 100000; n++) {
        snprintf(cfg.stem, sizeof cfg.stem, "%s/p%s-%d-%d", cfg.dir, cfg.host, (int)cfg.pid, n);
        snprintf(path, sizeof path, "%s.rec", cfg.stem);
        cfg.rec_id.known = 0;
        int fd = trace_file_create(path, &cfg.rec_id);
        if (fd < 0) {
            if (errno == EEXIST) continue; /* an earlier image of this pid */
            return -1;
        }
        struct iop_file_header h = {IOP_MAGIC, IOP_FORMAT_VERSION, sizeof(struct iop_record),
                                    cfg.rank_source ? cfg.rank : -1, cfg.pid, cfg.t0_epoch,
                                    cfg.ppid, n, 0};
        int ok = sys_write_all(fd, &h, sizeof h) == 0;
        sys_close(fd);
        cfg.image = n;
        cfg.names_id.known = 0;
        return ok ? 0 : -1;
    }
    errno = EEXIST;
    return -1;
}

/* Readers never see half a file; a link planted under either name is
 * replaced, never followed. */
int write_file_atomically(const char *path, const char *data, size_t n) {
    char tmp[4600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = open_even_at_limit(tmp, flags, 0644);
    if (fd < 0 && errno == EEXIST && sys_unlink(tmp) == 0) fd = open_even_at_limit(tmp, flags, 0644);
    if (fd < 0) return -1;
    int ok = sys_write_all(fd, data, n) == 0;
    sys_close(fd);
    if (ok && sys_rename(tmp, path) == 0) return 0;
    sys_unlink(tmp);
    return -1;
}
