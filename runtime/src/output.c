/* The per-process .json summary: a small growing buffer with JSON escaping. */
#define _GNU_SOURCE
#include "core_private.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
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

struct iop_json { char *p; size_t n, cap; int failed; };

/* Pages from the kernel, not malloc: the summary is also written from
 * _exit in a signal handler, which may have interrupted malloc. */
void iop_json_put(iop_json *b, const char *s, size_t len) {
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

void iop_json_printf(iop_json *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) iop_json_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
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
void iop_json_str(iop_json *b, const char *s) {
    iop_json_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned char ch = *p;
        int n = utf8_len(p);
        if (ch == '"' || ch == '\\') {
            char e[2] = {'\\', (char)ch};
            iop_json_put(b, e, 2);
        } else if (ch < 0x20 || ch == 0x7f) {
            iop_json_printf(b, "\\u%04x", ch);
        } else if (n == 0) {
            iop_json_printf(b, "\\udc%02x", ch);
            n = 1;
        } else {
            iop_json_put(b, (const char *)p, (size_t)n);
            p += n;
            continue;
        }
        p++;
    }
    iop_json_put(b, "\"", 1);
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
static void put_env(iop_json *b, const char *const *keys, int *first) {
    for (; keys && *keys; keys++) {
        const char *v = getenv(*keys);
        if (!v) continue;
        if (!*first) iop_json_put(b, ", ", 2);
        *first = 0;
        iop_json_str(b, *keys);
        iop_json_put(b, ": ", 2);
        iop_json_str(b, v);
    }
}

/* One row of a list in the summary (counters, names, notes). */
typedef struct {
    iop_json *b;
    int first; /* no comma before it */
    double spt; /* seconds per tick */
} row;

static void put_counters(iop_stats *s, void *arg) {
    row *r = arg;
    iop_lock(&s->lock);
    iop_json_printf(r->b, "%s\n[%d, \"%llu\", {", r->first ? "" : ",", s->layer,
                    (unsigned long long)s->file_id);
    r->first = 0;
    for (int i = 0, f1 = 1; i < IOP_NCOUNTERS; i++) {
        if (!s->c[i]) continue;
        iop_json_printf(r->b, "%s\"%d\": %lld", f1 ? "" : ", ", i, (long long)s->c[i]);
        f1 = 0;
    }
    iop_json_put(r->b, "}, {", 4);
    for (int i = 0, f1 = 1; i < IOP_NFCOUNTERS; i++) {
        if (s->f[i] == 0) continue;
        iop_json_printf(r->b, "%s\"%d\": %.9g", f1 ? "" : ", ", i, s->f[i] * r->spt);
        f1 = 0;
    }
    iop_json_put(r->b, "}]", 2);
    iop_unlock(&s->lock);
}

static void put_name(uint64_t id, const char *path, void *arg) {
    row *r = arg;
    iop_json_printf(r->b, "%s\n\"%llu\": ", r->first ? "" : ",", (unsigned long long)id);
    iop_json_str(r->b, path);
    r->first = 0;
}

static void put_note(uint64_t id, const char *text, void *arg) {
    row *r = arg;
    iop_json_printf(r->b, "%s\n[\"%llu\", ", r->first ? "" : ",", (unsigned long long)id);
    iop_json_str(r->b, text);
    iop_json_put(r->b, "]", 1);
    r->first = 0;
}

/* The modules and call sites (sites.c): ",\n"modules": [...], "sites": [...]". */
typedef struct { iop_json *b; int first; double spt; } sites_out;

static void put_module(const iop_module_info *m, void *arg) {
    sites_out *o = arg;
    iop_json_printf(o->b, "%s\n{\"path\": ", o->first ? ",\n\"modules\": [" : ",");
    o->first = 0;
    iop_json_str(o->b, m->path);
    iop_json_printf(o->b, ", \"base\": %llu, \"build_id\": \"", (unsigned long long)m->base);
    for (int k = 0; k < m->build_id_len; k++) iop_json_printf(o->b, "%02x", m->build_id[k]);
    iop_json_printf(o->b, "\", \"library\": %s}", m->library ? "true" : "false");
}

/* A where hook's text, one frame a line: "file<TAB>line<TAB>function". */
static void put_place(iop_json *b, const char *p) {
    iop_json_put(b, ", \"python\": [", 13);
    for (int k = 0; *p; k++) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[1024];
        if (len >= sizeof line) len = sizeof line - 1;
        memcpy(line, p, len);
        line[len] = 0;
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (t1 && t2) {
            *t1 = *t2 = 0;
            iop_json_put(b, k ? ", [" : "[", k ? 3 : 1);
            iop_json_str(b, line);
            iop_json_printf(b, ", %ld, ", strtol(t1 + 1, NULL, 10));
            iop_json_str(b, t2 + 1);
            iop_json_put(b, "]", 1);
        }
        p = eol ? eol + 1 : p + len;
    }
    iop_json_put(b, "]", 1);
}

