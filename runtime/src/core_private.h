/* State shared by the runtime's own files (core.c, tables.c, records.c,
 * output.c); layer modules use core.h only. */
#ifndef IOPILOT_CORE_PRIVATE_H
#define IOPILOT_CORE_PRIVATE_H

#include <pthread.h>
#include <sys/types.h>
#include <time.h>

#include "core.h"

typedef struct {
    char dir[4096];
    char host[256];
    long max_records;     /* records kept per process; counters stay exact beyond */
    int layers;           /* bit set of traced layers */
    int rank, nprocs;
    pid_t pid, ppid;
    double t0_epoch;
    struct timespec t0;
    int err_fd;           /* a private copy of stderr for our warnings */
    int exec_count;
} iop_config;

/* Real functions the runtime itself calls, bypassing its own wrappers (each
 * file resolves its own copy of the pointers on first use). */
REAL_DECL(int, open, (const char *, int, ...));
REAL_DECL(ssize_t, write, (int, const void *, size_t));
REAL_DECL(int, close, (int));
REAL_DECL(int, rename, (const char *, const char *));
REAL_DECL(ssize_t, readlink, (const char *, char *, size_t));
REAL_DECL(ssize_t, read, (int, void *, size_t));

extern iop_config cfg;
extern pthread_mutex_t big_lock;

#define NBUCKETS 8192
typedef struct name_entry { uint64_t id; struct name_entry *next; char path[]; } name_entry;
#define NHANDLES 65536
typedef struct { uintptr_t key; int layer; iop_open o; } handle_slot;
#define TB_CAP 8192
#define RESERVE 1024 /* records a thread takes from the process budget at once */
typedef struct tbuf {
    struct tbuf *next;
    uint32_t thread;
    uint32_t n;
    long budget, kept, dropped; /* owned by the thread: no atomics per record */
    struct iop_record r[TB_CAP];
} tbuf;
typedef struct note { struct note *next; uint64_t id; char text[]; } note;

/* Per-file counter locks: uncontended in practice, so a spin lock. */
static inline void spin_lock(volatile int *l) {
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
        while (*l) __builtin_ia32_pause();
}
static inline void spin_unlock(volatile int *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

/* core.c */
void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void give_up(const char *why);
double seconds_per_tick(void);

/* tables.c */
extern char *pool;
extern size_t pool_used, pool_size;
void *pool_alloc(size_t n);
void parse_excludes(void);
extern name_entry *names[NBUCKETS];
extern iop_stats *stats[NBUCKETS];
extern long stats_missing;
extern iop_open *fds;
extern int nfds;
extern handle_slot *handles;
extern volatile int handle_lock;

/* records.c */
extern IOP_TLS tbuf *my_buf;
extern tbuf *all_bufs;
extern uint32_t next_thread;
extern long records_reserved, records_lost;
extern int rec_fd;
extern char rec_path[4400], json_path[4400];
extern pthread_key_t buf_key;
extern note *notes;
void write_buffer(tbuf *b);
void thread_exit(void *arg);

/* output.c */
void write_json(const char *reason);
void flush_all(const char *reason); /* every buffer, then the .json */

#endif
