/* Tests of the asynchronous I/O engine (include/iopilot_async.h), built
 * plain and with ThreadSanitizer.
 *
 *   async_engine DIR
 *
 * Each case prints "<case> ok" or "<case> WRONG: why"; the exit status is
 * the number of wrong cases.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../include/iopilot_async.h"

static const char *dir;
static int wrong;

static void report(const char *name, int ok, const char *why) {
    if (ok) printf("%s ok\n", name);
    else printf("%s WRONG: %s\n", name, why);
    wrong += !ok;
}

static int make(const char *name, int flags) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return open(p, flags | O_CREAT | O_TRUNC, 0644);
}

/* Later writes of the same bytes win, reads see earlier writes, fsync runs in order. */
static void order(void) {
    int fd = make("order.dat", O_RDWR);
    iopilot_es *es = iopilot_es_create();
    char a[4096], b[4096], back[4096];
    memset(a, 'a', sizeof a);
    memset(b, 'b', sizeof b);
    for (int i = 0; i < 500; i++) {
        iopilot_es_write(es, fd, (i % 2) ? b : a, sizeof a, (int64_t)(i % 7) * 1000, 0);
        iopilot_es_fsync(es, fd);
    }
    size_t got = 0;
    iopilot_es_read(es, fd, back, sizeof back, 6000, &got);
    size_t pending = 9;
    int rc = iopilot_es_wait(es, -1, &pending, NULL, NULL);
    /* Write i covers [1000 * (i % 7), + 4096), 'b' when i is odd.  The last to
     * cover 6000 is i = 499 (at 2000, 'b'); the last to cover 10095 is
     * i = 496 (at 6000, 'a'). */
    int ok = rc == 0 && pending == 0 && got == 4096 && back[0] == 'b' && back[4095] == 'a';
    char at2000;
    pread(fd, &at2000, 1, 2000);
    ok = ok && at2000 == 'b';
    iopilot_es_stats st;
    iopilot_es_get_stats(es, &st);
    ok = ok && st.submitted == 1001 && st.completed == 1001 && st.failed == 0 &&
         st.bytes_written == 500 * 4096 && st.bytes_read == 4096;
    report("order", ok && iopilot_es_close(es) == 0, "last writer or read-after-write wrong");
    close(fd);
}

/* The caller may change its buffer as soon as write returns; with NOCOPY it may not. */
static void copies(void) {
    int fd = make("copy.dat", O_RDWR);
    iopilot_es *es = iopilot_es_create();
    char *buf = malloc(1 << 20);
    memset(buf, 'x', 1 << 20);
    iopilot_es_write(es, fd, buf, 1 << 20, 0, 0);
    memset(buf, 'y', 1 << 20); /* too late to change what is written */
    static char keep[4096];
    memset(keep, 'k', sizeof keep);
    iopilot_es_write(es, fd, keep, sizeof keep, 1 << 20, IOPILOT_ES_NOCOPY);
    iopilot_es_wait(es, -1, NULL, NULL, NULL);
    char c1, c2;
    pread(fd, &c1, 1, (1 << 20) - 1);
    pread(fd, &c2, 1, (1 << 20) + 5);
    report("copies", c1 == 'x' && c2 == 'k' && iopilot_es_close(es) == 0, "buffer not copied");
    free(buf);
    close(fd);
}

/* A failure is reported once, with the operation's number and errno. */
static void failures(void) {
    int fd = make("ro.dat", O_RDONLY);
    iopilot_es *es = iopilot_es_create();
    char buf[100] = {0};
    uint64_t ok_id = iopilot_es_read(es, fd, buf, sizeof buf, 0, NULL);
    uint64_t bad = iopilot_es_write(es, fd, buf, sizeof buf, 0, 0);
    iopilot_es_failure f[4];
    size_t nf = 4, pending = 9;
    int rc = iopilot_es_wait(es, -1, &pending, f, &nf);
    int ok = ok_id == bad - 1 && rc == 2 && pending == 0 && nf == 1 && f[0].id == bad &&
             f[0].op == IOPILOT_ES_WRITE && f[0].error == EBADF && f[0].bytes == 100 &&
             f[0].done == 0;
    nf = 4;
    ok = ok && iopilot_es_wait(es, -1, &pending, f, &nf) == 0 && nf == 0;
    errno = 0;
    ok = ok && iopilot_es_fsync(es, -1) == 0 && errno == EINVAL; /* refused at once */
    iopilot_es_write(es, fd, buf, 1, 0, 0); /* fails, never reported: close says so */
    report("failures", ok && iopilot_es_close(es) == 2, "failure not reported as expected");
    close(fd);
}

