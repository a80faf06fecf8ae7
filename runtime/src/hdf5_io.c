/* HDF5 layer: reads and writes (H5Dread, H5Dwrite and their multi-dataset
 * forms), counted as Darshan counts them, with the shape of each access. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "hdf5_private.h"
#include "settings.h"

/* ------------------------------------------------------------------ */
/* Darshan's H5D access tuples.  Darshan keys each access of a dataset by
 * eleven values -- its size, and the length (count x block) and stride of
 * the file's regular hyperslab selection in dimensions 4, 3, 2, 1, 0 (D1 ..
 * D5; zeros for other selections and for dimensions the dataset lacks) --
 * counts each distinct tuple (at most 32 per dataset, as Darshan), and
 * after every access merges the tuple's new count into the ordered list of
 * four: higher count first; on a tie the larger size first, and the tuple
 * just counted before another of the same size.  A tuple of size 0 takes
 * one of the 32 places but is never listed.  records.c fills the size-only
 * list of every layer; for datasets this list replaces it after each call.
 * The tuples live in fixed tables: when they are full, a dataset keeps the
 * size-only list and a note says so. */

#define TUPLE_N 11            /* size, LENGTH_D1..D5, STRIDE_D1..D5 */
#define TUPLES_PER_DATASET 32 /* Darshan's DARSHAN_COMMON_VAL_MAX_RUNTIME_COUNT */
#define TUPLE_POOL 32768
#define TUPLE_SETS 16384

typedef struct {
    int64_t v[TUPLE_N];
    int64_t freq;
    int32_t next; /* the dataset's next tuple, as index + 1 (0: none) */
} access_tuple;

/* A dataset's tuples; indexes are stored + 1 so that zeroed memory is empty. */
typedef struct {
    iop_stats *st; /* the dataset's counters; NULL: free */
    int32_t first, n;
    int32_t top[4]; /* the list of four */
} tuple_set;

static access_tuple tuple_pool[TUPLE_POOL];
static int32_t tuple_pool_used;
static tuple_set tuple_sets[TUPLE_SETS];

static tuple_set *tuple_set_of(iop_stats *st) {
    size_t h = (size_t)(((uintptr_t)st >> 4) * 0x9e3779b97f4a7c15ULL % TUPLE_SETS);
    for (size_t n = 0; n < TUPLE_SETS; n++, h = (h + 1) % TUPLE_SETS) {
        iop_stats *k = __atomic_load_n(&tuple_sets[h].st, __ATOMIC_ACQUIRE);
        if (k == st) return &tuple_sets[h];
        if (k) continue;
        if (__atomic_compare_exchange_n(&tuple_sets[h].st, &k, st, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE) ||
            k == st)
            return &tuple_sets[h];
    }
    return NULL;
}

/* Called with the dataset's lock held: count one more ``v``; 0 when the
 * tuple could not be followed because the pool is full. */
static int tuple_count(tuple_set *s, const int64_t *v) {
    int32_t idx = 0;
    for (int32_t i = s->first; i && !idx; i = tuple_pool[i - 1].next)
        if (!memcmp(tuple_pool[i - 1].v, v, sizeof tuple_pool[0].v)) idx = i;
    if (!idx) {
        if (s->n == TUPLES_PER_DATASET) return 1; /* Darshan stops following new ones too */
        if (__atomic_load_n(&tuple_pool_used, __ATOMIC_RELAXED) >= TUPLE_POOL) return 0;
        int32_t at = __atomic_fetch_add(&tuple_pool_used, 1, __ATOMIC_RELAXED);
        if (at >= TUPLE_POOL) return 0;
        access_tuple *t = &tuple_pool[at];
        memcpy(t->v, v, sizeof t->v);
        t->freq = 0;
        t->next = s->first;
        s->first = idx = at + 1;
        s->n++;
    }
    access_tuple *t = &tuple_pool[idx - 1];
    int64_t c = ++t->freq;
    if (v[0] == 0) return 1;
    /* Darshan's DARSHAN_UPDATE_COMMON_VAL_COUNTERS: the entries ranked above
     * (only the size breaks a tie), the tuple, then the rest without it. */
    int32_t top[4] = {0};
    int k = 0, i = 0;
    for (; i < 4 && s->top[i]; i++) {
        const access_tuple *o = &tuple_pool[s->top[i] - 1];
        if (!(o->freq > c || (o->freq == c && o->v[0] > v[0]))) break;
        top[k++] = s->top[i];
    }
    if (k == 4) return 1;
    top[k++] = idx;
    for (; k < 4 && i < 4; i++)
        if (s->top[i] != idx) top[k++] = s->top[i];
    memcpy(s->top, top, sizeof top);
    return 1;
}

_Static_assert(IOP_C_ACCESS4_STRIDE_D5 - IOP_C_ACCESS1_LENGTH_D1 == 4 * (TUPLE_N - 1) - 1,
               "the shape counters of the four tuples are consecutive");

/* One access of a dataset: ``v`` is its tuple.  Fills ACCESS1..4 (size,
 * lengths, strides, count) of ``st`` from its tuples. */
