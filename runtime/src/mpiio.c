/* MPI-IO layer, through the PMPI profiling interface.
 *
 * Every MPI_File_* wrapper below calls the matching PMPI_File_* function,
 * looked up by name when first needed (REAL).  libmpi is never linked and
 * no MPI data object (MPI_COMM_WORLD, MPI_INFO_NULL, MPI_BYTE, ...) is
 * referenced at link time: in Open MPI those are data symbols in libmpi,
 * and a reference to one would stop the library loading into programs
 * without MPI.  The few handles we need are found with dlsym at run time.
 *
 * What is counted (Darshan's MPI-IO module is the model):
 *   - open: COLL_OPENS when the communicator has more than one process,
 *     INDEP_OPENS otherwise; MODE = amode; HINTS += 1 when info is given.
 *   - data: INDEP_*, COLL_* (the _all and _ordered forms), SPLIT_* (the
 *     begin/end pairs, counted once at _end and timed from begin to end),
 *     NB_* (the i* forms, timed by the call itself).  Bytes are count times
 *     the datatype's size, as requested, whatever the status says.
 *   - offsets: the absolute byte offset, through the file view
 *     (PMPI_File_get_byte_offset); shared file pointer calls: -1.
 *   - sync, set_size, set_view (VIEWS), set_info (HINTS).
 *
 * Fortran programs reach the library through its Fortran bindings, which
 * call PMPI_* directly: mpiio_fortran.c wraps those and records through the
 * same functions (mpiio.h), so both are counted alike.
 *
 * Calls made by the MPI library underneath (pwrite, open ...) are still
 * traced by the POSIX layer: the MPI-IO wrappers do not enter the runtime
 * around the real call.  A thread-local depth keeps an MPI-IO call that an
 * implementation might make from inside another one from being counted
 * twice.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "behind.h"
#include "core.h"
#include "mpi_clock.h"
#include "mpiio.h"
#include "settings.h"

IOP_TLS int iop_mpiio_depth;
int iop_mpiio_live;

/* ------------------------------------------------------------------ */
/* MPI objects that are data symbols in the library (iop_mpi_object). */

/* NULL when unknown: then the caller must not use the handle. */
static int world_known(MPI_Comm *out) {
#ifdef OPEN_MPI
    static void *world;
    if (!world) world = iop_mpi_object("ompi_mpi_comm_world");
    if (!world) return 0;
    *out = (MPI_Comm)world;
#else
    *out = MPI_COMM_WORLD;
#endif
    return 1;
}

/* Is ``info`` a real info object (not MPI_INFO_NULL)?  When we cannot tell,
 * say no: passing MPI_INFO_NULL to PMPI_Info_* would be an error. */
static int info_given(MPI_Info info) {
#ifdef OPEN_MPI
    static void *null_info;
    if (!null_info) null_info = iop_mpi_object("ompi_mpi_info_null");
    return null_info && info && (void *)info != null_info;
#else
    return info != MPI_INFO_NULL;
#endif
}

/* ------------------------------------------------------------------ */
/* Real functions used by the wrappers for bookkeeping. */

REAL_DECL(int, PMPI_Comm_rank, (MPI_Comm, int *));
REAL_DECL(int, PMPI_Comm_size, (MPI_Comm, int *));
REAL_DECL(int, PMPI_Type_size, (MPI_Datatype, int *));
REAL_DECL(int, PMPI_File_get_position, (MPI_File, MPI_Offset *));
REAL_DECL(int, PMPI_File_get_byte_offset, (MPI_File, MPI_Offset, MPI_Offset *));
REAL_DECL(int, PMPI_File_get_info, (MPI_File, MPI_Info *));
REAL_DECL(int, PMPI_Info_get_nkeys, (MPI_Info, int *));
REAL_DECL(int, PMPI_Info_get_nthkey, (MPI_Info, int, char *));
REAL_DECL(int, PMPI_Info_get, (MPI_Info, const char *, int, char *, int *));
REAL_DECL(int, PMPI_Info_free, (MPI_Info *));

/* For MPI-IO handles the runtime's ``offset`` slot holds the access mode
 * (positions live in the MPI library and are asked for when needed). */
static inline int amode_of(const iop_open *o) { return (int)o->offset; }

static int64_t type_bytes(int count, MPI_Datatype dt) {
    int size = 0;
    if (count <= 0) return 0;
    if (REAL(PMPI_Type_size)(dt, &size) != MPI_SUCCESS || size < 0) return -1;
    return (int64_t)count * size;
}

