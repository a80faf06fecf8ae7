/* BD-CATS-IO: the particle read of h5bench, reading what vpicio.c wrote.
 *
 * The file layout is vpicio's: one file, group /Timestep_<s> per step, eight
 * 1-D datasets (x, y, z, px, py, pz: float32; id1, id2: int32).  The reader
 * takes the total particle count from the datasets and splits it evenly over
 * its own ranks (the first total % ranks get one more), so it runs with any
 * number of ranks, not only the writer's.
 *
 * Modes (per rank, within its block [offset, offset + count)):
 *   full      every particle of the block;
 *   partial   the first floor(count * F) particles (--fraction F);
 *   strided   every S-th particle (--stride S), one strided hyperslab.
 * Every value read is compared with the writer's pattern, a function of
 * (global index, variable, step); one wrong value -> k_verify_failed, exit 3.
 *
 * One k_iteration per step: open_s = group + dataset opens (plus H5Fopen in
 * step 0), read_s = the 8 H5Dread calls (verification is not timed), close_s
 * = dataset and group closes (plus H5Fclose in the last step).  meta_ops
 * counts H5Fopen, H5Gopen and H5Dopen calls. */
#include "common.h"
#include "vpic_layout.h"

#include <hdf5.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const char usage[] =
    "usage: bdcats [--file PATH] [--steps S] [--mode full|partial|strided]\n"
    "              [--fraction F] [--stride S] [--collective] [--coll-metadata]\n"
    "  reads and verifies the particles vpicio wrote to PATH (default vpicio.h5)\n";


static long long h5(long long status, const char *what) {
    if (status < 0) k_die("%s failed", what);
    return status;
}

static void check_options(int argc, char **argv) {
    static const char *const valued[] = {"--file", "--steps", "--mode", "--fraction", "--stride", NULL};
    static const char *const flags[] = {"--collective", "--coll-metadata", NULL};
    k_check_options(argc, argv, valued, flags, usage);
}

