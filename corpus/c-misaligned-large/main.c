/* Mistake: the output file starts with a 100-byte header, and the 1 MiB
 * blocks of data follow it directly, so every block starts 100 bytes past
 * a 4 KiB boundary: each write touches one more file system block than it
 * needs, shares its first and last blocks with its neighbours (read-modify-
 * write and lock conflicts on parallel file systems), and cannot use direct
 * I/O.
 * Fix: pad the header to 4 KiB so every data block starts on a 4 KiB
 * boundary.  The header and the data are the same in both modes; only
 * their offsets differ.
 * Usage: prog mistake|fixed   (writes blocks.dat) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK (1024 * 1024)
#define NBLOCKS 256
#define HEADER 100
#define ALIGN 4096

static void pwrite_all(int fd, const void *buf, size_t n, off_t off)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, off);
        if (w < 0) {
            perror("pwrite");
            exit(1);
        }
        p += w;
        off += w;
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
    off_t data_start = mistake ? HEADER : ALIGN;

    char header[HEADER];
    memset(header, 0, sizeof header);
    snprintf(header, sizeof header, "blocks %d size %d data_start %lld\n", NBLOCKS,
             BLOCK, (long long)data_start);
    char *block = malloc(BLOCK);

    int fd = open("blocks.dat", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror("open");
        return 1;
    }
    pwrite_all(fd, header, sizeof header, 0);
    for (int b = 0; b < NBLOCKS; b++) {
        memset(block, 'A' + b % 26, BLOCK);
        pwrite_all(fd, block, BLOCK, data_start + (off_t)b * BLOCK);
    }
    if (fsync(fd) != 0) {
        perror("fsync");
        return 1;
    }
    close(fd);
    free(block);
    printf("wrote %d blocks of %d bytes from offset %lld\n", NBLOCKS, BLOCK,
           (long long)data_start);
    return 0;
}
