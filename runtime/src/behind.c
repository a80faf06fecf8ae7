/* Write-behind (IOPILOT_ASYNC=1, `iopilot run --async`): the program's POSIX
 * writes to regular files are copied into a bounded buffer and written by
 * a background thread, in the order they were made, while the program goes
 * on.
 *
 * The contract (README, "Asynchronous I/O"):
 * - write, pwrite and pwrite64 on a regular file the program opened itself
 *   (not with O_APPEND, O_DIRECT, O_SYNC or O_DSYNC, not inside
 *   MPI_File_open) return at once with every byte taken; the file position
 *   moves as the call would have moved it.
 * - Anything that could see the file's bytes or size waits for the file's
 *   pending writes first: reads, vector writes, stat, lseek to the end,
 *   truncate, mmap, fsync, fdatasync, close, dup2 onto the descriptor.
 *   exec, fork, exit, MPI_Barrier, MPI_File_sync, MPI_File_close and
 *   H5Fflush wait for every pending write (the MPI calls from C, and from
 *   Fortran: mpiio_fortran.c, mpi_fences.c).
 * - A deferred failure (EIO, ENOSPC, EFBIG ...) is reported by the next
 *   fsync, fdatasync or close of that file: the call returns -1 with that
 *   errno (close still closes the descriptor).
 * - A write that does not fit in the buffer (IOPILOT_ASYNC_MAX_BYTES,
 *   default 256 MiB) waits for the file's pending writes and is made at
 *   once, as without the setting.
 * - With IOPILOT_ASYNC_RELAXED=1, fsync and fdatasync are queued too and
 *   return at once: durability is then the background thread's, and a
 *   failure is reported at the next sync or close.
 *
 * The background thread writes through its own descriptor of the file (a
 * close-on-exec duplicate, kept until the program closes the file), so a
 * descriptor the program closes or reuses never receives a deferred
 * write.  Its system calls are made directly, untraced.
 *
 * Bookkeeping uses the runtime's lock (a spin lock, never held across a
 * blocking call) and futexes for waiting, so a signal handler that writes
 * finds either a free lock or, if it interrupted the bookkeeping of its
 * own thread, passes through and writes synchronously.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../include/iopilot_async.h"
#include "../include/iopilot_place.h"
#include "behind.h"
#include "core.h"

#define NOPS 65536   /* operations queued at once */
#define NFILES 4096  /* files with deferred writes in one process */
#define DEFAULT_CAP ((size_t)256 << 20)

enum { OP_WRITE, OP_SYNC, OP_DATASYNC };

typedef struct {
    uint64_t file_id; /* the name, for the trace */
    uint64_t ident;   /* the file itself, for the bookkeeping */
    int fd;       /* the thread's descriptor */
    int kind;
    int64_t offset;
    size_t n, skip; /* bytes, and ring bytes skipped before them (wrap) */
    size_t at;      /* where in the ring */
    double queued;  /* monotonic seconds, for the totals */
    double queued_t; /* the runtime's clock, for the trace */
} bop;

typedef struct {
    uint64_t id; /* the file's identity (device and inode); 0: free slot */
    int fd;      /* our duplicate, -1 when none */
    int pending;
    int error;
    int shared;  /* given another name while open: written at once from then on */
    int64_t room; /* bytes that may still be queued before free space is asked again */
    uint64_t max_end; /* the file system's largest file, as far as we know it (0: not asked) */
} bfile;

int iop_behind_on;
int iop_behind_relaxed;
IOP_TLS int iop_inside_mpi_open;
IOP_TLS unsigned iop_behind_flags;

static iop_lock_t lock;
static char *ring;
static size_t cap;
static uint64_t r_head, r_tail; /* bytes handed out and given back, ever */
static bop ops[NOPS];
static uint64_t op_head, op_tail;
static bfile files[NFILES];
static int work_seq, done_seq; /* futex words */
static int started;
static pid_t owner; /* the process whose thread runs the queue */
static int fd_floor;
static int copy_checked; /* process_vm_readv works here (copies that cannot fault) */
static uint64_t fsize_limit = UINT64_MAX; /* RLIMIT_FSIZE, as the program last set it */
/* What it did, for the summary (under ``lock``). */
typedef struct {
    long writes, synchronous, waits, errors;
    uint64_t bytes, bytes_written;
    size_t max_bytes;
    double busy_seconds;   /* the thread in write and sync calls */
    double queued_seconds; /* operations waiting for the thread */
    double wait_seconds;   /* the program waiting for pending writes */
} iop_behind_stats;
static iop_behind_stats st;
/* Where the thread runs (iopilot_place.h), and its CPU clock. */
static iopilot_place placed;
static clockid_t worker_clock;
static int worker_clock_ok;

