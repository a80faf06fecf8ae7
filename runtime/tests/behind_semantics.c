/* What a program sees of its own writes, case by case: run plain, traced,
 * with write-behind and with direct I/O, the output must be the same.
 *
 *     behind_semantics CASE DIR
 *
 * Every line printed is deterministic (sizes, return values, errno names,
 * positions, checksums); nothing depends on time or process ids. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (1 << 20)

static char dir[2048];
static char *at(const char *name) {
    static char paths[4][4096];
    static int k;
    char *p = paths[k++ % 4];
    snprintf(p, 4096, "%s/%s", dir, name);
    return p;
}

static long long size_of(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

static uint64_t sum_of(const char *path, long long *n) {
    uint64_t h = 1469598103934665603ULL;
    *n = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    static unsigned char b[65536];
    ssize_t r;
    while ((r = read(fd, b, sizeof b)) > 0) {
        for (ssize_t i = 0; i < r; i++) h = (h ^ b[i]) * 1099511628211ULL;
        *n += r;
    }
    close(fd);
    return h;
}

static void show(const char *label, const char *path) {
    long long n;
    uint64_t h = sum_of(path, &n);
    printf("%s: %lld bytes sum %016llx\n", label, n, (unsigned long long)h);
}

/* ``total`` bytes in ``chunk`` writes of a pattern that names the offset. */
static void write_lots(int fd, long long total, int chunk) {
    char *b = malloc((size_t)chunk);
    for (long long done = 0; done < total; done += chunk) {
        for (int i = 0; i < chunk; i++) b[i] = (char)('a' + (done / chunk + i) % 26);
        if (write(fd, b, (size_t)chunk) != chunk) {
            printf("write failed at %lld: %s\n", done, strerror(errno));
            break;
        }
    }
    free(b);
}

static const char *err_name(int e) {
    switch (e) {
    case 0: return "0";
    case EFAULT: return "EFAULT";
    case EFBIG: return "EFBIG";
    case ENOSPC: return "ENOSPC";
    case EBADF: return "EBADF";
    default: return "other";
    }
}

/* A child that does not share our memory, started by clone() or by the
 * system call, looks at the file its parent just wrote. */
static int look(void *path) {
    struct stat sb;
    int r = stat((const char *)path, &sb);
    int fd = open((const char *)path, O_WRONLY | O_APPEND);
    if (fd >= 0) {
        (void)write(fd, "child", 5);
        close(fd);
    }
    printf("child sees %lld\n", r == 0 ? (long long)sb.st_size : -1LL);
    fflush(stdout);
    return 0;
}

static void case_clone(void) {
    char *path = at("cloned.dat");
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write_lots(fd, 4 * MIB, 4096);
    size_t stack_size = 1 << 20;
    char *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    pid_t pid = clone(look, stack + stack_size, SIGCHLD, path);
    int status;
    waitpid(pid, &status, 0);
    printf("clone child exit %d\n", WEXITSTATUS(status));
    write_lots(fd, 4 * MIB, 4096);
    fflush(stdout);
    long r = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (r == 0) {
        look(path);
        write_lots(fd, 1 * MIB, 4096); /* the child's own writes, through the shared description */
        _exit(0);
    }
    waitpid((pid_t)r, &status, 0);
    printf("raw clone child exit %d\n", WEXITSTATUS(status));
    close(fd);
    printf("size %lld\n", size_of(path));
}

