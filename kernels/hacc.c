/* HACC-IO: each rank writes its particles, 38 bytes each: xx yy zz vx vy vz
 * phi (float32), pid (int64), mask (uint16), at the offset given by the
 * prefix sum of the particle counts of the ranks before it (MPI_Exscan).
 *
 * Layouts (--layout):
 *   mpiio          raw MPI-IO: variable v is one contiguous region of
 *                  total * size(v) bytes at v_offset = total * (sizes of the
 *                  variables before v); a rank writes its block at
 *                  v_offset + prefix * size(v): 9 writes per rank.
 *   hdf5-datasets  one 1-D dataset per variable, 9 H5Dwrite calls per rank.
 *   hdf5-compound  one 1-D dataset "particles" of a packed 38-byte compound
 *                  type; memory and file types are the same (no conversion,
 *                  so HDF5 1.10 can still do collective I/O).
 *   hdf5-multi     the 9 datasets in one H5Dwrite_multi call (HDF5 >= 1.14).
 *                  With an older HDF5 the kernel says so and exits 4.
 * --fpp: one file per rank, PATH.<rank>, holding only that rank's particles.
 * --vary: rank r has (r + 1) * N particles, so the prefix sums are uneven.
 * Values are a function of (global particle index, variable); pid is the
 * global index itself.  Raw MPI-IO files hold native (little-endian) bytes.
 *
 * --read reads the file back after writing it; --read-only reads and checks
 * a file an earlier run wrote (same ranks, --particles, --vary, --fpp and
 * --layout), without writing.  Every value of every variable is compared
 * with the pattern; the first wrong one stops the job with exit status 3 and
 * names the file, the variable, the particle, its element in the dataset
 * and, for raw files, its byte offset.
 *
 * One k_iteration: open_s = file create (+ dataset creates) and/or the
 * (re)open; write_s / read_s = the data calls; close_s = all closes, each the
 * slowest rank's.  The check runs after the read pass, outside read_s, and
 * is the extra field check_s (slowest rank; only when reading).  meta_ops
 * counts file creates/opens and dataset creates/opens. */
#include "common.h"

#include <hdf5.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NVARS 9
#define PARTICLE_BYTES 38

static const char *const var_name[NVARS] = {"xx", "yy", "zz", "vx", "vy", "vz", "phi", "pid",
                                            "mask"};
static const size_t var_size[NVARS] = {4, 4, 4, 4, 4, 4, 4, 8, 2};
static const size_t var_off[NVARS] = {0, 4, 8, 12, 16, 20, 24, 28, 36}; /* in the packed struct */

enum layout { MPIIO, DATASETS, COMPOUND, MULTI };
static const char *const layout_name[] = {"mpiio", "hdf5-datasets", "hdf5-compound", "hdf5-multi"};

static const char usage[] =
    "usage: hacc [--layout mpiio|hdf5-datasets|hdf5-compound|hdf5-multi] [--file PATH]\n"
    "            [--particles N] [--vary] [--collective] [--fpp] [--read | --read-only]\n"
    "  writes N particles per rank (38 bytes each) to PATH (PATH.<rank> with --fpp)\n";

static struct {
    enum layout layout;
    int collective, fpp;
    long long count, prefix, total;   /* this rank's particles; file position and size */
    long long first;                  /* global index of this rank's first particle */
    MPI_Comm comm;                    /* the ranks sharing the file */
    char path[4096];
} cfg;


static void check_options(int argc, char **argv) {
    static const char *const valued[] = {"--layout", "--file", "--particles", NULL};
    static const char *const flags[] = {"--vary", "--collective", "--fpp", "--read",
                                        "--read-only", NULL};
    k_check_options(argc, argv, valued, flags, usage);
}

/* Deterministic 32 bits per (global index, variable). */
static uint32_t hacc_hash(long long g, int var) {
    uint64_t x = (uint64_t)g * 0x9E3779B97F4A7C15ULL + (uint64_t)(var + 1) * 0xBF58476D1CE4E5B9ULL +
                 0x48414343ULL;
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ULL;
    x ^= x >> 32;
    return (uint32_t)x;
}

/* The expected bytes of variable v of global particle g. */
static void expected(long long g, int v, void *out) {
    if (v < 7) {
        float f = (float)(hacc_hash(g, v) >> 8) / 256.0f; /* exact in float32 */
        memcpy(out, &f, 4);
    } else if (v == 7) {
        int64_t pid = g;
        memcpy(out, &pid, 8);
    } else {
        uint16_t mask = (uint16_t)hacc_hash(g, v);
        memcpy(out, &mask, 2);
    }
}

