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

int file_setting_given(void) {
    for (int id = IOP_SET_HDF5_ALIGNMENT; id <= IOP_SET_HDF5_PAGE_BUFFER_SIZE; id++)
        if (iop_setting(id)) return 1;
    return 0;
}

/* Called inside iop_enter() and quiet_on(): the [hdf5] file settings on
 * copies of the program's lists (*fapl, *fcpl: -1 when not copied).  At an
 * open ``fcpl_in`` is ignored; ``page`` says whether the page buffer was
 * set (an open may have to retry without it). */
static void file_lists(h5lib *L, int create, hid_t fcpl_in, hid_t fapl_in, hid_t *fcpl,
                       hid_t *fapl, int *page, h5_outcomes *out) {
    const iop_setting_value *al = iop_setting(IOP_SET_HDF5_ALIGNMENT),
                            *th = iop_setting(IOP_SET_HDF5_ALIGNMENT_THRESHOLD),
                            *sv = iop_setting(IOP_SET_HDF5_SIEVE_BUF_SIZE),
                            *mb = iop_setting(IOP_SET_HDF5_META_BLOCK_SIZE),
                            *co = iop_setting(IOP_SET_HDF5_COLL_METADATA_OPS),
                            *cw = iop_setting(IOP_SET_HDF5_COLL_METADATA_WRITE),
                            *pb = iop_setting(IOP_SET_HDF5_PAGE_BUFFER_SIZE);
    *fcpl = *fapl = -1;
    *page = 0;
    *fapl = copy_list(L, fapl_in, "H5P_CLS_FILE_ACCESS_ID_g");
    if (*fapl < 0) {
        for (int id = IOP_SET_HDF5_ALIGNMENT; id <= IOP_SET_HDF5_PAGE_BUFFER_SIZE; id++)
            if (iop_setting(id))
                pend(out, id, IOP_SO_NOT_APPLICABLE, "the file access list cannot be copied");
        return;
    }
    t_H5Pget_driver *gd = H5F_(L, H5Pget_driver);
    int mpio = gd && !strcmp(driver_name(L, gd(*fapl)), "mpio");
    if (al || th) {
        hsize_t thr = 1, align = 1;
        t_H5Pget_alignment *ga = H5F_(L, H5Pget_alignment);
        t_H5Pset_alignment *sa = H5F_(L, H5Pset_alignment);
        if (ga) ga(*fapl, &thr, &align);
        if (al) align = (hsize_t)al->i;
        if (th) thr = (hsize_t)th->i;
        herr_t r = sa ? sa(*fapl, thr, align) : -1;
        if (al) pend_set(L, out, IOP_SET_HDF5_ALIGNMENT, r, "H5Pset_alignment");
        if (th) pend_set(L, out, IOP_SET_HDF5_ALIGNMENT_THRESHOLD, r, "H5Pset_alignment");
    }
    if (sv) {
        t_H5Pset_sieve_buf_size *f = H5F_(L, H5Pset_sieve_buf_size);
        pend_set(L, out, IOP_SET_HDF5_SIEVE_BUF_SIZE, f ? f(*fapl, (size_t)sv->i) : -1,
                 "H5Pset_sieve_buf_size");
    }
    if (mb) {
        t_H5Pset_meta_block_size *f = H5F_(L, H5Pset_meta_block_size);
        pend_set(L, out, IOP_SET_HDF5_META_BLOCK_SIZE, f ? f(*fapl, (hsize_t)mb->i) : -1,
                 "H5Pset_meta_block_size");
    }
    for (int k = 0; k < 2; k++) {
        const iop_setting_value *v = k ? cw : co;
        int id = k ? IOP_SET_HDF5_COLL_METADATA_WRITE : IOP_SET_HDF5_COLL_METADATA_OPS;
        if (!v) continue;
        if (!parallel_build(L))
            pend(out, id, IOP_SO_NOT_APPLICABLE, "HDF5 %s is not a parallel build",
                 library_version(L));
        else if (!mpio)
            pend(out, id, IOP_SO_NOT_APPLICABLE, "the file is not opened with the MPI-IO driver");
        else if (k) {
            t_H5Pset_coll_metadata_write *f = H5F_(L, H5Pset_coll_metadata_write);
            pend_set(L, out, id, f ? f(*fapl, v->i != 0) : -1, "H5Pset_coll_metadata_write");
        } else {
            t_H5Pset_all_coll_metadata_ops *f = H5F_(L, H5Pset_all_coll_metadata_ops);
            pend_set(L, out, id, f ? f(*fapl, v->i != 0) : -1, "H5Pset_all_coll_metadata_ops");
        }
    }
    if (!pb) return;
    int id = IOP_SET_HDF5_PAGE_BUFFER_SIZE;
    t_H5Pset_page_buffer_size *spb = H5F_(L, H5Pset_page_buffer_size);
    t_H5Pset_file_space_strategy *sfs = H5F_(L, H5Pset_file_space_strategy);
    t_H5Pget_file_space_strategy *gfs = H5F_(L, H5Pget_file_space_strategy);
    t_H5Pget_file_space_page_size *gps = H5F_(L, H5Pget_file_space_page_size);
    /* HDF5 1.10 refuses page buffering in every parallel build; later ones
     * with the MPI-IO driver. */
    if (mpio || (parallel_build(L) && !strncmp(library_version(L), "1.10.", 5))) {
        pend(out, id, IOP_SO_NOT_APPLICABLE, "HDF5 %s has no page buffering %s",
             library_version(L), mpio ? "with the MPI-IO driver" : "in a parallel build");
        return;
    }
    if (!spb || !sfs || !gfs || !gps) {
        pend(out, id, IOP_SO_NOT_APPLICABLE, "HDF5 %s has no paged file space",
             library_version(L));
        return;
    }
    if (pb->i == 0) { /* 0: no page buffer, which needs no paged file */
        pend_set(L, out, id, spb(*fapl, 0, 0, 0), "H5Pset_page_buffer_size");
        return;
    }
    hsize_t page_size = 4096;
    if (create) {
        *fcpl = copy_list(L, fcpl_in, "H5P_CLS_FILE_CREATE_ID_g");
        int strategy = -1;
        uint64_t persist = 0;
        hsize_t threshold = 1;
        if (*fcpl < 0 || gfs(*fcpl, &strategy, &persist, &threshold) < 0) {
            pend(out, id, IOP_SO_NOT_APPLICABLE, "the file creation list cannot be copied");
            return;
        }
        if (strategy != H5F_FSPACE_STRATEGY_PAGE &&
            sfs(*fcpl, H5F_FSPACE_STRATEGY_PAGE, persist != 0, threshold) < 0) {
            char why[128];
            h5_error(L, why);
            pend(out, id, IOP_SO_REJECTED, "H5Pset_file_space_strategy: %s", why);
            return;
        }
        gps(*fcpl, &page_size);
    }
    if ((hsize_t)pb->i < page_size) {
        pend(out, id, IOP_SO_REJECTED, "smaller than the file space page size (%llu)", page_size);
        return;
    }
    herr_t r = spb(*fapl, (size_t)pb->i, 0, 0);
    pend_set(L, out, id, r, "H5Pset_page_buffer_size");
    *page = r >= 0;
}

