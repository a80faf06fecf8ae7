/* The per-process .json summary: a small growing buffer with JSON escaping. */
#define _GNU_SOURCE
#include "core_private.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* The .json file: a small growing buffer with JSON string escaping. */

typedef struct { char *p; size_t n, cap; int failed; } sbuf;

static void sb_put(sbuf *b, const char *s, size_t len) {
    if (b->failed) return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1 << 16;
        while (cap < b->n + len + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->failed = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = 0;
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void sb_str(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            char e[2] = {'\\', (char)ch};
            sb_put(b, e, 2);
        } else if (ch < 0x20) {
            sb_printf(b, "\\u%04x", ch);
        } else {
            sb_put(b, (const char *)&ch, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static const char *layer_names[] = {
#define IOP_X(name) #name,
    IOP_LAYERS(IOP_X)
#undef IOP_X
};
static const char *counter_names[] = {
#define IOP_X(name) #name,
    IOP_COUNTERS(IOP_X)
#undef IOP_X
};
static const char *fcounter_names[] = {
#define IOP_X(name) #name,
    IOP_FCOUNTERS(IOP_X)
#undef IOP_X
};

void write_json(const char *reason) {
    sbuf b = {0};
    double spt = seconds_per_tick();
    double t_end = iop_now() * spt;
    long kept = 0, dropped = records_lost;
    for (tbuf *tb = all_bufs; tb; tb = tb->next) {
        kept += tb->kept;
        dropped += tb->dropped;
    }
    sb_printf(&b, "{\n\"format\": \"iopilot-process\", \"version\": %d,\n", IOP_FORMAT_VERSION);
    sb_printf(&b, "\"rank\": %d, \"nprocs\": %d, \"pid\": %d, \"ppid\": %d,\n", cfg.rank,
              cfg.nprocs, (int)cfg.pid, (int)cfg.ppid);
    sb_put(&b, "\"host\": ", 8);
    sb_str(&b, cfg.host);
    sb_printf(&b, ",\n\"t0\": %.9f, \"t_end\": %.9f, \"ended_by\": \"%s\",\n", cfg.t0_epoch,
              t_end, reason);
    char exe[4096];
    iop_enter();
    ssize_t n = REAL(readlink)("/proc/self/exe", exe, sizeof exe - 1);
    iop_leave();
    exe[n > 0 ? n : 0] = 0;
    sb_put(&b, "\"exe\": ", 7);
    sb_str(&b, exe);
    char cmd[8192];
    sb_put(&b, ",\n\"cmdline\": [", 14);
    /* cmdline is NUL-separated; we read at most sizeof cmd - 1 bytes of it. */
    iop_enter();
    int fd = REAL(open)("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    ssize_t len = fd >= 0 ? REAL(read)(fd, cmd, sizeof cmd - 1) : 0;
    if (fd >= 0) REAL(close)(fd);
    iop_leave();
    for (ssize_t i = 0, first = 1; i < len; first = 0) {
        if (!first) sb_put(&b, ", ", 2);
        sb_str(&b, cmd + i);
        i += (ssize_t)strlen(cmd + i) + 1;
    }
    sb_printf(&b, "],\n\"records\": %ld, \"records_dropped\": %ld, \"max_records\": %ld, "
                  "\"stats_missing\": %ld, \"threads\": %u, \"execs\": %d,\n",
              kept, dropped, cfg.max_records, stats_missing, next_thread,
              cfg.exec_count);
    sb_put(&b, "\"env\": {", 8);
    static const char *env_keys[] = {"ROMIO_HINTS", "OMPI_MCA_io", "OMPI_MCA_fcoll",
                                     "MPICH_MPIIO_HINTS", "HDF5_PLUGIN_PATH", "SLURM_JOB_ID",
                                     "OMPI_MCA_io_ompio_num_aggregators", NULL};
    for (int i = 0, first = 1; env_keys[i]; i++) {
        const char *v = getenv(env_keys[i]);
        if (!v) continue;
        if (!first) sb_put(&b, ", ", 2);
        first = 0;
        sb_str(&b, env_keys[i]);
        sb_put(&b, ": ", 2);
        sb_str(&b, v);
    }
    sb_put(&b, "},\n\"layers\": [", 14);
    for (int i = 0; i < IOP_NLAYERS; i++) {
        sb_str(&b, layer_names[i]);
        if (i + 1 < IOP_NLAYERS) sb_put(&b, ", ", 2);
    }
    sb_put(&b, "],\n\"counter_names\": [", 21);
    for (int i = 0; i < IOP_NCOUNTERS; i++) {
        sb_str(&b, counter_names[i]);
        if (i + 1 < IOP_NCOUNTERS) sb_put(&b, ", ", 2);
    }
    sb_put(&b, "],\n\"fcounter_names\": [", 22);
    for (int i = 0; i < IOP_NFCOUNTERS; i++) {
        sb_str(&b, fcounter_names[i]);
        if (i + 1 < IOP_NFCOUNTERS) sb_put(&b, ", ", 2);
    }
    /* counters: [layer, "file id", {index: value}, {index: value}] per row */
    sb_put(&b, "],\n\"counters\": [", 16);
    int first = 1;
    for (size_t k = 0; k < NBUCKETS; k++) {
        for (iop_stats *s = stats[k]; s; s = s->next_in_bucket) {
            spin_lock(&s->lock);
            sb_printf(&b, "%s\n[%d, \"%llu\", {", first ? "" : ",", s->layer,
                      (unsigned long long)s->file_id);
            first = 0;
            for (int i = 0, f1 = 1; i < IOP_NCOUNTERS; i++) {
                if (!s->c[i]) continue;
                sb_printf(&b, "%s\"%d\": %lld", f1 ? "" : ", ", i, (long long)s->c[i]);
                f1 = 0;
            }
            sb_put(&b, "}, {", 4);
            for (int i = 0, f1 = 1; i < IOP_NFCOUNTERS; i++) {
                if (s->f[i] == 0) continue;
                sb_printf(&b, "%s\"%d\": %.9g", f1 ? "" : ", ", i, s->f[i] * spt);
                f1 = 0;
            }
            sb_put(&b, "}]", 2);
            spin_unlock(&s->lock);
        }
    }
    sb_put(&b, "],\n\"names\": {", 13);
    first = 1;
    for (size_t k = 0; k < NBUCKETS; k++) {
        for (name_entry *e = names[k]; e; e = e->next) {
            sb_printf(&b, "%s\n\"%llu\": ", first ? "" : ",", (unsigned long long)e->id);
            sb_str(&b, e->path);
            first = 0;
        }
    }
    sb_put(&b, "},\n\"notes\": [", 13);
    first = 1;
    for (note *e = notes; e; e = e->next) {
        sb_printf(&b, "%s\n[\"%llu\", ", first ? "" : ",", (unsigned long long)e->id);
        sb_str(&b, e->text);
        sb_put(&b, "]", 1);
        first = 0;
    }
    sb_put(&b, "]\n}\n", 4);
    if (b.failed) {
        warn("out of memory writing %s", json_path);
        free(b.p);
        return;
    }
    char tmp[4500];
    snprintf(tmp, sizeof tmp, "%s.tmp", json_path);
    iop_enter();
    int out = REAL(open)(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    size_t done = 0;
    while (out >= 0 && done < b.n) {
        ssize_t w = REAL(write)(out, b.p + done, b.n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
    }
    if (out >= 0) REAL(close)(out);
    if (done == b.n) REAL(rename)(tmp, json_path); /* readers never see half a file */
    iop_leave();
    if (done != b.n) warn("could not write %s", json_path);
    free(b.p);
}

void flush_all(const char *reason) {
    pthread_mutex_lock(&big_lock);
    for (tbuf *b = all_bufs; b; b = b->next) write_buffer(b);
    pthread_mutex_unlock(&big_lock);
    write_json(reason);
}

void iop_flush_all(void) {
    if (!cfg.dir[0]) return;
    int saved = errno;
    flush_all("flush");
    errno = saved;
}

