/* Compute + I/O epochs, the shape of AMReX/Nyx/Castro checkpointing: every
 * step computes for --compute seconds, then each rank writes --size bytes
 * (open, write, close).  The compute is real floating-point work (a busy loop
 * calibrated at start-up, never a sleep), so a study that overlaps I/O with
 * it sees the CPU contention an application would; its measured time is
 * reported, not the target.  --units N gives the work per step instead, as
 * a count of its units (4096 multiply-adds each): no calibration, and
 * --compute is ignored, so runs under different bindings or loads can do
 * the same work.  The result's params hold "units" (per step, always) and
 * "units_per_s" (the calibrated rate, slowest rank; only when calibrated).
 *
 * Layout.  One file for the whole run, reopened every step (step 0 creates
 * it; with --overwrite, step 0 opens the file an earlier run kept, and HDF5
 * its step datasets, and rewrites them in place: no page-cache page is
 * freed and taken again between runs).  Shared file: rank r's bytes of step s start at (s * ranks + r) * size;
 * with --fpp rank r has PATH.<r as %08d> and step s starts at s * size.  HDF5
 * writes one 1-D H5T_NATIVE_UCHAR dataset "/step_<s as %05d>" per step
 * (ranks * size elements, or size with --fpp), rank r's slice at r * size.
 * A byte's value is k_pattern(logical offset, 0), the logical offset being
 * its offset in the shared-file layout (so it includes the rank with --fpp).
 * With --fill-once every step writes step 0's bytes: one whole-step buffer
 * is filled before the first step and never changed, so nothing but the
 * computation runs between one step's I/O and the next (filling 512 MiB
 * takes about as long as writing it into a warm page cache).
 * MPI-IO and HDF5 use collective calls unless --independent.
 *
 * One k_iteration per step: open_s, write_s (the write calls, plus the fsync
 * with --fsync, not the filling of the buffer), close_s, and the extra field
 * compute_s, each the slowest rank's.  read_s is 0 and verified null: this
 * kernel only writes.  meta_ops counts open, close and sync calls (HDF5:
 * file create/open, dataset create, the closes, H5Fflush).
 *
 * --async: step k's I/O runs while step k+1 computes, and step k+1 waits
 * for it to be complete before its own (one step in flight).  write_s is
 * then what the I/O cost the program: submitting plus that wait (extra
 * field wait_s); the run's total_s shows the overlap.
 *
 * POSIX: the step's writes (and fsync) go to an event set of iopilot's
 * asynchronous engine, run by its background thread.  With one transfer
 * per step two buffers take turns and nothing is copied; with several,
 * each transfer is copied so the buffer can be refilled at once.  A step
 * opens its file, prepares its first buffer, then waits for the previous
 * step's I/O to be complete (and durable with --fsync), closes that file
 * descriptor and queues its own; the last step's I/O is waited for after
 * the loop.
 *
 * MPI-IO: the step's transfers are MPI_File_iwrite_at_all (collective) or
 * MPI_File_iwrite_at (--independent) from a whole-step buffer, two of which
 * take turns.  The next step opens its file handle, fills its buffer, then
 * waits (MPI_Waitall) for the previous step's requests; MPI_File_sync is
 * collective and blocking, with no non-blocking form, so with --fsync the
 * previous step's sync comes after that wait and is part of wait_s (the
 * data's trip to the page cache overlaps, its trip to the disk does not);
 * then the previous handle is closed (also in wait_s).  An MPI library
 * with no progress thread (Open MPI has none) moves non-blocking requests
 * on only inside MPI calls, so the computation calls MPI_Testall on the
 * step's requests every --test-every seconds of work (1 ms; 0: never), as
 * real codes do (with --units, the interval is converted at the rate step
 * 0's computation ran, which has no requests to poll).  (Open MPI 4.1's OMPIO also hands the writes to POSIX
 * aio_write, which glibc runs on threads of its own: here they overlap
 * even without the polling.)
 *
 * HDF5: Debian's parallel HDF5 is not thread-safe, so the whole of a
 * step's HDF5 work (open, dataset create, writes, H5Fflush with --fsync,
 * closes) runs on one background thread while the main thread makes no
 * HDF5 call at all: the main thread computes, fills the next step's
 * buffer (two whole-step buffers take turns), joins the previous step's
 * thread (wait_s) and only then starts the next, so two threads never
 * call HDF5 at once and pthread_join orders their memory.  The thread
 * makes MPI calls (MPI-IO, and HDF5's collectives on its own duplicate of
 * the communicator) while the main thread makes its own on MPI_COMM_WORLD:
 * the run asks for MPI_THREAD_MULTIPLE, and HDF5 is given a communicator
 * only the thread uses, so no collective of the thread meets one of the
 * main thread.  open_s and close_s are then 0 (the program opens and
 * closes nothing itself) and meta_ops counts the thread's calls.  Writing
 * through the engine instead would need a file image built in memory,
 * not the parallel file that the synchronous run writes.
 *
 * Every run reports
 * total_s, the wall time from the first step to the end of the last I/O. */
