/* Tables of the runtime: memory pool, file names, per-file counters,
 * descriptors and handles. */
#define _GNU_SOURCE
#include "core_private.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* The slow path of iop_lock(): the holder never blocks, so spin a little,
 * then give the processor away (the holder may be descheduled). */
void iop_lock_wait(iop_lock_t *l) {
    for (unsigned spins = 0;; spins++) {
        if (!__atomic_load_n(l, __ATOMIC_RELAXED) && !__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
            return;
        if (spins < 100) iop_cpu_relax();
        else syscall(SYS_sched_yield);
    }
}

/* ------------------------------------------------------------------ */
/* A bump allocator: tables never call malloc on the hot path, and a full
 * pool degrades to "untracked", never to a crash. */

static struct {
    char *base;
    size_t used, size;
} pool;

void *pool_alloc(size_t n) {
    /* lock-free: callers hold different locks (names, a file's counters) */
    n = (n + 15) & ~(size_t)15;
    size_t at = __atomic_load_n(&pool.used, __ATOMIC_RELAXED);
    do {
        if (at + n > pool.size) return NULL;
    } while (!__atomic_compare_exchange_n(&pool.used, &at, at + n, 1, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    return pool.base + at;
}

/* ------------------------------------------------------------------ */
/* Names and counters: hash tables keyed by file id. */

#define NBUCKETS 8192
typedef struct name_entry {
    uint64_t id;
    struct name_entry *next;
    struct name_entry *next_new; /* names not yet in the .names file */
    char path[];
} name_entry;
static name_entry *names[NBUCKETS];
static name_entry *new_names, **new_names_tail = &new_names; /* not yet in .names */
static iop_stats *stats[NBUCKETS];
static long stats_missing; /* counter records we had no memory for */

void names_each(int only_unwritten, void (*fn)(uint64_t id, const char *path, void *arg),
                void *arg) {
    if (only_unwritten) {
        for (name_entry *e = new_names; e; e = e->next_new) fn(e->id, e->path, arg);
        return;
    }
    for (size_t k = 0; k < NBUCKETS; k++)
        for (name_entry *e = names[k]; e; e = e->next) fn(e->id, e->path, arg);
}

int names_unwritten(void) { return new_names != NULL; }

void names_written(void) {
    new_names = NULL;
    new_names_tail = &new_names;
}

void stats_each(void (*fn)(iop_stats *st, void *arg), void *arg) {
    for (size_t k = 0; k < NBUCKETS; k++)
        for (iop_stats *s = stats[k]; s; s = s->next_in_bucket) fn(s, arg);
}

long stats_missing_count(void) { return stats_missing; }

static uint64_t hash_path(const char *s) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h ? h : 1;
}

/* System paths are not the application's I/O (library loading, /proc reads
 * by the MPI runtime ...).  IOPILOT_EXCLUDE replaces the list (":"-separated). */
static char exclude_buf[2048] =
    "/proc/:/sys/:/dev/:/etc/:/usr/:/lib/:/lib64/:/bin/:/sbin/:/boot/:/run/:/tmp/ompi.";
/* Pipes, sockets and character devices are not files: left out unless
 * IOPILOT_TRACE_SPECIAL=1 (what `iopilot bench runtime` uses for /dev/null). */
static int trace_special;
static const char *exclude[64];
static size_t exclude_len[64];
static int n_exclude;

void parse_excludes(void) {
    const char *special = getenv("IOPILOT_TRACE_SPECIAL");
    trace_special = special && special[0] == '1';
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

/* Lexically clean an absolute path in place, as Darshan does: no empty or
 * "." components, ".." removes the one before (never above the root).
 * Links are not followed: the name is the one the program used. */
static void clean_path(char *p) {
    char *out = p; /* p[0] == '/' */
    const char *in = p;
    while (*in) {
        while (*in == '/') in++;
        const char *end = in;
        while (*end && *end != '/') end++;
        size_t n = (size_t)(end - in);
        if (n == 0 || (n == 1 && in[0] == '.')) {
            /* nothing */
        } else if (n == 2 && in[0] == '.' && in[1] == '.') {
            while (out > p && *--out != '/') {}
        } else {
            *out++ = '/';
            memmove(out, in, n);
            out += n;
        }
        in = end;
    }
    if (out == p) *out++ = '/';
    *out = 0;
}

uint64_t iop_register_name(const char *path) {
    if (excluded(path)) return 0;
    uint64_t id = hash_path(path);
    size_t b = id % NBUCKETS;
    for (name_entry *e = __atomic_load_n(&names[b], __ATOMIC_ACQUIRE); e; e = e->next)
        if (e->id == id) return id;
    iop_busy_enter();
    iop_lock(&iop_core_lock);
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
            e->next_new = NULL;
            *new_names_tail = e;
            new_names_tail = &e->next_new;
            __atomic_store_n(&names[b], e, __ATOMIC_RELEASE);
        }
    }
    iop_unlock(&iop_core_lock);
    iop_busy_leave();
    return id;
}

/* A relative path is taken from the working directory; when getcwd cannot
 * name it (deeper than PATH_MAX, or outside our root), from the directory's
 * device and inode, so that files in two such directories stay apart. */
uint64_t iop_register_path(const char *path) {
    char abs[8192];
    int saved = errno;
    if (path[0] == '/') {
        snprintf(abs, sizeof abs, "%s", path);
    } else {
        char cwd[4096];
        struct stat sb;
        if (sys_getcwd(cwd, sizeof cwd) > 0 && cwd[0] == '/')
            snprintf(abs, sizeof abs, "%s/%s", cwd, path);
        else if (sys_stat_cwd(&sb) == 0)
            snprintf(abs, sizeof abs, "<directory %u:%u inode %llu>/%s", major(sb.st_dev),
                     minor(sb.st_dev), (unsigned long long)sb.st_ino, path);
        else
            snprintf(abs, sizeof abs, "<unknown directory>/%s", path);
    }
    errno = saved;
    if (abs[0] == '/') clean_path(abs);
    return iop_register_name(abs);
}

uint64_t iop_register_fd_path(int fd) {
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = sys_readlink(link, path, sizeof path - 1);
    if (n <= 0) snprintf(path, sizeof path, "<fd %d>", fd);
    else path[n] = 0;
    if (n > 0 && path[0] != '/' && !trace_special) return 0; /* pipe:[...], socket:[...] */
    return path[0] == '/' ? iop_register_path(path) : iop_register_name(path);
}

static iop_stats *stats_lookup(int layer, uint64_t id) {
    size_t b = (id ^ (uint64_t)layer * 0x9e3779b97f4a7c15ULL) % NBUCKETS;
    for (iop_stats *s = __atomic_load_n(&stats[b], __ATOMIC_ACQUIRE); s; s = s->next_in_bucket)
        if (s->file_id == id && s->layer == layer) return s;
    return NULL;
}

int iop_layer_traced(int layer) { return (iop_proc.layers & (1 << layer)) != 0; }

iop_stats *iop_stats_for(int layer, uint64_t id) {
    /* Layer not traced, or an excluded path (id 0): the handle stays unknown. */
    if (!id || !(iop_proc.layers & (1 << layer))) return NULL;
    iop_stats *s = stats_lookup(layer, id);
    if (s) return s;
    iop_busy_enter();
    iop_lock(&iop_core_lock);
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
    iop_unlock(&iop_core_lock);
    iop_busy_leave();
    return s;
}

/* Change counters under the file's lock. */
void iop_count(iop_stats *st, int counter, int64_t delta) {
    if (!st) return;
    iop_busy_enter();
    iop_lock(&st->lock);
    st->c[counter] += delta;
    iop_unlock(&st->lock);
    iop_busy_leave();
}

void iop_set(iop_stats *st, int counter, int64_t value) {
    if (!st) return;
    iop_busy_enter();
    iop_lock(&st->lock);
    st->c[counter] = value;
    iop_unlock(&st->lock);
    iop_busy_leave();
}

/* ------------------------------------------------------------------ */
/* Descriptor table (direct index) and handle map (open addressing). */

iop_open *iop_fds;
int iop_nfds;


void iop_fd_set(int layer, int fd, uint64_t id, int64_t offset) {
    if (fd < 0 || fd >= iop_nfds) return;
    struct stat sb;
    int64_t align = 4096;
    iop_enter(); /* our own fstat must not count as the program's */
    int ok = id && fstat(fd, &sb) == 0;
    iop_leave();
    iop_stats *st = NULL;
    if (id && (!ok || trace_special || S_ISREG(sb.st_mode) || S_ISBLK(sb.st_mode)))
        st = iop_stats_for(layer, id);
    if (!st) {
        iop_fd_clear(fd); /* an older entry of a reused fd must not count */
        return;
    }
    if (ok && sb.st_blksize > 0) align = sb.st_blksize;
    iop_fds[fd].append = offset == IOP_OFFSET_END;
    if (offset < 0) offset = 0;
    iop_fds[fd].offset = offset;
    iop_fds[fd].alignment = align;
    iop_fds[fd].direct_fd = -1; /* the POSIX module adds one after an open */
    iop_fds[fd].direct_refused = 0;
    iop_fds[fd].behind_ok = 0; /* the POSIX module decides after an open */
    iop_fds[fd].regular = ok && S_ISREG(sb.st_mode);
    iop_fds[fd].linked = ok && sb.st_nlink > 1;
    iop_fds[fd].ident = ok ? iop_ident((uint64_t)sb.st_dev, (uint64_t)sb.st_ino) : 0;
    __atomic_store_n(&iop_fds[fd].st, st, __ATOMIC_RELEASE);
    iop_set(st, IOP_C_FILE_ALIGNMENT, align);
}

void iop_fd_clear(int fd) {
    if (fd >= 0 && fd < iop_nfds) __atomic_store_n(&iop_fds[fd].st, NULL, __ATOMIC_RELEASE);
}

void iop_fd_copy(int from, int to) {
    if (from < 0 || from >= iop_nfds || to < 0 || to >= iop_nfds) return;
    iop_fds[to] = iop_fds[from];
    iop_fds[to].direct_fd = -1; /* the O_DIRECT twin stays with the descriptor it was made for */
}

#define NHANDLES 65536
typedef struct { uintptr_t key; int layer; iop_open o; } handle_slot;
static handle_slot *handles;
static iop_lock_t handle_lock;

int tables_start(size_t pool_bytes) {
    void *p = mmap(NULL, pool_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void *f = mmap(NULL, sizeof(iop_open) * (size_t)iop_nfds, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *h = mmap(NULL, sizeof(handle_slot) * NHANDLES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || f == MAP_FAILED || h == MAP_FAILED) return -1;
    pool.base = p;
    pool.size = pool_bytes;
    iop_fds = f;
    handles = h;
    return 0;
}

static size_t handle_home(int layer, uintptr_t key) {
    return (size_t)((key * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)layer) % NHANDLES;
}

iop_open *iop_handle(int layer, uintptr_t key) {
    if (!handles || !key) return NULL;
    iop_open *found = NULL;
    iop_busy_enter();
    iop_lock(&handle_lock);
    for (size_t i = handle_home(layer, key), n = 0; n < NHANDLES; i = (i + 1) % NHANDLES, n++) {
        if (!handles[i].key) break;
        if (handles[i].key == key && handles[i].layer == layer) {
            found = &handles[i].o;
            break;
        }
    }
    iop_unlock(&handle_lock);
    iop_busy_leave();
    return found && found->st ? found : NULL;
}

iop_open *iop_handle_set(int layer, uintptr_t key, uint64_t id, int64_t offset) {
    if (!handles || !key) return NULL;
    iop_stats *st = iop_stats_for(layer, id);
    iop_open *o = NULL;
    iop_busy_enter();
    iop_lock(&handle_lock);
    for (size_t i = handle_home(layer, key), n = 0; n < NHANDLES; i = (i + 1) % NHANDLES, n++) {
        if (!handles[i].key || handles[i].key == (uintptr_t)-1 ||
            (handles[i].key == key && handles[i].layer == layer)) {
            handles[i].key = key;
            handles[i].layer = layer;
            handles[i].o.st = st;
            handles[i].o.offset = offset;
            handles[i].o.alignment = 4096;
            handles[i].o.direct_fd = -1;
            o = &handles[i].o;
            break;
        }
    }
    iop_unlock(&handle_lock);
    if (!o) __atomic_add_fetch(&iop_overflows[IOP_OVERFLOW_HANDLES], 1, __ATOMIC_RELAXED);
    iop_busy_leave();
    return o;
}

void iop_handle_clear(int layer, uintptr_t key) {
    if (!handles || !key) return;
    iop_busy_enter();
    iop_lock(&handle_lock);
    for (size_t i = handle_home(layer, key), n = 0; n < NHANDLES; i = (i + 1) % NHANDLES, n++) {
        if (!handles[i].key) break;
        if (handles[i].key == key && handles[i].layer == layer) {
            handles[i].key = (uintptr_t)-1; /* tombstone keeps probe chains intact */
            handles[i].o.st = NULL;
            break;
        }
    }
    iop_unlock(&handle_lock);
    iop_busy_leave();
}


/* A forked child: its own counters from zero (in place: descriptor and
 * handle entries point at them), every name to be written to its own
 * .names file, and no lock held by a thread that did not follow. */
void tables_after_fork(void) {
    handle_lock = 0;
    for (size_t k = 0; k < NBUCKETS; k++) {
        for (iop_stats *s = stats[k]; s; s = s->next_in_bucket) {
            s->lock = 0;
            memset(s->c, 0, sizeof s->c);
            memset(s->f, 0, sizeof s->f);
            s->c[IOP_C_MEM_ALIGNMENT] = 8;
            s->last_read = s->last_write = 0;
            s->common = NULL; /* the child takes fresh tables from the pool */
            s->last_op = -1;
        }
    }
    new_names = NULL;
    new_names_tail = &new_names;
    for (size_t k = 0; k < NBUCKETS; k++) {
        for (name_entry *e = names[k]; e; e = e->next) {
            e->next_new = NULL;
            *new_names_tail = e;
            new_names_tail = &e->next_new;
        }
    }
}
