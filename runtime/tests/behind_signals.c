/* A program that writes and is then ended by a signal, for write-behind
 * (IOPILOT_ASYNC=1): the tests run it untraced and traced and compare how it
 * ended and what it left.
 *
 *   behind_signals DIR CASE
 *
 * Every case but "query" writes DIR/data.bin: one 4 KiB block, then
 * "started" on stdout, then (after a line on stdin) 255 more blocks, then
 * "ready".  In between the test may hold the runtime's background thread,
 * so that the blocks are still pending when the signal comes.  Then:
 *   wait          read stdin: a signal from outside ends it, or EOF does
 *   raise:N       raise(N)
 *   abort         abort()
 *   segv bus fpe ill
 *                 a NULL store, a page of a mapping beyond its file's end,
 *                 an integer division by zero, an undefined instruction
 *   handler       its own SIGTERM handler (DIR/handled.txt, _exit(3)); wait
 *   abort_handler its own SIGABRT handler (DIR/handled.txt), which returns
 *   segv_handler  its own SIGSEGV handler (DIR/handled.txt), which puts the
 *                 default action back with signal() and returns
 *   dfl_again     its own SIGTERM handler, then signal(SIGTERM, SIG_DFL),
 *                 printing what it is shown; wait
 *   query         no data: print every disposition, change some with each
 *                 call that can, print them again
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Old calls real programs still make: each is wrapped on its own. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
extern __sighandler_t bsd_signal(int, __sighandler_t);

static char dir[2048];
static char handled_path[2100];

static int make(const char *name) {
    char path[2100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
    if (fd < 0) {
        perror(path);
        exit(90);
    }
    return fd;
}

static void block(int fd, int i) {
    char b[4096];
    memset(b, 'a' + i % 26, sizeof b);
    b[0] = (char)i; /* each block its own */
    if (write(fd, b, sizeof b) != (ssize_t)sizeof b) exit(91);
}

/* "started" and "ready" by a raw system call: through write() a line to a
 * pipe waits for the pending writes (it may tell a reader they are there),
 * and the test holds them back meanwhile. */
static void say(const char *line) {
    char b[64];
    int n = snprintf(b, sizeof b, "%s\n", line);
    fflush(stdout);
    if (syscall(SYS_write, 1, b, (size_t)n) != n) exit(94);
}

static void wait_for_line(void) {
    char c;
    while (read(0, &c, 1) == 1 && c != '\n') {
    }
}

/* The data file, left open: a close would wait for its writes. */
static void write_data(void) {
    int fd = make("data.bin");
    block(fd, 0); /* the background thread starts here */
    say("started");
    wait_for_line();
    for (int i = 1; i < 256; i++) block(fd, i);
    say("ready");
}

/* From a handler: left open, as a crashing program leaves it. */
static void write_handled(void) {
    int fd = open(handled_path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "handled\n", 8) != 8) _exit(93);
}

static void on_term(int sig) {
    (void)sig;
    write_handled();
    _exit(3);
}
/* A one-shot handler (SA_RESETHAND, as sysv_signal sets): the default
 * action is back when it runs, and it ends the process by the signal. */
static void on_term_again(int sig) {
    write_handled();
    raise(sig);
}
/* on_term_again as a one-shot handler, by sysv_signal or by sigaction. */
static void one_shot(int sysv) {
    if (sysv) {
        sysv_signal(SIGTERM, on_term_again);
        return;
    }
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_handler = on_term_again;
    a.sa_flags = SA_RESETHAND;
    sigaction(SIGTERM, &a, NULL);
}
static void on_abrt(int sig) {
    (void)sig;
    write_handled();
}
static void on_segv(int sig) {
    (void)sig;
    write_handled();
    signal(SIGSEGV, SIG_DFL); /* and return: the store faults again */
}

static int *volatile nowhere; /* NULL, unknown to the compiler */
static void segv(void) { *nowhere = 1; }

/* An empty file's first page: beyond its end. */
static volatile char *beyond_the_end(void) {
    int fd = make("bus.map");
    volatile char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) exit(92);
    return p;
}

static void fpe(void) {
    volatile int zero = 0, one = 1;
    volatile int q = one / zero;
    (void)q;
}

static const char *kind(void (*h)(int)) {
    if (h == SIG_DFL) return "DFL";
    if (h == SIG_IGN) return "IGN";
    if (h == SIG_HOLD) return "HOLD";
    if (h == SIG_ERR) return "ERR";
    if (h == on_term) return "on_term";
    if (h == on_term_again) return "on_term_again";
    return "other";
}