/* The engine's threads: how many started and ended, the CPUs they were
 * given (together), whether one shared its creator's only core, and the CPU
 * time of those that ended (under ``lock``). */
static struct {
    long started, ended;
    cpu_set_t cpus;
    int shares_core;
    double cpu_seconds;
} engine;

static void fence_all(void);
static int forks_watched; /* the fork hooks have work: set at start-up, once the ring is mapped */
static void child_after_fork(void);
static int start_worker(void);

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void futex_wait(int *word, int seen) {
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}
static void futex_wake(int *word) {
    __atomic_add_fetch(word, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Copy ``n`` bytes of the program's memory; 0 when some of it cannot be read. */
static int copy_in(void *to, const void *from, size_t n) {
    struct iovec local = {to, n}, remote = {(void *)from, n};
    int e = errno;
    long r = syscall(SYS_process_vm_readv, (long)syscall(SYS_getpid), &local, 1UL, &remote, 1UL,
                     0UL);
    errno = e;
    return r == (long)n;
}

void iop_behind_limits_changed(void) {
    struct rlimit rl;
    int e = errno;
    if (syscall(SYS_prlimit64, 0, RLIMIT_FSIZE, NULL, &rl) == 0)
        __atomic_store_n(&fsize_limit, rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX
                                                                     : (uint64_t)rl.rlim_cur,
                         __ATOMIC_RELAXED);
    errno = e;
}

static size_t env_size(const char *name, size_t dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    unsigned long long x = strtoull(v, &end, 10), unit = 1;
    if (*end == 'k' || *end == 'K') unit = 1ULL << 10;
    else if (*end == 'm' || *end == 'M') unit = 1ULL << 20;
    else if (*end == 'g' || *end == 'G') unit = 1ULL << 30;
    else if (*end) return dflt;
    return x ? (size_t)(x * unit) : dflt;
}

static void behind_init(void) {
    const char *on = getenv("IOPILOT_ASYNC");
    if (!on || strcmp(on, "1") != 0) return;
    const char *relaxed = getenv("IOPILOT_ASYNC_RELAXED");
    iop_behind_relaxed = relaxed && !strcmp(relaxed, "1");
    cap = env_size("IOPILOT_ASYNC_MAX_BYTES", DEFAULT_CAP);
    struct rlimit rl;
    long limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                     ? (long)rl.rlim_cur : 1024;
    fd_floor = (int)(limit / 2);
    /* Address space only: pages are touched as writes are copied in. */
    void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED || fd_floor < 64) return;
    ring = p;
    /* A write from memory the program cannot read must fail as it would
     * (EFAULT), not fault in our copy: copies go through process_vm_readv,
     * which reports what it could not read.  Without it nothing is deferred. */
    char probe_from[8] = "iopilot", probe_to[8];
    if (!copy_in(probe_to, probe_from, sizeof probe_from) ||
        memcmp(probe_to, probe_from, sizeof probe_to) != 0) {
        munmap(p, cap);
        ring = NULL;
        return;
    }
    copy_checked = 1;
    iop_behind_limits_changed();
    for (int i = 0; i < NFILES; i++) files[i].fd = -1;
    forks_watched = 1;
    /* The thread starts now, not at the first write, which may be made in
     * a signal handler (pthread_create is not async-signal-safe).  A child
     * of fork or clone writes synchronously and needs none. */
    if (!start_worker()) {
        munmap(p, cap);
        ring = NULL;
        return;
    }
    iop_behind_on = 1;
}

/* The file's slot, made when ``create``; NULL when the table is full. */
static bfile *file_slot(uint64_t id, int create) {
    size_t h = (size_t)((id * 0x9e3779b97f4a7c15ULL) >> 20) % NFILES;
    for (int k = 0; k < NFILES; k++, h = (h + 1) % NFILES) {
        if (files[h].id == id) return &files[h];
        if (!files[h].id) {
            if (!create) return NULL;
            files[h].id = id;
            files[h].fd = -1;
            return &files[h];
        }
    }
    return NULL;
}

static long sys_pwrite(int fd, const char *buf, size_t n, int64_t off) {
    size_t done = 0;
    while (done < n) {
        long r = syscall(SYS_pwrite64, fd, buf + done, n - done, off + (int64_t)done);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) {
            errno = ENOSPC;
            return -1;
        }
        done += (size_t)r;
    }
    return (long)done;
}

