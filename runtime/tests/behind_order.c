/* Writes that bypass write-behind's queue land after the file's queued ones.
 *
 *     behind_order CASE DIR
 *
 * The program makes 16 small pwrites of one pattern over the first 64 KiB
 * of DIR/order.dat (write-behind queues them), then one write of another
 * pattern over the same bytes that cannot be queued, and prints the file's
 * size and checksum.  Without the runtime the second pattern is what the
 * file holds; with it too, if and only if that write waited for the queued
 * ones.  CASE names the write that is not queued:
 *
 *   large   a pwrite larger than the buffer (IOPILOT_ASYNC_MAX_BYTES=64k)
 *   full    a pwrite that finds the buffer full (IOPILOT_ASYNC_MAX_BYTES=64k)
 *   sync    a pwrite on a second descriptor opened with O_SYNC
 *   odirect a pwrite on a second descriptor opened with O_DIRECT (aligned)
 *   writev  a vector write on the same descriptor
 *   fork    none: a child forked now reads the file (fork waits for every
 *           queued write, so the child sees them)
 *   stall   none: abort() while the thread is held, which it stays until the
 *           program is gone (the runtime's wait for the queue gives up once
 *           the thread has made no progress for 2 s, and the signal ends
 *           the program)
 *   exec    none: the program becomes a shell that prints the file's size
 *           (exec waits for every queued write: the thread is gone after it)
 *   vfork   none: a child made by vfork() becomes that shell (the same wait,
 *           in the child, while the parent is suspended in vfork)
 *   paths   none: stat() of DIR (a directory: no file with queued writes,
 *           nothing to wait for), then of a link that loops (which file it
 *           names cannot be told: every queued write lands first); after
 *           each, the file's size as the kernel has it, through a raw
 *           system call the runtime does not see
 *
 * So that the order never depends on timing, the runtime's background
 * thread ("iopilot-behind") is held while the writes are queued: a child
 * process stops it with ptrace (PTRACE_SEIZE + PTRACE_INTERRUPT, which
 * stops that thread alone) and lets it go only once the program's main
 * thread either waits in a futex (the runtime waiting for its queue) or has
 * made the write (the queue was not waited for: the queued writes then land last and
 * the file holds the wrong bytes).  Without the runtime there is no such
 * thread and nothing is held.  Exit status 77: ptrace is not allowed here. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SMALL 4096
#define NSMALL 16
#define SPAN (SMALL * NSMALL) /* 64 KiB: the first pattern's bytes */

static char path[4096];

/* The first line of /proc/PID/task/TID/syscall: the system call number the
 * thread is blocked in, -1 when running or unknown. */
