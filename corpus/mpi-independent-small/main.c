/* Mistake: 4 ranks write a shared file made of 1 KiB records interleaved
 * round-robin (record k of rank r lands at (k * nranks + r) KiB), each with
 * its own independent MPI_File_write_at.  Every record is a separate small
 * request to the file system, and neighbouring ranks' requests touch the
 * same file blocks.
 * Fix: describe the interleaving once with a file view (a strided
 * datatype) and write all of a step's records in one collective
 * MPI_File_write_all, so MPI-IO's collective buffering merges the ranks'
 * records into large contiguous writes.  The file is the same in both modes.
 * Usage: mpirun -np 4 prog mistake|fixed   (writes shared.dat) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REC 1024      /* bytes per record */
#define PER_STEP 1024 /* records per rank per step */
#define STEPS 8

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
    char *buf = malloc((size_t)REC * PER_STEP);

    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, "shared.dat", MPI_MODE_CREATE | MPI_MODE_WRONLY,
                  MPI_INFO_NULL, &fh);
    MPI_Datatype rec, strided;
    MPI_Type_contiguous(REC, MPI_BYTE, &rec);
    MPI_Type_create_resized(rec, 0, (MPI_Aint)REC * size, &strided);
    MPI_Type_commit(&strided);

    for (int step = 0; step < STEPS; step++) {
        for (int k = 0; k < PER_STEP; k++)
            memset(buf + (size_t)k * REC, 'a' + (rank + k + step) % 26, REC);
        MPI_Offset base = (MPI_Offset)step * PER_STEP * size * REC;
        if (mistake) {
            for (int k = 0; k < PER_STEP; k++) {
                MPI_Offset off = base + ((MPI_Offset)k * size + rank) * REC;
                MPI_File_write_at(fh, off, buf + (size_t)k * REC, REC, MPI_BYTE,
                                  MPI_STATUS_IGNORE);
            }
        } else {
            MPI_File_set_view(fh, base + (MPI_Offset)rank * REC, MPI_BYTE, strided,
                              "native", MPI_INFO_NULL);
            MPI_File_write_all(fh, buf, REC * PER_STEP, MPI_BYTE, MPI_STATUS_IGNORE);
        }
    }
    MPI_Type_free(&strided);
    MPI_Type_free(&rec);
    MPI_File_close(&fh);
    free(buf);
    if (rank == 0)
        printf("wrote %d steps of %d records of %d bytes per rank\n", STEPS, PER_STEP, REC);
    MPI_Finalize();
    return 0;
}
