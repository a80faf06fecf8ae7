/* This process's processors, for the summary's "cpu" part: the CPUs it may
 * run on (its affinity mask at start), the node's online CPUs, the CPU its
 * first thread started on, the launcher that started it and what the
 * launcher's environment says of binding; at the end its user and system
 * CPU time; and the CPU time of its large reads and writes (core.h,
 * iop_io_cpu_*), the I/O's own cost of copying data to and from the kernel,
 * measured while measuring costs at most 1 % of their time.
 * Whether an I/O thread can run beside the computation, and what the I/O
 * costs the processor, follow from these.  Calls process.c only (the
 * clock); output.c writes what it read.
 */
#define _GNU_SOURCE
#include "core_private.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int64_t io_cpu_ns, io_cpu_bytes; /* of the measured large calls */
static int64_t sync_cpu_ns, syncs;      /* of the measured fsyncs and fdatasyncs */
static int64_t sync_ticks, sync_spent;  /* their time, and what measuring them cost */
static int64_t big_ticks;   /* the time every large call took */
static int64_t spent_ticks; /* what measuring has cost */
static int64_t cost_ticks;  /* one call's measuring: two reads of the clock */

static int64_t thread_cpu_ns(void) {
    struct timespec ts;
    int e = errno;
    int r = clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    errno = e;
    return r == 0 ? (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec : IOP_IO_UNMEASURED;
}

/* A large call starts (core.h): measured while measuring has cost at most
 * 1 % of the time the large calls took. */
int64_t iop_io_cpu_begin(void) {
    if (__atomic_load_n(&spent_ticks, __ATOMIC_RELAXED) * 100 >
        __atomic_load_n(&big_ticks, __ATOMIC_RELAXED))
        return IOP_IO_UNMEASURED;
    return thread_cpu_ns();
}

/* A large call ended: its time, and its CPU time if measured. */
void iop_io_cpu_slow(int64_t start, ssize_t moved, double t1, double t2) {
    __atomic_add_fetch(&big_ticks, (int64_t)(t2 - t1), __ATOMIC_RELAXED);
    if (start < 0) return;
    int64_t end = thread_cpu_ns();
    __atomic_add_fetch(&spent_ticks, cost_ticks, __ATOMIC_RELAXED);
    if (end < start || moved <= 0) return;
    __atomic_add_fetch(&io_cpu_ns, end - start, __ATOMIC_RELAXED);
    __atomic_add_fetch(&io_cpu_bytes, (int64_t)moved, __ATOMIC_RELAXED);
}

/* An fsync or fdatasync starts: measured while measuring the syncs has cost
 * at most 1 % of their time (a budget of their own: the first is measured). */
int64_t iop_sync_cpu_begin(void) {
    if (__atomic_load_n(&sync_spent, __ATOMIC_RELAXED) * 100 >
        __atomic_load_n(&sync_ticks, __ATOMIC_RELAXED))
        return IOP_IO_UNMEASURED;
    return thread_cpu_ns();
}

/* It ended: its CPU time if measured (the write-back it starts: finding the
 * dirty pages, building the requests). */
void iop_sync_cpu_end(int64_t start, double t1, double t2) {
    __atomic_add_fetch(&sync_ticks, (int64_t)(t2 - t1), __ATOMIC_RELAXED);
    if (start < 0) return;
    int64_t end = thread_cpu_ns();
    __atomic_add_fetch(&sync_spent, cost_ticks, __ATOMIC_RELAXED);
    if (end < start) return;
    __atomic_add_fetch(&sync_cpu_ns, end - start, __ATOMIC_RELAXED);
    __atomic_add_fetch(&syncs, 1, __ATOMIC_RELAXED);
}

/* What two reads of the thread's CPU clock cost, in the runtime's ticks. */
static void measure_cost(void) {
    double t = iop_now();
    for (int i = 0; i < 8; i++) (void)thread_cpu_ns();
    int64_t cost = (int64_t)((iop_now() - t) / 4);
    cost_ticks = cost > 0 ? cost : 1;
}

static cpu_set_t allowed;
static int allowed_known;
static long online;
static int ran_on = -1;
static const char *launcher = "";
static char binding[512];

/* Launchers, from variables they set in their ranks' environment; first
 * match wins (mpirun and mpiexec inside a Slurm allocation are the
 * launcher, not Slurm).  Then the variables that say how ranks are bound. */
static const char *const ompi_binding[] = {"OMPI_MCA_hwloc_base_binding_policy",
                                           "OMPI_MCA_rmaps_base_mapping_policy",
                                           "OMPI_MCA_orte_bound_at_launch", NULL};
static const char *const slurm_binding[] = {"SLURM_CPU_BIND", "SLURM_CPU_BIND_TYPE",
                                            "SLURM_CPU_BIND_LIST", "SLURM_CPUS_PER_TASK", NULL};
static const char *const mpich_binding[] = {"HYDRA_BINDING", "I_MPI_PIN", "I_MPI_PIN_DOMAIN",
                                            "I_MPI_PIN_PROCESSOR_LIST", NULL};

static int hydra_started(void) {
    extern char **environ;
    for (char **e = environ; e && *e; e++)
        if (!strncmp(*e, "HYDRA_", 6)) return 1;
    return 0;
}

/* "VAR=value VAR=value" of the binding variables that are set. */
static void note_binding(const char *const *vars) {
    size_t at = 0;
    for (; *vars; vars++) {
        const char *v = getenv(*vars);
        if (!v) continue;
        size_t need = strlen(*vars) + 1 + strlen(v) + (at ? 1 : 0);
        if (at + need >= sizeof binding) break;
        at += (size_t)snprintf(binding + at, sizeof binding - at, "%s%s=%s", at ? " " : "",
                               *vars, v);
    }
}

static void read_launcher(void) {
    const char *const *vars = NULL;
    if (getenv("OMPI_COMM_WORLD_SIZE")) launcher = "openmpi", vars = ompi_binding;
    else if (hydra_started() || (getenv("PMI_RANK") && !getenv("SLURM_STEP_ID")))
        launcher = "mpich", vars = mpich_binding;
    else if (getenv("SLURM_STEP_ID") || getenv("SLURM_JOB_ID"))
        launcher = "slurm", vars = slurm_binding;
    binding[0] = 0;
    if (vars) note_binding(vars);
}

/* Where this image runs now: at start, and in a child of fork. */
static void read_placement(void) {
    allowed_known = sched_getaffinity(0, sizeof allowed, &allowed) == 0;
    unsigned cpu;
    ran_on = syscall(SYS_getcpu, &cpu, NULL, NULL) == 0 ? (int)cpu : -1;
}

void cpu_start(void) {
    int e = errno;
    online = sysconf(_SC_NPROCESSORS_ONLN);
    measure_cost();
    read_placement();
    read_launcher();
    errno = e;
}

/* The child is an image of its own: its own I/O, where it runs now (the
 * launcher is the parent's).  Raw system calls only. */
void cpu_after_fork(void) {
    int e = errno;
    io_cpu_ns = io_cpu_bytes = big_ticks = spent_ticks = 0;
    sync_cpu_ns = syncs = sync_ticks = sync_spent = 0;
    read_placement();
    errno = e;
}

/* What the summary says of it (output.c writes it).  At the end: also
 * from a signal handler, so system calls only. */
void cpu_read(iop_cpu_info *out) {
    int e = errno;
    struct rusage ru;
    out->have_usage = syscall(SYS_getrusage, RUSAGE_SELF, &ru) == 0;
    errno = e;
    out->user_s = out->have_usage ? (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec : 0;
    out->system_s = out->have_usage ? (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec : 0;
    out->allowed = allowed_known ? &allowed : NULL;
    out->online = online;
    out->ran_on = ran_on;
    out->io_cpu_s = 1e-9 * (double)__atomic_load_n(&io_cpu_ns, __ATOMIC_RELAXED);
    out->io_cpu_bytes = __atomic_load_n(&io_cpu_bytes, __ATOMIC_RELAXED);
    out->io_sync_cpu_s = 1e-9 * (double)__atomic_load_n(&sync_cpu_ns, __ATOMIC_RELAXED);
    out->io_syncs = __atomic_load_n(&syncs, __ATOMIC_RELAXED);
    out->launcher = launcher;
    out->binding = binding;
}
