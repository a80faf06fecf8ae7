"""Python: 4 KiB records fetched by seek + read at random offsets of a 64 MiB file.

Mistake: to use 12,000 of the file's 16,384 records the program does
f.seek(random offset) and f.read(4096) for each one, in random order: every
record is its own lseek + read system call, and the device (the file is not
in the page cache, as an input file on a cluster would not be) serves 12,000
scattered 4 KiB requests instead of one sequential stream.
Fix: read the whole file once, sequentially, with np.fromfile, and index the
records in memory.  The records used (and their checksum) are the same.
"""
import os
import sys

import numpy as np

FILE_MIB, RECORD, SAMPLES = 64, 4096, 12000


def make_input(nrec: int) -> None:
    np.arange(nrec * RECORD // 8, dtype="u8").tofile("records.bin")
    # Start cold: write the input to disk and drop it from the page cache.
    fd = os.open("records.bin", os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def main(mode: str) -> None:
    nrec = FILE_MIB * 1024 * 1024 // RECORD
    make_input(nrec)
    picks = np.random.default_rng(3).choice(nrec, SAMPLES, replace=False)

    total = 0
    if mode == "mistake":
        with open("records.bin", "rb") as f:
            for r in picks:
                f.seek(int(r) * RECORD)
                rec = np.frombuffer(f.read(RECORD), dtype="u8")
                total += int(rec[0])
    else:
        records = np.fromfile("records.bin", dtype="u8").reshape(nrec, RECORD // 8)
        total = int(records[picks, 0].sum())
    assert total == int((picks * (RECORD // 8)).sum())


if __name__ == "__main__":
    main(sys.argv[1])
