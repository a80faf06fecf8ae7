/* MPI-IO layer: calls made through MPI's Fortran bindings.
 *
 * A Fortran program's CALL MPI_FILE_WRITE_AT(...) reaches the library's
 * Fortran binding (Open MPI: libmpi_mpifh's ompi_file_write_at_f, also
 * known as mpi_file_write_at_, mpi_file_write_at__, mpi_file_write_at and
 * MPI_FILE_WRITE_AT; libmpi_usempif08 calls ompi_file_*_f), which calls
 * PMPI_File_write_at directly: the C wrappers of mpiio.c never see it.  So
 * the bindings are wrapped here by name.  Each wrapper is one function
 * exported under all those names (aliases share one address, as in the
 * library, so a call is counted once whatever name it came in under); it
 * calls the library's own binding (the first of the names the library
 * defines, looked up when first needed) and hands what it did, with the
 * handles converted by MPI_File_f2c and MPI_Type_f2c, to the recording
 * path the C wrappers use (mpiio.h): same counters, offsets and records.
 *
 * Handles are converted only once a file was opened with MPI up (the open
 * itself asks MPI_Initialized and MPI_Finalized), so nothing is converted
 * before MPI_Init or after MPI_Finalize.  A file name longer than the
 * runtime's buffer is opened untraced.  Without Fortran bindings in the
 * MPI library, nothing calls these wrappers.
 *
 * MPI_INIT and MPI_FINALIZE are wrapped too (the rank; the trace written
 * before finalize), and the Fortran message and barrier calls, which wait
 * for write-behind's deferred POSIX writes as their C forms do (mpiio.c).
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stddef.h>

#include "behind.h"
#include "core.h"
#include "mpiio.h"

typedef MPI_Fint F;

REAL_DECL(MPI_File, PMPI_File_f2c, (MPI_Fint));
REAL_DECL(MPI_Datatype, PMPI_Type_f2c, (MPI_Fint));
REAL_DECL(MPI_Comm, PMPI_Comm_f2c, (MPI_Fint));
REAL_DECL(MPI_Info, PMPI_Info_f2c, (MPI_Fint));
REAL_DECL(MPI_Fint, PMPI_Info_c2f, (MPI_Info));
REAL_DECL(int, PMPI_Initialized, (int *));
REAL_DECL(int, PMPI_Finalized, (int *));

/* ------------------------------------------------------------------ */
/* Names and resolution. */

/* The library's binding: the first of ``names`` it defines. */
static void *binding(void **slot, const char *const names[]) {
    void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (IOP_LIKELY(p != NULL)) return p;
    for (int i = 0; names[i] && !p; i++) p = iop_resolve(names[i]);
    __atomic_store_n(slot, p, __ATOMIC_RELEASE);
    return p;
}

/* The binding of routine ``low`` (mpi_<low>_ ...), as a function of the
 * wrapper's own type. */
