/* iopilot trace format, version 3 (docs/trace-format.md).
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
 * The names (layers, operations, size bins, counters) are generated from
 * src/iopilot/vocabulary.py into iopilot_vocab.h: the C side expands
 * them into enums and name tables, and the name tables are written into
 * every .json so the reader maps counters by name, not by position.
 */
#ifndef IOPILOT_FORMAT_H
#define IOPILOT_FORMAT_H

#include <stdint.h>

#include "iopilot_vocab.h"

#define IOP_FORMAT_VERSION 3
#define IOP_MAGIC 0x31505249504f4921ULL /* "!IOPIRP1" read as little endian */

/* Layers: the module that saw the operation. */
enum iop_layer {
#define IOP_X(name) IOP_LAYER_##name,
    IOP_LAYERS(IOP_X)
#undef IOP_X
    IOP_NLAYERS
};

/* Operations.  READ and WRITE move data; the others are metadata. */
enum iop_op {
#define IOP_X(name) IOP_OP_##name,
    IOP_OPS(IOP_X)
#undef IOP_X
    IOP_NOPS
};

/* Integer counters per (layer, file, process).  Names are Darshan's without
 * the layer prefix; the reader adds POSIX_, MPIIO_, ... and, for MPI-IO and
 * HDF5, Darshan's _AGG_ in the size bins.  Only non-zero values are written. */
enum iop_counter {
#define IOP_X(name) IOP_C_##name,
    IOP_COUNTERS(IOP_X)
#undef IOP_X
    IOP_NCOUNTERS
};

/* Floating-point counters (seconds; timestamps relative to the process's
 * t0 in the .json, which is an absolute epoch time). */
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
    uint32_t site;         /* call site: its id in the .json's "sites", 0 unknown */
    uint32_t reserved;     /* 0 */
};

/* IOP_FLAG_* (iopilot_vocab.h): COLLECTIVE, an MPI-IO collective or HDF5
 * collective transfer; NONBLOCKING; ERROR, the call failed.  Background I/O
 * (write-behind, IOPILOT_ASYNC): the program's call that queued an operation
 * rather than made it is DEFERRED (it returned at ``end``).  The background
 * thread then writes two records back to back: QUEUED (start = queued by the
 * call, end = issued by the thread) and BACKGROUND (start = issued, end =
 * completed).  They describe the program's own call once more: readers keep
 * them apart from the program's records. */

#endif
