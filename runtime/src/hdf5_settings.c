/* HDF5 layer: the [hdf5] settings, applied to copies of the program's
 * property lists around H5Fcreate/H5Fopen, H5Dcreate and H5Dwrite/H5Dread. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "hdf5_private.h"
#include "settings.h"

/* ------------------------------------------------------------------ */
/* Settings: the [hdf5] table, applied to copies of the program's property
 * lists (file access and creation at H5Fcreate/H5Fopen, dataset creation
 * at H5Dcreate, transfer at H5Dwrite/H5Dread); the program's own lists
 * are never changed.  What became of each setting is kept in a small list
 * while the call runs and recorded once the program's call succeeded. */

static void pend(h5_outcomes *out, int id, int outcome, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void pend(h5_outcomes *out, int id, int outcome, const char *fmt, ...) {
    if (out->n == (int)(sizeof out->e / sizeof out->e[0])) return;
    out->e[out->n].id = id;
    out->e[out->n].outcome = outcome;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->e[out->n].detail, sizeof out->e[0].detail, fmt, ap);
    va_end(ap);
    out->n++;
}

/* The call failed with the settings and succeeded without them: what was
 * applied to the lists is rejected, with HDF5's reason. */
void pend_rejected(h5_outcomes *out, const char *call, const char *why) {
    for (int i = 0; i < out->n; i++)
        if (out->e[i].outcome == IOP_SO_APPLIED) {
            out->e[i].outcome = IOP_SO_REJECTED;
            snprintf(out->e[i].detail, sizeof out->e[i].detail, "%s failed with it: %.120s", call,
                     why);
        }
}

static void record(const h5_outcomes *out, uint64_t file, const char *object) {
    for (int i = 0; i < out->n; i++) {
        const iop_setting_value *v = iop_setting(out->e[i].id);
        if (v)
            iop_setting_outcome(out->e[i].id, file, object, v->text, out->e[i].outcome,
                                out->e[i].detail);
    }
}

void quiet_on(h5lib *L, h5_quiet *q) {
    t_H5Eget_auto2 *g = H5F_(L, H5Eget_auto2);
    t_H5Eset_auto2 *s = H5F_(L, H5Eset_auto2);
    q->saved = g && s && g(0, &q->func, &q->data) >= 0 && s(0, NULL, NULL) >= 0;
}

void quiet_off(h5lib *L, h5_quiet *q) {
    t_H5Eset_auto2 *s = H5F_(L, H5Eset_auto2);
    if (q->saved && s) s(0, q->func, q->data);
}

static herr_t innermost_error(unsigned n, const H5E_error2_t *e, void *data) {
    if (n == 0 && e && e->desc) snprintf(data, 128, "%s", e->desc);
    return 0;
}

/* The most specific message on the default error stack. */
void h5_error(h5lib *L, char *why) {
    t_H5Ewalk2 *w = H5F_(L, H5Ewalk2);
    snprintf(why, 128, "HDF5 gave no reason");
    if (w) w(0, 0 /* H5E_WALK_UPWARD: the deepest first */, innermost_error, why);
}

/* A setter's result: applied, or rejected with HDF5's message. */
static void pend_set(h5lib *L, h5_outcomes *out, int id, herr_t r, const char *setter) {
    char why[128];
    if (r >= 0) {
        pend(out, id, IOP_SO_APPLIED, "%s", "");
        return;
    }
    h5_error(L, why);
    pend(out, id, IOP_SO_REJECTED, "%s: %s", setter, why);
}

/* A copy of ``list`` (a new list of class ``cls`` for H5P_DEFAULT), or -1. */
static hid_t copy_list(h5lib *L, hid_t list, const char *cls) {
    if (list != H5P_DEFAULT) {
        t_H5Pcopy *c = H5F_(L, H5Pcopy);
        return c ? c(list) : -1;
    }
    t_H5Pcreate *c = H5F_(L, H5Pcreate);
    hid_t *id = h5_sym(L, cls);
    /* A program that names the class (H5P_DATASET_CREATE) holds a copy of
     * the variable (a copy relocation): the library then sets that one. */
    if ((!id || *id <= 0) && L->handle) id = dlsym(RTLD_DEFAULT, cls);
    return c && id && *id > 0 ? c(*id) : -1;
}

/* Does the library run MPI-IO (a parallel build)? */
static int parallel_build(h5lib *L) { return H5F_(L, H5Pset_all_coll_metadata_ops) != NULL; }

