/* Random operation sequences for the runtime's write-behind
 * (IOPILOT_ASYNC=1): run the same sequences with and without it and compare
 * what this program prints.
 *
 *   behind_property WORK SEED FIRST COUNT [--drop LIST] [--without KINDS] [--list]
 *
 * Sequence i (FIRST <= i < FIRST + COUNT) is made from SEED and i alone,
 * before it runs, and runs in WORK/d(i % 8), emptied before and after it
 * (eight names: the runtime keeps counters per file name, and every child
 * it forks writes them all).  Its operations: open, write, pwrite, lseek, ftruncate, stat,
 * statx, fstat, link, rename, unlink, dup, dup2, read, pread, fsync, close,
 * fcntl(F_SETFL), a write across RLIMIT_FSIZE, a write from memory that is
 * not there, fork (the child makes a few operations), a hand-off to a child
 * that reads the file once the parent has written and said so through a
 * pipe, 1-4 threads on their own descriptors and regions of one file, and
 * last a child killed with SIGTERM after it wrote.
 *
 * stdout: per operation one line (operation, arguments, result, errno,
 * the descriptor's position afterwards, a hash of the bytes read); per
 * sequence the size, link count and hash of every file.  Nothing in it
 * depends on time, process ids or descriptor numbers, so two runs print the
 * same.  --drop LIST leaves out operations ("3" the fourth, "5.1" the
 * second of the fifth's own); --without KINDS (comma-separated names) makes
 * none of those kinds; --list prints the sequence instead of running it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "behind_property.h"

static int without[NKINDS];

/* ------------------------------------------------------------------ */
/* Making a sequence: splitmix64 from the seed and the sequence number. */

static uint64_t rng;
static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static uint64_t next(void) { return mix(rng += 0x9e3779b97f4a7c15ULL); }
static int rnd(int n) { return (int)(next() % (uint64_t)n); }

static uint32_t gen_len(void) {
    int k = rnd(20);
    if (k < 9) return 1 + rnd(300);
    if (k < 12) return 4096;
    if (k < 18) return 1 + rnd(20000);
    return MAXLEN - rnd(3000);
}

static int64_t gen_off(void) {
    static const int64_t some[] = {0, 1, 100, 4095, 4096, 5000, 65536, 100000};
    return rnd(2) ? some[rnd(8)] : rnd(20000);
}

static int gen_flags(void) {
    int k = rnd(10), f = k < 6 ? O_RDWR : k < 9 ? O_WRONLY : O_RDONLY;
    if (rnd(20) < 17) f |= O_CREAT;
    if (rnd(10) < 4) f |= O_TRUNC;
    if (rnd(20) < 3) f |= O_APPEND;
    return f;
}

static int other_slot(int s) { return (s + 1 + rnd(NSLOTS - 1)) % NSLOTS; }

/* The slots the sequence has opened so far, as the generator sees it (an
 * open may fail when it runs): most operations pick one of those. */
static unsigned gen_open, gen_names;
/* One of ``n``, from the set ``mask`` most of the time when it has any. */
static int pick(unsigned mask, int n, int tenths) {
    if (mask && rnd(10) < tenths) {
        int k;
        do k = rnd(n);
        while (!(mask >> k & 1));
        return k;
    }
    return rnd(n);
}
static int gen_name(void) { return pick(gen_names, NNAMES, 8); }
static int gen_slot(void) { return pick(gen_open, NSLOTS, 9); }

