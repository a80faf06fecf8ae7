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
 * The copy between the program's buffer and ours never faults: it is made
 * with process_vm_readv/process_vm_writev on our own process, which return
 * EFAULT where memcpy would raise SIGSEGV.  Where the program's memory
 * cannot be read or written, the rest of the request is made on the
 * program's descriptor, so the kernel gives the EFAULT, the short count and
 * the position it gives without us.  A process that may not make those
 * calls (a seccomp filter) sends only aligned buffers through the twin.
 *
 * Before each use, the program's descriptor must still name the twin's file
 * (a raw close and open may have given its number to another file) and
 * allow the request as the kernel would (access mode; O_APPEND or O_DIRECT
 * set with fcntl): else the request is the program's own.
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
#include <sys/uio.h>
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
static int vm_copy;  /* process_vm_readv/writev work on our own process */
static const char *value = "true";

static struct {
    int busy;
    char *mem; /* mapped on first use, kept */
} bounce[BOUNCE_SLOTS];

/* System calls made directly: none of them may reach a wrapper, ours or
 * another preloaded library's. */
static long sys_fstat(int fd, struct stat *sb) { return syscall(SYS_fstat, fd, sb); }
static long sys_fcntl(int fd, int cmd, long arg) { return syscall(SYS_fcntl, fd, cmd, arg); }
static int64_t sys_lseek(int fd, int64_t off, int whence) {
    return syscall(SYS_lseek, fd, off, whence);
}

/* Copy ``n`` bytes from the program's ``theirs`` into ``ours``, or (``out``)
 * from ``ours`` into ``theirs``, without a fault: the bytes copied, fewer
 * than ``n`` where the program's memory cannot be read (or written). */
static size_t safe_copy(int out, char *theirs, char *ours, size_t n) {
    size_t done = 0;
    long pid = syscall(SYS_getpid); /* after a fork, the child's */
    while (done < n) {
        struct iovec local = {ours + done, n - done}, remote = {theirs + done, n - done};
        long r = syscall(out ? SYS_process_vm_writev : SYS_process_vm_readv, pid, &local, 1UL,
                         &remote, 1UL, 0UL);
        if (r <= 0) break;
        done += (size_t)r;
    }
    return done;
}

static void direct_settings(void) {
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
    int e = errno;
    static char probe_from[8] = "iopilot", probe_to[8];
    vm_copy = safe_copy(0, probe_from, probe_to, sizeof probe_to) == sizeof probe_to &&
              safe_copy(1, probe_from, probe_to, sizeof probe_to) == sizeof probe_to;
    errno = e;
    iop_direct_on = 1;
}

static void direct_after_fork(void) {
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

/* May the program's descriptor ``fd`` make this request itself, as the twin
 * would make it?  NULL when so, else why not.  The descriptor must still
 * name the twin's file; its access mode must allow the request, and flags
 * set with fcntl since the open (O_APPEND, O_DIRECT) keep their meaning. */
static const char *program_differs(const iop_open *o, int fd, int op, int *gone) {
    struct stat sb;
    *gone = sys_fstat(fd, &sb) != 0 || (uint64_t)sb.st_dev != o->direct_dev ||
            (uint64_t)sb.st_ino != o->direct_ino;
    if (*gone) return "the program's descriptor names another file by now: page cache";
    long fl = sys_fcntl(fd, F_GETFL, 0);
    if (fl < 0) return "the program's descriptor failed: page cache";
    if (fl & O_PATH) return "the program's descriptor has no access: page cache";
    int mode = (int)(fl & O_ACCMODE);
    if (op == IOP_OP_WRITE ? mode == O_RDONLY : mode == O_WRONLY)
        return "the program's descriptor does not allow it: page cache";
    if (op == IOP_OP_WRITE && (fl & O_APPEND))
        return "O_APPEND set on the program's descriptor: page cache";
    if (fl & O_DIRECT) return "O_DIRECT set on the program's descriptor: its own request";
    return NULL;
}

static long one_call(int op, int t, void *buf, size_t n, int64_t off) {
    return op == IOP_OP_WRITE ? syscall(SYS_pwrite64, t, buf, n, off)
                              : syscall(SYS_pread64, t, buf, n, off);
}

/* Move ``n`` bytes at ``off`` through the twin ``t``: straight from the
 * caller's buffer when aligned, else in pieces through a bounce buffer.
 * Returns the bytes moved, -1 with errno, or -2 when no bounce buffer is
 * free (nothing was done).  ``*stuck`` is set when the transfer stopped
 * where the program's memory cannot be read or written (or may not be):
 * the rest is then for the program's descriptor. */
static long transfer(int op, int t, char *buf, size_t n, int64_t off, int *stuck) {
    *stuck = 0;
    if (((uintptr_t)buf & (DIO_ALIGN - 1)) == 0) {
        long r = one_call(op, t, buf, n, off);
        if (r < 0 && errno == EFAULT) {
            *stuck = 1;
            return 0;
        }
        if (r >= 0 && (size_t)r < n && op != IOP_OP_WRITE) {
            /* short: the end of the file, or memory that is not there */
            struct stat sb;
            if (sys_fstat(t, &sb) != 0 || off + r < (int64_t)sb.st_size) *stuck = 1;
        }
        return r;
    }
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
        if (op == IOP_OP_WRITE && safe_copy(0, buf + done, mem, k) != k) {
            *stuck = 1;
            break;
        }
        r = one_call(op, t, mem, k, off + (int64_t)done);
        if (r <= 0) break;
        if (op != IOP_OP_WRITE && safe_copy(1, buf + done, mem, (size_t)r) != (size_t)r) {
            *stuck = 1;
            break;
        }
        done += (size_t)r;
        if ((size_t)r < k) break; /* end of file, or a full device */
    }
    __atomic_store_n(&bounce[slot].busy, 0, __ATOMIC_RELEASE);
    if (*stuck) return (long)done;
    if (r < 0 && done == 0) return -1;
    return (long)done; /* an error after some bytes: those bytes, as a short transfer */
}