static void show(int sig) {
    struct sigaction q;
    memset(&q, 0, sizeof q);
    int r = sigaction(sig, NULL, &q);
    uint64_t mask;
    memcpy(&mask, &q.sa_mask, sizeof mask);
    printf("%d r=%d %s flags=%#x mask=%#llx restorer=%d\n", sig, r, r ? "-" : kind(q.sa_handler),
           (unsigned)q.sa_flags, (unsigned long long)mask, q.sa_restorer != NULL);
}

static void show_all(void) {
    for (int sig = 1; sig < NSIG; sig++) show(sig);
}

static int query(void) {
    show_all();
    printf("signal(USR1, on_term) was %s\n", kind(signal(SIGUSR1, on_term)));
    printf("signal(USR1, DFL) was %s\n", kind(signal(SIGUSR1, SIG_DFL)));
    printf("signal(USR1, DFL) again was %s\n", kind(signal(SIGUSR1, SIG_DFL)));
    printf("sysv_signal(USR2, DFL) was %s\n", kind(sysv_signal(SIGUSR2, SIG_DFL)));
    printf("bsd_signal(ALRM, DFL) was %s\n", kind(bsd_signal(SIGALRM, SIG_DFL)));
    printf("ssignal(PROF, DFL) was %s\n", kind(ssignal(SIGPROF, SIG_DFL)));
    sigset_t hup;
    sigemptyset(&hup);
    sigaddset(&hup, SIGHUP);
    sigprocmask(SIG_BLOCK, &hup, NULL);
    printf("sigset(HUP, DFL) was %s\n", kind(sigset(SIGHUP, SIG_DFL)));
    sigset_t now;
    sigprocmask(SIG_BLOCK, NULL, &now);
    printf("HUP blocked after sigset: %d\n", sigismember(&now, SIGHUP));
    printf("sigset(VTALRM, HOLD) was %s\n", kind(sigset(SIGVTALRM, SIG_HOLD)));
    printf("siginterrupt(QUIT, 1) = %d\n", siginterrupt(SIGQUIT, 1));
    show(SIGQUIT);
    printf("signal(QUIT, DFL) was %s\n", kind(signal(SIGQUIT, SIG_DFL)));
    struct sigaction a, old;
    memset(&a, 0, sizeof a);
    a.sa_handler = SIG_DFL;
    a.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESETHAND | SA_ONSTACK;
    sigemptyset(&a.sa_mask);
    sigaddset(&a.sa_mask, SIGHUP);
    sigaddset(&a.sa_mask, SIGKILL); /* the kernel keeps it out */
    memset(&old, 0, sizeof old);
    printf("sigaction(INT, DFL) = %d", sigaction(SIGINT, &a, &old));
    uint64_t m;
    memcpy(&m, &old.sa_mask, sizeof m);
    printf(", was %s flags=%#x mask=%#llx\n", kind(old.sa_handler), (unsigned)old.sa_flags,
           (unsigned long long)m);
    a.sa_handler = SIG_IGN;
    printf("sigaction(PIPE, IGN) = %d\n", sigaction(SIGPIPE, &a, NULL));
    show_all();
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: behind_signals DIR CASE\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    snprintf(handled_path, sizeof handled_path, "%s/handled.txt", dir);
    const char *c = argv[2];
    if (!strcmp(c, "query")) return query();

    if (!strcmp(c, "handler")) signal(SIGTERM, on_term);
    if (!strcmp(c, "abort_handler")) signal(SIGABRT, on_abrt);
    if (!strcmp(c, "segv_handler")) signal(SIGSEGV, on_segv);
    if (!strcmp(c, "oneshot") || !strcmp(c, "sysv")) {
        one_shot(!strcmp(c, "sysv"));
        show(SIGTERM);
        printf("signal(TERM, on_term_again) was %s\n", kind(signal(SIGTERM, on_term_again)));
        one_shot(!strcmp(c, "sysv")); /* signal() set a lasting one: one-shot again */
        fflush(stdout);
    }
    if (!strcmp(c, "dfl_again")) {
        signal(SIGTERM, on_term);
        printf("signal(TERM, DFL) was %s\n", kind(signal(SIGTERM, SIG_DFL)));
        show(SIGTERM);
    }
    volatile char *mapped = !strcmp(c, "bus") ? beyond_the_end() : NULL;
    write_data();
    if (!strncmp(c, "raise:", 6)) raise(atoi(c + 6));
    else if (!strcmp(c, "abort") || !strcmp(c, "abort_handler")) abort();
    else if (!strcmp(c, "segv") || !strcmp(c, "segv_handler")) segv();
    else if (mapped) mapped[0] = 1;
    else if (!strcmp(c, "fpe")) fpe();
    else if (!strcmp(c, "ill")) __builtin_trap();
    else wait_for_line(); /* wait, handler, dfl_again */
    printf("survived\n");
    return 0;
}
