"""h5py: a table grown one row per step, then read back one row at a time.

Mistake: every one of the 5,000 rows costs a `resize` and a one-row write
(`dset[i] = row`), and the check afterwards reads `dset[i]` one row at a time:
10,000 tiny HDF5 selections, each paying h5py's and HDF5's per-call work
(dataspace selection, chunk lookup, B-tree update on resize).
Fix: keep the rows in memory, resize once and write them in one call, read
them back in one call.  Same dataset, same chunking, same bytes on disk.
"""
import sys

import h5py
import numpy as np

ROWS, WIDTH = 5000, 16


def main(mode: str) -> None:
    rows = np.arange(ROWS * WIDTH, dtype="f8").reshape(ROWS, WIDTH)
    with h5py.File("table.h5", "w") as f:
        dset = f.create_dataset("rows", shape=(0, WIDTH), maxshape=(None, WIDTH),
                                dtype="f8", chunks=(1024, WIDTH))
        if mode == "mistake":
            for i in range(ROWS):
                dset.resize(i + 1, axis=0)
                dset[i] = rows[i]
        else:
            dset.resize(ROWS, axis=0)
            dset[:] = rows

    with h5py.File("table.h5", "r") as f:
        dset = f["rows"]
        if mode == "mistake":
            back = np.empty_like(rows)
            for i in range(ROWS):
                back[i] = dset[i]
        else:
            back = dset[:]
    assert np.array_equal(back, rows)


if __name__ == "__main__":
    main(sys.argv[1])
