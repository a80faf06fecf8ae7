"""Python: an unbuffered file written one float at a time with struct.pack.

Mistake: open(..., buffering=0) gives a raw file, and the loop calls
f.write(struct.pack("<d", x)) for each of 400,000 values, so every 8 bytes is
its own write() system call.
Fix: convert the whole array with arr.astype("<f8").tobytes() and write it
in one call.  The file holds the same little-endian doubles.
"""
import struct
import sys

import numpy as np

N = 400_000


def main(mode: str) -> None:
    values = np.linspace(0.0, 1.0, N)
    with open("values.bin", "wb", buffering=0) as f:
        if mode == "mistake":
            for x in values.tolist():
                f.write(struct.pack("<d", x))
        else:
            f.write(values.astype("<f8").tobytes())
    assert np.array_equal(np.fromfile("values.bin", dtype="<f8"), values)


if __name__ == "__main__":
    main(sys.argv[1])
