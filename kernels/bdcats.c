/* BD-CATS-IO: the particle read of h5bench, reading what vpicio.c wrote.
 *
 * The file layout is vpicio's (h5bench's): one file, group /Timestep_<s> per
 * step, eight 1-D datasets x y z px py pz id_2 (float32) and id_1 (int32).
 * The reader takes the total particle count from the datasets and splits it
 * evenly over its own ranks (the first total % ranks get one more), so it
 * runs with any number of ranks, not only the writer's.
 *
 * Modes (per rank, within its block [offset, offset + count)):
 *   full      every particle of the block, or the first N (--particles N,
 *             as h5bench's FULL read of DIM_1 particles per rank);
 *   partial   the first N (--particles N, h5bench's TO_READ_NUM_PARTICLES)
 *             or the first floor(count * F) particles (--fraction F);
 *   strided   blocks of B particles (--block, default 1) every S particles
 *             (--stride), --blocks K of them (default: all that fit), one
 *             strided hyperslab, as h5bench's STRIDED read.
 * Every value read, of every variable (the int id_1 too), is compared with
 * the writer's pattern, a function of (global index, variable, step); one
 * wrong value -> k_verify_failed naming Timestep_<s>/<variable>[index], exit 3.
 *
 * One k_iteration per step: open_s = group + dataset opens (plus H5Fopen in
 * step 0), read_s = the 8 H5Dread calls, close_s = dataset and group closes
 * (plus H5Fclose in the last step), each the slowest rank's.  The check comes
 * after all 8 reads, outside read_s, and is the extra field check_s (slowest
 * rank).  --compute sleeps after each step but the last (compute_s);
 * --delay-close D keeps a step's datasets and group open until step s + D
 * (h5bench's DELAYED_CLOSE_TIMESTEPS), the last step closing all.
 * meta_ops counts H5Fopen, H5Gopen and H5Dopen calls. */
#include "common.h"
#include "vpic_layout.h"

#include <hdf5.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


static const char usage[] =
    "usage: bdcats [--file PATH] [--steps S] [--mode full|partial|strided]\n"
    "              [--particles N] [--fraction F] [--stride S] [--block B] [--blocks K]\n"
    "              [--collective] [--coll-metadata] [--compute SECONDS]\n"
    "              [--delay-close STEPS]\n"
    "  reads and verifies the particles vpicio wrote to PATH (default vpicio.h5)\n";

static void check_options(int argc, char **argv) {
    static const char *const valued[] = {"--file",   "--steps",  "--mode",  "--particles",
                                         "--fraction", "--stride", "--block", "--blocks",
                                         "--compute",  "--delay-close", NULL};
    static const char *const flags[] = {"--collective", "--coll-metadata", NULL};
    k_check_options(argc, argv, valued, flags, usage);
}

static double sleep_for(double seconds) {
    double t0 = k_now();
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
    return k_now() - t0;
}

/* Compare the n values read: element j is global particle
 * first + (j / block) * stride + j % block. */
static void verify(const void *buf, int v, int step, long long first, long long stride,
                   long long block, long long n) {
    for (long long j = 0; j < n; j++) {
        long long g = first + (j / block) * stride + j % block;
        if (var_is_int[v]) {
            int32_t got = ((const int32_t *)buf)[j], want = vpic_int(g, v, step);
            if (got != want)
                k_verify_failed("Timestep_%d/%s[%lld] = %" PRId32 ", expected %" PRId32, step,
                                var_name[v], g, got, want);
        } else {
            float got = ((const float *)buf)[j], want = vpic_float(g, v, step);
            if (got != want) /* exact: the writer stores 24-bit integers / 256 */
                k_verify_failed("Timestep_%d/%s[%lld] = %.9g, expected %.9g", step, var_name[v],
                                g, (double)got, (double)want);
        }
    }
}

