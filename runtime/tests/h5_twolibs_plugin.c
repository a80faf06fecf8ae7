/* The plugin of h5_twolibs.c, linked with a second copy of HDF5. */
#include <hdf5.h>

static hid_t file = -1, dset = -1;

int plugin_open(const char *path) {
    hsize_t n = 2000;
    file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) return 1;
    hid_t space = H5Screate_simple(1, &n, NULL);
    dset = H5Dcreate2(file, "b", H5T_NATIVE_INT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Sclose(space);
    return dset < 0;
}

int plugin_finish(void) {
    int buf[1000], got[2000];
    hsize_t half = 1000;
    hid_t fspace = H5Dget_space(dset);
    hid_t mspace = H5Screate_simple(1, &half, NULL);
    for (hsize_t k = 0; k < 2; k++) {
        hsize_t start = k * half;
        for (int i = 0; i < 1000; i++) buf[i] = (int)(k * 1000) + i;
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, NULL, &half, NULL);
        if (H5Dwrite(dset, H5T_NATIVE_INT, mspace, fspace, H5P_DEFAULT, buf) < 0) return 1;
    }
    if (H5Dread(dset, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) < 0) return 1;
    for (int i = 0; i < 2000; i++)
        if (got[i] != i) return 1;
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Dclose(dset);
    return H5Fclose(file) < 0;
}