static void *worker(void *arg) {
    (void)arg;
    iop_in_runtime = 1; /* nothing this thread does is the program's */
    /* a name in top -H, gdb and /proc that says whose thread this is */
    prctl(PR_SET_NAME, "iopilot-behind", 0, 0, 0);
    for (;;) {
        iop_lock(&lock);
        if (op_tail == op_head) {
            int seen = __atomic_load_n(&work_seq, __ATOMIC_ACQUIRE);
            iop_unlock(&lock);
            futex_wait(&work_seq, seen);
            continue;
        }
        bop o = ops[op_tail % NOPS];
        iop_unlock(&lock);

        double issued = mono(), issued_t = iop_now();
        int err = 0;
        if (o.kind == OP_WRITE) {
            if (sys_pwrite(o.fd, ring + o.at, o.n, o.offset) < 0) err = errno;
        } else if (syscall(o.kind == OP_SYNC ? SYS_fsync : SYS_fdatasync, o.fd) != 0) {
            err = errno;
        }
        double completed = mono();
        /* in the trace before the operation counts as done: the exit path
         * writes the buffers once nothing is pending */
        int write = o.kind == OP_WRITE;
        iop_background_op(IOP_LAYER_POSIX, write ? IOP_OP_WRITE : IOP_OP_SYNC, o.file_id,
                          write ? o.offset : -1, write ? (int64_t)o.n : 0, o.queued_t, issued_t,
                          iop_now(), err != 0);

        iop_lock(&lock);
        __atomic_store_n(&op_tail, op_tail + 1, __ATOMIC_RELEASE); /* iop_behind_drain reads it unlocked */
        r_tail += o.skip + o.n;
        bfile *f = file_slot(o.ident, 0);
        if (f) {
            f->pending--;
            if (err && !f->error) f->error = err;
        }
        st.busy_seconds += completed - issued;
        st.queued_seconds += issued - o.queued;
        if (o.kind == OP_WRITE) st.bytes_written += err ? 0 : o.n;
        if (err) st.errors++;
        __atomic_sub_fetch(&iop_deferred, 1, __ATOMIC_RELEASE);
        iop_unlock(&lock);
        futex_wake(&done_seq);
    }
    return NULL;
}

static int create_worker(pthread_t *t, const iopilot_place *where) {
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (where) iopilot_place_attr(where, &a);
    int ok = pthread_create(t, &a, worker, NULL) == 0;
    pthread_attr_destroy(&a);
    return ok;
}

static int start_worker(void) {
    if (started) return 1;
    pthread_t t;
    /* On a CPU of ours other than this thread's, when there is one. */
    iopilot_place_choose(&placed);
    /* The thread takes no signal: the program's handlers run on its own
     * threads, as they would without us. */
    sigset_t all, was;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &was);
    int ok = create_worker(&t, &placed);
    if (!ok && placed.placed) { /* a CPU gone offline meanwhile: where it would have run */
        placed.placed = 0;
        if (sched_getaffinity(0, sizeof placed.cpus, &placed.cpus) != 0) CPU_ZERO(&placed.cpus);
        ok = create_worker(&t, NULL);
    }
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    started = ok;
    if (ok) {
        owner = (pid_t)syscall(SYS_getpid);
        worker_clock_ok = pthread_getcpuclockid(t, &worker_clock) == 0; /* detached, never ends */
    }
    return ok;
}

/* Our descriptor for the file, duplicated from the program's ``fd``. */
static int thread_fd(bfile *f, int fd) {
    if (f->fd >= 0) return f->fd;
    int d = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, fd_floor);
    if (d < 0) return -1;
    f->fd = d;
    return d;
}

/* Wait until ``done`` holds. */
#define WAIT_UNTIL(done)                                                  \
    do {                                                                  \
        for (;;) {                                                        \
            int seen_ = __atomic_load_n(&done_seq, __ATOMIC_ACQUIRE);     \
            if (done) break;                                              \
            futex_wait(&done_seq, seen_);                                 \
        }                                                                 \
    } while (0)

