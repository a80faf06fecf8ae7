"""NumPy: the same 32 MiB input re-read with np.fromfile every step.

Mistake: each of 100 steps calls np.fromfile("mesh.bin") to get the mesh,
which never changes, so the run reads the same 32 MiB again and again (3.2 GiB
in all; from the page cache here, from the file system's servers on a
cluster).  The cost is the data moved again, not the opens: 100 opens take
microseconds, 3.1 GiB of repeated reads take the time.
Fix: read the mesh once before the loop and reuse the array.
"""
import sys

import numpy as np

STEPS, N = 100, 4 * 1024 * 1024       # 4 Mi float64 = 32 MiB


def main(mode: str) -> None:
    np.linspace(0.0, 1.0, N).tofile("mesh.bin")
    field = np.zeros(N)
    mesh = np.fromfile("mesh.bin") if mode == "fixed" else None
    for _ in range(STEPS):
        if mode == "mistake":
            mesh = np.fromfile("mesh.bin")
        field += mesh
    field.tofile("field.bin")
    assert field[-1] == STEPS


if __name__ == "__main__":
    main(sys.argv[1])
