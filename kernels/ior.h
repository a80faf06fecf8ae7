/* The IOR-style kernel's backends: one table of functions per API (POSIX,
 * MPI-IO, HDF5), as IOR's.  ior.c chooses one by name and drives it; a new
 * API is a new set of functions and a row in ior_backends.c. */
#ifndef IOPILOT_KERNEL_IOR_H
#define IOPILOT_KERNEL_IOR_H

#include "common.h"

#include <hdf5.h>

/* Options every backend may look at. */
typedef struct {
    int collective, odirect;
    MPI_Info info;
    hsize_t elems; /* HDF5 dataset size when creating */
} ior_options;
extern ior_options cfg;

/* One open file of any API. */
typedef struct {
    int fd;
    MPI_File fh;
    hid_t file, dset, fspace, mspace, dxpl;
} handle;

typedef struct {
    const char *name;
    void (*open)(handle *h, const char *path, int create, int shared, long long *meta);
    /* Returns the bytes the call(s) really moved; counts the calls in *ops. */
    long long (*xfer)(handle *h, int write, unsigned char *buf, long long len, long long off,
                      long long *ops);
    void (*sync)(handle *h, long long *meta);
    void (*close)(handle *h, long long *meta);
} backend;

extern const backend backends[];
extern const int nbackends;
enum { IOR_POSIX, IOR_MPIIO, IOR_HDF5 }; /* rows of backends[] */

#endif