static void gen_simple(sop *o, int kind) {
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->slot = gen_slot();
    o->slot2 = other_slot(o->slot);
    o->name = gen_name();
    o->name2 = rnd(NNAMES);
    o->pat = (uint32_t)next();
    switch (kind) {
    case K_OPEN: o->flags = gen_flags(); break;
    case K_WRITE: o->len = gen_len(); break;
    case K_PWRITE: o->len = gen_len(); o->off = gen_off(); break;
    case K_LSEEK:
        o->whence = rnd(3);
        o->off = o->whence == SEEK_SET ? gen_off() : rnd(5200) - 200;
        break;
    case K_FTRUNCATE: o->off = rnd(2) ? gen_off() : rnd(300); break;
    case K_READ: o->len = gen_len(); break;
    case K_PREAD: o->len = gen_len(); o->off = gen_off(); break;
    case K_SETFL: o->flags = rnd(3) ? O_APPEND : 0; break;
    case K_FSIZE:
        o->off = rnd(3) ? rnd(20000) : -1; /* -1: at the position */
        o->len = 1000 + rnd(8000);
        o->lim = rnd(4) ? (o->off < 0 ? 0 : o->off) + rnd((int)o->len) : rnd(20000);
        break;
    case K_EFAULT:
        o->off = rnd(2) ? gen_off() : -1;
        o->len = 1 + rnd(5000);
        break;
    case K_KILL: o->off = gen_off(); o->len = gen_len(); break;
    default: break;
    }
    if (kind == K_OPEN) gen_open |= 1u << o->slot;
    if ((kind == K_OPEN && (o->flags & O_CREAT)) || kind == K_LINK || kind == K_RENAME)
        gen_names |= 1u << (kind == K_OPEN ? o->name : o->name2);
    if (kind == K_DUP || kind == K_DUP2) gen_open |= 1u << o->slot2;
    if (kind == K_CLOSE) gen_open &= ~(1u << o->slot);
}

static int draw(const int *w, int n) {
    int total = 0;
    for (int k = 0; k < n; k++) total += without[k] ? 0 : w[k];
    if (!total) return -1;
    int x = rnd(total);
    for (int k = 0; k < n; k++) {
        if (without[k]) continue;
        if (x < w[k]) return k;
        x -= w[k];
    }
    return -1;
}

static const int fork_w[NKINDS] = {
    [K_OPEN] = 2, [K_WRITE] = 4, [K_PWRITE] = 3, [K_LSEEK] = 2, [K_READ] = 2, [K_PREAD] = 2,
    [K_FSTAT] = 2, [K_STAT] = 1, [K_FTRUNCATE] = 1, [K_CLOSE] = 1, [K_FSYNC] = 1};
static const int pipe_w[NKINDS] = {[K_WRITE] = 4, [K_PWRITE] = 3, [K_FTRUNCATE] = 1,
                                   [K_LSEEK] = 1};
static const int thread_w[NKINDS] = {[K_PWRITE] = 4, [K_WRITE] = 3, [K_PREAD] = 3,
                                     [K_FSYNC] = 1};

static void gen_seq(uint64_t seed, long idx, seq *s) {
    rng = mix(mix(seed) + (uint64_t)idx);
    gen_open = gen_names = 0;
    memset(s, 0, sizeof *s);
    int n = 4 + rnd(16);
    /* The first operation opens a file, as most programs' do. */
    gen_simple(&s->ops[s->n].o, K_OPEN);
    s->ops[s->n].o.slot = 0;
    s->ops[s->n].o.flags = O_RDWR | O_CREAT | O_TRUNC;
    gen_open = 1;
    gen_names = 1u << s->ops[s->n].o.name;
    s->n++;
    for (int i = 1; i < n; i++) {
        int kind = draw(weight, NKINDS);
        if (kind < 0) break;
        op *o = &s->ops[s->n++];
        gen_simple(&o->o, kind);
        if (kind == K_FORK || kind == K_PIPE) {
            o->nsub = 1 + rnd(4);
            for (int j = 0; j < o->nsub; j++) {
                int k = draw(kind == K_FORK ? fork_w : pipe_w, NKINDS);
                if (k < 0) k = K_FSTAT;
                gen_simple(&o->sub[j], k);
                if (kind == K_PIPE) o->sub[j].slot = o->o.slot; /* the file the child reads */
            }
        } else if (kind == K_THREADS) {
            int threads = 1 + rnd(4);
            o->o.slot2 = threads;
            for (int t = 0; t < threads; t++) {
                int per = 2 + rnd(3);
                for (int j = 0; j < per && o->nsub < MAXSUB; j++) {
                    int k = draw(thread_w, NKINDS);
                    if (k < 0) k = K_PREAD;
                    sop *u = &o->sub[o->nsub++];
                    gen_simple(u, k);
                    u->thread = t;
                    u->slot = 0;
                    if (u->len > MAXLEN) u->len = MAXLEN - rnd(3000);
                    u->off = rnd(REGION - (int)u->len);
                }
            }
        }
    }
    if (!without[K_KILL] && rnd(100) < 5) gen_simple(&s->ops[s->n++].o, K_KILL);
}

