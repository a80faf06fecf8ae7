"""Python: every step's output forced to disk with os.fsync.

Mistake: after each of 300 steps the program writes its 64 KiB result, then
calls f.flush() and os.fsync(f.fileno()), so every step waits for the device
to commit the data (and the file's metadata) before computing the next one.
Fix: let the page cache absorb the writes and fsync once at the end; the file
is just as durable when the run finishes, and its bytes are the same.
"""
import os
import sys

import numpy as np

STEPS, N = 300, 8192          # 8,192 float64 = 64 KiB per step


def main(mode: str) -> None:
    state = np.linspace(0.0, 1.0, N)
    with open("series.dat", "wb") as f:
        for step in range(STEPS):
            state = np.sin(state + step * 1e-3)
            f.write(state.tobytes())
            if mode == "mistake":
                f.flush()
                os.fsync(f.fileno())
        f.flush()
        os.fsync(f.fileno())
    assert os.path.getsize("series.dat") == STEPS * N * 8


if __name__ == "__main__":
    main(sys.argv[1])
