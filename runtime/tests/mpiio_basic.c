/* MPI-IO smoke test for the iopilot runtime.
 *
 *   mpiio_basic PATH [N [K]]
 *
 * Every rank writes N blocks of K bytes to one shared file with
 * MPI_File_write_at_all (block i of rank r at (i * nprocs + r) * K), reads
 * them back with independent MPI_File_read_at, then writes one more block
 * with MPI_File_iwrite_at + MPI_Wait and one with a split collective
 * (MPI_File_write_all_begin/end through the individual file pointer),
 * calls MPI_File_sync once and reads those two blocks back too.
 * Exits non-zero when anything read back differs from what was written.
 *
 * Per rank the trace must show, for the MPIIO layer of PATH: COLL_OPENS 1,
 * COLL_WRITES N, INDEP_READS N + 2, NB_WRITES 1, SPLIT_WRITES 1, SYNCS 1,
 * BYTES_WRITTEN (N + 2) * K and BYTES_READ (N + 2) * K.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char pattern(int rank, int block, int i) {
    return (unsigned char)(rank * 31 + block * 7 + i);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nprocs, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: %s PATH [N [K]]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *path = argv[1];
    int n = argc > 2 ? atoi(argv[2]) : 8;
    int k = argc > 3 ? atoi(argv[3]) : 4096;
    unsigned char *buf = malloc((size_t)k), *got = malloc((size_t)k);

    MPI_File fh;
    int rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR,
                           MPI_INFO_NULL, &fh);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: MPI_File_open failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int b = 0; b < n; b++) {
        for (int i = 0; i < k; i++) buf[i] = pattern(rank, b, i);
        MPI_Offset off = ((MPI_Offset)b * nprocs + rank) * k;
        if (MPI_File_write_at_all(fh, off, buf, k, MPI_BYTE, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            bad++;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int b = 0; b < n; b++) {
        MPI_Offset off = ((MPI_Offset)b * nprocs + rank) * k;
        MPI_Status st;
        int cnt = -1;
        memset(got, 0, (size_t)k);
        if (MPI_File_read_at(fh, off, got, k, MPI_BYTE, &st) != MPI_SUCCESS) bad++;
        MPI_Get_count(&st, MPI_BYTE, &cnt);
        if (cnt != k) bad++;
        for (int i = 0; i < k; i++)
            if (got[i] != pattern(rank, b, i)) {
                bad++;
                break;
            }
    }
    /* Block n: non-blocking; block n + 1: split collective at the
     * individual file pointer. */
    MPI_Request req;
    for (int i = 0; i < k; i++) buf[i] = pattern(rank, n, i);
    if (MPI_File_iwrite_at(fh, ((MPI_Offset)n * nprocs + rank) * k, buf, k, MPI_BYTE, &req) !=
        MPI_SUCCESS)
        bad++;
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    unsigned char *buf2 = malloc((size_t)k);
    for (int i = 0; i < k; i++) buf2[i] = pattern(rank, n + 1, i);
    MPI_File_seek(fh, ((MPI_Offset)(n + 1) * nprocs + rank) * k, MPI_SEEK_SET);
    if (MPI_File_write_all_begin(fh, buf2, k, MPI_BYTE) != MPI_SUCCESS) bad++;
    if (MPI_File_write_all_end(fh, buf2, MPI_STATUS_IGNORE) != MPI_SUCCESS) bad++;
    MPI_File_sync(fh);
    for (int b = n; b < n + 2; b++) {
        memset(got, 0, (size_t)k);
        MPI_File_read_at(fh, ((MPI_Offset)b * nprocs + rank) * k, got, k, MPI_BYTE,
                         MPI_STATUS_IGNORE);
        for (int i = 0; i < k; i++)
            if (got[i] != pattern(rank, b, i)) {
                bad++;
                break;
            }
    }
    MPI_File_close(&fh);
    int total = 0;
    MPI_Allreduce(&bad, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && total) fprintf(stderr, "mpiio_basic: %d mismatches\n", total);
    free(buf);
    free(buf2);
    free(got);
    MPI_Finalize();
    return total ? 1 : 0;
}
