/* Programs that do what real programs do to a preloaded tracer: close every
 * descriptor, run out of them, write from signal handlers, cancel threads,
 * share one descriptor among many threads, plant links in the trace
 * directory, die by SIGKILL.  `faults CASE DIR` writes its data under DIR
 * and prints what it did; the tests run each case traced and untraced and
 * compare the two.  Exit status 0 unless the case says otherwise. */
#define _GNU_SOURCE
#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "../include/iopilot_async.h"

static char dir[4096];

static int make(const char *name) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0) {
        perror(path);
        exit(90);
    }
    return fd;
}

/* n one-byte writes, enough to fill and flush the runtime's buffers */
static void small_writes(int fd, int n) {
    for (int i = 0; i < n; i++)
        if (write(fd, &"0123456789"[i % 10], 1) != 1) exit(91);
}

/* Our trace file names: DIR/p<host>-<pid>-0 (see docs/trace-format.md). */
static void own_stem(char *out, size_t n) {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    for (char *c = host; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '.' || *c == '_'))
            *c = '_';
    const char *tdir = getenv("IOPILOT_TRACE_DIR");
    snprintf(out, n, "%s/p%s-%d-0", tdir ? tdir : "/nonexistent", host, (int)getpid());
}

static int close_all(const char *how) {
    int fd = make("before.dat");
    small_writes(fd, 10000); /* a tracer that keeps its file open has opened it now */
    if (!strcmp(how, "loop")) {
        for (int i = 3; i < 1024; i++) close(i);
    } else if (!strcmp(how, "close_range")) {
        if (close_range(3, ~0U, 0) != 0) return 92;
    } else {
        closefrom(3);
    }
    int filler = make("filler.dat"); /* the lowest numbers go to the program again */
    fd = make("after.dat");
    small_writes(fd, 20000);
    close(fd);
    close(filler);
    printf("wrote 20000\n");
    return 0;
}

static int rlimit(int hard_too) {
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = 64;
    if (hard_too) rl.rlim_max = 64;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return 93;
    int fd = make("data.dat");
    small_writes(fd, 20000); /* makes the runtime flush while the limit is low */
    int n = 0;
    while (open("/dev/null", O_RDONLY) >= 0) n++;
    printf("opened %d (%s)\n", n, errno == EMFILE ? "EMFILE" : "other");
    return 0;
}

static volatile sig_atomic_t handler_writes;
static int sig_fd;
static void on_alarm(int sig) {
    (void)sig;
    int e = errno;
    if (write(sig_fd, "s", 1) == 1) handler_writes++;
    errno = e;
}

static int signals(int n) {
    sig_fd = make("signals.dat");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 20}, {0, 20}};
    setitimer(ITIMER_REAL, &it, NULL);
    int main_writes = 0;
    for (int i = 0; i < n; i++)
        if (write(sig_fd, "m", 1) == 1) main_writes++;
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    close(sig_fd);
    printf("main %d handler %d\n", main_writes, (int)handler_writes);
    return 0;
}

static void *busy_writer(void *arg) {
    int fd = *(int *)arg;
    for (;;) {
        if (write(fd, "c", 1) != 1) break;
        pthread_testcancel();
    }
    return NULL;
}

static int cancel(void) {
    int fd = make("cancel.dat");
    for (int round = 0; round < 200; round++) {
        pthread_t t[4];
        for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, busy_writer, &fd);
        struct timespec ts = {0, 200000 + (round % 7) * 50000};
        nanosleep(&ts, NULL);
        for (int i = 0; i < 4; i++) pthread_cancel(t[i]);
        for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    }
    small_writes(fd, 20000); /* the buffers still flush: nothing was left locked */
    close(fd);
    printf("cancelled 800 threads\n");
    return 0;
}

#define NTHREADS 64
#define PER_THREAD 2000
#define BLOCK 512
static int shared_fd;
static void *block_writer(void *arg) {
    char buf[BLOCK];
    memset(buf, 'a' + (int)((long)arg % 26), sizeof buf);
    for (int i = 0; i < PER_THREAD; i++)
        if (write(shared_fd, buf, sizeof buf) != BLOCK) return (void *)1;
    return NULL;
}

static int threads64(void) {
    shared_fd = make("threads.dat");
    pthread_t t[NTHREADS];
    for (long i = 0; i < NTHREADS; i++) pthread_create(&t[i], NULL, block_writer, (void *)i);
    int bad = 0;
    for (int i = 0; i < NTHREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += r != NULL;
    }
    close(shared_fd);
    printf("threads %d blocks %d\n", NTHREADS, NTHREADS * PER_THREAD);
    return bad ? 94 : 0;
}

/* The event-set engine beside the program's own writes: the engine's thread
 * reports each operation to the runtime while another thread writes. */
#define ENGINE_OPS 400
static void *side_writer(void *arg) {
    int fd = *(int *)arg;
    char buf[BLOCK];
    memset(buf, 's', sizeof buf);
    for (int i = 0; i < ENGINE_OPS; i++)
        if (write(fd, buf, sizeof buf) != BLOCK) return (void *)1;
    return NULL;
}

