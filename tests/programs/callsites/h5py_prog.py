"""Two HDF5 mistakes on known lines, for the call-site tests: each line marked
"MISTAKE: <check> in <function>" is the call the finding of that check is
about.

1. a series written one element per dset[i] = v (3,000 HDF5 writes of 8 bytes);
2. a field stored in 1 KiB chunks, written in 1 MiB slabs (1,024 chunks each).
Usage: python h5py_prog.py   (writes out.h5 in the current directory)
"""

import h5py
import numpy as np

ELEMENTS, SLABS, SLAB = 3000, 8, 128 * 1024


def write_series(f: h5py.File) -> None:
    dset = f.create_dataset("series", shape=(ELEMENTS,), dtype="f8")
    for i in range(ELEMENTS):
        dset[i] = i * 1e-3  # MISTAKE: hdf5-small-dataset-access in write_series


def main() -> None:
    with h5py.File("out.h5", "w") as f:
        write_series(f)
        field = f.create_dataset("field", shape=(SLABS * SLAB,), dtype="f8", chunks=(128,))
        slab = np.arange(SLAB, dtype="f8")
        for s in range(SLABS):
            field[s * SLAB:(s + 1) * SLAB] = slab  # MISTAKE: hdf5-chunking in main


if __name__ == "__main__":
    main()
