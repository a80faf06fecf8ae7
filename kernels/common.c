#include "common.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int k_rank, k_size;
static char kernel_name[64];
static char params[8192] = "";
/* Iterations can be many (thousands of epochs): a stream that grows. */
static char *iters;
static size_t iters_len;
static FILE *iters_f;
static char notes[8192] = "";
static int n_iters;

static void append(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...) {
    size_t n = strlen(buf);
    if (n >= cap - 1) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}

/* JSON strings: escape quotes, backslashes and control characters. */
static void append_str(char *buf, size_t cap, const char *s) {
    append(buf, cap, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') append(buf, cap, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) append(buf, cap, "\\u%04x", (unsigned char)*s);
        else append(buf, cap, "%c", *s);
    }
    append(buf, cap, "\"");
}

void k_init(int *argc, char ***argv, const char *kernel) {
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &k_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &k_size);
    snprintf(kernel_name, sizeof kernel_name, "%s", kernel);
}

void k_init_thread(int *argc, char ***argv, const char *kernel, int required) {
    int provided;
    MPI_Init_thread(argc, argv, required, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &k_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &k_size);
    snprintf(kernel_name, sizeof kernel_name, "%s", kernel);
    if (provided < required)
        k_die("MPI provides thread level %d, %d is needed", provided, required);
}

double k_now(void) { return MPI_Wtime(); }
void k_barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }

static const char *find(int argc, char **argv, const char *name) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name)) return i + 1 < argc ? argv[i + 1] : "";
    return NULL;
}

long long k_opt_size(int argc, char **argv, const char *name, long long dflt) {
    const char *v = find(argc, argv, name);
    if (!v) return dflt;
    char *end;
    double x = strtod(v, &end);
    long long mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1LL << 10; end++; break;
    case 'm': case 'M': mult = 1LL << 20; end++; break;
    case 'g': case 'G': mult = 1LL << 30; end++; break;
    case 't': case 'T': mult = 1LL << 40; end++; break;
    default: break;
    }
    if (end == v || *end || x < 0) k_die("%s: not a size: '%s' (use e.g. 4k, 1m, 2g)", name, v);
    return (long long)(x * (double)mult);
}

long k_opt_int(int argc, char **argv, const char *name, long dflt) {
    const char *v = find(argc, argv, name);
    if (!v) return dflt;
    char *end;
    long x = strtol(v, &end, 10), mult = 1;
    /* Counts take binary suffixes like sizes (h5bench's "8M particles" is 8 * 2^20). */
    switch (*end) {
    case 'k': case 'K': mult = 1L << 10; end++; break;
    case 'm': case 'M': mult = 1L << 20; end++; break;
    case 'g': case 'G': mult = 1L << 30; end++; break;
    default: break;
    }
    if (end == v || *end) k_die("%s: not an integer: '%s' (suffixes k, m, g allowed)", name, v);
    if (x > LONG_MAX / mult || x < LONG_MIN / mult) k_die("%s: too large: '%s'", name, v);
    return x * mult;
}

double k_opt_double(int argc, char **argv, const char *name, double dflt) {
    const char *v = find(argc, argv, name);
    if (!v) return dflt;
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end) k_die("%s: not a number: '%s'", name, v);
    return x;
}

const char *k_opt_str(int argc, char **argv, const char *name, const char *dflt) {
    const char *v = find(argc, argv, name);
    return v ? v : dflt;
}

int k_opt_flag(int argc, char **argv, const char *name) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name)) return 1;
    return 0;
}

static int listed(const char *arg, const char *const *names) {
    for (; names && *names; names++)
        if (!strcmp(arg, *names)) return 1;
    return 0;
}

/* Print the option table as one JSON line, so drivers know which options
 * take a value and which are flags without a second copy of the table. */
static void list_options(const char *const *valued, const char *const *flags) {
    if (k_rank == 0) {
        const char *const *lists[2] = {valued, flags};
        printf("IOPILOT-OPTIONS {\"kernel\": \"%s\"", kernel_name);
        for (int l = 0; l < 2; l++) {
            printf(", \"%s\": [", l ? "flags" : "valued");
            for (const char *const *n = lists[l]; n && *n; n++)
                printf("%s\"%s\"", n == lists[l] ? "" : ", ", *n);
            printf("]");
        }
        printf("}\n");
        fflush(stdout);
    }
    MPI_Finalize();
    exit(0);
}

/* --help (or -h where no option has that name): the usage, and stop. */
static void help(const char *usage) {
    if (k_rank == 0) {
        fputs(usage, stdout);
        fflush(stdout);
    }
    MPI_Finalize();
    exit(0);
}

void k_check_options(int argc, char **argv, const char *const *valued,
                     const char *const *flags, const char *usage) {
    if (argc == 2 && !strcmp(argv[1], "--list-options")) list_options(valued, flags);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *why = NULL;
        if (listed(arg, valued)) {
            if (++i >= argc) why = "needs a value";
        } else if (!listed(arg, flags)) {
            if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) help(usage);
            why = "unknown option";
        }
        if (why && why[0] == 'u') k_usage_die(usage, "unknown option '%s'", arg);
        if (why) k_usage_die(usage, "option %s needs a value", arg);
    }
}

void k_usage_die(const char *usage, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (k_rank == 0) fputs(usage, stderr);
    else k_barrier(); /* rank 0 stops the job: one message is enough */
    k_die("%s", msg);
}

/* Print one line (kernel, rank, what happened) and stop the whole job. */
static void stop(int status, const char *what, const char *fmt, va_list ap)
    __attribute__((noreturn));
static void stop(int status, const char *what, const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "%s: %s (rank %d): %s\n", kernel_name, what, k_rank, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, status);
    exit(status);
}

