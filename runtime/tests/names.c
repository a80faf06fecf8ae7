/* Names the runtime records for relative paths.
 *   names lt      in the working directory: "<weird>.dat" (3 bytes, open),
 *                 "<odd>.txt" (5 bytes, fopen), a line on stdout
 *   names deep D  D/a/... and D/b/..., each deeper than PATH_MAX, so that
 *                 getcwd fails: f.dat of 100 bytes in one, 200 in the other
 * Exit status 0 when every step worked, else the number of the failed step. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int put(const char *name, int n) {
    char buf[256];
    memset(buf, 'x', sizeof buf);
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -1;
    int ok = write(fd, buf, (size_t)n) == n;
    return close(fd) == 0 && ok ? 0 : -1;
}

static int lt(void) {
    if (put("<weird>.dat", 3)) return 2;
    FILE *f = fopen("<odd>.txt", "w");
    if (!f || fputs("hello", f) < 0 || fclose(f) != 0) return 3;
    fputs("lt done\n", stdout);
    return 0;
}

static int deep(const char *top) {
    char part[201], cwd[8192];
    memset(part, 'd', 200);
    part[200] = 0;
    const char *sub[] = {"a", "b"};
    for (int t = 0; t < 2; t++) {
        if (chdir(top) != 0 || mkdir(sub[t], 0755) != 0 || chdir(sub[t]) != 0) return 4;
        for (int i = 0; i < 25; i++)
            if (mkdir(part, 0755) != 0 || chdir(part) != 0) return 5;
        /* the system call the runtime makes, not glibc's getcwd (which walks up) */
        if (syscall(SYS_getcwd, cwd, sizeof cwd) >= 0 || errno != ENAMETOOLONG) return 6;
        if (put("f.dat", 100 * (t + 1))) return 7;
    }
    fputs("deep done\n", stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "lt")) return lt();
    if (argc >= 3 && !strcmp(argv[1], "deep")) return deep(argv[2]);
    fputs("usage: names lt | names deep DIR\n", stderr);
    return 1;
}
