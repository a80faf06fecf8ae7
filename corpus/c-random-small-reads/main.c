/* Mistake: a 64 MiB file of 4 KiB records is read in a shuffled order (the
 * order an index or a hash gives), one 4 KiB pread per record.  The file is
 * not in the page cache (as on a fresh node, or a file larger than memory),
 * so every pread is a separate random disk access.
 * Fix: read the whole file sequentially in 8 MiB pieces into memory and
 * take the records in the shuffled order from there.  Both modes compute
 * the same checksum over the records in the same order.
 * Usage: prog mistake|fixed   (creates records.dat, then reads it) */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REC 4096
#define NREC (64 * 256) /* 64 MiB */
#define PIECE (8 * 1024 * 1024)

static void make_file(void)
{
    char *buf = malloc(PIECE);
    int fd = open("records.dat", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (int p = 0; p < NREC * REC / PIECE; p++) {
        for (int i = 0; i < PIECE; i++)
            buf[i] = (char)(p * 31 + i * 7);
        if (write(fd, buf, PIECE) != PIECE) {
            perror("write");
            exit(1);
        }
    }
    /* the file goes to disk and leaves the page cache: a cold input */
    fsync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    free(buf);
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "mistake") && strcmp(argv[1], "fixed"))) {
        fprintf(stderr, "usage: %s mistake|fixed\n", argv[0]);
        return 2;
    }
    int mistake = !strcmp(argv[1], "mistake");
    make_file();

    int *order = malloc(sizeof(int) * NREC);
    for (int i = 0; i < NREC; i++)
        order[i] = i;
    srand(42);
    for (int i = NREC - 1; i > 0; i--) { /* Fisher-Yates shuffle */
        int j = rand() % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }

    int fd = open("records.dat", O_RDONLY);
    uint64_t sum = 0;
    if (mistake) {
        unsigned char rec[REC];
        for (int i = 0; i < NREC; i++) {
            if (pread(fd, rec, REC, (off_t)order[i] * REC) != REC) {
                perror("pread");
                return 1;
            }
            sum = sum * 1099511628211ULL + rec[i % REC];
        }
    } else {
        unsigned char *all = malloc((size_t)NREC * REC);
        for (size_t off = 0; off < (size_t)NREC * REC; off += PIECE)
            if (pread(fd, all + off, PIECE, (off_t)off) != PIECE) {
                perror("pread");
                return 1;
            }
        for (int i = 0; i < NREC; i++)
            sum = sum * 1099511628211ULL + all[(size_t)order[i] * REC + i % REC];
        free(all);
    }
    close(fd);
    free(order);
    printf("checksum %016llx\n", (unsigned long long)sum);
    return 0;
}
