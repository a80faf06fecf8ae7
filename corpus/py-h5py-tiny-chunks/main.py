"""h5py: a 2-D field stored in 4x4 chunks, written and read in 64-row slabs.

Mistake: chunks=(4, 4) makes every 64 x 1024 slab (512 KiB) span 4,096
chunks of 128 bytes each; HDF5 indexes, allocates and moves each one
separately (and the chunk cache cannot hold a slab), so the writes and reads
turn into tens of thousands of tiny chunk operations.
Fix: chunks=(64, 1024), one chunk per slab, so each slab write or read is one
chunk of 512 KiB.  The data and the slab-by-slab access are the same.
"""
import sys

import h5py
import numpy as np

ROWS, COLS, SLAB = 1024, 1024, 64


def main(mode: str) -> None:
    chunks = (4, 4) if mode == "mistake" else (SLAB, COLS)
    field = np.arange(ROWS * COLS, dtype="f8").reshape(ROWS, COLS)
    with h5py.File("field.h5", "w") as f:
        dset = f.create_dataset("field", shape=(ROWS, COLS), dtype="f8", chunks=chunks)
        for r in range(0, ROWS, SLAB):
            dset[r:r + SLAB, :] = field[r:r + SLAB]

    total = 0.0
    with h5py.File("field.h5", "r") as f:
        dset = f["field"]
        for r in range(0, ROWS, SLAB):
            total += float(dset[r:r + SLAB, :].sum())
    assert total == float(field.sum())


if __name__ == "__main__":
    main(sys.argv[1])
