/* Per-thread record buffers, the .rec file, counter updates and notes. */
#define _GNU_SOURCE
#include "core_private.h"
#include "access.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* Record buffers: one per thread, written to the .rec file when full. */

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

static IOP_TLS tbuf *my_buf;
static tbuf *all_bufs;
static uint32_t next_thread;
static long records_reserved, records_lost; /* lost: no buffer could be had */
static pthread_key_t buf_key;

/* A name's entry in the .names file: id, length, the bytes, padding to 8. */
static void write_name(uint64_t id, const char *name, void *arg) {
    int *fd = arg;
    if (*fd < 0) return;
    uint32_t len = (uint32_t)strlen(name);
    struct { uint64_t id; uint32_t len, zero; } head = {id, len, 0};
    static const char pad[8];
    /* the entry in one call: a process killed between calls left half of one */
    const struct iovec v[3] = {{&head, sizeof head}, {(void *)name, len},
                               {(void *)pad, (8 - len % 8) % 8}};
    if (sys_writev_all(*fd, v, 3) != 0) {
        sys_close(*fd);
        *fd = -1; /* the rest is not written */
    }
}

/* Names the records about to be written refer to go first, so that the
 * .rec and .names of a killed process still make sense together. */
static int write_new_names(void) {
    if (!names_unwritten()) return 0;
    char path[4500];
    snprintf(path, sizeof path, "%s.names", iop_proc.stem);
    int fd = iop_proc.names_id.known ? trace_file_append(path, &iop_proc.names_id)
                                : trace_file_create(path, &iop_proc.names_id);
    if (fd < 0) return -1;
    names_each(1, write_name, &fd);
    if (fd < 0) return -1;
    sys_close(fd);
    names_written();
    return 0;
}

/* Called with iop_core_lock held. */
static void write_buffer(tbuf *b) {
    if (!b->n) return;
    /* Ticks to seconds on the way out. */
    double spt = seconds_per_tick();
    for (uint32_t i = 0; i < b->n; i++) {
        b->r[i].start *= spt;
        b->r[i].end *= spt;
    }
    char path[4500];
    snprintf(path, sizeof path, "%s.rec", iop_proc.stem);
    int fd = -1;
    if (write_new_names() == 0) fd = trace_file_append(path, &iop_proc.rec_id);
    int ok = fd >= 0 && sys_write_all(fd, b->r, b->n * sizeof(struct iop_record)) == 0;
    if (fd >= 0) sys_close(fd);
    if (!ok) {
        /* A short write may have left part of a record: the reader drops it. */
        b->dropped += b->n;
        b->kept -= b->n;
        give_up(trace_failure());
    }
    b->n = 0;
}

static void thread_exit(void *arg) {
    tbuf *b = arg;
    int saved = errno;
    iop_busy_enter();
    iop_lock(&iop_core_lock);
    write_buffer(b);
    iop_unlock(&iop_core_lock);
    sites_thread_exit();
    iop_busy_leave();
    errno = saved;
}

static tbuf *thread_buffer(void) {
    if (IOP_LIKELY(my_buf != NULL)) return my_buf;
    iop_watch_exit_status();
    /* the system call itself: our mmap wrapper would count a nested call */
    void *p = (void *)syscall(SYS_mmap, NULL, sizeof(tbuf), PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    tbuf *b = p;
    iop_lock(&iop_core_lock);
    b->thread = next_thread++;
    b->n = 0;
    b->budget = b->kept = b->dropped = 0;
    b->next = all_bufs;
    all_bufs = b;
    iop_unlock(&iop_core_lock);
    my_buf = b;
    pthread_setspecific(buf_key, b);
    return b;
}

int records_start(void) { return pthread_key_create(&buf_key, thread_exit) != 0 ? -1 : 0; }

void records_write_all(void) {
    for (tbuf *b = all_bufs; b; b = b->next) write_buffer(b);
}

void records_counted(long *kept, long *dropped, unsigned *threads) {
    *kept = 0;
    *dropped = records_lost;
    for (tbuf *b = all_bufs; b; b = b->next) {
        *kept += b->kept;
        *dropped += b->dropped;
    }
    *threads = next_thread;
}

/* A forked child keeps only the buffer of the thread that forked, emptied:
 * the parent writes its own records. */
void records_after_fork(void) {
    all_bufs = NULL;
    records_reserved = records_lost = 0;
    if (my_buf) {
        my_buf->n = 0;
        my_buf->budget = my_buf->kept = my_buf->dropped = 0;
        my_buf->next = NULL;
        all_bufs = my_buf;
    }
}

static int reserve(tbuf *b) {
    long old = __atomic_fetch_add(&records_reserved, RESERVE, __ATOMIC_RELAXED);
    if (old >= iop_proc.max_records) return 0;
    b->budget = iop_proc.max_records - old < RESERVE ? iop_proc.max_records - old : RESERVE;
    return 1;
}

_Static_assert(TB_CAP % 256 == 0, "buffers are checked every 256 records");

/* Every 256th record (one test on the hot path): the buffer is written out
 * when full, or when its oldest record is over a second old, so a killed
 * process loses at most one buffer or one second. */
static void buffer_checkpoint(tbuf *b) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (b->n == 1) {
        b->first = now;
        return;
    }
    int old = now.tv_sec - b->first.tv_sec > 1 ||
              (now.tv_sec - b->first.tv_sec == 1 && now.tv_nsec >= b->first.tv_nsec);
    if (b->n == TB_CAP || old) {
        iop_lock(&iop_core_lock);
        write_buffer(b);
        iop_unlock(&iop_core_lock);
    }
}

