/* Compute + I/O epochs, the shape of AMReX/Nyx/Castro checkpointing: every
 * step computes for --compute seconds, then each rank writes --size bytes
 * (open, write, close).  The compute is real floating-point work (a busy loop
 * calibrated at start-up, never a sleep), so a study that overlaps I/O with
 * it sees the CPU contention an application would; its measured time is
 * reported, not the target.
 *
 * Layout.  One file for the whole run, reopened every step (step 0 creates
 * it).  Shared file: rank r's bytes of step s start at (s * ranks + r) * size;
 * with --fpp rank r has PATH.<r as %08d> and step s starts at s * size.  HDF5
 * writes one 1-D H5T_NATIVE_UCHAR dataset "/step_<s as %05d>" per step
 * (ranks * size elements, or size with --fpp), rank r's slice at r * size.
 * A byte's value is k_pattern(logical offset, 0), the logical offset being
 * its offset in the shared-file layout (so it includes the rank with --fpp).
 * MPI-IO and HDF5 use collective calls unless --independent.
 *
 * One k_iteration per step: open_s, write_s (the write calls, plus the fsync
 * with --fsync, not the filling of the buffer), close_s, and the extra field
 * compute_s, each the slowest rank's.  read_s is 0 and verified null: this
 * kernel only writes.  meta_ops counts open, close and sync calls (HDF5:
 * file create/open, dataset create, the closes, H5Fflush).
 *
 * --async (POSIX only): the step's writes (and fsync) go to an event set of
 * iopilot's asynchronous engine and run in a background thread while the
 * next step computes.  With one transfer per step two buffers take turns
 * and nothing is copied; with several, each transfer is copied so the
 * buffer can be refilled at once.  A step prepares its first buffer, then
 * waits for the previous step's I/O to be complete (and durable with
 * --fsync), closes that file descriptor and queues its own; the last
 * step's I/O is waited for after the loop.  write_s is then what the I/O
 * cost the program: submitting plus that wait (extra field wait_s); the
 * run's total_s shows the overlap.  Every run reports
 * total_s, the wall time from the first step to the end of the last I/O. */
#include "common.h"
#include "iopilot_async.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: epochs [--steps N] [--compute SECONDS] [--size SIZE] [--transfer SIZE]\n"
    "              [--api posix|mpiio|hdf5] [--independent] [--fpp] [--fsync]\n"
    "              [--file PATH] [--keep] [--async]\n"
    "  defaults: 5 steps of 0.5 s compute, then 16m per rank per step written\n"
    "  collectively with MPI-IO to one shared file (iopilot-epochs.dat), deleted at the end\n";

enum api { POSIX, MPIIO, HDF5 };

typedef struct {
    enum api api;
    int collective, fpp, fsync;
    long long size, transfer;
    const char *path;
} cfg_t;

typedef struct {
    int fd;
    MPI_File fh;
    hid_t file, dset, fspace, mspace, dxpl;
} handle;

static void check_options(int argc, char **argv) {
    static const char *const valued[] = {"--steps", "--compute", "--size", "--transfer",
                                         "--api", "--file", NULL};
    static const char *const flags[] = {"--independent", "--fpp", "--fsync", "--keep", "--async",
                                        NULL};
    k_check_options(argc, argv, valued, flags, usage);
}

/* ---- emulated compute ------------------------------------------------------ */

static volatile double sink; /* keeps the work observable */