/* A write past the file-size limit: the bytes before it stay, EFBIG is reported. */
static void too_big(void) {
    int fd = make("big.dat", O_RDWR);
    struct rlimit old, lim = {1 << 20, 1 << 20};
    getrlimit(RLIMIT_FSIZE, &old);
    lim.rlim_max = old.rlim_max;
    signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &lim);
    iopilot_es *es = iopilot_es_create();
    char *buf = malloc(2 << 20);
    memset(buf, 'z', 2 << 20);
    iopilot_es_write(es, fd, buf, 2 << 20, 0, 0);
    iopilot_es_failure f[1];
    size_t nf = 1;
    int rc = iopilot_es_wait(es, -1, NULL, f, &nf);
    setrlimit(RLIMIT_FSIZE, &old);
    struct stat sb;
    fstat(fd, &sb);
    int ok = rc == 2 && nf == 1 && f[0].error == EFBIG && f[0].done == (1 << 20) &&
             sb.st_size == (1 << 20);
    report("too_big", ok && iopilot_es_close(es) == 0, "EFBIG not reported with the bytes done");
    free(buf);
    close(fd);
}

/* wait(0) looks without blocking; a timeout returns with work pending. */
static void timeout(void) {
    int fd = make("slow.dat", O_RDWR);
    iopilot_es *es = iopilot_es_create();
    size_t n = (size_t)256 << 20;
    char *buf = malloc(n);
    memset(buf, 1, n);
    for (int i = 0; i < 4; i++) {
        iopilot_es_write(es, fd, buf, n, (int64_t)i * (int64_t)n, IOPILOT_ES_NOCOPY);
        iopilot_es_fsync(es, fd);
    }
    size_t pending = 0;
    int rc0 = iopilot_es_wait(es, 0, &pending, NULL, NULL);
    size_t p0 = pending;
    int rc1 = iopilot_es_wait(es, 0.001, &pending, NULL, NULL);
    size_t p1 = pending;
    int rc2 = iopilot_es_wait(es, -1, &pending, NULL, NULL);
    int ok = rc0 == 1 && p0 > 0 && rc1 == 1 && p1 > 0 && rc2 == 0 && pending == 0;
    report("timeout", ok && iopilot_es_close(es) == 0, "wait did not time out as asked");
    free(buf);
    close(fd);
    char p[4096];
    snprintf(p, sizeof p, "%s/slow.dat", dir);
    unlink(p);
}

/* Memory cap: with 4 MiB allowed, 64 writes of 1 MiB never hold more than 4 MiB. */
static void capped(void) {
    setenv("IOPILOT_ASYNC_MAX_BYTES", "4m", 1);
    iopilot_es *es = iopilot_es_create();
    unsetenv("IOPILOT_ASYNC_MAX_BYTES");
    int fd = make("cap.dat", O_RDWR);
    char *buf = malloc(1 << 20);
    for (int i = 0; i < 64; i++) {
        memset(buf, 'a' + i % 26, 1 << 20);
        iopilot_es_write(es, fd, buf, 1 << 20, (int64_t)i << 20, 0);
    }
    iopilot_es_wait(es, -1, NULL, NULL, NULL);
    iopilot_es_stats st;
    iopilot_es_get_stats(es, &st);
    char c;
    pread(fd, &c, 1, (63 << 20) + 7);
    int ok = st.max_queued_bytes <= (4 << 20) && st.max_queued_bytes >= (1 << 20) &&
             c == 'a' + 63 % 26 && st.bytes_written == (64u << 20);
    report("capped", ok && iopilot_es_close(es) == 0, "memory cap not kept");
    free(buf);
    close(fd);
}

/* Several threads submit to one set at once. */
static iopilot_es *shared_es;
static int shared_fd;
static void *submitter(void *arg) {
    long t = (long)arg;
    char buf[4096];
    memset(buf, '0' + (int)t, sizeof buf);
    for (int i = 0; i < 200; i++)
        iopilot_es_write(shared_es, shared_fd, buf, sizeof buf, (t * 200 + i) * 4096, 0);
    iopilot_es_wait(shared_es, -1, NULL, NULL, NULL);
    return NULL;
}
static void threads(void) {
    shared_fd = make("threads.dat", O_RDWR);
    shared_es = iopilot_es_create();
    pthread_t th[4];
    for (long t = 0; t < 4; t++) pthread_create(&th[t], NULL, submitter, (void *)t);
    for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
    int ok = iopilot_es_close(shared_es) == 0;
    for (long t = 0; t < 4 && ok; t++) {
        char c;
        pread(shared_fd, &c, 1, (t * 200 + 199) * 4096 + 100);
        ok = c == '0' + t;
    }
    report("threads", ok, "a thread's writes went missing");
    close(shared_fd);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    order();
    copies();
    failures();
    too_big();
    timeout();
    capped();
    threads();
    return wrong;
}