void k_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    stop(2, "error", fmt, ap);
}

long long k_h5(long long status, const char *what) {
    if (status < 0) k_die("%s failed", what);
    return status;
}

void k_mpi_check(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len;
    MPI_Error_string(rc, msg, &len);
    k_die("%s: %s", what, msg);
}

static char verify_msg[1024];
static int verify_failed;

void k_verify_failed(const char *fmt, ...) {
    if (verify_failed) return; /* the first wrong value is the one reported */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(verify_msg, sizeof verify_msg, fmt, ap);
    va_end(ap);
    verify_failed = 1;
}

int k_verify_failed_yet(void) { return verify_failed; }

void k_param_int(const char *key, long long value) {
    if (k_rank) return;
    append(params, sizeof params, "%s", params[0] ? ", " : "");
    append_str(params, sizeof params, key);
    append(params, sizeof params, ": %lld", value);
}

void k_param_str(const char *key, const char *value) {
    if (k_rank) return;
    append(params, sizeof params, "%s", params[0] ? ", " : "");
    append_str(params, sizeof params, key);
    append(params, sizeof params, ": ");
    append_str(params, sizeof params, value);
}

void k_param_double(const char *key, double value) {
    if (k_rank) return;
    append(params, sizeof params, "%s", params[0] ? ", " : "");
    append_str(params, sizeof params, key);
    append(params, sizeof params, ": %.9g", value);
}

void k_note(const char *fmt, ...) {
    if (k_rank) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    append(notes, sizeof notes, "%s", notes[0] ? ", " : "");
    append_str(notes, sizeof notes, msg);
}

#define K_MAX_EXTRAS 24
static struct {
    char key[48];
    int is_count;
    double t;
    long long n;
} extras[K_MAX_EXTRAS];
static int n_extras;

static void add_extra(const char *key, int is_count, double t, long long n) {
    if (n_extras == K_MAX_EXTRAS)
        k_die("more than %d extra fields in one iteration", K_MAX_EXTRAS);
    snprintf(extras[n_extras].key, sizeof extras[n_extras].key, "%s", key);
    extras[n_extras].is_count = is_count;
    extras[n_extras].t = t;
    extras[n_extras].n = n;
    n_extras++;
}

void k_extra_time(const char *key, double seconds) { add_extra(key, 0, seconds, 0); }
void k_extra_count(const char *key, long long n) { add_extra(key, 1, 0.0, n); }

void k_iteration(const k_iter *mine) {
    double t_in[4] = {mine->open_s, mine->write_s, mine->read_s, mine->close_s}, t[4];
    long long c_in[5] = {mine->bytes_written, mine->bytes_read, mine->write_ops, mine->read_ops,
                         mine->meta_ops}, c[5];
    int v = mine->verified, v_min, v_max;
    MPI_Reduce(t_in, t, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(c_in, c, 5, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&v, &v_min, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&v, &v_max, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    double et_in[K_MAX_EXTRAS], et[K_MAX_EXTRAS];
    long long en_in[K_MAX_EXTRAS], en[K_MAX_EXTRAS];
    int n_ex = n_extras;
    n_extras = 0; /* extras belong to this iteration only */
    for (int i = 0; i < n_ex; i++) {
        et_in[i] = extras[i].t;
        en_in[i] = extras[i].n;
    }
    if (n_ex) {
        MPI_Reduce(et_in, et, n_ex, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(en_in, en, n_ex, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    }
    if (k_rank) return;
    const char *verified = v_max < 0 ? "null" : v_min == 0 ? "false" : "true";
    if (!iters_f && !(iters_f = open_memstream(&iters, &iters_len)))
        k_die("out of memory for the result");
    fprintf(iters_f,
           "%s{\"iteration\": %d, \"open_s\": %.9f, \"write_s\": %.9f, \"read_s\": %.9f, "
           "\"close_s\": %.9f, \"bytes_written\": %lld, \"bytes_read\": %lld, "
           "\"write_ops\": %lld, \"read_ops\": %lld, \"meta_ops\": %lld, \"verified\": %s",
           n_iters ? ", " : "", n_iters, t[0], t[1], t[2], t[3], c[0], c[1], c[2], c[3], c[4],
           verified);
    for (int i = 0; i < n_ex; i++) {
        /* keys are the kernels' own identifiers: no escaping needed */
        if (extras[i].is_count) fprintf(iters_f, ", \"%s\": %lld", extras[i].key, en[i]);
        else fprintf(iters_f, ", \"%s\": %.9f", extras[i].key, et[i]);
    }
    fputs("}", iters_f);
    n_iters++;
}

static double total_s = -1;

void k_total_time(double seconds) {
    double slowest;
    MPI_Reduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (k_rank == 0) total_s = slowest;
}

int k_finish(void) {
    int any = 0;
    MPI_Allreduce(&verify_failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) {
        if (verify_failed) {
            fprintf(stderr, "%s: verification failed (rank %d): %s\n", kernel_name, k_rank,
                    verify_msg);
            fflush(stderr);
        }
        MPI_Finalize();
        exit(3);
    }
    if (k_rank == 0) {
        if (iters_f) fflush(iters_f);
        char total[64] = "";
        if (total_s >= 0) snprintf(total, sizeof total, "\"total_s\": %.9f, ", total_s);
        printf("IOPILOT-RESULT {\"kernel\": \"%s\", \"ranks\": %d, \"params\": {%s}, %s"
               "\"iterations\": [%s], \"notes\": [%s]}\n",
               kernel_name, k_size, params, total, iters ? iters : "", notes);
        fflush(stdout);
        if (iters_f) fclose(iters_f);
        free(iters);
    }
    MPI_Finalize();
    return 0;
}
