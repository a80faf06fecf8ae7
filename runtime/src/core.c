/* iopilot runtime core: start-up, clock, file and handle tables, record
 * buffers, counters, and writing the trace out.  Layer modules (posix.c,
 * stdio.c, mpiio.c, hdf5.c) only call the functions in core.h.
 */
#define _GNU_SOURCE
#include "core.h"

#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int iop_enabled = 0;
IOP_TLS int iop_in_runtime = 0;
int iop_use_tsc = 0;
uint64_t iop_tsc0 = 0;

/* ------------------------------------------------------------------ */
/* Real functions the core itself needs (bypassing our own wrappers). */

REAL_DECL(int, open, (const char *, int, ...));
REAL_DECL(ssize_t, write, (int, const void *, size_t));
REAL_DECL(int, close, (int));
REAL_DECL(int, rename, (const char *, const char *));
REAL_DECL(ssize_t, readlink, (const char *, char *, size_t));
REAL_DECL(ssize_t, read, (int, void *, size_t));

/* ------------------------------------------------------------------ */
/* Configuration and process identity. */

static struct {
    char dir[4096];
    char host[256];
    long max_records;     /* records kept per process; counters stay exact beyond */
    int layers;           /* bit set of traced layers */
    int rank, nprocs;
    pid_t pid, ppid;
    double t0_epoch;
    struct timespec t0;
    int err_fd;           /* a private copy of stderr for our warnings */
    int exec_count;
} cfg = {.rank = -1, .nprocs = 1, .err_fd = -1, .max_records = 50000000, .layers = ~0};

static pthread_mutex_t big_lock = PTHREAD_MUTEX_INITIALIZER;

static void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn(const char *fmt, ...) {
    if (cfg.err_fd < 0) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(msg, sizeof msg, "iopilot runtime (pid %d): ", (int)getpid());
    n += vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof msg - 2) n = (int)sizeof msg - 2;
    msg[n++] = '\n';
    iop_enter();
    ssize_t w = REAL(write)(cfg.err_fd, msg, (size_t)n);
    (void)w;
    iop_leave();
}

/* Something inside the runtime failed: stop tracing, never the program. */
static void give_up(const char *why) {
    if (iop_enabled) warn("tracing disabled: %s", why);
    iop_enabled = 0;
}

/* ------------------------------------------------------------------ */
/* Clock. */

static double mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)(ts.tv_sec - cfg.t0.tv_sec) * 1e9 + (double)(ts.tv_nsec - cfg.t0.tv_nsec);
}

double iop_clock_ticks(void) { return mono_ns(); }

static int tsc_is_reliable(void) {
#if defined(__x86_64__)
    /* Only a constant, non-stop TSC counts time; otherwise use the clock. */
    char info[8192];
    iop_enter();
    int fd = REAL(open)("/proc/cpuinfo", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? REAL(read)(fd, info, sizeof info - 1) : 0;
    if (fd >= 0) REAL(close)(fd);
    iop_leave();
    info[n > 0 ? n : 0] = 0;
    return strstr(info, "constant_tsc") && strstr(info, "nonstop_tsc");
#else
    return 0;
#endif
}

/* Seconds per tick, measured now over the run so far (at least 1 ms of it). */
static double seconds_per_tick(void) {
    if (!iop_use_tsc) return 1e-9;
#if defined(__x86_64__)
    double ns, ticks;
    do {
        ns = mono_ns();
        ticks = (double)(__rdtsc() - iop_tsc0);
    } while (ns < 1e6);
    return ns * 1e-9 / ticks;
#else
    return 1e-9;
#endif
}

/* ------------------------------------------------------------------ */
/* Symbol resolution, including libraries loaded privately (h5py bundles
 * its own libhdf5 with RTLD_LOCAL, where RTLD_NEXT cannot see it). */

struct find_sym { const char *name; void *addr; void *self; };

static int find_in_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct find_sym *fs = data;
    if (!info->dlpi_name || !info->dlpi_name[0]) return 0;
    void *h = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
    if (!h) return 0;
    void *addr = dlsym(h, fs->name);
    Dl_info di;
    if (addr && dladdr(addr, &di) && di.dli_fbase != fs->self) {
        fs->addr = addr;
        dlclose(h);
        return 1;
    }
    dlclose(h);
    return 0;
}

void *iop_resolve(const char *name) {
    void *addr = dlsym(RTLD_NEXT, name);
    if (addr) return addr;
    Dl_info self;
    struct find_sym fs = {name, NULL, NULL};
    if (dladdr((void *)&iop_resolve, &self)) fs.self = self.dli_fbase;
    dl_iterate_phdr(find_in_object, &fs);
    return fs.addr;
}