static hid_t mem_type(int v) {
    return v < 7 ? H5T_NATIVE_FLOAT : v == 7 ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT16;
}
static hid_t file_type(int v) {
    return v < 7 ? H5T_IEEE_F32LE : v == 7 ? H5T_STD_I64LE : H5T_STD_U16LE;
}
static MPI_Datatype mpi_type(int v) {
    return v < 7 ? MPI_FLOAT : v == 7 ? MPI_INT64_T : MPI_UINT16_T;
}

static const char *what(int writing) { return writing ? "write" : "read"; }

/* One successful data call that moved `bytes`. */
static void account(k_iter *it, int writing, long long bytes) {
    if (writing) it->write_ops++, it->bytes_written += bytes;
    else it->read_ops++, it->bytes_read += bytes;
}

/* Write (or read into) col[v], one column per variable, with raw MPI-IO. */
static void mpiio_pass(int writing, void **col, k_iter *it) {
    MPI_File fh;
    int amode = writing ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY;
    double t0 = k_now();
    if (MPI_File_open(cfg.comm, cfg.path, amode, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
        k_die("MPI_File_open %s failed", cfg.path);
    it->meta_ops++;
    double t1 = k_now();
    long long v_offset = 0;
    for (int v = 0; v < NVARS; v++) {
        MPI_Offset off = (MPI_Offset)(v_offset + cfg.prefix * (long long)var_size[v]);
        MPI_Status st;
        MPI_Datatype type = mpi_type(v);
        int rc, moved = 0, n = (int)cfg.count;
        if (writing)
            rc = cfg.collective ? MPI_File_write_at_all(fh, off, col[v], n, type, &st)
                                : MPI_File_write_at(fh, off, col[v], n, type, &st);
        else
            rc = cfg.collective ? MPI_File_read_at_all(fh, off, col[v], n, type, &st)
                                : MPI_File_read_at(fh, off, col[v], n, type, &st);
        if (rc != MPI_SUCCESS) k_die("MPI-IO %s of %s failed", what(writing), var_name[v]);
        /* Count what the call reports it moved, and insist it is all. */
        MPI_Get_count(&st, MPI_BYTE, &moved);
        if (moved != (long long)n * (long long)var_size[v])
            k_die("short %s of %s: %d bytes", what(writing), var_name[v], moved);
        account(it, writing, moved);
        v_offset += cfg.total * (long long)var_size[v];
    }
    double t2 = k_now();
    MPI_File_close(&fh);
    double t3 = k_now();
    it->open_s += t1 - t0;
    *(writing ? &it->write_s : &it->read_s) += t2 - t1;
    it->close_s += t3 - t2;
}

/* The same with HDF5: col[v] per variable, or packed (count x 38 bytes) for COMPOUND. */
static void hdf5_pass(int writing, void **col, void *packed, k_iter *it) {
    hid_t fapl = k_h5(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate");
    k_h5(H5Pset_fapl_mpio(fapl, cfg.comm, MPI_INFO_NULL), "H5Pset_fapl_mpio");
    hid_t dxpl = k_h5(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate");
    k_h5(H5Pset_dxpl_mpio(dxpl, cfg.collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT),
       "H5Pset_dxpl_mpio");
    hsize_t dims = (hsize_t)cfg.total, start = (hsize_t)cfg.prefix, count = (hsize_t)cfg.count;
    hid_t filespace = k_h5(H5Screate_simple(1, &dims, NULL), "H5Screate_simple");
    k_h5(H5Sselect_hyperslab(filespace, H5S_SELECT_SET, &start, NULL, &count, NULL), "select");
    hid_t memspace = k_h5(H5Screate_simple(1, &count, NULL), "H5Screate_simple");
    /* The packed struct, with explicit offsets: 38 bytes, no padding. */
    hid_t compound = k_h5(H5Tcreate(H5T_COMPOUND, PARTICLE_BYTES), "H5Tcreate");
    for (int v = 0; v < NVARS; v++)
        k_h5(H5Tinsert(compound, var_name[v], var_off[v], mem_type(v)), "H5Tinsert");
    int nsets = cfg.layout == COMPOUND ? 1 : NVARS;
    hid_t dset[NVARS];

    double t0 = k_now();
    hid_t file = writing ? H5Fcreate(cfg.path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)
                         : H5Fopen(cfg.path, H5F_ACC_RDONLY, fapl);
    k_h5(file, writing ? "H5Fcreate" : "H5Fopen");
    it->meta_ops++;
    for (int d = 0; d < nsets; d++) {
        const char *name = cfg.layout == COMPOUND ? "particles" : var_name[d];
        hid_t ftype = cfg.layout == COMPOUND ? compound : file_type(d);
        dset[d] = writing ? H5Dcreate2(file, name, ftype, filespace, H5P_DEFAULT, H5P_DEFAULT,
                                       H5P_DEFAULT)
                          : H5Dopen2(file, name, H5P_DEFAULT);
        k_h5(dset[d], writing ? "H5Dcreate2" : "H5Dopen2");
        it->meta_ops++;
    }
    double t1 = k_now();
    if (cfg.layout == COMPOUND) {
        k_h5(writing ? H5Dwrite(dset[0], compound, memspace, filespace, dxpl, packed)
                   : H5Dread(dset[0], compound, memspace, filespace, dxpl, packed),
           writing ? "H5Dwrite" : "H5Dread");
        account(it, writing, cfg.count * PARTICLE_BYTES);
    } else if (cfg.layout == DATASETS) {
        for (int v = 0; v < NVARS; v++) {
            k_h5(writing ? H5Dwrite(dset[v], mem_type(v), memspace, filespace, dxpl, col[v])
                       : H5Dread(dset[v], mem_type(v), memspace, filespace, dxpl, col[v]),
               writing ? "H5Dwrite" : "H5Dread");
            account(it, writing, cfg.count * (long long)var_size[v]);
        }
    } else {
#if H5_VERSION_GE(1, 14, 0)
        /* One call moves all 9 variables: counted as one operation. */
        hid_t mtypes[NVARS], mspaces[NVARS], fspaces[NVARS];
        for (int v = 0; v < NVARS; v++)
            mtypes[v] = mem_type(v), mspaces[v] = memspace, fspaces[v] = filespace;
        if (writing)
            k_h5(H5Dwrite_multi(NVARS, dset, mtypes, mspaces, fspaces, dxpl, (const void **)col),
               "H5Dwrite_multi");
        else
            k_h5(H5Dread_multi(NVARS, dset, mtypes, mspaces, fspaces, dxpl, col), "H5Dread_multi");
        account(it, writing, cfg.count * PARTICLE_BYTES);
#endif
    }
    double t2 = k_now();
    for (int d = 0; d < nsets; d++) k_h5(H5Dclose(dset[d]), "H5Dclose");
    k_h5(H5Fclose(file), "H5Fclose");
    double t3 = k_now();
    it->open_s += t1 - t0;
    *(writing ? &it->write_s : &it->read_s) += t2 - t1;
    it->close_s += t3 - t2;
    H5Tclose(compound);
    H5Sclose(memspace);
    H5Sclose(filespace);
    H5Pclose(dxpl);
    H5Pclose(fapl);
}

static void show(int v, const unsigned char *bytes, char *out, size_t cap) {
    if (v < 7) {
        float f;
        memcpy(&f, bytes, 4);
        snprintf(out, cap, "%.9g", (double)f);
    } else if (v == 7) {
        int64_t x;
        memcpy(&x, bytes, 8);
        snprintf(out, cap, "%lld", (long long)x);
    } else {
        uint16_t x;
        memcpy(&x, bytes, 2);
        snprintf(out, cap, "%u", (unsigned)x);
    }
}

/* Stop with status 3, naming file, variable, particle and where it lies. */
static void report(int v, long long i, const unsigned char *got, const unsigned char *want) {
    char g[32], w[32], where[96];
    long long elem = cfg.prefix + i; /* element of the dataset (or column) in this file */
    show(v, got, g, sizeof g);
    show(v, want, w, sizeof w);
    if (cfg.layout == MPIIO) {
        long long at = 0;
        for (int u = 0; u < v; u++) at += cfg.total * (long long)var_size[u];
        snprintf(where, sizeof where, "element %lld, byte offset %lld", elem,
                 at + elem * (long long)var_size[v]);
    } else if (cfg.layout == COMPOUND) {
        snprintf(where, sizeof where, "particles[%lld].%s", elem, var_name[v]);
    } else {
        snprintf(where, sizeof where, "/%s[%lld]", var_name[v], elem);
    }
    k_verify_failed("%s: %s of particle %lld (%s) = %s, expected %s", cfg.path, var_name[v],
                    cfg.first + i, where, g, w);
}

int main(int argc, char **argv) {
    k_init(&argc, &argv, "hacc");
    check_options(argc, argv);
    const char *layout = k_opt_str(argc, argv, "--layout", "mpiio");
    long long n = k_opt_int(argc, argv, "--particles", 16384);
    int vary = k_opt_flag(argc, argv, "--vary"), read_back = k_opt_flag(argc, argv, "--read");
    int read_only = k_opt_flag(argc, argv, "--read-only");
    cfg.collective = k_opt_flag(argc, argv, "--collective");
    cfg.fpp = k_opt_flag(argc, argv, "--fpp");
    int found = 0;
    for (int l = MPIIO; l <= MULTI; l++)
        if (!strcmp(layout, layout_name[l])) cfg.layout = (enum layout)l, found = 1;
    if (!found) k_usage_die(usage, "unknown --layout '%s'", layout);
    if (n < 1) k_die("--particles must be >= 1");
    if (read_back && read_only) k_usage_die(usage, "--read and --read-only: give one");
    read_back |= read_only;
    const char *dflt = cfg.layout == MPIIO ? "hacc.dat" : "hacc.h5";
    const char *path = k_opt_str(argc, argv, "--file", dflt);

    k_param_str("layout", layout);
    k_param_str("file", path);
    k_param_int("particles", n);
    k_param_int("vary", vary);
    k_param_int("collective", cfg.collective);
    k_param_int("fpp", cfg.fpp);
    k_param_int("read", read_back);
    k_param_int("read_only", read_only);

#if !H5_VERSION_GE(1, 14, 0)
    if (cfg.layout == MULTI) {
        /* Say so rather than fake it with 9 separate writes. */
        unsigned maj, min, rel;
        H5get_libversion(&maj, &min, &rel);
        char msg[256];
        snprintf(msg, sizeof msg,
                 "hdf5-multi: the multi-dataset write (H5Dwrite_multi) is not available in "
                 "HDF5 %u.%u.%u; it needs HDF5 >= 1.14", maj, min, rel);
        if (!k_rank) fprintf(stderr, "hacc: %s\n", msg);
        k_note("%s", msg);
        k_finish();
        return 4;
    }
#endif

    long long count = vary ? (k_rank + 1) * n : n, prefix = 0, total = 0;
    /* MPI-IO counts and MPI_Get_count's bytes are ints. */
    if (count > INT_MAX / 8) k_die("at most %d particles per rank", INT_MAX / 8);
    MPI_Exscan(&count, &prefix, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (k_rank == 0) prefix = 0; /* MPI_Exscan leaves rank 0's result undefined */
    MPI_Allreduce(&count, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    cfg.count = count;
    cfg.first = prefix;
    cfg.comm = cfg.fpp ? MPI_COMM_SELF : MPI_COMM_WORLD;
    cfg.prefix = cfg.fpp ? 0 : prefix;
    cfg.total = cfg.fpp ? count : total;
    if (cfg.fpp) snprintf(cfg.path, sizeof cfg.path, "%s.%d", path, k_rank);
    else snprintf(cfg.path, sizeof cfg.path, "%s", path);
    k_param_int("total_particles", total);
    k_note("%s, %s: %lld particles x %d bytes in all", cfg.fpp ? "file per process" : "shared file",
           layout, total, PARTICLE_BYTES);

    /* Columns (and the packed copy) are filled before any timing. */
    void *col[NVARS];
    unsigned char *packed = malloc((size_t)count * PARTICLE_BYTES);
    if (!packed) k_die("out of memory");
    for (int v = 0; v < NVARS; v++) {
        if (!(col[v] = malloc((size_t)count * var_size[v]))) k_die("out of memory");
        for (long long i = 0; i < count; i++) {
            unsigned char *dst = (unsigned char *)col[v] + i * var_size[v];
            expected(prefix + i, v, dst);
            memcpy(packed + i * PARTICLE_BYTES + var_off[v], dst, var_size[v]);
        }
    }
    /* A raw file is not truncated by MPI_File_open: remove an old, longer one. */
    if (!read_only && cfg.layout == MPIIO && (cfg.fpp || k_rank == 0))
        MPI_File_delete(cfg.path, MPI_INFO_NULL);

    k_iter it = {.verified = -1};
    k_barrier();
    if (read_only) k_note("read-only: checks %s as an earlier run wrote it", path);
    else if (cfg.layout == MPIIO) mpiio_pass(1, col, &it);
    else hdf5_pass(1, col, packed, &it);

    if (read_back) {
        for (int v = 0; v < NVARS; v++) memset(col[v], 0, (size_t)count * var_size[v]);
        memset(packed, 0, (size_t)count * PARTICLE_BYTES);
        k_barrier(); /* every rank's data is written and closed */
        if (cfg.layout == MPIIO) mpiio_pass(0, col, &it);
        else hdf5_pass(0, col, packed, &it);
        double c0 = k_now();
        for (int v = 0; v < NVARS; v++)
            for (long long i = 0; i < count; i++) {
                unsigned char want[8];
                const unsigned char *got = cfg.layout == COMPOUND
                                               ? packed + i * PARTICLE_BYTES + var_off[v]
                                               : (unsigned char *)col[v] + i * var_size[v];
                expected(prefix + i, v, want);
                if (memcmp(got, want, var_size[v])) report(v, i, got, want);
            }
        it.verified = 1;
        k_extra_time("check_s", k_now() - c0);
    }
    k_iteration(&it);

    for (int v = 0; v < NVARS; v++) free(col[v]);
    free(packed);
    return k_finish();
}