#define REAL_F(low)                                                                         \
    ((__typeof__(&ompi_##low##_f))binding(&real_##low, names_##low))

/* Declares the names of routine ``low``/``UP`` and the slot of its binding. */
#define FORTRAN_NAMES(low, UP)                                                              \
    static void *real_##low;                                                                \
    static const char *const names_##low[] = {"ompi_" #low "_f", "mpi_" #low "_",           \
                                              "mpi_" #low "__",  "mpi_" #low,               \
                                              "MPI_" #UP,        NULL}

#define ALIAS_OF(low, name)                                                                 \
    extern __typeof__(ompi_##low##_f) name                                                  \
        __attribute__((alias("ompi_" #low "_f"), visibility("default")));
/* The other names the wrapper ompi_<low>_f answers to. */
#define FORTRAN_ALIASES(low, UP)                                                            \
    ALIAS_OF(low, mpi_##low##_)                                                             \
    ALIAS_OF(low, mpi_##low##__) ALIAS_OF(low, mpi_##low) ALIAS_OF(low, MPI_##UP)

/* ------------------------------------------------------------------ */
/* Handles. */

/* The traced file behind a Fortran handle (its C handle in ``*c``), or NULL. */
static inline iop_open *f_traced(const F *fh, MPI_File *c) {
    if (!iop_active() || iop_mpiio_depth || !__atomic_load_n(&iop_mpiio_live, __ATOMIC_RELAXED))
        return NULL;
    *c = REAL(PMPI_File_f2c)(*fh);
    return iop_handle(IOP_LAYER_MPIIO, (uintptr_t)*c);
}

static int mpi_up(void) {
    int init = 0, fin = 1;
    if (REAL(PMPI_Initialized)(&init) != MPI_SUCCESS || !init) return 0;
    return REAL(PMPI_Finalized)(&fin) == MPI_SUCCESS && !fin;
}

/* A Fortran string (no NUL, blank padded) as MPI reads it: leading and
 * trailing blanks dropped.  0 when it does not fit in ``out``. */
static int c_string(const char *s, size_t len, char *out, size_t size) {
    if (!s) return 0;
    while (len && *s == ' ') s++, len--;
    while (len && s[len - 1] == ' ') len--;
    if (len >= size) return 0;
    for (size_t i = 0; i < len; i++) out[i] = s[i];
    out[len] = 0;
    return 1;
}

/* Declares ``c`` and ``o`` (the handle's traced file), or makes ``CALL``
 * (the binding's) and returns when the handle is not traced. */
#define F_TRACED_OR_PASS(CALL)                                                              \
    MPI_File c;                                                                             \
    iop_open *o = f_traced(fh, &c);                                                         \
    if (!o) {                                                                               \
        CALL;                                                                               \
        return;                                                                             \
    }

/* ------------------------------------------------------------------ */
/* Data calls: time the binding's call, then record as mpiio.c does. */

#define F_TIMED(at, off, CALL, DONE, ...)                                                   \
    F_TRACED_OR_PASS(CALL);                                                                 \
    int64_t pre = iop_mpiio_offset_before(o, c, at);                                        \
    double t1 = iop_now();                                                                  \
    iop_mpiio_depth++;                                                                      \
    CALL;                                                                                   \
    iop_mpiio_depth--;                                                                      \
    int e = errno;                                                                          \
    double t2 = iop_now();                                                                  \
    DONE(o, c, __VA_ARGS__, off, pre, buf, *count, REAL(PMPI_Type_f2c)(*dt), *ierr, t1, t2); \
    errno = e

#define F_DATA(op, counter, flags, at, off, CALL)                                           \
    F_TIMED(at, off, CALL, iop_mpiio_data_done, op, IOP_C_##counter, flags, at)

/* Explicit offset: (fh, offset, buf, count, datatype, status or request, ierr). */
#define F_AT(low, UP, op, counter, flags)                                                   \
    FORTRAN_NAMES(low, UP);                                                                 \
    IOP_EXPORT void ompi_##low##_f(F *fh, MPI_Offset *off, void *buf, F *count, F *dt,      \
                                   F *last, F *ierr) {                                      \
        F_DATA(op, counter, flags, IOP_AT_EXPLICIT, *off,                                   \
               REAL_F(low)(fh, off, buf, count, dt, last, ierr));                           \
    }                                                                                       \
    FORTRAN_ALIASES(low, UP)

/* A file pointer: (fh, buf, count, datatype, status or request, ierr). */
#define F_PTR(low, UP, at, op, counter, flags)                                              \
    FORTRAN_NAMES(low, UP);                                                                 \
    IOP_EXPORT void ompi_##low##_f(F *fh, void *buf, F *count, F *dt, F *last, F *ierr) {   \
        F_DATA(op, counter, flags, at, 0, REAL_F(low)(fh, buf, count, dt, last, ierr));     \
    }                                                                                       \
    FORTRAN_ALIASES(low, UP)

#define RD IOP_OP_READ
#define WR IOP_OP_WRITE
#define COLL IOP_FLAG_COLLECTIVE
#define NB IOP_FLAG_NONBLOCKING

#define FORTRAN_AT(low, UP, op, counter, flags, BUFT, LASTT) \
    F_AT(file_##low, FILE_##UP, op, counter, flags)
#define FORTRAN_PTR(low, UP, at, op, counter, flags, BUFT, LASTT) \
    F_PTR(file_##low, FILE_##UP, at, op, counter, flags)
IOP_MPIIO_AT_CALLS(FORTRAN_AT)
IOP_MPIIO_PTR_CALLS(FORTRAN_PTR)

/* Split collectives: begin (fh, [offset,] buf, count, datatype, ierr),
 * end (fh, buf, status, ierr). */
#define F_BEGIN_AT(low, UP, op)                                                             \
    FORTRAN_NAMES(low, UP);                                                                 \
    IOP_EXPORT void ompi_##low##_f(F *fh, MPI_Offset *off, void *buf, F *count, F *dt,      \
                                   F *ierr) {                                               \
        F_TIMED(IOP_AT_EXPLICIT, *off, REAL_F(low)(fh, off, buf, count, dt, ierr),          \
                iop_mpiio_split_begun, op, IOP_AT_EXPLICIT);                                \
    }                                                                                       \
    FORTRAN_ALIASES(low, UP)

#define F_BEGIN(low, UP, at, op)                                                            \
    FORTRAN_NAMES(low, UP);                                                                 \
    IOP_EXPORT void ompi_##low##_f(F *fh, void *buf, F *count, F *dt, F *ierr) {            \
        F_TIMED(at, 0, REAL_F(low)(fh, buf, count, dt, ierr), iop_mpiio_split_begun, op, at); \
    }                                                                                       \
    FORTRAN_ALIASES(low, UP)

#define F_END(low, UP, op, counter)                                                         \
    FORTRAN_NAMES(low, UP);                                                                 \
    IOP_EXPORT void ompi_##low##_f(F *fh, void *buf, F *status, F *ierr) {                  \
        F_TRACED_OR_PASS(REAL_F(low)(fh, buf, status, ierr));                               \
        iop_mpiio_depth++;                                                                  \
        REAL_F(low)(fh, buf, status, ierr);                                                 \
        iop_mpiio_depth--;                                                                  \
        int e = errno;                                                                      \
        iop_mpiio_split_ended(o, c, op, IOP_C_##counter, *ierr, iop_now());                 \
        errno = e;                                                                          \
    }                                                                                       \
    FORTRAN_ALIASES(low, UP)

#define FORTRAN_BEGIN_AT(low, UP, op, BUFT) F_BEGIN_AT(file_##low, FILE_##UP, op)
#define FORTRAN_BEGIN(low, UP, at, op, BUFT) F_BEGIN(file_##low, FILE_##UP, at, op)
#define FORTRAN_END(low, UP, op, counter, BUFT) F_END(file_##low, FILE_##UP, op, counter)
IOP_MPIIO_BEGIN_AT_CALLS(FORTRAN_BEGIN_AT)
IOP_MPIIO_BEGIN_CALLS(FORTRAN_BEGIN)
IOP_MPIIO_END_CALLS(FORTRAN_END)

/* ------------------------------------------------------------------ */
/* Open and close. */

FORTRAN_NAMES(file_open, FILE_OPEN);
IOP_EXPORT void ompi_file_open_f(F *comm, char *name, F *amode, F *info, F *fh, F *ierr,
                                 size_t name_len);

/* The binding's open, called by iop_mpiio_open with the info to use. */
typedef struct {
    F *comm, *amode, *fh, *ierr;
    char *name;
    size_t len;
} f_open_call;

static int f_open_real(void *p, MPI_Info info, MPI_File *c) {
    const f_open_call *a = p;
    F finfo = REAL(PMPI_Info_c2f)(info);
    REAL_F(file_open)(a->comm, a->name, a->amode, &finfo, a->fh, a->ierr, a->len);
    if (*a->ierr == MPI_SUCCESS) *c = REAL(PMPI_File_f2c)(*a->fh);
    return *a->ierr;
}

IOP_EXPORT void ompi_file_open_f(F *comm, char *name, F *amode, F *info, F *fh, F *ierr,
                                 size_t name_len) {
    char path[4096];
    if (!iop_active() || iop_mpiio_depth || !mpi_up() ||
        !c_string(name, name_len, path, sizeof path)) {
        REAL_F(file_open)(comm, name, amode, info, fh, ierr, name_len);
        return;
    }
    f_open_call call = {comm, amode, fh, ierr, name, name_len};
    MPI_File c;
    iop_mpiio_open(REAL(PMPI_Comm_f2c)(*comm), path, *amode, REAL(PMPI_Info_f2c)(*info), &c,
                   f_open_real, &call);
}
FORTRAN_ALIASES(file_open, FILE_OPEN)

FORTRAN_NAMES(file_close, FILE_CLOSE);
IOP_EXPORT void ompi_file_close_f(F *fh, F *ierr) {
    F_TRACED_OR_PASS(REAL_F(file_close)(fh, ierr));
    iop_behind_fence_all();
    iop_stats *st = o->st;
    double t1 = iop_now();
    iop_mpiio_depth++;
    REAL_F(file_close)(fh, ierr);
    iop_mpiio_depth--;
    int e = errno;
    iop_mpiio_close_done(st, (uintptr_t)c, *ierr, t1, iop_now());
    errno = e;
}
FORTRAN_ALIASES(file_close, FILE_CLOSE)

/* ------------------------------------------------------------------ */
/* Sync, set_size, set_view, set_info. */

#define F_META(low, UP, params, args, op, counter)                                          \
    FORTRAN_NAMES(low, UP);                                                                 \
    IOP_EXPORT void ompi_##low##_f params {                                                 \
        F_TRACED_OR_PASS(REAL_F(low) args);                                                 \
        iop_behind_fence_all(); /* the program's deferred POSIX writes too */               \
        double t1 = iop_now();                                                              \
        iop_mpiio_depth++;                                                                  \
        REAL_F(low) args;                                                                   \
        iop_mpiio_depth--;                                                                  \
        int e = errno;                                                                      \
        iop_mpiio_meta_done(o, op, counter, COLL, *ierr, t1, iop_now());                    \
        errno = e;                                                                          \
    }                                                                                       \
    FORTRAN_ALIASES(low, UP)

F_META(file_sync, FILE_SYNC, (F * fh, F *ierr), (fh, ierr), IOP_OP_SYNC, IOP_C_SYNCS)
F_META(file_set_size, FILE_SET_SIZE, (F * fh, MPI_Offset *size, F *ierr), (fh, size, ierr),
       IOP_OP_TRUNCATE, -1)

#define F_SETTING(low, UP, params, args, counter)                                           \
    FORTRAN_NAMES(low, UP);                                                                 \
    IOP_EXPORT void ompi_##low##_f params {                                                 \
        F_TRACED_OR_PASS(REAL_F(low) args);                                                 \
        iop_mpiio_depth++;                                                                  \
        REAL_F(low) args;                                                                   \
        iop_mpiio_depth--;                                                                  \
        int e = errno;                                                                      \
        iop_mpiio_setting_done(o, counter, REAL(PMPI_Info_f2c)(*info), *ierr);              \
        errno = e;                                                                          \
    }                                                                                       \
    FORTRAN_ALIASES(low, UP)

F_SETTING(file_set_view, FILE_SET_VIEW,
          (F * fh, MPI_Offset *disp, F *etype, F *filetype, char *datarep, F *info, F *ierr,
           size_t datarep_len),
          (fh, disp, etype, filetype, datarep, info, ierr, datarep_len), IOP_C_VIEWS)
F_SETTING(file_set_info, FILE_SET_INFO, (F * fh, F *info, F *ierr), (fh, info, ierr), -1)

/* ------------------------------------------------------------------ */
/* Start and end of MPI. */

FORTRAN_NAMES(init, INIT);
IOP_EXPORT void ompi_init_f(F *ierr) {
    REAL_F(init)(ierr);
    int e = errno;
    iop_mpiio_init_done(*ierr);
    errno = e;
}
FORTRAN_ALIASES(init, INIT)

FORTRAN_NAMES(init_thread, INIT_THREAD);
IOP_EXPORT void ompi_init_thread_f(F *required, F *provided, F *ierr) {
    REAL_F(init_thread)(required, provided, ierr);
    int e = errno;
    iop_mpiio_init_done(*ierr);
    errno = e;
}
FORTRAN_ALIASES(init_thread, INIT_THREAD)

FORTRAN_NAMES(finalize, FINALIZE);
IOP_EXPORT void ompi_finalize_f(F *ierr) {
    iop_mpiio_finalizing();
    REAL_F(finalize)(ierr);
}
FORTRAN_ALIASES(finalize, FINALIZE)

/* ------------------------------------------------------------------ */
/* Messages: the program's deferred POSIX writes land first, as in the C
 * forms (mpiio.c).  Every argument of a Fortran binding is a pointer; the
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
        if (IOP_UNLIKELY(iop_behind_pending) && !((relaxed) && iop_behind_relaxed) &&       \
            iop_active())                                                                   \
            iop_behind_fence_all();                                                         \
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
