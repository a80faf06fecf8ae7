/* What the core's own files (core.c, tables.c, records.c, files.c,
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
void iop_watch_exit_status(void); /* once the program runs (see process.c) */

/* files.c: the runtime's own file I/O, raw system calls only (sys_open,
 * sys_close, sys_read in core.h) */
int sys_write_all(int fd, const void *buf, size_t n);
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

/* output.c */
void write_json(const char *reason);
void flush_all(const char *reason); /* every buffer, then the .json */

#endif