static void access_tuple_note(iop_stats *st, const int64_t *v) {
    tuple_set *s = tuple_set_of(st);
    iop_busy_enter();
    iop_lock(&st->lock);
    int followed = s && tuple_count(s, v);
    for (int k = 0; k < 4; k++) {
        const access_tuple *t = followed && s->top[k] ? &tuple_pool[s->top[k] - 1] : NULL;
        if (followed) {
            st->c[IOP_C_ACCESS1_ACCESS + k] = t ? t->v[0] : 0;
            st->c[IOP_C_ACCESS1_COUNT + k] = t ? t->freq : 0;
        } /* else: records.c's list of sizes, without shapes */
        for (int j = 1; j < TUPLE_N; j++)
            st->c[IOP_C_ACCESS1_LENGTH_D1 + k * (TUPLE_N - 1) + j - 1] = t ? t->v[j] : 0;
    }
    iop_unlock(&st->lock);
    iop_busy_leave();
    if (!followed) h5note(1, st->file_id, "access_tuples", "incomplete: the runtime's table is full");
}

/* ------------------------------------------------------------------ */
/* Reads and writes. */

static const char *cause_names[] = {"independent_requested", "datatype_conversion",
                                    "data_transforms", "mpi_opt_types_disabled",
                                    "not_simple_or_scalar_dataspaces",
                                    "not_contiguous_or_chunked_dataset",
                                    "parallel_filtered_writes_disabled",
                                    "error_checking_collective_possible"};

static void causes_str(uint32_t c, char *out, size_t n) {
    size_t k = (size_t)snprintf(out, n, "0x%x", c);
    for (int i = 0; i < 8 && k < n; i++)
        if (c & (1u << i)) k += (size_t)snprintf(out + k, n - k, " %s", cause_names[i]);
}

/* Count one H5Dread/H5Dwrite of ``dset`` that returned ``r``, as Darshan
 * does: bytes are the elements selected in the file times the size of the
 * dataset's datatype (what the file holds, whatever the memory type), and
 * a regular hyperslab selection gives the access its shape. */
void dataset_io(h5lib *L, int op, hid_t dset, hid_t mtype, hid_t mspace, hid_t fspace,
                hid_t dxpl, const void *buf, herr_t r, double t1, double t2) {
    iop_open *o = iop_handle(IOP_LAYER_H5D, hkey(L, dset));
    iop_stats *st = o ? o->st : NULL;
    if (r < 0) {
        /* No queries after a failure: the error stack is the program's. */
        if (st) iop_data_op(st, op, -1, -1, buf, 0, t1, t2, 0);
        return;
    }
    if (!st) st = dataset_opened(L, dset, 0, 0, 0, 0);
    if (!st) return;
    unsigned flags = 0;
    hssize_t npoints = -1;
    int64_t tuple[TUPLE_N] = {0};
    iop_enter();
    t_H5Sget_select_npoints *np = H5F_(L, H5Sget_select_npoints);
    if (np && fspace > H5S_SPECIAL_MAX) npoints = np(fspace);
    else if (np && fspace != H5S_ALL && mspace > H5S_SPECIAL_MAX) npoints = np(mspace);
    else if (np) {
        t_H5Dget_space *gs = H5F_(L, H5Dget_space);
        hid_t space = gs ? gs(dset) : -1; /* the current extent, all selected */
        if (space > 0) {
            npoints = np(space);
            close_space(L, space);
        }
    }
    size_t tsize = (size_t)__atomic_load_n(&st->c[IOP_C_DATATYPE_SIZE], __ATOMIC_RELAXED);
    t_H5Tget_size *ts = H5F_(L, H5Tget_size);
    if (!tsize) tsize = ts ? ts(mtype) : 0; /* the dataset's type was not known */
    if (fspace > H5S_SPECIAL_MAX) {
        t_H5Sget_select_type *gt = H5F_(L, H5Sget_select_type);
        int sel = gt ? gt(fspace) : -1;
        if (sel == H5S_SEL_POINTS) {
            iop_count(st, IOP_C_POINT_SELECTS, 1);
        } else if (sel == H5S_SEL_HYPERSLABS) {
            t_H5Sis_regular_hyperslab *ir = H5F_(L, H5Sis_regular_hyperslab);
            htri_t reg = ir ? ir(fspace) : -1;
            if (reg > 0) iop_count(st, IOP_C_REGULAR_HYPERSLAB_SELECTS, 1);
            else if (reg == 0) iop_count(st, IOP_C_IRREGULAR_HYPERSLAB_SELECTS, 1);
            t_H5Sget_regular_hyperslab *gr = H5F_(L, H5Sget_regular_hyperslab);
            hsize_t start[MAX_DIMS] = {0}, stride[MAX_DIMS] = {0}, count[MAX_DIMS] = {0},
                    block[MAX_DIMS] = {0};
            if (reg > 0 && gr && gr(fspace, start, stride, count, block) >= 0)
                for (int i = 0; i < 5; i++) { /* D1 is dimension 4, whatever the rank */
                    tuple[1 + i] = (int64_t)(count[4 - i] * block[4 - i]);
                    tuple[6 + i] = (int64_t)stride[4 - i];
                }
        }
    }
    t_H5Pget_dxpl_mpio *gx = H5F_(L, H5Pget_dxpl_mpio);
    int mode = -1;
    if (dxpl != H5P_DEFAULT && gx && gx(dxpl, &mode) >= 0 && mode == H5FD_MPIO_COLLECTIVE) {
        flags |= IOP_FLAG_COLLECTIVE;
        iop_set(st, IOP_C_USE_MPIIO_COLLECTIVE, 1);
        /* Asked for collective I/O, did HDF5 fall back to independent? */
        t_H5Pget_mpio_actual_io_mode *am = H5F_(L, H5Pget_mpio_actual_io_mode);
        t_H5Pget_mpio_no_collective_cause *nc = H5F_(L, H5Pget_mpio_no_collective_cause);
        int actual = -1;
        uint32_t local = 0, global = 0;
        if (am && am(dxpl, &actual) >= 0 && actual == H5D_MPIO_NO_COLLECTIVE && nc &&
            nc(dxpl, &local, &global) >= 0) {
            char l[256], g[256];
            causes_str(local, l, sizeof l);
            causes_str(global, g, sizeof g);
            h5note(1, st->file_id, op == IOP_OP_READ ? "read_not_collective" : "write_not_collective",
                   "local=%s global=%s", l, g);
        }
    }
    iop_leave();
    int64_t bytes = npoints >= 0 && tsize > 0 ? (int64_t)npoints * (int64_t)tsize : 0;
    iop_data_op(st, op, -1, bytes, buf, 0, t1, t2, flags);
    tuple[0] = bytes;
    access_tuple_note(st, tuple);
}

