/* The asynchronous I/O engine (include/iopilot_async.h): one queue and one
 * background thread per event set.
 *
 * One thread per set keeps the contract simple to state and to keep: the
 * operations of a set run in submission order, so a write is on the file
 * before a later read or fsync of the same descriptor runs, and nothing
 * needs per-file dependency tracking.  The queue is a linked list under one
 * mutex; the thread takes an operation, drops the lock for the system call,
 * and takes it again to account and to wake waiters. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../include/iopilot_async.h"
#include "../include/iopilot_place.h"

#define DEFAULT_CAP ((size_t)1 << 30)

typedef struct es_op {
    struct es_op *next;
    uint64_t id;
    int kind, fd, copied;
    int64_t offset;
    size_t n;
    char *buf;
    size_t *got;
    double queued; /* monotonic seconds */
} es_op;

/* A copy buffer given back: kept for the next write of that size or less,
 * so a program writing the same checkpoint every step does not pay for
 * fresh pages (a large malloc is a new mapping, faulted in page by page). */
#define SPARE_MIN ((size_t)64 << 10) /* smaller copies come cheaply from malloc's own lists */
typedef struct spare {
    struct spare *next;
    size_t size;
} spare;

struct iopilot_es {
    pthread_mutex_t mu;
    pthread_cond_t work; /* the thread waits for operations */
    pthread_cond_t done; /* callers wait for completions */
    es_op *head, *tail;
    uint64_t next_id;
    size_t pending;       /* queued + running */
    size_t copied_bytes;  /* held in copies not yet written */
    size_t cap;
    spare *spares;        /* buffers kept for reuse (the header sits in the buffer) */
    size_t spare_bytes;
    int stop;
    iopilot_es_failure *fails;
    size_t nfails, capfails;
    iopilot_es_stats st;
    pthread_t thread;
    int creator_cpu; /* the CPU of the thread that created the set (-1 unknown) */
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The tracer, when preloaded, records each operation with its queued, issued
 * and completed times (runtime/src/behind.c). */
typedef void (*event_hook)(int op, int fd, int64_t offset, size_t bytes, size_t done, int error,
                           double queued, double issued, double completed);
static event_hook hook;
static pthread_once_t hook_once = PTHREAD_ONCE_INIT;
/* Linked in (a program built with the runtime's sources), or preloaded. */
extern void iopilot_async_event(int op, int fd, int64_t offset, size_t bytes, size_t done,
                                int error, double queued, double issued, double completed)
    __attribute__((weak));
static void find_hook(void) {
    hook = iopilot_async_event ? iopilot_async_event
                               : (event_hook)dlsym(RTLD_DEFAULT, "iopilot_async_event");
}

static size_t cap_from_env(void) {
    const char *v = getenv("IOPILOT_ASYNC_MAX_BYTES");
    if (!v || !*v) return DEFAULT_CAP;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    unsigned long long unit = 1;
    if (*end == 'k' || *end == 'K') unit = 1ULL << 10;
    else if (*end == 'm' || *end == 'M') unit = 1ULL << 20;
    else if (*end == 'g' || *end == 'G') unit = 1ULL << 30;
    else if (*end) return DEFAULT_CAP;
    return x ? (size_t)(x * unit) : DEFAULT_CAP;
}

/* Run one operation; returns 0 or an errno, with *moved the bytes moved. */
static int perform(const es_op *o, size_t *moved) {
    size_t done = 0;
    if (o->kind == IOPILOT_ES_FSYNC) {
        *moved = 0;
        return fsync(o->fd) == 0 ? 0 : errno;
    }
    while (done < o->n) {
        ssize_t r = o->kind == IOPILOT_ES_WRITE
                        ? pwrite(o->fd, o->buf + done, o->n - done, o->offset + (int64_t)done)
                        : pread(o->fd, o->buf + done, o->n - done, o->offset + (int64_t)done);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            *moved = done;
            return errno;
        }
        if (r == 0) break; /* a read at the end of the file; a write that moved nothing */
        done += (size_t)r;
    }
    *moved = done;
    if (o->kind == IOPILOT_ES_WRITE && done < o->n) return ENOSPC;
    return 0;
}

