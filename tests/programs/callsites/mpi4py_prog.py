"""Two MPI I/O mistakes on known lines, for the call-site tests (run under
mpirun -np 2): each line marked "MISTAKE: <check> in <function>" is the call
the finding of that check is about.

1. each rank writes its 1 KiB pieces of a shared file with one independent
   fh.Write_at each (1,000 per rank), not one collective write;
2. every rank re-reads the unchanging params.txt at each of 300 steps.
Usage: mpirun -np 2 python mpi4py_prog.py   (writes shared.dat and params.txt)
"""

from pathlib import Path

import numpy as np
from mpi4py import MPI

PIECES, PIECE, STEPS = 1000, 1024, 300


def main() -> None:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if rank == 0:
        with open("params.txt", "w") as f:
            f.write("\n".join(f"coef_{i} = {i * 0.5}" for i in range(200)) + "\n")
    comm.Barrier()
    data = np.full(PIECE, rank, dtype="u1")
    fh = MPI.File.Open(comm, "shared.dat", MPI.MODE_CREATE | MPI.MODE_WRONLY)
    for k in range(PIECES):
        fh.Write_at((k * size + rank) * PIECE, data)  # MISTAKE: mpiio-collective-writes in main
    fh.Close()
    total = 0.0
    for _ in range(STEPS):
        text = Path("params.txt").read_text()  # MISTAKE: reopened-files in main
        total += sum(float(line.split("=")[1]) for line in text.splitlines())
    comm.Barrier()
    if rank == 0:
        print(total)


if __name__ == "__main__":
    main()