/* H5Dwrite and H5Dread: the same wrapper, only the buffer's constness differs. */
#define WRAP_DATASET_IO(name, op, BUFT)                                                 \
    IOP_EXPORT herr_t IOP_WRAPPED(name)(hid_t dset, hid_t mtype, hid_t mspace, hid_t fspace,    \
                                       hid_t dxpl, BUFT buf) {                          \
        h5lib *L = CALLER_LIB();                                                        \
        t_##name *f = H5F_(L, name);                                                    \
        if (!f) return -1;                                                              \
        if (!iop_active()) return f(dset, mtype, mspace, fspace, dxpl, buf);            \
        if (IOP_UNLIKELY(iop_settings_on) && iop_setting(IOP_SET_HDF5_TRANSFER))        \
            return (herr_t)transfer_call(L, op, (void *)f, dset, mtype, mspace, fspace,   \
                                         dxpl, (void *)(uintptr_t)buf);                 \
        IOP_SCOPE; double t1 = iop_now();                                                          \
        herr_t r = f(dset, mtype, mspace, fspace, dxpl, buf);                           \
        int e = errno;                                                                  \
        double t2 = iop_now();                                                          \
        dataset_io(L, op, dset, mtype, mspace, fspace, dxpl, buf, r, t1, t2);           \
        errno = e;                                                                      \
        return r;                                                                       \
    }
WRAP_DATASET_IO(H5Dwrite, IOP_OP_WRITE, const void *)
WRAP_DATASET_IO(H5Dread, IOP_OP_READ, void *)

/* HDF5 1.14's multi-dataset calls: one operation per dataset, each given an
 * equal share of the call's time. */
#define MULTI_BODY(op, CALL)                                                          \
    if (!iop_active() || !count || !dset || !mtype || !mspace || !fspace) return CALL; \
    IOP_SCOPE; double t1 = iop_now();                                                            \
    herr_t r = CALL;                                                                  \
    int e = errno;                                                                    \
    double t2 = iop_now();                                                            \
    double step = (t2 - t1) / (double)count;                                          \
    for (size_t i = 0; i < count; i++)                                                \
        dataset_io(L, op, dset[i], mtype[i], mspace[i], fspace[i], dxpl,              \
                   buf ? buf[i] : NULL, r, t1 + step * (double)i,                     \
                   t1 + step * (double)(i + 1));                                      \
    errno = e;                                                                        \
    return r

IOP_EXPORT herr_t IOP_WRAPPED(H5Dwrite_multi)(size_t count, hid_t *dset, hid_t *mtype,
                                              hid_t *mspace, hid_t *fspace, hid_t dxpl,
                                              const void **buf) {
    h5lib *L = CALLER_LIB();
    t_H5Dwrite_multi *f = H5F_(L, H5Dwrite_multi);
    if (!f) return -1;
    MULTI_BODY(IOP_OP_WRITE, f(count, dset, mtype, mspace, fspace, dxpl, buf));
}

IOP_EXPORT herr_t IOP_WRAPPED(H5Dread_multi)(size_t count, hid_t *dset, hid_t *mtype,
                                             hid_t *mspace, hid_t *fspace, hid_t dxpl,
                                             void **buf) {
    h5lib *L = CALLER_LIB();
    t_H5Dread_multi *f = H5F_(L, H5Dread_multi);
    if (!f) return -1;
    MULTI_BODY(IOP_OP_READ, f(count, dset, mtype, mspace, fspace, dxpl, buf));
}
