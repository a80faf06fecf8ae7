"""mpi4py: every step, all ranks gather their block to rank 0, which writes the file.

Mistake: comm.gather (pickled objects) funnels all 4 blocks to rank 0, which
then writes the whole step alone with a plain Python file; the other ranks
wait, and all the I/O (plus the copies) is serialised through one process.
Fix: every rank writes its own block at its own offset with one collective
fh.Write_at_all per step; no gather, and the file system sees all ranks.
The file (step-major, rank blocks in rank order) is the same.
"""
import sys

import numpy as np
from mpi4py import MPI

STEPS = 8
N = 1 << 20           # float64 values per rank per step (8 MiB)


def main(mode: str) -> None:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    block_bytes = N * 8
    if mode == "mistake":
        out = open("field.dat", "wb") if rank == 0 else None
    else:
        fh = MPI.File.Open(comm, "field.dat", MPI.MODE_CREATE | MPI.MODE_WRONLY)

    for step in range(STEPS):
        block = np.full(N, step * size + rank, dtype="f8")   # this step's result
        if mode == "mistake":
            blocks = comm.gather(block, root=0)
            if rank == 0:
                for b in blocks:
                    out.write(b.tobytes())
        else:
            fh.Write_at_all((step * size + rank) * block_bytes, block)

    if mode == "mistake":
        if rank == 0:
            out.close()
    else:
        fh.Close()

    comm.Barrier()
    if rank == 0:
        back = np.memmap("field.dat", dtype="f8", mode="r", shape=(STEPS * size, N))
        assert (back[:, ::4096] == np.arange(STEPS * size)[:, None]).all()


if __name__ == "__main__":
    main(sys.argv[1])
