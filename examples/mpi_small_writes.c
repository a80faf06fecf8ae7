/* The built-in example of `make demo`: a typical first parallel output
 * routine.  Every rank writes its block of a shared file in small,
 * independent MPI-IO requests, then all ranks read the file back
 * collectively and rank 0 writes a text summary with stdio.
 *
 *   mpirun -np 4 mpi_small_writes DIR [block KiB] [request bytes]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) {
        if (!rank) fprintf(stderr, "usage: %s DIR [block KiB] [request bytes]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long block = (argc > 2 ? atol(argv[2]) : 4096) * 1024L;
    long req = argc > 3 ? atol(argv[3]) : 4096;
    char path[4096];
    snprintf(path, sizeof path, "%s/shared.dat", argv[1]);

    char *buf = malloc((size_t)block);
    for (long i = 0; i < block; i++) buf[i] = (char)(rank + i);
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    MPI_Offset base = (MPI_Offset)rank * block;
    double t = MPI_Wtime();
    for (long off = 0; off < block; off += req) /* many small independent writes */
        MPI_File_write_at(fh, base + off, buf + off, (int)req, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_sync(fh);
    double t_write = MPI_Wtime() - t;

    char *back = malloc((size_t)block);
    MPI_File_read_at_all(fh, base, back, (int)block, MPI_BYTE, MPI_STATUS_IGNORE);
    int bad = memcmp(buf, back, (size_t)block) != 0, any_bad = 0;
    MPI_File_close(&fh);
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);

    double slowest;
    MPI_Reduce(&t_write, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        snprintf(path, sizeof path, "%s/summary.txt", argv[1]);
        FILE *f = fopen(path, "w");
        fprintf(f, "ranks %d, %ld KiB each in %ld-byte requests, write %.3f s, check %s\n",
                size, block / 1024, req, slowest, any_bad ? "FAILED" : "ok");
        fclose(f);
        printf("wrote %ld MiB with %d ranks; read-back %s\n", block * size >> 20, size,
               any_bad ? "FAILED" : "verified");
    }
    free(buf);
    free(back);
    MPI_Finalize();
    return any_bad;
}