/* --drop LIST: "3" drops operation 3, "5.1" the second of operation 5's own. */
static void apply_drops(seq *s, const char *list) {
    const char *p = list;
    while (p && *p) {
        char *end;
        long i = strtol(p, &end, 10), j = -1;
        if (*end == '.') j = strtol(end + 1, &end, 10);
        if (i >= 0 && i < s->n) {
            if (j < 0)
                s->ops[i].dropped = 1;
            else if (j < s->ops[i].nsub)
                s->ops[i].sub_dropped[j] = 1;
        }
        p = *end == ',' ? end + 1 : NULL;
    }
}

/* ------------------------------------------------------------------ */
/* Output: straight to stdout, or into a thread's own text. */

typedef struct {
    char *buf;
    size_t len, cap;
} text;

static void say(text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (!t) {
        vprintf(fmt, ap);
    } else {
        char line[512];
        int k = vsnprintf(line, sizeof line, fmt, ap);
        if (k > (int)sizeof line - 1) k = (int)sizeof line - 1;
        if (t->len + (size_t)k + 1 > t->cap) {
            t->cap = (t->cap + (size_t)k + 1) * 2;
            t->buf = realloc(t->buf, t->cap);
            if (!t->buf) abort();
        }
        memcpy(t->buf + t->len, line, (size_t)k + 1);
        t->len += (size_t)k;
    }
    va_end(ap);
}

static const char *flag_text(int f) {
    static char b[4][64];
    static int k;
    k = (k + 1) % 4;
    int acc = f & O_ACCMODE;
    snprintf(b[k], sizeof b[k], "%s%s%s%s", acc == O_RDWR ? "rw" : acc == O_WRONLY ? "w" : "r",
             f & O_CREAT ? "|creat" : "", f & O_TRUNC ? "|trunc" : "", f & O_APPEND ? "|append" : "");
    return b[k];
}

static const char *whence_text(int w) { return w == SEEK_SET ? "set" : w == SEEK_CUR ? "cur" : "end"; }

/* What an operation is, without its result. */
static void describe(const sop *o, char *b, size_t n) {
    const char *k = kind_name[o->kind];
    switch (o->kind) {
    case K_OPEN: snprintf(b, n, "open s%d f%d %s", o->slot, o->name, flag_text(o->flags)); break;
    case K_WRITE: snprintf(b, n, "write s%d len %u", o->slot, o->len); break;
    case K_READ: snprintf(b, n, "read s%d len %u", o->slot, o->len); break;
    case K_PWRITE:
    case K_PREAD:
        snprintf(b, n, "%s s%d len %u at %lld", k, o->slot, o->len, (long long)o->off);
        break;
    case K_LSEEK:
        snprintf(b, n, "lseek s%d %lld %s", o->slot, (long long)o->off, whence_text(o->whence));
        break;
    case K_FTRUNCATE: snprintf(b, n, "ftruncate s%d %lld", o->slot, (long long)o->off); break;
    case K_STAT:
    case K_STATX:
    case K_UNLINK: snprintf(b, n, "%s f%d", k, o->name); break;
    case K_LINK:
    case K_RENAME: snprintf(b, n, "%s f%d f%d", k, o->name, o->name2); break;
    case K_DUP:
    case K_DUP2: snprintf(b, n, "%s s%d to s%d", k, o->slot, o->slot2); break;
    case K_SETFL: snprintf(b, n, "setfl s%d %s", o->slot, o->flags ? "append" : "0"); break;
    case K_FSIZE:
        snprintf(b, n, "fsize s%d limit %lld len %u at %lld", o->slot, (long long)o->lim, o->len,
                 (long long)o->off);
        break;
    case K_EFAULT: snprintf(b, n, "efault s%d len %u at %lld", o->slot, o->len, (long long)o->off); break;
    case K_FORK: snprintf(b, n, "fork"); break;
    case K_PIPE: snprintf(b, n, "pipe hand-off s%d", o->slot); break;
    case K_THREADS: snprintf(b, n, "threads %d on f%d", o->slot2, o->name); break;
    case K_KILL:
        snprintf(b, n, "kill a child after its write f%d len %u at %lld", o->name, o->len,
                 (long long)o->off);
        break;
    default: snprintf(b, n, "%s s%d", k, o->slot); break;
    }
}