/* ------------------------------------------------------------------ */
/* Appliers: one per [hdf5] setting, each changing the copy of one list.
 * A setter that is not in hdf5_private.h's H5_FUNCS is looked up by name
 * (h5_sym) where it is used: settings are applied at opens and creates,
 * not on every read or write. */

enum { H5_FAPL, H5_DCPL, H5_DXPL }; /* the list a setting changes */

/* What an applier works on: the copy of the list, and the call's context. */
typedef struct {
    h5lib *L;
    h5_outcomes *out;
    hid_t list; /* the copy to change */
    /* file access lists */
    int create, mpio;   /* H5Fcreate; the file is opened with the MPI-IO driver */
    hid_t fcpl_in;      /* the program's creation list (H5Fcreate) */
    hid_t *fcpl;        /* a copy of it, made when a setting needs one (-1: none) */
    int *page;          /* the page buffer was set */
    /* dataset creation lists */
    hid_t space;
} h5_target;

typedef struct {
    int list; /* H5_FAPL, H5_DCPL or H5_DXPL */
    void (*apply)(h5_target *t, int id, const iop_setting_value *v);
} h5_applier;

/* alignment and alignment_threshold go in one H5Pset_alignment call: each
 * of the two makes the same call, with both values. */
static void set_alignment(h5_target *t, int id, const iop_setting_value *v) {
    const iop_setting_value *al = iop_setting(IOP_SET_HDF5_ALIGNMENT),
                            *th = iop_setting(IOP_SET_HDF5_ALIGNMENT_THRESHOLD);
    hsize_t thr = 1, align = 1;
    t_H5Pget_alignment *ga = H5F_(t->L, H5Pget_alignment);
    t_H5Pset_alignment *sa = H5F_(t->L, H5Pset_alignment);
    if (ga) ga(t->list, &thr, &align);
    if (al) align = (hsize_t)al->i;
    if (th) thr = (hsize_t)th->i;
    pend_set(t->L, t->out, id, sa ? sa(t->list, thr, align) : -1, "H5Pset_alignment");
}
static const h5_applier h5_apply_HDF5_ALIGNMENT = {H5_FAPL, set_alignment};
static const h5_applier h5_apply_HDF5_ALIGNMENT_THRESHOLD = {H5_FAPL, set_alignment};

static void set_sieve_buf_size(h5_target *t, int id, const iop_setting_value *v) {
    t_H5Pset_sieve_buf_size *f = H5F_(t->L, H5Pset_sieve_buf_size);
    pend_set(t->L, t->out, id, f ? f(t->list, (size_t)v->i) : -1, "H5Pset_sieve_buf_size");
}
static const h5_applier h5_apply_HDF5_SIEVE_BUF_SIZE = {H5_FAPL, set_sieve_buf_size};

static void set_meta_block_size(h5_target *t, int id, const iop_setting_value *v) {
    t_H5Pset_meta_block_size *f = H5F_(t->L, H5Pset_meta_block_size);
    pend_set(t->L, t->out, id, f ? f(t->list, (hsize_t)v->i) : -1, "H5Pset_meta_block_size");
}
static const h5_applier h5_apply_HDF5_META_BLOCK_SIZE = {H5_FAPL, set_meta_block_size};

/* Collective metadata needs a parallel build and a file opened with the
 * MPI-IO driver: 1 when both hold, else the setting is not applicable. */
static int collective_file(h5_target *t, int id) {
    if (!parallel_build(t->L))
        pend(t->out, id, IOP_SO_NOT_APPLICABLE, "HDF5 %s is not a parallel build",
             library_version(t->L));
    else if (!t->mpio)
        pend(t->out, id, IOP_SO_NOT_APPLICABLE, "the file is not opened with the MPI-IO driver");
    else
        return 1;
    return 0;
}

static void set_coll_metadata_ops(h5_target *t, int id, const iop_setting_value *v) {
    if (!collective_file(t, id)) return;
    t_H5Pset_all_coll_metadata_ops *f = H5F_(t->L, H5Pset_all_coll_metadata_ops);
    pend_set(t->L, t->out, id, f ? f(t->list, v->i != 0) : -1, "H5Pset_all_coll_metadata_ops");
}
static const h5_applier h5_apply_HDF5_COLL_METADATA_OPS = {H5_FAPL, set_coll_metadata_ops};

