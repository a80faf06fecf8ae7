/* iopilot runtime core: start-up, configuration, clock, symbol resolution,
 * fork/exec/exit.  Tables are in tables.c, record buffers and counters in
 * records.c, the .json writer in output.c.  Layer modules use core.h only.
 */
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
#include <unistd.h>
#include <link.h>
#include <sys/resource.h>

int iop_enabled = 0;
IOP_TLS int iop_in_runtime = 0;
int iop_use_tsc = 0;
uint64_t iop_tsc0 = 0;

/* ------------------------------------------------------------------ */
/* Configuration and process identity. */

iop_config cfg = {.rank = -1, .nprocs = 1, .err_fd = -1, .max_records = 50000000, .layers = ~0};

pthread_mutex_t big_lock = PTHREAD_MUTEX_INITIALIZER;

void warn(const char *fmt, ...) {
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
void give_up(const char *why) {
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
double seconds_per_tick(void) {
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