/* ------------------------------------------------------------------ */
/* Running a sequence. */

static char work[4000], dir[4096];
static char *bad; /* memory that is not there: PROT_NONE */

typedef struct {
    int fd[NSLOTS];
    int name[NSLOTS]; /* what the slot was opened as (-1: not open) */
} state;

static const char *path_of(int name) {
    static __thread char p[4][4200];
    static __thread int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/f%d", dir, name);
    return p[k];
}

static uint32_t fnv32(uint32_t h, const unsigned char *b, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
    return h;
}
#define FNV32 2166136261u

/* The hash of what reading ``fd`` to its end gives; ``total``: how much. */
static uint32_t hash_rest(int fd, long *total) {
    static __thread unsigned char buf[1 << 16];
    uint32_t h = FNV32;
    ssize_t r;
    *total = 0;
    while ((r = read(fd, buf, sizeof buf)) > 0) {
        h = fnv32(h, buf, (size_t)r);
        *total += r;
    }
    return h;
}

static void fill(unsigned char *b, size_t n, uint32_t pat) {
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(pat + i * 131 + (i >> 9) * 7 + (pat >> 24));
}

static void result(text *t, const char *prefix, const sop *o, long r, int e, int fd,
                   const char *extra) {
    char what[160];
    describe(o, what, sizeof what);
    say(t, "%s%s = %ld", prefix, what, r);
    if (r < 0) say(t, " e%d", e);
    if (extra && *extra) say(t, " %s", extra);
    if (fd >= 0) {
        errno = 0;
        long long p = (long long)lseek(fd, 0, SEEK_CUR);
        if (p < 0)
            say(t, " pos -1 e%d", errno);
        else
            say(t, " pos %lld", p);
    }
    say(t, "\n");
}

static void close_slot(state *s, int k) {
    s->fd[k] = -1;
    s->name[k] = -1;
}

/* Operations on this process's slots and names; ``t`` collects a thread's
 * lines, ``base`` is its region. */
