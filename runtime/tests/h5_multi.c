/* H5Dwrite_multi / H5Dread_multi (HDF5 1.14 and later) for the iopilot runtime.
 *
 *   h5_multi PATH
 *
 * No hdf5.h: the few declarations it needs are written out below, so that
 * it builds against any HDF5 >= 1.14 shared library, e.g. the one bundled
 * in the h5py wheel (cc h5_multi.c /path/to/libhdf5-*.so -Wl,-rpath,...).
 *
 * Creates PATH with /a (1000 doubles) and /b (500 ints), writes both with
 * one H5Dwrite_multi call (H5S_ALL spaces) and reads both back with one
 * H5Dread_multi call.  Exits non-zero when a call fails or data differ.
 * The trace must show one write and one read per dataset: "PATH:/a"
 * BYTES_WRITTEN 8000 and BYTES_READ 8000, "PATH:/b" 2000 and 2000.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef int64_t hid_t;
typedef int herr_t;
typedef unsigned long long hsize_t;

extern hid_t H5T_NATIVE_DOUBLE_g, H5T_NATIVE_INT_g;
herr_t H5open(void);
hid_t H5Fcreate(const char *, unsigned, hid_t, hid_t);
herr_t H5Fclose(hid_t);
hid_t H5Screate_simple(int, const hsize_t *, const hsize_t *);
herr_t H5Sclose(hid_t);
hid_t H5Dcreate2(hid_t, const char *, hid_t, hid_t, hid_t, hid_t, hid_t);
herr_t H5Dclose(hid_t);
herr_t H5Dwrite_multi(size_t, hid_t *, hid_t *, hid_t *, hid_t *, hid_t, const void **);
herr_t H5Dread_multi(size_t, hid_t *, hid_t *, hid_t *, hid_t *, hid_t, void **);

#define H5F_ACC_TRUNC 0x0002u
#define H5P_DEFAULT ((hid_t)0)
#define H5S_ALL ((hid_t)0)

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH\n", argv[0]);
        return 2;
    }
    if (H5open() < 0) return 1;
    hid_t file = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t na = 1000, nb = 500;
    hid_t sa = H5Screate_simple(1, &na, NULL), sb = H5Screate_simple(1, &nb, NULL);
    hid_t d[2];
    d[0] = H5Dcreate2(file, "a", H5T_NATIVE_DOUBLE_g, sa, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    d[1] = H5Dcreate2(file, "b", H5T_NATIVE_INT_g, sb, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0 || d[0] < 0 || d[1] < 0) return 1;
    static double a[1000], a2[1000];
    static int b[500], b2[500];
    for (int i = 0; i < 1000; i++) a[i] = i * 1.5;
    for (int i = 0; i < 500; i++) b[i] = 7 * i;
    hid_t types[2] = {H5T_NATIVE_DOUBLE_g, H5T_NATIVE_INT_g};
    hid_t all[2] = {H5S_ALL, H5S_ALL};
    const void *wbuf[2] = {a, b};
    void *rbuf[2] = {a2, b2};
    if (H5Dwrite_multi(2, d, types, all, all, H5P_DEFAULT, wbuf) < 0) return 1;
    if (H5Dread_multi(2, d, types, all, all, H5P_DEFAULT, rbuf) < 0) return 1;
    for (int i = 0; i < 1000; i++)
        if (a2[i] != a[i]) return 1;
    for (int i = 0; i < 500; i++)
        if (b2[i] != b[i]) return 1;
    H5Dclose(d[0]);
    H5Dclose(d[1]);
    H5Sclose(sa);
    H5Sclose(sb);
    if (H5Fclose(file) < 0) return 1;
    printf("ok\n");
    return 0;
}
