/* HDF5 layer: files (H5F) and datasets (H5D).
 *
 * hdf5.h is not included: the types and prototypes below are declared here,
 * and every HDF5 function is looked up at run time, so that one library
 * works with HDF5 1.10, 1.14 and 2.0 and with programs that have no HDF5 at
 * all (nm -D --undefined-only must show no H5 symbol).
 *
 * Which HDF5?  A process may hold more than one copy of the library: a
 * program linked with the system HDF5 may load a Python extension with its
 * own private copy (h5py and netCDF4 wheels each bundle one, loaded with
 * RTLD_LOCAL).  Our H5Dwrite receives the calls of all of them, so the real
 * function is looked up in the scope of the object that called us (found
 * from the return address): calls from h5py go to h5py's libhdf5, calls
 * from the program to the program's.  Each copy of the library gets its own
 * table of function pointers, and the queries we make about an id (its
 * dataspace, its datatype, ...) go to the copy that made the id.
 *
 * Linked into a program instead (IOP_LINK, `iopilot cc`), for an HDF5 linked
 * statically, these wrappers are entered through ``__wrap_H5...`` and serve
 * the one HDF5 of the program (hdf5_lib.c).
 *
 * Our own calls (H5Dget_space, H5Pget_alignment, ...) are bracketed by
 * iop_enter()/iop_leave() so that whatever they do is not traced, and they
 * are only made after a call succeeded: after a failure the error stack
 * belongs to the program (h5py turns it into the exception's message), and
 * any API call of ours would clear it.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "hdf5_private.h"
#include "settings.h"

/* ------------------------------------------------------------------ */
/* Files. */

static void file_opened(h5lib *L, hid_t fid, const char *name, hid_t fapl, int created, double t1,
                        double t2) {
    uint64_t id = iop_register_path(name);
    iop_open *o = iop_handle_set(IOP_LAYER_H5F, hkey(L, fid), id, -1);
    iop_stats *st = o ? o->st : iop_stats_for(IOP_LAYER_H5F, id);
    if (!st) return;
    /* H5Fcreate counts as CREATES only (the reader adds CREATES to
     * H5F_OPENS, as Darshan counts H5Fcreate among the opens). */
    iop_meta_op(st, IOP_OP_OPEN, created ? IOP_C_CREATES : IOP_C_OPENS, t1, t2, 0);
    iop_enter();
    file_properties(L, fid, id, st, fapl);
    iop_leave();
}

IOP_EXPORT hid_t IOP_WRAPPED(H5Fcreate)(const char *name, unsigned flags, hid_t fcpl, hid_t fapl) {
    h5lib *L = CALLER_LIB();
    t_H5Fcreate *f = H5F_(L, H5Fcreate);
    if (!f) return -1;
    if (!iop_active()) return f(name, flags, fcpl, fapl);
    IOP_SCOPE; double t1 = iop_now();
    hid_t r = IOP_UNLIKELY(iop_settings_on) && file_setting_given()
                  ? file_call(L, 1, name, flags, fcpl, fapl, &t1)
                  : f(name, flags, fcpl, fapl);
    int e = errno;
    double t2 = iop_now();
    if (r >= 0 && name) file_opened(L, r, name, fapl, 1, t1, t2);
    errno = e;
    return r;
}

IOP_EXPORT hid_t IOP_WRAPPED(H5Fopen)(const char *name, unsigned flags, hid_t fapl) {
    h5lib *L = CALLER_LIB();
    t_H5Fopen *f = H5F_(L, H5Fopen);
    if (!f) return -1;
    if (!iop_active()) return f(name, flags, fapl);
    IOP_SCOPE; double t1 = iop_now();
    hid_t r = IOP_UNLIKELY(iop_settings_on) && file_setting_given()
                  ? file_call(L, 0, name, flags, H5P_DEFAULT, fapl, &t1)
                  : f(name, flags, fapl);
    int e = errno;
    double t2 = iop_now();
    if (r >= 0 && name) file_opened(L, r, name, fapl, 0, t1, t2);
    errno = e;
    return r;
}

/* After a successful close: is the id still alive (another reference)? */
static int still_valid(h5lib *L, hid_t id) {
    t_H5Iis_valid *f = H5F_(L, H5Iis_valid);
    if (!f) return 0;
    iop_enter();
    htri_t v = f(id);
    iop_leave();
    return v > 0;
}

