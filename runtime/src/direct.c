/* [posix] direct: direct I/O as a mechanism chosen per request.
 *
 * The program's descriptor is never changed.  After it opens a regular file
 * we open the same file a second time with O_DIRECT (close-on-exec, moved to
 * a high number), and requests of at least ``direct_min_size`` bytes whose
 * offset and length are multiples of DIO_ALIGN go through that twin; all
 * others keep the page cache.  So nothing that bypasses our wrappers can
 * meet an O_DIRECT descriptor by surprise: stdio's own writes after fdopen,
 * a program exec'd without the runtime, raw system calls, fcntl(F_GETFL).
 *
 * A buffer that is not aligned goes through a bounce buffer from a small
 * pool (claimed with one atomic exchange, so signal handlers may use it).
 * When the file system refuses a request (EINVAL), or the twin no longer
 * names the file (a close-all loop took its number), the request is made on
 * the program's descriptor and the twin is not used again.
 *
 * The twin is closed only when the program closes its descriptor: closing
 * another descriptor of a file drops the process's fcntl locks on it, which
 * the program's own close does anyway at that moment.
 *
 * Position-based calls (read, write) take the program's file position with
 * lseek and move it past what was transferred; two threads doing read or
 * write on one descriptor at once may see them interleave differently than
 * the kernel's per-call position lock would order them. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core.h"
#include "direct.h"
#include "settings.h"

#define DIO_ALIGN 4096                 /* offset, length and memory: enough for any device */
#define BOUNCE_SLOTS 4
#define BOUNCE_BYTES ((size_t)4 << 20) /* one slot; larger requests go in pieces */
#define MAX_TWINS 256                  /* descriptors spent on twins at once */

int iop_direct_on;
static int64_t min_size = (int64_t)1 << 20;
static int fd_floor; /* twins get numbers from here up */
static int twins;    /* open twins */
static const char *value = "true";

static struct {
    int busy;
    char *mem; /* mapped on first use, kept */
} bounce[BOUNCE_SLOTS];

/* System calls made directly: none of them may reach a wrapper, ours or
 * another preloaded library's. */
static long sys_fstat(int fd, struct stat *sb) { return syscall(SYS_fstat, fd, sb); }
static long sys_close(int fd) { return syscall(SYS_close, fd); }
static long sys_fcntl(int fd, int cmd, long arg) { return syscall(SYS_fcntl, fd, cmd, arg); }
static int64_t sys_lseek(int fd, int64_t off, int whence) {
    return syscall(SYS_lseek, fd, off, whence);
}

void iop_direct_init(void) {
    const iop_setting_value *on = iop_setting(IOP_SET_POSIX_DIRECT);
    const iop_setting_value *min = iop_setting(IOP_SET_POSIX_DIRECT_MIN_SIZE);
    if (min && min->i > 0) min_size = min->i;
    if (!on || !on->i) return;
    value = on->text;
    struct rlimit rl;
    long limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                     ? (long)rl.rlim_cur : 1024;
    /* Half-way up the table: a program that uses low numbers never meets
     * ours, and one that opens many files runs out no sooner than by the
     * twins open at that moment (at most MAX_TWINS, and none past 7/8). */
    fd_floor = (int)(limit / 2);
    if (fd_floor < 64) return; /* too few descriptors to spare any */
    iop_direct_on = 1;
}

void iop_direct_after_fork(void) {
    for (int i = 0; i < BOUNCE_SLOTS; i++) bounce[i].busy = 0; /* threads that held them are gone */
}

static void outcome(iop_open *o, int kind, const char *detail) {
    iop_setting_outcome(IOP_SET_POSIX_DIRECT, o->st->file_id, NULL, value, kind, detail);
}

void iop_direct_opened(iop_open *o, int fd, int dirfd, const char *path, int flags) {
    if (!o || !path) return;
    if (flags & (O_APPEND | O_PATH)) {
        outcome(o, IOP_SO_NOT_APPLICABLE, "opened with O_APPEND: each write goes to the end");
        return;
    }
    if (flags & O_DIRECT) {
        outcome(o, IOP_SO_NOT_APPLICABLE, "the program opened it with O_DIRECT itself");
        return;
    }
    struct stat mine, twin;
    if (sys_fstat(fd, &mine) != 0 || !S_ISREG(mine.st_mode)) return; /* devices, pipes */
    if (__atomic_add_fetch(&twins, 1, __ATOMIC_RELAXED) > MAX_TWINS) {
        __atomic_sub_fetch(&twins, 1, __ATOMIC_RELAXED);
        outcome(o, IOP_SO_NOT_APPLICABLE, "too many files open with O_DIRECT at once");
        return;
    }
    int e = errno;
    /* The same access, nothing that creates or truncates. */
    int mode = (flags & O_ACCMODE) | O_DIRECT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    int t = (int)syscall(SYS_openat, dirfd, path, mode, 0);
    const char *why = NULL;
    if (t < 0) {
        why = errno == EINVAL ? "the file system refuses O_DIRECT"
                              : "the file could not be opened a second time";
    } else if (sys_fstat(t, &twin) != 0 || twin.st_dev != mine.st_dev ||
               twin.st_ino != mine.st_ino) {
        why = "the path names another file by now";
    } else {
        int high = (int)sys_fcntl(t, F_DUPFD_CLOEXEC, fd_floor);
        if (high < 0 || high >= fd_floor + fd_floor * 3 / 4) {
            if (high >= 0) sys_close(high);
            why = "no descriptor to spare";
        } else {
            sys_close(t);
            t = high;
        }
    }
    if (why) {
        if (t >= 0) sys_close(t); /* just opened, not yet in use */
        __atomic_sub_fetch(&twins, 1, __ATOMIC_RELAXED);
        outcome(o, IOP_SO_NOT_APPLICABLE, why);
        errno = e;
        return;
    }
    o->direct_dev = (uint64_t)mine.st_dev;
    o->direct_ino = (uint64_t)mine.st_ino;
    o->direct_refused = 0;
    __atomic_store_n(&o->direct_fd, t, __ATOMIC_RELEASE);
    outcome(o, IOP_SO_APPLIED, "opened with O_DIRECT beside the program's descriptor");
    errno = e;
}