/* Does this process have the thread that empties the queue?  Not a child
 * made by a clone system call that no wrapper of ours saw: its copy of the
 * queue has no thread, and waiting for it would never end.  A vfork child
 * shares our memory, and so our thread. */
static int thread_is_ours(void) {
    if (iop_in_runtime >= IOP_VFORK_ONE || !started) return 1;
    return (pid_t)syscall(SYS_getpid) == owner;
}

static int file_pending(uint64_t id) {
    iop_lock(&lock);
    bfile *f = file_slot(id, 0);
    int n = f ? f->pending : 0;
    iop_unlock(&lock);
    return n;
}

static void waited(double since) {
    iop_lock(&lock);
    st.waits++;
    st.wait_seconds += mono() - since;
    iop_unlock(&lock);
}

/* Wait for the file's pending writes. */
static void fence_file(uint64_t id) {
    if (!__atomic_load_n(&iop_deferred, __ATOMIC_ACQUIRE) || !id) return;
    int e = errno;
    iop_busy_enter();
    double t0 = mono();
    if (file_pending(id) && thread_is_ours()) {
        WAIT_UNTIL(!file_pending(id));
        waited(t0);
    }
    iop_busy_leave();
    errno = e;
}

/* By identity: whatever name, link or descriptor leads to the file. */
static void fence_at(int dirfd, const char *path, int flags) {
    if (!__atomic_load_n(&iop_deferred, __ATOMIC_ACQUIRE) || !path) return;
    struct stat sb;
    int e = errno;
    long r = syscall(SYS_newfstatat, dirfd, path, &sb,
                     flags & (AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT));
    int why = errno;
    errno = e;
    if (r == 0 && S_ISREG(sb.st_mode))
        fence_file(iop_ident((uint64_t)sb.st_dev, (uint64_t)sb.st_ino));
    else if (r != 0 && why != ENOENT && why != ENOTDIR)
        fence_all(); /* cannot tell which file: every one */
}

static void fence_all(void) {
    if (!__atomic_load_n(&iop_deferred, __ATOMIC_ACQUIRE)) return;
    if (!thread_is_ours()) return;
    int e = errno;
    iop_busy_enter();
    double t0 = mono();
    WAIT_UNTIL(!__atomic_load_n(&iop_deferred, __ATOMIC_ACQUIRE));
    waited(t0);
    iop_busy_leave();
    errno = e;
}

void iop_behind_losing(int first, int last) {
    if (!iop_behind_on || last < fd_floor) return;
    int ours = 0;
    iop_busy_enter();
    iop_lock(&lock);
    for (int i = 0; i < NFILES && !ours; i++)
        ours = files[i].id && files[i].fd >= first && files[i].fd <= last;
    iop_unlock(&lock);
    iop_busy_leave();
    if (!ours) return;
    fence_all(); /* its writes land while it is still open */
    iop_busy_enter();
    iop_lock(&lock);
    for (int i = 0; i < NFILES; i++)
        if (files[i].id && files[i].fd >= first && files[i].fd <= last) files[i].fd = -1;
    iop_unlock(&lock);
    iop_busy_leave();
}

/* The same, changing nothing of ours: for a vfork child about to exec,
 * which shares our memory (the parent's I/O thread runs on meanwhile). */
static void behind_wait_quietly(void) {
    if (!__atomic_load_n(&iop_deferred, __ATOMIC_ACQUIRE) || !thread_is_ours()) return;
    int e = errno;
    WAIT_UNTIL(!__atomic_load_n(&iop_deferred, __ATOMIC_ACQUIRE));
    errno = e;
}

int iop_behind_take_error(uint64_t id) {
    if (!iop_behind_on || !id) return 0;
    iop_busy_enter();
    iop_lock(&lock);
    bfile *f = file_slot(id, 0);
    int err = f ? f->error : 0;
    if (f) f->error = 0;
    iop_unlock(&lock);
    iop_busy_leave();
    return err;
}

void iop_behind_closing(uint64_t id) {
    if (!iop_behind_on || !id) return;
    fence_file(id);
    iop_busy_enter();
    iop_lock(&lock);
    bfile *f = file_slot(id, 0);
    /* Another thread's descriptor of the file may have queued writes since
     * the fence: they go through our descriptor, which then stays open
     * until a close finds nothing pending. */
    int d = f && !f->pending ? f->fd : -1;
    if (d >= 0) f->fd = -1;
    iop_unlock(&lock);
    iop_busy_leave();
    if (d >= 0) syscall(SYS_close, d); /* the program's close drops its locks anyway */
}

