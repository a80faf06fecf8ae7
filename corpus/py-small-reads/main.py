"""Python: a binary input read back 8 bytes at a time from an unbuffered file.

Mistake: the reader opens the 3.2 MB input with buffering=0 (a raw file, as
code that wants to "see the bytes as they are" often does) and calls
struct.unpack("<d", f.read(8)) for each of its 400,000 doubles: every value is
its own read() system call.
Fix: read the whole file in one call and convert it with np.frombuffer.  The
values (and their sum) are the same.
"""
import struct
import sys

import numpy as np

N = 400_000


def main(mode: str) -> None:
    values = np.linspace(0.0, 1.0, N)
    values.astype("<f8").tofile("input.bin")

    with open("input.bin", "rb", buffering=0) as f:
        if mode == "mistake":
            back = [struct.unpack("<d", f.read(8))[0] for _ in range(N)]
        else:
            back = np.frombuffer(f.read(), dtype="<f8")
    assert np.array_equal(np.asarray(back), values)


if __name__ == "__main__":
    main(sys.argv[1])
