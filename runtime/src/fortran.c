/* FORTRAN layer: gfortran's READ and WRITE statements.
 *
 * A Fortran statement reaches the kernel as the runtime library's buffered
 * writes (8-64 KiB), so the POSIX layer cannot tell one WRITE of a whole
 * array from two million WRITEs of one element each.  gfortran compiles a
 * statement into calls of libgfortran.so.5:
 *
 *     _gfortran_st_write(&dt)                      the statement starts
 *     _gfortran_transfer_real_write(&dt, &x, 8)    one per item (or array)
 *     _gfortran_st_write_done(&dt)                 the statement ends
 *
 * (st_read and the transfers without _write for READ; st_open and st_close
 * for OPEN and CLOSE).  These wrappers count, per (unit's file): statements
 * per direction, formatted (a format, list-directed or namelist) or
 * unformatted, items, bytes (kind x count: the items' size in memory, not
 * the text a formatted statement writes), the time from the statement's
 * start to the end of its _done call (formatting and buffering included),
 * and the statement site (source file and line) that took the most time.
 * The POSIX writes the library makes inside a statement are counted by the
 * POSIX layer as they are.
 *
 * Parameter blocks.  Every statement passes a block that starts with
 * st_parameter_common {flags, unit, filename, line}, the same since GCC 4;
 * the rest (OPEN's FILE=, NEWUNIT=; array descriptors) is read only when the
 * library that serves the calls is libgfortran.so.5 (GCC 8 on, the layouts
 * below, checked against GCC 12 by tests/test_runtime_fortran.py); with any
 * other library statements are counted without file names (units are named
 * "<Fortran unit N>") and arrays without sizes (ARRAYS_UNSIZED).
 *
 * No Fortran record is written: the layer has counters only.  The state of
 * the statement under way is per thread; the unit table is fixed (no
 * allocation), claimed under a lock, read without one.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

/* ------------------------------------------------------------------ */
/* libgfortran's parameter blocks (libgfortran/io/io.h). */

typedef struct {
    int32_t flags;
    int32_t unit;
    const char *filename; /* the statement's source file, as compiled */
    int32_t line;
} gfc_common;

#define GFC_LIBRETURN_MASK 3 /* 0: the statement succeeded */
#define GFC_DT_LIST_FORMAT (1 << 7)
#define GFC_DT_HAS_FORMAT (1 << 12)
#define GFC_DT_HAS_INTERNAL_UNIT (1 << 14) /* WRITE(string, ...): no file */
#define GFC_DT_HAS_NAMELIST_NAME (1 << 15)
#define GFC_DT_FORMATTED (GFC_DT_LIST_FORMAT | GFC_DT_HAS_FORMAT | GFC_DT_HAS_NAMELIST_NAME)
#define GFC_OPEN_HAS_FILE (1 << 8)
#define GFC_OPEN_HAS_STATUS (1 << 9)
#define GFC_OPEN_HAS_NEWUNIT (1 << 23)

/* st_parameter_open of libgfortran.so.5: the common part (48 bytes with
 * IOMSG= and IOSTAT=), recl_in, then FILE= as (size_t length, char *),
 * STATUS= as (char *, size_t length), ... NEWUNIT= (int *) at 296. */
#define OPEN_FILE_LEN_AT 56
#define OPEN_FILE_AT 64
#define OPEN_STATUS_AT 72
#define OPEN_STATUS_LEN_AT 80
#define OPEN_NEWUNIT_AT 296

/* gfc_array descriptor of libgfortran.so.5: base, offset, dtype {size_t
 * elem_len, int version, signed char rank, type, short attribute}, span,
 * then per dimension {stride, lower bound, upper bound}. */
typedef struct {
    void *base;
    size_t offset;
    size_t elem_len;
    int version;
    signed char rank, type;
    short attribute;
    ptrdiff_t span;
    struct { ptrdiff_t stride, lbound, ubound; } dim[15];
} gfc_array;

static int layout_known = -1; /* -1 not yet checked, 0 unknown library, 1 .so.5 */

/* Whether the library serving ``fn`` is a libgfortran.so.5 (the system's,
 * or a copy a Python wheel bundles: libgfortran-<hash>.so.5). */