/* H5Fclose, H5Dclose and H5Oclose: one close of a handle of ``layer``. */
#define CLOSE_BODY(L, f, layer, id)                                                  \
    iop_open *o = iop_active() ? iop_handle(layer, hkey(L, id)) : NULL;              \
    if (!o) return f(id);                                                            \
    iop_stats *st = o->st;                                                           \
    IOP_SCOPE; double t1 = iop_now();                                                           \
    herr_t r = f(id);                                                                \
    int e = errno;                                                                   \
    double t2 = iop_now();                                                           \
    if (r >= 0 && !still_valid(L, id)) iop_handle_clear(layer, hkey(L, id));         \
    iop_meta_op(st, IOP_OP_CLOSE, -1, t1, t2, r < 0 ? IOP_FLAG_ERROR : 0);           \
    errno = e;                                                                       \
    return r

IOP_EXPORT herr_t IOP_WRAPPED(H5Fclose)(hid_t fid) {
    h5lib *L = CALLER_LIB();
    t_H5Fclose *f = H5F_(L, H5Fclose);
    if (!f) return -1;
    CLOSE_BODY(L, f, IOP_LAYER_H5F, fid);
}

IOP_EXPORT herr_t IOP_WRAPPED(H5Fflush)(hid_t obj, int scope) {
    h5lib *L = CALLER_LIB();
    t_H5Fflush *f = H5F_(L, H5Fflush);
    if (!f) return -1;
    if (!iop_active()) return f(obj, scope);
    iop_fence_all(); /* flushed means handed to the system, deferred writes too */
    IOP_SCOPE; double t1 = iop_now();
    herr_t r = f(obj, scope);
    int e = errno;
    double t2 = iop_now();
    if (r >= 0) {
        /* The object may be any object in the file: find the file by name. */
        char name[4096];
        t_H5Fget_name *gn = H5F_(L, H5Fget_name);
        iop_enter();
        ssize_t n = gn ? gn(obj, name, sizeof name) : -1;
        iop_leave();
        if (n > 0 && (size_t)n < sizeof name) {
            iop_stats *st = iop_stats_for(IOP_LAYER_H5F, iop_register_path(name));
            iop_meta_op(st, IOP_OP_FLUSH, IOP_C_FLUSHES, t1, t2, 0);
        }
    }
    errno = e;
    return r;
}

/* ------------------------------------------------------------------ */
/* Datasets. */

/* Register a dataset id: "<file path>:<dataset path>".  ``mode`` 0: found
 * at its first read or write (opened some way we do not wrap), 1: opened,
 * 2: created; ``deprecated``: by H5Dopen1 or H5Dcreate1 (Darshan's
 * USE_DEPRECATED says how the last open was made). */
iop_stats *dataset_opened(h5lib *L, hid_t dset, int mode, int deprecated, double t1,
                          double t2) {
    char file[4096], obj[2048], abs[4096], full[6200];
    ssize_t n, m;
    object_names(L, dset, file, sizeof file, &n, obj, sizeof obj, &m);
    if (n <= 0 || (size_t)n >= sizeof file) snprintf(file, sizeof file, "<unknown HDF5 file>");
    if (m <= 0 || (size_t)m >= sizeof obj) snprintf(obj, sizeof obj, "<anonymous>");
    absolute(file, abs, sizeof abs);
    snprintf(full, sizeof full, "%s:%s", abs, obj);
    uint64_t id = n > 0 && (size_t)n < sizeof file ? iop_register_path(full) : iop_register_name(full);
    iop_open *o = iop_handle_set(IOP_LAYER_H5D, hkey(L, dset), id, -1);
    iop_stats *st = o ? o->st : iop_stats_for(IOP_LAYER_H5D, id);
    if (!st) return NULL;
    /* Datasets: OPENS counts creates too (Darshan's H5D_OPENS, which the
     * reader takes as is); CREATES says how many of them were creates. */
    if (mode) iop_meta_op(st, IOP_OP_OPEN, IOP_C_OPENS, t1, t2, 0);
    if (mode == 2) iop_count(st, IOP_C_CREATES, 1);
    if (mode) iop_set(st, IOP_C_USE_DEPRECATED, deprecated);
    iop_enter();
    dataset_properties(L, dset, id, st);
    iop_leave();
    return st;
}

/* An object opened by H5Oopen*: counted when it is a dataset, as Darshan does. */
static void object_opened(h5lib *L, hid_t obj, double t1, double t2) {
    t_H5Iget_type *gt = H5F_(L, H5Iget_type);
    iop_enter();
    int type = gt ? gt(obj) : -1;
    iop_leave();
    if (type == H5I_DATASET) dataset_opened(L, obj, 1, 0, t1, t2);
}

/* The body of a wrapper that opens or creates: ``OPENED`` (which may use r,
 * t1 and t2) runs after a successful CALL. */
