/* HDF5 dataset accesses counted as Darshan 3.5 counts them.
 *
 *   mpirun -n 2 h5_access PATH
 *
 * Build it with `h5pcc -shlib` (a statically linked HDF5 cannot be
 * interposed).  Each rank writes PATH.<rank> with the default (sec2) driver:
 *
 *   /t     1-D, 1000 doubles, created with H5Dcreate1, reopened with
 *          H5Dopen2; twelve accesses of six tuples (size; length and stride
 *          of dimension 0, which Darshan puts in D5):
 *            A  write  regular, count 100               800  100  1
 *            A  write  the same from a buffer of ints:  800 (the dataset's
 *                      type makes the size, not the memory type's)
 *            B  write  regular, stride 4, count 25, block 4: 800  100  4
 *            C  write  irregular (blocks of 30 and 70): 800  -    -
 *            B, C again
 *            D  read   3 points:                         24  -    -
 *            E  read   everything (H5S_ALL):           8000  -    -
 *            F  read   regular, count 10, three times:   80   10  1
 *            D  read   again
 *          Darshan's list after each access (count, then size, then the
 *          tuple counted last first): A1; A2; A2 B1; A2 C1 B1; B2 A2 C1;
 *          C2 B2 A2; C2 B2 A2 D1; C2 B2 A2 E1 (D falls out); E1 stays above
 *          F1; C2 B2 A2 F2; F3 C2 B2 A2; D2 ranks below all four.  So:
 *          ACCESS1 = F (80, D5 10/1, count 3), ACCESS2 = C (800, no shape,
 *          2), ACCESS3 = B (800, D5 100/4, 2), ACCESS4 = A (800, D5 100/1,
 *          2); BYTES_WRITTEN 4800, BYTES_READ 8288.  At the end /t is
 *          opened twice more, with H5Oopen_by_idx and H5Oopen_by_addr (or
 *          _by_token), which Darshan counts too: OPENS 4; USE_DEPRECATED 0
 *          (the last open was not H5Dcreate1/H5Dopen1).
 *   /cube  3-D, 10 x 20 x 30 shorts, created with H5Dcreate2, reopened with
 *          H5Dopen1; one read of start 0, stride (2, 1, 3), count (5, 20,
 *          10): 2000 bytes, LENGTH D5 5, D4 20, D3 10, STRIDE D5 2, D4 1,
 *          D3 3; USE_DEPRECATED 1.
 *   /six   6-D, 2 x 3 x 4 x 5 x 6 x 7 doubles; one write of count (1, 2, 3,
 *          4, 5, 6): 5760 bytes, LENGTH D5..D1 = 1, 2, 3, 4, 5 (Darshan
 *          keeps dimensions 0 to 4, whatever the rank).
 *
 * Then both ranks create PATH through the MPI-IO driver with dataset /s of
 * 4000 doubles and each writes two tuples of 800 bytes, X (count 100) and Y
 * (stride 2, count 50, block 2): rank 0 X then Y, rank 1 Y then X.  Darshan
 * combines the two ranks' lists into X (count 2) above Y (count 2).  Last,
 * rank 0 reopens PATH with the default driver: its H5F USE_MPIIO becomes 0
 * (the last open decides), rank 1's stays 1.  Prints "ok".
 */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double buf[4096];
static int ints[4096];
static int bad;

/* One H5Dwrite/H5Dread of ``d`` with the file selection already in ``fs``. */
static void xfer(hid_t d, hid_t fs, int write, hid_t mtype, void *mem) {
    hssize_t n = H5Sget_select_npoints(fs);
    hsize_t m = (hsize_t)n;
    hid_t ms = H5Screate_simple(1, &m, NULL);
    herr_t r = write ? H5Dwrite(d, mtype, ms, fs, H5P_DEFAULT, mem)
                     : H5Dread(d, mtype, ms, fs, H5P_DEFAULT, mem);
    if (r < 0) bad = 1;
    H5Sclose(ms);
}

static void slab(hid_t fs, H5S_seloper_t op, hsize_t start, hsize_t stride, hsize_t count,
                 hsize_t block) {
    if (H5Sselect_hyperslab(fs, op, &start, &stride, &count, &block) < 0) bad = 1;
}

