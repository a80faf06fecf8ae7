/* This process, as every file of the runtime knows it: whether tracing is
 * on, the thread's re-entrancy guard, the clock, symbol lookup, warnings;
 * and for the core, who this process is (iop_proc).  It calls no other
 * file of the runtime: start-up, fork, exec and exit are in core.c, which
 * calls everyone.  Built without ThreadSanitizer, as the wrappers are (see
 * the Makefile): nothing here takes a lock.
 */
#define _GNU_SOURCE
#include "core_private.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <link.h>
#include <sys/syscall.h>

int iop_enabled = 0;
IOP_TLS int iop_in_runtime = 0;
long iop_nested_calls;
int iop_use_tsc = 0;
uint64_t iop_tsc0 = 0;
long iop_overflows[IOP_NOVERFLOWS];
long iop_deferred;

/* ------------------------------------------------------------------ */
/* Configuration and process identity. */

iop_process iop_proc = {.rank = -1, .nprocs = 1, .max_records = 50000000, .layers = ~0,
                        .exit_code = -1};

iop_lock_t iop_core_lock;

/* The program's standard streams are not ours: warnings go into the
 * process summary, and the report shows them. */
void warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int i = __atomic_fetch_add(&iop_proc.nwarnings, 1, __ATOMIC_RELAXED);
    if (i < IOP_NWARN) vsnprintf(iop_proc.warnings[i], sizeof iop_proc.warnings[i], fmt, ap);
    va_end(ap);
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
    return (double)(ts.tv_sec - iop_proc.t0.tv_sec) * 1e9 +
           (double)(ts.tv_nsec - iop_proc.t0.tv_nsec);
}

double iop_clock_ticks(void) { return mono_ns(); }

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

/* A program linked with the runtime (runtime/link/) carries a copy of its
 * own, which exports this marker: a preloaded copy in the same process
 * then stands aside, so that no call is counted twice. */
int another_copy_traces(void) {
#ifdef IOP_LINK
    return 0; /* we are the program's copy */
#else
    return dlsym(RTLD_DEFAULT, "iopilot_linked_runtime") != NULL;
#endif
}

/* ------------------------------------------------------------------ */
/* Process identity. */

/* After vfork, or a clone without fork handlers, the child shares our
 * memory under another pid: nothing of ours may change there. */
int this_is_our_process(void) {
    return iop_in_runtime < IOP_VFORK_ONE && (pid_t)syscall(SYS_getpid) == iop_proc.pid;
}

static void note_exit_status(int status, void *arg) {
    (void)arg;
    if (this_is_our_process()) iop_proc.exit_code = status & 0xff;
}

/* exit() runs its handlers last-registered first, and the one that runs the
 * libraries' destructors (ours writes the summary) is registered just
 * before main starts: a handler that learns the status in time must be
 * registered after that, so the first record of the program does it. */
void iop_watch_exit_status(void) {
    static int done;
    if (!__atomic_exchange_n(&done, 1, __ATOMIC_RELAXED)) on_exit(note_exit_status, NULL);
}