#define OPEN_BODY(CALL, OPENED)                                           \
    if (!iop_active()) return CALL;                                       \
    IOP_SCOPE; double t1 = iop_now();                                                \
    hid_t r = CALL;                                                       \
    int e = errno;                                                        \
    double t2 = iop_now();                                                \
    if (r >= 0) OPENED;                                                   \
    errno = e;                                                            \
    return r

/* The body of a wrapper that creates a dataset: ``CALL`` takes its creation
 * list from ``use``.  With [hdf5] chunk or fill_time the call is made with a
 * copy of the program's list; when it fails with it, once more as the
 * program asked. */
#define CREATE_BODY(space, dcpl, deprecated, CALL)                           \
    hid_t use = dcpl;                                                        \
    if (!iop_active()) return CALL;                                          \
    h5_outcomes out;                                                         \
    out.n = 0;                                                               \
    hid_t mine = -1;                                                         \
    h5_quiet q;                                                              \
    char why[128];                                                           \
    why[0] = 0;                                                              \
    if (IOP_UNLIKELY(iop_settings_on)) {                                     \
        iop_enter();                                                         \
        quiet_on(L, &q);                                                     \
        mine = dcpl_list(L, space, dcpl, &out);                              \
        quiet_off(L, &q);                                                    \
        iop_leave();                                                         \
    }                                                                        \
    IOP_SCOPE; double t1 = iop_now();                                                   \
    hid_t r = -1;                                                            \
    if (IOP_UNLIKELY(mine > 0)) {                                            \
        use = mine;                                                          \
        quiet_on(L, &q);                                                     \
        r = CALL;                                                            \
        if (r < 0) h5_error(L, why);                                         \
        quiet_off(L, &q);                                                    \
        use = dcpl;                                                          \
        if (r < 0 && (r = CALL) >= 0) pend_rejected(&out, "H5Dcreate", why); \
        iop_enter();                                                         \
        close_plist(L, mine);                                                \
        iop_leave();                                                         \
    } else {                                                                 \
        r = CALL;                                                            \
    }                                                                        \
    int e = errno;                                                           \
    double t2 = iop_now();                                                   \
    if (r >= 0) {                                                            \
        dataset_opened(L, r, 2, deprecated, t1, t2);                         \
        if (IOP_UNLIKELY(out.n)) record_dataset(L, r, &out);                 \
    }                                                                        \
    errno = e;                                                               \
    return r

IOP_EXPORT hid_t IOP_WRAPPED(H5Dcreate2)(hid_t loc, const char *name, hid_t type, hid_t space,
                                         hid_t lcpl, hid_t dcpl, hid_t dapl) {
    h5lib *L = CALLER_LIB();
    t_H5Dcreate2 *f = H5F_(L, H5Dcreate2);
    if (!f) return -1;
    CREATE_BODY(space, dcpl, 0, f(loc, name, type, space, lcpl, use, dapl));
}

IOP_EXPORT hid_t IOP_WRAPPED(H5Dcreate1)(hid_t loc, const char *name, hid_t type, hid_t space,
                                         hid_t dcpl) {
    h5lib *L = CALLER_LIB();
    t_H5Dcreate1 *f = H5F_(L, H5Dcreate1);
    if (!f) return -1;
    CREATE_BODY(space, dcpl, 1, f(loc, name, type, space, use));
}

IOP_EXPORT hid_t IOP_WRAPPED(H5Dcreate_anon)(hid_t loc, hid_t type, hid_t space, hid_t dcpl,
                                             hid_t dapl) {
    h5lib *L = CALLER_LIB();
    t_H5Dcreate_anon *f = H5F_(L, H5Dcreate_anon);
    if (!f) return -1;
    CREATE_BODY(space, dcpl, 0, f(loc, type, space, use, dapl));
}

IOP_EXPORT hid_t IOP_WRAPPED(H5Dopen2)(hid_t loc, const char *name, hid_t dapl) {
    h5lib *L = CALLER_LIB();
    t_H5Dopen2 *f = H5F_(L, H5Dopen2);
    if (!f) return -1;
    OPEN_BODY(f(loc, name, dapl), dataset_opened(L, r, 1, 0, t1, t2));
}

IOP_EXPORT hid_t IOP_WRAPPED(H5Dopen1)(hid_t loc, const char *name) {
    h5lib *L = CALLER_LIB();
    t_H5Dopen1 *f = H5F_(L, H5Dopen1);
    if (!f) return -1;
    OPEN_BODY(f(loc, name), dataset_opened(L, r, 1, 1, t1, t2));
}