/* fcntl(F_SETFL) on a descriptor of the file: the flags belong to the open
 * file, which dup'd descriptors share (and so does our own duplicate, whose
 * writes would follow a new O_APPEND).  Its writes land first; with
 * O_APPEND, O_DIRECT or a sync flag, no descriptor of the file is deferred
 * from then on. */
void iop_behind_flags_set(uint64_t id, long flags) {
    if (!iop_behind_on || !id) return;
    if (!(flags & (O_APPEND | O_DIRECT | O_SYNC | O_DSYNC))) {
        fence_file(id);
        return;
    }
    for (int fd = 0; fd < iop_nfds; fd++) { /* rare: one pass over the table */
        iop_open *o = iop_fd(fd);
        if (o && o->ident == id) o->behind_ok = 0;
    }
    iop_behind_shared(id);
}

/* Queue an operation; the lock is held.  0 when there is no room. */
static int enqueue(bfile *f, uint64_t file_id, int d, int kind, const void *buf, size_t n,
                   int64_t off) {
    if (op_head - op_tail >= NOPS) return 0;
    size_t at = (size_t)(r_head % cap), skip = 0;
    if (kind == OP_WRITE) {
        if (at + n > cap) { /* does not fit before the end: start again at 0 */
            skip = cap - at;
            at = 0;
        }
        if (r_head - r_tail + skip + n > cap) return 0;
        if (!copy_in(ring + at, buf, n)) return 0; /* the program's own call fails as it would */
        r_head += skip + n;
        size_t used = (size_t)(r_head - r_tail);
        if (used > st.max_bytes) st.max_bytes = used;
    }
    ops[op_head % NOPS] = (bop){file_id, f->id, d, kind, off, kind == OP_WRITE ? n : 0, skip, at,
                                mono(), iop_now()};
    op_head++;
    f->pending++;
    __atomic_add_fetch(&iop_deferred, 1, __ATOMIC_RELEASE);
    return 1;
}

/* Free bytes of the file's file system, less what is queued and a margin:
 * a write is queued only when it can land there, so a file system that
 * fills up fails the program's own call, at the call, as it would. */
#define ROOM_MARGIN ((int64_t)4 << 20)
static int64_t room_for(int fd, uint64_t *max_end) {
    struct statfs sf;
    int e = errno;
    long r = syscall(SYS_fstatfs, fd, &sf);
    errno = e;
    *max_end = 0;
    if (r != 0 || sf.f_bsize <= 0) return 0;
    /* Past the file system's largest file a write fails with EFBIG: the
     * program's own call must say so.  A lower bound where we know it (ext2
     * and ext3 stop at 2^29 blocks), else 1 TiB, unless the file system
     * takes files of any size an offset can name. */
    switch ((unsigned long)sf.f_type) {
    case 0xEF53: *max_end = ((uint64_t)1 << 29) * (uint64_t)sf.f_bsize; break; /* ext2/3/4 */
    case 0x58465342: /* XFS */
    case 0x9123683E: /* Btrfs */
    case 0x01021994: /* tmpfs */
    case 0x0BD00BD0: /* Lustre */
    case 0x47504653: /* GPFS */
    case 0x19830326: /* BeeGFS */
        *max_end = (uint64_t)1 << 62;
        break;
    default: *max_end = (uint64_t)1 << 40;
    }
    int64_t avail = (int64_t)sf.f_bavail * (int64_t)sf.f_bsize;
    return avail - avail / 8 - ROOM_MARGIN;
}

/* The file's slot and our descriptor, with the lock held; NULL when the
 * write cannot be queued at all. */
static bfile *slot_for_write(uint64_t id, int fd, int *d) {
    bfile *f = start_worker() ? file_slot(id, 1) : NULL;
    *d = f ? thread_fd(f, fd) : -1;
    return *d >= 0 && !f->shared ? f : NULL;
}