static void check_layout(void *fn) {
    Dl_info di;
    int known = 0;
    iop_enter(); /* dladdr may take the loader's lock and allocate */
    if (fn && dladdr(fn, &di) && di.dli_fname)
        known = strstr(di.dli_fname, "libgfortran") && strstr(di.dli_fname, ".so.5");
    iop_leave();
    __atomic_store_n(&layout_known, known, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ */
/* Units: a fixed table keyed by unit number. */

#define NUNITS 1024 /* a power of two */
#define NSITES 8    /* statement sites kept per unit */

typedef struct {
    const char *src; /* common.filename: the compiler's string, stable */
    int32_t line;
    uint64_t src_id; /* the source file's name in the trace's name table */
    double time;     /* ticks */
    int64_t statements, bytes;
} site;

typedef struct {
    int32_t unit;
    int used;          /* set once, never cleared: the slot is this unit's */
    int resolved;      /* st (or NULL: excluded, not traced) is known */
    int opened;        /* 1: by an OPEN we saw, with its name in ``name_id`` */
    uint64_t name_id;  /* 0 and opened: an OPEN whose name we could not read */
    iop_stats *st;
    site sites[NSITES];
} unit_slot;

static unit_slot units[NUNITS];
static iop_lock_t units_lock;
static long unit_overflows;

static inline unsigned unit_hash(int32_t unit) {
    return ((uint32_t)unit * 2654435761u) >> 22; /* 10 bits: NUNITS */
}

/* The slot of ``unit``; with ``claim``, a free one taken for it (NULL when
 * the table is full, counted). */
static unit_slot *unit_find(int32_t unit, int claim) {
    unsigned h = unit_hash(unit);
    for (unsigned i = 0; i < NUNITS; i++) {
        unit_slot *s = &units[(h + i) & (NUNITS - 1)];
        if (!__atomic_load_n(&s->used, __ATOMIC_ACQUIRE)) break;
        if (s->unit == unit) return s;
    }
    if (!claim) return NULL;
    iop_busy_enter(); /* a signal handler's statement meanwhile passes through */
    iop_lock(&units_lock);
    unit_slot *found = NULL;
    for (unsigned i = 0; i < NUNITS && !found; i++) {
        unit_slot *s = &units[(h + i) & (NUNITS - 1)];
        if (!s->used) {
            memset(s, 0, sizeof *s);
            s->unit = unit;
            __atomic_store_n(&s->used, 1, __ATOMIC_RELEASE);
            found = s;
        } else if (s->unit == unit) {
            found = s;
        }
    }
    iop_unlock(&units_lock);
    iop_busy_leave();
    if (!found) iop_overflow(&unit_overflows);
    return found;
}

/* The counters of the file a unit is connected to.  A unit we did not see
 * opened is one of the preconnected ones (0, 5, 6) or was opened by its first
 * statement under gfortran's name fort.N. */
static iop_stats *unit_stats(unit_slot *s) {
    if (IOP_LIKELY(s->resolved)) return s->st;
    if (!iop_layer_traced(IOP_LAYER_FORTRAN)) return NULL;
    const char *std = s->unit == 6 ? "<STDOUT>" : s->unit == 5 ? "<STDIN>"
                    : s->unit == 0 ? "<STDERR>" : NULL;
    char name[64];
    uint64_t id;
    if (s->opened && s->name_id) {
        id = s->name_id;
    } else if (!s->opened && std) {
        id = iop_register_name(std);
    } else if (!s->opened && s->unit > 0) {
        snprintf(name, sizeof name, "fort.%d", (int)s->unit);
        id = iop_register_path(name);
    } else { /* a scratch file, or an OPEN whose FILE= could not be read */
        snprintf(name, sizeof name, "<Fortran unit %d>", (int)s->unit);
        id = iop_register_name(name);
    }
    s->st = iop_stats_for(IOP_LAYER_FORTRAN, id);
    s->resolved = 1;
    return s->st;
}

static void unit_reset(unit_slot *s) {
    s->resolved = s->opened = 0;
    s->name_id = 0;
    s->st = NULL;
    memset(s->sites, 0, sizeof s->sites);
}

/* ------------------------------------------------------------------ */
/* The statement under way on this thread. */

typedef struct {
    const void *dtp; /* its parameter block; NULL: none */
    double t1;
    int64_t items, bytes, unsized;
    int inner; /* in a _write item call, which may call the plain one through the PLT */
    int32_t flags, unit, line;
    const char *src;
} statement;

static IOP_TLS statement cur;

/* One item of ``bytes`` bytes. */
static inline void item(int64_t bytes) {
    cur.items++;
    cur.bytes += bytes;
}

static void start(const void *dtp) {
    const gfc_common *c = dtp;
    int32_t flags = c->flags;
    /* internal I/O (a string as the unit) moves no file data: an item of an
     * external statement may call a function that does some */
    if (flags & GFC_DT_HAS_INTERNAL_UNIT) return;
    cur = (statement){dtp, 0, 0, 0, 0, 0, flags, c->unit, c->line, c->filename};
    cur.t1 = iop_now();
}

/* The site of the statement in ``s`` (found, or taken from the least
 * costly one); called with the file's lock held. */
static site *site_of(unit_slot *s, const statement *x) {
    site *least = &s->sites[0];
    for (int i = 0; i < NSITES; i++) {
        site *p = &s->sites[i];
        if (p->src == x->src && p->line == x->line && p->statements) return p;
        if (p->time < least->time || !p->statements) least = p;
        if (!p->statements) break;
    }
    memset(least, 0, sizeof *least);
    least->src = x->src;
    least->line = x->line;
    return least;
}

static void finish(int write, double t2) {
    statement x = cur;
    cur.dtp = NULL;
    unit_slot *s = unit_find(x.unit, 1);
    iop_stats *st = s ? unit_stats(s) : NULL;
    if (!st) return;
    int formatted = (x.flags & GFC_DT_FORMATTED) != 0;
    double dt = t2 - x.t1;
    iop_busy_enter();
    iop_lock(&st->lock);
    site *p = site_of(s, &x);
    uint64_t src_id = p->src_id;
    if (IOP_UNLIKELY(!p->statements && x.src)) { /* a new site: its source's name, */
        iop_unlock(&st->lock);                   /* registered under the names' lock */
        src_id = iop_register_name(x.src);
        iop_lock(&st->lock);
    }
    int64_t *c = st->c;
    double *f = st->f;
    c[write ? IOP_C_WRITES : IOP_C_READS]++;
    c[formatted ? (write ? IOP_C_FORMATTED_WRITES : IOP_C_FORMATTED_READS)
                : (write ? IOP_C_UNFORMATTED_WRITES : IOP_C_UNFORMATTED_READS)]++;
    c[write ? IOP_C_ITEMS_WRITTEN : IOP_C_ITEMS_READ] += x.items;
    c[write ? IOP_C_BYTES_WRITTEN : IOP_C_BYTES_READ] += x.bytes;
    c[(write ? IOP_C_SIZE_WRITE_0_100 : IOP_C_SIZE_READ_0_100) + iop_size_bin(x.bytes)]++;
    c[IOP_C_ARRAYS_UNSIZED] += x.unsized;
    int mt = write ? IOP_F_F_MAX_WRITE_TIME : IOP_F_F_MAX_READ_TIME;
    int ts = write ? IOP_F_F_WRITE_START_TIMESTAMP : IOP_F_F_READ_START_TIMESTAMP;
    int te = write ? IOP_F_F_WRITE_END_TIMESTAMP : IOP_F_F_READ_END_TIMESTAMP;
    f[write ? IOP_F_F_WRITE_TIME : IOP_F_F_READ_TIME] += dt;
    if (dt > f[mt]) {
        f[mt] = dt;
        c[write ? IOP_C_MAX_WRITE_TIME_SIZE : IOP_C_MAX_READ_TIME_SIZE] = x.bytes;
    }
    if (f[ts] == 0 || x.t1 < f[ts]) f[ts] = x.t1;
    if (t2 > f[te]) f[te] = t2;
    if (st->last_op >= 0 && st->last_op != (write ? IOP_OP_WRITE : IOP_OP_READ))
        c[IOP_C_RW_SWITCHES]++;
    st->last_op = write ? IOP_OP_WRITE : IOP_OP_READ;
    /* the site, unless another thread took its place meanwhile */
    if (p->src == x.src && p->line == x.line) {
        if (!p->src_id) p->src_id = src_id;
        p->time += dt;
        p->statements++;
        p->bytes += x.bytes;
        int same = c[IOP_C_SITE_LINE] == p->line && (uint64_t)c[IOP_C_SITE_SOURCE] == p->src_id;
        if (same || p->time > f[IOP_F_F_SITE_TIME]) {
            c[IOP_C_SITE_SOURCE] = (int64_t)p->src_id;
            c[IOP_C_SITE_LINE] = p->line;
            c[IOP_C_SITE_STATEMENTS] = p->statements;
            c[IOP_C_SITE_BYTES] = p->bytes;
            f[IOP_F_F_SITE_TIME] = p->time;
        }
    }
    iop_unlock(&st->lock);
    iop_busy_leave();
}

/* ------------------------------------------------------------------ */
/* Statements. */

#define WRAP_START(name)                                                  \
    REAL_DECL(void, name, (void *));                                      \
    IOP_EXPORT void name(void *dtp) {                                     \
        if (iop_active()) start(dtp);                                     \
        REAL(name)(dtp);                                                  \
    }
WRAP_START(_gfortran_st_write)
WRAP_START(_gfortran_st_read)

#define WRAP_DONE(name, write)                                            \
    REAL_DECL(void, name, (void *));                                      \
    IOP_EXPORT void name(void *dtp) {                                     \
        if (cur.dtp != dtp || !iop_active()) {                            \
            REAL(name)(dtp);                                              \
            return;                                                       \
        }                                                                 \
        IOP_SCOPE;                                                        \
        REAL(name)(dtp);                                                  \
        int e = errno;                                                    \
        finish(write, iop_now());                                         \
        errno = e;                                                        \
    }
WRAP_DONE(_gfortran_st_write_done, 1)
WRAP_DONE(_gfortran_st_read_done, 0)

/* Items: kind bytes each (complex: two reals; characters: length x kind). */
/* libgfortran's _write forms call the plain ones through the PLT: an
 * item is counted (``COUNT``) once, by the outer wrapper. */
#define ITEM_CALL(dtp, COUNT, CALL)                                       \
    do {                                                                  \
        if (cur.dtp != (dtp) || cur.inner) {                              \
            CALL;                                                         \
            break;                                                        \
        }                                                                 \
        if (!iop_in_runtime) COUNT;                                       \
        cur.inner = 1;                                                    \
        CALL;                                                             \
        cur.inner = 0;                                                    \
    } while (0)
#define WRAP_KIND(name, factor)                                           \
    REAL_DECL(void, name, (void *, void *, int));                         \
    IOP_EXPORT void name(void *dtp, void *p, int kind) {                  \
        ITEM_CALL(dtp, item((int64_t)kind * (factor)), REAL(name)(dtp, p, kind)); \
    }
WRAP_KIND(_gfortran_transfer_integer, 1)
WRAP_KIND(_gfortran_transfer_integer_write, 1)
WRAP_KIND(_gfortran_transfer_real, 1)
WRAP_KIND(_gfortran_transfer_real_write, 1)
WRAP_KIND(_gfortran_transfer_real128, 1)
WRAP_KIND(_gfortran_transfer_real128_write, 1)
WRAP_KIND(_gfortran_transfer_logical, 1)
WRAP_KIND(_gfortran_transfer_logical_write, 1)
WRAP_KIND(_gfortran_transfer_complex, 2)
WRAP_KIND(_gfortran_transfer_complex_write, 2)
WRAP_KIND(_gfortran_transfer_complex128, 2)
WRAP_KIND(_gfortran_transfer_complex128_write, 2)

#define WRAP_CHAR(name)                                                   \
    REAL_DECL(void, name, (void *, void *, size_t));                      \
    IOP_EXPORT void name(void *dtp, void *p, size_t len) {                \
        ITEM_CALL(dtp, item((int64_t)len), REAL(name)(dtp, p, len));       \
    }
WRAP_CHAR(_gfortran_transfer_character)
WRAP_CHAR(_gfortran_transfer_character_write)

#define WRAP_WIDE(name)                                                   \
    REAL_DECL(void, name, (void *, void *, size_t, int));                 \
    IOP_EXPORT void name(void *dtp, void *p, size_t len, int kind) {      \
        ITEM_CALL(dtp, item((int64_t)len * kind), REAL(name)(dtp, p, len, kind)); \
    }
WRAP_WIDE(_gfortran_transfer_character_wide)
WRAP_WIDE(_gfortran_transfer_character_wide_write)

/* An array: its elements and bytes from the descriptor, when the layout is
 * known and the descriptor looks like one (else counted in ARRAYS_UNSIZED). */
static void array_item(const gfc_array *d) {
    int rank = layout_known == 1 && d ? d->rank : -1;
    if (rank < 0 || rank > 15 || d->elem_len == 0 || d->elem_len > (1u << 30)) {
        cur.unsized++;
        return;
    }
    int64_t n = 1;
    for (int i = 0; i < rank && n; i++) {
        ptrdiff_t extent = d->dim[i].ubound - d->dim[i].lbound + 1;
        n = extent > 0 && extent < ((int64_t)1 << 40) / (n ? n : 1) ? n * extent : 0;
    }
    cur.items += n;
    cur.bytes += n * (int64_t)d->elem_len;
}

#define WRAP_ARRAY(name)                                                  \
    REAL_DECL(void, name, (void *, void *, int, size_t));                 \
    IOP_EXPORT void name(void *dtp, void *desc, int kind, size_t charlen) {  \
        if (IOP_UNLIKELY(layout_known < 0)) check_layout(REAL(name));     \
        ITEM_CALL(dtp, array_item(desc), REAL(name)(dtp, desc, kind, charlen)); \
    }
WRAP_ARRAY(_gfortran_transfer_array)
WRAP_ARRAY(_gfortran_transfer_array_write)

/* ------------------------------------------------------------------ */
/* OPEN and CLOSE: which file a unit is connected to. */

static inline const void *field(const void *block, size_t at) {
    const void *p;
    memcpy(&p, (const char *)block + at, sizeof p);
    return p;
}
static inline size_t field_len(const void *block, size_t at) {
    size_t n;
    memcpy(&n, (const char *)block + at, sizeof n);
    return n;
}

/* FILE= of an OPEN, blanks trimmed, into ``out``: 1 named, 0 none (gfortran
 * then names it fort.N, or a scratch file has no name), -1 unknown. */
static int open_name(const void *opp, int32_t flags, char *out, size_t cap) {
    if (layout_known != 1) return -1;
    if (flags & GFC_OPEN_HAS_STATUS) {
        const char *status = field(opp, OPEN_STATUS_AT);
        size_t n = field_len(opp, OPEN_STATUS_LEN_AT);
        if (status && n >= 7 && !strncasecmp(status, "scratch", 7)) return -1;
    }
    if (!(flags & GFC_OPEN_HAS_FILE)) return 0;
    const char *file = field(opp, OPEN_FILE_AT);
    size_t n = field_len(opp, OPEN_FILE_LEN_AT);
    if (!file || n == 0 || n >= cap) return -1;
    while (n > 0 && file[n - 1] == ' ') n--;
    memcpy(out, file, n);
    out[n] = 0;
    return n > 0 ? 1 : -1;
}

REAL_DECL(void, _gfortran_st_open, (void *));
IOP_EXPORT void _gfortran_st_open(void *opp) {
    if (!iop_active()) {
        REAL(_gfortran_st_open)(opp);
        return;
    }
    if (IOP_UNLIKELY(layout_known < 0)) check_layout(REAL(_gfortran_st_open));
    gfc_common *c = opp;
    int32_t flags = c->flags, unit = c->unit;
    char name[4096];
    int named = open_name(opp, flags, name, sizeof name);
    int *newunit = layout_known == 1 && (flags & GFC_OPEN_HAS_NEWUNIT)
                       ? (int *)field(opp, OPEN_NEWUNIT_AT) : NULL;
    double t1 = iop_now();
    REAL(_gfortran_st_open)(opp);
    int e = errno;
    double t2 = iop_now();
    /* NEWUNIT= unreadable: the unit is unknown (not the block's placeholder) */
    int known_unit = !(flags & GFC_OPEN_HAS_NEWUNIT) || newunit;
    if (!(c->flags & GFC_LIBRETURN_MASK) && known_unit) {
        if (newunit) unit = *newunit;
        unit_slot *s = unit_find(unit, 1);
        if (s) {
            unit_reset(s);
            s->opened = named != 0; /* FILE= absent: gfortran's fort.N */
            if (named > 0 && iop_layer_traced(IOP_LAYER_FORTRAN))
                s->name_id = iop_register_path(name);
            iop_meta_count(unit_stats(s), IOP_OP_OPEN, IOP_C_OPENS, t1, t2);
        }
    }
    errno = e;
}

REAL_DECL(void, _gfortran_st_close, (void *));
IOP_EXPORT void _gfortran_st_close(void *clp) {
    if (!iop_active()) {
        REAL(_gfortran_st_close)(clp);
        return;
    }
    int32_t unit = ((gfc_common *)clp)->unit;
    double t1 = iop_now();
    REAL(_gfortran_st_close)(clp);
    int e = errno;
    unit_slot *s = unit_find(unit, 0);
    if (s) {
        iop_meta_count(s->resolved ? s->st : NULL, IOP_OP_CLOSE, -1, t1, iop_now());
        unit_reset(s);
    }
    errno = e;
}

/* ------------------------------------------------------------------ */
/* The module, as the core sees it (modules.c). */

static void fortran_after_fork(void) {
    units_lock = 0;
    unit_overflows = 0;
    cur.dtp = NULL;
}

static const iop_overflow_count fortran_overflows[] = {{"fortran_units", &unit_overflows},
                                                       {NULL, NULL}};

const iop_module iop_fortran_module = {
    IOP_MODULE_OF(FORTRAN),
    .after_fork = fortran_after_fork,
    .overflows = fortran_overflows,
};
