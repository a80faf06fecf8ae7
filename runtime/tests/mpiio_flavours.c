/* Every MPI-IO read/write flavour the iopilot runtime wraps, once each.
 *
 *   mpiio_flavours PREFIX [M [no-nb-coll]]
 *
 * Blocks are M ints (default 256, so 1 KiB).  With "no-nb-coll" the
 * non-blocking collectives (slots 3 and 8) are replaced by their
 * independent forms (iwrite_at, iwrite, iread_at, iread), which keeps the
 * counts below the same: ROMIO 3.2.1 in Open MPI 4.1 crashes in
 * MPI_File_iwrite_at_all on ufs (a NULL function pointer), with or
 * without iopilot.  Three files:
 *
 * PREFIX.a  opened on MPI_COMM_WORLD with two hints (cb_buffer_size,
 *           access_style), one more given later with MPI_File_set_info;
 *           view: displacement rank * 10 blocks, etype and filetype MPI_INT.
 *           Slot k (block k of the rank's region) is written by flavour k:
 *             0 write_at            5 write (individual pointer)
 *             1 write_at_all        6 write_all
 *             2 iwrite_at           7 iwrite
 *             3 iwrite_at_all       8 iwrite_all
 *             4 write_at_all_begin  9 write_all_begin/end
 *           then MPI_File_sync, then every slot is read back with the
 *           matching read flavour and checked.
 *   Per rank: COLL_OPENS 1, HINTS 2, VIEWS 1, SYNCS 1, INDEP/COLL/SPLIT
 *   READS and WRITES 2 each, NB_READS/NB_WRITES 4, READS/WRITES 10,
 *   BYTES_READ/BYTES_WRITTEN 10 blocks; write offsets are
 *   rank * 10 blocks + k blocks in bytes.
 *
 * PREFIX.b  opened on MPI_COMM_WORLD without hints, MPI_File_set_size 0,
 *           default view; written with write_shared, write_ordered,
 *           iwrite_shared, write_ordered_begin/end, then read with the
 *           four matching read calls after MPI_File_seek_shared(0).
 *   Per rank: COLL_OPENS 1, INDEP/COLL/NB/SPLIT READS and WRITES 1 each,
 *   4 blocks each way, every offset -1 (shared file pointer).
 *
 * PREFIX.c<rank>  opened on MPI_COMM_SELF, one write_at.
 *   Per rank: INDEP_OPENS 1, INDEP_WRITES 1, 1 block.
 *
 * Exits non-zero when any call fails or anything read back is wrong.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nprocs, m, bad;

#define CHECK(call)                                                            \
    do {                                                                       \
        if ((call) != MPI_SUCCESS) {                                           \
            fprintf(stderr, "rank %d line %d: %s failed\n", rank, __LINE__, #call); \
            bad++;                                                             \
        }                                                                      \
    } while (0)

/* Block contents: value = (rank * 64 + slot) * m + i. */
static void fill(int *b, int r, int slot) {
    for (int i = 0; i < m; i++) b[i] = (r * 64 + slot) * m + i;
}
static void expect(const int *b, int r, int slot, const char *what) {
    for (int i = 0; i < m; i++)
        if (b[i] != (r * 64 + slot) * m + i) {
            fprintf(stderr, "rank %d: %s slot %d wrong at %d\n", rank, what, slot, i);
            bad++;
            return;
        }
}
/* A whole block of some rank's slot (shared-pointer data lands in any order). */
static void expect_some_block(const int *b, const char *what) {
    int base = b[0] - b[0] % m, r = base / m / 64, slot = base / m % 64;
    if (b[0] % m != 0 || r < 0 || r >= nprocs || slot < 20 || slot > 23) {
        fprintf(stderr, "rank %d: %s got no block start (%d)\n", rank, what, b[0]);
        bad++;
        return;
    }
    expect(b, r, slot, what);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: %s PREFIX [M]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    m = argc > 2 ? atoi(argv[2]) : 256;
    int nb_coll = !(argc > 3 && strcmp(argv[3], "no-nb-coll") == 0);
    char path[4096];
    int *w = malloc(sizeof(int) * (size_t)m), *r = malloc(sizeof(int) * (size_t)m);
    MPI_Request req;
    MPI_File fh;

    /* ---- file a: explicit offsets and the individual file pointer ---- */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "cb_buffer_size", "1048576");
    MPI_Info_set(info, "access_style", "write_once");
    snprintf(path, sizeof path, "%s.a", argv[1]);
    CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_Info_free(&info);
    MPI_Info_create(&info);
    MPI_Info_set(info, "cb_buffer_size", "2097152");
    CHECK(MPI_File_set_info(fh, info));
    MPI_Info_free(&info);
    MPI_Offset disp = (MPI_Offset)rank * 10 * m * (MPI_Offset)sizeof(int);
    CHECK(MPI_File_set_view(fh, disp, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
#define AT(k) ((MPI_Offset)(k) * m)
    fill(w, rank, 0);
    CHECK(MPI_File_write_at(fh, AT(0), w, m, MPI_INT, MPI_STATUS_IGNORE));
    fill(w, rank, 1);
    CHECK(MPI_File_write_at_all(fh, AT(1), w, m, MPI_INT, MPI_STATUS_IGNORE));
    fill(w, rank, 2);
    CHECK(MPI_File_iwrite_at(fh, AT(2), w, m, MPI_INT, &req));
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    fill(w, rank, 3);
    if (nb_coll) CHECK(MPI_File_iwrite_at_all(fh, AT(3), w, m, MPI_INT, &req));
    else CHECK(MPI_File_iwrite_at(fh, AT(3), w, m, MPI_INT, &req));
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    fill(w, rank, 4);
    CHECK(MPI_File_write_at_all_begin(fh, AT(4), w, m, MPI_INT));
    CHECK(MPI_File_write_at_all_end(fh, w, MPI_STATUS_IGNORE));
    fill(w, rank, 5);
    CHECK(MPI_File_seek(fh, AT(5), MPI_SEEK_SET));
    CHECK(MPI_File_write(fh, w, m, MPI_INT, MPI_STATUS_IGNORE));
    fill(w, rank, 6); /* the pointer is at slot 6 now */
    CHECK(MPI_File_write_all(fh, w, m, MPI_INT, MPI_STATUS_IGNORE));
    fill(w, rank, 7);
    CHECK(MPI_File_iwrite(fh, w, m, MPI_INT, &req));
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    fill(w, rank, 8);
    if (nb_coll) CHECK(MPI_File_iwrite_all(fh, w, m, MPI_INT, &req));
    else CHECK(MPI_File_iwrite(fh, w, m, MPI_INT, &req));
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    fill(w, rank, 9);
    CHECK(MPI_File_write_all_begin(fh, w, m, MPI_INT));
    CHECK(MPI_File_write_all_end(fh, w, MPI_STATUS_IGNORE));
    CHECK(MPI_File_sync(fh));

    CHECK(MPI_File_read_at(fh, AT(0), r, m, MPI_INT, MPI_STATUS_IGNORE));
    expect(r, rank, 0, "read_at");
    CHECK(MPI_File_read_at_all(fh, AT(1), r, m, MPI_INT, MPI_STATUS_IGNORE));
    expect(r, rank, 1, "read_at_all");
    CHECK(MPI_File_iread_at(fh, AT(2), r, m, MPI_INT, &req));
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    expect(r, rank, 2, "iread_at");
    if (nb_coll) CHECK(MPI_File_iread_at_all(fh, AT(3), r, m, MPI_INT, &req));
    else CHECK(MPI_File_iread_at(fh, AT(3), r, m, MPI_INT, &req));
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    expect(r, rank, 3, "iread_at_all");
    CHECK(MPI_File_read_at_all_begin(fh, AT(4), r, m, MPI_INT));
    CHECK(MPI_File_read_at_all_end(fh, r, MPI_STATUS_IGNORE));
    expect(r, rank, 4, "read_at_all_begin");
    CHECK(MPI_File_seek(fh, AT(5), MPI_SEEK_SET));
    CHECK(MPI_File_read(fh, r, m, MPI_INT, MPI_STATUS_IGNORE));
    expect(r, rank, 5, "read");
    CHECK(MPI_File_read_all(fh, r, m, MPI_INT, MPI_STATUS_IGNORE));
    expect(r, rank, 6, "read_all");
    CHECK(MPI_File_iread(fh, r, m, MPI_INT, &req));
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    expect(r, rank, 7, "iread");
    if (nb_coll) CHECK(MPI_File_iread_all(fh, r, m, MPI_INT, &req));
    else CHECK(MPI_File_iread(fh, r, m, MPI_INT, &req));
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    expect(r, rank, 8, "iread_all");
    CHECK(MPI_File_read_all_begin(fh, r, m, MPI_INT));
    CHECK(MPI_File_read_all_end(fh, r, MPI_STATUS_IGNORE));
    expect(r, rank, 9, "read_all_begin");
    CHECK(MPI_File_close(&fh));

    /* ---- file b: the shared file pointer ---- */
    snprintf(path, sizeof path, "%s.b", argv[1]);
    CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                        &fh));
    CHECK(MPI_File_set_size(fh, 0));
    fill(w, rank, 20);
    CHECK(MPI_File_write_shared(fh, w, m, MPI_INT, MPI_STATUS_IGNORE));
    fill(w, rank, 21);
    CHECK(MPI_File_write_ordered(fh, w, m, MPI_INT, MPI_STATUS_IGNORE));
    fill(w, rank, 22);
    CHECK(MPI_File_iwrite_shared(fh, w, m, MPI_INT, &req));
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    fill(w, rank, 23);
    CHECK(MPI_File_write_ordered_begin(fh, w, m, MPI_INT));
    CHECK(MPI_File_write_ordered_end(fh, w, MPI_STATUS_IGNORE));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    CHECK(MPI_File_read_shared(fh, r, m, MPI_INT, MPI_STATUS_IGNORE));
    expect_some_block(r, "read_shared");
    CHECK(MPI_File_read_ordered(fh, r, m, MPI_INT, MPI_STATUS_IGNORE));
    expect_some_block(r, "read_ordered");
    CHECK(MPI_File_iread_shared(fh, r, m, MPI_INT, &req));
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    expect_some_block(r, "iread_shared");
    CHECK(MPI_File_read_ordered_begin(fh, r, m, MPI_INT));
    CHECK(MPI_File_read_ordered_end(fh, r, MPI_STATUS_IGNORE));
    expect_some_block(r, "read_ordered_begin");
    CHECK(MPI_File_close(&fh));

    /* ---- file c<rank>: one process per file ---- */
    snprintf(path, sizeof path, "%s.c%d", argv[1], rank);
    CHECK(MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL,
                        &fh));
    fill(w, rank, 30);
    CHECK(MPI_File_write_at(fh, 0, w, m, MPI_INT, MPI_STATUS_IGNORE));
    CHECK(MPI_File_close(&fh));

    int total = 0;
    MPI_Allreduce(&bad, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && total) fprintf(stderr, "mpiio_flavours: %d problems\n", total);
    free(w);
    free(r);
    MPI_Finalize();
    return total ? 1 : 0;
}
