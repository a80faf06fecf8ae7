/* What the MPI-IO layer's C wrappers (mpiio.c) and Fortran wrappers
 * (mpiio_fortran.c) share: the recording path.  A wrapper converts its
 * arguments to C handles, times the real call and hands what it did to
 * these functions, so a Fortran call is counted exactly as a C call. */
#ifndef IOPILOT_MPIIO_H
#define IOPILOT_MPIIO_H

#include <mpi.h>

#include "core.h"

/* >0 inside a traced MPI-IO call: calls the library makes from inside it
 * (a Fortran binding calling the C function, one MPI-IO function calling
 * another) are not counted twice. */
extern IOP_TLS int iop_mpiio_depth;
/* Set once a file was opened and MPI was up (cleared at MPI_Finalize): only
 * then may a Fortran handle be converted (MPI_File_f2c before MPI_Init or
 * after MPI_Finalize is not safe in every library). */
extern int iop_mpiio_live;

/* The handle of a traced file, or NULL: pass the call straight through. */
static inline iop_open *iop_mpiio_traced(MPI_File fh) {
    if (!iop_active() || iop_mpiio_depth) return NULL;
    return iop_handle(IOP_LAYER_MPIIO, (uintptr_t)fh);
}

/* Where the data goes: an explicit offset, the individual or the shared
 * file pointer. */
enum { IOP_AT_EXPLICIT, IOP_AT_INDIVIDUAL, IOP_AT_SHARED };

/* The data calls, one table for the C wrappers (MPI_File_<low>) and the
 * Fortran ones (mpi_file_<low>_, MPI_FILE_<UP> ...).  Each file defines
 * RD, WR, COLL, NB (and, for C, the buffer and last argument types RBUF,
 * WBUF, STAT, REQ) and expands the tables with its own wrapper macro. */
/* Explicit offset: X(low, UP, op, counter, flags, BUFT, LASTT). */
#define IOP_MPIIO_AT_CALLS(X)                                           \
    X(read_at, READ_AT, RD, INDEP_READS, 0, RBUF, STAT)                 \
    X(write_at, WRITE_AT, WR, INDEP_WRITES, 0, WBUF, STAT)              \
    X(read_at_all, READ_AT_ALL, RD, COLL_READS, COLL, RBUF, STAT)       \
    X(write_at_all, WRITE_AT_ALL, WR, COLL_WRITES, COLL, WBUF, STAT)    \
    X(iread_at, IREAD_AT, RD, NB_READS, NB, RBUF, REQ)                  \
    X(iwrite_at, IWRITE_AT, WR, NB_WRITES, NB, WBUF, REQ)               \
    X(iread_at_all, IREAD_AT_ALL, RD, NB_READS, NB | COLL, RBUF, REQ)   \
    X(iwrite_at_all, IWRITE_AT_ALL, WR, NB_WRITES, NB | COLL, WBUF, REQ)

/* A file pointer: X(low, UP, at, op, counter, flags, BUFT, LASTT). */
#define IOP_MPIIO_PTR_CALLS(X)                                                          \
    X(read, READ, IOP_AT_INDIVIDUAL, RD, INDEP_READS, 0, RBUF, STAT)                    \
    X(write, WRITE, IOP_AT_INDIVIDUAL, WR, INDEP_WRITES, 0, WBUF, STAT)                 \
    X(read_all, READ_ALL, IOP_AT_INDIVIDUAL, RD, COLL_READS, COLL, RBUF, STAT)          \
    X(write_all, WRITE_ALL, IOP_AT_INDIVIDUAL, WR, COLL_WRITES, COLL, WBUF, STAT)       \
    X(iread, IREAD, IOP_AT_INDIVIDUAL, RD, NB_READS, NB, RBUF, REQ)                     \
    X(iwrite, IWRITE, IOP_AT_INDIVIDUAL, WR, NB_WRITES, NB, WBUF, REQ)                  \
    X(iread_all, IREAD_ALL, IOP_AT_INDIVIDUAL, RD, NB_READS, NB | COLL, RBUF, REQ)      \
    X(iwrite_all, IWRITE_ALL, IOP_AT_INDIVIDUAL, WR, NB_WRITES, NB | COLL, WBUF, REQ)   \
    X(read_shared, READ_SHARED, IOP_AT_SHARED, RD, INDEP_READS, 0, RBUF, STAT)          \
    X(write_shared, WRITE_SHARED, IOP_AT_SHARED, WR, INDEP_WRITES, 0, WBUF, STAT)       \
    X(read_ordered, READ_ORDERED, IOP_AT_SHARED, RD, COLL_READS, COLL, RBUF, STAT)      \
    X(write_ordered, WRITE_ORDERED, IOP_AT_SHARED, WR, COLL_WRITES, COLL, WBUF, STAT)   \
    X(iread_shared, IREAD_SHARED, IOP_AT_SHARED, RD, NB_READS, NB, RBUF, REQ)           \
    X(iwrite_shared, IWRITE_SHARED, IOP_AT_SHARED, WR, NB_WRITES, NB, WBUF, REQ)

