/* VPIC-IO: the particle write of h5bench's VPIC-IO benchmark.
 *
 * Every time step, each rank writes its N particles as 8 variables into
 * eight 1-D contiguous datasets of one shared HDF5 file, with h5bench's
 * names and types: x, y, z, px, py, pz, id_2 (float32) and id_1 (int32).
 * As in h5bench the file is created once and holds one group per step,
 * /Timestep_<s>, each dataset sized to the total particle count, and no
 * attributes.  A rank's hyperslab starts at the prefix sum of the particle
 * counts of the ranks before it (MPI_Exscan).
 *
 * The values are a pure function of (global particle index, variable, step),
 * and the global index is (rank's prefix + particle index), so bdcats.c can
 * verify them with any number of ranks.  vpic_hash() in vpic_layout.h must stay equal
 * to the copy in tests/test_kernels_hdf5.py.
 *
 * One k_iteration per step: open_s = group + dataset creation (plus the file
 * creation in step 0), write_s = the 8 H5Dwrite calls, close_s = dataset and
 * group closes (plus H5Fclose, which flushes the metadata, in the last step).
 * --delay-close D (h5bench's DELAYED_CLOSE_TIMESTEPS) keeps a step's datasets
 * and group open until step s + D closes them; the last step closes all.
 * meta_ops counts H5Fcreate, H5Gcreate and H5Dcreate calls.  Every time is
 * the slowest rank's (k_iteration takes the maximum; h5bench prints rank
 * 0's).  --compute sleeps after each step but the last, as h5bench's
 * EMULATED_COMPUTE_TIME_PER_TIMESTEP; that time is in no phase and is the
 * extra field compute_s (slowest rank; 0 after the last step). */
#include "common.h"
#include "vpic_layout.h"

#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


static const char usage[] =
    "usage: vpicio [--file PATH] [--particles N] [--steps S] [--collective]\n"
    "              [--coll-metadata] [--align THRESHOLD:ALIGNMENT] [--chunk N]\n"
    "              [--compute SECONDS] [--delay-close STEPS]\n"
    "  writes PATH (default vpicio.h5) with groups Timestep_0..S-1, each holding\n"
    "  x y z px py pz id_2 (float32) and id_1 (int32) of N particles per rank\n";

/* Reject unknown options before touching any file. */
static void check_options(int argc, char **argv) {
    static const char *const valued[] = {"--file", "--particles", "--steps", "--align",
                                         "--chunk", "--compute", "--delay-close", NULL};
    static const char *const flags[] = {"--collective", "--coll-metadata", NULL};
    k_check_options(argc, argv, valued, flags, usage);
}

/* "4k:1m" -> threshold and alignment in bytes. */
static long long parse_size(const char *s, char **end) {
    double x = strtod(s, end);
    long long mult = 1;
    switch (**end) {
    case 'k': case 'K': mult = 1LL << 10; (*end)++; break;
    case 'm': case 'M': mult = 1LL << 20; (*end)++; break;
    case 'g': case 'G': mult = 1LL << 30; (*end)++; break;
    default: break;
    }
    return x < 0 || *end == s ? -1 : (long long)(x * (double)mult);
}

static double sleep_for(double seconds) {
    double t0 = k_now();
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
    return k_now() - t0;
}

