/* Mistake: a time series of 2-D fields is appended to an HDF5 dataset and
 * H5Fflush is called after every step, "to be safe".  Each flush writes the
 * file's dirty metadata (chunk index, object header, superblock) again, a
 * few small synchronous writes per step.  Serial HDF5's default driver does
 * not fsync, so on a local disk this costs little; on a parallel file system
 * every one of those small metadata writes is a round trip to a server, and
 * with the MPI-IO driver each flush is also an MPI_File_sync.
 * Fix: no per-step flush; H5Fclose writes the metadata once at the end.
 * The chunking is right in both modes (one chunk per step).
 * The data written is the same in both modes.
 * Usage: prog mistake|fixed   (writes series.h5 in the current directory) */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NX 64
#define NY 64
#define STEPS 1000

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "mistake") && strcmp(argv[1], "fixed"))) {
        fprintf(stderr, "usage: %s mistake|fixed\n", argv[0]);
        return 2;
    }
    int mistake = !strcmp(argv[1], "mistake");

    double *field = malloc(sizeof(double) * NX * NY);
    hid_t file = H5Fcreate("series.h5", H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[3] = {0, NX, NY}, maxdims[3] = {H5S_UNLIMITED, NX, NY};
    hsize_t chunk[3] = {1, NX, NY};
    hid_t space = H5Screate_simple(3, dims, maxdims);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 3, chunk);
    hid_t dset = H5Dcreate2(file, "temperature", H5T_NATIVE_DOUBLE, space,
                            H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Sclose(space);
    H5Pclose(dcpl);

    for (int step = 0; step < STEPS; step++) {
        for (int i = 0; i < NX * NY; i++)
            field[i] = 300.0 + step * 0.01 + 1e-4 * i;

        hsize_t newdims[3] = {(hsize_t)step + 1, NX, NY};
        H5Dset_extent(dset, newdims);
        hid_t fspace = H5Dget_space(dset);
        hsize_t start[3] = {(hsize_t)step, 0, 0}, count[3] = {1, NX, NY};
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL);
        hid_t mspace = H5Screate_simple(3, count, NULL);
        H5Dwrite(dset, H5T_NATIVE_DOUBLE, mspace, fspace, H5P_DEFAULT, field);
        H5Sclose(mspace);
        H5Sclose(fspace);

        if (mistake)
            H5Fflush(file, H5F_SCOPE_GLOBAL);
    }

    H5Dclose(dset);
    H5Fclose(file);
    free(field);
    printf("wrote %d steps of %dx%d doubles\n", STEPS, NX, NY);
    return 0;
}