static void run_simple(state *s, const sop *o, text *t, const char *prefix, int64_t base) {
    static __thread unsigned char buf[MAXLEN + 16];
    char extra[160] = "";
    int fd = s->fd[o->slot];
    long r = 0;
    errno = 0;
    switch (o->kind) {
    case K_OPEN:
        if (fd >= 0) { /* the slot's old descriptor first */
            long c = close(fd);
            snprintf(extra, sizeof extra, "(closed old = %ld%s)", c, c < 0 ? " error" : "");
            close_slot(s, o->slot);
        }
        errno = 0;
        r = open(path_of(o->name), o->flags, 0644);
        if (r >= 0) {
            s->fd[o->slot] = (int)r;
            s->name[o->slot] = o->name;
            fd = (int)r;
            r = 0; /* the number itself depends on what the process holds */
        }
        break;
    case K_WRITE:
        fill(buf, o->len, o->pat);
        if (t) { /* a thread writes in its own region */
            lseek(fd, base + o->off, SEEK_SET);
            errno = 0;
        }
        r = write(fd, buf, o->len);
        break;
    case K_PWRITE:
        fill(buf, o->len, o->pat);
        r = pwrite(fd, buf, o->len, base + o->off);
        break;
    case K_READ:
    case K_PREAD:
        memset(buf, 0, o->len);
        r = o->kind == K_READ ? read(fd, buf, o->len) : pread(fd, buf, o->len, base + o->off);
        if (r > 0) snprintf(extra, sizeof extra, "h %08x", fnv32(FNV32, buf, (size_t)r));
        break;
    case K_LSEEK: r = lseek(fd, o->off, o->whence); break;
    case K_FTRUNCATE: r = ftruncate(fd, o->off); break;
    case K_STAT:
    case K_FSTAT: {
        struct stat sb;
        r = o->kind == K_STAT ? stat(path_of(o->name), &sb) : fstat(fd, &sb);
        if (r == 0)
            snprintf(extra, sizeof extra, "size %lld nlink %lu %s", (long long)sb.st_size,
                     (unsigned long)sb.st_nlink, S_ISREG(sb.st_mode) ? "file" : "other");
        if (o->kind == K_STAT) fd = -1;
        break;
    }
    case K_STATX: {
        struct statx sx;
        r = statx(AT_FDCWD, path_of(o->name), 0, STATX_SIZE | STATX_NLINK, &sx);
        if (r == 0)
            snprintf(extra, sizeof extra, "size %llu nlink %u", (unsigned long long)sx.stx_size,
                     sx.stx_nlink);
        fd = -1;
        break;
    }
    case K_LINK:
        r = link(path_of(o->name), path_of(o->name2));
        fd = -1;
        break;
    case K_RENAME:
        r = rename(path_of(o->name), path_of(o->name2));
        fd = -1;
        break;
    case K_UNLINK:
        r = unlink(path_of(o->name));
        fd = -1;
        break;
    case K_DUP: {
        int old = s->fd[o->slot2];
        if (old >= 0) {
            long c = close(old);
            snprintf(extra, sizeof extra, "(closed old = %ld)", c);
            close_slot(s, o->slot2);
        }
        errno = 0;
        r = fd >= 0 ? dup(fd) : -1;
        if (fd < 0) errno = EBADF;
        if (r >= 0) {
            s->fd[o->slot2] = (int)r;
            s->name[o->slot2] = s->name[o->slot];
            r = 0;
        }
        break;
    }
    case K_DUP2: { /* onto the other slot's descriptor, or a fixed number */
        int to = s->fd[o->slot2] >= 0 ? s->fd[o->slot2] : 200 + o->slot2;
        r = fd >= 0 ? dup2(fd, to) : -1;
        if (fd < 0) errno = EBADF;
        if (r >= 0) {
            if (fd != to) {
                s->fd[o->slot2] = to;
                s->name[o->slot2] = s->name[o->slot];
            }
            r = 0;
        }
        break;
    }
    case K_FSYNC: r = fsync(fd); break;
    case K_CLOSE:
        r = close(fd);
        if (fd >= 0) close_slot(s, o->slot);
        fd = -1;
        break;
    case K_SETFL: r = fcntl(fd, F_SETFL, o->flags); break;
    case K_FSIZE: {
        struct rlimit was, lim;
        getrlimit(RLIMIT_FSIZE, &was);
        lim = was;
        lim.rlim_cur = (rlim_t)o->lim;
        setrlimit(RLIMIT_FSIZE, &lim);
        fill(buf, o->len, o->pat);
        errno = 0;
        r = o->off < 0 ? write(fd, buf, o->len) : pwrite(fd, buf, o->len, o->off);
        int e = errno;
        setrlimit(RLIMIT_FSIZE, &was);
        errno = e;
        break;
    }
    case K_EFAULT:
        r = o->off < 0 ? write(fd, bad, o->len) : pwrite(fd, bad, o->len, o->off);
        break;
    default: break;
    }
    result(t, prefix, o, r, errno, fd, extra);
}

static void flush_out(void) { fflush(stdout); }

static void wait_child(pid_t pid, const char *prefix) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status))
        printf("%schild killed by signal %d\n", prefix, WTERMSIG(status));
    else
        printf("%schild exit %d\n", prefix, WEXITSTATUS(status));
}

static void run_fork(state *s, const op *o) {
    flush_out();
    pid_t pid = fork();
    if (pid == 0) {
        state c = *s;
        for (int j = 0; j < o->nsub; j++)
            if (!o->sub_dropped[j]) run_simple(&c, &o->sub[j], NULL, "  child: ", 0);
        flush_out();
        _exit(0);
    }
    wait_child(pid, "  ");
}

/* The child reads the slot's file by its name once the parent has written
 * and said so through a pipe. */
