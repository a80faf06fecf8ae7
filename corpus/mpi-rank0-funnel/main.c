/* Mistake: at every output step all ranks MPI_Gather their block to rank
 * 0, which writes the whole step to the file alone with POSIX write().
 * Rank 0 moves all the data twice (network, then disk) while the other
 * ranks wait, and its memory must hold everyone's blocks.
 * Fix: every rank writes its own block at its offset of the shared file
 * with one collective MPI_File_write_at_all per step.
 * The file is the same in both modes.
 * Usage: mpirun -np 4 prog mistake|fixed   (writes field.dat) */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VALUES (2 * 1024 * 1024) /* 16 MiB of doubles per rank per step */
#define STEPS 6

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
    size_t block = sizeof(double) * VALUES;
    double *v = malloc(block);
    double *all = NULL;
    int fd = -1;
    MPI_File fh;
    if (mistake) {
        if (rank == 0) {
            all = malloc(block * size);
            fd = open("field.dat", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        }
    } else {
        MPI_File_open(MPI_COMM_WORLD, "field.dat", MPI_MODE_CREATE | MPI_MODE_WRONLY,
                      MPI_INFO_NULL, &fh);
    }
    for (int step = 0; step < STEPS; step++) {
        for (int i = 0; i < VALUES; i++)
            v[i] = rank + step * 0.25 + i * 1e-7;
        MPI_Offset off = (MPI_Offset)step * size * block + (MPI_Offset)rank * block;
        if (mistake) {
            MPI_Gather(v, VALUES, MPI_DOUBLE, all, VALUES, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            if (rank == 0) {
                size_t n = block * size, done = 0;
                while (done < n) {
                    ssize_t w = pwrite(fd, (char *)all + done, n - done,
                                       (off_t)step * n + done);
                    if (w < 0) {
                        perror("pwrite");
                        MPI_Abort(MPI_COMM_WORLD, 1);
                    }
                    done += (size_t)w;
                }
            }
        } else {
            MPI_File_write_at_all(fh, off, v, VALUES, MPI_DOUBLE, MPI_STATUS_IGNORE);
        }
    }
    if (mistake) {
        if (rank == 0)
            close(fd);
    } else {
        MPI_File_close(&fh);
    }
    free(all);
    free(v);
    if (rank == 0)
        printf("wrote %d steps of %d x %zu bytes\n", STEPS, size, block);
    MPI_Finalize();
    return 0;
}
