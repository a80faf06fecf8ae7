/* Mistake: a 1 M-element array of doubles is written with one write()
 * call per element: 1 M system calls of 8 bytes each.
 * Fix: one write() of the whole array (8 MiB); the loop in write_all only
 * repeats it if the kernel takes fewer bytes.
 * The file written is the same in both modes.
 * Usage: prog mistake|fixed   (writes array.dat in the current directory) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N (1024 * 1024)

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
    double *a = malloc(sizeof(double) * N);
    for (size_t i = 0; i < N; i++)
        a[i] = 0.5 * (double)i;

    int fd = open("array.dat", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror("open");
        return 1;
    }
    if (mistake)
        for (size_t i = 0; i < N; i++)
            write_all(fd, &a[i], sizeof a[i]);
    else
        write_all(fd, a, sizeof(double) * N);
    close(fd);
    free(a);
    printf("wrote %d doubles\n", N);
    return 0;
}
