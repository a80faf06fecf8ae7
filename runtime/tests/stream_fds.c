/* Streams whose descriptor the program reads and writes itself (fileno),
 * as C++ fstreams do: each pattern's POSIX offsets are known exactly.
 * Usage: stream_fds PATTERN DIR; files are DIR/a.dat and DIR/b.dat. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIZE (1 << 20)
#define CHUNK (64 << 10)
static char buf[SIZE];
static char a[4096], b[4096];

static int make(const char *path, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, n) != (ssize_t)n) return 1;
    return close(fd);
}

/* Read ``n`` bytes through the stream's descriptor in 64 KiB pieces. */
static int read_through(FILE *f, size_t n) {
    for (size_t done = 0; done < n; done += CHUNK)
        if (read(fileno(f), buf, CHUNK) != CHUNK) return 1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    const char *p = argv[1];
    snprintf(a, sizeof a, "%s/a.dat", argv[2]);
    snprintf(b, sizeof b, "%s/b.dat", argv[2]);
    memset(buf, 'x', sizeof buf);
    if (make(a, SIZE) || make(b, SIZE)) return 3;
    if (!strcmp(p, "reread")) { /* the same input read whole, three times */
        for (int i = 0; i < 3; i++) {
            FILE *f = fopen(a, "r");
            if (!f || read_through(f, SIZE)) return 4;
            fclose(f);
        }
    } else if (!strcmp(p, "two")) { /* a.dat then b.dat, given the same number */
        FILE *f = fopen(a, "r");
        if (!f || read_through(f, CHUNK)) return 4;
        int fd = fileno(f);
        fclose(f);
        FILE *g = fopen(b, "r");
        if (!g || fileno(g) != fd || read_through(g, 2 * CHUNK)) return 5;
        fclose(g);
    } else if (!strcmp(p, "readahead")) { /* the stream read 4 KiB ahead first */
        FILE *f = fopen(a, "r");
        char c[10];
        if (!f || fread(c, 1, sizeof c, f) != sizeof c) return 4;
        if (read_through(f, CHUNK)) return 5;
        fclose(f);
    } else if (!strcmp(p, "fdopen")) { /* a descriptor we follow keeps its position */
        int fd = open(a, O_WRONLY);
        if (fd < 0 || write(fd, buf, 100) != 100) return 4;
        FILE *f = fdopen(fd, "w");
        if (!f || write(fileno(f), buf, 10) != 10) return 5;
        fclose(f); /* closes fd */
        FILE *g = fopen(b, "r");
        if (!g || fileno(g) != fd || read_through(g, CHUNK)) return 6;
        fclose(g);
    } else if (!strcmp(p, "freopen")) { /* freopen closes a.dat's descriptor */
        FILE *f = fopen(a, "r");
        if (!f || read_through(f, CHUNK)) return 4;
        f = freopen(b, "r", f);
        if (!f || read_through(f, CHUNK)) return 5;
        fclose(f);
    } else if (!strcmp(p, "append")) { /* appends land at the end */
        FILE *f = fopen(a, "a");
        if (!f || write(fileno(f), buf, 10) != 10 || write(fileno(f), buf, 10) != 10) return 4;
        fclose(f);
    } else {
        return 2;
    }
    return 0;
}
