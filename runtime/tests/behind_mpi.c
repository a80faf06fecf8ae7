/* Rank 0 writes a file and tells rank 1 by an MPI message that it is there;
 * rank 1 looks at its size.  The message is, in turn, a point-to-point send,
 * a broadcast and an allreduce.  Run plain and with write-behind: the same
 * sizes.
 *
 *     mpirun -np 2 behind_mpi DIR */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB (1 << 20)

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *how[] = {"send", "bcast", "allreduce"};
    char *buf = malloc(4096);
    memset(buf, 'r', 4096);
    for (int k = 0; k < 3; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.dat", argc > 1 ? argv[1] : ".", how[k]);
        int token = 0;
        if (rank == 0) {
            int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
            for (int i = 0; i < 32 * MIB / 4096; i++)
                if (write(fd, buf, 4096) != 4096) return 1;
            token = 1;
            if (k == 0) MPI_Send(&token, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
            if (k == 1) MPI_Bcast(&token, 1, MPI_INT, 0, MPI_COMM_WORLD);
            if (k == 2) MPI_Allreduce(MPI_IN_PLACE, &token, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_INT, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            close(fd);
        } else if (rank == 1) {
            if (k == 0) MPI_Recv(&token, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (k == 1) MPI_Bcast(&token, 1, MPI_INT, 0, MPI_COMM_WORLD);
            if (k == 2) MPI_Allreduce(MPI_IN_PLACE, &token, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            struct stat sb;
            stat(path, &sb);
            printf("%s: rank 1 sees %lld\n", how[k], (long long)sb.st_size);
            fflush(stdout);
            MPI_Send(&token, 1, MPI_INT, 0, 8, MPI_COMM_WORLD);
        } else {
            if (k == 1) MPI_Bcast(&token, 1, MPI_INT, 0, MPI_COMM_WORLD);
            if (k == 2) MPI_Allreduce(MPI_IN_PLACE, &token, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
