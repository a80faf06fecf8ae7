/* IOR-style bandwidth kernel: every rank writes, then reads back and checks,
 * `segments` blocks of `block` bytes in transfers of `transfer` bytes,
 * through POSIX, MPI-IO or HDF5 (one table of functions per API, as IOR's
 * backends).
 *
 * Layout (IOR's segmented layout).  In one shared file, transfer k of
 * segment s of rank r sits at
 *     (s * ranks + r) * block + k * transfer;
 * with --fpp rank r has its own file PATH.<r as %08d> and the same transfer
 * sits at s * block + k * transfer.  HDF5 holds the bytes in one 1-D
 * dataset "/data" of H5T_NATIVE_UCHAR (ranks * segments * block elements,
 * or segments * block with --fpp), one hyperslab per transfer.
 *
 * Data.  A byte's value is k_pattern(logical offset, seed) where the logical
 * offset is its offset in the shared-file layout above (for a shared file
 * that is the file or dataset offset; for --fpp it still includes the rank)
 * and seed is the iteration number.  A read-only run (--read without
 * --write) expects seed 0: the file of a one-iteration --write --keep run.
 * --reorder reads rank (r + 1) mod ranks's data, as IOR -C.
 *
 * Timing.  Each iteration: [remove old file] open-write(-fsync)-close, then
 * open-read-verify-close, with barriers between phases.  open_s and close_s
 * add the write and the read phase's open (close); write_s and read_s time
 * the transfer calls (and the fsync, as IOR -e) but not the generating or
 * checking of the pattern.  Extra fields write_total_s and read_total_s span
 * open to close of each phase, the time IOR divides the bytes by.  All are
 * the slowest rank's.  meta_ops counts open, close and sync calls (HDF5: file
 * and dataset create/open/close, H5Fflush).  Files are removed after each
 * iteration unless --keep; a read-only run never removes anything. */
#define _GNU_SOURCE 1 /* O_DIRECT; before any system header */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "usage: ior [--api posix|mpiio|hdf5] [--block SIZE] [--transfer SIZE] [--segments N]\n"
    "           [--fpp] [--collective] [--fsync] [--odirect] [--write] [--read] [--reorder]\n"
    "           [--iterations N] [--file PATH] [--keep] [--hint KEY=VALUE]...\n"
    "  defaults: posix, block 1m, transfer 256k, 1 segment, one shared file\n"
    "  (iopilot-ior.dat), write and read, 1 iteration, file removed at the end\n";

/* Options every backend may look at. */
static struct {
    int collective, odirect;
    MPI_Info info;
    hsize_t elems; /* HDF5 dataset size when creating */
} cfg;

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

static void mpi_check(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len;
    MPI_Error_string(rc, msg, &len);
    k_die("%s: %s", what, msg);
}

