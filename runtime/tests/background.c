/* Writes for the background-record tests: ``background DIR MODE STEPS``.
 * Each step writes 256 KiB with write() and 4 KiB with pwrite() at offset 0,
 * then, by MODE: "compute" spins 30 ms (the thread has time to write behind
 * it), "sync" calls fsync at once (the program waits for every write).
 * Prints the bytes of the file at the end. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s DIR compute|sync STEPS\n", argv[0]);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/steps.dat", argv[1]);
    int steps = atoi(argv[3]), compute = !strcmp(argv[2], "compute");
    static char buf[256 << 10];
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0) return perror("open"), 1;
    volatile double sink = 0;
    for (int s = 0; s < steps; s++) {
        memset(buf, 'a' + s % 26, sizeof buf);
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) return perror("write"), 1;
        if (pwrite(fd, buf, 4096, 0) != 4096) return perror("pwrite"), 1;
        if (compute) {
            double t = now();
            while (now() - t < 0.03) sink += 1.0;
        } else if (fsync(fd) != 0) {
            return perror("fsync"), 1;
        }
    }
    if (fsync(fd) != 0 || close(fd) != 0) return perror("fsync/close"), 1;
    struct stat sb;
    if (stat(path, &sb) != 0) return perror("stat"), 1;
    printf("%lld bytes\n", (long long)sb.st_size);
    return 0;
}
