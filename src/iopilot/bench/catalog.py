"""The I/O kernels `make` builds (sources in kernels/), by name.

Kept apart from the driver so the command line can list them without
importing what running them needs.
"""

KERNELS = {
    "vpicio": "VPIC-IO: particles x 8 variables per time step into one HDF5 file",
    "bdcats": "BD-CATS-IO: read back and verify what vpicio wrote",
    "hacc": "HACC-IO: 9 variables per particle, raw MPI-IO or HDF5 layouts",
    "ior": "IOR-style: POSIX, MPI-IO or HDF5; block, transfer, segments, shared or per-process",
    "epochs": "compute + I/O epochs (checkpoint pattern) for overlap studies",
    "mdtest": "metadata: create, stat, open/close and remove many files",
}
