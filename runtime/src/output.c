/* The per-process .json summary: a small growing buffer with JSON escaping. */
#define _GNU_SOURCE
#include "core_private.h"
#include "settings.h"
#include "behind.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* The .json file: a small growing buffer with JSON string escaping. */

typedef struct { char *p; size_t n, cap; int failed; } sbuf;

/* Pages from the kernel, not malloc: the summary is also written from
 * _exit in a signal handler, which may have interrupted malloc. */
static void sb_put(sbuf *b, const char *s, size_t len) {
    if (b->failed) return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1 << 16;
        while (cap < b->n + len + 1) cap *= 2;
        void *p = b->p ? (void *)syscall(SYS_mremap, b->p, b->cap, cap, MREMAP_MAYMOVE)
                       : (void *)syscall(SYS_mmap, NULL, cap, PROT_READ | PROT_WRITE,
                                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) { b->failed = 1; return; }
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

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if it is not one. */
static int utf8_len(const unsigned char *s) {
    unsigned char c = s[0];
    int n;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
    else return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* A JSON string.  File names are bytes: what is not UTF-8 is written as
 * \udcXX, the surrogateescape convention, so readers get the bytes back. */
static void sb_str(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned char ch = *p;
        int n = utf8_len(p);
        if (ch == '"' || ch == '\\') {
            char e[2] = {'\\', (char)ch};
            sb_put(b, e, 2);
        } else if (ch < 0x20 || ch == 0x7f) {
            sb_printf(b, "\\u%04x", ch);
        } else if (n == 0) {
            sb_printf(b, "\\udc%02x", ch);
            n = 1;
        } else {
            sb_put(b, (const char *)p, (size_t)n);
            p += n;
            continue;
        }
        p++;
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

/* "NAME": "value" of each variable of ``keys`` that is set. */
/* "settings": the file named by IOPILOT_SETTINGS, its error if any, and
 * [setting, value, "file id", object, outcome, detail, count] per outcome. */
static void put_settings(sbuf *b) {
    static const char *const outcomes[] = IOP_SETTING_OUTCOME_NAMES;
    static const char *const tables[] = IOP_SETTING_TABLE_NAMES;
    const char *path = iop_settings_path(), *err = iop_settings_error();
    if (!path) return;
    sb_printf(b, ",\n\"settings\": {\"file\": ");
    sb_str(b, path);
    sb_printf(b, ", \"error\": ");
    if (err) sb_str(b, err);
    else sb_put(b, "null", 4);
    sb_printf(b, ", \"dropped\": %ld, \"outcomes\": [", iop_settings_dropped());
    const iop_setting_event *ev;
    int n = iop_settings_events(&ev), first = 1;
    iop_settings_hold(1);
    for (int i = 0; i < n; i++) {
        const iop_setting_event *e = &ev[i];
        if (!e->hash) continue;
        char name[300];
        snprintf(name, sizeof name, "%s.%s", tables[iop_setting_table(e->id)],
                 iop_setting_name(e->id));
        sb_put(b, first ? "\n[" : ",\n[", first ? 2 : 3);
        first = 0;
        sb_str(b, name);
        sb_put(b, ", ", 2);
        sb_str(b, e->value);
        sb_printf(b, ", \"%llu\", ", (unsigned long long)e->file_id);
        sb_str(b, e->object);
        sb_put(b, ", ", 2);
        sb_str(b, outcomes[e->outcome]);
        sb_put(b, ", ", 2);
        sb_str(b, e->detail);
        sb_printf(b, ", %ld]", e->count);
    }
    iop_settings_hold(0);
    sb_put(b, "]}", 2);
}

/* "write_behind": what IOPILOT_ASYNC deferred, and what it cost. */
static void put_behind(sbuf *b) {
    if (!iop_behind_on && !iop_behind_relaxed) return;
    iop_behind_stats s;
    iop_behind_stats_get(&s);
    sb_printf(b, ",\n\"write_behind\": {\"relaxed\": %d, \"writes\": %ld, \"bytes\": %llu, "
              "\"bytes_written\": %llu, \"synchronous\": %ld, \"waits\": %ld, \"errors\": %ld, "
              "\"max_bytes\": %zu, \"busy_seconds\": %.9f, \"queued_seconds\": %.9f, "
              "\"wait_seconds\": %.9f}",
              iop_behind_relaxed, s.writes, (unsigned long long)s.bytes,
              (unsigned long long)s.bytes_written, s.synchronous, s.waits, s.errors, s.max_bytes,
              s.busy_seconds, s.queued_seconds, s.wait_seconds);
}

static void put_env(sbuf *b, const char *const *keys, int *first) {
    for (; keys && *keys; keys++) {
        const char *v = getenv(*keys);
        if (!v) continue;
        if (!*first) sb_put(b, ", ", 2);
        *first = 0;
        sb_str(b, *keys);
        sb_put(b, ": ", 2);
        sb_str(b, v);
    }
}

void write_json(const char *reason) {
    sbuf b = {0};
    double spt = seconds_per_tick();
    double t_end = iop_now() * spt;
    long kept = 0, dropped = records_lost;
    for (tbuf *tb = all_bufs; tb; tb = tb->next) {
        kept += tb->kept;
        dropped += tb->dropped;
    }
    static const char *sources[] = {"none", "env", "mpi"};
    sb_printf(&b, "{\n\"format\": \"iopilot-process\", \"version\": %d, \"image\": %d,\n",
              IOP_FORMAT_VERSION, cfg.image);
    sb_printf(&b, "\"rank\": %d, \"nprocs\": %d, \"rank_source\": \"%s\", \"mpi\": %s,\n",
              cfg.rank, cfg.nprocs, sources[cfg.rank_source], cfg.mpi ? "true" : "false");
    sb_printf(&b, "\"pid\": %d, \"ppid\": %d,\n", (int)cfg.pid, (int)cfg.ppid);
    sb_put(&b, "\"host\": ", 8);
    sb_str(&b, cfg.host);
    sb_printf(&b, ",\n\"t0\": %.9f, \"t_end\": %.9f, \"ended_by\": \"%s\",\n", cfg.t0_epoch,
              t_end, reason);
    if (cfg.exit_code >= 0) sb_printf(&b, "\"exit_code\": %d,\n", cfg.exit_code);
    else sb_printf(&b, "\"exit_code\": null,\n");
    char exe[4096];
    ssize_t n = sys_readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    sb_put(&b, "\"exe\": ", 7);
    sb_str(&b, exe);
    char cmd[8192];
    sb_put(&b, ",\n\"cmdline\": [", 14);
    /* cmdline is NUL-separated; we read at most sizeof cmd - 1 bytes of it. */
    int fd = sys_open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC, 0);
    ssize_t len = fd >= 0 ? sys_read(fd, cmd, sizeof cmd - 1) : 0;
    if (fd >= 0) sys_close(fd);
    if (len > 0) cmd[len] = 0;
    for (ssize_t i = 0, first = 1; i < len; first = 0) {
        if (!first) sb_put(&b, ", ", 2);
        sb_str(&b, cmd + i);
        i += (ssize_t)strlen(cmd + i) + 1;
    }
    sb_printf(&b, "],\n\"records\": %ld, \"records_dropped\": %ld, \"max_records\": %ld, "
                  "\"stats_missing\": %ld, \"threads\": %u, \"execs\": %d,\n",
              kept, dropped, cfg.max_records, stats_missing, next_thread,
              cfg.exec_count);
    sb_put(&b, "\"overflows\": {", 14);
    for (int i = 0; i < iop_nmodules; i++) /* the modules' tables, then the core's */
        for (const iop_overflow_count *o = iop_modules[i] ? iop_modules[i]->overflows : NULL;
             o && o->name; o++)
            sb_printf(&b, "\"%s\": %ld, ", o->name, __atomic_load_n(o->count, __ATOMIC_RELAXED));
    sb_printf(&b, "\"handles\": %ld, \"notes\": %ld}, \"nested_calls\": %ld,\n\"warnings\": [",
              iop_overflows[IOP_OVERFLOW_HANDLES], iop_overflows[IOP_OVERFLOW_NOTES],
              iop_nested_calls);
    int nw = cfg.nwarnings < IOP_NWARN ? cfg.nwarnings : IOP_NWARN;
    for (int i = 0; i < nw; i++) {
        if (i) sb_put(&b, ", ", 2);
        sb_str(&b, cfg.warnings[i]);
    }
    if (cfg.nwarnings > IOP_NWARN) sb_printf(&b, ", \"%d more warnings\"", cfg.nwarnings - IOP_NWARN);
    sb_put(&b, "],\n", 3);
    const char *write_error = trace_error_name();
    if (write_error) sb_printf(&b, "\"write_error\": \"%s\",\n", write_error);
    sb_put(&b, "\"env\": {", 8);
    static const char *const core_env[] = {"SLURM_JOB_ID", NULL}; /* the launcher's */
    int env_first = 1;
    put_env(&b, core_env, &env_first);
    for (int i = 0; i < iop_nmodules; i++)
        if (iop_modules[i]) put_env(&b, iop_modules[i]->env, &env_first);
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
            iop_lock(&s->lock);
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
            iop_unlock(&s->lock);
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
    sb_put(&b, "]", 1);
    put_settings(&b);
    put_behind(&b);
    sb_put(&b, "\n}\n", 3);
    if (b.failed) {
        if (b.p) syscall(SYS_munmap, b.p, b.cap);
        return;
    }
    char path[4500];
    snprintf(path, sizeof path, "%s.json", cfg.stem);
    if (write_file_atomically(path, b.p, b.n) != 0) give_up("cannot write the process summary");
    if (b.p) syscall(SYS_munmap, b.p, b.cap);
}

void flush_all(const char *reason) {
    iop_busy_enter();
    iop_lock(&big_lock);
    for (tbuf *b = all_bufs; b; b = b->next) write_buffer(b);
    write_json(reason); /* under big_lock: one writer of the summary at a time */
    iop_unlock(&big_lock);
    iop_busy_leave();
}

void iop_flush_all(void) {
    if (!cfg.dir[0]) return;
    int saved = errno;
    flush_all("flush");
    errno = saved;
}

