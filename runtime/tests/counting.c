/* Access patterns whose Darshan counters are known by hand: `counting
 * PATTERN DIR` writes DIR/PATTERN.dat (see tests/test_runtime_counting.py). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *buf;
static int fd;
static char path[4200];

static void at(long off, long n) {
    if (pwrite(fd, buf, (size_t)n, off) != n) exit(3);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    buf = calloc(1, 11 << 20);
    snprintf(path, sizeof path, "%s/%s.dat", argv[2], argv[1]);
    fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    const char *p = argv[1];
    if (!strcmp(p, "example")) { /* one 1 MiB, three 100 B and one 4 KiB write, in order */
        long sizes[] = {1 << 20, 100, 100, 100, 4096};
        for (int i = 0; i < 5; i++)
            if (write(fd, buf, (size_t)sizes[i]) != sizes[i]) return 3;
    } else if (!strcmp(p, "edges")) { /* every bin edge, and one byte more */
        long edges[] = {100, 1024, 10240, 102400, 1048576, 4194304, 10485760}, off = 0;
        for (int i = 0; i < 7; i++) {
            at(off, edges[i]);
            off += edges[i];
            at(off, edges[i] + 1);
            off += edges[i] + 1;
        }
    } else if (!strcmp(p, "sequential")) {
        for (long i = 0; i < 10; i++) at(i * 10, 10);
    } else if (!strcmp(p, "strided")) {
        for (long i = 0; i < 3; i++) at(i * 20, 10);
    } else if (!strcmp(p, "backward")) {
        for (long i = 2; i >= 0; i--) at(i * 20, 10);
    } else if (!strcmp(p, "from_one")) {
        at(1, 10);
    } else if (!strcmp(p, "reopened")) {
        at(0, 10);
        close(fd);
        fd = open(path, O_WRONLY);
        at(10, 10);
    } else if (!strcmp(p, "common")) { /* 5x10 B, 3x20 B, 3x30 B, 1x40 B, 1x50 B */
        long sizes[] = {10, 20, 10, 30, 10, 20, 30, 10, 20, 30, 40, 10, 50}, off = 0;
        for (int i = 0; i < 13; i++) {
            at(off, sizes[i]);
            off += sizes[i];
        }
    } else if (!strcmp(p, "dups")) { /* four more descriptors, writes through each */
        int d1 = dup(fd), d2 = dup2(fd, 50), d3 = dup3(fd, 51, 0), d4 = fcntl(fd, F_DUPFD, 60);
        int all[] = {fd, d1, d2, d3, d4};
        for (int i = 0; i < 5; i++)
            if (write(all[i], buf, 10) != 10) return 6;
        for (int i = 1; i < 5; i++) close(all[i]);
        FILE *f = fdopen(fd, "w"); /* a stream on it: STDIO FDOPENS */
        fputs("abc", f);
        fclose(f);
        FILE *g = fopen(path, "r"); /* fileno of a stream: POSIX FILENOS */
        if (fileno(g) < 0) return 7;
        fclose(g);
        return 0;
    } else if (!strcmp(p, "append")) { /* two appending descriptors take turns */
        int a = open(path, O_WRONLY | O_APPEND), b = open(path, O_WRONLY | O_APPEND);
        for (int i = 0; i < 3; i++)
            if (write(i % 2 ? b : a, buf, 10) != 10) return 8;
        close(a);
        close(b);
    } else if (!strcmp(p, "stdio")) { /* every STDIO call Darshan counts */
        close(fd);
        FILE *f = fopen(path, "w+");
        fputs("12 34\n", f); /* 3 writes, 8 bytes */
        putc('x', f);
        fputc('y', f);
        rewind(f); /* seek */
        int a = 0, b = 0;
        if (fscanf(f, "%d %d", &a, &b) != 2 || a != 12 || b != 34) return 4; /* 5 bytes */
        if (getc(f) != '\n' || fgetc(f) != 'x') return 5;                    /* 2 reads */
        fpos_t pos;
        fgetpos(f, &pos);
        fsetpos(f, &pos); /* seek */
        fclose(f);
        return 0;
    } else if (!strcmp(p, "syncs")) { /* one fsync, one fdatasync, two sync_file_range */
        at(0, 8192);
        if (fsync(fd) || fdatasync(fd)) return 4;
        if (sync_file_range(fd, 0, 4096, SYNC_FILE_RANGE_WRITE)) return 5;
        if (sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                          SYNC_FILE_RANGE_WAIT_AFTER))
            return 6;
    } else if (!strcmp(p, "scan")) { /* fscanf across buffer refills, a pushback, a seek */
        close(fd);
        FILE *f = fopen(path, "w+");
        long line1000 = 0;
        for (int i = 0; i < 3000; i++) {
            if (i == 1000) line1000 = ftell(f);
            fprintf(f, "k%d = %d\n", i, i); /* 3000 writes */
        }
        rewind(f); /* seek */
        char key[32];
        int v, n = 0;
        while (fscanf(f, "%31s = %d", key, &v) == 2) n++; /* the whole file, one more call at EOF */
        if (n != 3000) return 4;
        rewind(f); /* seek */
        int c = getc(f); /* 1 byte at 0 */
        ungetc(c, f);    /* back to 0: the next scan starts there, not at 1 */
        if (fscanf(f, "%31s = %d", key, &v) != 2 || v != 0) return 5; /* "k0 = 0" */
        fseek(f, line1000, SEEK_SET); /* seek */
        if (fscanf(f, "%31s = %d", key, &v) != 2 || v != 1000) return 6; /* "k1000 = 1000" */
        fclose(f);
        return 0;
    } else {
        return 2;
    }
    close(fd);
    return 0;
}
