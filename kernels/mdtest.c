/* mdtest-style metadata kernel: each rank creates, stats, opens and closes
 * ("read"), then removes --files files, one phase at a time with barriers
 * between phases, so each phase's rate is ops / the slowest rank's time.
 *
 * Files.  Shared directory: DIR/f.<rank>.<i>; with --unique-dir each rank
 * works in DIR/rank.<rank as %08d>/f.<rank>.<i>.  DIR is created when missing
 * (and then removed at the end); the per-rank directories are created before
 * and removed after all iterations, outside every timed phase.  With
 * --bytes B each file gets B bytes at creation (write calls in the create
 * phase), read back and checked in the read phase: byte j of file i of
 * rank r is k_pattern(j, r * files + i).  Creation uses O_EXCL, so a file
 * left by an earlier run stops the kernel instead of being reused.
 *
 * Result.  One k_iteration per iteration, with extra fields per phase:
 *   file_create_s, file_create_ops, file_stat_s, file_stat_ops,
 *   file_read_s, file_read_ops, file_remove_s, file_remove_ops
 * (times: the slowest rank's phase time; ops: files handled, summed over
 * ranks; the rate of a phase is file_<phase>_ops / file_<phase>_s).  The
 * standard fields: write_s = file_create_s and read_s = file_read_s (the
 * phases that move data), open_s = close_s = 0; bytes_*, write_ops,
 * read_ops are the data calls; meta_ops counts every open, close, stat and
 * unlink.  verified is true when --bytes > 0 and every byte and every
 * stat'ed size was right, null with --bytes 0 (only sizes checked).  Phase
 * times exclude the generating and checking of file contents. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "usage: mdtest [--files N] [--dir PATH] [--unique-dir] [--bytes B] [--iterations N]\n"
    "  defaults: 1000 files per rank in one shared directory (iopilot-mdtest),\n"
    "  empty files, 1 iteration; phases create, stat, read (open+close), remove\n";

static void check_options(int argc, char **argv) {
    static const char *const valued[] = {"--files", "--dir", "--bytes", "--iterations", NULL};
    static const char *const flags[] = {"--unique-dir", NULL};
    k_check_options(argc, argv, valued, flags, usage);
}

static const unsigned long long K_MUL = 0x9E3779B97F4A7C15ULL; /* as k_pattern */

static void fill(unsigned char *buf, long long n, int seed) {
    unsigned long long x = (unsigned)seed;
    for (long long i = 0; i < n; i++, x += K_MUL) buf[i] = (unsigned char)(x >> 56);
}

static long long mismatch(const unsigned char *buf, long long n, int seed) {
    for (long long i = 0; i < n; i++)
        if (buf[i] != k_pattern(i, seed)) return i;
    return -1;
}

static char dir[4096];
static long long files;

static void file_name(char *out, size_t cap, long long i) {
    snprintf(out, cap, "%s/f.%d.%lld", dir, k_rank, i);
}

enum phase { CREATE, STAT, READ, REMOVE, NPHASES };
static const char *const phase_name[NPHASES] = {"create", "stat", "read", "remove"};