/* Drop the twin of a descriptor that no longer names its file.  Closing it
 * cannot take fcntl locks from the program: its own descriptor of that file
 * is closed already, which dropped them. */
static void drop(iop_open *o) {
    int t = __atomic_exchange_n(&o->direct_fd, -1, __ATOMIC_ACQ_REL);
    if (t < 0) return;
    if (still_ours(o, t)) sys_close(t);
    __atomic_sub_fetch(&twins, 1, __ATOMIC_RELAXED);
}

ssize_t iop_direct_io(iop_open *o, int fd, int op, void *buf, size_t n, int64_t off) {
    int t = __atomic_load_n(&o->direct_fd, __ATOMIC_ACQUIRE);
    if (t < 0 || o->direct_refused || n < (size_t)min_size) return IOP_DIRECT_NOT_TAKEN;
    int e = errno, gone;
    const char *why = program_differs(o, fd, op, &gone);
    if (why) {
        if (gone) drop(o);
        outcome(o, gone ? IOP_SO_REJECTED : IOP_SO_IGNORED, why);
        errno = e;
        return IOP_DIRECT_NOT_TAKEN;
    }
    int at_position = off < 0;
    if (at_position) off = sys_lseek(fd, 0, SEEK_CUR);
    if (off < 0 || ((n | (uint64_t)off) & (DIO_ALIGN - 1))) {
        outcome(o, IOP_SO_IGNORED, "offset or length not a multiple of 4096: page cache");
        errno = e;
        return IOP_DIRECT_NOT_TAKEN;
    }
    if (!vm_copy && ((uintptr_t)buf & (DIO_ALIGN - 1))) {
        outcome(o, IOP_SO_IGNORED, "buffer not 4096-aligned and no fault-safe copy: page cache");
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
    int stuck;
    long r = transfer(op, t, buf, n, off, &stuck);
    if (r == -2) {
        outcome(o, IOP_SO_IGNORED, "every bounce buffer in use: page cache");
        errno = e;
        return IOP_DIRECT_NOT_TAKEN;
    }
    if (stuck && r == 0) { /* the program's own call: the kernel's EFAULT and position */
        outcome(o, IOP_SO_IGNORED, "the program's buffer is not all there: page cache");
        errno = e;
        return IOP_DIRECT_NOT_TAKEN;
    }
    if (stuck) { /* the rest on the program's descriptor, where the kernel stops as it would */
        char *rest = (char *)buf + r;
        long more = op == IOP_OP_WRITE ? syscall(SYS_pwrite64, fd, rest, n - (size_t)r, off + r)
                                       : syscall(SYS_pread64, fd, rest, n - (size_t)r, off + r);
        if (more > 0) r += more;
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

/* A feature of no layer: the POSIX layer asks it at open, read, write and
 * close; it takes its values from the settings file at start-up. */
const iop_module iop_direct_module = {
    .name = "direct",
    .settings = direct_settings,
    .after_fork = direct_after_fork,
};
