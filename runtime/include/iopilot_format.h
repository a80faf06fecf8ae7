/* iopilot trace format, version 2 (docs/trace-format.md).
 *
 * A trace is a directory.  Each traced process image writes files named
 * p<host>-<pid>-<n>.*:
 *
 *   .rec   per-operation records: one iop_file_header (written at start-up),
 *          then iop_record structs back to back (little endian, fixed size),
 *          appended as the per-thread buffers fill.  NumPy reads it with one
 *          frombuffer().
 *   .names the names of the files the flushed records refer to.
 *   .json  process metadata, the name table and the counters, written when
 *          the image ends.
 *
 * The counter list below is the single source of truth: the C side
 * expands it into an enum and a name table, and the name table is written
 * into every .json so the reader maps counters by name, not by position.
 */
#ifndef IOPILOT_FORMAT_H
#define IOPILOT_FORMAT_H

#include <stdint.h>

#define IOP_FORMAT_VERSION 2
#define IOP_MAGIC 0x31505249504f4921ULL /* "!IOPIRP1" read as little endian */

/* Layers: the module that saw the operation. */
#define IOP_LAYERS(X) \
    X(POSIX)          \
    X(STDIO)          \
    X(MPIIO)          \
    X(H5F)            \
    X(H5D)

enum iop_layer {
#define IOP_X(name) IOP_LAYER_##name,
    IOP_LAYERS(IOP_X)
#undef IOP_X
    IOP_NLAYERS
};

/* Operations.  READ and WRITE move data; the others are metadata. */
#define IOP_OPS(X) \
    X(READ)        \
    X(WRITE)       \
    X(OPEN)        \
    X(CLOSE)       \
    X(SEEK)        \
    X(SYNC)        \
    X(STAT)        \
    X(TRUNCATE)    \
    X(MMAP)        \
    X(FLUSH)       \
    X(UNLINK)      \
    X(RENAME)      \
    X(MKDIR)

enum iop_op {
#define IOP_X(name) IOP_OP_##name,
    IOP_OPS(IOP_X)
#undef IOP_X
    IOP_NOPS
};

/* Upper edges of Darshan's access-size bins, each inclusive (SIZE_*_0_100
 * holds 0..100 bytes, ...); the last bin, 1G_PLUS, has none.  The Python side
 * has the same list (iopilot.model.SIZE_BIN_UPPER); a test keeps them equal. */
#define IOP_SIZE_BIN_UPPER {100, 1024, 10240, 102400, 1048576, 4194304, 10485760, \
                            104857600, 1073741824}

/* Darshan's H5D access tuples: besides the size (ACCESSk_ACCESS), the
 * length (count x block) and stride of the hyperslab selection in each of
 * five dimensions, D1 = dimension 4 ... D5 = dimension 0, as Darshan fills
 * them.  The ten counters of one tuple are consecutive. */
