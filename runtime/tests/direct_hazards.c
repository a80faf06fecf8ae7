/* What a program may do to a descriptor that the [posix] direct setting
 * of the iopilot runtime shadows with an O_DIRECT twin.
 *
 *   direct_hazards CASE DIR
 *
 * CASE is one of
 *   reopen-other   close the descriptor and open another file at its number
 *                  with raw system calls, then write 1 MiB aligned
 *   reopen-rdonly  the same, re-opening the same file read-only
 *   reopen-closed  close it with a raw system call and write to the number
 *   setfl          fcntl(F_SETFL) adds O_APPEND, later O_DIRECT
 *   efault-write   large aligned writes from memory that is not there:
 *                  unmapped, partly unmapped, (void *)1, PROT_NONE
 *   efault-read    large aligned reads into memory that is not there or is
 *                  read-only
 *   no-vm-copy     efault-write and efault-read in a process whose seccomp
 *                  filter refuses process_vm_readv/writev (set up here, then
 *                  the program executes itself)
 *
 * stdout: one line per call (return value, errno, position afterwards) and
 * the size and checksum of each file; the same with and without the
 * setting.  A signal that kills the program changes its exit status.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

static char dir[4000];

static const char *at(const char *name) {
    static char buf[2][4096];
    static int k;
    k ^= 1;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void fill(char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (char)((i * 131u + seed) & 0xff);
}

static void show(const char *what, int fd, ssize_t r, int e) {
    printf("%-28s -> %zd errno %d position %lld\n", what, r, r < 0 ? e : 0,
           (long long)lseek(fd, 0, SEEK_CUR));
    fflush(stdout);
}

#define CALL(what, fd, expr)          \
    do {                              \
        errno = 0;                    \
        ssize_t r_ = (expr);          \
        show(what, fd, r_, errno);    \
    } while (0)

static void summary(const char *name) {
    int fd = open(at(name), O_RDONLY);
    if (fd < 0) {
        printf("%s: absent\n", name);
        return;
    }
    uint64_t sum = 1469598103934665603ULL, total = 0;
    static char buf[1 << 16];
    ssize_t got;
    while ((got = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < got; i++) sum = (sum ^ (unsigned char)buf[i]) * 1099511628211ULL;
        total += (uint64_t)got;
    }
    close(fd);
    printf("%s: %llu bytes, fnv %016llx\n", name, (unsigned long long)total,
           (unsigned long long)sum);
}

static char *aligned_block(size_t n, unsigned seed) {
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) exit(3);
    fill(p, n, seed);
    return p;
}

static int fresh(const char *name, int flags) {
    int fd = open(at(name), O_CREAT | O_TRUNC | flags, 0644);
    if (fd < 0) exit(3);
    return fd;
}

static void reopen(const char *how) {
    char *data = aligned_block(MiB, 7);
    int fd = fresh("old.bin", O_RDWR);
    CALL("write 4k", fd, write(fd, data, 4096));
    syscall(SYS_close, fd);
    if (!strcmp(how, "reopen-closed")) {
        CALL("write 1m closed", fd, write(fd, data, MiB));
        CALL("pwrite 1m closed", fd, pwrite(fd, data, MiB, MiB));
        CALL("read 1m closed", fd, read(fd, data, MiB));
    } else {
        int other = !strcmp(how, "reopen-other");
        int again = (int)syscall(SYS_openat, AT_FDCWD, at(other ? "new.bin" : "old.bin"),
                                 other ? O_RDWR | O_CREAT | O_TRUNC : O_RDONLY, 0644);
        printf("same number: %d\n", again == fd);
        CALL("write 1m", fd, write(fd, data, MiB));
        CALL("pwrite 1m at 1m", fd, pwrite(fd, data, MiB, MiB));
        CALL("lseek 0", fd, lseek(fd, 0, SEEK_SET));
        CALL("read 1m", fd, read(fd, data, MiB));
        CALL("pread 1m at 1m", fd, pread(fd, data, MiB, MiB));
    }
    close(fd);
    summary("old.bin");
    summary("new.bin");
}

static void setfl(void) {
    char *data = aligned_block(2 * MiB, 9);
    int fd = fresh("data.bin", O_RDWR);
    CALL("write 4k", fd, write(fd, data, 4096));
    CALL("lseek 0", fd, lseek(fd, 0, SEEK_SET));
    fcntl(fd, F_SETFL, O_APPEND);
    CALL("append write 1m", fd, write(fd, data, MiB));
    CALL("append pwrite 1m at 0", fd, pwrite(fd, data + MiB, MiB, 0));
    fcntl(fd, F_SETFL, 0);
    CALL("lseek 8m", fd, lseek(fd, 8 * MiB, SEEK_SET));
    CALL("write 1m", fd, write(fd, data, MiB));
    if (fcntl(fd, F_SETFL, O_DIRECT) == 0) { /* the program's own direct I/O: its rules */
        CALL("O_DIRECT write misaligned", fd, write(fd, data + 16, MiB));
        CALL("O_DIRECT pread misaligned", fd, pread(fd, data + 16, MiB, 0));
        CALL("O_DIRECT write aligned", fd, write(fd, data, MiB));
    } else
        printf("no O_DIRECT here\n");
    close(fd);
    summary("data.bin");
}