int main(int argc, char **argv) {
    k_init(&argc, &argv, "vpicio");
    check_options(argc, argv);
    const char *path = k_opt_str(argc, argv, "--file", "vpicio.h5");
    long long n = k_opt_int(argc, argv, "--particles", 8192);
    long steps = k_opt_int(argc, argv, "--steps", 1);
    int collective = k_opt_flag(argc, argv, "--collective");
    int coll_meta = k_opt_flag(argc, argv, "--coll-metadata");
    const char *align = k_opt_str(argc, argv, "--align", NULL);
    long long chunk = k_opt_int(argc, argv, "--chunk", 0);
    double compute = k_opt_double(argc, argv, "--compute", 0.0);
    long delay = k_opt_int(argc, argv, "--delay-close", 0);
    if (n < 1) k_die("--particles must be >= 1");
    if (steps < 1) k_die("--steps must be >= 1");
    if (chunk < 0) k_die("--chunk must be >= 0 (0: contiguous)");
    if (compute < 0) k_die("--compute must be >= 0");
    if (delay < 0) k_die("--delay-close must be >= 0");
    long long threshold = 0, alignment = 0;
    if (align) {
        char *end;
        threshold = parse_size(align, &end);
        if (threshold >= 0 && *end == ':') alignment = parse_size(end + 1, &end);
        if (threshold < 0 || alignment <= 0 || *end)
            k_die("--align: expected THRESHOLD:ALIGNMENT (e.g. 0:1m), got '%s'", align);
    }

    long long offset = 0, total = 0;
    MPI_Exscan(&n, &offset, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (k_rank == 0) offset = 0; /* MPI_Exscan leaves rank 0's result undefined */
    MPI_Allreduce(&n, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    long long chunk_elems = chunk > total ? total : chunk; /* chunks may not exceed fixed dims */

    k_param_str("file", path);
    k_param_int("particles", n);
    k_param_int("total_particles", total);
    k_param_int("steps", steps);
    k_param_int("collective", collective);
    k_param_int("coll_metadata", coll_meta);
    k_param_str("align", align ? align : "none");
    k_param_int("chunk", chunk_elems);
    k_param_str("compute", k_opt_str(argc, argv, "--compute", "0"));
    k_param_int("delay_close", delay);
    k_note("one file, one group Timestep_<s> per step, 8 1-D datasets of %lld elements", total);

    /* Buffers are allocated once; values are refilled per step outside the timed phases. */
    void *buf[NVARS];
    for (int v = 0; v < NVARS; v++)
        if (!(buf[v] = malloc((size_t)n * 4))) k_die("out of memory for %lld particles", n);

    hid_t fapl = k_h5(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate");
    k_h5(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL), "H5Pset_fapl_mpio");
    if (coll_meta) {
        k_h5(H5Pset_all_coll_metadata_ops(fapl, 1), "H5Pset_all_coll_metadata_ops");
        k_h5(H5Pset_coll_metadata_write(fapl, 1), "H5Pset_coll_metadata_write");
    }
    if (align)
        k_h5(H5Pset_alignment(fapl, (hsize_t)threshold, (hsize_t)alignment), "H5Pset_alignment");
    hid_t dcpl = k_h5(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
    if (chunk_elems > 0) {
        hsize_t cdim = (hsize_t)chunk_elems;
        k_h5(H5Pset_chunk(dcpl, 1, &cdim), "H5Pset_chunk");
    }
    hid_t dxpl = k_h5(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate");
    k_h5(H5Pset_dxpl_mpio(dxpl, collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT),
       "H5Pset_dxpl_mpio");
    hsize_t dims = (hsize_t)total, start = (hsize_t)offset, count = (hsize_t)n;
    hid_t filespace = k_h5(H5Screate_simple(1, &dims, NULL), "H5Screate_simple");
    k_h5(H5Sselect_hyperslab(filespace, H5S_SELECT_SET, &start, NULL, &count, NULL),
       "H5Sselect_hyperslab");
    hid_t memspace = k_h5(H5Screate_simple(1, &count, NULL), "H5Screate_simple");

    hid_t file = -1;
    /* Dataset and group ids of every step (8 + 1 each), closed `delay` steps late. */
    hid_t *handles = malloc((size_t)steps * (NVARS + 1) * sizeof(hid_t));
    if (!handles) k_die("out of memory for %ld steps", steps);
    int closed = 0; /* first step whose ids are still open */
    for (int s = 0; s < steps; s++) {
        for (long long i = 0; i < n; i++)
            for (int v = 0; v < NVARS; v++) {
                if (var_is_int[v]) ((int32_t *)buf[v])[i] = vpic_int(offset + i, v, s);
                else ((float *)buf[v])[i] = vpic_float(offset + i, v, s);
            }
        k_iter it = {.verified = -1};
        hid_t *dset = handles + (size_t)s * (NVARS + 1), group;
        char group_name[64];
        snprintf(group_name, sizeof group_name, "Timestep_%d", s);
        k_barrier();

        double t0 = k_now();
        if (s == 0) {
            file = k_h5(H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "H5Fcreate");
            it.meta_ops++;
        }
        group = dset[NVARS] = k_h5(H5Gcreate2(file, group_name, H5P_DEFAULT, H5P_DEFAULT,
                                            H5P_DEFAULT), "H5Gcreate2");
        it.meta_ops++;
        for (int v = 0; v < NVARS; v++) {
            hid_t type = var_is_int[v] ? H5T_STD_I32LE : H5T_IEEE_F32LE;
            dset[v] = k_h5(H5Dcreate2(group, var_name[v], type, filespace, H5P_DEFAULT, dcpl,
                                    H5P_DEFAULT), "H5Dcreate2");
            it.meta_ops++;
        }
        double t1 = k_now();
        for (int v = 0; v < NVARS; v++) {
            hid_t mtype = var_is_int[v] ? H5T_NATIVE_INT32 : H5T_NATIVE_FLOAT;
            k_h5(H5Dwrite(dset[v], mtype, memspace, filespace, dxpl, buf[v]), "H5Dwrite");
            it.write_ops++;
            it.bytes_written += n * 4;
        }
        double t2 = k_now();
        /* Steps up to s - delay, and in the last step every step still open. */
        int upto = s == steps - 1 ? s : s - (int)delay;
        vpic_close_steps(handles, &closed, upto);
        if (s == steps - 1) k_h5(H5Fclose(file), "H5Fclose");
        double t3 = k_now();

        it.open_s = t1 - t0;
        it.write_s = t2 - t1;
        it.close_s = t3 - t2;
        /* Emulated computation after each step but the last (h5bench's
         * EMULATED_COMPUTE_TIME_PER_TIMESTEP), timed on every rank. */
        double compute_s = compute > 0 && s < steps - 1 ? sleep_for(compute) : 0.0;
        if (compute > 0) k_extra_time("compute_s", compute_s);
        k_iteration(&it);
    }
    if (compute > 0)
        k_note("emulated compute (sleep) after each step but the last: compute_s, in no phase");

    free(handles);
    H5Sclose(memspace);
    H5Sclose(filespace);
    H5Pclose(dxpl);
    H5Pclose(dcpl);
    H5Pclose(fapl);
    for (int v = 0; v < NVARS; v++) free(buf[v]);
    return k_finish();
}