static int engine(void) {
    int side = make("side.dat");
    char path[4200];
    snprintf(path, sizeof path, "%s/engine.dat", dir);
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644); /* read back too */
    if (fd < 0) return 90;
    iopilot_es *es = iopilot_es_create();
    if (!es) return 95;
    pthread_t t;
    pthread_create(&t, NULL, side_writer, &side);
    char buf[4096], back[4096];
    for (int i = 0; i < ENGINE_OPS; i++) {
        memset(buf, 'a' + i % 26, sizeof buf);
        if (!iopilot_es_write(es, fd, buf, sizeof buf, (int64_t)i * 4096, 0)) return 96;
    }
    size_t got = 0;
    iopilot_es_fsync(es, fd);
    iopilot_es_read(es, fd, back, sizeof back, 7 * 4096, &got);
    size_t pending = 1, nf = 0;
    int rc = iopilot_es_wait(es, -1, &pending, NULL, &nf);
    void *r;
    pthread_join(t, &r);
    int bad = rc != 0 || pending || nf || got != sizeof back || back[0] != 'a' + 7 || r != NULL;
    if (iopilot_es_close(es) != 0) bad = 1;
    close(fd);
    close(side);
    printf("engine %d operations, read back %zu bytes\n", ENGINE_OPS + 2, got);
    return bad ? 97 : 0;
}

/* Links planted under the names the runtime will use must not be followed. */
static int plant(const char *victim) {
    char stem[4400], link[4500];
    own_stem(stem, sizeof stem);
    const char *suffixes[] = {".json", ".json.tmp"};
    for (int i = 0; i < 2; i++) {
        snprintf(link, sizeof link, "%s%s", stem, suffixes[i]);
        if (symlink(victim, link) != 0 && errno != ENOENT) perror(link);
    }
    int fd = make("planted.dat");
    small_writes(fd, 1000);
    close(fd);
    printf("planted\n");
    return 0;
}

/* The record file replaced by a FIFO nobody reads: writing must not hang. */
static int fifo(void) {
    char stem[4400], rec[4500];
    own_stem(stem, sizeof stem);
    snprintf(rec, sizeof rec, "%s.rec", stem);
    if (unlink(rec) == 0 && mkfifo(rec, 0644) != 0) return 95;
    int fd = make("fifo.dat");
    small_writes(fd, 20000);
    close(fd);
    printf("fifo\n");
    return 0;
}

/* Killed after the first buffer reached the disk: it must still be there. */
static int killself(void) {
    int fd = make("killed.dat");
    small_writes(fd, 10000);
    fsync(fd);
    printf("killing\n");
    fflush(stdout);
    raise(SIGKILL);
    return 96;
}

/* More asynchronous requests in flight than the runtime's table holds: the
 * ones it cannot follow are counted as an overflow, never lost silently. */
#define NAIO 1100
static int many_aio(void) {
    int fd = make("aio.dat");
    static struct aiocb cb[NAIO];
    static char buf[NAIO][16];
    for (int i = 0; i < NAIO; i++) {
        memset(buf[i], 'a' + i % 26, sizeof buf[i]);
        cb[i].aio_fildes = fd;
        cb[i].aio_buf = buf[i];
        cb[i].aio_nbytes = sizeof buf[i];
        cb[i].aio_offset = (off_t)i * 16;
        if (aio_write(&cb[i]) != 0) return 98;
    }
    int done = 0;
    for (int i = 0; i < NAIO; i++) {
        const struct aiocb *one[1] = {&cb[i]};
        while (aio_error(&cb[i]) == EINPROGRESS) aio_suspend(one, 1, NULL);
        done += aio_return(&cb[i]) == 16;
    }
    close(fd);
    printf("aio %d\n", done);
    return 0;
}

/* The trace directory moved away under a running program. */
static int trace_gone(void) {
    const char *tdir = getenv("IOPILOT_TRACE_DIR");
    char moved[4200];
    snprintf(moved, sizeof moved, "%s.moved", tdir ? tdir : "/nonexistent");
    if (tdir && rename(tdir, moved) != 0) return 97;
    int fd = make("gone.dat");
    small_writes(fd, 20000);
    close(fd);
    printf("gone\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: faults CASE DIR [ARG]\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[2]);
    const char *c = argv[1];
    if (!strcmp(c, "closeall") || !strcmp(c, "close_range") || !strcmp(c, "closefrom"))
        return close_all(!strcmp(c, "closeall") ? "loop" : c);
    if (!strcmp(c, "rlimit")) return rlimit(0);
    if (!strcmp(c, "rlimit_hard")) return rlimit(1);
    if (!strcmp(c, "signals")) return signals(argc > 3 ? atoi(argv[3]) : 400000);
    if (!strcmp(c, "cancel")) return cancel();
    if (!strcmp(c, "threads64")) return threads64();
    if (!strcmp(c, "plant") && argc > 3) return plant(argv[3]);
    if (!strcmp(c, "fifo")) return fifo();
    if (!strcmp(c, "killself")) return killself();
    if (!strcmp(c, "trace_gone")) return trace_gone();
    if (!strcmp(c, "aio")) return many_aio();
    if (!strcmp(c, "engine")) return engine();
    fprintf(stderr, "faults: unknown case %s\n", c);
    return 2;
}