/* Absolute byte offset of ``off`` (in etypes, relative to the view). */
static int64_t byte_offset(const iop_open *o, MPI_File fh, MPI_Offset off) {
    MPI_Offset disp;
    if (off < 0 || (amode_of(o) & MPI_MODE_SEQUENTIAL)) return -1;
    if (REAL(PMPI_File_get_byte_offset)(fh, off, &disp) != MPI_SUCCESS) return -1;
    return (int64_t)disp;
}

/* Byte offset of the individual file pointer, read before the call moves it. */
static int64_t individual_offset(const iop_open *o, MPI_File fh) {
    MPI_Offset pos;
    if (amode_of(o) & MPI_MODE_SEQUENTIAL) return -1;
    if (REAL(PMPI_File_get_position)(fh, &pos) != MPI_SUCCESS) return -1;
    return byte_offset(o, fh, pos);
}

int64_t iop_mpiio_offset_before(const iop_open *o, MPI_File fh, int at) {
    return at == IOP_AT_INDIVIDUAL ? individual_offset(o, fh) : -1;
}

/* The size and the explicit offset are asked for only after a successful
 * call, so a bad datatype or offset is reported by the real call, as
 * without us. */
void iop_mpiio_data_done(iop_open *o, MPI_File fh, int op, int counter, unsigned flags, int at,
                         MPI_Offset off, int64_t pre, const void *buf, int count,
                         MPI_Datatype dt, int ret, double t1, double t2) {
    int64_t bytes = -1, offset = pre;
    if (ret == MPI_SUCCESS) {
        bytes = type_bytes(count, dt);
        if (at == IOP_AT_EXPLICIT) offset = byte_offset(o, fh, off);
    }
    iop_count(o->st, counter, 1);
    iop_data_op(o->st, op, offset, bytes, buf, 0, t1, t2, flags);
}

#define COLL IOP_FLAG_COLLECTIVE
#define NB IOP_FLAG_NONBLOCKING
#define RD IOP_OP_READ
#define WR IOP_OP_WRITE

/* ------------------------------------------------------------------ */
/* Blocking and non-blocking data calls.  ``LASTT`` is the type of the last
 * argument (MPI_Status * or MPI_Request *), which we only pass on. */

/* Time one call and hand what it did to ``DONE`` (a function taking the
 * common arguments below); untraced handles pass straight through. */
#define TIMED_CALL(at, CALL, DONE, ...)                       \
    iop_open *o = iop_mpiio_traced(fh);                       \
    if (!o) return CALL;                                      \
    int64_t pre = iop_mpiio_offset_before(o, fh, at);         \
    IOP_SCOPE; double t1 = iop_now();                                    \
    iop_mpiio_depth++;                                        \
    int r = CALL;                                             \
    iop_mpiio_depth--;                                        \
    int e = errno;                                            \
    double t2 = iop_now();                                    \
    DONE(o, fh, __VA_ARGS__, pre, buf, count, dt, r, t1, t2); \
    errno = e;                                                \
    return r

