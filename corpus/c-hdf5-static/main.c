/* Mistake: a 3-D dataset is created empty and grown by one 64^3 slab per
 * step, with 8x8x8 chunks.  Every slab is cut into 512 chunks of 4 KiB, so
 * HDF5 writes 4 KiB pieces and its chunk index grows by 512 entries a step.
 * Fix: chunks of one whole slab (64x64x64), the shape of what each step
 * writes.  The data written is the same in both modes.
 * Built with plain h5cc, which links HDF5 statically: a preloaded tracer
 * sees only the POSIX calls under it, not the HDF5 calls.
 * Usage: prog mistake|fixed   (writes grow.h5 in the current directory) */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 64
#define STEPS 100

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "mistake") && strcmp(argv[1], "fixed"))) {
        fprintf(stderr, "usage: %s mistake|fixed\n", argv[0]);
        return 2;
    }
    int mistake = !strcmp(argv[1], "mistake");
    hsize_t chunk[3] = {8, 8, 8};
    if (!mistake)
        chunk[0] = chunk[1] = chunk[2] = N;

    double *slab = malloc(sizeof(double) * N * N * N);
    hid_t file = H5Fcreate("grow.h5", H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[3] = {0, N, N}, maxdims[3] = {H5S_UNLIMITED, N, N};
    hid_t space = H5Screate_simple(3, dims, maxdims);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 3, chunk);
    hid_t dset = H5Dcreate2(file, "field", H5T_NATIVE_DOUBLE, space,
                            H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Sclose(space);

    for (int step = 0; step < STEPS; step++) {
        /* one step of a "simulation": a field that changes with time */
        for (size_t i = 0; i < (size_t)N * N * N; i++)
            slab[i] = step + 1e-6 * (double)i;

        hsize_t newdims[3] = {(hsize_t)(step + 1) * N, N, N};
        H5Dset_extent(dset, newdims);
        hid_t fspace = H5Dget_space(dset);
        hsize_t start[3] = {(hsize_t)step * N, 0, 0}, count[3] = {N, N, N};
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL);
        hid_t mspace = H5Screate_simple(3, count, NULL);
        H5Dwrite(dset, H5T_NATIVE_DOUBLE, mspace, fspace, H5P_DEFAULT, slab);
        H5Sclose(mspace);
        H5Sclose(fspace);
    }

    H5Pclose(dcpl);
    H5Dclose(dset);
    H5Fclose(file);
    free(slab);
    printf("wrote %d slabs of %d^3 doubles\n", STEPS, N);
    return 0;
}