static void set_coll_metadata_write(h5_target *t, int id, const iop_setting_value *v) {
    if (!collective_file(t, id)) return;
    t_H5Pset_coll_metadata_write *f = H5F_(t->L, H5Pset_coll_metadata_write);
    pend_set(t->L, t->out, id, f ? f(t->list, v->i != 0) : -1, "H5Pset_coll_metadata_write");
}
static const h5_applier h5_apply_HDF5_COLL_METADATA_WRITE = {H5_FAPL, set_coll_metadata_write};

/* The page buffer needs paged file space: at a create the creation list is
 * copied and made paged; an open may have to retry without it (*page). */
static void set_page_buffer_size(h5_target *t, int id, const iop_setting_value *pb) {
    h5lib *L = t->L;
    h5_outcomes *out = t->out;
    t_H5Pset_page_buffer_size *spb = H5F_(L, H5Pset_page_buffer_size);
    t_H5Pset_file_space_strategy *sfs = H5F_(L, H5Pset_file_space_strategy);
    t_H5Pget_file_space_strategy *gfs = H5F_(L, H5Pget_file_space_strategy);
    t_H5Pget_file_space_page_size *gps = H5F_(L, H5Pget_file_space_page_size);
    /* HDF5 1.10 refuses page buffering in every parallel build; later ones
     * with the MPI-IO driver. */
    if (t->mpio || (parallel_build(L) && !strncmp(library_version(L), "1.10.", 5))) {
        pend(out, id, IOP_SO_NOT_APPLICABLE, "HDF5 %s has no page buffering %s",
             library_version(L), t->mpio ? "with the MPI-IO driver" : "in a parallel build");
        return;
    }
    if (!spb || !sfs || !gfs || !gps) {
        pend(out, id, IOP_SO_NOT_APPLICABLE, "HDF5 %s has no paged file space",
             library_version(L));
        return;
    }
    if (pb->i == 0) { /* 0: no page buffer, which needs no paged file */
        pend_set(L, out, id, spb(t->list, 0, 0, 0), "H5Pset_page_buffer_size");
        return;
    }
    hsize_t page_size = 4096;
    if (t->create) {
        *t->fcpl = copy_list(L, t->fcpl_in, "H5P_CLS_FILE_CREATE_ID_g");
        int strategy = -1;
        uint64_t persist = 0;
        hsize_t threshold = 1;
        if (*t->fcpl < 0 || gfs(*t->fcpl, &strategy, &persist, &threshold) < 0) {
            pend(out, id, IOP_SO_NOT_APPLICABLE, "the file creation list cannot be copied");
            return;
        }
        if (strategy != H5F_FSPACE_STRATEGY_PAGE &&
            sfs(*t->fcpl, H5F_FSPACE_STRATEGY_PAGE, persist != 0, threshold) < 0) {
            char why[128];
            h5_error(L, why);
            pend(out, id, IOP_SO_REJECTED, "H5Pset_file_space_strategy: %s", why);
            return;
        }
        gps(*t->fcpl, &page_size);
    }
    if ((hsize_t)pb->i < page_size) {
        pend(out, id, IOP_SO_REJECTED, "smaller than the file space page size (%llu)", page_size);
        return;
    }
    herr_t r = spb(t->list, (size_t)pb->i, 0, 0);
    pend_set(L, out, id, r, "H5Pset_page_buffer_size");
    *t->page = r >= 0;
}
static const h5_applier h5_apply_HDF5_PAGE_BUFFER_SIZE = {H5_FAPL, set_page_buffer_size};

/* The chunk cache of every dataset of the file (rdcc_nbytes); its number of
 * slots and preemption policy stay as the list has them. */
typedef herr_t t_H5Pget_cache(hid_t, int *, size_t *, size_t *, double *);
typedef herr_t t_H5Pset_cache(hid_t, int, size_t, size_t, double);
static void set_chunk_cache_size(h5_target *t, int id, const iop_setting_value *v) {
    t_H5Pget_cache *g = (t_H5Pget_cache *)h5_sym(t->L, "H5Pget_cache");
    t_H5Pset_cache *s = (t_H5Pset_cache *)h5_sym(t->L, "H5Pset_cache");
    int mdc = 0;
    size_t nslots = 0, nbytes = 0;
    double w0 = 0;
    herr_t r = g && s ? g(t->list, &mdc, &nslots, &nbytes, &w0) : -1;
    if (r >= 0) r = s(t->list, mdc, nslots, (size_t)v->i, w0);
    pend_set(t->L, t->out, id, r, "H5Pset_cache");
}
static const h5_applier h5_apply_HDF5_CHUNK_CACHE_SIZE = {H5_FAPL, set_chunk_cache_size};

