/* More HDF5 access tuples than the runtime's fixed tables hold.
 *
 *   h5_many_tuples PATH
 *
 * Build it with `h5pcc -shlib`.  Creates PATH with 1100 datasets /d0 ...
 * /d1099 of 64 doubles and writes each 32 times with 32 different
 * selections (count 1 ... 32 from element 0): 35200 distinct tuples, more
 * than the runtime follows in one process.  The datasets it could follow
 * must have their tuples (sizes and lengths); the others must keep the
 * four most common sizes without shapes, with a note saying so.  Prints
 * "ok".
 */
#include <hdf5.h>
#include <stdio.h>

#define DATASETS 1100
#define SHAPES 32

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH\n", argv[0]);
        return 2;
    }
    static double buf[64];
    int bad = 0;
    hid_t f = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t n = 64;
    hid_t fs = H5Screate_simple(1, &n, NULL);
    for (int d = 0; d < DATASETS; d++) {
        char name[32];
        snprintf(name, sizeof name, "d%d", d);
        hid_t ds = H5Dcreate2(f, name, H5T_NATIVE_DOUBLE, fs, H5P_DEFAULT, H5P_DEFAULT,
                              H5P_DEFAULT);
        for (hsize_t c = 1; c <= SHAPES; c++) {
            hsize_t start = 0;
            hid_t ms = H5Screate_simple(1, &c, NULL);
            H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &c, NULL);
            if (H5Dwrite(ds, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, buf) < 0) bad = 1;
            H5Sclose(ms);
        }
        H5Dclose(ds);
    }
    H5Sclose(fs);
    H5Fclose(f);
    printf(bad ? "failed\n" : "ok\n");
    return bad;
}