/* Called under the busy guard. */
static void add_record(int layer, int op, uint64_t id, int64_t offset, int64_t len, double t1,
                       double t2, unsigned flags) {
    /* the call's site: also counted when the record itself is not kept */
    uint32_t site = iop_site_here(__builtin_frame_address(0), len, t2 - t1);
    tbuf *b = thread_buffer();
    if (IOP_UNLIKELY(!b)) {
        __atomic_add_fetch(&records_lost, 1, __ATOMIC_RELAXED);
        return;
    }
    if (IOP_UNLIKELY(b->budget == 0) && !reserve(b)) {
        b->dropped++; /* over the limit: the counters still see the call */
        return;
    }
    b->budget--;
    b->kept++;
    b->r[b->n] = (struct iop_record){t1, t2, offset, len, id, b->thread, (uint8_t)layer,
                                     (uint8_t)op, (uint16_t)flags, site, 0};
    if (IOP_UNLIKELY((++b->n & 255) <= 1)) buffer_checkpoint(b);
}

/* ------------------------------------------------------------------ */
/* Counters. */

/* Darshan's size bins: each upper edge belongs to its bin (exactly 100 B
 * is 0_100, exactly 1 MiB is 100K_1M). */
int iop_size_bin(int64_t n) {
    static const int64_t upper[IOP_NSIZE_BINS - 1] = IOP_SIZE_BIN_UPPER;
    for (int i = 0; i < IOP_NSIZE_BINS - 1; i++)
        if (n <= upper[i]) return i;
    return IOP_NSIZE_BINS - 1;
}

struct iop_common_pair { iop_common access, stride; };

/* The common-value tables, taken from the pool the first time a file
 * moves data (most files of a metadata-heavy run never do). */
static struct iop_common_pair *common_of(iop_stats *st) {
    if (IOP_LIKELY(st->common != NULL)) return st->common;
    struct iop_common_pair *p = pool_alloc(sizeof *p);
    if (p) memset(p, 0, sizeof *p);
    return st->common = p;
}