/* Run one phase over this rank's files; returns its time without data work. */
static double run_phase(enum phase p, long long bytes, unsigned char *buf, k_iter *it,
                        long long *ops) {
    char name[4200];
    double t_data = 0;
    k_barrier();
    double t0 = k_now();
    for (long long i = 0; i < files; i++) {
        int seed = (int)((long long)k_rank * files + i);
        file_name(name, sizeof name, i);
        if (p == CREATE) {
            int fd = open(name, O_CREAT | O_EXCL | O_WRONLY, 0644);
            if (fd < 0 && errno == EEXIST) k_die("%s exists (left by an earlier run?)", name);
            if (fd < 0) k_die("create %s: %s", name, strerror(errno));
            if (bytes) {
                double d0 = k_now();
                fill(buf, bytes, seed);
                t_data += k_now() - d0;
                for (long long done = 0; done < bytes;) {
                    ssize_t n = write(fd, buf + done, (size_t)(bytes - done));
                    it->write_ops++;
                    if (n < 0 && errno == EINTR) continue;
                    if (n <= 0) k_die("write %s: %s", name, strerror(errno));
                    done += n;
                    it->bytes_written += n;
                }
            }
            if (close(fd) != 0) k_die("close %s: %s", name, strerror(errno));
            it->meta_ops += 2;
        } else if (p == STAT) {
            struct stat st;
            if (stat(name, &st) != 0) k_die("stat %s: %s", name, strerror(errno));
            it->meta_ops++;
            if (st.st_size != bytes)
                k_verify_failed("%s has %lld bytes, expected %lld", name, (long long)st.st_size,
                                bytes);
        } else if (p == READ) {
            int fd = open(name, O_RDONLY);
            if (fd < 0) k_die("open %s: %s", name, strerror(errno));
            long long done = 0;
            while (done < bytes) {
                ssize_t n = read(fd, buf + done, (size_t)(bytes - done));
                it->read_ops++;
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) k_die("read %s: %s", name, strerror(errno));
                if (n == 0) break;
                done += n;
                it->bytes_read += n;
            }
            if (close(fd) != 0) k_die("close %s: %s", name, strerror(errno));
            it->meta_ops += 2;
            double d0 = k_now();
            if (done != bytes)
                k_verify_failed("%s: read %lld of %lld bytes", name, done, bytes);
            long long bad = done == bytes ? mismatch(buf, bytes, seed) : -1;
            if (bad >= 0)
                k_verify_failed("%s: byte %lld is 0x%02x, expected 0x%02x", name, bad, buf[bad],
                                k_pattern(bad, seed));
            if (bytes && !k_verify_failed_yet()) it->verified = 1;
            t_data += k_now() - d0;
        } else {
            if (unlink(name) != 0) k_die("remove %s: %s", name, strerror(errno));
            it->meta_ops++;
        }
        (*ops)++;
    }
    return k_now() - t0 - t_data;
}

int main(int argc, char **argv) {
    k_init(&argc, &argv, "mdtest");
    check_options(argc, argv);
    files = k_opt_int(argc, argv, "--files", 1000);
    const char *base = k_opt_str(argc, argv, "--dir", "iopilot-mdtest");
    int unique = k_opt_flag(argc, argv, "--unique-dir");
    long long bytes = k_opt_size(argc, argv, "--bytes", 0);
    long iterations = k_opt_int(argc, argv, "--iterations", 1);
    if (files < 1) k_usage_die(usage, "%s%s", "--files must be >= 1", "");
    if (iterations < 1) k_usage_die(usage, "%s%s", "--iterations must be >= 1", "");
    if (bytes > (1LL << 30)) k_usage_die(usage, "%s%s", "--bytes must be at most 1g", "");

    k_param_int("files", files);
    k_param_str("dir", base);
    k_param_int("unique_dir", unique);
    k_param_int("bytes", bytes);
    k_param_int("iterations", iterations);
    k_note("phases in order: create, stat, read (open+close), remove; "
           "rate = file_<phase>_ops / file_<phase>_s");

    /* Directories, outside the timed phases. */
    int made_base = 0;
    if (k_rank == 0) {
        if (mkdir(base, 0755) == 0) made_base = 1;
        else if (errno != EEXIST) k_die("mkdir %s: %s", base, strerror(errno));
    }
    k_barrier();
    if (unique) {
        snprintf(dir, sizeof dir, "%s/rank.%08d", base, k_rank);
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) k_die("mkdir %s: %s", dir, strerror(errno));
    } else {
        snprintf(dir, sizeof dir, "%s", base);
    }

    unsigned char *buf = malloc(bytes ? (size_t)bytes : 1);
    if (!buf) k_die("out of memory for %lld bytes", bytes);

    for (long n = 0; n < iterations; n++) {
        k_iter it = {.verified = -1};
        double t[NPHASES];
        long long ops[NPHASES] = {0};
        for (int p = 0; p < NPHASES; p++) t[p] = run_phase((enum phase)p, bytes, buf, &it, &ops[p]);
        it.write_s = t[CREATE];
        it.read_s = t[READ];
        for (int p = 0; p < NPHASES; p++) {
            char key[32];
            snprintf(key, sizeof key, "file_%s_s", phase_name[p]);
            k_extra_time(key, t[p]);
            snprintf(key, sizeof key, "file_%s_ops", phase_name[p]);
            k_extra_count(key, ops[p]);
        }
        k_iteration(&it);
    }

    k_barrier();
    if (unique && rmdir(dir) != 0) k_die("rmdir %s: %s", dir, strerror(errno));
    k_barrier();
    if (made_base && rmdir(base) != 0) k_die("rmdir %s: %s", base, strerror(errno));
    free(buf);
    return k_finish();
}
