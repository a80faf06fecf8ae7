/* The job's clock across hosts (mpi_clock.c). */
#ifndef IOPILOT_MPI_CLOCK_H
#define IOPILOT_MPI_CLOCK_H

/* A sample of this host's clock against world rank 0's: a collective call
 * of every traced rank, made after MPI_Init and before MPI_Finalize. */
void iop_mpi_clock_sample(void);

/* An MPI data object (ompi_mpi_comm_world ...) looked up by name: the
 * runtime never links libmpi, whose data symbols would stop it loading
 * into programs without MPI.  NULL when the program has no MPI. */
void *iop_mpi_object(const char *name);

#endif
