/* The job's clock: how far this host's clock is from world rank 0's.
 *
 * Each process stamps its records against its own host's CLOCK_REALTIME,
 * and hosts' clocks disagree by milliseconds or more.  At MPI_Init and
 * again before MPI_Finalize, one rank per node (the lowest) asks world
 * rank 0 for the time a few times; the exchange with the shortest round
 * trip gives the offset (rank 0's time at the middle of the round trip
 * minus ours) and its uncertainty (half that round trip).  Rank 0 answers
 * the nodes one after another: the cost grows with the node count, a few
 * microseconds per round trip on a cluster's network.  The node's
 * other ranks share its clock and get the same figures.  The reader moves
 * every process of a host by its host's offset (docs/trace-format.md).
 *
 * Every rank of a traced job must take part, or the others would wait
 * forever: whether to take part depends only on the environment, which
 * the ranks share (IOPILOT_TRACE_DIR set, IOPILOT_CLOCK_SYNC not "0"),
 * never on whether this process's runtime started.  Our messages travel on
 * communicators of our own, so they never meet the program's.
 *
 * Like mpiio.c, this needs mpi.h for the types only; libmpi is never linked
 * and its data objects are looked up by name at run time.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "mpi_clock.h"

enum { MIN_ROUNDS = 4, MAX_ROUNDS = 200, TAG = 7341 };
static const double GOOD_RTT = 100e-6; /* seconds */

REAL_DECL(int, PMPI_Comm_size, (MPI_Comm, int *));
REAL_DECL(int, PMPI_Comm_rank, (MPI_Comm, int *));
REAL_DECL(int, PMPI_Comm_split_type, (MPI_Comm, int, int, MPI_Info, MPI_Comm *));
REAL_DECL(int, PMPI_Comm_split, (MPI_Comm, int, int, MPI_Comm *));
REAL_DECL(int, PMPI_Comm_free, (MPI_Comm *));
REAL_DECL(int, PMPI_Send, (const void *, int, MPI_Datatype, int, int, MPI_Comm));
REAL_DECL(int, PMPI_Recv, (void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *));
REAL_DECL(int, PMPI_Bcast, (void *, int, MPI_Datatype, int, MPI_Comm));

static double realtime(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void *iop_mpi_object(const char *name) {
    void *p = dlsym(RTLD_DEFAULT, name);
    return p ? p : iop_resolve(name);
}

/* The handles we need, as this MPI spells them; 0 when one is missing. */
typedef struct {
    MPI_Comm world, null;
    MPI_Datatype dbl;
    MPI_Info info_null;
} handles;

static int find_handles(handles *h) {
#ifdef OPEN_MPI
    h->world = (MPI_Comm)iop_mpi_object("ompi_mpi_comm_world");
    h->null = (MPI_Comm)iop_mpi_object("ompi_mpi_comm_null");
    h->dbl = (MPI_Datatype)iop_mpi_object("ompi_mpi_double");
    h->info_null = (MPI_Info)iop_mpi_object("ompi_mpi_info_null");
    return h->world && h->null && h->dbl && h->info_null;
#else
    h->world = MPI_COMM_WORLD;
    h->null = MPI_COMM_NULL;
    h->dbl = MPI_DOUBLE;
    h->info_null = MPI_INFO_NULL;
    return 1;
#endif
}

/* Rank 0 of ``leaders`` answers ``peer``'s questions (one double each,
 * answered with its own clock) until the peer says it has enough (a
 * negative question). */
static void answer(const handles *h, MPI_Comm leaders, int peer) {
    for (int i = 0; i < MAX_ROUNDS + 1; i++) {
        double q, now;
        if (REAL(PMPI_Recv)(&q, 1, h->dbl, peer, TAG, leaders, MPI_STATUS_IGNORE) != MPI_SUCCESS ||
            q < 0)
            return;
        now = realtime();
        if (REAL(PMPI_Send)(&now, 1, h->dbl, peer, TAG, leaders) != MPI_SUCCESS) return;
    }
}

/* A node's leader asks rank 0: out[0] the offset, out[1] its uncertainty.
 * A round trip stretched by a descheduled process says little, so it asks
 * again until one is short (GOOD_RTT) or MAX_ROUNDS were asked. */
static void ask(const handles *h, MPI_Comm leaders, double out[2]) {
    double best = -1, done = -1;
    for (int i = 0; i < MAX_ROUNDS; i++) {
        if (i >= MIN_ROUNDS && best >= 0 && best < GOOD_RTT) break;
        double there, t1 = realtime();
        if (REAL(PMPI_Send)(&t1, 1, h->dbl, 0, TAG, leaders) != MPI_SUCCESS ||
            REAL(PMPI_Recv)(&there, 1, h->dbl, 0, TAG, leaders, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return;
        double t2 = realtime();
        if (best < 0 || t2 - t1 < best) {
            best = t2 - t1;
            out[0] = there - (t1 + t2) / 2;
            out[1] = best / 2;
        }
    }
    REAL(PMPI_Send)(&done, 1, h->dbl, 0, TAG, leaders);
}

static int wanted(void) {
    const char *dir = getenv("IOPILOT_TRACE_DIR");
    const char *sync = getenv("IOPILOT_CLOCK_SYNC");
    return dir && *dir && !(sync && strcmp(sync, "0") == 0);
}

void iop_mpi_clock_sample(void) {
    handles h;
    int size = 0, rank = 0, local = 0;
    if (!wanted() || !find_handles(&h)) return;
    if (REAL(PMPI_Comm_size)(h.world, &size) != MPI_SUCCESS || size < 2) return;
    if (REAL(PMPI_Comm_rank)(h.world, &rank) != MPI_SUCCESS) return;
    MPI_Comm node, leaders;
    /* key = world rank: world rank 0 leads its node and is rank 0 among leaders */
    if (REAL(PMPI_Comm_split_type)(h.world, MPI_COMM_TYPE_SHARED, rank, h.info_null, &node) !=
        MPI_SUCCESS)
        return;
    REAL(PMPI_Comm_rank)(node, &local);
    if (REAL(PMPI_Comm_split)(h.world, local == 0 ? 0 : MPI_UNDEFINED, rank, &leaders) !=
        MPI_SUCCESS)
        leaders = h.null;
    /* when, offset, uncertainty (-1: one node, nothing to measure) */
    double got[3] = {realtime(), 0, -1};
    if (leaders != h.null) {
        int lrank = 0, nleaders = 0;
        REAL(PMPI_Comm_rank)(leaders, &lrank);
        REAL(PMPI_Comm_size)(leaders, &nleaders);
        if (nleaders > 1 && lrank == 0) got[2] = 0; /* rank 0's node: offset 0 */
        for (int peer = 1; peer < nleaders; peer++) {
            if (lrank == 0) answer(&h, leaders, peer);
            else if (lrank == peer) ask(&h, leaders, got + 1);
        }
        REAL(PMPI_Comm_free)(&leaders);
    }
    /* the node's ranks read the same clock; the time of the sample is the leader's */
    REAL(PMPI_Bcast)(got, 3, h.dbl, 0, node);
    REAL(PMPI_Comm_free)(&node);
    if (got[2] >= 0) iop_clock_sample(got[0], got[1], got[2]);
}
