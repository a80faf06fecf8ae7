/* Parallel HDF5 test for the iopilot runtime.
 *
 *   mpirun -n 4 h5_parallel PATH [M]
 *
 * Build it with `h5pcc -shlib` (the shared library: a statically linked
 * HDF5 cannot be interposed).
 *
 * All ranks create PATH through the MPI-IO driver (H5Pset_fapl_mpio) with
 * collective metadata reads and writes switched on, and write three 1-D
 * datasets of nprocs * M doubles, each rank its own block of M elements
 * (M = 65536 by default, 512 KiB):
 *   /coll   one collective H5Dwrite (H5Pset_dxpl_mpio COLLECTIVE);
 *   /indep  one independent H5Dwrite (H5P_DEFAULT transfer list);
 *   /conv   one collective H5Dwrite from a memory buffer of ints into the
 *           double dataset: the type conversion makes HDF5 1.10 fall back
 *           to independent I/O, which the runtime notes;
 * then reads /coll back with one collective H5Dread and checks it.
 * Exits non-zero when anything read back differs.
 *
 * Per rank the trace must show, for H5D "PATH:/coll": WRITES 1,
 * BYTES_WRITTEN 8 M, READS 1, BYTES_READ 8 M, USE_MPIIO_COLLECTIVE 1; for
 * "PATH:/indep": WRITES 1, BYTES_WRITTEN 8 M, no USE_MPIIO_COLLECTIVE; for
 * "PATH:/conv": WRITES 1, BYTES_WRITTEN 8 M (as in Darshan, elements
 * times the size of the dataset's type, not of the memory type),
 * USE_MPIIO_COLLECTIVE 1; for H5F "PATH": CREATES 1 (H5Fcreate is not
 * counted in OPENS), USE_MPIIO 1.
 */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static hid_t make(hid_t file, const char *name, hsize_t total) {
    hid_t space = H5Screate_simple(1, &total, NULL);
    hid_t d = H5Dcreate2(file, name, H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    H5Sclose(space);
    return d;
}

/* The rank's block of ``d`` selected in a new file space; ``mspace`` set. */
static hid_t block(hid_t d, int rank, hsize_t m, hid_t *mspace) {
    hid_t fspace = H5Dget_space(d);
    hsize_t start = (hsize_t)rank * m;
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, NULL, &m, NULL);
    *mspace = H5Screate_simple(1, &m, NULL);
    return fspace;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nprocs, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: %s PATH [M]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *path = argv[1];
    hsize_t m = argc > 2 ? (hsize_t)atol(argv[2]) : 65536;
    hsize_t total = m * (hsize_t)nprocs;

    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
    H5Pset_all_coll_metadata_ops(fapl, 1);
    H5Pset_coll_metadata_write(fapl, 1);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (file < 0) MPI_Abort(MPI_COMM_WORLD, 3);
    hid_t coll = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(coll, H5FD_MPIO_COLLECTIVE);

    double *buf = malloc(sizeof(double) * m), *got = malloc(sizeof(double) * m);
    int *ints = malloc(sizeof(int) * m);
    for (hsize_t i = 0; i < m; i++) {
        buf[i] = (double)rank * 1e6 + (double)i;
        ints[i] = rank * 1000 + (int)(i % 1000);
    }
    hid_t mspace, fspace;

    hid_t d = make(file, "coll", total);
    fspace = block(d, rank, m, &mspace);
    if (H5Dwrite(d, H5T_NATIVE_DOUBLE, mspace, fspace, coll, buf) < 0) bad = 1;
    H5Sclose(mspace);
    H5Sclose(fspace);
    hid_t coll_d = d;

    d = make(file, "indep", total);
    fspace = block(d, rank, m, &mspace);
    if (H5Dwrite(d, H5T_NATIVE_DOUBLE, mspace, fspace, H5P_DEFAULT, buf) < 0) bad = 1;
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Dclose(d);

    d = make(file, "conv", total);
    fspace = block(d, rank, m, &mspace);
    if (H5Dwrite(d, H5T_NATIVE_INT, mspace, fspace, coll, ints) < 0) bad = 1;
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Dclose(d);

    fspace = block(coll_d, rank, m, &mspace);
    if (H5Dread(coll_d, H5T_NATIVE_DOUBLE, mspace, fspace, coll, got) < 0) bad = 1;
    for (hsize_t i = 0; i < m && !bad; i++)
        if (got[i] != buf[i]) {
            fprintf(stderr, "h5_parallel: rank %d element %llu differs\n", rank,
                    (unsigned long long)i);
            bad = 1;
        }
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Dclose(coll_d);

    H5Pclose(coll);
    H5Pclose(fapl);
    H5Fclose(file);
    free(buf);
    free(got);
    free(ints);
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any && rank == 0) printf("ok\n");
    MPI_Finalize();
    return any;
}
