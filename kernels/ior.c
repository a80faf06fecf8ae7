/* IOR-style bandwidth kernel: every rank writes, then reads back,
 * `segments` blocks of `block` bytes in transfers of `transfer` bytes,
 * through POSIX, MPI-IO or HDF5 (one table of functions per API, as IOR's
 * backends).  Options are named after IOR's (see kernels/README.md).
 *
 * Layout (IOR's segmented layout).  In one shared file, transfer k of
 * segment s of rank r sits at
 *     (s * ranks + r) * block + k * transfer;
 * with --fpp rank r has its own file PATH.<r as %08d> (with --unique-dir in
 * DIR/<r>/, with --multi-file a ".<iteration>" suffix) and the same transfer
 * sits at s * block + k * transfer.  HDF5 holds the bytes in one 1-D
 * dataset "/data" of H5T_NATIVE_UCHAR, one hyperslab per transfer.
 * --random-offset visits the transfers of each block in a shuffled order
 * (the same order in every segment and for every rank), still each once.
 *
 * Data (IOR's convention: the buffer is made once per phase, before the
 * timed region; inside it only a few words per transfer change).  The
 * logical offset L of a byte is its shared-file offset (also with --fpp);
 * the owner is rank (L / block) % ranks.  With packet type "timestamp"
 * (IOR's default) every transfer of a rank carries the same bytes:
 *     byte L = k_pattern(owner * transfer + L % transfer, seed).
 * With "offset" or "incompressible" the first 8 bytes of every 4 KiB of a
 * transfer starting at T are then overwritten, just before the transfer's
 * write, by the little-endian 64-bit word (T + 4096 m) * 0x9E3779B97F4A7C15
 * + seed (m = 0, 1, ...; only where 8 bytes fit).  The base bytes already
 * do not compress, so "incompressible" is the same as "offset" here.  The
 * seed is the iteration number (IOR uses a time stamp); a read-only run
 * expects seed 0 (with --multi-file: the iteration number).
 *
 * Timing (as IOR).  Each phase: barrier, t0, open, [barrier with
 * --intra-test-barriers], transfers (+ fsync), [barrier], close, t1, barrier.
 * A phase's time is the latest end minus the earliest start over ranks;
 * write_total_s / read_total_s span open to close, the time IOR divides the
 * bytes by.  Nothing is checked inside a timed phase: --check-write reads
 * the data back after the write phase and --check-read (the default) after
 * the read phase, each in an untimed pass of its own (check_s).  meta_ops
 * counts open, close and sync calls (HDF5: file and dataset create/open/
 * close, H5Fflush).  Files are removed after each iteration unless --keep; a
 * read-only run never removes anything. */
#define _GNU_SOURCE 1 /* O_DIRECT; before any system header */
#include "ior.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "usage: ior [--api posix|mpiio|hdf5] [--block SIZE] [--transfer SIZE] [--segments N]\n"
    "           [--fpp] [--collective] [--fsync] [--odirect] [--write] [--read]\n"
    "           [--iterations N] [--file PATH] [--keep] [--hint KEY=VALUE]...\n"
    "           [--check-write] [--check-read] [--check] [--no-check]\n"
    "           [--random-offset] [--reorder-tasks] [--reorder-tasks-random]\n"
    "           [--read-cache page|shift|drop] [--deadline-for-stonewalling SECONDS]\n"
    "           [--fsync-per-write] [--use-existing-file] [--unique-dir] [--multi-file]\n"
    "           [--data-packet-type timestamp|offset|incompressible] [--inter-test-delay S]\n"
    "           [--intra-test-barriers]\n"
    "  IOR spellings: -a -b -t -s -F -c -e -w -r -i -o -k -W -R -z -C -Z -D -Y -E -u -m\n"
    "  -l -d -g (--reorder = -C, --dataPacketType = -l)\n"
    "  defaults: posix, block 1m, transfer 256k, 1 segment, one shared file\n"
    "  (iopilot-ior.dat), write and read, 1 iteration, file removed at the end;\n"
    "  the data read is checked (after the timed read, untimed; --no-check: never),\n"
    "  data packet type timestamp, reads from the page cache (--read-cache page)\n";