/* Compare n values read at global indices first, first + stride, ... */
static void verify(const void *buf, int v, int step, long long first, long long stride,
                   long long n) {
    for (long long j = 0; j < n; j++) {
        long long g = first + j * stride;
        uint32_t h = vpic_hash(g, v, step);
        if (var_is_int[v]) {
            int32_t got = ((const int32_t *)buf)[j], want = (int32_t)h;
            if (got != want)
                k_verify_failed("Timestep_%d/%s[%lld] = %" PRId32 ", expected %" PRId32, step,
                                var_name[v], g, got, want);
        } else {
            float got = ((const float *)buf)[j], want = (float)(h >> 8) / 256.0f;
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
    double fraction = k_opt_double(argc, argv, "--fraction", 0.5);
    long long stride = k_opt_int(argc, argv, "--stride", 2);
    int collective = k_opt_flag(argc, argv, "--collective");
    int coll_meta = k_opt_flag(argc, argv, "--coll-metadata");
    if (steps < 1) k_die("--steps must be >= 1");
    if (strcmp(mode, "full") && strcmp(mode, "partial") && strcmp(mode, "strided"))
        k_usage_die(usage, "--mode must be full, partial or strided, not '%s'", mode);
    if (!strcmp(mode, "partial") && !(fraction > 0 && fraction <= 1))
        k_die("--fraction must be in (0, 1]");
    if (!strcmp(mode, "strided") && stride < 1) k_die("--stride must be >= 1");
    if (strcmp(mode, "strided")) stride = 1;

    k_param_str("file", path);
    k_param_int("steps", steps);
    k_param_str("mode", mode);
    if (!strcmp(mode, "partial"))
        k_param_str("fraction", k_opt_str(argc, argv, "--fraction", "0.5"));
    k_param_int("stride", stride);
    k_param_int("collective", collective);
    k_param_int("coll_metadata", coll_meta);

    hid_t fapl = h5(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate");
    h5(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL), "H5Pset_fapl_mpio");
    if (coll_meta) h5(H5Pset_all_coll_metadata_ops(fapl, 1), "H5Pset_all_coll_metadata_ops");
    hid_t dxpl = h5(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate");
    h5(H5Pset_dxpl_mpio(dxpl, collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT),
       "H5Pset_dxpl_mpio");

    hid_t file = -1;
    void *buf = NULL;
    long long total = -1, offset = 0, count = 0, nread = 0;
    for (int s = 0; s < steps; s++) {
        k_iter it = {.verified = -1};
        hid_t dset[NVARS];
        char group_name[64];
        snprintf(group_name, sizeof group_name, "Timestep_%d", s);
        k_barrier();

        double t0 = k_now();
        if (s == 0) {
            file = h5(H5Fopen(path, H5F_ACC_RDONLY, fapl), "H5Fopen");
            it.meta_ops++;
        }
        /* Checked first, so a file with fewer steps gets a clear message. */
        if (H5Lexists(file, group_name, H5P_DEFAULT) <= 0)
            k_die("%s has no group %s (written with fewer --steps?)", path, group_name);
        hid_t group = h5(H5Gopen2(file, group_name, H5P_DEFAULT), "H5Gopen2");
        it.meta_ops++;
        for (int v = 0; v < NVARS; v++) {
            dset[v] = h5(H5Dopen2(group, var_name[v], H5P_DEFAULT), "H5Dopen2");
            it.meta_ops++;
        }
        double t1 = k_now();

        /* The same number of particles in every dataset of every step. */
        hid_t space = h5(H5Dget_space(dset[0]), "H5Dget_space");
        hsize_t dims = 0;
        if (H5Sget_simple_extent_ndims(space) != 1) k_die("%s/x is not 1-D", group_name);
        H5Sget_simple_extent_dims(space, &dims, NULL);
        H5Sclose(space);
        if (total < 0) {
            /* Even split over this job's ranks, independent of the writer's. */
            total = (long long)dims;
            long long base = total / k_size, extra = total % k_size;
            count = base + (k_rank < extra);
            offset = k_rank * base + (k_rank < extra ? k_rank : extra);
            nread = !strcmp(mode, "partial") ? (long long)((double)count * fraction)
                                             : (count + stride - 1) / stride;
            if (!(buf = malloc((size_t)(nread > 0 ? nread : 1) * 4))) k_die("out of memory");
            k_param_int("total_particles", total);
            k_note("mode %s: rank 0 reads %lld of its %lld particles per variable", mode, nread,
                   count);
        } else if ((long long)dims != total) {
            k_die("%s has %llu particles, step 0 had %lld", group_name, (unsigned long long)dims,
                  total);
        }
        hsize_t one = 1, start = (hsize_t)offset, hstride = (hsize_t)stride, n = (hsize_t)nread;
        hid_t filespace = h5(H5Screate_simple(1, &dims, NULL), "H5Screate_simple");
        hid_t memspace = h5(H5Screate_simple(1, nread > 0 ? &n : &one, NULL), "H5Screate_simple");
        if (nread > 0) {
            h5(H5Sselect_hyperslab(filespace, H5S_SELECT_SET, &start, &hstride, &n, NULL),
               "H5Sselect_hyperslab");
        } else { /* still takes part in collective reads */
            H5Sselect_none(filespace);
            H5Sselect_none(memspace);
        }

        double read_s = 0;
        for (int v = 0; v < NVARS; v++) {
            hid_t mtype = var_is_int[v] ? H5T_NATIVE_INT32 : H5T_NATIVE_FLOAT;
            double r0 = k_now();
            h5(H5Dread(dset[v], mtype, memspace, filespace, dxpl, buf), "H5Dread");
            read_s += k_now() - r0;
            if (nread > 0) {
                it.read_ops++;
                it.bytes_read += nread * 4;
                verify(buf, v, s, offset, stride, nread);
                it.verified = 1;
            }
        }
        H5Sclose(memspace);
        H5Sclose(filespace);

        double t2 = k_now();
        for (int v = 0; v < NVARS; v++) h5(H5Dclose(dset[v]), "H5Dclose");
        h5(H5Gclose(group), "H5Gclose");
        if (s == steps - 1) h5(H5Fclose(file), "H5Fclose");
        double t3 = k_now();

        it.open_s = t1 - t0;
        it.read_s = read_s;
        it.close_s = t3 - t2;
        k_iteration(&it);
    }

    H5Pclose(dxpl);
    H5Pclose(fapl);
    free(buf);
    return k_finish();
}