static void run_pipe(state *s, const op *o) {
    int p[2];
    if (pipe(p) != 0) abort();
    int name = s->name[o->o.slot] >= 0 ? s->name[o->o.slot] : o->o.name;
    flush_out();
    pid_t pid = fork();
    if (pid == 0) {
        close(p[1]);
        char c;
        if (read(p[0], &c, 1) != 1) _exit(3);
        int fd = open(path_of(name), O_RDONLY);
        if (fd < 0) {
            printf("  reader: open f%d = -1 e%d\n", name, errno);
        } else {
            long total;
            uint32_t h = hash_rest(fd, &total);
            struct stat sb;
            long st = stat(path_of(name), &sb);
            printf("  reader: f%d read %ld h %08x stat %ld size %lld\n", name, total, h, st,
                   st == 0 ? (long long)sb.st_size : -1LL);
            close(fd);
        }
        flush_out();
        _exit(0);
    }
    close(p[0]);
    for (int j = 0; j < o->nsub; j++)
        if (!o->sub_dropped[j]) run_simple(s, &o->sub[j], NULL, "  parent: ", 0);
    flush_out();
    if (write(p[1], "r", 1) != 1) abort();
    close(p[1]);
    wait_child(pid, "  ");
}

typedef struct {
    const op *o;
    int t;
    text out;
} thread_arg;

static void *thread_main(void *arg) {
    thread_arg *a = arg;
    state s;
    for (int k = 0; k < NSLOTS; k++) close_slot(&s, k);
    int fd = open(path_of(a->o->o.name), O_RDWR);
    if (fd < 0) {
        say(&a->out, "  t%d: open = -1 e%d\n", a->t, errno);
        return NULL;
    }
    for (int k = 0; k < NSLOTS; k++) s.fd[k] = fd; /* every slot is the thread's descriptor */
    char prefix[32];
    snprintf(prefix, sizeof prefix, "  t%d: ", a->t);
    for (int j = 0; j < a->o->nsub; j++)
        if (!a->o->sub_dropped[j] && a->o->sub[j].thread == a->t)
            run_simple(&s, &a->o->sub[j], &a->out, prefix, (int64_t)a->t * REGION);
    errno = 0;
    long c = close(fd);
    say(&a->out, "  t%d: close = %ld", a->t, c);
    if (c < 0) say(&a->out, " e%d", errno);
    say(&a->out, "\n");
    return NULL;
}

static void run_threads(const op *o) {
    int threads = o->o.slot2;
    /* The file covers every region first, so no thread's read meets an end
     * of file that another thread's write moves. */
    int fd = open(path_of(o->o.name), O_RDWR | O_CREAT, 0644);
    if (fd < 0) {
        printf("  open = -1 e%d\n", errno);
        return;
    }
    long r = pwrite(fd, "E", 1, (off_t)threads * REGION - 1);
    errno = 0;
    long c = close(fd);
    printf("  extend = %ld close = %ld", r, c);
    if (c < 0) printf(" e%d", errno);
    printf("\n");
    thread_arg a[4];
    pthread_t tid[4];
    for (int t = 0; t < threads; t++) {
        a[t] = (thread_arg){o, t, {NULL, 0, 0}};
        if (pthread_create(&tid[t], NULL, thread_main, &a[t]) != 0) abort();
    }
    for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
    for (int t = 0; t < threads; t++) {
        if (a[t].out.buf) fputs(a[t].out.buf, stdout);
        free(a[t].out.buf);
    }
}

/* A child writes, says so, and is killed by SIGTERM's default action. */
static void run_kill(const op *o) {
    int p[2];
    if (pipe(p) != 0) abort();
    flush_out();
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        static unsigned char buf[MAXLEN];
        fill(buf, o->o.len, o->o.pat);
        int fd = open(path_of(o->o.name), O_WRONLY | O_CREAT, 0644);
        if (fd >= 0) {
            if (pwrite(fd, buf, o->o.len, o->o.off) < 0) _exit(4);
            if (write(fd, buf + 1, o->o.len / 2) < 0) _exit(4);
        }
        if (write(p[1], "w", 1) != 1) _exit(5);
        for (;;) pause();
    }
    close(p[1]);
    char c;
    long r = read(p[0], &c, 1);
    close(p[0]);
    kill(pid, SIGTERM);
    printf("  child said %ld\n", r);
    wait_child(pid, "  ");
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every file of the directory: size, links, hash (all before any goes). */
static void digest(int clean) {
    DIR *d = opendir(dir);
    if (!d) return;
    char *names[64];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64)
        if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], by_name);
    char p[4400];
    for (int i = 0; i < n && !clean; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        struct stat sb;
        if (lstat(p, &sb) != 0) continue;
        int fd = open(p, O_RDONLY);
        long total = 0;
        uint32_t h = fd >= 0 ? hash_rest(fd, &total) : FNV32;
        if (fd >= 0) close(fd);
        printf("  file %s size %lld read %ld nlink %lu h %08x\n", names[i], (long long)sb.st_size,
               total, (unsigned long)sb.st_nlink, h);
    }
    for (int i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
        free(names[i]);
    }
}