/* The counters of one data operation; called with the file's lock held. */
static inline __attribute__((always_inline)) void count_data(iop_stats *st, int op, int64_t offset, int64_t bytes,
                              const void *buf, int64_t alignment, double t1, double t2) {
    int rd = op == IOP_OP_READ;
    double dt = t2 - t1;
    int64_t *c = st->c;
    double *f = st->f;
    c[rd ? IOP_C_READS : IOP_C_WRITES]++;
    c[rd ? IOP_C_BYTES_READ : IOP_C_BYTES_WRITTEN] += bytes;
    c[(rd ? IOP_C_SIZE_READ_0_100 : IOP_C_SIZE_WRITE_0_100) + iop_size_bin(bytes)]++;
    struct iop_common_pair *cp = common_of(st);
    if (cp) common_note(&cp->access, &c[IOP_C_ACCESS1_ACCESS], &c[IOP_C_ACCESS1_COUNT], bytes);
    if (offset >= 0) {
        /* Darshan's definitions, with the last byte 0 at open: a first
         * access at offset 0 is neither sequential nor consecutive */
        int64_t *last = rd ? &st->last_read : &st->last_write;
        if (offset > *last) c[rd ? IOP_C_SEQ_READS : IOP_C_SEQ_WRITES]++;
        if (offset == *last + 1) c[rd ? IOP_C_CONSEC_READS : IOP_C_CONSEC_WRITES]++;
        int64_t stride = offset > 0 && offset > *last && *last != 0 ? offset - *last - 1 : 0;
        *last = offset + bytes - 1;
        int mx = rd ? IOP_C_MAX_BYTE_READ : IOP_C_MAX_BYTE_WRITTEN;
        if (offset + bytes - 1 > c[mx]) c[mx] = offset + bytes - 1;
        if (cp) common_note(&cp->stride, &c[IOP_C_STRIDE1_STRIDE], &c[IOP_C_STRIDE1_COUNT], stride);
        /* block sizes are powers of two: a mask, not a division, per call */
        if (alignment > 0 && ((alignment & (alignment - 1)) ? offset % alignment
                                                             : offset & (alignment - 1)))
            c[IOP_C_FILE_NOT_ALIGNED]++;
    }
    if (buf && ((uintptr_t)buf & 7)) c[IOP_C_MEM_NOT_ALIGNED]++;
    if (st->last_op >= 0 && st->last_op != op) c[IOP_C_RW_SWITCHES]++;
    st->last_op = op;
    int t = rd ? IOP_F_F_READ_TIME : IOP_F_F_WRITE_TIME;
    int mt = rd ? IOP_F_F_MAX_READ_TIME : IOP_F_F_MAX_WRITE_TIME;
    int ts = rd ? IOP_F_F_READ_START_TIMESTAMP : IOP_F_F_WRITE_START_TIMESTAMP;
    int te = rd ? IOP_F_F_READ_END_TIMESTAMP : IOP_F_F_WRITE_END_TIMESTAMP;
    f[t] += dt;
    if (dt > f[mt]) { /* the slowest operation, and how much it moved */
        f[mt] = dt;
        c[rd ? IOP_C_MAX_READ_TIME_SIZE : IOP_C_MAX_WRITE_TIME_SIZE] = bytes;
    }
    if (f[ts] == 0 || t1 < f[ts]) f[ts] = t1;
    if (t2 > f[te]) f[te] = t2;
}

void iop_data_op(iop_stats *st, int op, int64_t offset, int64_t bytes, const void *buf,
                 int64_t alignment, double t1, double t2, unsigned flags) {
    iop_data_op_at(st, op, &offset, bytes, buf, alignment, t1, t2, flags); /* a local position */
}

void iop_data_op_at(iop_stats *st, int op, int64_t *pos, int64_t bytes, const void *buf,
                    int64_t alignment, double t1, double t2, unsigned flags) {
    /* A failed call moved nothing: like Darshan, it is not counted. */
    if (IOP_UNLIKELY(!st || bytes < 0)) return;
    iop_busy_enter();
    iop_lock(&st->lock);
    /* Threads sharing a descriptor share its position: the file's lock,
     * taken anyway, makes each call claim its own range. */
    int64_t offset = *pos;
    *pos = offset + bytes;
    count_data(st, op, offset, bytes, buf, alignment, t1, t2);
    iop_unlock(&st->lock);
    add_record(st->layer, op, st->file_id, offset, bytes, t1, t2, flags);
    iop_busy_leave();
}

void iop_meta_count(iop_stats *st, int op, int counter, double t1, double t2) {
    if (IOP_UNLIKELY(!st)) return;
    iop_busy_enter();
    iop_lock(&st->lock);
    if (counter >= 0) st->c[counter]++;
    st->f[IOP_F_F_META_TIME] += t2 - t1;
    /* as Darshan: a real open or a close starts sequentiality afresh, a dup does not */
    if ((op == IOP_OP_OPEN && counter == IOP_C_OPENS) || op == IOP_OP_CLOSE)
        st->last_read = st->last_write = 0;
    if (op == IOP_OP_OPEN) {
        if (st->f[IOP_F_F_OPEN_START_TIMESTAMP] == 0 || t1 < st->f[IOP_F_F_OPEN_START_TIMESTAMP])
            st->f[IOP_F_F_OPEN_START_TIMESTAMP] = t1;
        if (t2 > st->f[IOP_F_F_OPEN_END_TIMESTAMP]) st->f[IOP_F_F_OPEN_END_TIMESTAMP] = t2;
    } else if (op == IOP_OP_CLOSE) {
        if (st->f[IOP_F_F_CLOSE_START_TIMESTAMP] == 0 || t1 < st->f[IOP_F_F_CLOSE_START_TIMESTAMP])
            st->f[IOP_F_F_CLOSE_START_TIMESTAMP] = t1;
        if (t2 > st->f[IOP_F_F_CLOSE_END_TIMESTAMP]) st->f[IOP_F_F_CLOSE_END_TIMESTAMP] = t2;
    }
    iop_unlock(&st->lock);
    iop_busy_leave();
}