#include "common.h"
#include "iopilot_async.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: epochs [--steps N] [--compute SECONDS | --units N] [--size SIZE] [--transfer SIZE]\n"
    "              [--api posix|mpiio|hdf5] [--independent] [--fpp] [--fsync]\n"
    "              [--file PATH] [--keep] [--overwrite] [--fill-once] [--async]\n"
    "              [--test-every SECONDS]\n"
    "  defaults: 5 steps of 0.5 s compute, then 16m per rank per step written\n"
    "  collectively with MPI-IO to one shared file (iopilot-epochs.dat), deleted at the end\n"
    "  --overwrite: rewrite in place the file an earlier run kept (implies --keep)\n"
    "  --fill-once: every step writes step 0's bytes, filled once before the first step\n"
    "  --units: the computation per step as N units of 4096 multiply-adds (>= 0),\n"
    "  not calibrated at start-up; overrides --compute\n"
    "  --async: step k's I/O runs while step k+1 computes (posix: iopilot's engine;\n"
    "  mpiio: MPI_File_iwrite_at[_all], the computation calling MPI_Testall every\n"
    "  --test-every seconds of work (0.001; 0: never), since MPI may move non-blocking\n"
    "  I/O on only inside MPI calls; hdf5: a thread makes all of a step's HDF5 calls)\n";

enum api { POSIX, MPIIO, HDF5 };

typedef struct {
    enum api api;
    int collective, fpp, fsync;
    int reuse; /* --overwrite and the file exists: open it (and its datasets), never create */
    long long size, transfer;
    const char *path;
    MPI_Comm comm; /* of a shared file (HDF5 --async: a duplicate only its thread uses) */
} cfg_t;

typedef struct {
    int fd;
    MPI_File fh;
    hid_t file, dset, fspace, mspace, dxpl;
} handle;

