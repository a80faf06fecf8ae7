/* The modules the core calls, in this order (the core itself names none).
 *
 * A module is one file that ends with its ``iop_module`` (see core.h): a
 * layer records calls under its layers, a feature acts through its hooks
 * only.  The references are weak: a module whose file is not in the build
 * (mpiio.c without MPI headers, the fault-test builds without HDF5 or
 * MPI-IO) reads as NULL here, and the core skips it.
 *
 * Adding a layer is three files: its .c file (wrappers built on core.h,
 * its ``iop_module`` at the end; the Makefile builds every file here), its
 * line below, and its layer and counters in src/iopilot/vocabulary.py
 * (tools/gen_vocabulary.py writes them into include/iopilot_vocab.h); plus
 * its test.  A layer that grows into several files shares a private header
 * (posix_private.h, hdf5_private.h); a module calls the core through
 * core.h only (tests/test_runtime_layout.py checks it).
 *
 * The order is that of the layers' parts in the summary, and of the hooks:
 * settings is read (init) before any module applies its values (settings
 * hooks); write-behind starts before the fatal-signal handlers that wait
 * for it; the settings outcomes come before write-behind's figures in the
 * summary.
 */
#include "core_private.h"

#define IOP_MODULE(name) extern const iop_module name __attribute__((weak))
IOP_MODULE(iop_posix_module);
IOP_MODULE(iop_stdio_module);
IOP_MODULE(iop_mpiio_module);
IOP_MODULE(iop_hdf5_module);
IOP_MODULE(iop_fortran_module);
IOP_MODULE(iop_settings_module);
IOP_MODULE(iop_direct_module);
IOP_MODULE(iop_behind_module);
IOP_MODULE(iop_signals_module);
IOP_MODULE(iop_python_module);

const iop_module *const iop_modules[] = {
    /* layers */
    &iop_posix_module,
    &iop_stdio_module,
    &iop_mpiio_module,
    &iop_hdf5_module,
    &iop_fortran_module,
    /* features */
    &iop_settings_module,
    &iop_direct_module,
    &iop_behind_module,
    &iop_signals_module,
    &iop_python_module, /* Python lines as call sites */
};
const int iop_nmodules = sizeof iop_modules / sizeof iop_modules[0];
