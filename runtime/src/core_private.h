/* State shared by the runtime's own files (core.c, tables.c, records.c,
 * files.c, output.c); layer modules use core.h only. */
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
    int exec_count;
    int exit_code;        /* status given to exit/_exit, -1 unknown */
    int ended;            /* the final summary is written */
    iop_fileid dir_id, rec_id, names_id;
    int write_error;      /* errno of the first failed write of a trace file */
    char warnings[IOP_NWARN][200];
    int nwarnings;
} iop_config;

extern iop_config cfg;
extern iop_lock_t big_lock; /* names, counters tables, notes, flushing */

#define NBUCKETS 8192
typedef struct name_entry {
    uint64_t id;
    struct name_entry *next;
    struct name_entry *next_new; /* names not yet in the .names file */
    char path[];
} name_entry;
#define NHANDLES 65536
typedef struct { uintptr_t key; int layer; iop_open o; } handle_slot;
#define TB_CAP 8192 /* a multiple of 256: see buffer_checkpoint() */
#define RESERVE 1024 /* records a thread takes from the process budget at once */
typedef struct tbuf {
    struct tbuf *next;
    uint32_t thread;
    uint32_t n;
    long budget, kept, dropped; /* owned by the thread: no atomics per record */
    struct timespec first;      /* when the oldest record in r was added */
    /* on a cache-line boundary: records then split fewer lines (~5 ns a call) */
    struct iop_record r[TB_CAP] __attribute__((aligned(64)));
} tbuf;
typedef struct note { struct note *next; uint64_t id; char text[]; } note;

/* core.c */
void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void give_up(const char *why);

int this_is_our_process(void); /* not a vfork or clone child sharing our memory */
void iop_watch_exit_status(void); /* once the program runs (see core.c) */

/* files.c: the runtime's own file I/O, raw system calls only (sys_open,
 * sys_close, sys_read in core.h) */
int sys_write_all(int fd, const void *buf, size_t n);
ssize_t sys_readlink(const char *path, char *buf, size_t n);
int sys_getcwd(char *buf, size_t n);
int sys_stat_cwd(struct stat *sb);
/* Files in the trace directory, by name (stem + suffix): see files.c. */
int trace_dir_start(void); /* cfg.dir, not a link: the directory files go to */
int trace_file_create(const char *name, iop_fileid *id);
int trace_file_append(const char *name, const iop_fileid *id);
int choose_stem(void); /* create this image's .rec: first free n */
int write_file_atomically(const char *name, const char *data, size_t n);
const char *trace_error_name(void); /* "ENOSPC" ... of cfg.write_error, NULL: none */
const char *trace_failure(void);    /* why tracing stopped, for the warning */

/* tables.c */
extern char *pool;
extern size_t pool_used, pool_size;
void *pool_alloc(size_t n);
void parse_excludes(void);
extern name_entry *names[NBUCKETS];
extern name_entry *new_names, **new_names_tail;
extern iop_stats *stats[NBUCKETS];
extern long stats_missing;

extern handle_slot *handles;
extern iop_lock_t handle_lock;
void tables_after_fork(void);

/* records.c */
extern IOP_TLS tbuf *my_buf;
extern tbuf *all_bufs;
extern uint32_t next_thread;
extern long records_reserved, records_lost;
extern pthread_key_t buf_key;
extern note *notes;
void write_buffer(tbuf *b); /* with big_lock held */
void thread_exit(void *arg);
void records_after_fork(void);

/* modules.c: the layer modules, in the order of their parts in summaries;
 * NULL for a module left out of this build (e.g. MPI-IO without mpi.h). */
extern const iop_module *const iop_modules[];
extern const int iop_nmodules;
/* Call ``hook`` of every module that has one, in that order. */
#define EACH_HOOK(hook, ...)                                                    \
    for (int i_ = 0; i_ < iop_nmodules; i_++)                                 \
        if (iop_modules[i_] && iop_modules[i_]->hook) iop_modules[i_]->hook(__VA_ARGS__)

/* output.c */
void write_json(const char *reason);
void flush_all(const char *reason); /* every buffer, then the .json */

#endif