int main(int argc, char **argv) {
    k_init(&argc, &argv, "bdcats");
    check_options(argc, argv);
    const char *path = k_opt_str(argc, argv, "--file", "vpicio.h5");
    long steps = k_opt_int(argc, argv, "--steps", 1);
    const char *mode = k_opt_str(argc, argv, "--mode", "full");
    long long want = k_opt_int(argc, argv, "--particles", -1);
    double fraction = k_opt_double(argc, argv, "--fraction", 0.5);
    long long stride = k_opt_int(argc, argv, "--stride", 2);
    long long block = k_opt_int(argc, argv, "--block", 1);
    long long blocks = k_opt_int(argc, argv, "--blocks", -1);
    int collective = k_opt_flag(argc, argv, "--collective");
    int coll_meta = k_opt_flag(argc, argv, "--coll-metadata");
    double compute = k_opt_double(argc, argv, "--compute", 0.0);
    long delay = k_opt_int(argc, argv, "--delay-close", 0);
    int full = !strcmp(mode, "full"), partial = !strcmp(mode, "partial");
    int strided = !strcmp(mode, "strided");
    if (steps < 1) k_die("--steps must be >= 1");
    if (!full && !partial && !strided)
        k_usage_die(usage, "--mode must be full, partial or strided, not '%s'", mode);
    if (k_opt_str(argc, argv, "--particles", NULL) && (strided || want < 0))
        k_die("--particles: a count >= 0, with --mode full or partial");
    if (partial && want >= 0 && k_opt_str(argc, argv, "--fraction", NULL))
        k_die("--particles and --fraction: give one");
    if (partial && want < 0 && !(fraction > 0 && fraction <= 1))
        k_die("--fraction must be in (0, 1]");
    if (strided && (stride < 1 || block < 1 || block > stride))
        k_die("--stride and --block: 1 <= block <= stride");
    if (strided && k_opt_str(argc, argv, "--blocks", NULL) && blocks < 0)
        k_die("--blocks must be >= 0");
    if (compute < 0) k_die("--compute must be >= 0");
    if (delay < 0) k_die("--delay-close must be >= 0");
    if (!strided) stride = 1, block = 1;

    k_param_str("file", path);
    k_param_int("steps", steps);
    k_param_str("mode", mode);
    if (want >= 0) k_param_int("particles", want);
    else if (partial) k_param_str("fraction", k_opt_str(argc, argv, "--fraction", "0.5"));
    k_param_int("stride", stride);
    if (strided) k_param_int("block", block);
    k_param_int("collective", collective);
    k_param_int("coll_metadata", coll_meta);
    k_param_str("compute", k_opt_str(argc, argv, "--compute", "0"));
    k_param_int("delay_close", delay);

    hid_t fapl = k_h5(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate");
    k_h5(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL), "H5Pset_fapl_mpio");
    if (coll_meta) k_h5(H5Pset_all_coll_metadata_ops(fapl, 1), "H5Pset_all_coll_metadata_ops");
    hid_t dxpl = k_h5(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate");
    k_h5(H5Pset_dxpl_mpio(dxpl, collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT),
       "H5Pset_dxpl_mpio");

    hid_t file = -1;
    /* Dataset and group ids of every step (8 + 1 each), closed `delay` steps late. */
    hid_t *handles = malloc((size_t)steps * (NVARS + 1) * sizeof(hid_t));
    if (!handles) k_die("out of memory for %ld steps", steps);
    int closed = 0; /* first step whose ids are still open */
    void *buf[NVARS] = {NULL};
    long long total = -1, offset = 0, count = 0, nread = 0;
    for (int s = 0; s < steps; s++) {
        k_iter it = {.verified = -1};
        hid_t *dset = handles + (size_t)s * (NVARS + 1);
        char group_name[64];
        snprintf(group_name, sizeof group_name, "Timestep_%d", s);
        k_barrier();

        double t0 = k_now();
        if (s == 0) {
            file = k_h5(H5Fopen(path, H5F_ACC_RDONLY, fapl), "H5Fopen");
            it.meta_ops++;
        }
        /* Checked first, so a file with fewer steps gets a clear message. */
        if (H5Lexists(file, group_name, H5P_DEFAULT) <= 0)
            k_die("%s has no group %s (written with fewer --steps?)", path, group_name);
        hid_t group = dset[NVARS] = k_h5(H5Gopen2(file, group_name, H5P_DEFAULT), "H5Gopen2");
        it.meta_ops++;
        for (int v = 0; v < NVARS; v++) {
            if (H5Lexists(group, var_name[v], H5P_DEFAULT) <= 0)
                k_die("%s: no dataset %s/%s (not a VPIC-IO file?)", path, group_name,
                      var_name[v]);
            dset[v] = k_h5(H5Dopen2(group, var_name[v], H5P_DEFAULT), "H5Dopen2");
            it.meta_ops++;
        }
        double t1 = k_now();

        /* The same number of particles in every dataset of every step. */
        hsize_t dims = 0;
        for (int v = 0; v < NVARS; v++) {
            hid_t space = k_h5(H5Dget_space(dset[v]), "H5Dget_space");
            hsize_t d = 0;
            if (H5Sget_simple_extent_ndims(space) != 1)
                k_die("%s/%s is not 1-D", group_name, var_name[v]);
            H5Sget_simple_extent_dims(space, &d, NULL);
            H5Sclose(space);
            if (v && d != dims)
                k_die("%s/%s has %llu particles, %s/x has %llu", group_name, var_name[v],
                      (unsigned long long)d, group_name, (unsigned long long)dims);
            dims = d;
        }
        if (total < 0) {
            /* Even split over this job's ranks, independent of the writer's. */
            total = (long long)dims;
            long long base = total / k_size, extra = total % k_size;
            count = base + (k_rank < extra);
            offset = k_rank * base + (k_rank < extra ? k_rank : extra);
            if (want > count)
                k_die("--particles %lld: rank %d has only %lld of the %lld particles", want,
                      k_rank, count, total);
            if (strided) {
                long long fit = count >= block ? (count - block) / stride + 1 : 0;
                if (blocks > fit)
                    k_die("--blocks %lld: only %lld blocks of %lld every %lld fit in rank %d's "
                          "%lld particles", blocks, fit, block, stride, k_rank, count);
                if (blocks < 0) blocks = fit;
                nread = blocks * block;
            } else {
                nread = want >= 0 ? want : partial ? (long long)((double)count * fraction) : count;
            }
            for (int v = 0; v < NVARS; v++)
                if (!(buf[v] = malloc((size_t)(nread > 0 ? nread : 1) * 4))) k_die("out of memory");
            k_param_int("total_particles", total);
            k_note("mode %s: rank 0 reads %lld of its %lld particles per variable", mode, nread,
                   count);
        } else if ((long long)dims != total) {
            k_die("%s has %llu particles, step 0 had %lld", group_name, (unsigned long long)dims,
                  total);
        }
        hsize_t one = 1, start = (hsize_t)offset, hstride = (hsize_t)stride;
        hsize_t hcount = (hsize_t)(nread / block), hblock = (hsize_t)block, n = (hsize_t)nread;
        hid_t filespace = k_h5(H5Screate_simple(1, &dims, NULL), "H5Screate_simple");
        hid_t memspace = k_h5(H5Screate_simple(1, nread > 0 ? &n : &one, NULL), "H5Screate_simple");
        if (nread > 0) {
            k_h5(H5Sselect_hyperslab(filespace, H5S_SELECT_SET, &start, &hstride, &hcount, &hblock),
               "H5Sselect_hyperslab");
        } else { /* still takes part in collective reads */
            H5Sselect_none(filespace);
            H5Sselect_none(memspace);
        }

        /* Read all 8 variables, then check: no rank's checking delays another's read. */
        double r0 = k_now();
        for (int v = 0; v < NVARS; v++) {
            hid_t mtype = var_is_int[v] ? H5T_NATIVE_INT32 : H5T_NATIVE_FLOAT;
            k_h5(H5Dread(dset[v], mtype, memspace, filespace, dxpl, buf[v]), "H5Dread");
            if (nread > 0) {
                it.read_ops++;
                it.bytes_read += nread * 4;
            }
        }
        double r1 = k_now();
        H5Sclose(memspace);
        H5Sclose(filespace);

        double t2 = k_now();
        /* Steps up to s - delay, and in the last step every step still open. */
        int upto = s == steps - 1 ? s : s - (int)delay;
        vpic_close_steps(handles, &closed, upto);
        if (s == steps - 1) k_h5(H5Fclose(file), "H5Fclose");
        double t3 = k_now();

        double c0 = k_now();
        for (int v = 0; v < NVARS && nread > 0; v++) verify(buf[v], v, s, offset, stride, block, nread);
        if (nread > 0) it.verified = 1;
        double check_s = k_now() - c0;

        it.open_s = t1 - t0;
        it.read_s = r1 - r0;
        it.close_s = t3 - t2;
        k_extra_time("check_s", check_s);
        if (compute > 0) k_extra_time("compute_s", s < steps - 1 ? sleep_for(compute) : 0.0);
        k_iteration(&it);
    }

    free(handles);
    H5Pclose(dxpl);
    H5Pclose(fapl);
    for (int v = 0; v < NVARS; v++) free(buf[v]);
    return k_finish();
}
