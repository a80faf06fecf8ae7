/* Wrapping an MPI routine's Fortran binding by all its names (mpiio_fortran.c,
 * mpi_fences.c).
 *
 * A Fortran program's CALL MPI_X(...) reaches the library's binding of X,
 * exported under several names: Open MPI's libmpi_mpifh defines
 * ompi_x_f and, as weak aliases of the same function, mpi_x_, mpi_x__,
 * mpi_x and MPI_X (gfortran, mpif.h and `use mpi` programs bind to mpi_x_;
 * libmpi_usempif08 calls ompi_x_f).  A wrapper is one function,
 * ompi_<low>_f, exported under all those names (aliases share one address,
 * as in the library, so a call is counted once whatever name it came in
 * under); it calls the library's binding, the first of the names the
 * library defines, looked up when first needed.  Every argument of a
 * binding is a pointer (then hidden string lengths, size_t). */
#ifndef IOPILOT_MPI_FORTRAN_H
#define IOPILOT_MPI_FORTRAN_H

#include <mpi.h>

#include "core.h"

typedef MPI_Fint F;

/* The library's binding: the first of ``names`` it defines. */
static inline void *iop_fortran_binding(void **slot, const char *const names[]) {
    void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (IOP_LIKELY(p != NULL)) return p;
    for (int i = 0; names[i] && !p; i++) p = iop_resolve(names[i]);
    __atomic_store_n(slot, p, __ATOMIC_RELEASE);
    return p;
}

/* The binding of routine ``low``, as a function of the wrapper's own type. */
#define REAL_F(low) ((__typeof__(&ompi_##low##_f))iop_fortran_binding(&real_##low, names_##low))

/* Declares the names of routine ``low``/``UP`` and the slot of its binding. */
#define FORTRAN_NAMES(low, UP)                                                    \
    static void *real_##low;                                                      \
    static const char *const names_##low[] = {"ompi_" #low "_f", "mpi_" #low "_", \
                                              "mpi_" #low "__",  "mpi_" #low,     \
                                              "MPI_" #UP,        NULL}

#define ALIAS_OF(low, name)                    \
    extern __typeof__(ompi_##low##_f) name     \
        __attribute__((alias("ompi_" #low "_f"), visibility("default")));
/* The other names the wrapper ompi_<low>_f answers to. */
#define FORTRAN_ALIASES(low, UP)  \
    ALIAS_OF(low, mpi_##low##_)   \
    ALIAS_OF(low, mpi_##low##__) ALIAS_OF(low, mpi_##low) ALIAS_OF(low, MPI_##UP)

#endif
