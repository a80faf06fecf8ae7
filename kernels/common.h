/* Shared plumbing of the iopilot I/O kernels: options, timing, checks and
 * the one-line result every kernel prints for `iopilot bench`.
 *
 * Result contract: rank 0 prints, as its last line on stdout,
 *   IOPILOT-RESULT {"kernel": ..., "ranks": N, "params": {...},
 *                   "iterations": [{...}, ...], "notes": [...]}
 * Each iteration holds open_s, write_s, read_s, close_s (the slowest rank's
 * time of each phase), bytes_written, bytes_read, write_ops, read_ops,
 * meta_ops (sums over ranks of what the calls really moved/did) and
 * verified (true, false, or null when the kernel did not check data),
 * then any extra fields the kernel added with k_extra_time/k_extra_count.
 * A verification failure also makes the kernel exit with status 3. */
#ifndef IOPILOT_KERNEL_COMMON_H
#define IOPILOT_KERNEL_COMMON_H

#include <mpi.h>

typedef struct {
    double open_s, write_s, read_s, close_s;
    long long bytes_written, bytes_read, write_ops, read_ops, meta_ops;
    int verified; /* -1: not checked, 0: a wrong byte was read, 1: all bytes right */
} k_iter;

extern int k_rank, k_size;

void k_init(int *argc, char ***argv, const char *kernel); /* MPI_Init + result start */
/* k_init with MPI_Init_thread: stops (k_die) when MPI provides less than ``required``. */
void k_init_thread(int *argc, char ***argv, const char *kernel, int required);
double k_now(void);                                       /* MPI_Wtime */
void k_barrier(void);

/* Options are "--name value" or "--flag".  Sizes accept k, m, g suffixes (KiB...). */
long long k_opt_size(int argc, char **argv, const char *name, long long dflt);
long k_opt_int(int argc, char **argv, const char *name, long dflt);
double k_opt_double(int argc, char **argv, const char *name, double dflt);
const char *k_opt_str(int argc, char **argv, const char *name, const char *dflt);
int k_opt_flag(int argc, char **argv, const char *name);

/* Accept only the listed options ("--name value" and "--flag"; both lists end
 * with NULL): anything else prints ``usage`` and stops the job (status 2).
 * A lone "--list-options" prints the two lists as one line
 *   IOPILOT-OPTIONS {"kernel": ..., "valued": [...], "flags": [...]}
 * and exits 0.  Integer options take k, m, g suffixes (powers of 2). */
void k_check_options(int argc, char **argv, const char *const *valued,
                     const char *const *flags, const char *usage);

/* Print ``usage`` once (rank 0), then stop like k_die: for bad option values. */
void k_usage_die(const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* Stop the whole job with one line on stderr and exit status 2. */
void k_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* A call's status passed through, or k_die("WHAT failed") when negative
 * (HDF5's herr_t and hid_t both fit). */
long long k_h5(long long status, const char *what);
/* k_die("WHAT: <MPI's message>") unless rc is MPI_SUCCESS. */
void k_mpi_check(int rc, const char *what);
/* The data read back is wrong: the first such message of the rank is kept
 * and the kernel goes on; k_finish then ends every rank with status 3, the
 * failing ranks' messages on stderr.  (Not MPI_Abort: the job ends together,
 * through MPI_Finalize, so mpirun's own clean-up never races the abort.) */
void k_verify_failed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Whether this rank found wrong data so far. */
int k_verify_failed_yet(void);

/* Record parameters and notes for the result line (rank 0 keeps them). */
void k_param_int(const char *key, long long value);
void k_param_str(const char *key, const char *value);
void k_param_double(const char *key, double value);
void k_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Optional extra fields of the next k_iteration, printed after "verified"
 * (kernels that add none print exactly the fields above).  Every rank must
 * add the same keys in the same order: times are combined with the maximum
 * over ranks, counts with the sum.  At most 24 per iteration. */
void k_extra_time(const char *key, double seconds);
void k_extra_count(const char *key, long long n);

/* Combine this rank's iteration over all ranks and append it to the result. */
void k_iteration(const k_iter *mine);
/* The wall time of the whole run on this rank: the slowest rank's goes into
 * the result as "total_s" (collective). */
void k_total_time(double seconds);
/* Print the result line, MPI_Finalize, and return the exit status. */
int k_finish(void);

/* A deterministic byte pattern: which rank wrote a byte, and where. */
static inline unsigned char k_pattern(long long offset, int seed) {
    unsigned long long x = (unsigned long long)offset * 0x9E3779B97F4A7C15ULL + (unsigned)seed;
    return (unsigned char)(x >> 56);
}

#endif
