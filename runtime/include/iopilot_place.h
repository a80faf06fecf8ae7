/* Where a background I/O thread runs (write-behind's, the event-set
 * engine's).  A thread inherits its creator's affinity: under a launcher
 * that binds a rank to one core (Open MPI's mpirun for small rank counts,
 * Slurm's --cpu-bind=cores) the I/O thread and the computation share that
 * core, and the I/O hides nothing.  When the creating thread may run on more
 * than one CPU, the new thread is given those CPUs but the one the creator
 * is on now; with one CPU it stays there, and says it shares the core.
 * Only the new thread's affinity is set (through its attributes, before it
 * runs): the program's own threads are never moved.
 *
 *     iopilot_place p;
 *     iopilot_place_choose(&p);
 *     iopilot_place_attr(&p, &attr);      // then pthread_create(..., &attr, ...)
 */
#ifndef IOPILOT_PLACE_H
#define IOPILOT_PLACE_H

#include <pthread.h>
#include <sched.h>

typedef struct {
    cpu_set_t cpus;  /* the thread's CPUs */
    int creator_cpu; /* the CPU the creating thread ran on (-1 unknown) */
    int placed;      /* cpus is the creator's set less its CPU */
    int shares_core; /* the creator may run on one CPU only: the thread runs there too */
} iopilot_place;

static inline void iopilot_place_choose(iopilot_place *p) {
    p->creator_cpu = sched_getcpu();
    p->placed = 0;
    p->shares_core = 0;
    CPU_ZERO(&p->cpus);
    if (sched_getaffinity(0, sizeof p->cpus, &p->cpus) != 0) {
        CPU_ZERO(&p->cpus); /* more CPUs than a cpu_set_t holds: left as inherited */
        return;
    }
    int n = CPU_COUNT(&p->cpus);
    p->shares_core = n == 1;
    if (n > 1 && p->creator_cpu >= 0 && p->creator_cpu < CPU_SETSIZE &&
        CPU_ISSET(p->creator_cpu, &p->cpus)) {
        CPU_CLR(p->creator_cpu, &p->cpus);
        p->placed = 1;
    }
}

/* The placement into the new thread's attributes (nothing when not placed). */
static inline void iopilot_place_attr(const iopilot_place *p, pthread_attr_t *a) {
    if (p->placed) pthread_attr_setaffinity_np(a, sizeof p->cpus, &p->cpus);
}

#endif
