/* HDF5 program for the [hdf5] settings of the iopilot runtime.
 *
 *   h5_settings PATH            (serial HDF5)
 *   mpirun -n N h5_settings PATH (parallel HDF5: the MPI-IO driver)
 *
 * Build it against the shared library (h5pcc -shlib, or cc with
 * pkg-config hdf5-serial).  Creates PATH and three datasets of doubles:
 *   /a  2-D, rows x 16, the program's own creation list chunked 2 x 8;
 *   /b  2-D, rows x 16, H5P_DEFAULT (contiguous);
 *   /c  1-D, 64 elements, H5P_DEFAULT;
 * (rows = 4 per process), writes them (in parallel each process its own
 * rows; /a with the program's own transfer list, asking for independent
 * I/O), reads /a back and checks it.  It prints, one "key value" per line
 * and from rank 0 only, what HDF5 used (H5Fget_access_plist,
 * H5Dget_create_plist) and what the program's own lists still say.
 * Exit status 1 when an HDF5 call fails or data read back differ.
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef H5_HAVE_PARALLEL
#include <mpi.h>
#endif

static int rank = 0, nprocs = 1;

#define CHECK(x)                                                       \
    do {                                                               \
        if ((x) < 0) {                                                 \
            fprintf(stderr, "line %d: %s failed\n", __LINE__, #x);     \
            exit(1);                                                   \
        }                                                              \
    } while (0)

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void say(const char *fmt, ...) {
    if (rank) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

static void fapl_show(const char *who, hid_t fapl) {
    hsize_t thr = 0, align = 0, mbs = 0;
    size_t sieve = 0, pbs = 0;
    unsigned pm = 0, pr = 0;
    CHECK(H5Pget_alignment(fapl, &thr, &align));
    CHECK(H5Pget_sieve_buf_size(fapl, &sieve));
    CHECK(H5Pget_meta_block_size(fapl, &mbs));
    CHECK(H5Pget_page_buffer_size(fapl, &pbs, &pm, &pr));
    say("%s alignment %llu %llu\n", who, (unsigned long long)thr, (unsigned long long)align);
    say("%s sieve_buf_size %zu\n", who, sieve);
    say("%s meta_block_size %llu\n", who, (unsigned long long)mbs);
    say("%s page_buffer_size %zu\n", who, pbs);
    int mdc = 0;
    size_t nslots = 0, nbytes = 0;
    double w0 = 0;
    CHECK(H5Pget_cache(fapl, &mdc, &nslots, &nbytes, &w0));
    say("%s chunk_cache_size %zu\n", who, nbytes);
#ifdef H5_HAVE_PARALLEL
    hbool_t ops = 0, wr = 0;
    CHECK(H5Pget_all_coll_metadata_ops(fapl, &ops));
    CHECK(H5Pget_coll_metadata_write(fapl, &wr));
    say("%s coll_metadata_ops %d\n", who, (int)ops);
    say("%s coll_metadata_write %d\n", who, (int)wr);
#endif
}

static void dcpl_show(const char *who, hid_t dcpl) {
    hsize_t chunk[8] = {0};
    H5D_fill_time_t ft;
    H5D_layout_t layout = H5Pget_layout(dcpl);
    CHECK(layout);
    CHECK(H5Pget_fill_time(dcpl, &ft));
    say("%s layout %s\n", who, layout == H5D_CHUNKED ? "chunked" : layout == H5D_CONTIGUOUS ? "contiguous" : "other");
    if (layout == H5D_CHUNKED) {
        int n = H5Pget_chunk(dcpl, 8, chunk);
        CHECK(n);
        say("%s chunk", who);
        for (int i = 0; i < n; i++) say(" %llu", (unsigned long long)chunk[i]);
        say("\n");
    }
    say("%s fill_time %s\n", who, ft == H5D_FILL_TIME_NEVER ? "never" : ft == H5D_FILL_TIME_ALLOC ? "alloc" : "ifset");
}

static hid_t make(hid_t file, const char *name, int rank_, const hsize_t *dims, hid_t dcpl) {
    hid_t space = H5Screate_simple(rank_, dims, NULL);
    hid_t d = H5Dcreate2(file, name, H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(d);
    H5Sclose(space);
    hid_t used = H5Dget_create_plist(d);
    char who[32];
    snprintf(who, sizeof who, "used %s", name);
    dcpl_show(who, used);
    H5Pclose(used);
    return d;
}

/* This process's rows of a rows x 16 dataset (all of a 1-D one on rank 0). */
static void write_part(hid_t d, int ndims, hid_t dxpl, double *buf) {
    hid_t fspace = H5Dget_space(d), mspace;
    if (ndims == 2) {
        hsize_t start[2] = {(hsize_t)rank * 4, 0}, count[2] = {4, 16};
        CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL));
        mspace = H5Screate_simple(2, count, NULL);
    } else {
        hsize_t n = 64;
        mspace = H5Screate_simple(1, &n, NULL);
        if (rank) {
            H5Sselect_none(fspace);
            H5Sselect_none(mspace);
        }
    }
    CHECK(H5Dwrite(d, H5T_NATIVE_DOUBLE, mspace, fspace, dxpl, buf));
    H5Sclose(mspace);
    H5Sclose(fspace);
}