/* Split collectives: begin at an explicit offset X(low, UP, op, BUFT), at
 * a file pointer X(low, UP, at, op, BUFT); end X(low, UP, op, counter, BUFT). */
#define IOP_MPIIO_BEGIN_AT_CALLS(X)                          \
    X(read_at_all_begin, READ_AT_ALL_BEGIN, RD, RBUF)        \
    X(write_at_all_begin, WRITE_AT_ALL_BEGIN, WR, WBUF)
#define IOP_MPIIO_BEGIN_CALLS(X)                                                 \
    X(read_all_begin, READ_ALL_BEGIN, IOP_AT_INDIVIDUAL, RD, RBUF)               \
    X(write_all_begin, WRITE_ALL_BEGIN, IOP_AT_INDIVIDUAL, WR, WBUF)             \
    X(read_ordered_begin, READ_ORDERED_BEGIN, IOP_AT_SHARED, RD, RBUF)           \
    X(write_ordered_begin, WRITE_ORDERED_BEGIN, IOP_AT_SHARED, WR, WBUF)
#define IOP_MPIIO_END_CALLS(X)                                          \
    X(read_at_all_end, READ_AT_ALL_END, RD, SPLIT_READS, RBUF)          \
    X(write_at_all_end, WRITE_AT_ALL_END, WR, SPLIT_WRITES, WBUF)       \
    X(read_all_end, READ_ALL_END, RD, SPLIT_READS, RBUF)                \
    X(write_all_end, WRITE_ALL_END, WR, SPLIT_WRITES, WBUF)             \
    X(read_ordered_end, READ_ORDERED_END, RD, SPLIT_READS, RBUF)        \
    X(write_ordered_end, WRITE_ORDERED_END, WR, SPLIT_WRITES, WBUF)

/* Before a data call: the byte offset of the individual file pointer
 * (``at`` IOP_AT_INDIVIDUAL), else -1. */
int64_t iop_mpiio_offset_before(const iop_open *o, MPI_File fh, int at);

/* After a data call: count it (``counter``) and record it.  ``off`` is the
 * explicit offset in etypes, ``pre`` what iop_mpiio_offset_before said. */
void iop_mpiio_data_done(iop_open *o, MPI_File fh, int op, int counter, unsigned flags, int at,
                         MPI_Offset off, int64_t pre, const void *buf, int count,
                         MPI_Datatype dt, int ret, double t1, double t2);
/* After the begin call of a split collective; after its end call. */
void iop_mpiio_split_begun(iop_open *o, MPI_File fh, int op, int at, MPI_Offset off,
                           int64_t pre, const void *buf, int count, MPI_Datatype dt, int ret,
                           double t1, double t2);
void iop_mpiio_split_ended(iop_open *o, MPI_File fh, int op, int counter, int ret, double t2);

/* The real open, however the caller has to make it: with ``info`` (the
 * caller's, or a copy with the settings' hints added), the new handle in
 * ``*fh``; returns the MPI error code. */
typedef int (*iop_mpiio_open_fn)(void *call, MPI_Info info, MPI_File *fh);
/* A traced open (the caller checked iop_active and the depth). */
int iop_mpiio_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh,
                   iop_mpiio_open_fn real, void *call);

/* Around a close (``key`` the handle before the call); around sync and
 * set_size (``op``, ``counter``); after set_view and set_info. */
void iop_mpiio_close_done(iop_stats *st, uintptr_t key, int ret, double t1, double t2);
void iop_mpiio_meta_done(iop_open *o, int op, int counter, unsigned flags, int ret, double t1,
                         double t2);
void iop_mpiio_setting_done(iop_open *o, int counter, MPI_Info info, int ret);

/* After MPI_Init: the rank.  Before MPI_Finalize: the trace written out. */
void iop_mpiio_init_done(int ret);
void iop_mpiio_finalizing(void);

#endif
