"""Two NumPy I/O mistakes on known lines, for the call-site tests: each line
marked "MISTAKE: <check> in <function>" is the call the finding of that check
is about.

1. every step's 4 KiB state saved to a file of its own with np.save (1,200
   files);
2. a table read back 16 values at a time with np.fromfile at an offset: the
   file is opened, seeked and closed again for every 128 bytes.
Usage: python numpy_prog.py   (writes step_*.npy and table.bin in the current directory)
"""

import numpy as np

STEPS, N, READS, TABLE = 1200, 512, 1000, "table.bin"


def main() -> None:
    state = np.zeros(N)
    for step in range(STEPS):
        state += 1.0
        np.save(f"step_{step:05d}.npy", state)  # MISTAKE: tiny-files in main
    np.arange(READS * 16, dtype="f8").tofile(TABLE)
    total = 0.0
    for k in range(READS):
        row = np.fromfile(TABLE, "f8", 16, offset=128 * k)  # MISTAKE: reopened-files in main
        total += float(row[0])
    print(total)


if __name__ == "__main__":
    main()
