/* The IOR-style kernel's backends (see ior.h): open, transfer, sync and
 * close through POSIX, MPI-IO or HDF5.  Every function counts the calls it
 * makes (*meta: open, close, sync; *ops: transfers). */
#define _GNU_SOURCE 1 /* O_DIRECT; before any system header */
#include "ior.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- POSIX ---------------------------------------------------------------- */

static void posix_open(handle *h, const char *path, int create, int shared, long long *meta) {
    int flags = (create ? O_WRONLY | O_CREAT : O_RDONLY) | (cfg.odirect ? O_DIRECT : 0);
    /* Shared file: rank 0 creates it before the others open it (as IOR). */
    if (create && shared && k_rank != 0) {
        k_barrier();
        flags &= ~O_CREAT;
    }
    h->fd = open(path, flags, 0644);
    int err = errno;
    if (create && shared && k_rank == 0) k_barrier();
    if (h->fd < 0) {
        if (cfg.odirect && err == EINVAL)
            k_die("open %s: the file system refuses O_DIRECT (%s)", path, strerror(err));
        k_die("open %s: %s", path, strerror(err));
    }
    (*meta)++;
}

static long long posix_xfer(handle *h, int write, unsigned char *buf, long long len,
                            long long off, long long *ops) {
    long long done = 0;
    while (done < len) { /* a short transfer is retried for the rest, as IOR */
        ssize_t n = write ? pwrite(h->fd, buf + done, (size_t)(len - done), off + done)
                          : pread(h->fd, buf + done, (size_t)(len - done), off + done);
        (*ops)++;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EINVAL && cfg.odirect)
            k_die("%s at offset %lld: O_DIRECT refused (transfer size and offsets must be "
                  "multiples of the device's block size): %s",
                  write ? "pwrite" : "pread", off, strerror(errno));
        if (n < 0) k_die("%s at offset %lld: %s", write ? "pwrite" : "pread", off, strerror(errno));
        if (n == 0) break; /* end of file */
        done += n;
    }
    return done;
}

static void posix_sync(handle *h, long long *meta) {
    if (fsync(h->fd) != 0) k_die("fsync: %s", strerror(errno));
    (*meta)++;
}

static void posix_close(handle *h, long long *meta) {
    if (close(h->fd) != 0) k_die("close: %s", strerror(errno));
    (*meta)++;
}

/* ---- MPI-IO --------------------------------------------------------------- */


static void mpiio_open(handle *h, const char *path, int create, int shared, long long *meta) {
    int mode = create ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY;
    char what[64 + 4096];
    snprintf(what, sizeof what, "MPI_File_open %s", path);
    k_mpi_check(MPI_File_open(shared ? MPI_COMM_WORLD : MPI_COMM_SELF, path, mode, cfg.info, &h->fh),
              what);
    (*meta)++;
}

static long long mpiio_xfer(handle *h, int write, unsigned char *buf, long long len,
                            long long off, long long *ops) {
    MPI_Status st;
    int rc, count = 0;
    if (write)
        rc = cfg.collective ? MPI_File_write_at_all(h->fh, off, buf, (int)len, MPI_BYTE, &st)
                            : MPI_File_write_at(h->fh, off, buf, (int)len, MPI_BYTE, &st);
    else
        rc = cfg.collective ? MPI_File_read_at_all(h->fh, off, buf, (int)len, MPI_BYTE, &st)
                            : MPI_File_read_at(h->fh, off, buf, (int)len, MPI_BYTE, &st);
    (*ops)++;
    k_mpi_check(rc, write ? "MPI_File_write_at" : "MPI_File_read_at");
    MPI_Get_count(&st, MPI_BYTE, &count);
    return count;
}

static void mpiio_sync(handle *h, long long *meta) {
    k_mpi_check(MPI_File_sync(h->fh), "MPI_File_sync");
    (*meta)++;
}

static void mpiio_close(handle *h, long long *meta) {
    k_mpi_check(MPI_File_close(&h->fh), "MPI_File_close");
    (*meta)++;
}

/* ---- HDF5 ----------------------------------------------------------------- */


