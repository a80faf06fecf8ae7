/* Mistake: at every step rank 0 opens the run's parameter file again,
 * parses all of it, and broadcasts the parameters, although the file never
 * changes during the run.  Rank 0 spends each step re-reading and parsing
 * while the other ranks wait for it at the broadcast.
 * Fix: rank 0 reads and parses the file once before the loop and broadcasts
 * the parameters once (MPI_Bcast); every rank keeps them.
 * Both modes write the same data: each rank's 16 KiB block per step, at its
 * offset in one shared file, with MPI_File_write_at_all.
 * Usage: mpirun -np 4 prog mistake|fixed   (creates params.txt and out.dat) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 700
#define NPARAMS 4000
#define VALUES 2048 /* 16 KiB of doubles per rank per step */

/* rank 0: read every "name = value" line of params.txt */
static void read_params(double *p)
{
    FILE *f = fopen("params.txt", "r");
    if (!f) {
        perror("params.txt");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    char key[64];
    int n = 0;
    while (n < NPARAMS && fscanf(f, "%63s = %lf", key, &p[n]) == 2)
        n++;
    fclose(f);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 2 || (strcmp(argv[1], "mistake") && strcmp(argv[1], "fixed"))) {
        if (rank == 0)
            fprintf(stderr, "usage: %s mistake|fixed\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    int mistake = !strcmp(argv[1], "mistake");

    if (rank == 0) { /* the job's input deck */
        FILE *f = fopen("params.txt", "w");
        for (int i = 0; i < NPARAMS; i++)
            fprintf(f, "coefficient_%04d = %.10f\n", i, 1.0 + i * 1e-4);
        fclose(f);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    static double p[NPARAMS], v[VALUES];
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, "out.dat", MPI_MODE_CREATE | MPI_MODE_WRONLY,
                  MPI_INFO_NULL, &fh);
    if (!mistake) {
        if (rank == 0)
            read_params(p);
        MPI_Bcast(p, NPARAMS, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    }
    for (int step = 0; step < STEPS; step++) {
        if (mistake) {
            if (rank == 0)
                read_params(p);
            MPI_Bcast(p, NPARAMS, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        }
        for (int i = 0; i < VALUES; i++)
            v[i] = p[i % NPARAMS] * step + rank;
        MPI_Offset off = ((MPI_Offset)step * size + rank) * (MPI_Offset)sizeof v;
        MPI_File_write_at_all(fh, off, v, VALUES, MPI_DOUBLE, MPI_STATUS_IGNORE);
    }
    MPI_File_close(&fh);
    if (rank == 0)
        printf("%d steps, %d parameters\n", STEPS, NPARAMS);
    MPI_Finalize();
    return 0;
}
