/* iopilot runtime core: start-up, fork, exec and exit, and the modules'
 * hooks called at each; the table of operations between two calls.  The process's state, clock and symbol lookup are
 * in process.c, tables in tables.c, record buffers in records.c, the .json
 * writer in output.c, our own files in files.c.  Modules use core.h only,
 * and the core knows them only through the list in modules.c.
 */
#define _GNU_SOURCE
#include "core_private.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

/* ------------------------------------------------------------------ */
/* Operations between two calls (core.h).  Here, not in tables.c: like the
 * wrappers, they are built without ThreadSanitizer (see the Makefile). */

int iop_inflight_put(iop_inflight *table, int n, iop_lock_t *lock, long *overflow,
                     const iop_inflight *e) {
    int ok = 0;
    iop_busy_enter();
    iop_lock(lock);
    int free_slot = -1;
    for (int i = 0; i < n; i++) {
        if (table[i].key == e->key) {
            free_slot = i;
            break;
        }
        if (!table[i].key && free_slot < 0) free_slot = i;
    }
    if (free_slot >= 0) {
        table[free_slot] = *e;
        ok = 1;
    }
    iop_unlock(lock);
    if (!ok) iop_overflow(overflow);
    iop_busy_leave();
    return ok;
}

int iop_inflight_take(iop_inflight *table, int n, iop_lock_t *lock, uintptr_t key,
                      iop_inflight *out) {
    int ok = 0;
    iop_busy_enter();
    iop_lock(lock);
    for (int i = 0; i < n; i++) {
        if (table[i].key == key) {
            *out = table[i];
            table[i].key = 0;
            ok = 1;
            break;
        }
    }
    iop_unlock(lock);
    iop_busy_leave();
    return ok;
}

/* ------------------------------------------------------------------ */
/* Whether the clock may be the TSC (iop_now in core.h). */
static int tsc_is_reliable(void) {
#if defined(__x86_64__)
    /* Only a constant, non-stop TSC counts time; otherwise use the clock. */
    char info[8192];
    int fd = sys_open("/proc/cpuinfo", O_RDONLY | O_CLOEXEC, 0);
    ssize_t n = fd >= 0 ? sys_read(fd, info, sizeof info - 1) : 0;
    if (fd >= 0) sys_close(fd);
    info[n > 0 ? n : 0] = 0;
    return strstr(info, "constant_tsc") && strstr(info, "nonstop_tsc");
#else
    return 0;
#endif
}

/* ------------------------------------------------------------------ */
/* The modules' hooks, called in the order of modules.c. */

void iop_fence_slow(int kind, uint64_t ident, int dirfd, const char *path, int flags) {
    EACH_HOOK(fence, kind, ident, dirfd, path, flags);
}

static void before_fork(void) { EACH_HOOK(before_fork); }
static void parent_after_fork(void) { EACH_HOOK(after_fork_parent); }

/* ------------------------------------------------------------------ */
/* Start-up, fork, exec and exit. */

static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

static void child_after_fork(void) {
    /* The child starts its own image: fresh counters, buffers and files,
     * same time zero.  Locks held by threads that did not follow are freed. */
    iop_proc.pid = getpid();
    iop_proc.ppid = getppid();
    iop_core_lock = 0;
    memset(iop_overflows, 0, sizeof iop_overflows);
    EACH_HOOK(after_fork);
    iop_nested_calls = 0;
    iop_proc.exec_count = 0;
    iop_proc.exit_code = -1;
    iop_proc.nwarnings = 0;
    iop_proc.ended = 0;
    iop_proc.write_error = 0; /* its own files, its own errors */
    tables_after_fork();
    records_after_fork();
    sites_after_fork();
    cpu_after_fork();
    if (iop_enabled && choose_stem() != 0) give_up("cannot create the record file");
}