/* sym/../f.dat and f.dat: two files (the link leads elsewhere). */
static void case_dotdot(void) {
    mkdir(at("real"), 0755);
    mkdir(at("real/sub"), 0755);
    if (symlink(at("real/sub"), at("sym")) != 0) printf("symlink failed\n");
    int a = open(at("sym/../f.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    int b = open(at("f.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write_lots(a, 2 * MIB, 4096);
    write_lots(b, 1 * MIB, 8192);
    printf("sizes %lld %lld\n", size_of(at("real/f.dat")), size_of(at("f.dat")));
    close(a);
    close(b);
    show("real/f.dat", at("real/f.dat"));
    show("f.dat", at("f.dat"));
}

/* A name unlinked with writes pending, then made again. */
static void case_unlink(void) {
    int a = open(at("u.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write_lots(a, 8 * MIB, 4096);
    unlink(at("u.dat"));
    int b = open(at("u.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    printf("write %zd\n", write(b, "0123456789", 10));
    close(b);
    printf("new file %lld\n", size_of(at("u.dat")));
    write_lots(a, 1 * MIB, 4096);
    struct stat sb;
    fstat(a, &sb);
    printf("old file %lld links %ld\n", (long long)sb.st_size, (long)sb.st_nlink);
    close(a);
    show("u.dat", at("u.dat"));
}

/* Other names of one file: an O_TMPFILE linked in, and hard links. */
static void case_links(void) {
    int t = open(dir, O_TMPFILE | O_WRONLY, 0644);
    if (t < 0) {
        printf("no O_TMPFILE here\n");
    } else {
        write_lots(t, 8 * MIB, 4096);
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", t);
        int r = linkat(AT_FDCWD, proc, AT_FDCWD, at("tmp.dat"), AT_SYMLINK_FOLLOW);
        printf("linkat %d size %lld\n", r, size_of(at("tmp.dat")));
        write_lots(t, 1 * MIB, 4096);
        printf("after more %lld\n", size_of(at("tmp.dat")));
        close(t);
    }
    /* linked before the writes */
    int fd = open(at("h.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    link(at("h.dat"), at("h2.dat"));
    close(fd);
    fd = open(at("h.dat"), O_WRONLY);
    write_lots(fd, 8 * MIB, 65536);
    printf("through the link %lld\n", size_of(at("h2.dat")));
    close(fd);
    /* linked while writes are pending */
    fd = open(at("l.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write_lots(fd, 8 * MIB, 4096);
    link(at("l.dat"), at("l2.dat"));
    printf("new link %lld\n", size_of(at("l2.dat")));
    write_lots(fd, 1 * MIB, 4096);
    printf("new link after more %lld\n", size_of(at("l2.dat")));
    close(fd);
}

/* statx and fstatat by a directory descriptor see pending writes. */
static void case_statx(void) {
    int fd = open(at("x.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write_lots(fd, 4 * MIB, 4096);
    struct statx sx;
    int r = statx(AT_FDCWD, at("x.dat"), 0, STATX_SIZE, &sx);
    printf("statx path %d %lld\n", r, (long long)sx.stx_size);
    write_lots(fd, 1 * MIB, 4096);
    r = statx(fd, "", AT_EMPTY_PATH, STATX_SIZE, &sx);
    printf("statx fd %d %lld\n", r, (long long)sx.stx_size);
    write_lots(fd, 1 * MIB, 4096);
    int d = open(dir, O_RDONLY | O_DIRECTORY);
    struct stat sb;
    r = fstatat(d, "x.dat", &sb, 0);
    printf("fstatat dirfd %d %lld\n", r, (long long)sb.st_size);
    close(d);
    close(fd);
}

/* Another process is told through a pipe that the data is there. */
static void case_pipe(void) {
    int p[2];
    if (pipe(p) != 0) return;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[1]);
        char c;
        (void)read(p[0], &c, 1);
        printf("reader sees %lld\n", size_of(at("p.dat")));
        fflush(stdout);
        _exit(0);
    }
    close(p[0]);
    int fd = open(at("p.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write_lots(fd, 64 * MIB, 4096);
    (void)write(p[1], "!", 1);
    int status;
    waitpid(pid, &status, 0);
    close(fd);
}

/* Writes from memory that cannot be read. */
static void case_efault(void) {
    int fd = open(at("e.dat"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    write_lots(fd, 8192, 4096);
    long page = sysconf(_SC_PAGESIZE);
    char *two = mmap(NULL, (size_t)(2 * MIB), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    memset(two, 'z', (size_t)MIB);
    munmap(two + MIB, (size_t)MIB);
    errno = 0;
    char *volatile bad = (char *)16; /* hidden from the compiler's checks */
    ssize_t r = write(fd, bad, 4096);
    printf("bad pointer: %zd %s pos %lld\n", r, err_name(errno), (long long)lseek(fd, 0, SEEK_CUR));
    errno = 0;
    r = write(fd, two + MIB - page, (size_t)(2 * page));
    printf("half readable: %zd %s pos %lld\n", r, err_name(errno),
           (long long)lseek(fd, 0, SEEK_CUR));
    errno = 0;
    r = pwrite(fd, two + MIB, (size_t)MIB, 0);
    printf("pwrite unmapped: %zd %s pos %lld\n", r, err_name(errno),
           (long long)lseek(fd, 0, SEEK_CUR));
    errno = 0;
    r = write(fd, two, (size_t)MIB); /* aligned: direct I/O may take it */
    printf("good: %zd %s pos %lld\n", r, err_name(errno), (long long)lseek(fd, 0, SEEK_CUR));
    close(fd);
    show("e.dat", at("e.dat"));
}

/* RLIMIT_FSIZE with SIGXFSZ ignored: short writes, then EFBIG. */
static void case_fsize(int die) {
    if (!die) signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {100000, 100000};
    setrlimit(RLIMIT_FSIZE, &rl);
    int fd = open(at("big.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    char *b = calloc(1, 150000);
    for (int i = 0; i < 5; i++) {
        errno = 0;
        ssize_t r = write(fd, b, 30000);
        printf("write %d: %zd %s pos %lld\n", i, r, err_name(errno),
               (long long)lseek(fd, 0, SEEK_CUR));
        fflush(stdout);
    }
    errno = 0; /* from offset 0 across the limit: the bytes below it */
    ssize_t r = pwrite(fd, b, 150000, 0);
    printf("pwrite from 0: %zd %s\n", r, err_name(errno));
    errno = 0;
    r = pwrite(fd, b, 30000, 200000);
    printf("pwrite past: %zd %s\n", r, err_name(errno));
    if (!die) { /* the file system's own limit: 2^60 bytes is past every one */
        struct rlimit none = {RLIM_INFINITY, RLIM_INFINITY};
        setrlimit(RLIMIT_FSIZE, &none);
        errno = 0;
        r = pwrite(fd, b, 4096, (off_t)1 << 60);
        printf("pwrite at 2^60: %zd %s\n", r, err_name(errno));
    }
    close(fd);
    printf("size %lld\n", size_of(at("big.dat")));
    free(b);
}

/* O_APPEND switched on with fcntl while writes are pending. */
static void case_setfl(void) {
    int fd = open(at("a.dat"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    (void)write(fd, "abcd", 4);
    (void)pwrite(fd, "efgh", 4, 4);
    (void)lseek(fd, 0, SEEK_SET);
    fcntl(fd, F_SETFL, O_APPEND);
    (void)write(fd, "ijkl", 4);
    printf("after append %lld\n", (long long)lseek(fd, 0, SEEK_CUR));
    fcntl(fd, F_SETFL, 0);
    (void)pwrite(fd, "AB", 2, 0);
    (void)write(fd, "mn", 2);
    printf("after clear %lld\n", (long long)lseek(fd, 0, SEEK_CUR));
    close(fd);
    show("a.dat", at("a.dat"));
}

/* O_APPEND set on one descriptor after writes through it were queued: the
 * background thread's duplicate shares that open file, so a descriptor of
 * the file opened later must not be deferred through it (its writes would
 * land at the end, not at their offsets). */
static void case_setfl_other(void) {
    int a = open(at("o.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write_lots(a, 64 * 1024, 4096);
    fcntl(a, F_SETFL, O_APPEND);
    int b = open(at("o.dat"), O_WRONLY);
    (void)pwrite(b, "XY", 2, 100);
    (void)write(b, "Z", 1);
    close(b);
    close(a);
    show("o.dat", at("o.dat"));
}

/* sync_file_range asked for the bytes on disk, then the process is killed. */
static void case_sync_range(void) {
    int fd = open(at("s.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write_lots(fd, 1 * MIB, 4096);
    int r = sync_file_range(fd, 0, 0,
                            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                SYNC_FILE_RANGE_WAIT_AFTER);
    printf("sync_file_range %d\n", r);
    fflush(stdout);
    raise(SIGKILL);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s CASE DIR\n", argv[0]);
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[2]);
    const char *c = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(c, "clone")) case_clone();
    else if (!strcmp(c, "dotdot")) case_dotdot();
    else if (!strcmp(c, "unlink")) case_unlink();
    else if (!strcmp(c, "links")) case_links();
    else if (!strcmp(c, "statx")) case_statx();
    else if (!strcmp(c, "pipe")) case_pipe();
    else if (!strcmp(c, "efault")) case_efault();
    else if (!strcmp(c, "fsize")) case_fsize(0);
    else if (!strcmp(c, "fsize-die")) case_fsize(1);
    else if (!strcmp(c, "setfl")) case_setfl();
    else if (!strcmp(c, "setfl-other")) case_setfl_other();
    else if (!strcmp(c, "sync-range")) case_sync_range();
    else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    return 0;
}
