/* A 2-D dataset of floats that grows by 16 columns a step (H5Dset_extent),
 * with chunks of 1024x1024 floats (4 MiB); then read back by the same
 * strips.  Each write and read covers the 2 chunks of its column of chunks
 * in part (16 of their 1024 columns), 8 MiB of chunks: HDF5's default chunk
 * cache (1 MiB) holds none of them, so every access moves 2048 pieces of 64
 * bytes; a cache of 8 MiB keeps them until they are whole.
 * Usage: prog   (writes cache.h5 in the current directory) */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>

#define ROWS 2048
#define CHUNK 1024
#define WIDTH 16
#define COLS 2048

int main(void)
{
    hsize_t dims[2] = {ROWS, 0}, maxdims[2] = {ROWS, H5S_UNLIMITED};
    hsize_t chunk[2] = {CHUNK, CHUNK}, count[2] = {ROWS, WIDTH};
    hid_t file = H5Fcreate("cache.h5", H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(2, dims, maxdims);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    hid_t dset = H5Dcreate2(file, "x", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Sclose(space);
    float *strip = malloc(sizeof(float) * ROWS * WIDTH);
    hid_t mspace = H5Screate_simple(2, count, NULL);
    for (int pass = 0; pass < 2; pass++) {
        for (hsize_t col = 0; col < COLS; col += WIDTH) {
            if (pass == 0) {
                for (size_t i = 0; i < (size_t)ROWS * WIDTH; i++)
                    strip[i] = (float)(col + i);
                hsize_t grown[2] = {ROWS, col + WIDTH};
                H5Dset_extent(dset, grown);
            }
            hid_t fspace = H5Dget_space(dset);
            hsize_t start[2] = {0, col};
            H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL);
            if (pass == 0)
                H5Dwrite(dset, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, strip);
            else
                H5Dread(dset, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, strip);
            H5Sclose(fspace);
        }
    }
    H5Sclose(mspace);
    H5Pclose(dcpl);
    H5Dclose(dset);
    H5Fclose(file);
    free(strip);
    printf("wrote and read %d columns of %d floats by strips of %d\n", COLS, ROWS, WIDTH);
    return 0;
}
