/* A program whose I/O is known exactly; tests compare its trace with this.
 * Usage: posix_known DIR.  Prints "ok" and exits with status 3 (so tests can
 * check that the traced program's status is passed through unchanged). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[4096];

static void path(char *out, const char *name) { snprintf(out, 4200, "%s/%s", dir, name); }

/* As a thread ends (after the runtime's own thread-exit work, whose key is
 * older): 10 B to exit<id>.dat. */
static pthread_key_t at_exit_key;
static void at_thread_exit(void *arg) {
    char p[4200], name[32];
    snprintf(name, sizeof name, "exit%ld.dat", (long)arg - 1);
    path(p, name);
    int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (write(fd, "0123456789", 10) != 10) exit(18);
    close(fd);
}

static void *writer(void *arg) {
    long id = (long)arg;
    pthread_setspecific(at_exit_key, (void *)(id + 1));
    char p[4200], name[32], buf[64];
    snprintf(name, sizeof name, "thread%ld.dat", id);
    path(p, name);
    memset(buf, (int)id, sizeof buf);
    int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (int i = 0; i < 1000; i++)
        if (pwrite(fd, buf, sizeof buf, (off_t)i * 64) != 64) exit(10);
    close(fd);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    snprintf(dir, sizeof dir, "%s", argv[1]);
    char a[4200], b[4200], c[4200], buf[8192];
    path(a, "a.dat");
    path(b, "b.txt");
    path(c, "child.dat");
    memset(buf, 7, sizeof buf);

    /* a.dat: 100 sequential writes of 1000 B, one pwrite of 4096 B at 1 MiB,
       one writev of 300 + 700 B, then 10 preads of 1000 B and one fsync. */
    int fd = open(a, O_CREAT | O_RDWR | O_TRUNC, 0644);
    for (int i = 0; i < 100; i++)
        if (write(fd, buf, 1000) != 1000) return 11;
    if (pwrite(fd, buf, 4096, 1 << 20) != 4096) return 12;
    struct iovec iov[2] = {{buf, 300}, {buf + 300, 700}};
    if (writev(fd, iov, 2) != 1000) return 13;
    for (int i = 0; i < 10; i++)
        if (pread(fd, buf, 1000, (off_t)i * 1000) != 1000) return 14;
    fsync(fd);
    close(fd);
    struct stat sb;
    stat(a, &sb);
    stat(a, &sb);

    /* errno must be what the C library set, not something the tracer did. */
    errno = 0;
    if (open("/nonexistent/dir/file", O_RDONLY) != -1 || errno != ENOENT) return 15;
    fd = open(a, O_RDONLY);
    errno = 0;
    if (write(fd, buf, 10) != -1 || errno != EBADF) return 16;
    close(fd);

    /* b.txt through STDIO: 10 fwrite of 100 B and one fprintf of 6 B. */
    FILE *f = fopen(b, "w");
    for (int i = 0; i < 10; i++) fwrite(buf, 1, 100, f);
    fprintf(f, "%s\n", "hello");
    fclose(f);

    /* d.dat: 10 writes of 100 B from memory on an 8-byte boundary, then 10
       more from one byte past it, through a dup of the descriptor (a dup is
       not an open: the writes stay consecutive). */
    static char mem[128] __attribute__((aligned(64)));
    char d[4200];
    path(d, "d.dat");
    fd = open(d, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (int i = 0; i < 10; i++)
        if (write(fd, mem, 100) != 100) return 19;
    int fd2 = dup(fd);
    for (int i = 0; i < 10; i++)
        if (write(fd2, mem + 1, 100) != 100) return 19;
    close(fd2);
    close(fd);

    /* Four threads, each 1000 pwrites of 64 B to its own file. */
    pthread_key_create(&at_exit_key, at_thread_exit);
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, writer, (void *)i);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);

    /* A forked child writes 50 x 10 B to child.dat. */
    pid_t pid = fork();
    if (pid == 0) {
        int cfd = open(c, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        for (int i = 0; i < 50; i++)
            if (write(cfd, buf, 10) != 10) _exit(20);
        close(cfd);
        exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 17;
    printf("ok\n");
    return 3;
}
