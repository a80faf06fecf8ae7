"""mpi4py: every rank re-reads the same parameter file at every step.

Mistake: at the top of each of 1,000 steps all 4 ranks open params.txt and
parse it with np.loadtxt, though it never changes: 4,000 opens and reads of
one small file (on a cluster, 4,000 metadata requests to the same server, in
bursts of one per rank).
Fix: rank 0 reads the file once before the loop and comm.bcast hands the
values to the other ranks.  The results are the same.
"""
import sys

import numpy as np
from mpi4py import MPI

STEPS, NPARAMS = 1000, 200


def main(mode: str) -> None:
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if rank == 0:
        np.savetxt("params.txt", np.linspace(0.5, 1.5, NPARAMS))
    comm.Barrier()

    params = None
    if mode == "fixed":
        params = comm.bcast(np.loadtxt("params.txt") if rank == 0 else None, root=0)
    state = np.full(1024, float(rank))
    for _ in range(STEPS):
        if mode == "mistake":
            params = np.loadtxt("params.txt")
        state = np.sqrt(state * params[0] + params[-1])

    total = comm.reduce(float(state.sum()), root=0)
    if rank == 0:
        np.save("result.npy", np.array([total]))


if __name__ == "__main__":
    main(sys.argv[1])