#define DATA_CALL(op, counter, flags, at, off, CALL) \
    TIMED_CALL(at, CALL, iop_mpiio_data_done, op, IOP_C_##counter, flags, at, off)

/* Explicit offset: (fh, offset, buf, count, datatype, last). */
#define WRAP_AT(name, op, counter, flags, BUFT, LASTT)                             \
    REAL_DECL(int, P##name, (MPI_File, MPI_Offset, BUFT, int, MPI_Datatype, LASTT)); \
    IOP_EXPORT int name(MPI_File fh, MPI_Offset off, BUFT buf, int count,          \
                        MPI_Datatype dt, LASTT last) {                             \
        DATA_CALL(op, counter, flags, IOP_AT_EXPLICIT, off,                            \
                  REAL(P##name)(fh, off, buf, count, dt, last));                   \
    }

/* A file pointer (individual or shared): (fh, buf, count, datatype, last). */
#define WRAP_PTR(name, at, op, counter, flags, BUFT, LASTT)                        \
    REAL_DECL(int, P##name, (MPI_File, BUFT, int, MPI_Datatype, LASTT));           \
    IOP_EXPORT int name(MPI_File fh, BUFT buf, int count, MPI_Datatype dt,         \
                        LASTT last) {                                              \
        DATA_CALL(op, counter, flags, at, 0, REAL(P##name)(fh, buf, count, dt, last)); \
    }

#define RBUF void *
#define WBUF const void *
#define STAT MPI_Status *
#define REQ MPI_Request *

#define C_AT(low, UP, op, counter, flags, BUFT, LASTT) \
    WRAP_AT(MPI_File_##low, op, counter, flags, BUFT, LASTT)
#define C_PTR(low, UP, at, op, counter, flags, BUFT, LASTT) \
    WRAP_PTR(MPI_File_##low, at, op, counter, flags, BUFT, LASTT)
IOP_MPIIO_AT_CALLS(C_AT)
IOP_MPIIO_PTR_CALLS(C_PTR)

/* ------------------------------------------------------------------ */
/* Split collectives.  MPI allows one pending split collective per file
 * handle: what begin knew (time, offset, bytes) waits in a small table
 * until the matching end.  The table is fixed; when it is full the begin
 * call is recorded on its own, so nothing is lost but the end's time. */

#define NSPLIT 256
static iop_inflight splits[NSPLIT];
static iop_lock_t split_lock;
static long split_overflows; /* begin calls recorded alone: the table was full */

static int split_put(MPI_File fh, double t1, int64_t offset, int64_t bytes, const void *buf) {
    iop_inflight e = {(uintptr_t)fh, t1, offset, bytes, buf, 0};
    return iop_inflight_put(splits, NSPLIT, &split_lock, &split_overflows, &e);
}

static int split_take(MPI_File fh, iop_inflight *out) {
    return iop_inflight_take(splits, NSPLIT, &split_lock, (uintptr_t)fh, out);
}

void iop_mpiio_split_begun(iop_open *o, MPI_File fh, int op, int at, MPI_Offset off,
                           int64_t pre, const void *buf, int count, MPI_Datatype dt, int ret,
                           double t1, double t2) {
    int64_t offset = pre;
    if (ret == MPI_SUCCESS) {
        if (at == IOP_AT_EXPLICIT) offset = byte_offset(o, fh, off);
        if (split_put(fh, t1, offset, type_bytes(count, dt), buf)) return;
    }
    /* Failed, or no room to wait for the end: record it now. */
    iop_mpiio_data_done(o, fh, op, op == RD ? IOP_C_SPLIT_READS : IOP_C_SPLIT_WRITES, COLL, at,
                        off, pre, buf, count, dt, ret, t1, t2);
}

/* The end call: the pair is counted once, timed from begin to end. */
void iop_mpiio_split_ended(iop_open *o, MPI_File fh, int op, int counter, int ret, double t2) {
    iop_inflight s;
    if (split_take(fh, &s)) {
        iop_count(o->st, counter, 1);
        iop_data_op(o->st, op, s.offset, ret == MPI_SUCCESS ? s.bytes : -1, s.buf, 0, s.t1, t2,
                    COLL);
    }
}

#define SPLIT_BEGIN(op, at, off, CALL) TIMED_CALL(at, CALL, iop_mpiio_split_begun, op, at, off)

#define WRAP_BEGIN_AT(name, op, BUFT)                                              \
    REAL_DECL(int, P##name, (MPI_File, MPI_Offset, BUFT, int, MPI_Datatype));      \
    IOP_EXPORT int name(MPI_File fh, MPI_Offset off, BUFT buf, int count,          \
                        MPI_Datatype dt) {                                         \
        SPLIT_BEGIN(op, IOP_AT_EXPLICIT, off, REAL(P##name)(fh, off, buf, count, dt)); \
    }

#define WRAP_BEGIN(name, at, op, BUFT)                                             \
    REAL_DECL(int, P##name, (MPI_File, BUFT, int, MPI_Datatype));                  \
    IOP_EXPORT int name(MPI_File fh, BUFT buf, int count, MPI_Datatype dt) {       \
        SPLIT_BEGIN(op, at, 0, REAL(P##name)(fh, buf, count, dt));                 \
    }

#define WRAP_END(name, op, counter, BUFT)                                \
    REAL_DECL(int, P##name, (MPI_File, BUFT, MPI_Status *));             \
    IOP_EXPORT int name(MPI_File fh, BUFT buf, MPI_Status *status) {     \
        iop_open *o = iop_mpiio_traced(fh);                              \
        if (!o) return REAL(P##name)(fh, buf, status);                   \
        iop_mpiio_depth++;                                               \
        int r = REAL(P##name)(fh, buf, status);                          \
        iop_mpiio_depth--;                                               \
        int e = errno;                                                   \
        iop_mpiio_split_ended(o, fh, op, IOP_C_##counter, r, iop_now()); \
        errno = e;                                                       \
        return r;                                                        \
    }

#define C_BEGIN_AT(low, UP, op, BUFT) WRAP_BEGIN_AT(MPI_File_##low, op, BUFT)
#define C_BEGIN(low, UP, at, op, BUFT) WRAP_BEGIN(MPI_File_##low, at, op, BUFT)
#define C_END(low, UP, op, counter, BUFT) WRAP_END(MPI_File_##low, op, counter, BUFT)
IOP_MPIIO_BEGIN_AT_CALLS(C_BEGIN_AT)
IOP_MPIIO_BEGIN_CALLS(C_BEGIN)
IOP_MPIIO_END_CALLS(C_END)

/* ------------------------------------------------------------------ */
/* Hints.  Each distinct (file, hint set) is noted once, so a program that
 * reopens a file many times does not fill the runtime's memory. */

#define NSEEN 4096
static uint64_t seen_sets[NSEEN];
static iop_lock_t seen_lock;

static int first_time(uint64_t h) {
    int fresh = 0, used = 0;
    h = h ? h : 1;
    iop_busy_enter();
    iop_lock(&seen_lock);
    size_t i = h % NSEEN;
    for (; used < NSEEN * 3 / 4; i = (i + 1) % NSEEN, used++) {
        if (seen_sets[i] == h) break;
        if (!seen_sets[i]) {
            seen_sets[i] = h;
            fresh = 1;
            break;
        }
    }
    iop_unlock(&seen_lock);
    if (used >= NSEEN * 3 / 4) /* table full: noted no more */
        __atomic_add_fetch(&iop_overflows[IOP_OVERFLOW_NOTES], 1, __ATOMIC_RELAXED);
    iop_busy_leave();
    return fresh;
}

static uint64_t fnv(uint64_t h, const char *s) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (h ^ 0xff) * 1099511628211ULL;
}

/* Note every key of ``info`` as (kind, file, key, value). */
static void note_info(const char *kind, uint64_t file_id, MPI_Info info) {
    int n = 0;
    if (REAL(PMPI_Info_get_nkeys)(info, &n) != MPI_SUCCESS || n <= 0) return;
    if (n > 256) n = 256;
    char key[MPI_MAX_INFO_KEY + 1], value[MPI_MAX_INFO_VAL + 1];
    uint64_t h = fnv(1469598103934665603ULL ^ file_id, kind);
    for (int pass = 0; pass < 2; pass++) { /* 0: hash the set, 1: note it */
        for (int i = 0; i < n; i++) {
            int flag = 0;
            if (REAL(PMPI_Info_get_nthkey)(info, i, key) != MPI_SUCCESS) continue;
            key[MPI_MAX_INFO_KEY] = 0;
            if (REAL(PMPI_Info_get)(info, key, MPI_MAX_INFO_VAL, value, &flag) != MPI_SUCCESS ||
                !flag)
                continue;
            value[MPI_MAX_INFO_VAL] = 0;
            if (pass == 0) h = fnv(fnv(h, key), value);
            else iop_note(kind, file_id, key, value);
        }
        if (pass == 0 && !first_time(h)) return;
    }
}

/* The ROMIO_HINTS file (ROMIO reads it at every open): its lines are noted
 * once per process under file id 0.  The core records the variable itself
 * in the process metadata.  Only ROMIO reads it, OMPIO does not. */
static void note_romio_hints_file(void) {
    static int done;
    if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL)) return;
    const char *path = getenv("ROMIO_HINTS");
    if (!path || !*path) return;
    iop_enter(); /* reading it is our business, not the program's */
    FILE *f = fopen(path, "r");
    char line[1024];
    int lines = 0;
    while (f && lines++ < 256 && fgets(line, sizeof line, f)) {
        char *k = line + strspn(line, " \t");
        if (!*k || *k == '#' || *k == '\n') continue;
        char *end = k + strcspn(k, " \t\r\n");
        char *v = end + strspn(end, " \t");
        v[strcspn(v, "\r\n")] = 0;
        *end = 0;
        iop_note("mpiio_romio_hints_file", 0, k, v);
    }
    if (f) fclose(f);
    iop_leave();
}

/* ------------------------------------------------------------------ */
/* Open, close and other calls on the whole file. */

/* "ufs:/path", "lustre:/path": ROMIO takes a leading "name:" as the file
 * system to use and opens what follows.  Open MPI 4.1's OMPIO does not: it
 * opens a file called "ufs:path".  So after a successful open the prefix
 * is dropped unless a file with the whole name exists. */
static const char *file_name(const char *path) {
    const char *p = path;
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) return path;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           *p == '_')
        p++;
    if (*p != ':' || !p[1]) return path;
    struct stat sb;
    iop_enter(); /* our own look, not the program's */
    int whole = stat(path, &sb) == 0;
    iop_leave();
    return whole ? path : p + 1;
}

/* ------------------------------------------------------------------ */
/* Settings: [mpiio] hints (and [mpiio.files."GLOB"]) are added to a copy of
 * the caller's info at every open; the caller's object is never changed.
 * After the open, MPI_File_get_info says what the library kept. */

REAL_DECL(int, PMPI_Info_dup, (MPI_Info, MPI_Info *));
REAL_DECL(int, PMPI_Info_create, (MPI_Info *));
REAL_DECL(int, PMPI_Info_set, (MPI_Info, const char *, const char *));
REAL_DECL(int, PMPI_Error_string, (int, char *, int *));

/* Is Open MPI's OMPIO the io component?  It is the default of 4.x; ROMIO
 * runs only when asked for (OMPI_MCA_io=romio321 ...). */
static int ompio_in_use(void) {
#ifdef OPEN_MPI
    const char *io = getenv("OMPI_MCA_io");
    return !(io && strstr(io, "romio") && io[0] != '^');
#else
    return 0;
#endif
}

/* [lustre] stripe_count and stripe_size travel as the MPI-IO hints
 * striping_factor and striping_unit, at a create on Lustre only. */
static const char *hint_key(int id) {
    if (id == IOP_SET_LUSTRE_STRIPE_COUNT) return "striping_factor";
    if (id == IOP_SET_LUSTRE_STRIPE_SIZE) return "striping_unit";
    return iop_setting_name(id);
}

#define LUSTRE_SUPER_MAGIC 0x0BD00BD0

/* Is the directory that holds (or will hold) ``path`` on Lustre? */
static int on_lustre(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    struct statfs sf;
    iop_enter(); /* our own look, not the program's */
    int r = statfs(dir, &sf);
    iop_leave();
    return r == 0 && (unsigned long)sf.f_type == LUSTRE_SUPER_MAGIC;
}

/* The [lustre] settings as hints for an open; why[k] (k: 0 count, 1 size)
 * says why one is not added, for the record after the open. */
static void lustre_hints(const char *path, int amode, const iop_setting_value *hints[],
                         const char *why[2]) {
    static const int ids[2] = {IOP_SET_LUSTRE_STRIPE_COUNT, IOP_SET_LUSTRE_STRIPE_SIZE};
    static const int mpi[2] = {IOP_SET_MPIIO_STRIPING_FACTOR, IOP_SET_MPIIO_STRIPING_UNIT};
    int lustre = -1;
    for (int k = 0; k < 2; k++) {
        why[k] = NULL;
        hints[ids[k]] = NULL;
        const iop_setting_value *v = iop_setting(ids[k]);
        if (!v) continue;
        if (!(amode & MPI_MODE_CREATE)) {
            why[k] = "the file is not created (no MPI_MODE_CREATE)";
            continue;
        }
        if (lustre < 0) lustre = on_lustre(file_name(path));
        if (!lustre) why[k] = "not a Lustre file system";
        else if (hints[mpi[k]]) why[k] = "[mpiio] gives the hint itself";
        else hints[ids[k]] = v;
    }
}

static void lustre_record(uint64_t file, const char *why[2]) {
    static const int ids[2] = {IOP_SET_LUSTRE_STRIPE_COUNT, IOP_SET_LUSTRE_STRIPE_SIZE};
    for (int k = 0; k < 2; k++)
        if (why[k])
            iop_setting_outcome(ids[k], file, NULL, iop_setting(ids[k])->text,
                                why[k][0] == '[' ? IOP_SO_IGNORED : IOP_SO_NOT_APPLICABLE,
                                why[k]);
}

/* A new info: the caller's keys plus the hints for ``path``.  0 when there
 * is nothing to add (then ``hints`` is all NULL and the caller's is used). */
static int settings_info(const char *path, int amode, MPI_Info info, MPI_Info *mine,
                         const iop_setting_value *hints[IOP_NSETTINGS], const char *why[2]) {
    int n = iop_settings_hints_for(path, hints);
    lustre_hints(path, amode, hints, why);
    n += hints[IOP_SET_LUSTRE_STRIPE_COUNT] != NULL;
    n += hints[IOP_SET_LUSTRE_STRIPE_SIZE] != NULL;
    if (n == 0) return 0;
    int r = info_given(info) ? REAL(PMPI_Info_dup)(info, mine) : REAL(PMPI_Info_create)(mine);
    if (r != MPI_SUCCESS) {
        for (int id = 0; id < IOP_NSETTINGS; id++) hints[id] = NULL;
        return 0;
    }
    for (int id = 0; id < IOP_NSETTINGS; id++)
        if (hints[id] && REAL(PMPI_Info_set)(*mine, hint_key(id), hints[id]->text) !=
                             MPI_SUCCESS) {
            iop_setting_outcome(id, 0, NULL, hints[id]->text, IOP_SO_REJECTED,
                                "MPI_Info_set failed");
            hints[id] = NULL;
        }
    return 1;
}

static void settings_rejected(uint64_t file, const iop_setting_value *hints[IOP_NSETTINGS],
                              int err) {
    char why[MPI_MAX_ERROR_STRING + 40] = "MPI_File_open failed with the hints: ";
    int len = 0;
    size_t at = strlen(why);
    if (REAL(PMPI_Error_string)(err, why + at, &len) != MPI_SUCCESS) why[at] = 0;
    for (int id = 0; id < IOP_NSETTINGS; id++)
        if (hints[id]) iop_setting_outcome(id, file, NULL, hints[id]->text, IOP_SO_REJECTED, why);
}

/* What the library kept of each hint, as MPI_File_get_info reports it. */
static void settings_check(MPI_File fh, uint64_t file,
                           const iop_setting_value *hints[IOP_NSETTINGS]) {
    MPI_Info used;
    char got[MPI_MAX_INFO_VAL + 1], detail[160];
    int have = REAL(PMPI_File_get_info)(fh, &used) == MPI_SUCCESS && info_given(used);
    int ompio = ompio_in_use();
    for (int id = 0; id < IOP_NSETTINGS; id++) {
        if (!hints[id]) continue;
        int flag = 0;
        if (have && REAL(PMPI_Info_get)(used, hint_key(id), MPI_MAX_INFO_VAL, got,
                                        &flag) != MPI_SUCCESS)
            flag = 0;
        got[MPI_MAX_INFO_VAL] = 0;
        int outcome = IOP_SO_APPLIED;
        detail[0] = 0;
        if (!flag) {
            outcome = IOP_SO_IGNORED;
            snprintf(detail, sizeof detail, "not in MPI_File_get_info");
        } else if (strcmp(got, hints[id]->text)) {
            outcome = IOP_SO_IGNORED;
            snprintf(detail, sizeof detail, "MPI_File_get_info says %.100s", got);
        } else if (ompio && iop_setting_romio_only(id)) {
            outcome = IOP_SO_IGNORED;
            snprintf(detail, sizeof detail, "a ROMIO hint: Open MPI's OMPIO does not read it");
        }
        iop_setting_outcome(id, file, NULL, hints[id]->text, outcome, detail);
    }
    if (have) REAL(PMPI_Info_free)(&used);
}

int iop_mpiio_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh,
                   iop_mpiio_open_fn real, void *call) {
    const iop_setting_value *hints[IOP_NSETTINGS];
    const char *lustre_why[2] = {NULL, NULL};
    MPI_Info mine;
    int added = 0;
    if (IOP_UNLIKELY(iop_settings_on))
        added = settings_info(filename, amode, info, &mine, hints, lustre_why);
    IOP_SCOPE; double t1 = iop_now();
    iop_mpiio_depth++;
    iop_inside_mpi_open++; /* its descriptors are MPI-IO's: never write-behind */
    int r = real(call, added ? mine : info, fh);
    int rejected = 0;
    if (IOP_UNLIKELY(added && r != MPI_SUCCESS)) { /* as the program asked, then */
        int again = real(call, info, fh);
        if (again == MPI_SUCCESS) rejected = r;
        r = again;
    }
    iop_inside_mpi_open--;
    iop_mpiio_depth--;
    int e = errno;
    double t2 = iop_now();
    if (added) REAL(PMPI_Info_free)(&mine);
    if (r == MPI_SUCCESS) {
        uint64_t id = iop_register_path(file_name(filename));
        if (IOP_UNLIKELY(added)) {
            if (rejected) settings_rejected(id, hints, rejected);
            else settings_check(*fh, id, hints);
        }
        if (IOP_UNLIKELY(lustre_why[0] || lustre_why[1])) lustre_record(id, lustre_why);
        iop_open *o = iop_handle_set(IOP_LAYER_MPIIO, (uintptr_t)*fh, id, amode);
        __atomic_store_n(&iop_mpiio_live, 1, __ATOMIC_RELEASE);
        if (o) {
            int nprocs = 1;
            if (REAL(PMPI_Comm_size)(comm, &nprocs) != MPI_SUCCESS) nprocs = 1;
            int coll = nprocs > 1;
            iop_meta_op(o->st, IOP_OP_OPEN, coll ? IOP_C_COLL_OPENS : IOP_C_INDEP_OPENS, t1, t2,
                        coll ? COLL : 0);
            iop_set(o->st, IOP_C_MODE, amode);
            note_romio_hints_file();
            if (info_given(info)) {
                iop_count(o->st, IOP_C_HINTS, 1);
                note_info("mpiio_hint_passed", id, info);
            }
            /* The hints in effect, as the library reports them.  A plain
             * MPICH/ROMIO answers with all of them (cb_buffer_size,
             * romio_cb_write ...).  Open MPI 4.1 answers MPI_File_get_info
             * from its own copy of the info given at open and set_info,
             * for OMPIO and for its ROMIO component alike: only the keys
             * passed in, never the defaults or what ROMIO_HINTS changed
             * (those show up as the mpiio_romio_hints_file notes). */
            MPI_Info used;
            if (REAL(PMPI_File_get_info)(*fh, &used) == MPI_SUCCESS) {
                if (info_given(used)) {
                    note_info("mpiio_hint", id, used);
                    REAL(PMPI_Info_free)(&used);
                }
            }
        }
    }
    errno = e;
    return r;
}

typedef struct {
    MPI_Comm comm;
    const char *filename;
    int amode;
} c_open_call;

REAL_DECL(int, PMPI_File_open, (MPI_Comm, const char *, int, MPI_Info, MPI_File *));
static int c_open_real(void *p, MPI_Info info, MPI_File *fh) {
    const c_open_call *c = p;
    return REAL(PMPI_File_open)(c->comm, c->filename, c->amode, info, fh);
}

IOP_EXPORT int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info,
                             MPI_File *fh) {
    if (!iop_active() || iop_mpiio_depth || !filename || !fh)
        return REAL(PMPI_File_open)(comm, filename, amode, info, fh);
    c_open_call call = {comm, filename, amode};
    return iop_mpiio_open(comm, filename, amode, info, fh, c_open_real, &call);
}

REAL_DECL(int, PMPI_File_close, (MPI_File *));
IOP_EXPORT int MPI_File_close(MPI_File *fh) {
    iop_open *o = fh ? iop_mpiio_traced(*fh) : NULL;
    if (!o) return REAL(PMPI_File_close)(fh);
    iop_fence_all();
    uintptr_t key = (uintptr_t)*fh; /* the call sets *fh to MPI_FILE_NULL */
    iop_stats *st = o->st;
    IOP_SCOPE; double t1 = iop_now();
    iop_mpiio_depth++;
    int r = REAL(PMPI_File_close)(fh);
    iop_mpiio_depth--;
    int e = errno;
    iop_mpiio_close_done(st, key, r, t1, iop_now());
    errno = e;
    return r;
}

void iop_mpiio_close_done(iop_stats *st, uintptr_t key, int ret, double t1, double t2) {
    if (ret == MPI_SUCCESS) iop_handle_clear(IOP_LAYER_MPIIO, key);
    iop_meta_op(st, IOP_OP_CLOSE, -1, t1, t2, ret == MPI_SUCCESS ? 0 : IOP_FLAG_ERROR);
}

void iop_mpiio_meta_done(iop_open *o, int op, int counter, unsigned flags, int ret, double t1,
                         double t2) {
    iop_meta_op(o->st, op, counter, t1, t2, flags | (ret == MPI_SUCCESS ? 0 : IOP_FLAG_ERROR));
}

/* Calls on an open file that are metadata: (params), (args), op, counter. */
#define WRAP_FILE_META(name, params, args, op, counter, flags)                \
    REAL_DECL(int, P##name, params);                                          \
    IOP_EXPORT int name params {                                              \
        iop_open *o = iop_mpiio_traced(fh);                                   \
        if (!o) return REAL(P##name) args;                                    \
        iop_fence_all(); /* the program's deferred POSIX writes too */        \
        IOP_SCOPE; double t1 = iop_now();                                                \
        iop_mpiio_depth++;                                                    \
        int r = REAL(P##name) args;                                           \
        iop_mpiio_depth--;                                                    \
        int e = errno;                                                        \
        iop_mpiio_meta_done(o, op, counter, flags, r, t1, iop_now());         \
        errno = e;                                                            \
        return r;                                                             \
    }

WRAP_FILE_META(MPI_File_sync, (MPI_File fh), (fh), IOP_OP_SYNC, IOP_C_SYNCS, COLL)
WRAP_FILE_META(MPI_File_set_size, (MPI_File fh, MPI_Offset size), (fh, size),
               IOP_OP_TRUNCATE, -1, COLL)

/* Calls that change how the file is seen: counted, not recorded (the
 * record format has no operation for them). */
void iop_mpiio_setting_done(iop_open *o, int counter, MPI_Info info, int ret) {
    if (ret != MPI_SUCCESS) return;
    if (counter >= 0) iop_count(o->st, counter, 1);
    if (info_given(info)) {
        iop_count(o->st, IOP_C_HINTS, 1);
        note_info("mpiio_hint_passed", o->st->file_id, info);
    }
}

#define WRAP_FILE_SETTING(name, params, args, counter) \
    REAL_DECL(int, P##name, params);                   \
    IOP_EXPORT int name params {                       \
        iop_open *o = iop_mpiio_traced(fh);            \
        if (!o) return REAL(P##name) args;             \
        iop_mpiio_depth++;                             \
        int r = REAL(P##name) args;                    \
        iop_mpiio_depth--;                             \
        int e = errno;                                 \
        iop_mpiio_setting_done(o, counter, info, r);   \
        errno = e;                                     \
        return r;                                      \
    }

WRAP_FILE_SETTING(MPI_File_set_view,
                  (MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype,
                   const char *datarep, MPI_Info info),
                  (fh, disp, etype, filetype, datarep, info), IOP_C_VIEWS)
WRAP_FILE_SETTING(MPI_File_set_info, (MPI_File fh, MPI_Info info), (fh, info), -1)

/* ------------------------------------------------------------------ */
/* Start and end of MPI: the rank, and the trace written out before
 * MPI_Finalize (some launchers end the processes soon after it). */

static void learn_rank(void) {
    MPI_Comm world;
    int rank = -1, size = 0;
    if (!iop_enabled || !world_known(&world)) return;
    if (REAL(PMPI_Comm_rank)(world, &rank) != MPI_SUCCESS) rank = -1;
    if (REAL(PMPI_Comm_size)(world, &size) != MPI_SUCCESS) size = 0;
    iop_set_rank(rank, size);
}

void iop_mpiio_init_done(int ret) {
    if (ret != MPI_SUCCESS) return;
    learn_rank();
    /* once, though a Fortran binding may reach here through the C one too */
    static int sampled;
    if (!sampled++) iop_mpi_clock_sample();
}

void iop_mpiio_finalizing(void) {
    static int sampled; /* every rank, traced or not, once: it is collective */
    if (!sampled++) iop_mpi_clock_sample();
    if (!iop_enabled) return;
    iop_flush_all();
    /* Handles may not be converted from now on. */
    __atomic_store_n(&iop_mpiio_live, 0, __ATOMIC_RELEASE);
}

REAL_DECL(int, PMPI_Init, (int *, char ***));
IOP_EXPORT int MPI_Init(int *argc, char ***argv) {
    int r = REAL(PMPI_Init)(argc, argv);
    int e = errno;
    iop_mpiio_init_done(r);
    errno = e;
    return r;
}

REAL_DECL(int, PMPI_Init_thread, (int *, char ***, int, int *));
IOP_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int r = REAL(PMPI_Init_thread)(argc, argv, required, provided);
    int e = errno;
    iop_mpiio_init_done(r);
    errno = e;
    return r;
}

REAL_DECL(int, PMPI_Finalize, (void));
IOP_EXPORT int MPI_Finalize(void) {
    iop_mpiio_finalizing();
    return REAL(PMPI_Finalize)();
}

/* ------------------------------------------------------------------ */
/* The module, as the core sees it (modules.c). */

static void mpiio_after_fork(void) {
    split_lock = seen_lock = 0;
    split_overflows = 0;
}

static const iop_overflow_count mpiio_overflows[] = {{"split", &split_overflows},
                                                     {NULL, NULL}};
/* How MPI-IO was set up (ROMIO or OMPIO, hints, aggregators). */
static const char *const mpiio_env[] = {"ROMIO_HINTS", "OMPI_MCA_io", "OMPI_MCA_fcoll",
                                        "MPICH_MPIIO_HINTS",
                                        "OMPI_MCA_io_ompio_num_aggregators", NULL};

const iop_module iop_mpiio_module = {
    IOP_MODULE_OF(MPIIO),
    .after_fork = mpiio_after_fork,
    .overflows = mpiio_overflows,
    .env = mpiio_env,
};
