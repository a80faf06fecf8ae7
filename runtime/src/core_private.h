/* What the core's own files (core.c, tables.c, records.c, sites.c, files.c,
 * output.c, modules.c) share; modules use core.h only. */
#ifndef IOPILOT_CORE_PRIVATE_H
#define IOPILOT_CORE_PRIVATE_H

#include <pthread.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "core.h"

/* A file of ours, known by device and inode from the moment we created it:
 * it is re-opened only when the name still leads to that same file. */
typedef struct {
    dev_t dev;
    ino_t ino;
    int known;
} iop_fileid;

#define IOP_NWARN 8
/* This process (process.c): who it is, where its trace goes, how it ends. */
typedef struct {
    char dir[4096];
    char host[256];
    char stem[300];       /* p<host>-<pid>-<n>: names in dir are stem + suffix */
    long max_records;     /* records kept per process; counters stay exact beyond */
    int layers;           /* bit set of traced layers */
    int rank, nprocs;
    int rank_source;      /* 0 none, 1 launcher variable, 2 MPI */
    int mpi;              /* MPI_Init was called */
    int image;            /* n of the stem */
    pid_t pid, ppid;
    double t0_epoch;
    struct timespec t0;
    /* The job's clock: [when (our CLOCK_REALTIME), the reference clock minus
     * ours, uncertainty] (iop_clock_sample in core.h). */
#define IOP_NCLOCK 2
    double clock[IOP_NCLOCK][3];
    int nclock;
    int started;          /* tables mapped and the .rec file made: a summary is due at exit */
    int exec_count;
    int exit_code;        /* status given to exit/_exit, -1 unknown */
    int ended;            /* the final summary is written */
    iop_fileid dir_id, rec_id, names_id;
    int write_error;      /* errno of the first failed write of a trace file */
    char warnings[IOP_NWARN][200];
    int nwarnings;
} iop_process;

extern iop_process iop_proc;
extern iop_lock_t iop_core_lock; /* names, counters tables, notes, flushing */

/* process.c */
void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void give_up(const char *why);

int this_is_our_process(void); /* not a vfork or clone child sharing our memory */
int another_copy_traces(void); /* the program carries a linked-in runtime (process.c) */
void iop_watch_exit_status(void); /* once the program runs (see process.c) */

/* files.c: the runtime's own file I/O, raw system calls only (sys_open,
 * sys_close, sys_read in core.h) */
int sys_write_all(int fd, const void *buf, size_t n);
struct iovec;
int sys_writev_all(int fd, const struct iovec *v, int n);
ssize_t sys_readlink(const char *path, char *buf, size_t n);
int sys_getcwd(char *buf, size_t n);
int sys_stat_cwd(struct stat *sb);
/* Files in the trace directory, by name (stem + suffix): see files.c. */
int trace_dir_start(void); /* iop_proc.dir, not a link: the directory files go to */
int trace_file_create(const char *name, iop_fileid *id);
int trace_file_append(const char *name, const iop_fileid *id);
int choose_stem(void); /* create this image's .rec: first free n */
int write_file_atomically(const char *name, const char *data, size_t n);
const char *trace_error_name(void); /* "ENOSPC" ... of iop_proc.write_error, NULL: none */
const char *trace_failure(void);    /* why tracing stopped, for the warning */

/* tables.c */
int tables_start(size_t pool_bytes); /* the pool, descriptor and handle tables; 0 or -1 */
void *pool_alloc(size_t n);
void parse_excludes(void);
void tables_after_fork(void);
/* Every name (or those not yet in the .names file, oldest first), every
 * file's counters: with iop_core_lock held. */
void names_each(int only_unwritten, void (*fn)(uint64_t id, const char *path, void *arg),
                void *arg);
int names_unwritten(void);
void names_written(void); /* they are in the .names file now */
void stats_each(void (*fn)(iop_stats *st, void *arg), void *arg);
long stats_missing_count(void); /* counter records there was no memory for */

/* records.c */
int records_start(void);
void records_write_all(void); /* every thread's buffer, with iop_core_lock held */
void records_counted(long *kept, long *dropped, unsigned *threads);
void notes_each(void (*fn)(uint64_t id, const char *text, void *arg), void *arg);
void records_after_fork(void);

/* modules.c: the layer modules, in the order of their parts in summaries;
 * NULL for a module left out of this build (e.g. MPI-IO without mpi.h). */
extern const iop_module *const iop_modules[];
extern const int iop_nmodules;
/* Call ``hook`` of every module that has one, in that order. */
#define EACH_HOOK(hook, ...)                                                    \
    for (int i_ = 0; i_ < iop_nmodules; i_++)                                 \
        if (iop_modules[i_] && iop_modules[i_]->hook) iop_modules[i_]->hook(__VA_ARGS__)