static long blocked_in(pid_t pid, pid_t tid) {
    char name[128], text[64] = "";
    snprintf(name, sizeof name, "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
    int fd = open(name, O_RDONLY);
    if (fd < 0) return -1;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return -1;
    text[n] = 0;
    char *end;
    long nr = strtol(text, &end, 10);
    return end == text ? -1 : nr;
}

/* Whether the main thread of ``pid`` waits: in a futex (for the queue) or
 * in vfork (for its child, which waits for the queue before it execs). */
static int waiting(pid_t pid) {
    long nr = blocked_in(pid, pid);
#ifdef SYS_vfork
    if (nr == SYS_vfork) return 1;
#endif
    return nr == SYS_futex || nr == SYS_clone;
}

static void nap(void) {
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* The runtime's background thread, 0 when there is none (untraced).  It
 * starts before main but names itself when it first runs: while there is
 * another thread, look again until it has its name. */
static pid_t behind_thread(void) {
    for (int tries = 0; tries < 10000; tries++) {
        DIR *d = opendir("/proc/self/task");
        if (!d) return 0;
        pid_t found = 0;
        int threads = 0;
        struct dirent *e;
        while (!found && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            threads++;
            char name[300], comm[32] = "";
            snprintf(name, sizeof name, "/proc/self/task/%s/comm", e->d_name);
            int fd = open(name, O_RDONLY);
            if (fd < 0) continue;
            ssize_t n = read(fd, comm, sizeof comm - 1);
            close(fd);
            if (n > 0 && !strncmp(comm, "iopilot-behind", 14)) found = (pid_t)atoi(e->d_name);
        }
        closedir(d);
        if (found || threads < 2) return found;
        nap();
    }
    return 0;
}

/* What the program and the holder say to each other: in shared memory,
 * since a write to a pipe would itself wait for the queue (the runtime
 * lands pending writes before the program tells another process anything). */
enum { NOTHING, HELD, REFUSED, GO, DONE };
typedef struct {
    volatile int state;
    volatile int error;
} board;

static void set(board *b, int state) { __atomic_store_n(&b->state, state, __ATOMIC_SEQ_CST); }
static int get(board *b) { return __atomic_load_n(&b->state, __ATOMIC_SEQ_CST); }

/* The holder: stops ``tid`` of ``parent`` once it is idle, says HELD, and
 * after GO lets it go when the parent's main thread blocks in a futex or
 * says DONE (or after a minute, or when the parent is gone: nothing waits
 * for ever). */
static void holder(pid_t parent, pid_t tid, board *b) {
    close(STDOUT_FILENO); /* the program's output ends with the program */
    close(STDERR_FILENO);
    time_t give_up = time(NULL) + 60;
    while (blocked_in(parent, tid) != SYS_futex && time(NULL) < give_up)
        nap(); /* idle: holds no lock of the runtime */
    if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0 || ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) {
        b->error = errno;
        set(b, REFUSED);
        _exit(1);
    }
    int st;
    if (waitpid(tid, &st, __WALL) != tid) {
        b->error = errno;
        set(b, REFUSED);
        _exit(1);
    }
    set(b, HELD);
    /* DONE: the write was made without waiting; a futex: waiting for the
     * queue; vfork: its child waits (the parent is suspended until it execs) */
    while ((get(b) < GO || (get(b) < DONE && !waiting(parent))) && getppid() == parent &&
           time(NULL) < give_up)
        nap();
    ptrace(PTRACE_DETACH, tid, 0, 0);
    _exit(0);
}

/* Hold the background thread, if there is one: the holder's pid, 0 when
 * there is no thread (untraced), -1 on failure. */
static pid_t hold_thread(board *b) {
    pid_t tid = behind_thread();
    if (!tid) return 0;
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* for Yama; fails harmlessly without */
    pid_t parent = getpid();
    pid_t c = fork();
    if (c < 0) return -1;
    if (c == 0) holder(parent, tid, b);
    while (get(b) == NOTHING) nap();
    if (get(b) == REFUSED) {
        fprintf(stderr, "behind_order: cannot stop the write-behind thread: ptrace: %s\n",
                strerror(b->error));
        waitpid(c, NULL, 0);
        exit(77);
    }
    fprintf(stderr, "write-behind thread held\n");
    return c;
}

static void fill(char *b, size_t n, char first, int step) {
    for (size_t i = 0; i < n; i++) b[i] = (char)(first + (i / 512 * step) % 26);
}

static void show(void) {
    int fd = open(path, O_RDONLY);
    static unsigned char b[1 << 20];
    uint64_t h = 1469598103934665603ULL;
    long long n = 0;
    ssize_t r;
    while ((r = read(fd, b, sizeof b)) > 0) {
        for (ssize_t i = 0; i < r; i++) h = (h ^ b[i]) * 1099511628211ULL;
        n += r;
    }
    close(fd);
    printf("order.dat: %lld bytes sum %016llx\n", n, (unsigned long long)h);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: behind_order large|full|sync|odirect|writev|fork|exec|vfork|stall|paths DIR\n");
        return 2;
    }
    const char *c = argv[1];
    snprintf(path, sizeof path, "%s/order.dat", argv[2]);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    int other = -1;
    if (!strcmp(c, "sync")) other = open(path, O_WRONLY | O_SYNC);
    if (!strcmp(c, "odirect")) other = open(path, O_WRONLY | O_DIRECT);
    if (fd < 0 || ((!strcmp(c, "sync") || !strcmp(c, "odirect")) && other < 0)) {
        printf("open: %s\n", strerror(errno));
        return 1;
    }
    char *big;
    if (posix_memalign((void **)&big, 4096, 2 * SPAN) != 0) return 1;
    char small[SMALL];
    fill(small, sizeof small, 'a', 1);
    fill(big, 2 * SPAN, 'A', 7);

    board *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) return 1;
    pid_t holding = hold_thread(b);
    if (holding < 0) {
        printf("could not hold the write-behind thread\n");
        return 1;
    }
    for (int i = 0; i < NSMALL; i++) {
        ssize_t r = pwrite(fd, small, SMALL, (off_t)i * SMALL);
        if (r != SMALL) printf("small pwrite %d: %zd\n", i, r);
    }
    if (!strcmp(c, "stall")) abort();
    set(b, GO);
    ssize_t r = -1;
    if (!strcmp(c, "large")) {
        r = pwrite(fd, big, 2 * SPAN, 0);
    } else if (!strcmp(c, "full")) {
        r = pwrite(fd, big, SMALL, 0);
    } else if (!strcmp(c, "sync") || !strcmp(c, "odirect")) {
        r = pwrite(other, big, SPAN, 0);
    } else if (!strcmp(c, "fork")) {
        fflush(stdout);
        pid_t k = fork();
        if (k == 0) {
            show();
            fflush(stdout);
            _exit(0);
        }
        r = k > 0 && waitpid(k, NULL, 0) == k ? 0 : -1;

    } else if (!strcmp(c, "exec") || !strcmp(c, "vfork")) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "echo %s: $(wc -c < '%s') bytes seen", c, path);
        fflush(stdout);
        pid_t k = !strcmp(c, "vfork") ? vfork() : 0;
        if (k == 0) {
            execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
            _exit(127);
        }
        r = k > 0 && waitpid(k, NULL, 0) == k ? 0 : -1;
    } else if (!strcmp(c, "paths")) {
        char loop[4200];
        snprintf(loop, sizeof loop, "%s/loop", argv[2]);
        struct stat sb, now;
        if (symlink("loop", loop) != 0) return 1;
        int r1 = stat(argv[2], &sb);
        long after_dir = syscall(SYS_fstat, fd, &now) == 0 ? (long)now.st_size : -1;
        int r2 = stat(loop, &sb);
        int e2 = errno;
        long after_loop = syscall(SYS_fstat, fd, &now) == 0 ? (long)now.st_size : -1;
        printf("directory %d: %ld bytes landed; loop %d %s: %ld bytes landed\n", r1, after_dir,
               r2, strerror(e2), after_loop);
        r = 0;
    } else if (!strcmp(c, "writev")) {
        struct iovec v[2] = {{big, SPAN / 2}, {big + SPAN / 2, SPAN / 2}};
        if (lseek(fd, 0, SEEK_SET) == 0) r = writev(fd, v, 2);
    } else {
        fprintf(stderr, "behind_order: unknown case %s\n", c);
        return 2;
    }
    int e = errno;
    set(b, DONE);
    if (holding) waitpid(holding, NULL, 0);
    printf("%s: %zd%s%s\n", c, r, r < 0 ? " " : "", r < 0 ? strerror(e) : "");
    if (other >= 0) close(other);
    close(fd);
    show();
    return 0;
}
