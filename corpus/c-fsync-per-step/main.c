/* Mistake: a checkpoint-like output file gets one 32 KiB record per step,
 * and fsync is called after every write, so each step waits until its data
 * is on the disk.
 * Fix: write every step and fsync once at the end (the file is just as
 * durable when the program ends; a crash loses only the unsynced steps).
 * The data written is the same in both modes.
 * Usage: prog mistake|fixed   (writes steps.dat in the current directory) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STEPS 2000
#define VALUES (4 * 1024) /* 32 KiB of doubles per step */

static void write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            perror("write");
            exit(1);
        }
        p += w;
        n -= (size_t)w;
    }
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "mistake") && strcmp(argv[1], "fixed"))) {
        fprintf(stderr, "usage: %s mistake|fixed\n", argv[0]);
        return 2;
    }
    int mistake = !strcmp(argv[1], "mistake");
    double *v = malloc(sizeof(double) * VALUES);
    int fd = open("steps.dat", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror("open");
        return 1;
    }
    for (int step = 0; step < STEPS; step++) {
        for (int i = 0; i < VALUES; i++)
            v[i] = step * 0.5 + i * 1e-3;
        write_all(fd, v, sizeof(double) * VALUES);
        if (mistake && fsync(fd) != 0) {
            perror("fsync");
            return 1;
        }
    }
    if (fsync(fd) != 0) {
        perror("fsync");
        return 1;
    }
    close(fd);
    free(v);
    printf("wrote %d steps of %d doubles\n", STEPS, VALUES);
    return 0;
}