__attribute__((constructor(101))) static void iop_init(void) {
    const char *dir = getenv("IOPILOT_TRACE_DIR");
    if (!dir || !*dir) return; /* loaded but not asked to trace */
    if (another_copy_traces()) return; /* ours pass every call through */
    int saved = errno;
    /* absolute, so that a program that changes directory still writes here */
    char cwd[2048];
    if (dir[0] != '/' && sys_getcwd(cwd, sizeof cwd) > 0)
        snprintf(iop_proc.dir, sizeof iop_proc.dir, "%s/%s", cwd, dir);
    else
        snprintf(iop_proc.dir, sizeof iop_proc.dir, "%s", dir);
    /* Only an existing directory, not a link: we create files inside it,
     * never it, and only while it is this directory. */
    if (trace_dir_start() != 0) {
        iop_proc.dir[0] = 0;
        errno = saved;
        return;
    }
    gethostname(iop_proc.host, sizeof iop_proc.host - 1); /* as it is; the stem sanitises it */
    iop_proc.pid = getpid();
    iop_proc.ppid = getppid();
    const char *want = getenv("IOPILOT_LAYERS"); /* e.g. "POSIX,MPIIO": module names */
    if (want && *want) {
        iop_proc.layers = 0;
        for (int i = 0; i < iop_nmodules; i++)
            if (iop_modules[i] && strstr(want, iop_modules[i]->name))
                iop_proc.layers |= (int)iop_modules[i]->layers;
    }
    const char *mr = getenv("IOPILOT_MAX_RECORDS");
    if (mr && *mr) iop_proc.max_records = atol(mr);
    /* Rank from the launcher's environment, before MPI_Init is called. */
    static const char *rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                      "SLURM_PROCID", NULL};
    static const char *size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS",
                                      NULL};
    for (int i = 0; rank_vars[i] && iop_proc.rank < 0; i++)
        iop_proc.rank = env_int(rank_vars[i], -1);
    for (int i = 0; size_vars[i] && iop_proc.nprocs <= 1; i++)
        iop_proc.nprocs = env_int(size_vars[i], 1);
    /* torchrun and PyTorch's launchers: RANK counts only beside WORLD_SIZE
     * (RANK alone is too common a name to mean a job's rank). */
    if (iop_proc.rank < 0 && env_int("WORLD_SIZE", 0) > 0) {
        iop_proc.rank = env_int("RANK", -1);
        if (iop_proc.rank >= 0 && iop_proc.nprocs <= 1) iop_proc.nprocs = env_int("WORLD_SIZE", 1);
    }
    iop_proc.rank_source = iop_proc.rank >= 0 ? 1 : 0;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &iop_proc.t0);
#if defined(__x86_64__)
    iop_tsc0 = __rdtsc();
#endif
    iop_proc.t0_epoch = (double)rt.tv_sec + (double)rt.tv_nsec * 1e-9;
    struct rlimit rl;
    iop_nfds = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < (rlim_t)iop_nfds)
        iop_nfds = (int)rl.rlim_cur;
    if (iop_nfds < 1024) iop_nfds = 1024;
    if (tables_start((size_t)env_int("IOPILOT_TABLE_MB", 64) << 20) != 0 ||
        records_start() != 0) {
        errno = saved; /* nothing to write at exit */
        return;
    }
    /* The .rec file exists from the start, so every image that ran is seen,
     * even one killed before it flushed anything. */
    if (choose_stem() != 0) {
        errno = saved;
        return;
    }
    iop_proc.started = 1;
    parse_excludes();
    sites_start();
    iop_use_tsc = tsc_is_reliable();
    cpu_start();
    pthread_atfork(before_fork, parent_after_fork, child_after_fork);
    EACH_HOOK(init); /* before the first call is traced */
    EACH_HOOK(settings);
    iop_enabled = 1;
    errno = saved;
}

__attribute__((destructor)) static void iop_fini(void) {
    if (!iop_proc.dir[0] || !iop_proc.started || iop_proc.ended || !this_is_our_process()) return;
    int saved = errno;
    EACH_HOOK(exit); /* deferred writes land before the program is gone */
    iop_enabled = 0; /* nothing after this point is traced */
    flush_all("exit");
    iop_proc.ended = 1;
    errno = saved;
}

/* Called by the exec wrappers: the new image will not run our destructor.
 * If exec fails the program goes on, and so does the trace. */
void iop_before_exec(void) {
    /* Deferred writes land first: the new program reads what we wrote.  A
     * vfork child waits too, changing nothing of ours. */
    EACH_HOOK(exec);
    if (!iop_enabled || iop_in_runtime || !this_is_our_process()) return;
    int saved = errno;
    iop_proc.exec_count++;
    flush_all("exec");
    errno = saved;
}

/* Called by the _exit wrappers: no destructor runs after them. */
void iop_before_exit(int status) {
    if (!iop_enabled || iop_in_runtime || !this_is_our_process()) return;
    int saved = errno;
    EACH_HOOK(exit);
    iop_enabled = 0;
    iop_proc.exit_code = status & 0xff;
    flush_all("_exit");
    iop_proc.ended = 1;
    errno = saved;
}