/* Called inside iop_enter() and quiet_on(): a copy of the dataset creation
 * list with chunk and fill_time, or -1 when none is given. */
hid_t dcpl_list(h5lib *L, hid_t space, hid_t dcpl_in, h5_outcomes *out) {
    const iop_setting_value *ch = iop_setting(IOP_SET_HDF5_CHUNK),
                            *ft = iop_setting(IOP_SET_HDF5_FILL_TIME);
    if (!ch && !ft) return -1;
    hid_t dcpl = copy_list(L, dcpl_in, "H5P_CLS_DATASET_CREATE_ID_g");
    if (dcpl < 0) {
        if (ch) pend(out, IOP_SET_HDF5_CHUNK, IOP_SO_NOT_APPLICABLE, "the list cannot be copied");
        if (ft)
            pend(out, IOP_SET_HDF5_FILL_TIME, IOP_SO_NOT_APPLICABLE, "the list cannot be copied");
        return -1;
    }
    if (ch) {
        t_H5Sget_simple_extent_ndims *gn = H5F_(L, H5Sget_simple_extent_ndims);
        t_H5Pset_chunk *sc = H5F_(L, H5Pset_chunk);
        int rank = gn && space > 0 ? gn(space) : -1;
        if (rank != ch->n) {
            pend(out, IOP_SET_HDF5_CHUNK, IOP_SO_NOT_APPLICABLE,
                 "the dataset has rank %d, the chunk %d", rank, ch->n);
        } else {
            hsize_t dims[IOP_SETTINGS_MAX_RANK];
            for (int i = 0; i < ch->n; i++) dims[i] = (hsize_t)ch->a[i];
            pend_set(L, out, IOP_SET_HDF5_CHUNK, sc ? sc(dcpl, ch->n, dims) : -1,
                     "H5Pset_chunk");
        }
    }
    if (ft) {
        static const int fill_time[] = {1 /* never */, 0 /* alloc */, 2 /* ifset */};
        t_H5Pset_fill_time *sf = H5F_(L, H5Pset_fill_time);
        pend_set(L, out, IOP_SET_HDF5_FILL_TIME, sf ? sf(dcpl, fill_time[ft->i % 3]) : -1,
                 "H5Pset_fill_time");
    }
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
 * with the [hdf5] transfer mode, or -1. */
static hid_t dxpl_list(h5lib *L, hid_t dset, hid_t dxpl_in, h5_outcomes *out) {
    const iop_setting_value *tr = iop_setting(IOP_SET_HDF5_TRANSFER);
    if (!tr) return -1;
    int id = IOP_SET_HDF5_TRANSFER;
    t_H5Pset_dxpl_mpio *sx = H5F_(L, H5Pset_dxpl_mpio);
    if (!sx) {
        pend(out, id, IOP_SO_NOT_APPLICABLE, "HDF5 %s is not a parallel build",
             library_version(L));
        return -1;
    }
    if (!object_in_mpio_file(L, dset)) {
        pend(out, id, IOP_SO_NOT_APPLICABLE,
             "the file is not opened with the MPI-IO driver (or its open was not traced)");
        return -1;
    }
    hid_t dxpl = copy_list(L, dxpl_in, "H5P_CLS_DATASET_XFER_ID_g");
    if (dxpl < 0) {
        pend(out, id, IOP_SO_NOT_APPLICABLE, "the transfer list cannot be copied");
        return -1;
    }
    pend_set(L, out, id, sx(dxpl, tr->i == 0 ? H5FD_MPIO_COLLECTIVE : 0), "H5Pset_dxpl_mpio");
    return dxpl;
}

/* Record outcomes of a dataset: under its file, the dataset's name as the object. */
void record_dataset(h5lib *L, hid_t dset, const h5_outcomes *out) {
    if (!out->n) return;
    char file[4096], obj[96], abs[4096];
    t_H5Fget_name *gf = H5F_(L, H5Fget_name);
    t_H5Iget_name *gi = H5F_(L, H5Iget_name);
    iop_enter();
    ssize_t n = gf ? gf(dset, file, sizeof file) : -1;
    ssize_t m = gi ? gi(dset, obj, sizeof obj) : -1;
    iop_leave();
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