static void mpiio_open(handle *h, const char *path, int create, int shared, long long *meta) {
    int mode = create ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY;
    char what[64 + 4096];
    snprintf(what, sizeof what, "MPI_File_open %s", path);
    mpi_check(MPI_File_open(shared ? MPI_COMM_WORLD : MPI_COMM_SELF, path, mode, cfg.info, &h->fh),
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
    mpi_check(rc, write ? "MPI_File_write_at" : "MPI_File_read_at");
    MPI_Get_count(&st, MPI_BYTE, &count);
    return count;
}

static void mpiio_sync(handle *h, long long *meta) {
    mpi_check(MPI_File_sync(h->fh), "MPI_File_sync");
    (*meta)++;
}

static void mpiio_close(handle *h, long long *meta) {
    mpi_check(MPI_File_close(&h->fh), "MPI_File_close");
    (*meta)++;
}

/* ---- HDF5 ----------------------------------------------------------------- */

static hid_t h5(hid_t rc, const char *what) {
    if (rc < 0) k_die("%s failed", what);
    return rc;
}

static void hdf5_open(handle *h, const char *path, int create, int shared, long long *meta) {
    hid_t fapl = h5(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate");
    h5(H5Pset_fapl_mpio(fapl, shared ? MPI_COMM_WORLD : MPI_COMM_SELF, cfg.info),
       "H5Pset_fapl_mpio");
    if (create) {
        h->file = h5(H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "H5Fcreate");
        hid_t space = h5(H5Screate_simple(1, &cfg.elems, NULL), "H5Screate_simple");
        hid_t dcpl = h5(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
        /* No fill pass: the benchmark writes every byte itself. */
        h5(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), "H5Pset_fill_time");
        h->dset = h5(H5Dcreate2(h->file, "data", H5T_NATIVE_UCHAR, space, H5P_DEFAULT, dcpl,
                                H5P_DEFAULT), "H5Dcreate2");
        H5Pclose(dcpl);
        H5Sclose(space);
    } else {
        h->file = h5(H5Fopen(path, H5F_ACC_RDONLY, fapl), "H5Fopen");
        h->dset = h5(H5Dopen2(h->file, "data", H5P_DEFAULT), "H5Dopen2 /data");
    }
    H5Pclose(fapl);
    *meta += 2;
    h->fspace = h5(H5Dget_space(h->dset), "H5Dget_space");
    h->dxpl = h5(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate");
    h5(H5Pset_dxpl_mpio(h->dxpl, cfg.collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT),
       "H5Pset_dxpl_mpio");
    h->mspace = -1;
}

static long long hdf5_xfer(handle *h, int write, unsigned char *buf, long long len,
                           long long off, long long *ops) {
    hsize_t start = (hsize_t)off, count = (hsize_t)len, dims;
    H5Sget_simple_extent_dims(h->fspace, &dims, NULL);
    if (start + count > dims) return 0; /* dataset too small: nothing to read there */
    if (h->mspace < 0) h->mspace = h5(H5Screate_simple(1, &count, NULL), "H5Screate_simple");
    h5(H5Sselect_hyperslab(h->fspace, H5S_SELECT_SET, &start, NULL, &count, NULL),
       "H5Sselect_hyperslab");
    herr_t rc = write ? H5Dwrite(h->dset, H5T_NATIVE_UCHAR, h->mspace, h->fspace, h->dxpl, buf)
                      : H5Dread(h->dset, H5T_NATIVE_UCHAR, h->mspace, h->fspace, h->dxpl, buf);
    (*ops)++;
    h5(rc, write ? "H5Dwrite" : "H5Dread");
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
    h5(H5Fflush(h->file, H5F_SCOPE_GLOBAL), "H5Fflush");
    (*meta)++;
}

static void hdf5_close(handle *h, long long *meta) {
    if (h->mspace >= 0) H5Sclose(h->mspace);
    H5Sclose(h->fspace);
    H5Pclose(h->dxpl);
    h5(H5Dclose(h->dset), "H5Dclose");
    h5(H5Fclose(h->file), "H5Fclose");
    *meta += 2;
}

static const backend backends[] = {
    {.name = "posix", .open = posix_open, .xfer = posix_xfer, .sync = posix_sync,
     .close = posix_close},
    {.name = "mpiio", .open = mpiio_open, .xfer = mpiio_xfer, .sync = mpiio_sync,
     .close = mpiio_close},
    {.name = "hdf5", .open = hdf5_open, .xfer = hdf5_xfer, .sync = hdf5_sync,
     .close = hdf5_close},
};

/* ---- options, data, phases ------------------------------------------------ */

static void check_options(int argc, char **argv) {
    static const char *const valued[] = {"--api", "--block", "--transfer", "--segments",
                                         "--iterations", "--file", "--hint", NULL};
    static const char *const flags[] = {"--fpp", "--collective", "--fsync", "--odirect",
                                        "--write", "--read", "--reorder", "--keep", NULL};
    k_check_options(argc, argv, valued, flags, usage);
}

static const unsigned long long K_MUL = 0x9E3779B97F4A7C15ULL; /* as k_pattern */

/* buf[i] = k_pattern(logical + i, seed), stepping the product instead of redoing it. */
static void fill(unsigned char *buf, long long n, long long logical, int seed) {
    unsigned long long x = (unsigned long long)logical * K_MUL + (unsigned)seed;
    for (long long i = 0; i < n; i++, x += K_MUL) buf[i] = (unsigned char)(x >> 56);
}

/* Index of the first byte that is not k_pattern(logical + i, seed), or -1. */
static long long mismatch(const unsigned char *buf, long long n, long long logical, int seed) {
    unsigned long long x = (unsigned long long)logical * K_MUL + (unsigned)seed;
    unsigned char bad = 0;
    for (long long i = 0; i < n; i++, x += K_MUL) bad |= buf[i] ^ (unsigned char)(x >> 56);
    if (!bad) return -1;
    for (long long i = 0; i < n; i++)
        if (buf[i] != k_pattern(logical + i, seed)) return i;
    return -1;
}

static void file_name(char *out, size_t cap, const char *path, int fpp, int rank) {
    if (fpp) snprintf(out, cap, "%s.%08d", path, rank);
    else snprintf(out, cap, "%s", path);
}

static void remove_file(const char *path, int fpp) {
    char name[4096];
    file_name(name, sizeof name, path, fpp, k_rank);
    if ((fpp || k_rank == 0) && unlink(name) != 0 && errno != ENOENT)
        k_die("remove %s: %s", name, strerror(errno));
    k_barrier();
}

typedef struct {
    const backend *api;
    const char *path;
    long long block, transfer, segments;
    int fpp, fsync, reorder;
} run_cfg;

/* One open-transfer-close phase: adds its times and counts to *it and
 * returns its open-to-close time (without the pattern work). */
static double phase(const run_cfg *rc, int write, int seed, unsigned char *buf, k_iter *it) {
    int owner = write || !rc->reorder ? k_rank : (k_rank + 1) % k_size;
    char name[4096];
    file_name(name, sizeof name, rc->path, rc->fpp, owner);
    handle h;
    memset(&h, 0, sizeof h);
    double t_data = 0; /* time spent making or checking the pattern, not I/O */

    k_barrier();
    double t0 = k_now();
    rc->api->open(&h, name, write, !rc->fpp, &it->meta_ops);
    double t1 = k_now();
    k_barrier();
    double t2 = k_now();
    for (long long s = 0; s < rc->segments; s++)
        for (long long k = 0; k < rc->block / rc->transfer; k++) {
            long long logical = (s * k_size + owner) * rc->block + k * rc->transfer;
            long long off = rc->fpp ? s * rc->block + k * rc->transfer : logical;
            double d0 = k_now();
            if (write) fill(buf, rc->transfer, logical, seed);
            double d1 = k_now();
            long long n = rc->api->xfer(&h, write, buf, rc->transfer, off,
                                        write ? &it->write_ops : &it->read_ops);
            double d2 = k_now();
            if (write) {
                it->bytes_written += n;
                if (n != rc->transfer)
                    k_die("%s: wrote %lld of %lld bytes at %lld", name, n, rc->transfer, off);
            } else {
                it->bytes_read += n;
                if (n != rc->transfer)
                    k_verify_failed("%s: read %lld of %lld bytes at offset %lld (file too short)",
                                    name, n, rc->transfer, off);
                long long bad = mismatch(buf, n, logical, seed);
                if (bad >= 0)
                    k_verify_failed("%s: byte at offset %lld is 0x%02x, expected 0x%02x "
                                    "(rank %d's data, seed %d)", name, off + bad, buf[bad],
                                    k_pattern(logical + bad, seed), owner, seed);
                it->verified = 1;
            }
            t_data += (d1 - d0) + (write ? 0 : k_now() - d2);
        }
    if (write && rc->fsync) rc->api->sync(&h, &it->meta_ops);
    double t3 = k_now();
    k_barrier();
    double t4 = k_now();
    rc->api->close(&h, &it->meta_ops);
    double t5 = k_now();

    it->open_s += t1 - t0;
    *(write ? &it->write_s : &it->read_s) = t3 - t2 - t_data;
    it->close_s += t5 - t4;
    return t5 - t0 - t_data;
}

int main(int argc, char **argv) {
    k_init(&argc, &argv, "ior");
    check_options(argc, argv);
    run_cfg rc = {0};
    const char *api = k_opt_str(argc, argv, "--api", "posix");
    for (size_t i = 0; i < sizeof backends / sizeof *backends; i++)
        if (!strcmp(api, backends[i].name)) rc.api = &backends[i];
    if (!rc.api) k_usage_die(usage, "%s%s", "--api must be posix, mpiio or hdf5, not ", api);
    rc.path = k_opt_str(argc, argv, "--file", "iopilot-ior.dat");
    rc.block = k_opt_size(argc, argv, "--block", 1LL << 20);
    rc.transfer = k_opt_size(argc, argv, "--transfer", 256LL << 10);
    rc.segments = k_opt_int(argc, argv, "--segments", 1);
    long iterations = k_opt_int(argc, argv, "--iterations", 1);
    rc.fpp = k_opt_flag(argc, argv, "--fpp");
    rc.fsync = k_opt_flag(argc, argv, "--fsync");
    rc.reorder = k_opt_flag(argc, argv, "--reorder");
    cfg.collective = k_opt_flag(argc, argv, "--collective");
    cfg.odirect = k_opt_flag(argc, argv, "--odirect");
    int keep = k_opt_flag(argc, argv, "--keep");
    int do_write = k_opt_flag(argc, argv, "--write"), do_read = k_opt_flag(argc, argv, "--read");
    if (!do_write && !do_read) do_write = do_read = 1;

    if (rc.transfer <= 0 || rc.transfer > (1LL << 30))
        k_usage_die(usage, "%s%s", "--transfer must be between 1 byte and 1g", "");
    if (rc.block <= 0 || rc.block % rc.transfer)
        k_usage_die(usage, "%s%s", "--block must be a positive multiple of --transfer", "");
    if (rc.segments < 1) k_usage_die(usage, "%s%s", "--segments must be >= 1", "");
    if (iterations < 1) k_usage_die(usage, "%s%s", "--iterations must be >= 1", "");
    int is_posix = rc.api == &backends[0];
    if (cfg.odirect && !is_posix) k_usage_die(usage, "%s%s", "--odirect needs --api posix", "");
    if (cfg.collective && is_posix) k_usage_die(usage, "%s%s", "--collective needs --api mpiio or hdf5", "");

    /* --hint key=value, repeatable: MPI-IO info for the mpiio and hdf5 APIs. */
    cfg.info = MPI_INFO_NULL;
    char hints[2048] = "";
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--hint")) continue;
        const char *kv = argv[++i], *eq = strchr(kv, '=');
        if (is_posix) k_usage_die(usage, "%s%s", "--hint needs --api mpiio or hdf5", "");
        if (!eq || eq == kv) k_usage_die(usage, "%s%s", "--hint wants KEY=VALUE, got ", kv);
        char key[MPI_MAX_INFO_KEY + 1];
        snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
        if (cfg.info == MPI_INFO_NULL) MPI_Info_create(&cfg.info);
        MPI_Info_set(cfg.info, key, eq + 1);
        snprintf(hints + strlen(hints), sizeof hints - strlen(hints), "%s%s", hints[0] ? "," : "",
                 kv);
    }
    long long ranks_in_file = rc.fpp ? 1 : k_size;
    cfg.elems = (hsize_t)(ranks_in_file * rc.segments * rc.block);

    k_param_str("api", rc.api->name);
    k_param_int("block", rc.block);
    k_param_int("transfer", rc.transfer);
    k_param_int("segments", rc.segments);
    k_param_int("iterations", iterations);
    k_param_int("fpp", rc.fpp);
    k_param_int("collective", cfg.collective);
    k_param_int("fsync", rc.fsync);
    k_param_int("odirect", cfg.odirect);
    k_param_int("write", do_write);
    k_param_int("read", do_read);
    k_param_int("reorder", rc.reorder);
    k_param_int("keep", keep);
    k_param_str("file", rc.path);
    k_param_str("hints", hints);
    k_note("%s: %lld bytes per file", rc.fpp ? "file per process" : "one shared file",
           ranks_in_file * rc.segments * rc.block);

    unsigned char *buf;
    if (posix_memalign((void **)&buf, 4096, (size_t)rc.transfer))
        k_die("out of memory for a %lld-byte transfer buffer", rc.transfer);
    memset(buf, 0, (size_t)rc.transfer); /* touch the pages before any timing */

    for (long it_no = 0; it_no < iterations; it_no++) {
        k_iter it = {.verified = -1};
        double write_total = 0, read_total = 0;
        int seed = do_write ? (int)it_no : 0;
        if (do_write) {
            remove_file(rc.path, rc.fpp); /* start from an empty file, as IOR */
            write_total = phase(&rc, 1, seed, buf, &it);
        }
        if (do_read) read_total = phase(&rc, 0, seed, buf, &it);
        if (do_write && !keep) remove_file(rc.path, rc.fpp);
        k_extra_time("write_total_s", write_total);
        k_extra_time("read_total_s", read_total);
        k_iteration(&it);
    }
    free(buf);
    if (cfg.info != MPI_INFO_NULL) MPI_Info_free(&cfg.info);
    return k_finish();
}
