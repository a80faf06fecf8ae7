"""h5py: a dataset read one element at a time in a Python loop.

Mistake: the analysis walks a 1-D dataset of 100,000 values with
`dset[i]` inside a for loop; every index is a separate HDF5 read (a new
dataspace selection, a chunk lookup, a type conversion check) that moves
8 bytes, so the library's per-call work dwarfs the data.
Fix: read the dataset once into a NumPy array (`dset[:]`) and loop over,
or better vectorise on, the array in memory.  The result is the same.
"""
import sys

import h5py
import numpy as np

N = 100_000


def main(mode: str) -> None:
    with h5py.File("series.h5", "w") as f:
        f.create_dataset("series", data=np.sin(np.arange(N) * 1e-3), chunks=(4096,))

    with h5py.File("series.h5", "r") as f:
        dset = f["series"]
        if mode == "mistake":
            peak = 0.0
            for i in range(N):
                peak = max(peak, abs(float(dset[i])))
        else:
            peak = float(np.abs(dset[:]).max())
    assert 0.99 < peak <= 1.0


if __name__ == "__main__":
    main(sys.argv[1])