ior_options cfg; /* options every backend may look at */

/* ---- options --------------------------------------------------------------- */

static int g_argc;
static char **g_argv;

/* The first of the spellings given on the command line (else the first). */
static const char *pick(const char *a, const char *b, const char *c) {
    if (b && k_opt_flag(g_argc, g_argv, b)) return b;
    if (c && k_opt_flag(g_argc, g_argv, c)) return c;
    return a;
}
static int flag(const char *a, const char *b, const char *c) {
    return k_opt_flag(g_argc, g_argv, a) || (b && k_opt_flag(g_argc, g_argv, b)) ||
           (c && k_opt_flag(g_argc, g_argv, c));
}

static void check_options(void) {
    static const char *const valued[] = {
        "--api", "-a", "--block", "-b", "--transfer", "-t", "--segments", "-s", "--iterations",
        "-i", "--file", "-o", "--hint", "--read-cache", "--deadline-for-stonewalling", "-D",
        "--data-packet-type", "--dataPacketType", "-l", "--inter-test-delay", "-d", NULL};
    static const char *const flags[] = {
        "--fpp", "-F", "--collective", "-c", "--fsync", "-e", "--odirect", "--write", "-w",
        "--read", "-r", "--reorder", "--reorder-tasks", "-C", "--keep", "-k", "--check",
        "--no-check", "--check-write", "-W", "--check-read", "-R", "--random-offset", "-z",
        "--reorder-tasks-random", "-Z", "--fsync-per-write", "-Y", "--use-existing-file", "-E",
        "--unique-dir", "-u", "--multi-file", "-m", "--intra-test-barriers", "-g", NULL};
    k_check_options(g_argc, g_argv, valued, flags, usage);
}

/* ---- data ----------------------------------------------------------------- */

static const unsigned long long K_MUL = 0x9E3779B97F4A7C15ULL; /* as k_pattern */
enum { PK_TIMESTAMP, PK_OFFSET, PK_INCOMPRESSIBLE };
static const char *const packet_names[] = {"timestamp", "offset", "incompressible"};

/* A rank's transfer buffer: buf[j] = k_pattern(owner * n + j, seed). */
static void make_base(unsigned char *buf, long long n, int owner, int seed) {
    unsigned long long x = (unsigned long long)owner * (unsigned long long)n * K_MUL + (unsigned)seed;
    for (long long i = 0; i < n; i++, x += K_MUL) buf[i] = (unsigned char)(x >> 56);
}

/* The per-transfer change of the offset packet: one word per 4 KiB. */
static void stamp(unsigned char *buf, long long n, long long logical, int seed) {
    for (long long m = 0; m + 8 <= n; m += 4096) {
        unsigned long long w = (unsigned long long)(logical + m) * K_MUL + (unsigned)seed;
        for (int b = 0; b < 8; b++) buf[m + b] = (unsigned char)(w >> (8 * b));
    }
}