/* This thread's CPU time, in seconds. */
static double thread_cpu(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *worker(void *arg) {
    iopilot_es *es = arg;
    pthread_setname_np(pthread_self(), "iopilot-engine"); /* in top -H, gdb and /proc */
    /* to the tracer: this thread is the engine's, where it may run */
    if (hook) hook(IOPILOT_ES_THREAD_START, es->creator_cpu, 0, 0, 0, 0, 0, 0, 0);
    pthread_mutex_lock(&es->mu);
    for (;;) {
        while (!es->head && !es->stop) pthread_cond_wait(&es->work, &es->mu);
        es_op *o = es->head;
        if (!o) break; /* stopping, and nothing left */
        es->head = o->next;
        if (!es->head) es->tail = NULL;
        pthread_mutex_unlock(&es->mu);

        double issued = now();
        size_t moved = 0;
        int err = perform(o, &moved);
        double completed = now();
        if (o->got && !err) *o->got = moved;
        if (hook)
            hook(o->kind, o->fd, o->offset, o->n, moved, err, o->queued, issued, completed);

        pthread_mutex_lock(&es->mu);
        es->st.busy_seconds += completed - issued;
        es->st.queued_seconds += issued - o->queued;
        es->st.completed++;
        if (o->kind == IOPILOT_ES_WRITE) es->st.bytes_written += moved;
        if (o->kind == IOPILOT_ES_READ) es->st.bytes_read += moved;
        if (err) {
            es->st.failed++;
            if (es->nfails == es->capfails) {
                size_t c = es->capfails ? 2 * es->capfails : 8;
                iopilot_es_failure *f = realloc(es->fails, c * sizeof *f);
                if (f) {
                    es->fails = f;
                    es->capfails = c;
                }
            }
            if (es->nfails < es->capfails)
                es->fails[es->nfails++] = (iopilot_es_failure){o->id, o->kind, o->fd, o->offset,
                                                               o->n, moved, err};
        }
        if (o->copied) es->copied_bytes -= o->n;
        es->pending--;
        pthread_cond_broadcast(&es->done);
        if (o->copied && o->n >= SPARE_MIN && es->spare_bytes + o->n <= es->cap) {
            spare *k = (spare *)o->buf; /* kept: the next copy of this size reuses its pages */
            k->size = o->n;
            k->next = es->spares;
            es->spares = k;
            es->spare_bytes += o->n;
            o->copied = 0;
        }
        pthread_mutex_unlock(&es->mu);
        if (o->copied) free(o->buf);
        free(o);
        pthread_mutex_lock(&es->mu);
    }
    pthread_mutex_unlock(&es->mu);
    if (hook) hook(IOPILOT_ES_THREAD_END, -1, 0, 0, 0, 0, 0, 0, thread_cpu());
    return NULL;
}

/* The set's thread, placed (iopilot_place.h): on a CPU of the caller's set
 * other than the caller's own, when it has another. */
static int start_thread(iopilot_es *es) {
    iopilot_place where;
    iopilot_place_choose(&where);
    es->creator_cpu = where.creator_cpu;
    pthread_attr_t a;
    pthread_attr_init(&a);
    iopilot_place_attr(&where, &a);
    int rc = pthread_create(&es->thread, &a, worker, es);
    pthread_attr_destroy(&a);
    if (rc == EINVAL && where.placed) /* a CPU gone offline meanwhile: where it would have run */
        rc = pthread_create(&es->thread, NULL, worker, es);
    return rc;
}

iopilot_es *iopilot_es_create(void) {
    pthread_once(&hook_once, find_hook);
    iopilot_es *es = calloc(1, sizeof *es);
    if (!es) return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* timeouts immune to clock changes */
    pthread_mutex_init(&es->mu, NULL);
    pthread_cond_init(&es->work, &ca);
    pthread_cond_init(&es->done, &ca);
    pthread_condattr_destroy(&ca);
    es->cap = cap_from_env();
    /* The thread takes no signal: the program's handlers run on its threads. */
    sigset_t all, was;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &was);
    int rc = start_thread(es);
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    if (rc) {
        pthread_cond_destroy(&es->work);
        pthread_cond_destroy(&es->done);
        pthread_mutex_destroy(&es->mu);
        free(es);
        errno = rc;
        return NULL;
    }
    return es;
}