static void per_rank_file(const char *path) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t n = 1000;
    hid_t fs = H5Screate_simple(1, &n, NULL);
    hid_t t = H5Dcreate1(f, "t", H5T_NATIVE_DOUBLE, fs, H5P_DEFAULT);
    H5Dclose(t);
    t = H5Dopen2(f, "t", H5P_DEFAULT);
    for (int k = 0; k < 2; k++) { /* A, A from ints */
        slab(fs, H5S_SELECT_SET, 0, 1, 100, 1);
        xfer(t, fs, 1, k ? H5T_NATIVE_INT : H5T_NATIVE_DOUBLE, k ? (void *)ints : buf);
    }
    for (int k = 0; k < 2; k++) {
        slab(fs, H5S_SELECT_SET, 200, 4, 25, 4); /* B */
        xfer(t, fs, 1, H5T_NATIVE_DOUBLE, buf);
        slab(fs, H5S_SELECT_SET, 0, 1, 30, 1); /* C: equal blocks would make it regular */
        slab(fs, H5S_SELECT_OR, 500, 1, 70, 1);
        xfer(t, fs, 1, H5T_NATIVE_DOUBLE, buf);
    }
    hsize_t pts[3] = {1, 7, 999};
    H5Sselect_elements(fs, H5S_SELECT_SET, 3, pts); /* D */
    xfer(t, fs, 0, H5T_NATIVE_DOUBLE, buf);
    if (H5Dread(t, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) bad = 1; /* E */
    for (int k = 0; k < 3; k++) { /* F */
        slab(fs, H5S_SELECT_SET, 10, 1, 10, 1);
        xfer(t, fs, 0, H5T_NATIVE_DOUBLE, buf);
    }
    H5Sselect_elements(fs, H5S_SELECT_SET, 3, pts); /* D */
    xfer(t, fs, 0, H5T_NATIVE_DOUBLE, buf);
    H5Dclose(t);
    H5Sclose(fs);

    hsize_t dims[3] = {10, 20, 30}, start[3] = {0, 0, 0}, stride[3] = {2, 1, 3},
            count[3] = {5, 20, 10};
    fs = H5Screate_simple(3, dims, NULL);
    hid_t c = H5Dcreate2(f, "cube", H5T_NATIVE_SHORT, fs, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(c);
    c = H5Dopen1(f, "cube");
    if (H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, stride, count, NULL) < 0) bad = 1;
    xfer(c, fs, 0, H5T_NATIVE_SHORT, buf);
    H5Dclose(c);
    H5Sclose(fs);

    hsize_t d6[6] = {2, 3, 4, 5, 6, 7}, s6[6] = {0}, c6[6] = {1, 2, 3, 4, 5, 6};
    fs = H5Screate_simple(6, d6, NULL);
    hid_t six = H5Dcreate2(f, "six", H5T_NATIVE_DOUBLE, fs, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (H5Sselect_hyperslab(fs, H5S_SELECT_SET, s6, NULL, c6, NULL) < 0) bad = 1;
    xfer(six, fs, 1, H5T_NATIVE_DOUBLE, buf);
    H5Dclose(six);
    H5Sclose(fs);

    /* /t twice more: by index (names in order: cube, six, t) and by address */
    hid_t o = H5Oopen_by_idx(f, ".", H5_INDEX_NAME, H5_ITER_INC, 2, H5P_DEFAULT);
    if (o < 0) bad = 1;
#if H5_VERSION_GE(1, 12, 0)
    H5O_info2_t info;
    if (H5Oget_info3(o, &info, H5O_INFO_BASIC) < 0) bad = 1;
    hid_t o2 = H5Oopen_by_token(f, info.token);
#else
    H5O_info_t info;
    if (H5Oget_info2(o, &info, H5O_INFO_BASIC) < 0) bad = 1;
    hid_t o2 = H5Oopen_by_addr(f, info.addr);
#endif
    if (o2 < 0) bad = 1;
    H5Oclose(o2);
    H5Oclose(o);
    H5Fclose(f);
}

static void shared_file(const char *path, int rank) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hsize_t n = 4000;
    hid_t fs = H5Screate_simple(1, &n, NULL);
    hid_t s = H5Dcreate2(f, "s", H5T_NATIVE_DOUBLE, fs, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t base = (hsize_t)rank * 2000;
    for (int k = 0; k < 2; k++) {
        if ((k == 0) == (rank == 0)) slab(fs, H5S_SELECT_SET, base, 1, 100, 1); /* X */
        else slab(fs, H5S_SELECT_SET, base + 500, 2, 50, 2);                  /* Y */
        xfer(s, fs, 1, H5T_NATIVE_DOUBLE, buf);
    }
    H5Dclose(s);
    H5Sclose(fs);
    H5Fclose(f);
    H5Pclose(fapl);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        if (f < 0) bad = 1;
        H5Fclose(f);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: %s PATH\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", argv[1], rank);
    per_rank_file(path);
    shared_file(argv[1], rank);
    int all = 0;
    MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf(all ? "failed\n" : "ok\n");
    MPI_Finalize();
    return all;
}