/* ------------------------------------------------------------------ */
/* A bump allocator: tables never call malloc on the hot path, and a full
 * pool degrades to "untracked", never to a crash. */

static char *pool;
static size_t pool_used, pool_size;

static void *pool_alloc(size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (pool_used + n > pool_size) return NULL;
    void *p = pool + pool_used;
    pool_used += n;
    return p;
}

/* ------------------------------------------------------------------ */
/* Names and counters: hash tables keyed by file id. */

#define NBUCKETS 8192
typedef struct name_entry { uint64_t id; struct name_entry *next; char path[]; } name_entry;
static name_entry *names[NBUCKETS];
static iop_stats *stats[NBUCKETS];
static long stats_missing; /* counter records we had no memory for */

static uint64_t hash_path(const char *s) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h ? h : 1;
}

static void spin_lock(volatile int *l) {
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
        while (*l) __builtin_ia32_pause();
}
static void spin_unlock(volatile int *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

/* System paths are not the application's I/O (library loading, /proc reads
 * by the MPI runtime ...).  IOPILOT_EXCLUDE replaces the list (":"-separated). */
static char exclude_buf[2048] =
    "/proc/:/sys/:/etc/:/usr/:/lib/:/lib64/:/bin/:/sbin/:/boot/:/run/:/dev/shm/:/tmp/ompi.";
static const char *exclude[64];
static size_t exclude_len[64];
static int n_exclude;

static void parse_excludes(void) {
    const char *env = getenv("IOPILOT_EXCLUDE");
    if (env) snprintf(exclude_buf, sizeof exclude_buf, "%s", env);
    n_exclude = 0;
    for (char *p = exclude_buf; *p && n_exclude < 64;) {
        char *end = strchr(p, ':');
        if (end) *end = 0;
        if (*p) {
            exclude[n_exclude] = p;
            exclude_len[n_exclude++] = strlen(p);
        }
        if (!end) break;
        p = end + 1;
    }
}

static int excluded(const char *path) {
    for (int i = 0; i < n_exclude; i++) {
        size_t n = exclude_len[i];
        if (!strncmp(path, exclude[i], n)) return 1;
        /* "/sys/" also covers "/sys" itself */
        if (exclude[i][n - 1] == '/' && !strncmp(path, exclude[i], n - 1) && !path[n - 1])
            return 1;
    }
    return 0;
}

uint64_t iop_register_path(const char *path) {
    char abs[4096];
    if (path[0] != '/' && path[0] != '<') {
        char cwd[2048];
        iop_enter();
        char *got = getcwd(cwd, sizeof cwd);
        iop_leave();
        if (got) {
            snprintf(abs, sizeof abs, "%s/%s", cwd, path);
            path = abs;
        }
    }
    if (excluded(path)) return 0;
    uint64_t id = hash_path(path);
    size_t b = id % NBUCKETS;
    for (name_entry *e = __atomic_load_n(&names[b], __ATOMIC_ACQUIRE); e; e = e->next)
        if (e->id == id) return id;
    pthread_mutex_lock(&big_lock);
    name_entry *e;
    for (e = names[b]; e; e = e->next)
        if (e->id == id) break;
    if (!e) {
        size_t len = strlen(path);
        e = pool_alloc(sizeof *e + len + 1);
        if (e) {
            e->id = id;
            memcpy(e->path, path, len + 1);
            e->next = names[b];
            __atomic_store_n(&names[b], e, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&big_lock);
    return id;
}

uint64_t iop_register_fd_path(int fd) {
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    iop_enter();
    ssize_t n = REAL(readlink)(link, path, sizeof path - 1);
    iop_leave();
    if (n <= 0) snprintf(path, sizeof path, "<fd %d>", fd);
    else path[n] = 0;
    return iop_register_path(path);
}

static iop_stats *stats_lookup(int layer, uint64_t id) {
    size_t b = (id ^ (uint64_t)layer * 0x9e3779b97f4a7c15ULL) % NBUCKETS;
    for (iop_stats *s = __atomic_load_n(&stats[b], __ATOMIC_ACQUIRE); s; s = s->next_in_bucket)
        if (s->file_id == id && s->layer == layer) return s;
    return NULL;
}

iop_stats *iop_stats_for(int layer, uint64_t id) {
    /* Layer not traced, or an excluded path (id 0): the handle stays unknown. */
    if (!id || !(cfg.layers & (1 << layer))) return NULL;
    iop_stats *s = stats_lookup(layer, id);
    if (s) return s;
    pthread_mutex_lock(&big_lock);
    s = stats_lookup(layer, id);
    if (!s) {
        s = pool_alloc(sizeof *s);
        if (s) {
            memset(s, 0, sizeof *s);
            s->file_id = id;
            s->layer = layer;
            s->last_op = -1;
            s->c[IOP_C_MEM_ALIGNMENT] = 8;
            size_t b = (id ^ (uint64_t)layer * 0x9e3779b97f4a7c15ULL) % NBUCKETS;
            s->next_in_bucket = stats[b];
            __atomic_store_n(&stats[b], s, __ATOMIC_RELEASE);
        } else {
            stats_missing++;
        }
    }
    pthread_mutex_unlock(&big_lock);
    return s;
}

/* ------------------------------------------------------------------ */
/* Descriptor table (direct index) and handle map (open addressing). */

static iop_open *fds;
static int nfds;

iop_open *iop_fd(int fd) {
    if (fd < 0 || fd >= nfds || !fds[fd].st) return NULL;
    return &fds[fd];
}

void iop_fd_set(int fd, uint64_t id, int64_t offset) {
    if (fd < 0 || fd >= nfds) return;
    iop_stats *st = iop_stats_for(IOP_LAYER_POSIX, id);
    if (!st) {
        iop_fd_clear(fd); /* an older entry of a reused fd must not count */
        return;
    }
    struct stat sb;
    int64_t align = 4096;
    iop_enter(); /* our own fstat must not count as the program's */
    int ok = fstat(fd, &sb) == 0;
    iop_leave();
    if (ok) {
        if (sb.st_blksize > 0) align = sb.st_blksize;
        if (offset == IOP_OFFSET_END) offset = sb.st_size; /* O_APPEND */
    }
    if (offset < 0) offset = 0;
    fds[fd].offset = offset;
    fds[fd].alignment = align;
    __atomic_store_n(&fds[fd].st, st, __ATOMIC_RELEASE);
    iop_set(st, IOP_C_FILE_ALIGNMENT, align);
}

void iop_fd_clear(int fd) {
    if (fd >= 0 && fd < nfds) __atomic_store_n(&fds[fd].st, NULL, __ATOMIC_RELEASE);
}

void iop_fd_copy(int from, int to) {
    if (from < 0 || from >= nfds || to < 0 || to >= nfds) return;
    fds[to] = fds[from];
}

#define NHANDLES 65536
typedef struct { uintptr_t key; int layer; iop_open o; } handle_slot;
static handle_slot *handles;
static volatile int handle_lock;

static size_t handle_home(int layer, uintptr_t key) {
    return (size_t)((key * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)layer) % NHANDLES;
}

iop_open *iop_handle(int layer, uintptr_t key) {
    if (!handles || !key) return NULL;
    iop_open *found = NULL;
    spin_lock(&handle_lock);
    for (size_t i = handle_home(layer, key), n = 0; n < NHANDLES; i = (i + 1) % NHANDLES, n++) {
        if (!handles[i].key) break;
        if (handles[i].key == key && handles[i].layer == layer) {
            found = &handles[i].o;
            break;
        }
    }
    spin_unlock(&handle_lock);
    return found && found->st ? found : NULL;
}

iop_open *iop_handle_set(int layer, uintptr_t key, uint64_t id, int64_t offset) {
    if (!handles || !key) return NULL;
    iop_stats *st = iop_stats_for(layer, id);
    iop_open *o = NULL;
    spin_lock(&handle_lock);
    for (size_t i = handle_home(layer, key), n = 0; n < NHANDLES; i = (i + 1) % NHANDLES, n++) {
        if (!handles[i].key || handles[i].key == (uintptr_t)-1 ||
            (handles[i].key == key && handles[i].layer == layer)) {
            handles[i].key = key;
            handles[i].layer = layer;
            handles[i].o.st = st;
            handles[i].o.offset = offset;
            handles[i].o.alignment = 4096;
            o = &handles[i].o;
            break;
        }
    }
    spin_unlock(&handle_lock);
    return o;
}

void iop_handle_clear(int layer, uintptr_t key) {
    if (!handles || !key) return;
    spin_lock(&handle_lock);
    for (size_t i = handle_home(layer, key), n = 0; n < NHANDLES; i = (i + 1) % NHANDLES, n++) {
        if (!handles[i].key) break;
        if (handles[i].key == key && handles[i].layer == layer) {
            handles[i].key = (uintptr_t)-1; /* tombstone keeps probe chains intact */
            handles[i].o.st = NULL;
            break;
        }
    }
    spin_unlock(&handle_lock);
}

/* ------------------------------------------------------------------ */
/* Record buffers: one per thread, written to the .rec file when full. */

#define TB_CAP 8192
#define RESERVE 1024 /* records a thread takes from the process budget at once */
typedef struct tbuf {
    struct tbuf *next;
    uint32_t thread;
    uint32_t n;
    long budget, kept, dropped; /* owned by the thread: no atomics per record */
    struct iop_record r[TB_CAP];
} tbuf;

static IOP_TLS tbuf *my_buf;
static tbuf *all_bufs;
static uint32_t next_thread;
static long records_reserved, records_lost; /* lost: no buffer could be had */
static int rec_fd = -1;
static char rec_path[4400], json_path[4400];
static pthread_key_t buf_key;

static void open_rec_file(void) {
    if (rec_fd >= 0 || !cfg.dir[0]) return;
    iop_enter();
    rec_fd = REAL(open)(rec_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (rec_fd >= 0) {
        struct iop_file_header h = {IOP_MAGIC, IOP_FORMAT_VERSION, sizeof(struct iop_record),
                                    cfg.rank, cfg.pid, cfg.t0_epoch, {0, 0, 0}};
        if (REAL(write)(rec_fd, &h, sizeof h) != (ssize_t)sizeof h) {
            REAL(close)(rec_fd);
            rec_fd = -1;
        }
    }
    iop_leave();
    if (rec_fd < 0) give_up("cannot create the record file");
}

/* Called with big_lock held. */
static void write_buffer(tbuf *b) {
    if (!b->n) return;
    /* Ticks to seconds on the way out. */
    double spt = seconds_per_tick();
    for (uint32_t i = 0; i < b->n; i++) {
        b->r[i].start *= spt;
        b->r[i].end *= spt;
    }
    open_rec_file();
    if (rec_fd >= 0) {
        const char *p = (const char *)b->r;
        size_t left = b->n * sizeof(struct iop_record);
        iop_enter();
        while (left) {
            ssize_t w = REAL(write)(rec_fd, p, left);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) break;
            p += w;
            left -= (size_t)w;
        }
        iop_leave();
        if (left) {
            b->dropped += (long)(left / sizeof(struct iop_record));
            b->kept -= (long)(left / sizeof(struct iop_record));
            give_up("writing records failed");
        }
    }
    b->n = 0;
}

static void thread_exit(void *arg) {
    tbuf *b = arg;
    int saved = errno;
    pthread_mutex_lock(&big_lock);
    write_buffer(b);
    pthread_mutex_unlock(&big_lock);
    errno = saved;
}

static tbuf *thread_buffer(void) {
    if (IOP_LIKELY(my_buf != NULL)) return my_buf;
    iop_enter();
    tbuf *b = mmap(NULL, sizeof(tbuf), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    iop_leave();
    if (b == MAP_FAILED) return NULL;
    pthread_mutex_lock(&big_lock);
    b->thread = next_thread++;
    b->n = 0;
    b->budget = b->kept = b->dropped = 0;
    b->next = all_bufs;
    all_bufs = b;
    pthread_mutex_unlock(&big_lock);
    my_buf = b;
    pthread_setspecific(buf_key, b);
    return b;
}

static int reserve(tbuf *b) {
    long old = __atomic_fetch_add(&records_reserved, RESERVE, __ATOMIC_RELAXED);
    if (old >= cfg.max_records) return 0;
    b->budget = cfg.max_records - old < RESERVE ? cfg.max_records - old : RESERVE;
    return 1;
}

static void add_record(int layer, int op, uint64_t id, int64_t offset, int64_t len, double t1,
                       double t2, unsigned flags) {
    tbuf *b = thread_buffer();
    if (IOP_UNLIKELY(!b)) {
        __atomic_add_fetch(&records_lost, 1, __ATOMIC_RELAXED);
        return;
    }
    if (IOP_UNLIKELY(b->budget == 0) && !reserve(b)) {
        b->dropped++; /* over the limit: the counters still see the call */
        return;
    }
    b->budget--;
    b->kept++;
    struct iop_record *r = &b->r[b->n];
    r->start = t1;
    r->end = t2;
    r->offset = offset;
    r->length = len;
    r->file_id = id;
    r->thread = b->thread;
    r->layer = (uint8_t)layer;
    r->op = (uint8_t)op;
    r->flags = (uint16_t)flags;
    if (IOP_UNLIKELY(++b->n == TB_CAP)) {
        pthread_mutex_lock(&big_lock);
        write_buffer(b);
        pthread_mutex_unlock(&big_lock);
    }
}

/* ------------------------------------------------------------------ */
/* Counters. */

static int size_bin(int64_t n) {
    static const int64_t upper[] = {100, 1024, 10240, 102400, 1048576, 4194304, 10485760,
                                    104857600, 1073741824};
    for (int i = 0; i < 9; i++)
        if (n < upper[i]) return i;
    return 9;
}

void iop_data_op(iop_stats *st, int op, int64_t offset, int64_t bytes, const void *buf,
                 int64_t alignment, double t1, double t2, unsigned flags) {
    /* A failed call moved nothing: like Darshan, it is not counted. */
    if (IOP_UNLIKELY(!st || bytes < 0)) return;
    int rd = op == IOP_OP_READ;
    double dt = t2 - t1;
    spin_lock(&st->lock);
    int64_t *c = st->c;
    double *f = st->f;
    c[rd ? IOP_C_READS : IOP_C_WRITES]++;
    if (bytes > 0) {
        c[rd ? IOP_C_BYTES_READ : IOP_C_BYTES_WRITTEN] += bytes;
        c[(rd ? IOP_C_SIZE_READ_0_100 : IOP_C_SIZE_WRITE_0_100) + size_bin(bytes)]++;
    } else if (bytes == 0) {
        c[rd ? IOP_C_SIZE_READ_0_100 : IOP_C_SIZE_WRITE_0_100]++;
    }
    if (offset >= 0 && bytes >= 0) {
        int64_t *next = rd ? &st->next_read : &st->next_write;
        if (offset == *next) c[rd ? IOP_C_CONSEC_READS : IOP_C_CONSEC_WRITES]++;
        if (offset >= *next) c[rd ? IOP_C_SEQ_READS : IOP_C_SEQ_WRITES]++;
        *next = offset + bytes;
        int64_t last = offset + bytes - 1;
        int mx = rd ? IOP_C_MAX_BYTE_READ : IOP_C_MAX_BYTE_WRITTEN;
        if (bytes > 0 && last > c[mx]) c[mx] = last;
        if (alignment > 0 && offset % alignment) c[IOP_C_FILE_NOT_ALIGNED]++;
    }
    if (buf && ((uintptr_t)buf & 7)) c[IOP_C_MEM_NOT_ALIGNED]++;
    if (st->last_op >= 0 && st->last_op != op) c[IOP_C_RW_SWITCHES]++;
    st->last_op = op;
    int t = rd ? IOP_F_F_READ_TIME : IOP_F_F_WRITE_TIME;
    int mt = rd ? IOP_F_F_MAX_READ_TIME : IOP_F_F_MAX_WRITE_TIME;
    int ts = rd ? IOP_F_F_READ_START_TIMESTAMP : IOP_F_F_WRITE_START_TIMESTAMP;
    int te = rd ? IOP_F_F_READ_END_TIMESTAMP : IOP_F_F_WRITE_END_TIMESTAMP;
    f[t] += dt;
    if (dt > f[mt]) f[mt] = dt;
    if (f[ts] == 0 || t1 < f[ts]) f[ts] = t1;
    if (t2 > f[te]) f[te] = t2;
    spin_unlock(&st->lock);
    add_record(st->layer, op, st->file_id, offset, bytes, t1, t2, flags);
}

void iop_meta_op(iop_stats *st, int op, int counter, double t1, double t2, unsigned flags) {
    if (IOP_UNLIKELY(!st)) return;
    spin_lock(&st->lock);
    if (counter >= 0) st->c[counter]++;
    st->f[IOP_F_F_META_TIME] += t2 - t1;
    if (op == IOP_OP_OPEN) {
        if (st->f[IOP_F_F_OPEN_START_TIMESTAMP] == 0 || t1 < st->f[IOP_F_F_OPEN_START_TIMESTAMP])
            st->f[IOP_F_F_OPEN_START_TIMESTAMP] = t1;
        if (t2 > st->f[IOP_F_F_OPEN_END_TIMESTAMP]) st->f[IOP_F_F_OPEN_END_TIMESTAMP] = t2;
    } else if (op == IOP_OP_CLOSE) {
        if (st->f[IOP_F_F_CLOSE_START_TIMESTAMP] == 0 || t1 < st->f[IOP_F_F_CLOSE_START_TIMESTAMP])
            st->f[IOP_F_F_CLOSE_START_TIMESTAMP] = t1;
        if (t2 > st->f[IOP_F_F_CLOSE_END_TIMESTAMP]) st->f[IOP_F_F_CLOSE_END_TIMESTAMP] = t2;
    }
    spin_unlock(&st->lock);
    add_record(st->layer, op, st->file_id, -1, 0, t1, t2, flags);
}

void iop_count(iop_stats *st, int counter, int64_t delta) {
    if (!st) return;
    spin_lock(&st->lock);
    st->c[counter] += delta;
    spin_unlock(&st->lock);
}

void iop_set(iop_stats *st, int counter, int64_t value) {
    if (!st) return;
    spin_lock(&st->lock);
    st->c[counter] = value;
    spin_unlock(&st->lock);
}

/* ------------------------------------------------------------------ */
/* Notes (hints per file, HDF5 properties ...). */

typedef struct note { struct note *next; uint64_t id; char text[]; } note;
static note *notes;

void iop_note(const char *kind, uint64_t id, const char *key, const char *value) {
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "%s\t%s\t%s", kind, key, value);
    if (n < 0) return;
    pthread_mutex_lock(&big_lock);
    note *e = pool_alloc(sizeof *e + (size_t)n + 1);
    if (e) {
        e->id = id;
        memcpy(e->text, buf, (size_t)n + 1);
        e->next = notes;
        notes = e;
    }
    pthread_mutex_unlock(&big_lock);
}

void iop_set_rank(int rank, int size) {
    if (rank >= 0) cfg.rank = rank;
    if (size > 0) cfg.nprocs = size;
}

/* ------------------------------------------------------------------ */
/* The .json file: a small growing buffer with JSON string escaping. */

typedef struct { char *p; size_t n, cap; int failed; } sbuf;

static void sb_put(sbuf *b, const char *s, size_t len) {
    if (b->failed) return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1 << 16;
        while (cap < b->n + len + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->failed = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = 0;
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void sb_str(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            char e[2] = {'\\', (char)ch};
            sb_put(b, e, 2);
        } else if (ch < 0x20) {
            sb_printf(b, "\\u%04x", ch);
        } else {
            sb_put(b, (const char *)&ch, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static const char *layer_names[] = {
#define IOP_X(name) #name,
    IOP_LAYERS(IOP_X)
#undef IOP_X
};
static const char *counter_names[] = {
#define IOP_X(name) #name,
    IOP_COUNTERS(IOP_X)
#undef IOP_X
};
static const char *fcounter_names[] = {
#define IOP_X(name) #name,
    IOP_FCOUNTERS(IOP_X)
#undef IOP_X
};

static void write_json(const char *reason) {
    sbuf b = {0};
    double spt = seconds_per_tick();
    double t_end = iop_now() * spt;
    long kept = 0, dropped = records_lost;
    for (tbuf *tb = all_bufs; tb; tb = tb->next) {
        kept += tb->kept;
        dropped += tb->dropped;
    }
    sb_printf(&b, "{\n\"format\": \"iopilot-process\", \"version\": %d,\n", IOP_FORMAT_VERSION);
    sb_printf(&b, "\"rank\": %d, \"nprocs\": %d, \"pid\": %d, \"ppid\": %d,\n", cfg.rank,
              cfg.nprocs, (int)cfg.pid, (int)cfg.ppid);
    sb_put(&b, "\"host\": ", 8);
    sb_str(&b, cfg.host);
    sb_printf(&b, ",\n\"t0\": %.9f, \"t_end\": %.9f, \"ended_by\": \"%s\",\n", cfg.t0_epoch,
              t_end, reason);
    char exe[4096];
    iop_enter();
    ssize_t n = REAL(readlink)("/proc/self/exe", exe, sizeof exe - 1);
    iop_leave();
    exe[n > 0 ? n : 0] = 0;
    sb_put(&b, "\"exe\": ", 7);
    sb_str(&b, exe);
    char cmd[8192];
    sb_put(&b, ",\n\"cmdline\": [", 14);
    /* cmdline is NUL-separated; we read at most sizeof cmd - 1 bytes of it. */
    iop_enter();
    int fd = REAL(open)("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    ssize_t len = fd >= 0 ? REAL(read)(fd, cmd, sizeof cmd - 1) : 0;
    if (fd >= 0) REAL(close)(fd);
    iop_leave();
    for (ssize_t i = 0, first = 1; i < len; first = 0) {
        if (!first) sb_put(&b, ", ", 2);
        sb_str(&b, cmd + i);
        i += (ssize_t)strlen(cmd + i) + 1;
    }
    sb_printf(&b, "],\n\"records\": %ld, \"records_dropped\": %ld, \"max_records\": %ld, "
                  "\"stats_missing\": %ld, \"threads\": %u, \"execs\": %d,\n",
              kept, dropped, cfg.max_records, stats_missing, next_thread,
              cfg.exec_count);
    sb_put(&b, "\"env\": {", 8);
    static const char *env_keys[] = {"ROMIO_HINTS", "OMPI_MCA_io", "OMPI_MCA_fcoll",
                                     "MPICH_MPIIO_HINTS", "HDF5_PLUGIN_PATH", "SLURM_JOB_ID",
                                     "OMPI_MCA_io_ompio_num_aggregators", NULL};
    for (int i = 0, first = 1; env_keys[i]; i++) {
        const char *v = getenv(env_keys[i]);
        if (!v) continue;
        if (!first) sb_put(&b, ", ", 2);
        first = 0;
        sb_str(&b, env_keys[i]);
        sb_put(&b, ": ", 2);
        sb_str(&b, v);
    }
    sb_put(&b, "},\n\"layers\": [", 14);
    for (int i = 0; i < IOP_NLAYERS; i++) {
        sb_str(&b, layer_names[i]);
        if (i + 1 < IOP_NLAYERS) sb_put(&b, ", ", 2);
    }
    sb_put(&b, "],\n\"counter_names\": [", 21);
    for (int i = 0; i < IOP_NCOUNTERS; i++) {
        sb_str(&b, counter_names[i]);
        if (i + 1 < IOP_NCOUNTERS) sb_put(&b, ", ", 2);
    }
    sb_put(&b, "],\n\"fcounter_names\": [", 22);
    for (int i = 0; i < IOP_NFCOUNTERS; i++) {
        sb_str(&b, fcounter_names[i]);
        if (i + 1 < IOP_NFCOUNTERS) sb_put(&b, ", ", 2);
    }
    /* counters: [layer, "file id", {index: value}, {index: value}] per row */
    sb_put(&b, "],\n\"counters\": [", 16);
    int first = 1;
    for (size_t k = 0; k < NBUCKETS; k++) {
        for (iop_stats *s = stats[k]; s; s = s->next_in_bucket) {
            spin_lock(&s->lock);
            sb_printf(&b, "%s\n[%d, \"%llu\", {", first ? "" : ",", s->layer,
                      (unsigned long long)s->file_id);
            first = 0;
            for (int i = 0, f1 = 1; i < IOP_NCOUNTERS; i++) {
                if (!s->c[i]) continue;
                sb_printf(&b, "%s\"%d\": %lld", f1 ? "" : ", ", i, (long long)s->c[i]);
                f1 = 0;
            }
            sb_put(&b, "}, {", 4);
            for (int i = 0, f1 = 1; i < IOP_NFCOUNTERS; i++) {
                if (s->f[i] == 0) continue;
                sb_printf(&b, "%s\"%d\": %.9g", f1 ? "" : ", ", i, s->f[i] * spt);
                f1 = 0;
            }
            sb_put(&b, "}]", 2);
            spin_unlock(&s->lock);
        }
    }
    sb_put(&b, "],\n\"names\": {", 13);
    first = 1;
    for (size_t k = 0; k < NBUCKETS; k++) {
        for (name_entry *e = names[k]; e; e = e->next) {
            sb_printf(&b, "%s\n\"%llu\": ", first ? "" : ",", (unsigned long long)e->id);
            sb_str(&b, e->path);
            first = 0;
        }
    }
    sb_put(&b, "},\n\"notes\": [", 13);
    first = 1;
    for (note *e = notes; e; e = e->next) {
        sb_printf(&b, "%s\n[\"%llu\", ", first ? "" : ",", (unsigned long long)e->id);
        sb_str(&b, e->text);
        sb_put(&b, "]", 1);
        first = 0;
    }
    sb_put(&b, "]\n}\n", 4);
    if (b.failed) {
        warn("out of memory writing %s", json_path);
        free(b.p);
        return;
    }
    char tmp[4500];
    snprintf(tmp, sizeof tmp, "%s.tmp", json_path);
    iop_enter();
    int out = REAL(open)(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    size_t done = 0;
    while (out >= 0 && done < b.n) {
        ssize_t w = REAL(write)(out, b.p + done, b.n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
    }
    if (out >= 0) REAL(close)(out);
    if (done == b.n) REAL(rename)(tmp, json_path); /* readers never see half a file */
    iop_leave();
    if (done != b.n) warn("could not write %s", json_path);
    free(b.p);
}

static void flush_all(const char *reason) {
    pthread_mutex_lock(&big_lock);
    for (tbuf *b = all_bufs; b; b = b->next) write_buffer(b);
    pthread_mutex_unlock(&big_lock);
    write_json(reason);
}

void iop_flush_all(void) {
    if (!cfg.dir[0]) return;
    int saved = errno;
    flush_all("flush");
    errno = saved;
}

/* ------------------------------------------------------------------ */
/* Start-up, fork, exec and exit. */

static void set_paths(void) {
    snprintf(rec_path, sizeof rec_path, "%s/p%s-%d.rec", cfg.dir, cfg.host, (int)cfg.pid);
    snprintf(json_path, sizeof json_path, "%s/p%s-%d.json", cfg.dir, cfg.host, (int)cfg.pid);
}

static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

static void child_after_fork(void) {
    /* The child starts its own trace: fresh counters and buffers, same t0. */
    cfg.pid = getpid();
    cfg.ppid = getppid();
    set_paths();
    rec_fd = -1;
    /* Zero the counters in place: descriptor and handle entries point at them. */
    for (size_t k = 0; k < NBUCKETS; k++) {
        for (iop_stats *s = stats[k]; s; s = s->next_in_bucket) {
            s->lock = 0;
            memset(s->c, 0, sizeof s->c);
            memset(s->f, 0, sizeof s->f);
            s->c[IOP_C_MEM_ALIGNMENT] = 8;
            s->next_read = s->next_write = 0;
            s->last_op = -1;
        }
    }
    all_bufs = NULL;
    records_reserved = records_lost = 0;
    if (my_buf) {
        my_buf->n = 0;
        my_buf->budget = my_buf->kept = my_buf->dropped = 0;
        my_buf->next = NULL;
        all_bufs = my_buf;
    }
    pthread_mutex_init(&big_lock, NULL);
    handle_lock = 0;
}

__attribute__((constructor(101))) static void iop_init(void) {
    const char *dir = getenv("IOPILOT_TRACE_DIR");
    if (!dir || !*dir) return; /* loaded but not asked to trace */
    int saved = errno;
    cfg.err_fd = fcntl(2, F_DUPFD_CLOEXEC, 100);
    snprintf(cfg.dir, sizeof cfg.dir, "%s", dir);
    gethostname(cfg.host, sizeof cfg.host - 1);
    for (char *c = cfg.host; *c; c++)
        if (*c == '/' || *c == '-') *c = '_';
    cfg.pid = getpid();
    cfg.ppid = getppid();
    const char *want = getenv("IOPILOT_LAYERS"); /* e.g. "POSIX,MPIIO"; HDF5 = H5F + H5D */
    if (want && *want) {
        cfg.layers = 0;
        if (strstr(want, "POSIX")) cfg.layers |= 1 << IOP_LAYER_POSIX;
        if (strstr(want, "STDIO")) cfg.layers |= 1 << IOP_LAYER_STDIO;
        if (strstr(want, "MPIIO")) cfg.layers |= 1 << IOP_LAYER_MPIIO;
        if (strstr(want, "HDF5")) cfg.layers |= (1 << IOP_LAYER_H5F) | (1 << IOP_LAYER_H5D);
    }
    const char *mr = getenv("IOPILOT_MAX_RECORDS");
    if (mr && *mr) cfg.max_records = atol(mr);
    /* Rank from the launcher's environment, before MPI_Init is called. */
    static const char *rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                      "SLURM_PROCID", NULL};
    static const char *size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS",
                                      NULL};
    for (int i = 0; rank_vars[i] && cfg.rank < 0; i++) cfg.rank = env_int(rank_vars[i], -1);
    for (int i = 0; size_vars[i] && cfg.nprocs <= 1; i++) cfg.nprocs = env_int(size_vars[i], 1);
    if (cfg.rank < 0) cfg.rank = 0;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &cfg.t0);
#if defined(__x86_64__)
    iop_tsc0 = __rdtsc();
#endif
    cfg.t0_epoch = (double)rt.tv_sec + (double)rt.tv_nsec * 1e-9;
    struct rlimit rl;
    nfds = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < (rlim_t)nfds)
        nfds = (int)rl.rlim_cur;
    if (nfds < 1024) nfds = 1024;
    pool_size = (size_t)env_int("IOPILOT_TABLE_MB", 64) << 20;
    pool = mmap(NULL, pool_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                -1, 0);
    fds = mmap(NULL, sizeof(iop_open) * (size_t)nfds, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    handles = mmap(NULL, sizeof(handle_slot) * NHANDLES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pool == MAP_FAILED || fds == MAP_FAILED || handles == MAP_FAILED) {
        warn("not enough memory for the runtime's tables: tracing disabled");
        errno = saved;
        return;
    }
    if (pthread_key_create(&buf_key, thread_exit) != 0) {
        warn("no thread-specific key left: tracing disabled");
        errno = saved;
        return;
    }
    set_paths();
    parse_excludes();
    iop_use_tsc = tsc_is_reliable();
    pthread_atfork(NULL, NULL, child_after_fork);
    iop_enabled = 1;
    errno = saved;
}

__attribute__((destructor)) static void iop_fini(void) {
    if (!cfg.dir[0] || !pool || pool == MAP_FAILED) return;
    int saved = errno;
    int was = iop_enabled;
    iop_enabled = 0; /* nothing after this point is traced */
    if (was || all_bufs) flush_all("exit");
    errno = saved;
}

/* Called by the exec wrappers: the new image will not run our destructor. */
void iop_before_exec(void) {
    if (!iop_enabled) return;
    cfg.exec_count++;
    int saved = errno;
    flush_all("exec");
    errno = saved;
}