ssize_t iop_behind_write(iop_open *o, int fd, const void *buf, size_t n, int64_t off) {
    uint64_t id = o->ident;
    iop_behind_flags = 0;
    uint64_t limit = __atomic_load_n(&fsize_limit, __ATOMIC_RELAXED);
    /* Past RLIMIT_FSIZE the program's own call gets EFBIG (and SIGXFSZ). */
    if (!n || n > cap || !id || !iop_behind_on || (off >= 0 && (uint64_t)off + n > limit)) {
        fence_file(id);
        return IOP_BEHIND_NOT_TAKEN;
    }
    int e = errno;
    int64_t pos = off;
    if (off < 0) {
        /* Take the range and move the position in one system call: the
         * kernel orders it with every other read, write and seek of the
         * descriptor (other threads', a signal handler's). */
        int64_t end = (int64_t)syscall(SYS_lseek, fd, (int64_t)n, SEEK_CUR);
        if (end < 0) {
            errno = e;
            fence_file(id);
            return IOP_BEHIND_NOT_TAKEN;
        }
        pos = end - (int64_t)n;
    }
    iop_busy_enter();
    int taken = 0, d;
    if ((uint64_t)pos + n <= limit) {
        iop_lock(&lock);
        bfile *f = slot_for_write(id, fd, &d);
        if (f && f->room < (int64_t)n) { /* ask the file system, without the lock */
            iop_unlock(&lock);
            uint64_t max_end;
            int64_t room = room_for(fd, &max_end);
            iop_lock(&lock);
            f = slot_for_write(id, fd, &d);
            if (f) {
                f->room = room - (int64_t)(r_head - r_tail);
                f->max_end = max_end;
            }
        }
        if (f && f->room >= (int64_t)n && (uint64_t)pos + n <= f->max_end &&
            enqueue(f, o->st->file_id, d, OP_WRITE, buf, n, pos)) {
            taken = 1;
            f->room -= (int64_t)n;
            st.writes++;
            st.bytes += n;
            __atomic_add_fetch(&work_seq, 1, __ATOMIC_RELEASE);
        } else {
            st.synchronous++;
        }
        iop_unlock(&lock);
    }
    iop_busy_leave();
    if (taken) {
        syscall(SYS_futex, &work_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        iop_behind_flags = IOP_FLAG_DEFERRED;
        errno = e;
        return (ssize_t)n;
    }
    fence_file(id); /* in order: the file's queued writes first */
    if (off >= 0) {
        errno = e;
        return IOP_BEHIND_NOT_TAKEN; /* the caller's pwrite */
    }
    /* The range is ours already: write it there now. */
    long r = syscall(SYS_pwrite64, fd, buf, n, pos);
    if (r != (long)n) { /* short or failed: the position ends where the bytes did */
        int we = errno;
        syscall(SYS_lseek, fd, pos + (r > 0 ? r : 0), SEEK_SET);
        errno = we;
        return r;
    }
    errno = e;
    return (ssize_t)r;
}

int iop_behind_sync(iop_open *o, int fd, int data_only) {
    uint64_t id = o->ident;
    iop_behind_flags = 0;
    if (iop_behind_relaxed && id && iop_behind_on) {
        iop_busy_enter();
        iop_lock(&lock);
        int d;
        bfile *f = slot_for_write(id, fd, &d);
        int taken = f && enqueue(f, o->st->file_id, d, data_only ? OP_DATASYNC : OP_SYNC, NULL, 0, 0);
        int err = taken ? f->error : 0;
        if (taken) f->error = 0;
        if (taken) __atomic_add_fetch(&work_seq, 1, __ATOMIC_RELEASE);
        iop_unlock(&lock);
        iop_busy_leave();
        if (taken) {
            syscall(SYS_futex, &work_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
            iop_behind_flags = IOP_FLAG_DEFERRED;
            if (err) {
                errno = err;
                return -1;
            }
            return 0;
        }
    }
    fence_file(id);
    return IOP_BEHIND_NOT_TAKEN;
}

/* Marked first, then fenced: nothing is queued for the file after the
 * mark, so one wait covers every thread's writes. */
void iop_behind_shared(uint64_t id) {
    if (!iop_behind_on || !id) return;
    iop_busy_enter();
    iop_lock(&lock);
    bfile *f = file_slot(id, 1);
    if (f) f->shared = 1;
    iop_unlock(&lock);
    iop_busy_leave();
    fence_file(id);
}

static void before_fork(void) {
    if (forks_watched) fence_all();
}

static int keep_fds; /* the child shares our descriptor table (CLONE_FILES) */
void iop_behind_after_clone(int shares_fds) {
    keep_fds = shares_fds;
    child_after_fork();
    keep_fds = 0;
}

static void child_after_fork(void) {
    lock = 0; /* the threads that could hold it did not follow */
    memset(&engine, 0, sizeof engine); /* nor did the engine's threads */
    if (!forks_watched) return;
    /* No thread followed: the child writes synchronously (its parent's
     * queue was empty at the fork).  Its copies of our descriptors go. */
    iop_behind_on = 0;
    iop_deferred = 0;
    lock = 0;
    started = 0;
    worker_clock_ok = 0;
    for (int i = 0; i < NFILES; i++) {
        if (files[i].fd >= 0 && !keep_fds) syscall(SYS_close, files[i].fd);
        files[i].fd = -1;
    }
}

int iop_behind_drain(double stall_seconds) {
    if (!__atomic_load_n(&iop_deferred, __ATOMIC_ACQUIRE)) return 1;
    if (!thread_is_ours()) return 0;
    int e = errno;
    uint64_t last = __atomic_load_n(&op_tail, __ATOMIC_ACQUIRE);
    double since = mono();
    for (;;) {
        int seen = __atomic_load_n(&done_seq, __ATOMIC_ACQUIRE);
        if (!__atomic_load_n(&iop_deferred, __ATOMIC_ACQUIRE)) break;
        struct timespec tick = {0, 20 * 1000 * 1000};
        syscall(SYS_futex, &done_seq, FUTEX_WAIT_PRIVATE, seen, &tick, NULL, 0);
        uint64_t now = __atomic_load_n(&op_tail, __ATOMIC_ACQUIRE);
        if (now != last) {
            last = now;
            since = mono();
        } else if (mono() - since > stall_seconds) {
            errno = e;
            return 0;
        }
    }
    errno = e;
    return 1;
}

/* ", "thread_cpus": [...], "creator_cpu": n, "shares_core": b": where a
 * background thread may run, and whether that is only its creator's core. */
static void put_thread(iop_json *b, const cpu_set_t *cpus, int creator, int shares) {
    iop_json_printf(b, ", \"thread_cpus\": [");
    for (int c = 0, first = 1; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, cpus)) continue;
        iop_json_printf(b, first ? "%d" : ", %d", c);
        first = 0;
    }
    iop_json_printf(b, "], \"creator_cpu\": %d, \"shares_core\": %s", creator,
                    shares ? "true" : "false");
}

