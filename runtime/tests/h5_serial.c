/* HDF5 (serial use of the library) test for the iopilot runtime.
 *
 *   h5_serial PATH
 *
 * Build it against the shared HDF5 library (`h5pcc -shlib`, or cc with
 * -lhdf5): a statically linked HDF5 cannot be interposed.
 *
 * Creates PATH with a file-access property list that sets the alignment
 * (threshold 4096, alignment 65536) and the metadata cache (initial size
 * 4 MiB, between 1 and 16 MiB) and writes
 *   /x       1-D, N = 100000 doubles, contiguous: K = 10 hyperslab writes
 *            of N / K elements (a regular hyperslab each);
 *   /g/grid  2-D, 200 x 300 int32, chunks 50 x 60, shuffle filter: one
 *            write of everything (H5S_ALL for both spaces);
 * flushes the file once (H5Fflush), closes it, reopens it read-only and
 * reads back
 *   /x       in 4 regular hyperslabs of N / 4 elements;
 *   /g/grid  whole (H5S_ALL), then 5 points (a point selection, 20 bytes),
 *            then rows 0-9 and 100-104 (an irregular hyperslab: 15 rows,
 *            18000 bytes);
 * opens /x once more with H5Oopen and closes it with H5Oclose; and checks
 * that two failing calls (opening a missing dataset, reading with a memory
 * space of the wrong size) fail and leave their errors on the error stack.
 * Exits non-zero when anything read back differs or a check fails.
 *
 * The trace must show, for H5D "PATH:/x": OPENS 3, CREATES 1, WRITES 10,
 * BYTES_WRITTEN 800000, READS 4, BYTES_READ 800000, REGULAR_HYPERSLAB_SELECTS
 * 14, DATATYPE_SIZE 8, DATASPACE_NDIMS 1, DATASPACE_NPOINTS 100000; for
 * "PATH:/g/grid": OPENS 2, CREATES 1, WRITES 1, BYTES_WRITTEN 240000, READS
 * 3, BYTES_READ 258020, POINT_SELECTS 1, IRREGULAR_HYPERSLAB_SELECTS 1,
 * DATATYPE_SIZE 4, DATASPACE_NDIMS 2, DATASPACE_NPOINTS 60000,
 * CHUNK_SIZE_D1 60, CHUNK_SIZE_D2 50 (D1 is the fastest-varying dimension,
 * as in Darshan); for H5F "PATH": CREATES 1, OPENS 1 (the runtime counts
 * H5Fcreate only as CREATES; dataset OPENS include the creates), FLUSHES 1,
 * ALIGNMENT_THRESHOLD 4096, ALIGNMENT 65536.
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 100000
#define K 10
#define R 200
#define C 300

static int bad = 0;
#define CHECK(cond)                                                       \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "h5_serial: check failed line %d: %s\n",      \
                    __LINE__, #cond);                                     \
            bad = 1;                                                      \
        }                                                                 \
    } while (0)

static void write_x(hid_t file) {
    hsize_t dims[1] = {N}, part[1] = {N / K};
    hid_t fspace = H5Screate_simple(1, dims, NULL);
    hid_t mspace = H5Screate_simple(1, part, NULL);
    hid_t d = H5Dcreate2(file, "x", H5T_NATIVE_DOUBLE, fspace, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    CHECK(d >= 0);
    double *buf = malloc(sizeof(double) * (N / K));
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < N / K; i++) buf[i] = (double)(k * (N / K) + i) * 0.5;
        hsize_t start[1] = {(hsize_t)k * (N / K)};
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, part, NULL);
        CHECK(H5Dwrite(d, H5T_NATIVE_DOUBLE, mspace, fspace, H5P_DEFAULT, buf) >= 0);
    }
    CHECK(H5Fflush(d, H5F_SCOPE_LOCAL) >= 0);
    free(buf);
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Dclose(d);
}

static void write_grid(hid_t file) {
    hsize_t dims[2] = {R, C}, chunk[2] = {50, 60};
    hid_t g = H5Gcreate2(file, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(2, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    H5Pset_shuffle(dcpl);
    hid_t d = H5Dcreate2(g, "grid", H5T_STD_I32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(d >= 0);
    int *buf = malloc(sizeof(int) * R * C);
    for (int i = 0; i < R * C; i++) buf[i] = i * 3 + 1;
    CHECK(H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    free(buf);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Dclose(d);
    H5Gclose(g);
}

static void read_back(hid_t file) {
    /* /x in 4 pieces */
    hid_t d = H5Dopen2(file, "/x", H5P_DEFAULT);
    CHECK(d >= 0);
    hsize_t part[1] = {N / 4};
    hid_t fspace = H5Dget_space(d);
    hid_t mspace = H5Screate_simple(1, part, NULL);
    double *x = malloc(sizeof(double) * (N / 4));
    for (int k = 0; k < 4; k++) {
        hsize_t start[1] = {(hsize_t)k * (N / 4)};
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, part, NULL);
        CHECK(H5Dread(d, H5T_NATIVE_DOUBLE, mspace, fspace, H5P_DEFAULT, x) >= 0);
        for (int i = 0; i < N / 4; i++)
            if (x[i] != (double)(k * (N / 4) + i) * 0.5) {
                fprintf(stderr, "h5_serial: /x[%d] differs\n", k * (N / 4) + i);
                bad = 1;
                break;
            }
    }
    /* A failing read: a memory space of 25000 elements for a file
     * selection of 10.  The error must stay on the stack for the program. */
    hsize_t start[1] = {0}, ten[1] = {10};
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, ten, NULL);
    H5Eclear2(H5E_DEFAULT);
    CHECK(H5Dread(d, H5T_NATIVE_DOUBLE, mspace, fspace, H5P_DEFAULT, x) < 0);
    CHECK(H5Eget_num(H5E_DEFAULT) > 0);
    free(x);
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Dclose(d);

    /* /g/grid: whole, 5 points, an irregular hyperslab */
    d = H5Dopen2(file, "/g/grid", H5P_DEFAULT);
    CHECK(d >= 0);
    int *g = malloc(sizeof(int) * R * C);
    CHECK(H5Dread(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, g) >= 0);
    for (int i = 0; i < R * C; i++)
        if (g[i] != i * 3 + 1) {
            fprintf(stderr, "h5_serial: /g/grid[%d] differs\n", i);
            bad = 1;
            break;
        }
    fspace = H5Dget_space(d);
    hsize_t coords[5][2] = {{0, 0}, {1, 2}, {50, 60}, {199, 299}, {100, 7}};
    H5Sselect_elements(fspace, H5S_SELECT_SET, 5, &coords[0][0]);
    hsize_t five[1] = {5};
    mspace = H5Screate_simple(1, five, NULL);
    int pts[5];
    CHECK(H5Dread(d, H5T_NATIVE_INT, mspace, fspace, H5P_DEFAULT, pts) >= 0);
    for (int i = 0; i < 5; i++)
        CHECK(pts[i] == (int)(coords[i][0] * C + coords[i][1]) * 3 + 1);
    H5Sclose(mspace);
    hsize_t s0[2] = {0, 0}, b0[2] = {10, C}, s1[2] = {100, 0}, b1[2] = {5, C};
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, s0, NULL, b0, NULL);
    H5Sselect_hyperslab(fspace, H5S_SELECT_OR, s1, NULL, b1, NULL);
    hsize_t rows[1] = {15 * C};
    mspace = H5Screate_simple(1, rows, NULL);
    CHECK(H5Dread(d, H5T_NATIVE_INT, mspace, fspace, H5P_DEFAULT, g) >= 0);
    for (int i = 0; i < 15 * C; i++) {
        int row = i / C < 10 ? i / C : 100 + i / C - 10;
        if (g[i] != (row * C + i % C) * 3 + 1) {
            fprintf(stderr, "h5_serial: irregular read differs at %d\n", i);
            bad = 1;
            break;
        }
    }
    free(g);
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Dclose(d);

    /* Opening through H5Oopen counts as an open of the dataset. */
    hid_t o = H5Oopen(file, "x", H5P_DEFAULT);
    CHECK(o >= 0 && H5Iget_type(o) == H5I_DATASET);
    H5Oclose(o);

    /* A failing open: the error stays on the stack. */
    H5Eclear2(H5E_DEFAULT);
    CHECK(H5Dopen2(file, "missing", H5P_DEFAULT) < 0);
    CHECK(H5Eget_num(H5E_DEFAULT) > 0);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* the failing calls are expected */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_alignment(fapl, 4096, 65536);
    /* A metadata cache of 4 MiB to start with (noted by the runtime). */
    H5AC_cache_config_t mdc;
    mdc.version = H5AC__CURR_CACHE_CONFIG_VERSION;
    CHECK(H5Pget_mdc_config(fapl, &mdc) >= 0);
    mdc.set_initial_size = 1;
    mdc.initial_size = 4 << 20;
    mdc.min_size = 1 << 20;
    mdc.max_size = 16 << 20;
    CHECK(H5Pset_mdc_config(fapl, &mdc) >= 0);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(file >= 0);
    write_x(file);
    write_grid(file);
    CHECK(H5Fclose(file) >= 0);

    file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    CHECK(file >= 0);
    read_back(file);
    CHECK(H5Fclose(file) >= 0);
    H5Pclose(fapl);
    if (bad) return 1;
    printf("ok\n");
    return 0;
}