void iop_meta_op(iop_stats *st, int op, int counter, double t1, double t2, unsigned flags) {
    if (IOP_UNLIKELY(!st)) return;
    iop_busy_enter();
    iop_meta_count(st, op, counter, t1, t2);
    add_record(st->layer, op, st->file_id, -1, 0, t1, t2, flags);
    iop_busy_leave();
}

/* A background thread's operation: two records, QUEUED then BACKGROUND, kept
 * together in one buffer (the reader pairs them in order) or both dropped.
 * Records only: the program's own call already counted the bytes. */
void iop_background_op(int layer, int op, uint64_t id, int64_t offset, int64_t len,
                       double queued, double issued, double completed, int failed) {
    iop_busy_enter();
    tbuf *b = thread_buffer();
    if (IOP_UNLIKELY(!b)) {
        __atomic_add_fetch(&records_lost, 2, __ATOMIC_RELAXED);
        iop_busy_leave();
        return;
    }
    if (b->budget < 2 && (!reserve(b) || b->budget < 2)) { /* a lone last slot stays unused */
        b->dropped += 2;
        iop_busy_leave();
        return;
    }
    if (b->n + 2 > TB_CAP) { /* a pair never straddles two writes of the buffer */
        iop_lock(&iop_core_lock);
        write_buffer(b);
        iop_unlock(&iop_core_lock);
    }
    unsigned err = failed ? IOP_FLAG_ERROR : 0;
    uint32_t n0 = b->n;
    b->budget -= 2;
    b->kept += 2;
    b->r[n0] = (struct iop_record){queued, issued, offset, len, id, b->thread, (uint8_t)layer,
                                   (uint8_t)op, (uint16_t)(IOP_FLAG_QUEUED | err), 0, 0};
    b->r[n0 + 1] = b->r[n0];
    b->r[n0 + 1].start = issued;
    b->r[n0 + 1].end = completed;
    b->r[n0 + 1].flags = (uint16_t)(IOP_FLAG_BACKGROUND | err);
    b->n = n0 + 2;
    /* the checks add_record makes at records 1 and 256k, made once the pair is in */
    if (n0 == 0) {
        b->n = 1;
        buffer_checkpoint(b); /* notes the buffer's first time */
        b->n = 2;
    } else if ((n0 >> 8) != (b->n >> 8) || b->n == TB_CAP) {
        buffer_checkpoint(b);
    }
    iop_busy_leave();
}

/* ------------------------------------------------------------------ */
/* Notes (hints per file, HDF5 properties ...). */

typedef struct note { struct note *next; uint64_t id; char text[]; } note;
static note *notes;

void notes_each(void (*fn)(uint64_t id, const char *text, void *arg), void *arg) {
    for (note *e = notes; e; e = e->next) fn(e->id, e->text, arg);
}

void iop_note(const char *kind, uint64_t id, const char *key, const char *value) {
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "%s\t%s\t%s", kind, key, value);
    if (n < 0) return;
    iop_busy_enter();
    iop_lock(&iop_core_lock);
    note *e = pool_alloc(sizeof *e + (size_t)n + 1);
    if (e) {
        e->id = id;
        memcpy(e->text, buf, (size_t)n + 1);
        e->next = notes;
        notes = e;
    } else {
        __atomic_add_fetch(&iop_overflows[IOP_OVERFLOW_NOTES], 1, __ATOMIC_RELAXED);
    }
    iop_unlock(&iop_core_lock);
    iop_busy_leave();
}

void iop_set_rank(int rank, int size) {
    iop_proc.mpi = 1;
    if (rank >= 0) {
        iop_proc.rank = rank;
        iop_proc.rank_source = 2;
    }
    if (size > 0) iop_proc.nprocs = size;
}

