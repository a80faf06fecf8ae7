/* Mistake: 4 ranks write a shared file of 1 KiB records interleaved
 * round-robin, with a strided file view and one collective
 * MPI_File_write_all per step: the right calls.  But the program passes
 * the hints romio_cb_write=disable (and romio_ds_write=disable), copied
 * from an old job script: collective buffering is off, so the collective
 * call makes each rank write its 1 KiB pieces one by one, and the file
 * system sees requests as small as in an independent-I/O program.
 * Fix: leave collective buffering on (no such hint; ROMIO's default
 * "automatic" enables it for interleaved access), so two-phase I/O
 * merges the pieces into large contiguous writes by aggregator ranks.
 * ROMIO is selected (OMPI_MCA_io=romio321) because Open MPI's default
 * OMPIO ignores the romio_* hints.  The file is the same in both modes.
 * Usage: mpirun -np 4 prog mistake|fixed   (writes shared.dat) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REC 1024      /* bytes per record */
#define PER_STEP 2048 /* records per rank per step */
#define STEPS 8

int main(int argc, char **argv)
{
    setenv("OMPI_MCA_io", "romio321", 0); /* before MPI_Init */
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

    MPI_Info info = MPI_INFO_NULL;
    if (mistake) {
        MPI_Info_create(&info);
        MPI_Info_set(info, "romio_cb_write", "disable");
        MPI_Info_set(info, "romio_ds_write", "disable");
    }
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, "shared.dat", MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh);
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);

    MPI_Datatype rec, strided;
    MPI_Type_contiguous(REC, MPI_BYTE, &rec);
    MPI_Type_create_resized(rec, 0, (MPI_Aint)REC * size, &strided);
    MPI_Type_commit(&strided);
    for (int step = 0; step < STEPS; step++) {
        for (int k = 0; k < PER_STEP; k++)
            memset(buf + (size_t)k * REC, 'a' + (rank + k + step) % 26, REC);
        MPI_Offset base = (MPI_Offset)step * PER_STEP * size * REC;
        MPI_File_set_view(fh, base + (MPI_Offset)rank * REC, MPI_BYTE, strided, "native",
                          MPI_INFO_NULL);
        MPI_File_write_all(fh, buf, REC * PER_STEP, MPI_BYTE, MPI_STATUS_IGNORE);
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