int main(int argc, char **argv) {
#ifdef H5_HAVE_PARALLEL
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
#endif
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH\n", argv[0]);
        return 2;
    }
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
#ifdef H5_HAVE_PARALLEL
    CHECK(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL));
#endif
    hid_t file = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(file);
    hid_t used = H5Fget_access_plist(file);
    fapl_show("used file", used);
    H5Pclose(used);
    fapl_show("caller fapl", fapl);

    hsize_t rows = (hsize_t)nprocs * 4, dims[2] = {rows, 16}, n1 = 64, chunk[2] = {2, 8};
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    CHECK(H5Pset_chunk(dcpl, 2, chunk));
    hid_t a = make(file, "/a", 2, dims, dcpl);
    hid_t b = make(file, "/b", 2, dims, H5P_DEFAULT);
    hid_t c = make(file, "/c", 1, &n1, H5P_DEFAULT);
    dcpl_show("caller dcpl", dcpl);

    double buf[64];
    for (int i = 0; i < 64; i++) buf[i] = rank * 1000 + i;
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
#ifdef H5_HAVE_PARALLEL
    CHECK(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT));
#endif
    write_part(a, 2, dxpl, buf);
    write_part(b, 2, H5P_DEFAULT, buf);
    write_part(c, 1, H5P_DEFAULT, buf);
#ifdef H5_HAVE_PARALLEL
    H5FD_mpio_xfer_t mode;
    CHECK(H5Pget_dxpl_mpio(dxpl, &mode));
    say("caller dxpl mpio %s\n", mode == H5FD_MPIO_COLLECTIVE ? "collective" : "independent");
#endif
    H5Fflush(file, H5F_SCOPE_GLOBAL); /* every process's rows are in the file */
#ifdef H5_HAVE_PARALLEL
    MPI_Barrier(MPI_COMM_WORLD);
#endif
    double back[64 * 64];
    CHECK(H5Dread(a, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, dxpl, back));
    int bad = 0;
    for (int r = 0; r < nprocs; r++)
        for (int i = 0; i < 64; i++) bad |= back[r * 64 + i] != r * 1000 + i;
    say("read back %s\n", bad ? "differs" : "ok");
    H5Dclose(a);
    H5Dclose(b);
    H5Dclose(c);
    H5Pclose(dcpl);
    H5Pclose(dxpl);
    H5Pclose(fapl);
    CHECK(H5Fclose(file));
#ifdef H5_HAVE_PARALLEL
    MPI_Finalize();
#endif
    return bad;
}
