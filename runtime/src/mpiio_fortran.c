/* MPI-IO layer: calls made through MPI's Fortran bindings.
 *
 * A Fortran program's CALL MPI_FILE_WRITE_AT(...) reaches the library's
 * Fortran binding (Open MPI: ompi_file_write_at_f of libmpi_mpifh, alias
 * mpi_file_write_at_ ...; libmpi_usempif08 calls it too), which calls
 * PMPI_File_write_at directly: the C wrappers of mpiio.c never see it.  So
 * the bindings are wrapped here by name (mpi_fortran.h) and hand what the
 * call did, with the handles converted by MPI_File_f2c and MPI_Type_f2c,
 * to the recording path the C wrappers use (mpiio.h): same counters,
 * offsets, records, hints and settings.
 *
 * Handles are converted only once a file was opened with MPI up (the open
 * itself asks MPI_Initialized and MPI_Finalized), so nothing is converted
 * before MPI_Init or after MPI_Finalize.  A file name longer than the
 * runtime's buffer is opened untraced.  Without Fortran bindings in the
 * MPI library, nothing calls these wrappers.
 *
 * MPI_INIT and MPI_FINALIZE are wrapped too (the rank; the trace written
 * before finalize).  The Fortran messages are in mpi_fences.c.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stddef.h>

#include "core.h"
#include "mpi_fortran.h"
#include "mpiio.h"

REAL_DECL(MPI_File, PMPI_File_f2c, (MPI_Fint));
REAL_DECL(MPI_Datatype, PMPI_Type_f2c, (MPI_Fint));
REAL_DECL(MPI_Comm, PMPI_Comm_f2c, (MPI_Fint));
REAL_DECL(MPI_Info, PMPI_Info_f2c, (MPI_Fint));
REAL_DECL(MPI_Fint, PMPI_Info_c2f, (MPI_Info));
REAL_DECL(int, PMPI_Initialized, (int *));
REAL_DECL(int, PMPI_Finalized, (int *));

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
    IOP_SCOPE; double t1 = iop_now();                                                                  \
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
    iop_fence_all();
    iop_stats *st = o->st;
    IOP_SCOPE; double t1 = iop_now();
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
        iop_fence_all(); /* the program's deferred POSIX writes too */                      \
        IOP_SCOPE; double t1 = iop_now();                                                              \
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