static void hdf5_open(handle *h, const char *path, int create, int shared, long long *meta) {
    hid_t fapl = k_h5(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate");
    k_h5(H5Pset_fapl_mpio(fapl, shared ? MPI_COMM_WORLD : MPI_COMM_SELF, cfg.info),
       "H5Pset_fapl_mpio");
    if (create) {
        h->file = k_h5(H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "H5Fcreate");
        hid_t space = k_h5(H5Screate_simple(1, &cfg.elems, NULL), "H5Screate_simple");
        hid_t dcpl = k_h5(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
        /* No fill pass: the benchmark writes every byte itself. */
        k_h5(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), "H5Pset_fill_time");
        h->dset = k_h5(H5Dcreate2(h->file, "data", H5T_NATIVE_UCHAR, space, H5P_DEFAULT, dcpl,
                                H5P_DEFAULT), "H5Dcreate2");
        H5Pclose(dcpl);
        H5Sclose(space);
    } else {
        h->file = k_h5(H5Fopen(path, H5F_ACC_RDONLY, fapl), "H5Fopen");
        h->dset = k_h5(H5Dopen2(h->file, "data", H5P_DEFAULT), "H5Dopen2 /data");
    }
    H5Pclose(fapl);
    *meta += 2;
    h->fspace = k_h5(H5Dget_space(h->dset), "H5Dget_space");
    h->dxpl = k_h5(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate");
    k_h5(H5Pset_dxpl_mpio(h->dxpl, cfg.collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT),
       "H5Pset_dxpl_mpio");
    h->mspace = -1;
}

static long long hdf5_xfer(handle *h, int write, unsigned char *buf, long long len,
                           long long off, long long *ops) {
    hsize_t start = (hsize_t)off, count = (hsize_t)len, dims;
    H5Sget_simple_extent_dims(h->fspace, &dims, NULL);
    if (start + count > dims) return 0; /* dataset too small: nothing to read there */
    if (h->mspace < 0) h->mspace = k_h5(H5Screate_simple(1, &count, NULL), "H5Screate_simple");
    k_h5(H5Sselect_hyperslab(h->fspace, H5S_SELECT_SET, &start, NULL, &count, NULL),
       "H5Sselect_hyperslab");
    herr_t rc = write ? H5Dwrite(h->dset, H5T_NATIVE_UCHAR, h->mspace, h->fspace, h->dxpl, buf)
                      : H5Dread(h->dset, H5T_NATIVE_UCHAR, h->mspace, h->fspace, h->dxpl, buf);
    (*ops)++;
    k_h5(rc, write ? "H5Dwrite" : "H5Dread");
    static int told; /* say once if HDF5 quietly did independent I/O */
    H5D_mpio_actual_io_mode_t mode;
    if (cfg.collective && !told && H5Pget_mpio_actual_io_mode(h->dxpl, &mode) >= 0 &&
        mode == H5D_MPIO_NO_COLLECTIVE) {
        uint32_t local = 0, global = 0;
        H5Pget_mpio_no_collective_cause(h->dxpl, &local, &global);
        k_note("HDF5 broke --collective into independent I/O (no-collective cause 0x%x)",
               (unsigned)global);
        told = 1;
    }
    return len;
}

static void hdf5_sync(handle *h, long long *meta) {
    k_h5(H5Fflush(h->file, H5F_SCOPE_GLOBAL), "H5Fflush");
    (*meta)++;
}

static void hdf5_close(handle *h, long long *meta) {
    if (h->mspace >= 0) H5Sclose(h->mspace);
    H5Sclose(h->fspace);
    H5Pclose(h->dxpl);
    k_h5(H5Dclose(h->dset), "H5Dclose");
    k_h5(H5Fclose(h->file), "H5Fclose");
    *meta += 2;
}

const backend backends[] = {
    {.name = "posix", .open = posix_open, .xfer = posix_xfer, .sync = posix_sync,
     .close = posix_close},
    {.name = "mpiio", .open = mpiio_open, .xfer = mpiio_xfer, .sync = mpiio_sync,
     .close = mpiio_close},
    {.name = "hdf5", .open = hdf5_open, .xfer = hdf5_xfer, .sync = hdf5_sync,
     .close = hdf5_close},
};
const int nbackends = sizeof backends / sizeof *backends;