static void check_options(int argc, char **argv) {
    static const char *const valued[] = {"--steps", "--compute", "--units", "--size",
                                         "--transfer", "--api", "--file", "--test-every", NULL};
    static const char *const flags[] = {"--independent", "--fpp", "--fsync", "--keep",
                                        "--overwrite", "--fill-once", "--async", NULL};
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

/* work(units), calling MPI_Testall on ``reqs`` every ``every`` units until
 * they are complete (*done set, ``sts`` filled): MPI moves them on only
 * inside MPI calls. */
static void work_testing(long long units, long long every, int n, MPI_Request *reqs,
                         MPI_Status *sts, int *done) {
    if (every <= 0 || n == 0 || *done) {
        work(units);
        return;
    }
    for (long long u = 0; u < units; u += every) {
        work(units - u < every ? units - u : every);
        if (!*done) k_mpi_check(MPI_Testall(n, reqs, done, sts), "MPI_Testall");
    }
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
    MPI_Comm comm = shared ? c->comm : MPI_COMM_SELF;
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
        h->file = create && !c->reuse
                      ? k_h5(H5Fcreate(name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "H5Fcreate")
                      : k_h5(H5Fopen(name, H5F_ACC_RDWR, fapl), "H5Fopen");
        H5Pclose(fapl);
        hsize_t elems = (hsize_t)(c->size * (shared ? k_size : 1));
        hid_t space = k_h5(H5Screate_simple(1, &elems, NULL), "H5Screate_simple");
        hid_t dcpl = k_h5(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
        k_h5(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), "H5Pset_fill_time"); /* no fill pass */
        char dname[32];
        snprintf(dname, sizeof dname, "step_%05d", step);
        if (c->reuse && H5Lexists(h->file, dname, H5P_DEFAULT) > 0) {
            /* --overwrite: the earlier run's dataset, rewritten in place */
            h->dset = k_h5(H5Dopen2(h->file, dname, H5P_DEFAULT), "H5Dopen2");
            hid_t old = k_h5(H5Dget_space(h->dset), "H5Dget_space");
            hsize_t have = 0;
            H5Sget_simple_extent_dims(old, &have, NULL);
            H5Sclose(old);
            if (have != elems)
                k_die("--overwrite: dataset %s of %s has %llu elements, this run writes %llu",
                      dname, name, (unsigned long long)have, (unsigned long long)elems);
        } else {
            h->dset = k_h5(H5Dcreate2(h->file, dname, H5T_NATIVE_UCHAR, space, H5P_DEFAULT, dcpl,
                                    H5P_DEFAULT), "H5Dcreate2");
        }
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

/* The previous step's MPI-IO requests (--api mpiio --async). */
typedef struct {
    int active, done, n;
    handle h;
    MPI_Request *reqs;
    MPI_Status *sts;
    long long *lens;
} mpi_pending;

/* Wait for the previous step's requests (MPI_Testall may have completed
 * them), check every transfer wrote all its bytes, sync the handle with
 * --fsync (collective, blocking: no non-blocking sync exists) and close it. */
static void mpi_drain(const cfg_t *c, mpi_pending *p) {
    if (!p->active) return;
    if (!p->done) k_mpi_check(MPI_Waitall(p->n, p->reqs, p->sts), "MPI_Waitall");
    for (int i = 0; i < p->n; i++) {
        int count = 0;
        MPI_Get_count(&p->sts[i], MPI_BYTE, &count);
        if (count != p->lens[i])
            k_die("%s: a non-blocking write moved %d of %lld bytes", c->path, count, p->lens[i]);
    }
    long long meta = 0; /* counted when the step queued them */
    if (c->fsync) io_sync(c, &p->h, &meta);
    io_close(c, &p->h, &meta);
    p->active = p->done = p->n = 0;
}

/* One step's HDF5 I/O, made by its own thread (--api hdf5 --async). */
typedef struct {
    const cfg_t *c;
    const char *name;
    int step, active;
    unsigned char *buf; /* the whole step */
    pthread_t thread;
} h5_job;

static void *h5_step(void *arg) {
    h5_job *j = arg;
    const cfg_t *c = j->c;
    handle h;
    long long meta = 0, ops = 0; /* counted by the main thread when it started us */
    memset(&h, 0, sizeof h);
    io_open(c, &h, j->name, j->step, &meta);
    for (long long done = 0; done < c->size; done += c->transfer) {
        long long len = c->size - done < c->transfer ? c->size - done : c->transfer;
        long long off = (c->fpp ? 0 : k_rank * c->size) + done;
        io_write(c, &h, j->buf + done, len, off, &ops);
    }
    if (c->fsync) io_sync(c, &h, &meta);
    io_close(c, &h, &meta);
    return NULL;
}

static void h5_join(h5_job *j) {
    if (!j->active) return;
    int err = pthread_join(j->thread, NULL);
    if (err) k_die("joining the HDF5 thread: %s", strerror(err));
    j->active = 0;
}

/* buf[i] = k_pattern(logical + i, 0), stepping the product instead of redoing it. */
static void fill(unsigned char *buf, long long n, long long logical) {
    const unsigned long long mul = 0x9E3779B97F4A7C15ULL; /* as k_pattern */
    unsigned long long x = (unsigned long long)logical * mul;
    for (long long i = 0; i < n; i++, x += mul) buf[i] = (unsigned char)(x >> 56);
}

/* --api hdf5 --async: HDF5's thread makes MPI calls beside the main thread's. */
static int wants_threads(int argc, char **argv) {
    int async = 0, hdf5 = 0;
    for (int i = 1; i < argc; i++) {
        async |= !strcmp(argv[i], "--async");
        hdf5 |= i + 1 < argc && !strcmp(argv[i], "--api") && !strcmp(argv[i + 1], "hdf5");
    }
    return async && hdf5;
}

int main(int argc, char **argv) {
    if (wants_threads(argc, argv)) k_init_thread(&argc, &argv, "epochs", MPI_THREAD_MULTIPLE);
    else k_init(&argc, &argv, "epochs");
    check_options(argc, argv);
    cfg_t c = {0};
    long steps = k_opt_int(argc, argv, "--steps", 5);
    double compute = k_opt_double(argc, argv, "--compute", 0.5);
    int given_units = k_opt_str(argc, argv, "--units", NULL) != NULL;
    long long units = k_opt_int(argc, argv, "--units", 0);
    c.size = k_opt_size(argc, argv, "--size", 16LL << 20);
    c.transfer = k_opt_size(argc, argv, "--transfer", c.size < (1LL << 30) ? c.size : 1LL << 30);
    const char *api = k_opt_str(argc, argv, "--api", "mpiio");
    c.collective = !k_opt_flag(argc, argv, "--independent");
    c.fpp = k_opt_flag(argc, argv, "--fpp");
    c.fsync = k_opt_flag(argc, argv, "--fsync");
    c.path = k_opt_str(argc, argv, "--file", "iopilot-epochs.dat");
    int overwrite = k_opt_flag(argc, argv, "--overwrite");
    int keep = overwrite || k_opt_flag(argc, argv, "--keep");
    int async = k_opt_flag(argc, argv, "--async");
    int once = k_opt_flag(argc, argv, "--fill-once");
    double test_every = k_opt_double(argc, argv, "--test-every", 0.001);
    c.comm = MPI_COMM_WORLD;
    if (!strcmp(api, "posix")) c.api = POSIX;
    else if (!strcmp(api, "mpiio")) c.api = MPIIO;
    else if (!strcmp(api, "hdf5")) c.api = HDF5;
    else k_usage_die(usage, "%s%s", "--api must be posix, mpiio or hdf5, not ", api);
    if (steps < 1) k_usage_die(usage, "%s%s", "--steps must be >= 1", "");
    if (compute < 0) k_usage_die(usage, "%s%s", "--compute must be >= 0", "");
    if (units < 0) k_usage_die(usage, "%s%s", "--units must be >= 0", "");
    if (c.size < 1) k_usage_die(usage, "%s%s", "--size must be >= 1 byte", "");
    if (c.transfer < 1 || c.transfer > (1LL << 30))
        k_usage_die(usage, "%s%s", "--transfer must be between 1 byte and 1g", "");
    if (c.api == POSIX) c.collective = 0; /* nothing collective in POSIX */
    if (test_every < 0) k_usage_die(usage, "%s%s", "--test-every must be >= 0", "");
    if (async && c.api == HDF5 && !c.fpp)
        k_mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &c.comm), "MPI_Comm_dup");
    if (async && c.api == HDF5) H5open(); /* HDF5 starts up here, before any thread */

    double rate = 0; /* units per second, when calibrated */
    if (!given_units && compute > 0) {
        rate = calibrate();
        units = (long long)(compute * rate + 0.5);
    }

    k_param_int("steps", steps);
    if (!given_units) k_param_str("compute", k_opt_str(argc, argv, "--compute", "0.5"));
    k_param_int("units", units);
    if (rate > 0) k_param_double("units_per_s", rate);
    k_param_int("size", c.size);
    k_param_int("transfer", c.transfer);
    k_param_str("api", api);
    k_param_int("collective", c.collective);
    k_param_int("fpp", c.fpp);
    k_param_int("fsync", c.fsync);
    k_param_str("file", c.path);
    k_param_int("keep", keep);
    k_param_int("overwrite", overwrite);
    k_param_int("fill_once", once);
    k_param_int("async", async);
    if (async && c.api == MPIIO) k_param_str("test_every", k_opt_str(argc, argv, "--test-every", "0.001"));
    if (rate > 0)
        k_note("compute: %lld units of 4096 multiply-adds per step (calibrated %.0f units/s, "
               "slowest rank)", units, rate);
    else if (given_units)
        k_note("compute: %lld units of 4096 multiply-adds per step (given, not calibrated)",
               units);

    char name[4096];
    if (c.fpp) snprintf(name, sizeof name, "%s.%08d", c.path, k_rank);
    else snprintf(name, sizeof name, "%s", c.path);
    int owner = c.fpp || k_rank == 0; /* who creates and removes the file */
    if (overwrite) {
        /* Rewrite the kept file in place: its pages stay in the page cache
         * from one run to the next, so no run pays for memory another freed. */
        int exists = access(name, F_OK) == 0, all = exists;
        if (!c.fpp) k_mpi_check(MPI_Allreduce(&exists, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
                                "MPI_Allreduce");
        c.reuse = all;
    } else if (owner && unlink(name) != 0 && errno != ENOENT) {
        k_die("remove %s: %s", name, strerror(errno));
    }

    /* POSIX --async with one transfer per step: two buffers take turns, step
     * s fills one while step s-1's is still being written from the other,
     * so the engine need not copy (IOPILOT_ES_NOCOPY; one step in flight).
     * MPI-IO and HDF5 --async: two whole-step buffers take turns (a
     * non-blocking transfer's buffer is MPI's until the wait).  --fill-once:
     * one whole-step buffer, never changed once filled, so nothing is
     * copied and no second buffer is needed. */
    int whole = once || (async && c.api != POSIX);
    int turns = !once && (whole || (async && c.transfer >= c.size)) ? 2 : 1;
    long long buflen = whole ? c.size : c.transfer;
    unsigned char *bufs[2] = {NULL, NULL}, *buf;
    for (int i = 0; i < turns; i++) {
        if (posix_memalign((void **)&bufs[i], 4096, (size_t)buflen))
            k_die("out of memory for a %lld-byte buffer", buflen);
        memset(bufs[i], 0, (size_t)buflen); /* touch the pages before any timing */
    }
    buf = bufs[0];
    if (once) fill(buf, c.size, (long long)k_rank * c.size); /* step 0's bytes */

    iopilot_es *es = NULL;
    if (async && c.api == POSIX && !(es = iopilot_es_create()))
        k_die("cannot start the I/O thread: %s", strerror(errno));
    int pending_fd = -1; /* the previous step's file, until its I/O is complete */
    long long per_step = (c.size + c.transfer - 1) / c.transfer;
    mpi_pending mp[2]; /* this step's requests and the previous step's take turns */
    memset(mp, 0, sizeof mp);
    if (async && c.api == MPIIO)
        for (int i = 0; i < 2; i++)
            if (!(mp[i].reqs = calloc((size_t)per_step, sizeof *mp[i].reqs)) ||
                !(mp[i].sts = calloc((size_t)per_step, sizeof *mp[i].sts)) ||
                !(mp[i].lens = calloc((size_t)per_step, sizeof *mp[i].lens)))
                k_die("out of memory for %lld requests", per_step);
    /* Not calibrated (--units): set from step 0's computation, which has
     * nothing to poll (work_testing ignores test_units until there is). */
    long long test_units = (long long)(test_every * rate + 0.5);
    int polling = async && c.api == MPIIO && test_every > 0;
    if (polling && rate > 0 && test_units < 1) test_units = 1;
    h5_job job = {.c = &c, .name = name};
    k_barrier();
    double run0 = k_now();
    for (int s = 0; s < steps; s++) {
        k_iter it = {.verified = -1};
        buf = bufs[s % turns];
        mpi_pending *prev = &mp[(s + 1) % 2], *mine = &mp[s % 2];
        handle h;
        memset(&h, 0, sizeof h);
        k_barrier();
        double c0 = k_now();
        if (async && c.api == MPIIO)
            work_testing(units, test_units, prev->n, prev->reqs, prev->sts, &prev->done);
        else
            work(units);
        double compute_s = k_now() - c0;
        if (polling && rate <= 0 && s == 0) {
            /* this rank's own rate: how often it polls is its own affair */
            double r = compute_s > 0 ? (double)units / compute_s : 0;
            test_units = (long long)(test_every * r + 0.5);
            if (test_units < 1) test_units = 1;
        }

        k_barrier();
        double wait_s = 0;
        double t0 = k_now();
        if (!(async && c.api == HDF5)) io_open(&c, &h, name, s, &it.meta_ops);
        double t1 = k_now();
        k_barrier();
        double t2 = k_now(), t_fill = 0;
        for (long long done = 0; done < c.size; done += c.transfer) {
            long long len = c.size - done < c.transfer ? c.size - done : c.transfer;
            long long logical = ((long long)s * k_size + k_rank) * c.size + done;
            long long off = c.api == HDF5 ? (c.fpp ? 0 : k_rank * c.size) + done
                            : c.fpp       ? (long long)s * c.size + done
                                          : logical;
            unsigned char *src = whole ? buf + done : buf;
            if (!once) {
                double f0 = k_now();
                fill(src, len, logical);
                t_fill += k_now() - f0;
            }
            long long n = len;
            if (async && c.api == HDF5) { /* the thread writes once the step is filled */
                it.write_ops++;
            } else if (async && done == 0) { /* the previous step's I/O, then ours */
                double w0 = k_now();
                if (es) drain(es, &pending_fd);
                else mpi_drain(&c, prev);
                wait_s = k_now() - w0;
            }
            if (es) {
                if (!iopilot_es_write(es, h.fd, src, (size_t)len, off,
                                      turns == 2 || once ? IOPILOT_ES_NOCOPY : 0))
                    k_die("queueing a write: %s", strerror(errno));
                it.write_ops++;
            } else if (async && c.api == MPIIO) {
                MPI_Request *r = &mine->reqs[mine->n];
                int rc = c.collective
                             ? MPI_File_iwrite_at_all(h.fh, off, src, (int)len, MPI_BYTE, r)
                             : MPI_File_iwrite_at(h.fh, off, src, (int)len, MPI_BYTE, r);
                k_mpi_check(rc, c.collective ? "MPI_File_iwrite_at_all" : "MPI_File_iwrite_at");
                mine->lens[mine->n++] = len;
                it.write_ops++;
            } else if (!async) {
                n = io_write(&c, &h, src, len, off, &it.write_ops);
            }
            it.bytes_written += n;
            if (n != len) k_die("%s: wrote %lld of %lld bytes at %lld", name, n, len, off);
        }
        if (async && c.api == HDF5) {
            double w0 = k_now();
            h5_join(&job);
            wait_s = k_now() - w0;
            job.step = s;
            job.buf = buf;
            int err = pthread_create(&job.thread, NULL, h5_step, &job);
            if (err) k_die("cannot start the HDF5 thread: %s", strerror(err));
            job.active = 1;
            it.meta_ops += 4 + c.fsync; /* file and dataset: create or open, close; flush */
        } else if (c.fsync && es) {
            if (!iopilot_es_fsync(es, h.fd)) k_die("queueing an fsync: %s", strerror(errno));
            it.meta_ops++;
        } else if (c.fsync) { /* synchronous, or MPI-IO async: synced once written (drain) */
            if (!async) io_sync(&c, &h, &it.meta_ops);
            else it.meta_ops++;
        }
        double t3 = k_now();
        k_barrier();
        double t4 = k_now();
        if (es) {
            pending_fd = h.fd; /* closed once its I/O is complete (counted here) */
            it.meta_ops++;
        } else if (async && c.api == MPIIO) {
            mine->h = h; /* closed once its requests are complete (counted here) */
            mine->active = 1;
            it.meta_ops++;
        } else if (!async) {
            io_close(&c, &h, &it.meta_ops);
        }
        double t5 = k_now();

        it.open_s = t1 - t0;
        it.write_s = t3 - t2 - t_fill; /* with --async: the wait for the previous step too */
        it.close_s = t5 - t4;
        k_extra_time("compute_s", compute_s);
        if (async) k_extra_time("wait_s", wait_s);
        k_iteration(&it);
    }
    if (es) {
        drain(es, &pending_fd);
        if (iopilot_es_close(es) != 0) k_die("the I/O thread reported a failure at the end");
    }
    if (async && c.api == MPIIO) mpi_drain(&c, &mp[(steps - 1) % 2]);
    h5_join(&job);
    k_total_time(k_now() - run0);
    k_barrier();
    if (!keep && owner && unlink(name) != 0) k_die("remove %s: %s", name, strerror(errno));
    for (int i = 0; i < turns; i++) free(bufs[i]);
    for (int i = 0; i < 2; i++) {
        free(mp[i].reqs);
        free(mp[i].sts);
        free(mp[i].lens);
    }
    if (c.comm != MPI_COMM_WORLD) MPI_Comm_free(&c.comm);
    return k_finish();
}