/* Memory that is not there, in every shape the bounce buffer meets.  Each
 * buffer is made right before its call (an address range given back early
 * could be handed out again). */
enum { GONE, PART, NONE, ONE, RDONLY };

static char *bad_buffer(int kind, char **base, size_t *len) {
    *len = kind == PART ? 12 * MiB : 2 * MiB;
    *base = kind == ONE ? NULL : aligned_block(*len, 2);
    if (kind == GONE) munmap(*base, *len);
    if (kind == PART) munmap(*base + 9 * MiB, 3 * MiB); /* 9 MiB there, the rest not */
    if (kind == NONE) mprotect(*base, *len, PROT_NONE);
    if (kind == RDONLY) mprotect(*base, *len, PROT_READ);
    volatile uintptr_t one = 1;
    return kind == ONE ? (char *)one : *base;
}

static void efault(int reads) {
    char *data = aligned_block(12 * MiB, 11);
    int fd = fresh("data.bin", O_RDWR);
    CALL("write 10m", fd, write(fd, data, 10 * MiB));
    CALL("good misaligned write 1m", fd, pwrite(fd, data + 16, MiB, 0));
    CALL("good misaligned read 1m", fd, pread(fd, data + 16, MiB, 0));
    CALL("lseek 0", fd, lseek(fd, 0, SEEK_SET));
    fsync(fd);

    struct {
        const char *what;
        int kind;
        size_t skip, n;
    } cases[] = {
        {"unmapped aligned 1m", GONE, 0, MiB},
        {"unmapped misaligned 1m", GONE, 16, MiB},
        {"pointer 1, 1m", ONE, 0, MiB},
        {"prot_none misaligned 1m", NONE, 8, MiB},
        {"part misaligned 9m", PART, 16, 9 * MiB},
        {"part aligned 10m", PART, 0, 10 * MiB},
        {"part misaligned 10m", PART, 16, 10 * MiB},
        {"part at 4m misaligned 6m", PART, 4 * MiB + 32, 6 * MiB},
        {"read-only misaligned 1m", RDONLY, 64, MiB},
        {"read-only aligned 1m", RDONLY, 0, MiB},
    };
    char name[96];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int positioned = 0; positioned < 2; positioned++) {
            char *base;
            size_t len;
            char *buf = bad_buffer(cases[i].kind, &base, &len) + cases[i].skip;
            size_t n = cases[i].n;
            snprintf(name, sizeof name, "%s%s %s", positioned ? "p" : "", reads ? "read" : "write",
                     cases[i].what);
            if (!positioned) {
                CALL("lseek 1m", fd, lseek(fd, MiB, SEEK_SET));
                if (reads)
                    CALL(name, fd, read(fd, buf, n));
                else
                    CALL(name, fd, write(fd, buf, n));
            } else if (reads)
                CALL(name, fd, pread(fd, buf, n, 0));
            else
                CALL(name, fd, pwrite(fd, buf, n, 2 * MiB));
            if (reads && cases[i].kind == PART) { /* what landed in the part that is there */
                uint64_t sum = 1469598103934665603ULL;
                for (size_t j = 0; j < 9 * MiB; j++)
                    sum = (sum ^ (unsigned char)base[j]) * 1099511628211ULL;
                printf("  buffer: fnv %016llx\n", (unsigned long long)sum);
            }
            if (base) munmap(base, len);
        }
    }
    close(fd);
    summary("data.bin");
}

/* Refuse process_vm_readv and process_vm_writev with EPERM, as a
 * container's seccomp profile may. */
static int refuse_vm_copy(void) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s CASE DIR\n", argv[0]);
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[2]);
    const char *c = argv[1];
    if (!strncmp(c, "reopen-", 7))
        reopen(c);
    else if (!strcmp(c, "setfl"))
        setfl();
    else if (!strcmp(c, "efault-write"))
        efault(0);
    else if (!strcmp(c, "efault-read"))
        efault(1);
    else if (!strcmp(c, "no-vm-copy")) {
        if (refuse_vm_copy() != 0) {
            perror("seccomp");
            return 4;
        }
        char *args[] = {argv[0], "no-vm-copy-refused", argv[2], NULL};
        execv("/proc/self/exe", args);
        return 5;
    } else if (!strcmp(c, "no-vm-copy-refused")) {
        char probe;
        struct iovec l = {&probe, 1}, r = {dir, 1};
        printf("process_vm_readv refused: %d\n",
               syscall(SYS_process_vm_readv, getpid(), &l, 1, &r, 1, 0) < 0);
        efault(0);
        efault(1);
    } else
        return 2;
    return 0;
}
