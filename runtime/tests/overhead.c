/* Overhead probes for `iopilot bench runtime`.
 *   overhead tiny N [PATH]      N one-byte writes to /dev/null (or to PATH,
 *                               a file the tracer follows); prints seconds
 *   overhead sites N [PATH]     the same from 4,096 call sites in turn (each
 *                               call from another site than the last)
 *   overhead kernel PATH MiB KiB  write PATH in KiB-sized blocks, fsync, read it
 *                               back and check it; prints seconds */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "tiny")) {
        long n = atol(argv[2]);
        int fd = open(argc > 3 ? argv[3] : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
        char c = 'x';
        double t = now();
        for (long i = 0; i < n; i++)
            if (write(fd, &c, 1) != 1) return 1;
        t = now() - t;
        close(fd);
        printf("%.9f\n", t);
        return 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "sites")) {
        long n = atol(argv[2]) / 4096;
        int fd = open(argc > 3 ? argv[3] : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
        char c = 'x';
#define W1 if (write(fd, &c, 1) != 1) return 1;
#define W4 W1 W1 W1 W1
#define W16 W4 W4 W4 W4
#define W64 W16 W16 W16 W16
#define W256 W64 W64 W64 W64
#define W1024 W256 W256 W256 W256
        double t = now();
        for (long i = 0; i < n; i++) {
            W1024 W1024 W1024 W1024
        }
        t = now() - t;
        close(fd);
        printf("%.9f\n", t);
        return 0;
    }
    if (argc >= 5 && !strcmp(argv[1], "kernel")) {
        long mib = atol(argv[3]), kib = atol(argv[4]);
        size_t bs = (size_t)kib * 1024;
        long blocks = mib * 1024 / kib;
        char *buf = malloc(bs), *back = malloc(bs);
        if (!buf || !back) return 1;
        double t = now();
        int fd = open(argv[2], O_CREAT | O_TRUNC | O_WRONLY, 0644);
        for (long i = 0; i < blocks; i++) {
            memset(buf, (int)(i & 0xff), bs);
            if (write(fd, buf, bs) != (ssize_t)bs) return 2;
        }
        fsync(fd);
        close(fd);
        fd = open(argv[2], O_RDONLY);
        for (long i = 0; i < blocks; i++) {
            if (read(fd, back, bs) != (ssize_t)bs) return 3;
            if (back[0] != (char)(i & 0xff) || back[bs - 1] != (char)(i & 0xff)) return 4;
        }
        close(fd);
        t = now() - t;
        unlink(argv[2]);
        printf("%.9f\n", t);
        return 0;
    }
    fprintf(stderr, "usage: overhead tiny N | overhead kernel PATH MiB KiB\n");
    return 2;
}
