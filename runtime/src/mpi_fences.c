/* MPI calls after which another rank may look at files this one wrote:
 * write-behind's deferred POSIX writes (behind.c) land first, whether the
 * program calls MPI from C or through the Fortran bindings (which call
 * PMPI_* directly, so they are wrapped here too).  Not in relaxed mode
 * (IOPILOT_ASYNC_RELAXED), where the program promises that only a sync or
 * close publishes a file; a barrier waits in every mode.
 *
 * Like mpiio.c, this needs mpi.h for the types only; libmpi is never linked.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include "behind.h"
#include "core.h"
#include "mpi_fortran.h"

/* ------------------------------------------------------------------ */
/* C. */

/* Another rank may read after a barrier what this one wrote before it. */
REAL_DECL(int, PMPI_Barrier, (MPI_Comm));
IOP_EXPORT int MPI_Barrier(MPI_Comm comm) {
    if (iop_fence_needed() && iop_active()) iop_fence_all();
    return REAL(PMPI_Barrier)(comm);
}

/* Any message may tell another rank that a file is ready to read: the
 * program's deferred POSIX writes land first (not in relaxed mode, where
 * the program promises that only a sync or close publishes a file). */
#define WRAP_MESSAGE(name, params, args)                                      \
    REAL_DECL(int, P##name, params);                                          \
    IOP_EXPORT int name params {                                              \
        if (iop_fence_needed() && !iop_behind_relaxed && iop_active())        \
            iop_fence_all();                                                  \
        return REAL(P##name) args;                                            \
    }
#define P2P_PARAMS (const void *b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c)
#define P2P_IPARAMS (const void *b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c, MPI_Request *r)
WRAP_MESSAGE(MPI_Send, P2P_PARAMS, (b, n, t, to, tag, c))
WRAP_MESSAGE(MPI_Ssend, P2P_PARAMS, (b, n, t, to, tag, c))
WRAP_MESSAGE(MPI_Bsend, P2P_PARAMS, (b, n, t, to, tag, c))
WRAP_MESSAGE(MPI_Rsend, P2P_PARAMS, (b, n, t, to, tag, c))
WRAP_MESSAGE(MPI_Isend, P2P_IPARAMS, (b, n, t, to, tag, c, r))
WRAP_MESSAGE(MPI_Issend, P2P_IPARAMS, (b, n, t, to, tag, c, r))
WRAP_MESSAGE(MPI_Sendrecv, (const void *sb, int sn, MPI_Datatype st, int to, int stag, void *rb,
                            int rn, MPI_Datatype rt, int from, int rtag, MPI_Comm c,
                            MPI_Status *s), (sb, sn, st, to, stag, rb, rn, rt, from, rtag, c, s))
WRAP_MESSAGE(MPI_Sendrecv_replace, (void *b, int n, MPI_Datatype t, int to, int stag, int from,
                                    int rtag, MPI_Comm c, MPI_Status *s),
             (b, n, t, to, stag, from, rtag, c, s))
WRAP_MESSAGE(MPI_Bcast, (void *b, int n, MPI_Datatype t, int root, MPI_Comm c), (b, n, t, root, c))
WRAP_MESSAGE(MPI_Ibcast, (void *b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *r),
             (b, n, t, root, c, r))
WRAP_MESSAGE(MPI_Reduce, (const void *sb, void *rb, int n, MPI_Datatype t, MPI_Op op, int root,
                          MPI_Comm c), (sb, rb, n, t, op, root, c))
WRAP_MESSAGE(MPI_Allreduce, (const void *sb, void *rb, int n, MPI_Datatype t, MPI_Op op,
                             MPI_Comm c), (sb, rb, n, t, op, c))
WRAP_MESSAGE(MPI_Iallreduce, (const void *sb, void *rb, int n, MPI_Datatype t, MPI_Op op,
                              MPI_Comm c, MPI_Request *r), (sb, rb, n, t, op, c, r))
WRAP_MESSAGE(MPI_Gather, (const void *sb, int sn, MPI_Datatype st, void *rb, int rn,
                          MPI_Datatype rt, int root, MPI_Comm c), (sb, sn, st, rb, rn, rt, root, c))
WRAP_MESSAGE(MPI_Gatherv, (const void *sb, int sn, MPI_Datatype st, void *rb, const int rn[],
                           const int d[], MPI_Datatype rt, int root, MPI_Comm c),
             (sb, sn, st, rb, rn, d, rt, root, c))
WRAP_MESSAGE(MPI_Allgather, (const void *sb, int sn, MPI_Datatype st, void *rb, int rn,
                             MPI_Datatype rt, MPI_Comm c), (sb, sn, st, rb, rn, rt, c))
WRAP_MESSAGE(MPI_Allgatherv, (const void *sb, int sn, MPI_Datatype st, void *rb, const int rn[],
                              const int d[], MPI_Datatype rt, MPI_Comm c),
             (sb, sn, st, rb, rn, d, rt, c))
WRAP_MESSAGE(MPI_Scatter, (const void *sb, int sn, MPI_Datatype st, void *rb, int rn,
                           MPI_Datatype rt, int root, MPI_Comm c), (sb, sn, st, rb, rn, rt, root, c))
WRAP_MESSAGE(MPI_Scatterv, (const void *sb, const int sn[], const int d[], MPI_Datatype st,
                            void *rb, int rn, MPI_Datatype rt, int root, MPI_Comm c),
             (sb, sn, d, st, rb, rn, rt, root, c))
WRAP_MESSAGE(MPI_Alltoall, (const void *sb, int sn, MPI_Datatype st, void *rb, int rn,
                            MPI_Datatype rt, MPI_Comm c), (sb, sn, st, rb, rn, rt, c))
WRAP_MESSAGE(MPI_Alltoallv, (const void *sb, const int sn[], const int sd[], MPI_Datatype st,
                             void *rb, const int rn[], const int rd[], MPI_Datatype rt,
                             MPI_Comm c), (sb, sn, sd, st, rb, rn, rd, rt, c))
WRAP_MESSAGE(MPI_Reduce_scatter, (const void *sb, void *rb, const int rn[], MPI_Datatype t,
                                  MPI_Op op, MPI_Comm c), (sb, rb, rn, t, op, c))
WRAP_MESSAGE(MPI_Scan, (const void *sb, void *rb, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c),
             (sb, rb, n, t, op, c))
WRAP_MESSAGE(MPI_Exscan, (const void *sb, void *rb, int n, MPI_Datatype t, MPI_Op op,
                          MPI_Comm c), (sb, rb, n, t, op, c))
WRAP_MESSAGE(MPI_Ibarrier, (MPI_Comm c, MPI_Request *r), (c, r))
WRAP_MESSAGE(MPI_Put, (const void *b, int n, MPI_Datatype t, int to, MPI_Aint d, int tn,
                       MPI_Datatype tt, MPI_Win w), (b, n, t, to, d, tn, tt, w))
WRAP_MESSAGE(MPI_Win_fence, (int a, MPI_Win w), (a, w))

/* ------------------------------------------------------------------ */
/* Fortran.  Every argument of a Fortran binding is a pointer; the
 * count is the standard's arguments plus IERROR. */

#define P2 (void *a, void *b)
#define A2 (a, b)
#define P3 (void *a, void *b, void *c)
#define A3 (a, b, c)
#define P6 (void *a, void *b, void *c, void *d, void *e, void *f)
#define A6 (a, b, c, d, e, f)
#define P7 (void *a, void *b, void *c, void *d, void *e, void *f, void *g)
#define A7 (a, b, c, d, e, f, g)
#define P8 (void *a, void *b, void *c, void *d, void *e, void *f, void *g, void *h)
#define A8 (a, b, c, d, e, f, g, h)
#define P9 (void *a, void *b, void *c, void *d, void *e, void *f, void *g, void *h, void *i)
#define A9 (a, b, c, d, e, f, g, h, i)
#define P10 (void *a, void *b, void *c, void *d, void *e, void *f, void *g, void *h, void *i, \
             void *j)
#define A10 (a, b, c, d, e, f, g, h, i, j)
#define P13 (void *a, void *b, void *c, void *d, void *e, void *f, void *g, void *h, void *i, \
             void *j, void *k, void *l, void *m)
