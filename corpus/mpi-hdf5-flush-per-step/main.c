/* Mistake: a parallel HDF5 program (4 ranks, MPI-IO driver) appends one
 * 2-D field per step to a chunked dataset and calls H5Fflush after every
 * step.  With the MPI-IO driver each flush writes the dirty metadata and
 * then calls MPI_File_sync, which makes every rank fsync the file: each
 * step waits for the disk.
 * Fix: no per-step flush; H5Fclose writes the metadata and syncs once.
 * Each rank writes its quarter of the rows collectively in both modes; the
 * data written is the same.
 * Usage: mpirun -np 4 prog mistake|fixed   (writes series.h5) */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NX 256
#define NY 256
#define STEPS 300

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 2 || (strcmp(argv[1], "mistake") && strcmp(argv[1], "fixed"))) {
        if (rank == 0)
            fprintf(stderr, "usage: %s mistake|fixed\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    int mistake = !strcmp(argv[1], "mistake");
    hsize_t rows = NX / size;
    double *part = malloc(sizeof(double) * rows * NY);

    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
    hid_t file = H5Fcreate("series.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    hsize_t dims[3] = {0, NX, NY}, maxdims[3] = {H5S_UNLIMITED, NX, NY};
    hsize_t chunk[3] = {1, NX, NY};
    hid_t space = H5Screate_simple(3, dims, maxdims);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 3, chunk);
    hid_t dset = H5Dcreate2(file, "density", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, dcpl,
                            H5P_DEFAULT);
    H5Sclose(space);
    H5Pclose(dcpl);
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);

    for (int step = 0; step < STEPS; step++) {
        for (hsize_t i = 0; i < rows * NY; i++)
            part[i] = 1.0 + step * 0.001 + rank * 0.1 + 1e-7 * (double)i;
        hsize_t newdims[3] = {(hsize_t)step + 1, NX, NY};
        H5Dset_extent(dset, newdims);
        hid_t fspace = H5Dget_space(dset);
        hsize_t start[3] = {(hsize_t)step, rank * rows, 0}, count[3] = {1, rows, NY};
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL);
        hid_t mspace = H5Screate_simple(3, count, NULL);
        H5Dwrite(dset, H5T_NATIVE_DOUBLE, mspace, fspace, dxpl, part);
        H5Sclose(mspace);
        H5Sclose(fspace);
        if (mistake)
            H5Fflush(file, H5F_SCOPE_GLOBAL);
    }
    H5Pclose(dxpl);
    H5Dclose(dset);
    H5Fclose(file);
    free(part);
    if (rank == 0)
        printf("wrote %d steps of %dx%d doubles\n", STEPS, NX, NY);
    MPI_Finalize();
    return 0;
}
