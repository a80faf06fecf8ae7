/* The layer modules the core iterates over (the core itself names none).
 *
 * Each module defines its ``iop_module`` at the end of its own file.  The
 * references are weak: a module whose file is not in the build (mpiio.c
 * without MPI headers, the fault-test builds without HDF5 or MPI-IO) reads
 * as NULL here, and the core skips it.  Adding a module is its file, its
 * line below, and its layers and counters in src/iopilot/vocabulary.py.
 * The order is that of the modules' parts in the summary.
 */
#include "core_private.h"

#define IOP_MODULE(name) extern const iop_module name __attribute__((weak))
IOP_MODULE(iop_posix_module);
IOP_MODULE(iop_stdio_module);
IOP_MODULE(iop_mpiio_module);
IOP_MODULE(iop_hdf5_module);
IOP_MODULE(iop_fortran_module);

const iop_module *const iop_modules[] = {
    &iop_posix_module,
    &iop_stdio_module,
    &iop_mpiio_module,
    &iop_hdf5_module,
    &iop_fortran_module,
};
const int iop_nmodules = sizeof iop_modules / sizeof iop_modules[0];