#define A13 (a, b, c, d, e, f, g, h, i, j, k, l, m)

/* ``relaxed``: whether IOPILOT_ASYNC_RELAXED lets the call pass (not for
 * a barrier, as in C). */
#define F_FENCE(low, UP, n, relaxed)                                                        \
    FORTRAN_NAMES(low, UP);                                                                 \
    IOP_EXPORT void ompi_##low##_f P##n {                                                   \
        if (iop_fence_needed() && !((relaxed) && iop_behind_relaxed) &&                     \
            iop_active())                                                                   \
            iop_fence_all();                                                                \
        REAL_F(low) A##n;                                                                   \
    }                                                                                       \
    FORTRAN_ALIASES(low, UP)

F_FENCE(barrier, BARRIER, 2, 0)
F_FENCE(send, SEND, 7, 1)
F_FENCE(ssend, SSEND, 7, 1)
F_FENCE(bsend, BSEND, 7, 1)
F_FENCE(rsend, RSEND, 7, 1)
F_FENCE(isend, ISEND, 8, 1)
F_FENCE(issend, ISSEND, 8, 1)
F_FENCE(sendrecv, SENDRECV, 13, 1)
F_FENCE(sendrecv_replace, SENDRECV_REPLACE, 10, 1)
F_FENCE(bcast, BCAST, 6, 1)
F_FENCE(ibcast, IBCAST, 7, 1)
F_FENCE(reduce, REDUCE, 8, 1)
F_FENCE(allreduce, ALLREDUCE, 7, 1)
F_FENCE(iallreduce, IALLREDUCE, 8, 1)
F_FENCE(gather, GATHER, 9, 1)
F_FENCE(gatherv, GATHERV, 10, 1)
F_FENCE(allgather, ALLGATHER, 8, 1)
F_FENCE(allgatherv, ALLGATHERV, 9, 1)
F_FENCE(scatter, SCATTER, 9, 1)
F_FENCE(scatterv, SCATTERV, 10, 1)
F_FENCE(alltoall, ALLTOALL, 8, 1)
F_FENCE(alltoallv, ALLTOALLV, 10, 1)
F_FENCE(reduce_scatter, REDUCE_SCATTER, 7, 1)
F_FENCE(scan, SCAN, 7, 1)
F_FENCE(exscan, EXSCAN, 7, 1)
F_FENCE(ibarrier, IBARRIER, 3, 1)
F_FENCE(put, PUT, 9, 1)
F_FENCE(win_fence, WIN_FENCE, 3, 1)