/* h5py opens existing datasets with H5Oopen (f["name"]). */
IOP_EXPORT hid_t IOP_WRAPPED(H5Oopen)(hid_t loc, const char *name, hid_t lapl) {
    h5lib *L = CALLER_LIB();
    t_H5Oopen *f = H5F_(L, H5Oopen);
    if (!f) return -1;
    OPEN_BODY(f(loc, name, lapl), object_opened(L, r, t1, t2));
}

IOP_EXPORT hid_t IOP_WRAPPED(H5Oopen_by_idx)(hid_t loc, const char *group, int index, int order,
                                             hsize_t n, hid_t lapl) {
    h5lib *L = CALLER_LIB();
    t_H5Oopen_by_idx *f = H5F_(L, H5Oopen_by_idx);
    if (!f) return -1;
    OPEN_BODY(f(loc, group, index, order, n, lapl), object_opened(L, r, t1, t2));
}

IOP_EXPORT hid_t IOP_WRAPPED(H5Oopen_by_addr)(hid_t loc, haddr_t addr) {
    h5lib *L = CALLER_LIB();
    t_H5Oopen_by_addr *f = H5F_(L, H5Oopen_by_addr);
    if (!f) return -1;
    OPEN_BODY(f(loc, addr), object_opened(L, r, t1, t2));
}

/* 1.12 and later; a program whose HDF5 lacks it never calls it. */
IOP_EXPORT hid_t IOP_WRAPPED(H5Oopen_by_token)(hid_t loc, H5O_token_t token) {
    h5lib *L = CALLER_LIB();
    t_H5Oopen_by_token *f = H5F_(L, H5Oopen_by_token);
    if (!f) return -1;
    OPEN_BODY(f(loc, token), object_opened(L, r, t1, t2));
}

IOP_EXPORT herr_t IOP_WRAPPED(H5Dclose)(hid_t dset) {
    h5lib *L = CALLER_LIB();
    t_H5Dclose *f = H5F_(L, H5Dclose);
    if (!f) return -1;
    CLOSE_BODY(L, f, IOP_LAYER_H5D, dset);
}

IOP_EXPORT herr_t IOP_WRAPPED(H5Oclose)(hid_t obj) {
    h5lib *L = CALLER_LIB();
    t_H5Oclose *f = H5F_(L, H5Oclose);
    if (!f) return -1;
    CLOSE_BODY(L, f, IOP_LAYER_H5D, obj);
}

/* h5py releases its ids with H5Idec_ref: the last reference closes. */
IOP_EXPORT int IOP_WRAPPED(H5Idec_ref)(hid_t id) {
    h5lib *L = CALLER_LIB();
    t_H5Idec_ref *f = H5F_(L, H5Idec_ref);
    if (!f) return -1;
    if (!iop_active()) return f(id);
    int layer = IOP_LAYER_H5D;
    iop_open *o = iop_handle(layer, hkey(L, id));
    if (!o) o = iop_handle(layer = IOP_LAYER_H5F, hkey(L, id));
    if (!o) return f(id);
    iop_stats *st = o->st;
    IOP_SCOPE; double t1 = iop_now();
    int r = f(id);
    int e = errno;
    double t2 = iop_now();
    if (r == 0) {
        iop_handle_clear(layer, hkey(L, id));
        iop_meta_op(st, IOP_OP_CLOSE, -1, t1, t2, 0);
    }
    errno = e;
    return r;
}

IOP_EXPORT herr_t IOP_WRAPPED(H5Dflush)(hid_t dset) {
    h5lib *L = CALLER_LIB();
    t_H5Dflush *f = H5F_(L, H5Dflush);
    if (!f) return -1;
    iop_open *o = iop_active() ? iop_handle(IOP_LAYER_H5D, hkey(L, dset)) : NULL;
    if (!o) return f(dset);
    iop_stats *st = o->st;
    IOP_SCOPE; double t1 = iop_now();
    herr_t r = f(dset);
    int e = errno;
    iop_meta_op(st, IOP_OP_FLUSH, IOP_C_FLUSHES, t1, iop_now(), r < 0 ? IOP_FLAG_ERROR : 0);
    errno = e;
    return r;
}

/* ------------------------------------------------------------------ */
/* The module, as the core sees it (modules.c). */

static const iop_overflow_count hdf5_overflows[] = {{"fapl", &fapl_overflows}, {NULL, NULL}};
static const char *const hdf5_env[] = {"HDF5_PLUGIN_PATH", NULL};

const iop_module iop_hdf5_module = {
    IOP_MODULE_OF(HDF5),
    .after_fork = hdf5_after_fork,
    .overflows = hdf5_overflows,
    .env = hdf5_env,
};