static void engine_summary(iop_json *b);

/* "write_behind": what IOPILOT_ASYNC deferred, and what it cost; where its
 * thread ran and the CPU time it used. */
static void behind_summary(iop_json *b) {
    engine_summary(b);
    if (!iop_behind_on && !iop_behind_relaxed) return;
    iop_busy_enter();
    iop_lock(&lock);
    iop_behind_stats s = st;
    iop_unlock(&lock);
    iop_busy_leave();
    iop_json_printf(b, ",\n\"write_behind\": {\"relaxed\": %d, \"writes\": %ld, \"bytes\": %llu, "
                    "\"bytes_written\": %llu, \"synchronous\": %ld, \"waits\": %ld, "
                    "\"errors\": %ld, \"max_bytes\": %zu, \"busy_seconds\": %.9f, "
                    "\"queued_seconds\": %.9f, \"wait_seconds\": %.9f",
                    iop_behind_relaxed, s.writes, (unsigned long long)s.bytes,
                    (unsigned long long)s.bytes_written, s.synchronous, s.waits, s.errors,
                    s.max_bytes, s.busy_seconds, s.queued_seconds, s.wait_seconds);
    if (started && thread_is_ours()) { /* a forked child has none (relaxed: still reported) */
        put_thread(b, &placed.cpus, placed.creator_cpu, placed.shares_core);
        struct timespec ts;
        int e = errno;
        if (worker_clock_ok && clock_gettime(worker_clock, &ts) == 0)
            iop_json_printf(b, ", \"thread_cpu_s\": %.9f",
                            (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec);
        errno = e;
    }
    iop_json_put(b, "}", 1);
}

static void behind_fence(int kind, uint64_t ident, int dirfd, const char *path, int flags) {
    if (kind == IOP_FENCE_FILE) fence_file(ident);
    else if (kind == IOP_FENCE_PATH) fence_at(dirfd, path, flags);
    else fence_all();
}

/* ------------------------------------------------------------------ */
/* The event-set engine (async.c, iopilot_async.h) reports each operation
 * here when the runtime is preloaded.  Its thread's own calls are not
 * traced (op -1, sent once when the thread starts): the operation is
 * counted and recorded once, as the program's deferred call at the time
 * it was queued, followed by the QUEUED/BACKGROUND pair, as for write-behind. */

static double ticks_at(double mono_seconds, double now_mono, double now_ticks, double spt) {
    return now_ticks - (now_mono - mono_seconds) / spt;
}


/* A thread of the engine starts (on itself; ``creator``: the CPU of the
 * thread that created it, -1 unknown) or ends after ``cpu_seconds``. */
static void engine_thread(int starting, int creator, double cpu_seconds) {
    cpu_set_t mine;
    int e = errno;
    int known = starting && sched_getaffinity(0, sizeof mine, &mine) == 0;
    errno = e;
    iop_busy_enter();
    iop_lock(&lock);
    if (!starting) {
        engine.ended++;
        engine.cpu_seconds += cpu_seconds;
    } else if (known) {
        engine.started++;
        CPU_OR(&engine.cpus, &engine.cpus, &mine);
        if (CPU_COUNT(&mine) == 1 && (creator < 0 || (creator < CPU_SETSIZE && CPU_ISSET(creator, &mine))))
            engine.shares_core = 1;
    }
    iop_unlock(&lock);
    iop_busy_leave();
}

/* ",\n"async_engine": {...}" when the engine ran a thread in this process. */
static void engine_summary(iop_json *b) {
    iop_busy_enter();
    iop_lock(&lock);
    typeof(engine) g = engine;
    iop_unlock(&lock);
    iop_busy_leave();
    if (!g.started) return;
    iop_json_printf(b, ",\n\"async_engine\": {\"threads\": %ld, \"ended\": %ld", g.started,
                    g.ended);
    put_thread(b, &g.cpus, -1, g.shares_core);
    iop_json_printf(b, ", \"thread_cpu_s\": %.9f}", g.cpu_seconds);
}

IOP_EXPORT void iopilot_async_event(int op, int fd, int64_t offset, size_t bytes, size_t done,
                                    int error, double queued, double issued, double completed) {
    if (op < 0) { /* the engine's thread: its system calls are the operations reported here */
        iop_in_runtime = 1;
        /* -1 as it starts (``fd``: its creator's CPU), -2 as it ends
         * (``completed``: its CPU seconds) */
        if (op == IOPILOT_ES_THREAD_START || op == IOPILOT_ES_THREAD_END)
            engine_thread(op == IOPILOT_ES_THREAD_START, fd, completed);
        return;
    }
    iop_open *o = iop_enabled ? iop_fd(fd) : NULL;
    if (!o || !o->st) return;
    int e = errno;
    double spt = seconds_per_tick(), nm = mono(), nt = iop_now();
    double q = ticks_at(queued, nm, nt, spt), i = ticks_at(issued, nm, nt, spt),
           c = ticks_at(completed, nm, nt, spt);
    int rop = op == IOPILOT_ES_WRITE ? IOP_OP_WRITE : op == IOPILOT_ES_READ ? IOP_OP_READ
                                                                          : IOP_OP_SYNC;
    unsigned flags = IOP_FLAG_DEFERRED | (error ? IOP_FLAG_ERROR : 0);
    if (rop == IOP_OP_SYNC)
        iop_meta_op(o->st, IOP_OP_SYNC, IOP_C_FSYNCS, q, q, flags);
    else /* a failure moved nothing the counters would count (as for the program's own calls) */
        iop_data_op(o->st, rop, offset, error ? -1 : (int64_t)done, NULL, o->alignment, q, q, flags);
    iop_background_op(o->st->layer, rop, o->st->file_id, rop == IOP_OP_SYNC ? -1 : offset,
                      rop == IOP_OP_SYNC ? 0 : (int64_t)bytes, q, i, c, error != 0);
    errno = e;
}

/* A feature of no layer (IOPILOT_ASYNC=1): its queue drains before the
 * image ends, execs or forks, and before the files it holds writes for are
 * read, stat'ed or closed. */
const iop_module iop_behind_module = {
    .name = "write_behind",
    .init = behind_init,
    .exit = fence_all,
    .exec = behind_wait_quietly,
    .before_fork = before_fork,
    .after_fork = child_after_fork,
    .fence = behind_fence,
    .summary = behind_summary,
};
