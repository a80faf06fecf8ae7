"""h5py: the output file opened and closed again for every step's row.

Mistake: each of 2,000 steps does `with h5py.File("out.h5", "a") as f:
f["state"][step] = row`: every step HDF5 opens the file, reads the
superblock and the root group, looks up the dataset, reads the 128 KiB
chunk the row falls in, then on close writes that chunk back and flushes
its metadata; the opening and closing cost far more than the 2 KiB row.
Fix: open the file once before the loop and keep the dataset handle; each
step still writes its one row (the chunk cache keeps the chunk in memory).
The file is the same.
"""
import sys

import h5py
import numpy as np

STEPS, WIDTH = 2000, 256


def main(mode: str) -> None:
    with h5py.File("out.h5", "w") as f:
        f.create_dataset("state", shape=(STEPS, WIDTH), dtype="f8", chunks=(64, WIDTH))

    state = np.zeros(WIDTH)
    f = h5py.File("out.h5", "a") if mode == "fixed" else None
    dset = f["state"] if f is not None else None
    for step in range(STEPS):
        state = state + 1.0                        # the "simulation"
        if mode == "mistake":
            with h5py.File("out.h5", "a") as g:
                g["state"][step] = state
        else:
            dset[step] = state
    if f is not None:
        f.close()

    with h5py.File("out.h5", "r") as f:
        assert f["state"][-1, 0] == STEPS


if __name__ == "__main__":
    main(sys.argv[1])