/* A small deterministic generator: every rank draws the same numbers. */
static unsigned long long rng_state;
static unsigned long long rng(void) {
    unsigned long long z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static void shuffle(long long *a, long long n, unsigned long long seed) {
    for (long long i = 0; i < n; i++) a[i] = i;
    rng_state = seed;
    for (long long i = n - 1; i > 0; i--) {
        long long j = (long long)(rng() % (unsigned long long)(i + 1)), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* ---- files ------------------------------------------------------------------ */

typedef struct {
    const backend *api;
    const char *path;
    long long block, transfer, segments, nk; /* nk: transfers per block */
    int fpp, fsync, fsync_per_write, unique_dir, multi_file, use_existing, barriers, packet;
    int check_write, check_read;
    double deadline;
    long long *order; /* visiting order of the transfers of a block */
} run_cfg;

static void file_name(char *out, size_t cap, const run_cfg *rc, int rank, long it_no) {
    const char *slash = strrchr(rc->path, '/');
    int n;
    if (rc->fpp && rc->unique_dir && slash)
        n = snprintf(out, cap, "%.*s/%d/%s", (int)(slash - rc->path), rc->path, rank, slash + 1);
    else if (rc->fpp && rc->unique_dir)
        n = snprintf(out, cap, "%d/%s", rank, rc->path);
    else
        n = snprintf(out, cap, "%s", rc->path);
    if (rc->fpp) n += snprintf(out + n, cap - (size_t)n, ".%08d", rank);
    if (rc->multi_file) snprintf(out + n, cap - (size_t)n, ".%ld", it_no);
}

/* The directory of a --unique-dir file (the name up to its last '/'). */
static void dir_of(char *name) {
    char *slash = strrchr(name, '/');
    if (slash) *slash = 0;
}

static void remove_file(const run_cfg *rc, long it_no) {
    char name[4200];
    file_name(name, sizeof name, rc, k_rank, it_no);
    /* another rank may still be reading or checking this rank's file (a
     * reordered read of the previous iteration, kept with --keep) */
    k_barrier();
    if ((rc->fpp || k_rank == 0) && unlink(name) != 0 && errno != ENOENT)
        k_die("remove %s: %s", name, strerror(errno));
    k_barrier();
}

/* --read-cache drop: flush, then ask the kernel to forget the file's pages. */
static void drop_cache(const char *name) {
    int fd = open(name, O_RDONLY);
    if (fd < 0) k_die("open %s: %s", name, strerror(errno));
    if (fdatasync(fd) != 0) k_die("fdatasync %s: %s", name, strerror(errno));
    int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (rc) k_die("posix_fadvise %s: %s", name, strerror(rc));
    close(fd);
}

/* The MPI-IO hints in effect, read back from an untimed open of the file. */
static void record_hints(const run_cfg *rc, long it_no) {
    static int done;
    if (done || rc->api == &backends[IOR_POSIX]) return;
    done = 1;
    char name[4200], hints[4096] = "", key[MPI_MAX_INFO_KEY + 1], value[1024];
    file_name(name, sizeof name, rc, k_rank, it_no);
    MPI_File fh;
    if (MPI_File_open(rc->fpp ? MPI_COMM_SELF : MPI_COMM_WORLD, name, MPI_MODE_RDONLY, cfg.info,
                      &fh) != MPI_SUCCESS) {
        k_note("could not open %s to read the MPI-IO hints in effect", name);
        return;
    }
    MPI_Info info;
    int nkeys = 0, romio = 0;
    MPI_File_get_info(fh, &info);
    MPI_Info_get_nkeys(info, &nkeys);
    for (int i = 0; i < nkeys; i++) {
        int found = 0;
        MPI_Info_get_nthkey(info, i, key);
        MPI_Info_get(info, key, (int)sizeof value - 1, value, &found);
        if (!found) continue;
        if (!strncmp(key, "romio_", 6) || !strcmp(key, "cb_buffer_size")) romio = 1;
        size_t len = strlen(hints);
        snprintf(hints + len, sizeof hints - len, "%s%s=%s", len ? "," : "", key, value);
    }
    MPI_Info_free(&info);
    MPI_File_close(&fh);
    /* Open MPI 4 returns only the hints it was given, so its choice is a guess. */
    const char *env = getenv("OMPI_MCA_io");
#ifdef OMPI_MAJOR_VERSION
    const char *fallback = "ompio (presumed: Open MPI's default)";
#else
    const char *fallback = "default";
#endif
    const char *component = env && *env ? env : romio ? "romio (from its hint names)" : fallback;
    k_param_str("mpiio_component", component);
    k_param_str("hints_in_effect", hints);
}

/* ---- time inside MPI-IO (to explain HDF5) ----------------------------------- */

/* With --api hdf5, how much of a phase HDF5 spends inside MPI-IO, so the
 * output can say what HDF5 itself adds (selections, datatypes, metadata).
 * These definitions take the place of libmpi's for calls from libhdf5 and
 * pass each call on to the next definition (the iopilot runtime when it is
 * preloaded, so tracing still sees them; else libmpi). */
static double mpiio_s;       /* this rank, since the phase began */
static long long mpiio_calls, mpiio_views;

#define NEXT(fn) \
    static __typeof__(&fn) next; \
    if (!next) next = (__typeof__(&fn))dlsym(RTLD_NEXT, #fn); \
    if (!next) return MPI_ERR_INTERN;
#define TIMED(call)            \
    double t0_ = MPI_Wtime();  \
    int rc_ = call;            \
    mpiio_s += MPI_Wtime() - t0_; \
    mpiio_calls++;             \
    return rc_;

int MPI_File_write_at_all(MPI_File fh, MPI_Offset off, const void *buf, int count,
                          MPI_Datatype type, MPI_Status *st) {
    NEXT(MPI_File_write_at_all)
    TIMED(next(fh, off, buf, count, type, st))
}
int MPI_File_write_at(MPI_File fh, MPI_Offset off, const void *buf, int count, MPI_Datatype type,
                      MPI_Status *st) {
    NEXT(MPI_File_write_at)
    TIMED(next(fh, off, buf, count, type, st))
}
int MPI_File_read_at_all(MPI_File fh, MPI_Offset off, void *buf, int count, MPI_Datatype type,
                         MPI_Status *st) {
    NEXT(MPI_File_read_at_all)
    TIMED(next(fh, off, buf, count, type, st))
}
int MPI_File_read_at(MPI_File fh, MPI_Offset off, void *buf, int count, MPI_Datatype type,
                     MPI_Status *st) {
    NEXT(MPI_File_read_at)
    TIMED(next(fh, off, buf, count, type, st))
}
int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype ftype,
                      const char *rep, MPI_Info info) {
    NEXT(MPI_File_set_view)
    mpiio_views++;
    TIMED(next(fh, disp, etype, ftype, rep, info))
}
int MPI_File_sync(MPI_File fh) {
    NEXT(MPI_File_sync)
    TIMED(next(fh))
}

/* ---- phases ------------------------------------------------------------------ */

typedef struct {
    double open_s, xfer_s, close_s, total_s, latency_s; /* over all ranks, as IOR */
    long long pairs;                                    /* transfers this rank did */
    double mpiio_s;                                     /* this rank's time in MPI-IO */
    long long mpiio_calls, mpiio_views;
    int hit;                                            /* this rank stonewalled */
} phase_out;

/* One timed open-transfers-close phase on owner's data; nothing is checked. */
static void timed_phase(const run_cfg *rc, int write, int owner, long it_no, int seed,
                        unsigned char *buf, long long limit, k_iter *it, phase_out *po) {
    char name[4200];
    file_name(name, sizeof name, rc, owner, it_no);
    handle h;
    memset(&h, 0, sizeof h);
    long long npairs = rc->segments * rc->nk, moved = 0, pairs = 0;
    if (limit >= 0 && limit < npairs) npairs = limit;
    long long *ops = write ? &it->write_ops : &it->read_ops;
    int hit = 0;
    double t[6];

    k_barrier();
    mpiio_s = 0;
    mpiio_calls = mpiio_views = 0;
    t[0] = k_now();
    rc->api->open(&h, name, write, !rc->fpp, &it->meta_ops);
    t[1] = k_now();
    if (rc->barriers) k_barrier();
    t[2] = k_now();
    for (long long p = 0; p < npairs && !hit; p++) {
        long long s = p / rc->nk, k = rc->order[p % rc->nk];
        long long logical = (s * k_size + owner) * rc->block + k * rc->transfer;
        long long off = rc->fpp ? s * rc->block + k * rc->transfer : logical;
        if (write && rc->packet != PK_TIMESTAMP) stamp(buf, rc->transfer, logical, seed);
        long long n = rc->api->xfer(&h, write, buf, rc->transfer, off, ops);
        if (n != rc->transfer && write)
            k_die("%s: wrote %lld of %lld bytes at %lld", name, n, rc->transfer, off);
        if (n != rc->transfer) {
            k_verify_failed("%s: read %lld of %lld bytes at offset %lld (file too short)", name,
                            n, rc->transfer, off);
            if (n < 0) n = 0;
        }
        moved += n;
        pairs++;
        if (write && rc->fsync_per_write) rc->api->sync(&h, &it->meta_ops);
        if (rc->deadline > 0) {
            hit = k_now() - t[2] > rc->deadline;
            /* collective calls need every rank to stop at the same transfer */
            if (cfg.collective)
                MPI_Allreduce(MPI_IN_PLACE, &hit, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        }
    }
    if (write && rc->fsync) rc->api->sync(&h, &it->meta_ops);
    t[3] = k_now();
    if (rc->barriers) k_barrier();
    t[4] = k_now();
    rc->api->close(&h, &it->meta_ops);
    t[5] = k_now();

    /* earliest start and latest end of each part over ranks (starts negated) */
    double r[6], lat = pairs ? (t[3] - t[2]) / (double)pairs : 0.0;
    for (int i = 0; i < 6; i++) r[i] = i % 2 ? t[i] : -t[i];
    MPI_Allreduce(MPI_IN_PLACE, r, 6, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &lat, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    po->open_s = r[1] + r[0];
    po->xfer_s = r[3] + r[2];
    po->close_s = r[5] + r[4];
    po->total_s = r[5] + r[0];
    po->latency_s = lat;
    po->pairs = pairs;
    po->hit = hit;
    po->mpiio_s = mpiio_s;
    po->mpiio_calls = mpiio_calls;
    po->mpiio_views = mpiio_views;
    *(write ? &it->bytes_written : &it->bytes_read) += moved;
}

/* Untimed: read owner's first `pairs` transfers again and compare every byte. */
static double check_pass(const run_cfg *rc, int owner, long it_no, int seed, unsigned char *buf,
                         unsigned char *expect, long long pairs) {
    double t0 = k_now();
    char name[4200];
    file_name(name, sizeof name, rc, owner, it_no);
    handle h;
    memset(&h, 0, sizeof h);
    long long uncounted = 0; /* the check's calls are not the benchmark's */
    rc->api->open(&h, name, 0, !rc->fpp, &uncounted);
    make_base(expect, rc->transfer, owner, seed);
    for (long long p = 0; p < pairs; p++) {
        long long s = p / rc->nk, k = rc->order[p % rc->nk];
        long long logical = (s * k_size + owner) * rc->block + k * rc->transfer;
        long long off = rc->fpp ? s * rc->block + k * rc->transfer : logical;
        buf[0] = (unsigned char)~expect[0]; /* a read that does nothing must not pass */
        long long n = rc->api->xfer(&h, 0, buf, rc->transfer, off, &uncounted);
        if (n != rc->transfer) {
            k_verify_failed("%s: read %lld of %lld bytes at offset %lld (file too short)", name,
                            n, rc->transfer, off);
            continue;
        }
        if (rc->packet != PK_TIMESTAMP) stamp(expect, rc->transfer, logical, seed);
        if (memcmp(buf, expect, (size_t)n)) {
            long long i = 0;
            while (buf[i] == expect[i]) i++;
            k_verify_failed("%s: byte at offset %lld is 0x%02x, expected 0x%02x "
                            "(rank %d's data, seed %d)",
                            name, off + i, buf[i], expect[i], owner, seed);
        }
    }
    rc->api->close(&h, &uncounted);
    return k_now() - t0;
}

static void delay(double seconds) {
    if (seconds <= 0) return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
}

static void *alloc_buffer(long long n) {
    void *p;
    if (posix_memalign(&p, 4096, (size_t)n))
        k_die("out of memory for a %lld-byte transfer buffer", n);
    memset(p, 0, (size_t)n); /* touch the pages before any timing */
    return p;
}

static void now_string(char *out, size_t cap) {
    time_t now = time(NULL);
    strftime(out, cap, "%a %b %d %H:%M:%S %Y", localtime(&now));
}

int main(int argc, char **argv) {
    k_init(&argc, &argv, "ior");
    g_argc = argc;
    g_argv = argv;
    check_options();
    char began[64];
    now_string(began, sizeof began);
    run_cfg rc = {0};
    const char *api = k_opt_str(argc, argv, pick("--api", "-a", NULL), "posix");
    for (size_t i = 0; i < (size_t)nbackends; i++)
        if (!strcasecmp(api, backends[i].name)) rc.api = &backends[i];
    if (!rc.api) k_usage_die(usage, "%s%s", "--api must be posix, mpiio or hdf5, not ", api);
    rc.path = k_opt_str(argc, argv, pick("--file", "-o", NULL), "iopilot-ior.dat");
    rc.block = k_opt_size(argc, argv, pick("--block", "-b", NULL), 1LL << 20);
    rc.transfer = k_opt_size(argc, argv, pick("--transfer", "-t", NULL), 256LL << 10);
    rc.segments = k_opt_int(argc, argv, pick("--segments", "-s", NULL), 1);
    long iterations = k_opt_int(argc, argv, pick("--iterations", "-i", NULL), 1);
    rc.fpp = flag("--fpp", "-F", NULL);
    rc.fsync = flag("--fsync", "-e", NULL);
    rc.fsync_per_write = flag("--fsync-per-write", "-Y", NULL);
    rc.use_existing = flag("--use-existing-file", "-E", NULL);
    rc.unique_dir = flag("--unique-dir", "-u", NULL);
    rc.multi_file = flag("--multi-file", "-m", NULL);
    rc.barriers = flag("--intra-test-barriers", "-g", NULL);
    int random_offset = flag("--random-offset", "-z", NULL);
    int reorder = flag("--reorder", "--reorder-tasks", "-C");
    int reorder_random = flag("--reorder-tasks-random", "-Z", NULL);
    rc.deadline = k_opt_double(argc, argv, pick("--deadline-for-stonewalling", "-D", NULL), 0);
    double inter_delay = k_opt_double(argc, argv, pick("--inter-test-delay", "-d", NULL), 0);
    const char *packet = k_opt_str(argc, argv, pick("--data-packet-type", "--dataPacketType", "-l"),
                                   "timestamp");
    const char *cache = k_opt_str(argc, argv, "--read-cache", "page");
    cfg.collective = flag("--collective", "-c", NULL);
    cfg.odirect = flag("--odirect", NULL, NULL);
    int keep = flag("--keep", "-k", NULL);
    int do_write = flag("--write", "-w", NULL), do_read = flag("--read", "-r", NULL);
    int no_check = flag("--no-check", NULL, NULL);
    int want_write_check = flag("--check-write", "-W", "--check");
    if (!do_write && !do_read) do_write = do_read = 1;

    if (rc.transfer <= 0 || rc.transfer > (1LL << 30))
        k_usage_die(usage, "%s%s", "--transfer must be between 1 byte and 1g", "");
    if (rc.block <= 0 || rc.block % rc.transfer)
        k_usage_die(usage, "%s%s", "--block must be a positive multiple of --transfer", "");
    if (rc.segments < 1) k_usage_die(usage, "%s%s", "--segments must be >= 1", "");
    if (iterations < 1) k_usage_die(usage, "%s%s", "--iterations must be >= 1", "");
    int is_posix = rc.api == &backends[IOR_POSIX];
    if (cfg.odirect && !is_posix) k_usage_die(usage, "%s%s", "--odirect needs --api posix", "");
    if (cfg.collective && is_posix) k_usage_die(usage, "%s%s", "--collective needs --api mpiio or hdf5", "");
    if (no_check && (want_write_check || flag("--check-read", "-R", NULL)))
        k_usage_die(usage, "%s%s", "--no-check cannot go with --check, --check-write or --check-read", "");
    rc.check_read = !no_check;
    rc.check_write = want_write_check;
    rc.packet = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(packet, packet_names[i]) || (packet[0] == packet_names[i][0] && !packet[1]))
            rc.packet = i;
    if (rc.packet < 0)
        k_usage_die(usage, "%s%s", "--data-packet-type must be timestamp, offset or incompressible "
                    "(t, o, i), not ", packet);
    int cache_mode = !strcmp(cache, "page") ? 0 : !strcmp(cache, "shift") ? 1 : !strcmp(cache, "drop") ? 2 : -1;
    if (cache_mode < 0) k_usage_die(usage, "%s%s", "--read-cache must be page, shift or drop, not ", cache);
    if (cache_mode == 1) reorder = 1;
    if (reorder && reorder_random)
        k_usage_die(usage, "%s%s", "choose one of --reorder-tasks (-C) and --reorder-tasks-random (-Z)", "");
    if (rc.unique_dir && !rc.fpp) k_usage_die(usage, "%s%s", "--unique-dir needs --fpp", "");
    if (rc.deadline < 0 || inter_delay < 0)
        k_usage_die(usage, "%s%s", "--deadline-for-stonewalling and --inter-test-delay must be >= 0", "");
    if (!do_write && rc.use_existing)
        k_usage_die(usage, "%s%s", "--use-existing-file needs a write phase", "");

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
    rc.nk = rc.block / rc.transfer;
    rc.order = malloc(sizeof *rc.order * (size_t)rc.nk);
    long long *owners = malloc(sizeof *owners * (size_t)k_size);
    long long *written = malloc(sizeof *written * (size_t)k_size);
    if (!rc.order || !owners || !written) k_die("out of memory");

    /* nodes: ranks that share memory count as one node */
    MPI_Comm node;
    int node_rank, node_size, nodes;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &node_rank);
    MPI_Comm_size(node, &node_size);
    int first = node_rank == 0;
    MPI_Allreduce(&first, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Comm_free(&node);

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
    k_param_int("reorder", reorder);
    k_param_int("keep", keep);
    k_param_str("file", rc.path);
    k_param_str("hints", hints);
    k_param_int("check_write", rc.check_write);
    k_param_int("check_read", rc.check_read);
    k_param_int("random_offset", random_offset);
    k_param_int("reorder_random", reorder_random);
    k_param_str("read_cache", cache_mode == 2 ? "drop" : reorder || reorder_random ? "shift" : "page");
    k_param_double("stonewall_s", rc.deadline);
    k_param_int("fsync_per_write", rc.fsync_per_write);
    k_param_int("use_existing_file", rc.use_existing);
    k_param_int("unique_dir", rc.unique_dir);
    k_param_int("multi_file", rc.multi_file);
    k_param_str("data_packet_type", packet_names[rc.packet]);
    k_param_double("inter_test_delay_s", inter_delay);
    k_param_int("intra_test_barriers", rc.barriers);
    k_param_int("nodes", nodes);
    k_param_int("tasks_per_node", node_size);
    {
        struct utsname u;
        char line[8192] = "", machine[600] = "";
        if (uname(&u) == 0) snprintf(machine, sizeof machine, "%s %s", u.sysname, u.nodename);
        for (int i = 0; i < argc; i++) {
            size_t len = strlen(line);
            snprintf(line + len, sizeof line - len, "%s%s", i ? " " : "", argv[i]);
        }
        k_param_str("machine", machine);
        k_param_str("command_line", line);
        k_param_str("began", began);
    }
    k_note("%s: %lld bytes per file", rc.fpp ? "file per process" : "one shared file",
           ranks_in_file * rc.segments * rc.block);
    if (cache_mode == 1 && nodes == 1)
        k_note("--read-cache shift on one node still reads from the shared page cache");

    int any_check = rc.check_write || (rc.check_read && do_read);
    unsigned char *wbuf = do_write ? alloc_buffer(rc.transfer) : NULL;
    unsigned char *rbuf = do_read || any_check ? alloc_buffer(rc.transfer) : NULL;
    unsigned char *ebuf = any_check ? alloc_buffer(rc.transfer) : NULL;

    for (long it_no = 0; it_no < iterations; it_no++) {
        k_iter it = {.verified = -1};
        phase_out w = {0}, r = {0};
        double check_s = 0;
        int seed = do_write || rc.multi_file ? (int)it_no : 0;
        shuffle(rc.order, rc.nk, (unsigned long long)seed * 2 + 1);
        if (!random_offset)
            for (long long i = 0; i < rc.nk; i++) rc.order[i] = i;
        char name[4200];
        if (do_write) {
            delay(inter_delay);
            if (rc.unique_dir) {
                file_name(name, sizeof name, &rc, k_rank, it_no);
                dir_of(name);
                if (mkdir(name, 0755) != 0 && errno != EEXIST)
                    k_die("mkdir %s: %s", name, strerror(errno));
            }
            if (!rc.use_existing) remove_file(&rc, it_no); /* start from no file, as IOR */
            make_base(wbuf, rc.transfer, k_rank, seed);
            timed_phase(&rc, 1, k_rank, it_no, seed, wbuf, -1, &it, &w);
            long long mine = w.pairs;
            MPI_Allgather(&mine, 1, MPI_LONG_LONG, written, 1, MPI_LONG_LONG, MPI_COMM_WORLD);
            record_hints(&rc, it_no);
            if (rc.check_write) {
                check_s += check_pass(&rc, k_rank, it_no, seed, rbuf, ebuf, w.pairs);
                it.verified = 1;
            }
        }
        if (do_read) {
            /* whose data each rank reads: its own, the next rank's, or a shuffle's */
            for (int i = 0; i < k_size; i++) owners[i] = i;
            if (reorder_random) shuffle(owners, k_size, (unsigned long long)seed * 2 + 2);
            int owner = (int)(reorder ? (k_rank + 1) % k_size : owners[k_rank]);
            delay(inter_delay);
            if (cache_mode == 2) {
                file_name(name, sizeof name, &rc, owner, it_no);
                if (rc.fpp || k_rank == 0) drop_cache(name);
            }
            if (!do_write) record_hints(&rc, it_no);
            /* after a stonewalled write, read what the owner wrote */
            long long limit = do_write && rc.deadline > 0 ? written[owner] : -1;
            timed_phase(&rc, 0, owner, it_no, seed, rbuf, limit, &it, &r);
            if (rc.check_read) {
                check_s += check_pass(&rc, owner, it_no, seed, rbuf, ebuf, r.pairs);
                it.verified = 1;
            }
        }
        if (do_write && !keep) {
            remove_file(&rc, it_no);
            if (rc.unique_dir) {
                file_name(name, sizeof name, &rc, k_rank, it_no);
                dir_of(name);
                rmdir(name); /* only when empty: other files stay */
            }
        }
        it.open_s = w.open_s + r.open_s;
        it.write_s = w.xfer_s;
        it.read_s = r.xfer_s;
        it.close_s = w.close_s + r.close_s;
        k_extra_time("write_total_s", w.total_s);
        k_extra_time("read_total_s", r.total_s);
        k_extra_time("write_open_s", w.open_s);
        k_extra_time("write_close_s", w.close_s);
        k_extra_time("read_open_s", r.open_s);
        k_extra_time("read_close_s", r.close_s);
        k_extra_time("write_latency_s", w.latency_s);
        k_extra_time("read_latency_s", r.latency_s);
        k_extra_time("check_s", check_s);
        if (rc.api == &backends[IOR_HDF5]) { /* hdf5: what of each phase was MPI-IO */
            k_extra_time("write_mpiio_s", w.mpiio_s);
            k_extra_count("write_mpiio_calls", w.mpiio_calls);
            k_extra_count("write_mpiio_views", w.mpiio_views);
            k_extra_time("read_mpiio_s", r.mpiio_s);
            k_extra_count("read_mpiio_calls", r.mpiio_calls);
            k_extra_count("read_mpiio_views", r.mpiio_views);
        }
        if (rc.deadline > 0) {
            k_extra_count("write_stonewalled", w.hit);
            k_extra_count("read_stonewalled", r.hit);
        }
        k_iteration(&it);
    }
    free(wbuf);
    free(rbuf);
    free(ebuf);
    free(rc.order);
    free(owners);
    free(written);
    if (cfg.info != MPI_INFO_NULL) MPI_Info_free(&cfg.info);
    char finished[64];
    now_string(finished, sizeof finished);
    k_param_str("finished", finished);
    return k_finish();
}