static void put_site(const iop_site_info *s, void *arg) {
    sites_out *o = arg;
    iop_json_printf(o->b, "%s\n{\"id\": %u, \"count\": %lld, \"bytes\": %lld, \"time\": %.9f",
                    o->first ? "" : ",", s->id, (long long)s->count, (long long)s->bytes,
                    s->ticks * o->spt);
    o->first = 0;
    if (s->text) {
        put_place(o->b, s->text);
    } else {
        iop_json_put(o->b, ", \"frames\": [", 13);
        for (int k = 0; k < s->nframes; k++)
            iop_json_printf(o->b, "%s[%d, %llu]", k ? ", " : "", s->module[k],
                            (unsigned long long)s->offset[k]);
        iop_json_put(o->b, "]", 1);
        if (s->library) iop_json_put(o->b, ", \"library\": true", 17);
    }
    iop_json_put(o->b, "}", 1);
}

static void put_sites(iop_json *b, double spt) {
    sites_out o = {b, 1, spt};
    sites_each(put_module, NULL, &o);
    if (o.first) return; /* call sites off: neither key */
    iop_json_put(b, "],\n\"sites\": [", 13);
    o.first = 1;
    sites_each(NULL, put_site, &o);
    iop_json_put(b, "]", 1);
}

/* ",\n"cpu": {...}": where the process may run, what launched it, its CPU time. */
static void put_cpu(iop_json *b) {
    iop_cpu_info c;
    cpu_read(&c);
    iop_json_printf(b, ",\n\"cpu\": {\"allowed\": [");
    const cpu_set_t *set = c.allowed;
    for (int i = 0, first = 1; set && i < CPU_SETSIZE; i++) {
        if (!CPU_ISSET(i, set)) continue;
        iop_json_printf(b, first ? "%d" : ", %d", i);
        first = 0;
    }
    iop_json_printf(b, "], \"online\": %ld, \"ran_on\": %d, ", c.online, c.ran_on);
    if (c.have_usage)
        iop_json_printf(b, "\"user_s\": %.6f, \"system_s\": %.6f, ", c.user_s, c.system_s);
    iop_json_printf(b, "\"io_cpu_s\": %.9f, \"io_cpu_bytes\": %lld, \"io_sync_cpu_s\": %.9f, "
                    "\"io_syncs\": %lld,\n\"launcher\": {\"name\": ",
                    c.io_cpu_s, (long long)c.io_cpu_bytes, c.io_sync_cpu_s, (long long)c.io_syncs);
    iop_json_str(b, c.launcher);
    iop_json_printf(b, ", \"binding\": ");
    iop_json_str(b, c.binding);
    iop_json_printf(b, "}}");
}

void iop_clock_sample(double when, double offset, double uncertainty) {
    if (iop_proc.nclock >= IOP_NCLOCK) return;
    double *s = iop_proc.clock[iop_proc.nclock++];
    s[0] = when;
    s[1] = offset;
    s[2] = uncertainty;
}