#define IOP_H5D_ACCESS_SHAPE(X, k)                                             \
    X(ACCESS##k##_LENGTH_D1) X(ACCESS##k##_LENGTH_D2) X(ACCESS##k##_LENGTH_D3) \
    X(ACCESS##k##_LENGTH_D4) X(ACCESS##k##_LENGTH_D5) X(ACCESS##k##_STRIDE_D1) \
    X(ACCESS##k##_STRIDE_D2) X(ACCESS##k##_STRIDE_D3) X(ACCESS##k##_STRIDE_D4) \
    X(ACCESS##k##_STRIDE_D5)

/* Integer counters per (layer, file, process).  Names are Darshan's without
 * the layer prefix; the reader adds POSIX_, MPIIO_, ... and, for MPI-IO and
 * HDF5, Darshan's _AGG_ in the size bins.  Only non-zero values are written. */
#define IOP_COUNTERS(X)                                                     \
    X(OPENS) X(FILENOS) X(FDOPENS) X(DUPS) X(READS) X(WRITES) X(SEEKS) X(STATS)         \
    X(MMAPS) X(FSYNCS) X(FDSYNCS) X(FLUSHES) X(RENAME_SOURCES)              \
    X(RENAME_TARGETS) X(BYTES_READ) X(BYTES_WRITTEN) X(MAX_BYTE_READ)       \
    X(MAX_BYTE_WRITTEN) X(CONSEC_READS) X(CONSEC_WRITES) X(SEQ_READS)       \
    X(SEQ_WRITES) X(RW_SWITCHES) X(MEM_NOT_ALIGNED) X(MEM_ALIGNMENT)        \
    X(MAX_READ_TIME_SIZE) X(MAX_WRITE_TIME_SIZE)                            \
    X(FILE_NOT_ALIGNED) X(FILE_ALIGNMENT)                                   \
    X(SIZE_READ_0_100) X(SIZE_READ_100_1K) X(SIZE_READ_1K_10K)              \
    X(SIZE_READ_10K_100K) X(SIZE_READ_100K_1M) X(SIZE_READ_1M_4M)           \
    X(SIZE_READ_4M_10M) X(SIZE_READ_10M_100M) X(SIZE_READ_100M_1G)          \
    X(SIZE_READ_1G_PLUS)                                                    \
    X(SIZE_WRITE_0_100) X(SIZE_WRITE_100_1K) X(SIZE_WRITE_1K_10K)           \
    X(SIZE_WRITE_10K_100K) X(SIZE_WRITE_100K_1M) X(SIZE_WRITE_1M_4M)        \
    X(SIZE_WRITE_4M_10M) X(SIZE_WRITE_10M_100M) X(SIZE_WRITE_100M_1G)       \
    X(SIZE_WRITE_1G_PLUS)                                                   \
    X(INDEP_OPENS) X(COLL_OPENS) X(INDEP_READS) X(INDEP_WRITES)             \
    X(COLL_READS) X(COLL_WRITES) X(SPLIT_READS) X(SPLIT_WRITES)             \
    X(NB_READS) X(NB_WRITES) X(SYNCS) X(HINTS) X(VIEWS) X(MODE)             \
    X(CREATES) X(USE_MPIIO) X(USE_MPIIO_COLLECTIVE) X(DATASPACE_NDIMS)       \
    X(DATASPACE_NPOINTS) X(DATATYPE_SIZE) X(CHUNK_SIZE_D1) X(CHUNK_SIZE_D2) \
    X(CHUNK_SIZE_D3) X(CHUNK_SIZE_D4) X(CHUNK_SIZE_D5)                      \
    X(REGULAR_HYPERSLAB_SELECTS) X(IRREGULAR_HYPERSLAB_SELECTS)             \
    X(POINT_SELECTS) X(ALIGNMENT_THRESHOLD) X(ALIGNMENT)                    \
    X(ACCESS1_ACCESS) X(ACCESS2_ACCESS) X(ACCESS3_ACCESS) X(ACCESS4_ACCESS) \
    X(ACCESS1_COUNT) X(ACCESS2_COUNT) X(ACCESS3_COUNT) X(ACCESS4_COUNT)     \
    X(STRIDE1_STRIDE) X(STRIDE2_STRIDE) X(STRIDE3_STRIDE) X(STRIDE4_STRIDE) \
    X(STRIDE1_COUNT) X(STRIDE2_COUNT) X(STRIDE3_COUNT) X(STRIDE4_COUNT)     \
    X(USE_DEPRECATED)                                                       \
    IOP_H5D_ACCESS_SHAPE(X, 1) IOP_H5D_ACCESS_SHAPE(X, 2)                   \
    IOP_H5D_ACCESS_SHAPE(X, 3) IOP_H5D_ACCESS_SHAPE(X, 4)

enum iop_counter {
#define IOP_X(name) IOP_C_##name,
    IOP_COUNTERS(IOP_X)
#undef IOP_X
    IOP_NCOUNTERS
};

/* Floating-point counters (seconds; timestamps relative to the process's
 * t0 in the .json, which is an absolute epoch time). */
#define IOP_FCOUNTERS(X)                                                    \
    X(F_OPEN_START_TIMESTAMP) X(F_READ_START_TIMESTAMP)                     \
    X(F_WRITE_START_TIMESTAMP) X(F_CLOSE_START_TIMESTAMP)                   \
    X(F_OPEN_END_TIMESTAMP) X(F_READ_END_TIMESTAMP)                         \
    X(F_WRITE_END_TIMESTAMP) X(F_CLOSE_END_TIMESTAMP) X(F_READ_TIME)        \
    X(F_WRITE_TIME) X(F_META_TIME) X(F_MAX_READ_TIME) X(F_MAX_WRITE_TIME)

enum iop_fcounter {
#define IOP_X(name) IOP_F_##name,
    IOP_FCOUNTERS(IOP_X)
#undef IOP_X
    IOP_NFCOUNTERS
};

struct iop_file_header {
    uint64_t magic;        /* IOP_MAGIC */
    uint32_t version;      /* IOP_FORMAT_VERSION */
    uint32_t record_size;  /* sizeof(struct iop_record) */
    int64_t rank;          /* -1: not known at start-up */
    int64_t pid;
    double t0;             /* epoch seconds of the process's time zero */
    int64_t ppid;
    int64_t image;         /* n of the file stem p<host>-<pid>-<n> */
    uint64_t reserved;
};

struct iop_record {
    double start;          /* seconds since t0 */
    double end;
    int64_t offset;        /* -1 when not applicable */
    int64_t length;        /* bytes moved (the return value for data ops) */
    uint64_t file_id;      /* key into the name table */
    uint32_t thread;       /* 0 = first thread seen, 1 = next, ... */
    uint8_t layer;         /* enum iop_layer */
    uint8_t op;            /* enum iop_op */
    uint16_t flags;        /* IOP_FLAG_* */
};

#define IOP_FLAG_COLLECTIVE 0x1  /* MPI-IO collective / HDF5 collective transfer */
#define IOP_FLAG_NONBLOCKING 0x2
#define IOP_FLAG_ERROR 0x4       /* the call failed (returned -1 / error) */

#endif