static uint64_t submit(iopilot_es *es, int kind, int fd, char *buf, size_t n, int64_t offset,
                       int copied, size_t *got) {
    es_op *o = malloc(sizeof *o);
    if (!o) {
        errno = ENOMEM;
        return 0;
    }
    *o = (es_op){NULL, 0, kind, fd, copied, offset, n, buf, got, now()};
    pthread_mutex_lock(&es->mu);
    o->id = ++es->next_id;
    es->st.submitted++;
    es->pending++;
    if (es->tail) es->tail->next = o;
    else es->head = o;
    es->tail = o;
    pthread_cond_signal(&es->work);
    uint64_t id = o->id;
    pthread_mutex_unlock(&es->mu);
    return id;
}

static int usable(const iopilot_es *es, int fd, const void *buf, size_t n, int64_t offset) {
    if (!es || __atomic_load_n(&es->stop, __ATOMIC_ACQUIRE) || fd < 0 || offset < 0 ||
        (!buf && n)) {
        errno = EINVAL;
        return 0;
    }
    return 1;
}

uint64_t iopilot_es_write(iopilot_es *es, int fd, const void *buf, size_t n, int64_t offset,
                          int flags) {
    if (!usable(es, fd, buf, n, offset)) return 0;
    if (flags & IOPILOT_ES_NOCOPY) return submit(es, IOPILOT_ES_WRITE, fd, (char *)buf, n, offset,
                                                 0, NULL);
    /* Room for the copy: wait while the queue holds more than the cap
     * (never when nothing is queued, or one large write would wait forever). */
    double t0 = now();
    pthread_mutex_lock(&es->mu);
    while (es->copied_bytes && es->copied_bytes + n > es->cap)
        pthread_cond_wait(&es->done, &es->mu);
    es->copied_bytes += n;
    if (es->copied_bytes > es->st.max_queued_bytes) es->st.max_queued_bytes = es->copied_bytes;
    double t1 = now();
    es->st.wait_seconds += t1 - t0;
    char *copy = NULL;
    for (spare **k = &es->spares; *k; k = &(*k)->next) {
        if ((*k)->size >= n && (*k)->size <= 2 * n + 4096) { /* not much larger than needed */
            spare *got = *k;
            *k = got->next;
            es->spare_bytes -= got->size;
            copy = (char *)got;
            break;
        }
    }
    pthread_mutex_unlock(&es->mu);
    if (!copy) copy = malloc(n ? n : 1);
    if (copy) memcpy(copy, buf, n);
    double t2 = now();
    pthread_mutex_lock(&es->mu);
    es->st.copy_seconds += t2 - t1;
    if (!copy) es->copied_bytes -= n;
    pthread_mutex_unlock(&es->mu);
    if (!copy) {
        errno = ENOMEM;
        return 0;
    }
    uint64_t id = submit(es, IOPILOT_ES_WRITE, fd, copy, n, offset, 1, NULL);
    if (!id) {
        free(copy);
        pthread_mutex_lock(&es->mu);
        es->copied_bytes -= n;
        pthread_cond_broadcast(&es->done);
        pthread_mutex_unlock(&es->mu);
    }
    return id;
}

uint64_t iopilot_es_read(iopilot_es *es, int fd, void *buf, size_t n, int64_t offset,
                         size_t *got) {
    if (!usable(es, fd, buf, n, offset)) return 0;
    return submit(es, IOPILOT_ES_READ, fd, buf, n, offset, 0, got);
}

uint64_t iopilot_es_fsync(iopilot_es *es, int fd) {
    if (!usable(es, fd, NULL, 0, 0)) return 0;
    return submit(es, IOPILOT_ES_FSYNC, fd, NULL, 0, 0, 0, NULL);
}