/* Still the descriptor we made: same file, O_DIRECT, close-on-exec. */
static int still_ours(const iop_open *o, int t) {
    struct stat sb;
    if (sys_fstat(t, &sb) != 0 || (uint64_t)sb.st_dev != o->direct_dev ||
        (uint64_t)sb.st_ino != o->direct_ino)
        return 0;
    long fl = sys_fcntl(t, F_GETFL, 0), fdfl = sys_fcntl(t, F_GETFD, 0);
    return fl >= 0 && (fl & O_DIRECT) && fdfl >= 0 && (fdfl & FD_CLOEXEC);
}

void iop_direct_closing(iop_open *o) {
    int t = __atomic_exchange_n(&o->direct_fd, -1, __ATOMIC_ACQ_REL);
    if (t < 0) return;
    int e = errno;
    if (still_ours(o, t)) sys_close(t); /* else the number is somebody else's now */
    __atomic_sub_fetch(&twins, 1, __ATOMIC_RELAXED);
    errno = e;
}

static long one_call(int op, int t, void *buf, size_t n, int64_t off) {
    return op == IOP_OP_WRITE ? syscall(SYS_pwrite64, t, buf, n, off)
                              : syscall(SYS_pread64, t, buf, n, off);
}

/* Move ``n`` bytes at ``off`` through the twin ``t``: straight from the
 * caller's buffer when aligned, else in pieces through a bounce buffer.
 * Returns the bytes moved, -1 with errno, or -2 when no bounce buffer is
 * free (nothing was done). */
static long transfer(int op, int t, char *buf, size_t n, int64_t off) {
    if (((uintptr_t)buf & (DIO_ALIGN - 1)) == 0) return one_call(op, t, buf, n, off);
    int slot = -1;
    for (int i = 0; i < BOUNCE_SLOTS && slot < 0; i++)
        if (!__atomic_exchange_n(&bounce[i].busy, 1, __ATOMIC_ACQUIRE)) slot = i;
    if (slot < 0) return -2;
    char *mem = bounce[slot].mem;
    if (!mem) {
        void *p = mmap(NULL, BOUNCE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        if (p == MAP_FAILED) {
            __atomic_store_n(&bounce[slot].busy, 0, __ATOMIC_RELEASE);
            return -2;
        }
        mem = bounce[slot].mem = p;
    }
    size_t done = 0;
    long r = 0;
    while (done < n) {
        size_t k = n - done < BOUNCE_BYTES ? n - done : BOUNCE_BYTES;
        if (op == IOP_OP_WRITE) memcpy(mem, buf + done, k);
        r = one_call(op, t, mem, k, off + (int64_t)done);
        if (r <= 0) break;
        if (op != IOP_OP_WRITE) memcpy(buf + done, mem, (size_t)r);
        done += (size_t)r;
        if ((size_t)r < k) break; /* end of file, or a full device */
    }
    __atomic_store_n(&bounce[slot].busy, 0, __ATOMIC_RELEASE);
    if (r < 0 && done == 0) return -1;
    return (long)done; /* an error after some bytes: those bytes, as a short transfer */
}

ssize_t iop_direct_io(iop_open *o, int fd, int op, void *buf, size_t n, int64_t off) {
    int t = __atomic_load_n(&o->direct_fd, __ATOMIC_ACQUIRE);
    if (t < 0 || o->direct_refused || n < (size_t)min_size) return IOP_DIRECT_NOT_TAKEN;
    int e = errno;
    int at_position = off < 0;
    if (at_position) off = sys_lseek(fd, 0, SEEK_CUR);
    if (off < 0 || ((n | (uint64_t)off) & (DIO_ALIGN - 1))) {
        outcome(o, IOP_SO_IGNORED, "offset or length not a multiple of 4096: page cache");
        errno = e;
        return IOP_DIRECT_NOT_TAKEN;
    }
    struct stat sb;
    if (sys_fstat(t, &sb) != 0 || (uint64_t)sb.st_dev != o->direct_dev ||
        (uint64_t)sb.st_ino != o->direct_ino) {
        o->direct_refused = 1;
        outcome(o, IOP_SO_REJECTED, "the O_DIRECT descriptor was closed under us: page cache");
        errno = e;
        return IOP_DIRECT_NOT_TAKEN;
    }
    long r = transfer(op, t, buf, n, off);
    if (r == -2) {
        outcome(o, IOP_SO_IGNORED, "every bounce buffer in use: page cache");
        errno = e;
        return IOP_DIRECT_NOT_TAKEN;
    }
    if (r < 0 && (errno == EINVAL || errno == EBADF || errno == EOPNOTSUPP)) {
        o->direct_refused = 1;
        outcome(o, IOP_SO_REJECTED, errno == EINVAL ? "the file system refused a request: page cache"
                                                    : "the O_DIRECT descriptor failed: page cache");
        errno = e;
        return IOP_DIRECT_NOT_TAKEN;
    }
    if (r >= 0) {
        if (at_position && r > 0) sys_lseek(fd, off + r, SEEK_SET);
        outcome(o, IOP_SO_APPLIED, op == IOP_OP_WRITE ? "write with O_DIRECT" : "read with O_DIRECT");
        errno = e;
    }
    return (ssize_t)r; /* -1: a real error (EIO, ENOSPC ...), errno as the call left it */
}
