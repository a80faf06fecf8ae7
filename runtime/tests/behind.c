/* Everything a program may do around its writes, for the runtime's
 * write-behind (IOPILOT_ASYNC=1).
 *
 *   behind DIR [SMALLDIR]
 *
 * stdout is what the program sees: it must be the same with and without
 * write-behind, except the line about the full file system (SMALLDIR, a
 * small file system): "full at write" without it, "full at fsync" (or
 * "full at close") with it, since deferred errors come back at the next
 * sync or close.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[2048];

static char *at(const char *name) {
    static char p[4][4096];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static uint64_t fnv(const unsigned char *b, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static uint64_t file_sum(const char *path, long *size) {
    int fd = open(path, O_RDONLY);
    static unsigned char buf[1 << 20];
    uint64_t h = 1469598103934665603ULL;
    long total = 0;
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < r; i++) h = (h ^ buf[i]) * 1099511628211ULL;
        total += r;
    }
    close(fd);
    *size = total;
    return h;
}

/* Small writes at the position, pwrites, overwrites; read back every way. */
static void sequence(void) {
    int fd = open(at("seq.dat"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    char line[64];
    for (int i = 0; i < 5000; i++) {
        int n = snprintf(line, sizeof line, "record %05d of the sequence\n", i);
        if (write(fd, line, (size_t)n) != n) printf("write failed\n");
    }
    long pos = lseek(fd, 0, SEEK_CUR);
    if (pwrite(fd, "OVERWRITE", 9, 100) != 9) printf("pwrite failed\n");
    if (pwrite(fd, "again", 5, 102) != 5) printf("pwrite failed\n");
    char viastream[16] = {0};
    FILE *sf = fopen(at("seq.dat"), "r"); /* a stream's reads bypass the wrappers */
    fseek(sf, 100, SEEK_SET);
    if (fread(viastream, 1, 9, sf) != 9) printf("fread failed\n");
    fclose(sf);
    printf("stream '%s'\n", viastream);
    char back[16] = {0};
    pread(fd, back, 9, 100); /* the same descriptor */
    int other = open(at("seq.dat"), O_RDONLY);
    char back2[16] = {0};
    pread(other, back2, 9, 100); /* another descriptor of the file */
    struct stat a, b;
    fstat(other, &a);
    stat(at("seq.dat"), &b);
    long end = lseek(fd, 0, SEEK_END);
    printf("position %ld end %ld fstat %ld stat %ld\n", pos, end, (long)a.st_size, (long)b.st_size);
    printf("same fd '%s' other fd '%s'\n", back, back2);
    char *m = mmap(NULL, (size_t)end, PROT_READ, MAP_SHARED, other, 0);
    printf("mmap sum %016llx\n", (unsigned long long)fnv((unsigned char *)m, (size_t)end));
    munmap(m, (size_t)end);
    close(other);
    if (ftruncate(fd, 50000) != 0) printf("ftruncate failed\n");
    if (write(fd, "after truncate", 14) != 14) printf("write failed\n"); /* at the old end */
    close(fd);
    long size;
    uint64_t h = file_sum(at("seq.dat"), &size);
    printf("seq.dat %ld bytes sum %016llx\n", size, (unsigned long long)h);
}

/* A child after fork, and a program after exec, see what was written. */
static void fork_exec(void) {
    int fd = open(at("fork.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    char *buf = malloc(1 << 20);
    memset(buf, 'f', 1 << 20);
    for (int i = 0; i < 8; i++) write(fd, buf, 1 << 20);
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        long size;
        uint64_t h = file_sum(at("fork.dat"), &size);
        printf("child sees %ld bytes sum %016llx\n", size, (unsigned long long)h);
        write(fd, "child", 5); /* the child writes too, at the shared position */
        fflush(stdout);
        _exit(0);
    }
    waitpid(p, NULL, 0);
    write(fd, "parent", 6);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "wc -c < %s", at("fork.dat"));
    fflush(stdout);
    if (system(cmd) != 0) printf("system failed\n");
    close(fd);
    free(buf);
}

/* Two threads write their own files at once; a signal handler writes a third. */
static volatile sig_atomic_t ticks, elsewhere;
static int sig_fd;
static pid_t main_tid;
static void on_alarm(int s) {
    (void)s;
    ticks++;
    if (gettid() != main_tid) elsewhere = 1; /* only the main thread takes SIGALRM here */
    write(sig_fd, "t", 1);
}
static void *writer(void *arg) {
    long t = (long)arg;
    char path[4200]; /* not at(): its buffers are shared, and threads race */
    snprintf(path, sizeof path, "%s/thread%ld.dat", dir, t);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    char buf[4096];
    for (int i = 0; i < 2000; i++) {
        memset(buf, 'a' + (i + (int)t) % 26, sizeof buf);
        if (pwrite(fd, buf, sizeof buf, (off_t)i * 4096) != 4096) printf("pwrite failed\n");
    }
    fsync(fd);
    close(fd);
    return NULL;
}
static void threads(void) {
    main_tid = gettid();
    sig_fd = open(at("signal.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    signal(SIGALRM, on_alarm);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
    pthread_t th[2];
    sigset_t alarm;
    sigemptyset(&alarm);
    sigaddset(&alarm, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alarm, NULL); /* the writers start with it blocked */
    for (long t = 0; t < 2; t++) pthread_create(&th[t], NULL, writer, (void *)t);
    pthread_sigmask(SIG_UNBLOCK, &alarm, NULL);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    while (ticks < 50) usleep(1000);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    int n = (int)ticks;
    close(sig_fd);
    struct stat sb;
    stat(at("signal.dat"), &sb);
    printf("signal writes complete: %s\n", sb.st_size == n ? "yes" : "no");
    printf("handlers ran on the program's thread: %s\n", elsewhere ? "no" : "yes");
    for (int t = 0; t < 2; t++) {
        char name[32];
        long size;
        snprintf(name, sizeof name, "thread%d.dat", t);
        uint64_t h = file_sum(at(name), &size);
        printf("%s %ld bytes sum %016llx\n", name, size, (unsigned long long)h);
    }
}

/* A file system that fills up: where does the program hear of it? */
static void full(const char *small) {
    char path[4096];
    snprintf(path, sizeof path, "%s/full.dat", small);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    char *buf = malloc(65536);
    memset(buf, 'x', 65536);
    const char *where = "nowhere";
    for (int i = 0; i < 64 && !strcmp(where, "nowhere"); i++)
        if (write(fd, buf, 65536) != 65536) where = "write";
    if (!strcmp(where, "nowhere") && fsync(fd) != 0) where = errno == ENOSPC ? "fsync" : "fsync?";
    int c = close(fd);
    if (!strcmp(where, "nowhere") && c != 0) where = "close";
    printf("full at %s\n", where);
    unlink(path);
    free(buf);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [SMALLDIR]\n", argv[0]);
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    sequence();
    fork_exec();
    threads();
    if (argc > 2) full(argv[2]);
    return 0;
}