static void set_chunk(h5_target *t, int id, const iop_setting_value *ch) {
    t_H5Sget_simple_extent_ndims *gn = H5F_(t->L, H5Sget_simple_extent_ndims);
    t_H5Pset_chunk *sc = H5F_(t->L, H5Pset_chunk);
    int rank = gn && t->space > 0 ? gn(t->space) : -1;
    if (rank != ch->n) {
        pend(t->out, id, IOP_SO_NOT_APPLICABLE, "the dataset has rank %d, the chunk %d", rank,
             ch->n);
        return;
    }
    hsize_t dims[IOP_SETTINGS_MAX_RANK];
    for (int i = 0; i < ch->n; i++) dims[i] = (hsize_t)ch->a[i];
    pend_set(t->L, t->out, id, sc ? sc(t->list, ch->n, dims) : -1, "H5Pset_chunk");
}
static const h5_applier h5_apply_HDF5_CHUNK = {H5_DCPL, set_chunk};

static void set_fill_time(h5_target *t, int id, const iop_setting_value *v) {
    static const int fill_time[] = {1 /* never */, 0 /* alloc */, 2 /* ifset */};
    t_H5Pset_fill_time *sf = H5F_(t->L, H5Pset_fill_time);
    pend_set(t->L, t->out, id, sf ? sf(t->list, fill_time[v->i % 3]) : -1, "H5Pset_fill_time");
}
static const h5_applier h5_apply_HDF5_FILL_TIME = {H5_DCPL, set_fill_time};

/* Called once dxpl_list found a parallel build and a file opened with the
 * MPI-IO driver. */
static void set_transfer(h5_target *t, int id, const iop_setting_value *v) {
    t_H5Pset_dxpl_mpio *sx = H5F_(t->L, H5Pset_dxpl_mpio);
    pend_set(t->L, t->out, id, sx(t->list, v->i == 0 ? H5FD_MPIO_COLLECTIVE : 0),
             "H5Pset_dxpl_mpio");
}
static const h5_applier h5_apply_HDF5_TRANSFER = {H5_DXPL, set_transfer};

/* The table: one row per [hdf5] setting of the vocabulary, made from it
 * (ROW_<table> keeps the [hdf5] rows, the other tables' are empty), so a
 * setting added to src/iopilot/tune/settings.py without its h5_apply_<ID>
 * above does not build. */
#define ROW_IOP_ST_HDF5(id) {IOP_SET_##id, &h5_apply_##id},
#define ROW_IOP_ST_MPIIO(id)
#define ROW_IOP_ST_OMPI(id)
#define ROW_IOP_ST_STDIO(id)
#define ROW_IOP_ST_LUSTRE(id)
#define ROW_IOP_ST_POSIX(id)
static const struct {
    int id;
    const h5_applier *a;
} appliers[] = {
#define IOP_X(id, table, name, kind, choices, romio) ROW_##table(id)
    IOP_SETTINGS(IOP_X)
#undef IOP_X
};
#define NAPPLIERS (sizeof appliers / sizeof appliers[0])

/* Is a setting of ``list`` given? */
static int list_setting_given(int list) {
    for (size_t k = 0; k < NAPPLIERS; k++)
        if (appliers[k].a->list == list && iop_setting(appliers[k].id)) return 1;
    return 0;
}

/* Every given setting of ``list`` is not applicable, for ``why``. */
static void list_not_applicable(h5_outcomes *out, int list, const char *why) {
    for (size_t k = 0; k < NAPPLIERS; k++)
        if (appliers[k].a->list == list && iop_setting(appliers[k].id))
            pend(out, appliers[k].id, IOP_SO_NOT_APPLICABLE, "%s", why);
}

/* The given settings of ``list`` applied to t->list, in the vocabulary's order. */
static void apply_list(h5_target *t, int list) {
    for (size_t k = 0; k < NAPPLIERS; k++) {
        const iop_setting_value *v = iop_setting(appliers[k].id);
        if (v && appliers[k].a->list == list) appliers[k].a->apply(t, appliers[k].id, v);
    }
}

int file_setting_given(void) { return list_setting_given(H5_FAPL); }

/* Called inside iop_enter() and quiet_on(): the [hdf5] file settings on
 * copies of the program's lists (*fapl, *fcpl: -1 when not copied).  At an
 * open ``fcpl_in`` is ignored; ``page`` says whether the page buffer was
 * set (an open may have to retry without it). */