static void run_seq(long idx, seq *s) {
    snprintf(dir, sizeof dir, "%s/d%ld", work, idx % 8);
    digest(1); /* a run that died left files here */
    mkdir(dir, 0755);
    printf("seq %ld\n", idx);
    state st;
    for (int k = 0; k < NSLOTS; k++) close_slot(&st, k);
    char prefix[16];
    for (int i = 0; i < s->n; i++) {
        op *o = &s->ops[i];
        if (o->dropped) continue;
        snprintf(prefix, sizeof prefix, "%d ", i);
        switch (o->o.kind) {
        case K_FORK:
        case K_PIPE:
        case K_THREADS:
        case K_KILL: {
            char what[160];
            describe(&o->o, what, sizeof what);
            printf("%s%s\n", prefix, what);
            if (o->o.kind == K_FORK) run_fork(&st, o);
            if (o->o.kind == K_PIPE) run_pipe(&st, o);
            if (o->o.kind == K_THREADS) run_threads(o);
            if (o->o.kind == K_KILL) run_kill(o);
            break;
        }
        default: run_simple(&st, &o->o, NULL, prefix, 0);
        }
    }
    for (int k = 0; k < NSLOTS; k++)
        if (st.fd[k] >= 0) {
            errno = 0;
            long r = close(st.fd[k]);
            printf("end close s%d = %ld", k, r);
            if (r < 0) printf(" e%d", errno);
            printf("\n");
        }
    digest(0);
    flush_out(); /* a process that dies keeps every sequence before this one */
}

static void list_seq(long idx, const seq *s) {
    char what[160];
    printf("seq %ld\n", idx);
    for (int i = 0; i < s->n; i++) {
        const op *o = &s->ops[i];
        if (o->dropped) continue;
        describe(&o->o, what, sizeof what);
        printf("%d %s\n", i, what);
        for (int j = 0; j < o->nsub; j++) {
            if (o->sub_dropped[j]) continue;
            describe(&o->sub[j], what, sizeof what);
            if (o->o.kind == K_THREADS)
                printf("  %d.%d t%d: %s\n", i, j, o->sub[j].thread, what);
            else
                printf("  %d.%d %s\n", i, j, what);
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s WORK SEED FIRST COUNT [--drop LIST] [--without KINDS] [--list]\n",
                argv[0]);
        return 2;
    }
    uint64_t seed = strtoull(argv[2], NULL, 10);
    long first = strtol(argv[3], NULL, 10), count = strtol(argv[4], NULL, 10);
    const char *drops = NULL;
    int list = 0;
    for (int i = 5; i < argc; i++) {
        if (!strcmp(argv[i], "--drop") && i + 1 < argc) {
            drops = argv[++i];
        } else if (!strcmp(argv[i], "--without") && i + 1 < argc) {
            char *names = strdup(argv[++i]);
            for (char *w = strtok(names, ","); w; w = strtok(NULL, ","))
                for (int k = 0; k < NKINDS; k++)
                    if (!strcmp(w, kind_name[k])) without[k] = 1;
            free(names);
        } else if (!strcmp(argv[i], "--list")) {
            list = 1;
        } else {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    snprintf(work, sizeof work, "%s", argv[1]);
    bad = mmap(NULL, 1 << 16, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    signal(SIGXFSZ, SIG_IGN); /* a write across RLIMIT_FSIZE fails with EFBIG */
    if (count == 1) setvbuf(stdout, NULL, _IOLBF, 0); /* one sequence: every line, even if it dies */
    static seq s;
    for (long i = first; i < first + count; i++) {
        gen_seq(seed, i, &s);
        if (drops) apply_drops(&s, drops);
        if (list)
            list_seq(i, &s);
        else
            run_seq(i, &s);
    }
    printf("done\n");
    return 0;
}
