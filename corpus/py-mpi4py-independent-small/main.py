"""mpi4py: 4 ranks write 1 KiB pieces, interleaved, into one shared file.

Mistake: each rank calls fh.Write_at once per 1 KiB block (block k of rank r
lands at (k * size + r) KiB), so the file system sees thousands of tiny
independent writes from all ranks into the same file regions.
Fix: each rank describes its blocks with a strided file view and hands them
all to one collective Write_all; MPI-IO's collective buffering merges the
interleaved pieces into a few large contiguous writes.  Same bytes, same file.
"""
import sys

import numpy as np
from mpi4py import MPI

BLOCK = 1024          # bytes per piece
BLOCKS = 40000         # pieces per rank


def main(mode: str) -> None:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    data = np.full((BLOCKS, BLOCK), rank % 256, dtype=np.uint8)
    data[:, 0] = np.arange(BLOCKS) % 256          # mark each piece

    fh = MPI.File.Open(comm, "shared.dat", MPI.MODE_CREATE | MPI.MODE_WRONLY)
    if mode == "mistake":
        for k in range(BLOCKS):
            fh.Write_at((k * size + rank) * BLOCK, data[k])
    else:
        piece = MPI.BYTE.Create_contiguous(BLOCK).Commit()
        strided = piece.Create_vector(BLOCKS, 1, size).Commit()
        fh.Set_view(rank * BLOCK, MPI.BYTE, strided)
        fh.Write_all(data)
        strided.Free()
        piece.Free()
    fh.Close()

    comm.Barrier()
    if rank == 0:
        back = np.memmap("shared.dat", dtype=np.uint8, mode="r", shape=(BLOCKS, size, BLOCK))
        assert (back[::101, :, 1] == np.arange(size) % 256).all()
        assert (back[::101, 0, 0] == np.arange(0, BLOCKS, 101) % 256).all()


if __name__ == "__main__":
    main(sys.argv[1])
