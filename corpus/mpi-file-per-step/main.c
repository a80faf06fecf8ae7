/* Mistake: every rank writes its 4 KiB of output for a step into a new
 * file, out_<step>_<rank>.dat: 4 ranks x 200 steps = 800 files, each created,
 * written once and closed.  Every file costs a create, a close and an inode
 * in the directory, which dominates the time of such small writes.
 * Fix: one file per rank, opened once, each step's 4 KiB appended at
 * offset step * 4 KiB.  The data written is the same in both modes.
 * Usage: mpirun -np 4 prog mistake|fixed */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STEPS 200
#define VALUES 512 /* 4 KiB of doubles per rank per step */

static void pwrite_all(int fd, const void *buf, size_t n, off_t off)
{
    if (pwrite(fd, buf, n, off) != (ssize_t)n) {
        perror("pwrite");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 2 || (strcmp(argv[1], "mistake") && strcmp(argv[1], "fixed"))) {
        if (rank == 0)
            fprintf(stderr, "usage: %s mistake|fixed\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    int mistake = !strcmp(argv[1], "mistake");
    double v[VALUES];
    char name[64];
    int fd = -1;
    if (!mistake) {
        snprintf(name, sizeof name, "out_%d.dat", rank);
        fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    for (int step = 0; step < STEPS; step++) {
        for (int i = 0; i < VALUES; i++)
            v[i] = rank * 1000.0 + step + i * 1e-3;
        if (mistake) {
            snprintf(name, sizeof name, "out_%d_%d.dat", step, rank);
            fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            pwrite_all(fd, v, sizeof v, 0);
            close(fd);
        } else {
            pwrite_all(fd, v, sizeof v, (off_t)step * (off_t)sizeof v);
        }
        MPI_Barrier(MPI_COMM_WORLD); /* the ranks advance in step */
    }
    if (!mistake)
        close(fd);
    if (rank == 0)
        printf("wrote %d steps of %zu bytes per rank\n", STEPS, sizeof v);
    MPI_Finalize();
    return 0;
}