void write_json(const char *reason) {
    iop_json b = {0};
    double spt = seconds_per_tick();
    double t_end = iop_now() * spt;
    long kept, dropped;
    unsigned threads;
    records_counted(&kept, &dropped, &threads);
    static const char *sources[] = {"none", "env", "mpi"};
    iop_json_printf(&b, "{\n\"format\": \"iopilot-process\", \"version\": %d, \"image\": %d,\n",
                    IOP_FORMAT_VERSION, iop_proc.image);
    iop_json_printf(&b, "\"rank\": %d, \"nprocs\": %d, \"rank_source\": \"%s\", \"mpi\": %s,\n",
                    iop_proc.rank, iop_proc.nprocs, sources[iop_proc.rank_source],
                    iop_proc.mpi ? "true" : "false");
    iop_json_printf(&b, "\"pid\": %d, \"ppid\": %d,\n", (int)iop_proc.pid, (int)iop_proc.ppid);
    iop_json_put(&b, "\"host\": ", 8);
    iop_json_str(&b, iop_proc.host);
    iop_json_printf(&b, ",\n\"t0\": %.9f, \"t_end\": %.9f, \"ended_by\": \"%s\",\n",
                    iop_proc.t0_epoch, t_end, reason);
    if (iop_proc.nclock > 0) { /* [when, offset, uncertainty]: iop_clock_sample */
        iop_json_put(&b, "\"clock\": [", 10);
        for (int i = 0; i < iop_proc.nclock; i++)
            iop_json_printf(&b, "%s[%.9f, %.9f, %.9f]", i ? ", " : "", iop_proc.clock[i][0],
                            iop_proc.clock[i][1], iop_proc.clock[i][2]);
        iop_json_put(&b, "],\n", 3);
    }
    if (iop_proc.exit_code >= 0) iop_json_printf(&b, "\"exit_code\": %d,\n", iop_proc.exit_code);
    else iop_json_printf(&b, "\"exit_code\": null,\n");
    char exe[4096];
    ssize_t n = sys_readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    iop_json_put(&b, "\"exe\": ", 7);
    iop_json_str(&b, exe);
    char cmd[8192];
    iop_json_put(&b, ",\n\"cmdline\": [", 14);
    /* cmdline is NUL-separated; we read at most sizeof cmd - 1 bytes of it. */
    int fd = sys_open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC, 0);
    ssize_t len = fd >= 0 ? sys_read(fd, cmd, sizeof cmd - 1) : 0;
    if (fd >= 0) sys_close(fd);
    if (len > 0) cmd[len] = 0;
    for (ssize_t i = 0, first = 1; i < len; first = 0) {
        if (!first) iop_json_put(&b, ", ", 2);
        iop_json_str(&b, cmd + i);
        i += (ssize_t)strlen(cmd + i) + 1;
    }
    iop_json_printf(&b, "],\n\"records\": %ld, \"records_dropped\": %ld, \"max_records\": %ld, "
                        "\"stats_missing\": %ld, \"threads\": %u, \"execs\": %d,\n",
                    kept, dropped, iop_proc.max_records, stats_missing_count(), threads,
                    iop_proc.exec_count);
    iop_json_put(&b, "\"overflows\": {", 14);
    for (int i = 0; i < iop_nmodules; i++) /* the modules' tables, then the core's */
        for (const iop_overflow_count *o = iop_modules[i] ? iop_modules[i]->overflows : NULL;
             o && o->name; o++)
            iop_json_printf(&b, "\"%s\": %ld, ", o->name,
                            __atomic_load_n(o->count, __ATOMIC_RELAXED));
    iop_json_printf(&b,
                    "\"handles\": %ld, \"notes\": %ld, \"sites\": %ld}, \"nested_calls\": %ld,\n"
                    "\"warnings\": [",
                    iop_overflows[IOP_OVERFLOW_HANDLES], iop_overflows[IOP_OVERFLOW_NOTES],
                    sites_overflows(),
                    iop_nested_calls);
    int nw = iop_proc.nwarnings < IOP_NWARN ? iop_proc.nwarnings : IOP_NWARN;
    for (int i = 0; i < nw; i++) {
        if (i) iop_json_put(&b, ", ", 2);
        iop_json_str(&b, iop_proc.warnings[i]);
    }
    if (iop_proc.nwarnings > IOP_NWARN)
        iop_json_printf(&b, ", \"%d more warnings\"", iop_proc.nwarnings - IOP_NWARN);
    iop_json_put(&b, "],\n", 3);
    const char *write_error = trace_error_name();
    if (write_error) iop_json_printf(&b, "\"write_error\": \"%s\",\n", write_error);
    iop_json_put(&b, "\"env\": {", 8);
    static const char *const core_env[] = {"SLURM_JOB_ID", NULL}; /* the launcher's */
    int env_first = 1;
    put_env(&b, core_env, &env_first);
    for (int i = 0; i < iop_nmodules; i++)
        if (iop_modules[i]) put_env(&b, iop_modules[i]->env, &env_first);
    iop_json_put(&b, "},\n\"layers\": [", 14);
    for (int i = 0; i < IOP_NLAYERS; i++) {
        iop_json_str(&b, layer_names[i]);
        if (i + 1 < IOP_NLAYERS) iop_json_put(&b, ", ", 2);
    }
    iop_json_put(&b, "],\n\"counter_names\": [", 21);
    for (int i = 0; i < IOP_NCOUNTERS; i++) {
        iop_json_str(&b, counter_names[i]);
        if (i + 1 < IOP_NCOUNTERS) iop_json_put(&b, ", ", 2);
    }
    iop_json_put(&b, "],\n\"fcounter_names\": [", 22);
    for (int i = 0; i < IOP_NFCOUNTERS; i++) {
        iop_json_str(&b, fcounter_names[i]);
        if (i + 1 < IOP_NFCOUNTERS) iop_json_put(&b, ", ", 2);
    }
    /* counters: [layer, "file id", {index: value}, {index: value}] per row */
    iop_json_put(&b, "],\n\"counters\": [", 16);
    row r = {&b, 1, spt};
    stats_each(put_counters, &r);
    iop_json_put(&b, "],\n\"names\": {", 13);
    r.first = 1;
    names_each(0, put_name, &r);
    iop_json_put(&b, "},\n\"notes\": [", 13);
    r.first = 1;
    notes_each(put_note, &r);
    iop_json_put(&b, "]", 1);
    put_sites(&b, spt);
    put_cpu(&b);
    EACH_HOOK(summary, &b);
    iop_json_put(&b, "\n}\n", 3);
    if (b.failed) {
        if (b.p) syscall(SYS_munmap, b.p, b.cap);
        return;
    }
    char path[4500];
    snprintf(path, sizeof path, "%s.json", iop_proc.stem);
    if (write_file_atomically(path, b.p, b.n) != 0) give_up("cannot write the process summary");
    if (b.p) syscall(SYS_munmap, b.p, b.cap);
}

void flush_all(const char *reason) {
    iop_busy_enter();
    iop_lock(&iop_core_lock);
    records_write_all();
    write_json(reason); /* under iop_core_lock: one writer of the summary at a time */
    iop_unlock(&iop_core_lock);
    iop_busy_leave();
}

void iop_flush_all(void) {
    if (!iop_proc.dir[0]) return;
    int saved = errno;
    flush_all("flush");
    errno = saved;
}

