/* HDF5 layer: "hdf5_property" notes of what a file's or a dataset's
 * property lists say about tuning, and the file-access lists the program
 * configured through the setters wrapped here. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "hdf5_private.h"

/* ------------------------------------------------------------------ */
/* Notes: "hdf5_property" key/value pairs per file or dataset, each distinct
 * (id, key, value) once, so that reopening a file adds nothing. */

#define NOTE_SLOTS 8192
#define DATASET_NOTES_MAX 4096 /* files keep the other half */
static uint64_t note_seen[NOTE_SLOTS];
static int dataset_notes;

static uint64_t fnv(uint64_t h, const char *s) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (h ^ 0xff) * 1099511628211ULL;
}

static int note_is_new(uint64_t h) {
    if (!h) h = 1;
    for (size_t i = h % NOTE_SLOTS, n = 0; n < NOTE_SLOTS; i = (i + 1) % NOTE_SLOTS, n++) {
        uint64_t v = __atomic_load_n(&note_seen[i], __ATOMIC_ACQUIRE);
        if (v == h) return 0;
        if (v == 0) {
            uint64_t zero = 0;
            if (__atomic_compare_exchange_n(&note_seen[i], &zero, h, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                return 1;
            if (zero == h) return 0;
        }
    }
    /* table full: drop rather than grow, and say so */
    __atomic_add_fetch(&iop_overflows[IOP_OVERFLOW_NOTES], 1, __ATOMIC_RELAXED);
    return 0;
}

/* ``dataset``: a dataset's note, from a budget of their own (a program
 * with a million datasets must not fill the runtime's memory with notes). */
void h5note(int dataset, uint64_t id, const char *key, const char *fmt, ...) {
    if (dataset && __atomic_load_n(&dataset_notes, __ATOMIC_RELAXED) >= DATASET_NOTES_MAX) return;
    char value[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
    uint64_t h = 1469598103934665603ULL ^ (id * 0x9e3779b97f4a7c15ULL);
    h = fnv(fnv(h, key), value);
    if (!note_is_new(h)) return;
    if (dataset) __atomic_add_fetch(&dataset_notes, 1, __ATOMIC_RELAXED);
    iop_note("hdf5_property", id, key, value);
}

/* ------------------------------------------------------------------ */
/* File-access property lists the program configured through setters we
 * wrap: the MPI-IO driver (a fallback for libraries that do not tell the
 * driver's id) and the metadata cache configuration. */

#define NFAPLS 64
static struct {
    uintptr_t key; /* hkey() of the list */
    int mpio;
    char mdc[160];
} fapls[NFAPLS];
static int next_fapl;
static iop_lock_t fapl_lock_word;
long fapl_overflows;

static void fapl_lock(void) {
    iop_busy_enter();
    iop_lock(&fapl_lock_word);
}
static void fapl_unlock(void) {
    iop_unlock(&fapl_lock_word);
    iop_busy_leave();
}

/* Called with the FAPL lock held. */
static int fapl_slot(uintptr_t key, int create) {
    for (int i = 0; i < NFAPLS; i++)
        if (fapls[i].key == key) return i;
    if (!create) return -1;
    int i = next_fapl;
    next_fapl = (next_fapl + 1) % NFAPLS;
    if (fapls[i].key) /* the oldest list is forgotten: say so */
        iop_overflow(&fapl_overflows);
    memset(&fapls[i], 0, sizeof fapls[i]);
    fapls[i].key = key;
    return i;
}

IOP_EXPORT herr_t IOP_WRAPPED(H5Pset_fapl_mpio)(hid_t fapl, uintptr_t comm, uintptr_t info) {
    h5lib *L = CALLER_LIB();
    t_H5Pset_fapl_mpio *f = H5F_(L, H5Pset_fapl_mpio);
    if (!f) return -1;
    herr_t r = f(fapl, comm, info);
    if (r >= 0 && iop_enabled && fapl > 0) {
        int e = errno;
        fapl_lock();
        int i = fapl_slot(hkey(L, fapl), 1);
        fapls[i].mpio = 1;
        fapl_unlock();
        errno = e;
    }
    return r;
}

/* H5AC_cache_config_t, the same from 1.8 to 2.0: int version (1); three
 * booleans; char trace_file_name[1025]; bool evictions_enabled; bool
 * set_initial_size (offset 1033); size_t initial_size (1040); double
 * min_clean_fraction; size_t max_size (1056); size_t min_size (1064); ...
 * Read only when it looks like that layout. */
static void describe_mdc(const unsigned char *c, char *out, size_t n) {
    int version;
    size_t initial, max, min;
    memcpy(&version, c, sizeof version);
    memcpy(&initial, c + 1040, sizeof initial);
    memcpy(&max, c + 1056, sizeof max);
    memcpy(&min, c + 1064, sizeof min);
    unsigned char set_initial = c[1033];
    if (version == 1 && set_initial <= 1 && min <= max && max > 0)
        snprintf(out, n, "set_initial_size=%u initial_size=%zu min_size=%zu max_size=%zu",
                 set_initial, initial, min, max);
    else
        snprintf(out, n, "set");
}

IOP_EXPORT herr_t IOP_WRAPPED(H5Pset_mdc_config)(hid_t fapl, void *config) {
    h5lib *L = CALLER_LIB();
    t_H5Pset_mdc_config *f = H5F_(L, H5Pset_mdc_config);
    if (!f) return -1;
    herr_t r = f(fapl, config);
    if (r >= 0 && iop_enabled && fapl > 0 && config) {
        int e = errno;
        char desc[160];
        describe_mdc(config, desc, sizeof desc);
        fapl_lock();
        int i = fapl_slot(hkey(L, fapl), 1);
        memcpy(fapls[i].mdc, desc, sizeof desc);
        fapl_unlock();
        errno = e;
    }
    return r;
}

static const char *bool_str(uint64_t b) { return b ? "1" : "0"; }

/* Called inside iop_enter(): what the file's access and creation property
 * lists say about tuning. */
void file_properties(h5lib *L, hid_t fid, uint64_t id, iop_stats *st, hid_t fapl_in) {
    h5note(0, id, "library_version", "%s", library_version(L));
    int mpio = 0;
    t_H5Fget_access_plist *get_fapl = H5F_(L, H5Fget_access_plist);
    hid_t fapl = get_fapl ? get_fapl(fid) : -1;
    if (fapl > 0) {
        t_H5Pget_driver *gd = H5F_(L, H5Pget_driver);
        const char *drv = gd ? driver_name(L, gd(fapl)) : "";
        if (drv[0]) h5note(0, id, "driver", "%s", drv);
        if (!strcmp(drv, "mpio")) mpio = 1;

        hsize_t thr = 0, align = 0;
        t_H5Pget_alignment *ga = H5F_(L, H5Pget_alignment);
        if (ga && ga(fapl, &thr, &align) >= 0) {
            iop_set(st, IOP_C_ALIGNMENT_THRESHOLD, (int64_t)thr);
            iop_set(st, IOP_C_ALIGNMENT, (int64_t)align);
            h5note(0, id, "alignment", "threshold=%llu alignment=%llu", thr, align);
        }
        size_t sieve = 0;
        t_H5Pget_sieve_buf_size *gs = H5F_(L, H5Pget_sieve_buf_size);
        if (gs && gs(fapl, &sieve) >= 0) h5note(0, id, "sieve_buf_size", "%zu", sieve);
        hsize_t mbs = 0;
        t_H5Pget_meta_block_size *gm = H5F_(L, H5Pget_meta_block_size);
        if (gm && gm(fapl, &mbs) >= 0) h5note(0, id, "meta_block_size", "%llu", mbs);
        size_t pbs = 0;
        unsigned pmeta = 0, praw = 0;
        t_H5Pget_page_buffer_size *gp = H5F_(L, H5Pget_page_buffer_size);
        if (gp && gp(fapl, &pbs, &pmeta, &praw) >= 0)
            h5note(0, id, "page_buffer_size", "%zu min_meta_perc=%u min_raw_perc=%u", pbs, pmeta, praw);
        int low = -1, high = -1;
        t_H5Pget_libver_bounds *gl = H5F_(L, H5Pget_libver_bounds);
        if (gl && gl(fapl, &low, &high) >= 0) h5note(0, id, "libver_bounds", "low=%d high=%d", low, high);
        /* hbool_t is one byte (bool or unsigned char): read into a zeroed word. */
        uint64_t b = 0;
        t_H5Pget_all_coll_metadata_ops *gc = H5F_(L, H5Pget_all_coll_metadata_ops);
        if (gc && gc(fapl, &b) >= 0) h5note(0, id, "all_coll_metadata_ops", "%s", bool_str(b));
        b = 0;
        t_H5Pget_coll_metadata_write *gw = H5F_(L, H5Pget_coll_metadata_write);
        if (gw && gw(fapl, &b) >= 0) h5note(0, id, "coll_metadata_write", "%s", bool_str(b));
        close_plist(L, fapl);
    }
    t_H5Fget_create_plist *get_fcpl = H5F_(L, H5Fget_create_plist);
    hid_t fcpl = get_fcpl ? get_fcpl(fid) : -1;
    if (fcpl > 0) {
        int strategy = -1;
        uint64_t persist = 0;
        hsize_t threshold = 0;
        t_H5Pget_file_space_strategy *gf = H5F_(L, H5Pget_file_space_strategy);
        if (gf && gf(fcpl, &strategy, &persist, &threshold) >= 0) {
            static const char *names[] = {"fsm_aggr", "page", "aggr", "none"};
            h5note(0, id, "file_space_strategy", "%s persist=%s threshold=%llu",
                   strategy >= 0 && strategy < 4 ? names[strategy] : "unknown", bool_str(persist),
                   threshold);
            hsize_t page = 0;
            t_H5Pget_file_space_page_size *gps = H5F_(L, H5Pget_file_space_page_size);
            if (strategy == H5F_FSPACE_STRATEGY_PAGE && gps && gps(fcpl, &page) >= 0)
                h5note(0, id, "file_space_page_size", "%llu", page);
        }
        close_plist(L, fcpl);
    }
    if (fapl_in > 0) {
        char mdc[160] = "";
        fapl_lock();
        int i = fapl_slot(hkey(L, fapl_in), 0);
        if (i >= 0) {
            if (fapls[i].mpio) mpio = 1;
            memcpy(mdc, fapls[i].mdc, sizeof mdc);
        }
        fapl_unlock();
        if (mdc[0]) h5note(0, id, "mdc_config", "%s", mdc);
    }
    iop_set(st, IOP_C_USE_MPIIO, mpio); /* as Darshan: the last open decides */
}

static void dims_str(const hsize_t *d, int n, char *out, size_t size) {
    size_t k = 0;
    out[0] = 0;
    for (int i = 0; i < n && k < size; i++)
        k += (size_t)snprintf(out + k, size - k, "%s%llu", i ? "x" : "", d[i]);
}

/* Called inside iop_enter(): shape, type, layout, chunks and filters. */
void dataset_properties(h5lib *L, hid_t dset, uint64_t id, iop_stats *st) {
    char text[512];
    t_H5Dget_space *gs = H5F_(L, H5Dget_space);
    hid_t space = gs ? gs(dset) : -1;
    if (space > 0) {
        t_H5Sget_simple_extent_ndims *gn = H5F_(L, H5Sget_simple_extent_ndims);
        t_H5Sget_simple_extent_npoints *gp = H5F_(L, H5Sget_simple_extent_npoints);
        t_H5Sget_simple_extent_dims *gd = H5F_(L, H5Sget_simple_extent_dims);
        int nd = gn ? gn(space) : -1;
        hssize_t np = gp ? gp(space) : -1;
        if (nd >= 0) iop_set(st, IOP_C_DATASPACE_NDIMS, nd);
        if (np >= 0) iop_set(st, IOP_C_DATASPACE_NPOINTS, np);
        hsize_t dims[MAX_DIMS], maxd[MAX_DIMS];
        if (gd && nd > 0 && nd <= MAX_DIMS && gd(space, dims, maxd) == nd) {
            dims_str(dims, nd, text, sizeof text);
            h5note(1, id, "dims", "%s", text);
        }
        close_space(L, space);
    }
    t_H5Dget_type *gt = H5F_(L, H5Dget_type);
    t_H5Tget_size *ts = H5F_(L, H5Tget_size);
    hid_t type = gt ? gt(dset) : -1;
    if (type > 0) {
        size_t sz = ts ? ts(type) : 0;
        if (sz > 0) iop_set(st, IOP_C_DATATYPE_SIZE, (int64_t)sz);
        close_type(L, type);
    }
    t_H5Dget_create_plist *gc = H5F_(L, H5Dget_create_plist);
    hid_t dcpl = gc ? gc(dset) : -1;
    int layout = -1;
    if (dcpl > 0) {
        t_H5Pget_layout *gl = H5F_(L, H5Pget_layout);
        layout = gl ? gl(dcpl) : -1;
        static const char *layouts[] = {"compact", "contiguous", "chunked", "virtual"};
        if (layout >= 0 && layout < 4) h5note(1, id, "layout", "%s", layouts[layout]);
        t_H5Pget_chunk *gk = H5F_(L, H5Pget_chunk);
        hsize_t chunk[MAX_DIMS];
        int nc = layout == H5D_CHUNKED && gk ? gk(dcpl, MAX_DIMS, chunk) : -1;
        if (nc > 0 && nc <= MAX_DIMS) {
            /* Darshan's order: D1 is the fastest-varying (last) dimension. */
            for (int i = 0; i < nc && i < 5; i++)
                iop_set(st, IOP_C_CHUNK_SIZE_D1 + i, (int64_t)chunk[nc - 1 - i]);
            dims_str(chunk, nc, text, sizeof text);
            h5note(1, id, "chunk_dims", "%s", text);
        }
        t_H5Pget_nfilters *gnf = H5F_(L, H5Pget_nfilters);
        t_H5Pget_filter2 *gf = H5F_(L, H5Pget_filter2);
        int nf = gnf ? gnf(dcpl) : 0;
        if (nf > 0 && gf) {
            size_t k = 0;
            text[0] = 0;
            for (int i = 0; i < nf && k < sizeof text; i++) {
                unsigned flags = 0, cd[8] = {0}, config = 0;
                size_t ncd = 8;
                char fname[64] = "";
                int fid = gf(dcpl, (unsigned)i, &flags, &ncd, cd, sizeof fname, fname, &config);
                fname[sizeof fname - 1] = 0;
                k += (size_t)snprintf(text + k, sizeof text - k, "%s%s(%d)", i ? "," : "",
                                      fname[0] ? fname : "filter", fid);
            }
            h5note(1, id, "filters", "%s", text);
        }
        close_plist(L, dcpl);
    }
    if (layout == H5D_CHUNKED) {
        t_H5Dget_access_plist *ga = H5F_(L, H5Dget_access_plist);
        t_H5Pget_chunk_cache *gcc = H5F_(L, H5Pget_chunk_cache);
        hid_t dapl = ga ? ga(dset) : -1;
        if (dapl > 0) {
            size_t nslots = 0, nbytes = 0;
            double w0 = 0;
            if (gcc && gcc(dapl, &nslots, &nbytes, &w0) >= 0)
                h5note(1, id, "chunk_cache", "nslots=%zu nbytes=%zu w0=%g", nslots, nbytes, w0);
            close_plist(L, dapl);
        }
    }
}

void hdf5_after_fork(void) {
    fapl_lock_word = 0;
    fapl_overflows = 0;
}