/* One unit: 4096 dependent multiply-adds on 8 independent chains. */
static void work(long long units) {
    double a[8] = {1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7};
    for (long long u = 0; u < units; u++)
        for (int i = 0; i < 512; i++)
            for (int l = 0; l < 8; l++) a[l] = a[l] * 0.9999999 + 1e-7;
    sink = a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

/* Units per second with all ranks computing at once (as they will in the
 * steps, so oversubscribed ranks calibrate under the same sharing); the
 * slowest rank's rate, so every rank does the same work. */
static double calibrate(void) {
    k_barrier();
    long long units = 0;
    double t0 = k_now(), dt;
    do {
        work(64);
        units += 64;
    } while ((dt = k_now() - t0) < 0.3);
    double rate = (double)units / dt, slowest;
    MPI_Allreduce(&rate, &slowest, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    return slowest;
}

/* ---- I/O ------------------------------------------------------------------- */

/* Open the run's file (create it in step 0) and, for HDF5, the step's dataset. */
static void io_open(const cfg_t *c, handle *h, const char *name, int step, long long *meta) {
    int create = step == 0, shared = !c->fpp;
    MPI_Comm comm = shared ? MPI_COMM_WORLD : MPI_COMM_SELF;
    if (c->api == POSIX) {
        /* Shared file: rank 0 creates it before the others open it. */
        if (create && shared && k_rank != 0) k_barrier();
        h->fd = open(name, O_WRONLY | (create && (!shared || k_rank == 0) ? O_CREAT : 0), 0644);
        int err = errno;
        if (create && shared && k_rank == 0) k_barrier();
        if (h->fd < 0) k_die("open %s: %s", name, strerror(err));
        (*meta)++;
    } else if (c->api == MPIIO) {
        int mode = MPI_MODE_WRONLY | (create ? MPI_MODE_CREATE : 0);
        k_mpi_check(MPI_File_open(comm, name, mode, MPI_INFO_NULL, &h->fh), "MPI_File_open");
        (*meta)++;
    } else {
        hid_t fapl = k_h5(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate");
        k_h5(H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL), "H5Pset_fapl_mpio");
        h->file = create ? k_h5(H5Fcreate(name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "H5Fcreate")
                         : k_h5(H5Fopen(name, H5F_ACC_RDWR, fapl), "H5Fopen");
        H5Pclose(fapl);
        hsize_t elems = (hsize_t)(c->size * (shared ? k_size : 1));
        hid_t space = k_h5(H5Screate_simple(1, &elems, NULL), "H5Screate_simple");
        hid_t dcpl = k_h5(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
        k_h5(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), "H5Pset_fill_time"); /* no fill pass */
        char dname[32];
        snprintf(dname, sizeof dname, "step_%05d", step);
        h->dset = k_h5(H5Dcreate2(h->file, dname, H5T_NATIVE_UCHAR, space, H5P_DEFAULT, dcpl,
                                H5P_DEFAULT), "H5Dcreate2");
        H5Pclose(dcpl);
        h->fspace = space;
        h->mspace = -1;
        h->dxpl = k_h5(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate");
        k_h5(H5Pset_dxpl_mpio(h->dxpl, c->collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT),
           "H5Pset_dxpl_mpio");
        *meta += 2;
    }
}

/* Write len bytes at off (file offset; HDF5: dataset offset); returns the bytes moved. */
static long long io_write(const cfg_t *c, handle *h, const unsigned char *buf, long long len,
                          long long off, long long *ops) {
    if (c->api == POSIX) {
        long long done = 0;
        while (done < len) { /* a short write is retried for the rest */
            ssize_t n = pwrite(h->fd, buf + done, (size_t)(len - done), off + done);
            (*ops)++;
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) k_die("pwrite at offset %lld: %s", off + done, strerror(errno));
            done += n;
        }
        return done;
    }
    if (c->api == MPIIO) {
        MPI_Status st;
        int count = 0;
        int rc = c->collective ? MPI_File_write_at_all(h->fh, off, buf, (int)len, MPI_BYTE, &st)
                               : MPI_File_write_at(h->fh, off, buf, (int)len, MPI_BYTE, &st);
        (*ops)++;
        k_mpi_check(rc, "MPI_File_write_at");
        MPI_Get_count(&st, MPI_BYTE, &count);
        return count;
    }
    hsize_t start = (hsize_t)off, count = (hsize_t)len;
    if (h->mspace >= 0) H5Sclose(h->mspace); /* the last transfer may be shorter */
    h->mspace = k_h5(H5Screate_simple(1, &count, NULL), "H5Screate_simple");
    k_h5(H5Sselect_hyperslab(h->fspace, H5S_SELECT_SET, &start, NULL, &count, NULL),
       "H5Sselect_hyperslab");
    (*ops)++;
    k_h5(H5Dwrite(h->dset, H5T_NATIVE_UCHAR, h->mspace, h->fspace, h->dxpl, buf), "H5Dwrite");
    return len;
}

static void io_sync(const cfg_t *c, handle *h, long long *meta) {
    if (c->api == POSIX && fsync(h->fd) != 0) k_die("fsync: %s", strerror(errno));
    if (c->api == MPIIO) k_mpi_check(MPI_File_sync(h->fh), "MPI_File_sync");
    if (c->api == HDF5) k_h5(H5Fflush(h->file, H5F_SCOPE_GLOBAL), "H5Fflush");
    (*meta)++;
}

static void io_close(const cfg_t *c, handle *h, long long *meta) {
    if (c->api == POSIX) {
        if (close(h->fd) != 0) k_die("close: %s", strerror(errno));
        (*meta)++;
    } else if (c->api == MPIIO) {
        k_mpi_check(MPI_File_close(&h->fh), "MPI_File_close");
        (*meta)++;
    } else {
        if (h->mspace >= 0) H5Sclose(h->mspace);
        H5Sclose(h->fspace);
        H5Pclose(h->dxpl);
        k_h5(H5Dclose(h->dset), "H5Dclose");
        k_h5(H5Fclose(h->file), "H5Fclose");
        *meta += 2;
    }
}

/* Wait for the event set's operations (the previous step's I/O), stop on a
 * failure with its errno, then close that step's file. */
static void drain(iopilot_es *es, int *fd) {
    iopilot_es_failure f[4];
    size_t nf = 4;
    if (iopilot_es_wait(es, -1.0, NULL, f, &nf) != 0)
        k_die("background %s at offset %lld failed after %zu of %zu bytes: %s (%zu failure(s))",
              f[0].op == IOPILOT_ES_FSYNC ? "fsync" : "write", (long long)f[0].offset, f[0].done,
              f[0].bytes, strerror(f[0].error), nf);
    if (*fd >= 0) {
        if (close(*fd) != 0) k_die("close: %s", strerror(errno));
        *fd = -1;
    }
}

/* buf[i] = k_pattern(logical + i, 0), stepping the product instead of redoing it. */
static void fill(unsigned char *buf, long long n, long long logical) {
    const unsigned long long mul = 0x9E3779B97F4A7C15ULL; /* as k_pattern */
    unsigned long long x = (unsigned long long)logical * mul;
    for (long long i = 0; i < n; i++, x += mul) buf[i] = (unsigned char)(x >> 56);
}

int main(int argc, char **argv) {
    k_init(&argc, &argv, "epochs");
    check_options(argc, argv);
    cfg_t c = {0};
    long steps = k_opt_int(argc, argv, "--steps", 5);
    double compute = k_opt_double(argc, argv, "--compute", 0.5);
    c.size = k_opt_size(argc, argv, "--size", 16LL << 20);
    c.transfer = k_opt_size(argc, argv, "--transfer", c.size < (1LL << 30) ? c.size : 1LL << 30);
    const char *api = k_opt_str(argc, argv, "--api", "mpiio");
    c.collective = !k_opt_flag(argc, argv, "--independent");
    c.fpp = k_opt_flag(argc, argv, "--fpp");
    c.fsync = k_opt_flag(argc, argv, "--fsync");
    c.path = k_opt_str(argc, argv, "--file", "iopilot-epochs.dat");
    int keep = k_opt_flag(argc, argv, "--keep");
    int async = k_opt_flag(argc, argv, "--async");
    if (!strcmp(api, "posix")) c.api = POSIX;
    else if (!strcmp(api, "mpiio")) c.api = MPIIO;
    else if (!strcmp(api, "hdf5")) c.api = HDF5;
    else k_usage_die(usage, "%s%s", "--api must be posix, mpiio or hdf5, not ", api);
    if (steps < 1) k_usage_die(usage, "%s%s", "--steps must be >= 1", "");
    if (compute < 0) k_usage_die(usage, "%s%s", "--compute must be >= 0", "");
    if (c.size < 1) k_usage_die(usage, "%s%s", "--size must be >= 1 byte", "");
    if (c.transfer < 1 || c.transfer > (1LL << 30))
        k_usage_die(usage, "%s%s", "--transfer must be between 1 byte and 1g", "");
    if (c.api == POSIX) c.collective = 0; /* nothing collective in POSIX */
    if (async && c.api != POSIX) k_usage_die(usage, "%s%s", "--async needs --api posix", "");

    double rate = compute > 0 ? calibrate() : 0;
    long long units = (long long)(compute * rate + 0.5);

    k_param_int("steps", steps);
    k_param_str("compute", k_opt_str(argc, argv, "--compute", "0.5"));
    k_param_int("size", c.size);
    k_param_int("transfer", c.transfer);
    k_param_str("api", api);
    k_param_int("collective", c.collective);
    k_param_int("fpp", c.fpp);
    k_param_int("fsync", c.fsync);
    k_param_str("file", c.path);
    k_param_int("keep", keep);
    k_param_int("async", async);
    if (compute > 0)
        k_note("compute: %lld units of 4096 multiply-adds per step (calibrated %.0f units/s, "
               "slowest rank)", units, rate);

    char name[4096];
    if (c.fpp) snprintf(name, sizeof name, "%s.%08d", c.path, k_rank);
    else snprintf(name, sizeof name, "%s", c.path);
    int owner = c.fpp || k_rank == 0; /* who creates and removes the file */
    if (owner && unlink(name) != 0 && errno != ENOENT)
        k_die("remove %s: %s", name, strerror(errno));

    /* With --async and one transfer per step, two buffers take turns: step
     * s fills one while step s-1's is still being written from the other,
     * so the engine need not copy (IOPILOT_ES_NOCOPY; one step in flight). */
    int turns = async && c.transfer >= c.size ? 2 : 1;
    unsigned char *bufs[2] = {NULL, NULL}, *buf;
    for (int i = 0; i < turns; i++) {
        if (posix_memalign((void **)&bufs[i], 4096, (size_t)c.transfer))
            k_die("out of memory for a %lld-byte buffer", c.transfer);
        memset(bufs[i], 0, (size_t)c.transfer); /* touch the pages before any timing */
    }
    buf = bufs[0];

    iopilot_es *es = NULL;
    if (async && !(es = iopilot_es_create())) k_die("cannot start the I/O thread: %s", strerror(errno));
    int pending_fd = -1; /* the previous step's file, until its I/O is complete */
    k_barrier();
    double run0 = k_now();
    for (int s = 0; s < steps; s++) {
        k_iter it = {.verified = -1};
        buf = bufs[s % turns];
        handle h;
        memset(&h, 0, sizeof h);
        k_barrier();
        double c0 = k_now();
        work(units);
        double compute_s = k_now() - c0;

        k_barrier();
        double wait_s = 0;
        double t0 = k_now();
        io_open(&c, &h, name, s, &it.meta_ops);
        double t1 = k_now();
        k_barrier();
        double t2 = k_now(), t_fill = 0;
        for (long long done = 0; done < c.size; done += c.transfer) {
            long long len = c.size - done < c.transfer ? c.size - done : c.transfer;
            long long logical = ((long long)s * k_size + k_rank) * c.size + done;
            long long off = c.api == HDF5 ? (c.fpp ? 0 : k_rank * c.size) + done
                            : c.fpp       ? (long long)s * c.size + done
                                          : logical;
            double f0 = k_now();
            fill(buf, len, logical);
            t_fill += k_now() - f0;
            long long n = len;
            if (es && done == 0) { /* the previous step's I/O, then ours (one in flight) */
                double w0 = k_now();
                drain(es, &pending_fd);
                wait_s = k_now() - w0;
            }
            if (es) {
                if (!iopilot_es_write(es, h.fd, buf, (size_t)len, off,
                                      turns == 2 ? IOPILOT_ES_NOCOPY : 0))
                    k_die("queueing a write: %s", strerror(errno));
                it.write_ops++;
            } else {
                n = io_write(&c, &h, buf, len, off, &it.write_ops);
            }
            it.bytes_written += n;
            if (n != len) k_die("%s: wrote %lld of %lld bytes at %lld", name, n, len, off);
        }
        if (c.fsync && es) {
            if (!iopilot_es_fsync(es, h.fd)) k_die("queueing an fsync: %s", strerror(errno));
            it.meta_ops++;
        } else if (c.fsync) {
            io_sync(&c, &h, &it.meta_ops);
        }
        double t3 = k_now();
        k_barrier();
        double t4 = k_now();
        if (es) {
            pending_fd = h.fd; /* closed once its I/O is complete (counted here) */
            it.meta_ops++;
        } else {
            io_close(&c, &h, &it.meta_ops);
        }
        double t5 = k_now();

        it.open_s = t1 - t0;
        it.write_s = t3 - t2 - t_fill; /* with --async: the wait for the previous step too */
        it.close_s = t5 - t4;
        k_extra_time("compute_s", compute_s);
        if (es) k_extra_time("wait_s", wait_s);
        k_iteration(&it);
    }
    if (es) {
        drain(es, &pending_fd);
        if (iopilot_es_close(es) != 0) k_die("the I/O thread reported a failure at the end");
    }
    k_total_time(k_now() - run0);
    k_barrier();
    if (!keep && owner && unlink(name) != 0) k_die("remove %s: %s", name, strerror(errno));
    for (int i = 0; i < turns; i++) free(bufs[i]);
    return k_finish();
}