int iopilot_es_wait(iopilot_es *es, double timeout, size_t *pending,
                    iopilot_es_failure *failures, size_t *nfailures) {
    if (!es || (failures && !nfailures)) {
        errno = EINVAL;
        return -1;
    }
    double t0 = now();
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    if (timeout > 0) {
        double whole = (double)(long long)timeout;
        deadline.tv_sec += (time_t)whole;
        deadline.tv_nsec += (long)((timeout - whole) * 1e9);
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&es->mu);
    while (es->pending && timeout != 0) {
        if (timeout < 0) {
            pthread_cond_wait(&es->done, &es->mu);
        } else if (pthread_cond_timedwait(&es->done, &es->mu, &deadline) == ETIMEDOUT) {
            break;
        }
    }
    size_t left = es->pending, nf = es->nfails;
    if (pending) *pending = left;
    if (nfailures) {
        size_t room = failures ? *nfailures : 0;
        if (failures && room) memcpy(failures, es->fails, (nf < room ? nf : room) * sizeof *failures);
        *nfailures = nf;
    }
    es->nfails = 0; /* reported */
    es->st.wait_seconds += now() - t0;
    pthread_mutex_unlock(&es->mu);
    return nf ? 2 : left ? 1 : 0;
}

void iopilot_es_get_stats(iopilot_es *es, iopilot_es_stats *out) {
    if (!es || !out) return;
    pthread_mutex_lock(&es->mu);
    *out = es->st;
    pthread_mutex_unlock(&es->mu);
}

int iopilot_es_close(iopilot_es *es) {
    if (!es) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&es->mu);
    __atomic_store_n(&es->stop, 1, __ATOMIC_RELEASE);
    pthread_cond_signal(&es->work);
    pthread_mutex_unlock(&es->mu);
    pthread_join(es->thread, NULL); /* it runs what is queued, then ends */
    int rc = es->nfails ? 2 : 0;
    while (es->spares) {
        spare *k = es->spares;
        es->spares = k->next;
        free(k);
    }
    free(es->fails);
    pthread_cond_destroy(&es->work);
    pthread_cond_destroy(&es->done);
    pthread_mutex_destroy(&es->mu);
    free(es);
    return rc;
}

int iopilot_es_calibrate(int n, double *submit_seconds, double *wakeup_seconds,
                         double *thread_seconds) {
    if (n < 1 || !submit_seconds || !wakeup_seconds || !thread_seconds) {
        errno = EINVAL;
        return -1;
    }
    char name[] = "/tmp/iopilot-es-calibrate-XXXXXX";
    int fd = mkstemp(name);
    if (fd < 0) return -1;
    unlink(name);
    iopilot_es *es = iopilot_es_create();
    if (!es) {
        close(fd);
        return -1;
    }
    char b = 'x';
    iopilot_es_write(es, fd, &b, 1, 0, 0); /* the thread is up, the file warm */
    iopilot_es_wait(es, -1, NULL, NULL, NULL);
    double t0 = now();
    for (int i = 0; i < n; i++) iopilot_es_write(es, fd, &b, 1, 0, 0);
    double t1 = now();
    iopilot_es_wait(es, -1, NULL, NULL, NULL);
    double t1b = now();
    int rounds = n / 10 > 0 ? n / 10 : 1;
    double t2 = now();
    for (int i = 0; i < rounds; i++) {
        iopilot_es_write(es, fd, &b, 1, 0, 0);
        iopilot_es_wait(es, -1, NULL, NULL, NULL);
    }
    double t3 = now();
    double direct0 = now();
    for (int i = 0; i < rounds; i++)
        if (pwrite(fd, &b, 1, 0) != 1) break;
    double direct = (now() - direct0) / rounds;
    iopilot_es_close(es);
    close(fd);
    *submit_seconds = (t1 - t0) / n;
    double trip = (t3 - t2) / rounds - direct - *submit_seconds;
    *wakeup_seconds = trip > 0 ? trip : 0;
    double per_op = (t1b - t0) / n - direct; /* the thread's own cost beyond the call */
    *thread_seconds = per_op > 0 ? per_op : 0;
    return 0;
}