static void file_lists(h5lib *L, int create, hid_t fcpl_in, hid_t fapl_in, hid_t *fcpl,
                       hid_t *fapl, int *page, h5_outcomes *out) {
    *fcpl = *fapl = -1;
    *page = 0;
    *fapl = copy_list(L, fapl_in, "H5P_CLS_FILE_ACCESS_ID_g");
    if (*fapl < 0) {
        list_not_applicable(out, H5_FAPL, "the file access list cannot be copied");
        return;
    }
    t_H5Pget_driver *gd = H5F_(L, H5Pget_driver);
    h5_target t = {.L = L, .out = out, .list = *fapl, .create = create, .fcpl_in = fcpl_in,
                   .fcpl = fcpl, .page = page,
                   .mpio = gd && !strcmp(driver_name(L, gd(*fapl)), "mpio")};
    apply_list(&t, H5_FAPL);
}

/* Called inside iop_enter() and quiet_on(): a copy of the dataset creation
 * list with the [hdf5] dataset settings, or -1 when none is given. */
hid_t dcpl_list(h5lib *L, hid_t space, hid_t dcpl_in, h5_outcomes *out) {
    if (!list_setting_given(H5_DCPL)) return -1;
    hid_t dcpl = copy_list(L, dcpl_in, "H5P_CLS_DATASET_CREATE_ID_g");
    if (dcpl < 0) {
        list_not_applicable(out, H5_DCPL, "the list cannot be copied");
        return -1;
    }
    h5_target t = {.L = L, .out = out, .list = dcpl, .space = space};
    apply_list(&t, H5_DCPL);
    return dcpl;
}

/* Was the file that holds ``obj`` opened with the MPI-IO driver?  Read
 * from what was noted at its open: asking HDF5 for the file's access list
 * would duplicate its communicator, a collective call, and a transfer
 * need not be collective. */
static int object_in_mpio_file(h5lib *L, hid_t obj) {
    char file[4096], abs[4096];
    t_H5Fget_name *gf = H5F_(L, H5Fget_name);
    ssize_t n = gf ? gf(obj, file, sizeof file) : -1;
    if (n <= 0 || (size_t)n >= sizeof file) return 0;
    absolute(file, abs, sizeof abs);
    iop_stats *st = iop_stats_for(IOP_LAYER_H5F, iop_register_path(abs));
    return st && __atomic_load_n(&st->c[IOP_C_USE_MPIIO], __ATOMIC_RELAXED) != 0;
}

/* Called inside iop_enter() and quiet_on(): a copy of the transfer list
 * with the [hdf5] transfer settings, or -1.  They are MPI-IO transfer
 * properties: without a parallel build and a file opened with the MPI-IO
 * driver the program's list is used as it is. */
static hid_t dxpl_list(h5lib *L, hid_t dset, hid_t dxpl_in, h5_outcomes *out) {
    if (!list_setting_given(H5_DXPL)) return -1;
    if (!H5F_(L, H5Pset_dxpl_mpio)) {
        char why[64];
        snprintf(why, sizeof why, "HDF5 %s is not a parallel build", library_version(L));
        list_not_applicable(out, H5_DXPL, why);
        return -1;
    }
    if (!object_in_mpio_file(L, dset)) {
        list_not_applicable(
            out, H5_DXPL,
            "the file is not opened with the MPI-IO driver (or its open was not traced)");
        return -1;
    }
    hid_t dxpl = copy_list(L, dxpl_in, "H5P_CLS_DATASET_XFER_ID_g");
    if (dxpl < 0) {
        list_not_applicable(out, H5_DXPL, "the transfer list cannot be copied");
        return -1;
    }
    h5_target t = {.L = L, .out = out, .list = dxpl};
    apply_list(&t, H5_DXPL);
    return dxpl;
}

/* Record outcomes of a dataset: under its file, the dataset's name as the object. */
void record_dataset(h5lib *L, hid_t dset, const h5_outcomes *out) {
    if (!out->n) return;
    char file[4096], obj[96], abs[4096];
    ssize_t n, m;
    object_names(L, dset, file, sizeof file, &n, obj, sizeof obj, &m);
    if (m <= 0) snprintf(obj, sizeof obj, "<anonymous>");
    uint64_t fid = 0;
    if (n > 0 && (size_t)n < sizeof file) {
        absolute(file, abs, sizeof abs);
        fid = iop_register_path(abs);
    }
    record(out, fid, obj);
}

