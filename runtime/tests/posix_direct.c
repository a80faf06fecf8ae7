/* Reads and writes of every shape, for the [posix] direct setting of the
 * iopilot runtime.
 *
 *   posix_direct DIR
 *
 * Writes DIR/data.bin with large aligned writes (from an aligned buffer,
 * from a misaligned one, one larger than a bounce buffer), small and
 * misaligned ones, through a dup'd descriptor and through a stream made
 * with fdopen; reads it back with read and pread; then closes every
 * descriptor above its own with a raw close_range, as a daemon would, and
 * writes again.  Also DIR/log.txt opened with O_APPEND.
 *
 * stdout: what the program sees (contents, flags of its descriptor, a
 * checksum of the file), identical with and without the setting.
 * stderr: "resident N of M" pages of the first 7 MiB right after the large
 * writes (direct writes leave none in the page cache), and "odirect K
 * cloexec C": descriptors of the process open with O_DIRECT, and how many
 * of them are close-on-exec.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MiB (1 << 20)

static void fill(char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (char)((i * 131u + seed) & 0xff);
}

static int check(const char *what, int ok) {
    printf("%s %s\n", what, ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}

static void odirect_fds(void) {
    int n = 0, cloexec = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd == dirfd(d)) continue;
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0 && (fl & O_DIRECT)) {
            n++;
            cloexec += (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
        }
    }
    if (d) closedir(d);
    fprintf(stderr, "odirect %d cloexec %d\n", n, cloexec);
}

static void resident(const char *path, size_t len) {
    int fd = open(path, O_RDONLY);
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    size_t pages = len / 4096, in = 0;
    unsigned char *vec = malloc(pages);
    if (m != MAP_FAILED && mincore(m, len, vec) == 0)
        for (size_t i = 0; i < pages; i++) in += vec[i] & 1;
    fprintf(stderr, "resident %zu of %zu\n", in, pages);
    if (m != MAP_FAILED) munmap(m, len);
    free(vec);
    close(fd);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    char path[4096], logpath[4096];
    snprintf(path, sizeof path, "%s/data.bin", argv[1]);
    snprintf(logpath, sizeof logpath, "%s/log.txt", argv[1]);
    int bad = 0;
    char *aligned, *raw = malloc(8 * MiB + 64), *back = malloc(8 * MiB + 64);
    if (posix_memalign((void **)&aligned, 4096, 2 * MiB) || !raw || !back) return 1;
    char *misaligned = raw + 16; /* as malloc's large blocks are */

    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (fd < 0) return 1;
    printf("flags have O_DIRECT: %d\n", (fcntl(fd, F_GETFL) & O_DIRECT) != 0);
    fill(aligned, MiB, 1);
    bad |= check("write aligned 1m", write(fd, aligned, MiB) == MiB);                 /* [0,1m) */
    fill(misaligned, MiB, 2);
    bad |= check("write misaligned 1m", write(fd, misaligned, MiB) == MiB);           /* [1m,2m) */
    fill(misaligned, 5 * MiB, 3);
    bad |= check("pwrite misaligned 5m", pwrite(fd, misaligned, 5 * MiB, 2 * MiB) == 5 * MiB);
    bad |= check("position after writes", lseek(fd, 0, SEEK_CUR) == 2 * MiB);
    fsync(fd);
    resident(path, 7 * MiB);
    odirect_fds();
    fill(aligned, MiB, 4);
    bad |= check("pwrite unaligned offset", pwrite(fd, aligned, MiB, 7 * MiB + 100) == MiB);
    bad |= check("pwrite small", pwrite(fd, "tail", 4, 8 * MiB + 100) == 4);
    int dupfd = dup(fd);
    fill(aligned, MiB, 5);
    bad |= check("pwrite through dup", pwrite(dupfd, aligned, MiB, 9 * MiB) == MiB);
    FILE *f = fdopen(dup(fd), "r+");
    fseek(f, 10 * MiB, SEEK_SET);
    for (int i = 0; i < 1000; i++) fprintf(f, "line %04d of a stream\n", i);
    bad |= check("fclose", fclose(f) == 0);
    close(dupfd);

    /* Read back with every shape. */
    lseek(fd, 0, SEEK_SET);
    bad |= check("read aligned 2m", read(fd, back, 2 * MiB) == 2 * MiB);
    fill(aligned, MiB, 1);
    fill(raw + 32, MiB, 2); /* what was written misaligned */
    bad |= check("contents 0-2m", !memcmp(back, aligned, MiB) && !memcmp(back + MiB, raw + 32, MiB));
    bad |= check("position after read", lseek(fd, 0, SEEK_CUR) == 2 * MiB);
    char *odd = back + 8;
    bad |= check("pread misaligned 5m", pread(fd, odd, 5 * MiB, 2 * MiB) == 5 * MiB);
    fill(raw + 32, 5 * MiB, 3);
    bad |= check("contents 2-7m", !memcmp(odd, raw + 32, 5 * MiB));
    bad |= check("pread past the end", pread(fd, back, 2 * MiB, 10 * MiB) == 22000);

    /* A daemon's close-all, made where no wrapper sees it. */
    syscall(SYS_close_range, fd + 1, ~0U, 0);
    fill(aligned, MiB, 6);
    bad |= check("pwrite after close-all", pwrite(fd, aligned, MiB, 11 * MiB) == MiB);
    bad |= check("close", close(fd) == 0);

    int lg = open(logpath, O_CREAT | O_WRONLY | O_APPEND | O_TRUNC, 0644);
    bad |= check("append", write(lg, aligned, MiB) == MiB && close(lg) == 0);

    /* A checksum of the whole file, read with the page cache. */
    FILE *in = fopen(path, "rb");
    uint64_t sum = 1469598103934665603ULL;
    size_t total = 0, got;
    while ((got = fread(back, 1, MiB, in)) > 0) {
        for (size_t i = 0; i < got; i++) sum = (sum ^ (unsigned char)back[i]) * 1099511628211ULL;
        total += got;
    }
    fclose(in);
    printf("file %zu bytes, fnv %016llx\n", total, (unsigned long long)sum);
    return bad;
}
