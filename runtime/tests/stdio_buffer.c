/* Many small fwrites through one stream, for the [stdio] buffer_size
 * setting of the iopilot runtime.
 *
 *   stdio_buffer PATH [N]
 *
 * Writes N (default 100000) records of 10 bytes to PATH with fwrite and
 * closes it, then prints to stderr how many write system calls the process
 * made meanwhile (syscw of /proc/self/io: glibc's own write calls, which no
 * wrapper sees).  Also opens PATH again with fdopen and freopen, and 80
 * streams at once (more than the runtime's pool), to exercise giving
 * buffers back.  stdout: the bytes written, the same with or without
 * settings.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long write_calls(void) {
    char line[128];
    long n = -1;
    int fd = open("/proc/self/io", O_RDONLY);
    if (fd < 0) return -1;
    ssize_t got = read(fd, line, sizeof line - 1);
    close(fd);
    if (got <= 0) return -1;
    line[got] = 0;
    char *p = strstr(line, "syscw: ");
    if (p) n = atol(p + 7);
    return n;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH [N]\n", argv[0]);
        return 2;
    }
    long n = argc > 2 ? atol(argv[2]) : 100000;
    long before = write_calls();
    FILE *f = fopen(argv[1], "w");
    if (!f) return 1;
    for (long i = 0; i < n; i++) {
        char rec[32];
        snprintf(rec, sizeof rec, "%09ld\n", i % 1000000000);
        if (fwrite(rec, 1, 10, f) != 10) return 1;
    }
    if (fclose(f) != 0) return 1;
    long after = write_calls();
    fprintf(stderr, "write calls %ld\n", after - before);

    /* The same file through fdopen and freopen: read back its size. */
    int fd = open(argv[1], O_RDONLY);
    FILE *g = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!g || fseek(g, 0, SEEK_END) != 0) return 1;
    long size = ftell(g);
    g = freopen(argv[1], "r", g);
    if (!g) return 1;
    char first[11] = {0};
    if (fread(first, 1, 10, g) != 10) return 1;
    fclose(g);
    printf("bytes %ld first %s", size, first);

    /* More streams at once than the pool holds. */
    FILE *many[80];
    for (int i = 0; i < 80; i++)
        if (!(many[i] = fopen(argv[1], "r"))) return 1;
    for (int i = 0; i < 80; i++) fclose(many[i]);
    return 0;
}