/* H5Fcreate and H5Fopen with the [hdf5] file settings: the call is made
 * with copies of the program's lists; when it fails with them, once more
 * as the program asked (an open that failed only with the page buffer is
 * retried without it: the file is not paged). */
hid_t file_call(h5lib *L, int create, const char *name, unsigned flags, hid_t fcpl,
                hid_t fapl, double *t1) {
    h5_outcomes out;
    out.n = 0;
    hid_t my_fcpl, my_fapl;
    int page;
    h5_quiet q;
    iop_enter();
    quiet_on(L, &q);
    file_lists(L, create, fcpl, fapl, &my_fcpl, &my_fapl, &page, &out);
    quiet_off(L, &q);
    iop_leave();
    t_H5Fcreate *fc = H5F_(L, H5Fcreate);
    t_H5Fopen *fo = H5F_(L, H5Fopen);
    if (my_fcpl < 0 && my_fapl < 0) { /* nothing to try: the program's call */
        *t1 = iop_now();
        hid_t r = create ? fc(name, flags, fcpl, fapl) : fo(name, flags, fapl);
        int e = errno;
        if (r >= 0 && name) record(&out, iop_register_path(name), NULL);
        errno = e;
        return r;
    }
    hid_t use_fcpl = my_fcpl > 0 ? my_fcpl : fcpl, use_fapl = my_fapl > 0 ? my_fapl : fapl;
    char why[128] = "";
    *t1 = iop_now();
    quiet_on(L, &q);
    hid_t r = create ? fc(name, flags, use_fcpl, use_fapl) : fo(name, flags, use_fapl);
    if (r < 0 && !create && page) {
        h5_error(L, why);
        t_H5Pset_page_buffer_size *spb = H5F_(L, H5Pset_page_buffer_size);
        iop_enter();
        int undone = spb(my_fapl, 0, 0, 0) >= 0;
        iop_leave();
        if (undone && (r = fo(name, flags, my_fapl)) >= 0)
            for (int i = 0; i < out.n; i++)
                if (out.e[i].id == IOP_SET_HDF5_PAGE_BUFFER_SIZE) {
                    out.e[i].outcome = IOP_SO_NOT_APPLICABLE;
                    snprintf(out.e[i].detail, sizeof out.e[i].detail,
                             "the file is not paged: %.120s", why);
                }
    }
    if (r < 0) h5_error(L, why);
    quiet_off(L, &q);
    if (r < 0) {
        r = create ? fc(name, flags, fcpl, fapl) : fo(name, flags, fapl);
        if (r >= 0) pend_rejected(&out, create ? "H5Fcreate" : "H5Fopen", why);
    }
    int e = errno;
    iop_enter();
    close_plist(L, my_fcpl);
    close_plist(L, my_fapl);
    iop_leave();
    if (r >= 0 && name) record(&out, iop_register_path(name), NULL);
    errno = e;
    return r;
}

/* H5Dwrite or H5Dread (``fn``) with the [hdf5] transfer mode on a copy of
 * the program's transfer list; when the call fails with it, once more as
 * the program asked. */
herr_t transfer_call(h5lib *L, int op, void *fn, hid_t dset, hid_t mtype, hid_t mspace,
                     hid_t fspace, hid_t dxpl, void *buf) {
    t_H5Dread *f = (t_H5Dread *)fn; /* the same registers for both */
    h5_outcomes out;
    out.n = 0;
    h5_quiet q;
    char why[128] = "";
    iop_enter();
    quiet_on(L, &q);
    hid_t mine = dxpl_list(L, dset, dxpl, &out);
    quiet_off(L, &q);
    iop_leave();
    double t1 = iop_now();
    herr_t r = -1;
    if (mine > 0) {
        quiet_on(L, &q);
        r = f(dset, mtype, mspace, fspace, mine, buf);
        if (r < 0) h5_error(L, why);
        quiet_off(L, &q);
    }
    hid_t used = r >= 0 ? mine : dxpl;
    if (r < 0) {
        r = f(dset, mtype, mspace, fspace, dxpl, buf);
        if (r >= 0 && mine > 0) pend_rejected(&out, op == IOP_OP_READ ? "H5Dread" : "H5Dwrite", why);
    }
    int e = errno;
    double t2 = iop_now();
    dataset_io(L, op, dset, mtype, mspace, fspace, used, buf, r, t1, t2);
    iop_enter();
    close_plist(L, mine);
    iop_leave();
    if (r >= 0) record_dataset(L, dset, &out);
    errno = e;
    return r;
}
