/* Requests on both sides of direct I/O's alignment, for [posix] direct.
 *
 *     direct_align DIR [refuse]
 *
 * Each request is a pwrite of a pattern and a pread of it back, on a file
 * of its own (DIR/NAME.bin, so that what one request does to the file's
 * O_DIRECT twin cannot change the next): its length, its offset or its
 * buffer's address is 4096-aligned or one byte off on either side.  One
 * line per request: what pwrite and pread returned, errno, whether the
 * bytes read are the bytes written, and the file's size and checksum; the
 * same with and without the runtime.  The first line says whether the file
 * system takes O_DIRECT opens at all.
 *
 * With "refuse", a seccomp filter makes pread64 and pwrite64 on descriptors
 * from 64 up fail with EINVAL, as a file system that takes O_DIRECT opens
 * but refuses the requests answers: the runtime's twin gets such a high
 * number, the program's own descriptors are low.  Exit status 4: no
 * seccomp filter can be installed here. */
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
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define A 4096

static const struct {
    const char *name;
    long long off;
    size_t len, shift; /* shift: the buffer's distance from a 4096 boundary */
} requests[] = {
    {"len-4095", 0, 4095, 0},      {"len-4096", 0, 4096, 0},     {"len-4097", 0, 4097, 0},
    {"len-4608", 0, 4608, 0},      {"len-8192", 0, 8192, 0},     {"off-4095", 4095, 4096, 0},
    {"off-4096", 4096, 4096, 0},   {"off-4097", 4097, 4096, 0},  {"buf-1", 0, 4096, 1},
    {"buf-4095", 0, 4096, 4095},   {"buf-4096", 0, 4096, A},     {"all-off", 4097, 4095, 1},
};

static int refuse_high_descriptors(void) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pwrite64, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pread64, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 64, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0 ? -1 : 0;
}

/* The file's bytes, read with raw system calls: the runtime sees only the
 * requests themselves. */
static uint64_t sum_of(const char *path, long long *n) {
    uint64_t h = 1469598103934665603ULL;
    *n = 0;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY);
    if (fd < 0) return 0;
    static unsigned char b[65536];
    long r;
    while ((r = syscall(SYS_read, fd, b, sizeof b)) > 0) {
        for (long i = 0; i < r; i++) h = (h ^ b[i]) * 1099511628211ULL;
        *n += r;
    }
    syscall(SYS_close, fd);
    return h;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: direct_align DIR [refuse]\n");
        return 2;
    }
    if (argc > 2 && !strcmp(argv[2], "refuse") && refuse_high_descriptors() != 0) {
        perror("seccomp");
        return 4;
    }
    /* Whether the file system takes O_DIRECT opens (raw calls: not a request
     * of the program's the runtime would see). */
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/probe", argv[1]);
    long pfd = syscall(SYS_openat, AT_FDCWD, probe, O_RDWR | O_CREAT | O_DIRECT, 0644);
    printf("O_DIRECT open: %s\n", pfd >= 0 ? "accepted" : strerror(errno));
    if (pfd >= 0) syscall(SYS_close, pfd);
    syscall(SYS_unlinkat, AT_FDCWD, probe, 0);
    char *out, *in;
    if (posix_memalign((void **)&out, A, 4 * A) || posix_memalign((void **)&in, A, 4 * A)) return 1;
    for (size_t i = 0; i < 4 * A; i++) out[i] = (char)('a' + (i * 7 + i / 61) % 26);
    for (size_t k = 0; k < sizeof requests / sizeof requests[0]; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.bin", argv[1], requests[k].name);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) {
            printf("%s: open: %s\n", requests[k].name, strerror(errno));
            continue;
        }
        size_t n = requests[k].len, s = requests[k].shift;
        errno = 0;
        ssize_t w = pwrite(fd, out + s, n, requests[k].off);
        int we = errno;
        memset(in, 0, 4 * A);
        errno = 0;
        ssize_t r = pread(fd, in + s, n, requests[k].off);
        int re = errno;
        close(fd);
        long long size;
        uint64_t h = sum_of(path, &size);
        printf("%-9s pwrite %zd errno %d, pread %zd errno %d, %s, %lld bytes sum %016llx\n",
               requests[k].name, w, we, r, re,
               r == (ssize_t)n && !memcmp(in + s, out + s, n) ? "same bytes" : "DIFFERENT bytes",
               size, (unsigned long long)h);
    }
    return 0;
}