/* sites.c */
void sites_start(void);
void sites_after_fork(void);
long sites_overflows(void);
typedef struct {
    const char *path;
    uintptr_t base; /* load address */
    const unsigned char *build_id;
    int build_id_len, library;
} iop_module_info;
typedef struct {
    uint32_t id;
    int64_t count, bytes;
    double ticks;
    int library;      /* no frame of the program's own code was found */
    const char *text; /* a where hook's place ("file\tline\tfunction" lines), else NULL */
    int nframes;      /* else frames: module index (-1 none) and offset from its base */
    int module[4];
    uintptr_t offset[4];
} iop_site_info;
void sites_each(void (*module_fn)(const iop_module_info *, void *),
                void (*site_fn)(const iop_site_info *, void *), void *arg);
/* Each thread's cache of return address (or site key) -> site id, with
 * the calls, bytes and ticks counted there since the entry was filled. */
#define IOP_SITE_CACHE 4096 /* direct mapped */
typedef struct {
    uint64_t key;
    uint32_t id;
    uint8_t kind; /* of the return address key: see sites.c */
    int64_t count, bytes;
    double ticks;
} cached;
typedef struct cache {
    struct cache *next;
    cached e[IOP_SITE_CACHE];
} cache;
#define IOP_HIDDEN __attribute__((visibility("hidden"))) /* no GOT load per use */
extern IOP_TLS IOP_HIDDEN cache *iop_site_cache;
extern IOP_TLS IOP_HIDDEN uintptr_t iop_scope_fp, iop_scope_ra; /* an upper layer's call */
extern IOP_HIDDEN uintptr_t iop_self_lo, iop_self_len;          /* this library's code */
extern IOP_HIDDEN int iop_sites_on;
enum { IOP_SITE_LIBRARY = 2 };
cached *iop_site_miss(cache *c, uintptr_t ra);
void sites_thread_exit(void); /* the thread's figures to the table, its cache to the next */

static inline int iop_in_self(uintptr_t a) { return a - iop_self_lo < iop_self_len; }

/* The first return address outside this library, and the frame that holds
 * it (the wrapper's), from frame ``fp`` of a runtime function.  Only our own
 * frames are read: each has a frame pointer and lies above the last. */
static inline uintptr_t iop_wrapper_caller(uintptr_t *fp, uintptr_t *frame) {
    for (int i = 0; i < 12 && fp; i++) {
        uintptr_t ra = fp[1];
        if (!iop_in_self(ra)) {
            *frame = (uintptr_t)fp;
            return ra;
        }
        uintptr_t *next = (uintptr_t *)fp[0];
        if (next <= fp || (uintptr_t)next - (uintptr_t)fp > (1 << 20)) return 0;
        fp = next;
    }
    return 0;
}

static inline cached *cache_slot(cache *c, uint64_t key) {
    return &c->e[(uint32_t)((key * 0x9e3779b97f4a7c15ULL) >> 52) % IOP_SITE_CACHE];
}

/* The site of the traced call being recorded (``fp``: the recording
 * function's frame), counting one call of ``bytes`` and ``ticks`` there.
 * The common case, inline: one walk up our own frames, one cache probe. */
static inline __attribute__((always_inline)) uint32_t iop_site_here(void *fp, int64_t bytes,
                                                                   double ticks) {
    if (IOP_UNLIKELY(!iop_sites_on)) return 0;
    uintptr_t frame, ra = iop_wrapper_caller(fp, &frame);
    if (IOP_UNLIKELY(!ra)) return 0;
    if (IOP_UNLIKELY(iop_scope_ra != 0)) {
        if (frame < iop_scope_fp) ra = iop_scope_ra; /* inside an upper layer's call */
        else iop_scope_ra = 0;                       /* one a longjmp left behind */
    }
    cache *c = iop_site_cache;
    cached *e = c ? cache_slot(c, ra) : NULL;
    if (IOP_UNLIKELY(!e || e->key != ra || e->kind == IOP_SITE_LIBRARY)) {
        e = iop_site_miss(c, ra);
        if (!e) return 0;
    }
    e->count++;
    e->bytes += bytes;
    e->ticks += ticks;
    return e->id;
}

/* cpu.c: where this process may run, what launched it, its CPU time */
typedef struct {
    const void *allowed; /* cpu_set_t of the CPUs it may run on; NULL unknown */
    long online;         /* the node's online CPUs */
    int ran_on;          /* the CPU the first thread started on, -1 unknown */
    int have_usage;      /* user_s and system_s were read */
    double user_s, system_s, io_cpu_s, io_sync_cpu_s;
    int64_t io_cpu_bytes, io_syncs;
    const char *launcher, *binding; /* "openmpi", "slurm", "mpich" or ""; "VAR=value ..." */
} iop_cpu_info;
void cpu_start(void);
void cpu_after_fork(void);
void cpu_read(iop_cpu_info *out); /* at the end (system calls only) */

/* output.c */
void write_json(const char *reason);
void flush_all(const char *reason); /* every buffer, then the .json */

#endif
