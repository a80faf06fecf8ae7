/* Mistake: a 2-D dataset of floats with 4 MiB chunks (1024x1024) is grown
 * 16 columns a step and written one 16-column strip at a time, then read
 * back the same way.  Each strip covers 2 chunks in part, 8 MiB of chunks,
 * and HDF5's default chunk cache holds 1 MiB: no chunk stays in the cache
 * until it is whole, so every strip is written and read as 2048 pieces of
 * 64 bytes.
 * Fix: a chunk cache of 16 MiB on the dataset (H5Pset_chunk_cache), which
 * holds the chunks a strip touches until they are whole.  The data written
 * is the same in both modes.
 * Usage: prog mistake|fixed   (writes strips.h5 in the current directory) */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 2048
#define CHUNK 1024
#define WIDTH 16
#define COLS 2048

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "mistake") && strcmp(argv[1], "fixed"))) {
        fprintf(stderr, "usage: %s mistake|fixed\n", argv[0]);
        return 2;
    }
    int mistake = !strcmp(argv[1], "mistake");
    hsize_t dims[2] = {ROWS, 0}, maxdims[2] = {ROWS, H5S_UNLIMITED};
    hsize_t chunk[2] = {CHUNK, CHUNK}, count[2] = {ROWS, WIDTH};
    hid_t file = H5Fcreate("strips.h5", H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(2, dims, maxdims);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    if (!mistake)
        H5Pset_chunk_cache(dapl, 12421, (size_t)16 * 1024 * 1024, 1.0);
    hid_t dset = H5Dcreate2(file, "x", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, dapl);
    H5Sclose(space);
    float *strip = malloc(sizeof(float) * ROWS * WIDTH);
    hid_t mspace = H5Screate_simple(2, count, NULL);
    double sum = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (hsize_t col = 0; col < COLS; col += WIDTH) {
            hsize_t start[2] = {0, col};
            if (pass == 0) {
                hsize_t grown[2] = {ROWS, col + WIDTH};
                H5Dset_extent(dset, grown);
                for (size_t i = 0; i < (size_t)ROWS * WIDTH; i++)
                    strip[i] = (float)(col + i % WIDTH) + (float)(i / WIDTH) * 1e-3f;
            }
            hid_t fspace = H5Dget_space(dset);
            H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL);
            if (pass == 0)
                H5Dwrite(dset, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, strip);
            else
                H5Dread(dset, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, strip);
            H5Sclose(fspace);
            if (pass == 1)
                sum += strip[0];
        }
    }
    H5Sclose(mspace);
    H5Pclose(dapl);
    H5Pclose(dcpl);
    H5Dclose(dset);
    H5Fclose(file);
    free(strip);
    printf("wrote and read %d strips of %dx%d floats (checksum %.1f)\n", COLS / WIDTH, ROWS,
           WIDTH, sum);
    return 0;
}
