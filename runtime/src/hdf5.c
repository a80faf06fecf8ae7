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
 * Our own calls (H5Dget_space, H5Pget_alignment, ...) are bracketed by
 * iop_enter()/iop_leave() so that whatever they do is not traced, and they
 * are only made after a call succeeded: after a failure the error stack
 * belongs to the program (h5py turns it into the exception's message), and
 * any API call of ours would clear it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "behind.h"
#include "core.h"
#include "settings.h"

/* ------------------------------------------------------------------ */
/* HDF5 types (identical in 1.10, 1.12, 1.14 and 2.0 on LP64). */

typedef int64_t hid_t;
typedef int herr_t;
typedef int htri_t;
typedef unsigned long long hsize_t;
typedef long long hssize_t;
typedef uint64_t haddr_t;
typedef struct {
    uint8_t data[16]; /* H5O_MAX_TOKEN_SIZE */
} H5O_token_t;

#define H5P_DEFAULT ((hid_t)0)
/* Dataspace ids with a special meaning: H5S_ALL (0); 1.14 adds H5S_BLOCK
 * (1) and H5S_PLIST (2).  Real ids carry their type in the high bits. */
#define H5S_ALL ((hid_t)0)
#define H5S_SPECIAL_MAX ((hid_t)2)
#define H5I_DATASET 5
#define H5D_COMPACT 0
#define H5D_CONTIGUOUS 1
#define H5D_CHUNKED 2
#define H5D_VIRTUAL 3
#define H5S_SEL_POINTS 1
#define H5S_SEL_HYPERSLABS 2
#define H5FD_MPIO_COLLECTIVE 1
#define H5D_MPIO_NO_COLLECTIVE 0
#define H5F_FSPACE_STRATEGY_PAGE 1
#define MAX_DIMS 32 /* H5S_MAX_RANK */

/* Prototypes of everything we call, as function types. */
typedef herr_t t_H5open(void);
typedef herr_t t_H5get_libversion(unsigned *, unsigned *, unsigned *);
typedef hid_t t_H5Fcreate(const char *, unsigned, hid_t, hid_t);
typedef hid_t t_H5Fopen(const char *, unsigned, hid_t);
typedef herr_t t_H5Fclose(hid_t);
typedef herr_t t_H5Fflush(hid_t, int);
typedef ssize_t t_H5Fget_name(hid_t, char *, size_t);
typedef hid_t t_H5Fget_access_plist(hid_t);
typedef hid_t t_H5Fget_create_plist(hid_t);
typedef hid_t t_H5Dcreate1(hid_t, const char *, hid_t, hid_t, hid_t);
typedef hid_t t_H5Dcreate2(hid_t, const char *, hid_t, hid_t, hid_t, hid_t, hid_t);
typedef hid_t t_H5Dcreate_anon(hid_t, hid_t, hid_t, hid_t, hid_t);
typedef hid_t t_H5Dopen1(hid_t, const char *);
typedef hid_t t_H5Dopen2(hid_t, const char *, hid_t);
typedef herr_t t_H5Dclose(hid_t);
typedef herr_t t_H5Dflush(hid_t);
typedef herr_t t_H5Dread(hid_t, hid_t, hid_t, hid_t, hid_t, void *);
typedef herr_t t_H5Dwrite(hid_t, hid_t, hid_t, hid_t, hid_t, const void *);
typedef herr_t t_H5Dread_multi(size_t, hid_t *, hid_t *, hid_t *, hid_t *, hid_t, void **);
typedef herr_t t_H5Dwrite_multi(size_t, hid_t *, hid_t *, hid_t *, hid_t *, hid_t, const void **);
typedef hid_t t_H5Dget_space(hid_t);
typedef hid_t t_H5Dget_type(hid_t);
typedef hid_t t_H5Dget_create_plist(hid_t);
typedef hid_t t_H5Dget_access_plist(hid_t);
typedef hid_t t_H5Oopen(hid_t, const char *, hid_t);
/* H5_index_t and H5_iter_order_t are enums: int. */
typedef hid_t t_H5Oopen_by_idx(hid_t, const char *, int, int, hsize_t, hid_t);
typedef hid_t t_H5Oopen_by_addr(hid_t, haddr_t);
typedef hid_t t_H5Oopen_by_token(hid_t, H5O_token_t);
typedef herr_t t_H5Oclose(hid_t);
typedef int t_H5Idec_ref(hid_t);
typedef int t_H5Iget_type(hid_t);
typedef ssize_t t_H5Iget_name(hid_t, char *, size_t);
typedef htri_t t_H5Iis_valid(hid_t);
typedef herr_t t_H5Sclose(hid_t);
typedef herr_t t_H5Tclose(hid_t);
typedef herr_t t_H5Pclose(hid_t);
typedef int t_H5Sget_simple_extent_ndims(hid_t);
typedef int t_H5Sget_simple_extent_dims(hid_t, hsize_t *, hsize_t *);
typedef hssize_t t_H5Sget_simple_extent_npoints(hid_t);
typedef hssize_t t_H5Sget_select_npoints(hid_t);
typedef int t_H5Sget_select_type(hid_t);
typedef htri_t t_H5Sis_regular_hyperslab(hid_t);
typedef herr_t t_H5Sget_regular_hyperslab(hid_t, hsize_t *, hsize_t *, hsize_t *, hsize_t *);
typedef size_t t_H5Tget_size(hid_t);
typedef int t_H5Pget_layout(hid_t);
typedef int t_H5Pget_chunk(hid_t, int, hsize_t *);
typedef int t_H5Pget_nfilters(hid_t);
typedef int t_H5Pget_filter2(hid_t, unsigned, unsigned *, size_t *, unsigned *, size_t, char *,
                             unsigned *);
typedef herr_t t_H5Pget_chunk_cache(hid_t, size_t *, size_t *, double *);
typedef hid_t t_H5Pget_driver(hid_t);
typedef herr_t t_H5Pget_alignment(hid_t, hsize_t *, hsize_t *);
typedef herr_t t_H5Pget_sieve_buf_size(hid_t, size_t *);
typedef herr_t t_H5Pget_meta_block_size(hid_t, hsize_t *);
typedef herr_t t_H5Pget_all_coll_metadata_ops(hid_t, void *); /* hbool_t * */
typedef herr_t t_H5Pget_coll_metadata_write(hid_t, void *);
typedef herr_t t_H5Pget_page_buffer_size(hid_t, size_t *, unsigned *, unsigned *);
typedef herr_t t_H5Pget_libver_bounds(hid_t, int *, int *);
typedef herr_t t_H5Pget_file_space_strategy(hid_t, int *, void *, hsize_t *);
typedef herr_t t_H5Pget_file_space_page_size(hid_t, hsize_t *);
typedef herr_t t_H5Pget_dxpl_mpio(hid_t, int *);
typedef herr_t t_H5Pget_mpio_actual_io_mode(hid_t, int *);
typedef herr_t t_H5Pget_mpio_no_collective_cause(hid_t, uint32_t *, uint32_t *);
/* MPI_Comm and MPI_Info are a pointer (Open MPI) or an int (MPICH): both
 * travel in one integer register, so they are passed through untouched. */
typedef herr_t t_H5Pset_fapl_mpio(hid_t, uintptr_t, uintptr_t);
typedef herr_t t_H5Pset_mdc_config(hid_t, void *);
/* For settings: copies of the program's lists, the setters, and the
 * automatic error printing we silence around them.  hbool_t is one byte
 * (bool) in every version we support. */
typedef hid_t t_H5Pcopy(hid_t);
typedef hid_t t_H5Pcreate(hid_t);
typedef herr_t t_H5Pset_alignment(hid_t, hsize_t, hsize_t);
typedef herr_t t_H5Pset_sieve_buf_size(hid_t, size_t);
typedef herr_t t_H5Pset_meta_block_size(hid_t, hsize_t);
typedef herr_t t_H5Pset_all_coll_metadata_ops(hid_t, _Bool);
typedef herr_t t_H5Pset_coll_metadata_write(hid_t, _Bool);
typedef herr_t t_H5Pset_page_buffer_size(hid_t, size_t, unsigned, unsigned);
typedef herr_t t_H5Pset_file_space_strategy(hid_t, int, _Bool, hsize_t);
typedef herr_t t_H5Pset_chunk(hid_t, int, const hsize_t *);
typedef herr_t t_H5Pset_fill_time(hid_t, int);
typedef herr_t t_H5Pset_dxpl_mpio(hid_t, int);
typedef herr_t t_H5E_auto2(hid_t, void *);
typedef herr_t t_H5Eget_auto2(hid_t, t_H5E_auto2 **, void **);
typedef herr_t t_H5Eset_auto2(hid_t, t_H5E_auto2 *, void *);
typedef struct {
    hid_t cls_id, maj_num, min_num;
    unsigned line;
    const char *func_name, *file_name, *desc;
} H5E_error2_t;
typedef herr_t t_H5E_walk2(unsigned, const H5E_error2_t *, void *);
typedef herr_t t_H5Ewalk2(hid_t, int, t_H5E_walk2 *, void *);

#define H5_FUNCS(X)                                                                     \
    X(H5open) X(H5get_libversion)                                                       \
    X(H5Fcreate) X(H5Fopen) X(H5Fclose) X(H5Fflush) X(H5Fget_name)                     \
    X(H5Fget_access_plist) X(H5Fget_create_plist)                                       \
    X(H5Dcreate1) X(H5Dcreate2) X(H5Dcreate_anon) X(H5Dopen1) X(H5Dopen2) X(H5Dclose)   \
    X(H5Dflush) X(H5Dread) X(H5Dwrite) X(H5Dread_multi) X(H5Dwrite_multi)               \
    X(H5Dget_space) X(H5Dget_type) X(H5Dget_create_plist) X(H5Dget_access_plist)        \
    X(H5Oopen) X(H5Oopen_by_idx) X(H5Oopen_by_addr) X(H5Oopen_by_token) X(H5Oclose)     \
    X(H5Idec_ref) X(H5Iget_type) X(H5Iget_name) X(H5Iis_valid)                          \
    X(H5Sclose) X(H5Tclose) X(H5Pclose)                                                 \
    X(H5Sget_simple_extent_ndims) X(H5Sget_simple_extent_dims)                          \
    X(H5Sget_simple_extent_npoints) X(H5Sget_select_npoints) X(H5Sget_select_type)      \
    X(H5Sis_regular_hyperslab) X(H5Sget_regular_hyperslab) X(H5Tget_size)               \
    X(H5Pget_layout) X(H5Pget_chunk) X(H5Pget_nfilters) X(H5Pget_filter2)               \
    X(H5Pget_chunk_cache) X(H5Pget_driver) X(H5Pget_alignment) X(H5Pget_sieve_buf_size) \
    X(H5Pget_meta_block_size) X(H5Pget_all_coll_metadata_ops)                           \
    X(H5Pget_coll_metadata_write) X(H5Pget_page_buffer_size) X(H5Pget_libver_bounds)    \
    X(H5Pget_file_space_strategy) X(H5Pget_file_space_page_size) X(H5Pget_dxpl_mpio)    \
    X(H5Pget_mpio_actual_io_mode) X(H5Pget_mpio_no_collective_cause)                    \
    X(H5Pset_fapl_mpio) X(H5Pset_mdc_config)                                            \
    X(H5Pcopy) X(H5Pcreate) X(H5Pset_alignment) X(H5Pset_sieve_buf_size)                \
    X(H5Pset_meta_block_size) X(H5Pset_all_coll_metadata_ops)                           \
    X(H5Pset_coll_metadata_write) X(H5Pset_page_buffer_size)                            \
    X(H5Pset_file_space_strategy) X(H5Pset_chunk) X(H5Pset_fill_time)                   \
    X(H5Pset_dxpl_mpio) X(H5Eget_auto2) X(H5Eset_auto2) X(H5Ewalk2)

enum h5_func {
#define IOP_X(name) F_##name,
    H5_FUNCS(IOP_X)
#undef IOP_X
    H5_NFUNCS
};

static const char *const h5_names[] = {
#define IOP_X(name) #name,
    H5_FUNCS(IOP_X)
#undef IOP_X
};

/* Virtual file drivers we can name: 1.10 exports H5FD_<name>_init(), which
 * returns the driver's id; 1.14 and 2.0 export H5FD_<NAME>_id_g. */
static const char *const drivers[] = {"mpio", "sec2", "core", "stdio", "family", "log",
                                      "multi", "direct", "subfiling", "splitter", "mirror",
                                      "ros3", "hdfs", "onion"};
#define NDRIVERS (sizeof drivers / sizeof drivers[0])
/* Calling H5FD_<name>_init() registers the driver when it was not yet: we
 * do so only for the first ones, the drivers every build has. */
#define NDRIVERS_INIT 7

/* ------------------------------------------------------------------ */
/* One loaded copy of the HDF5 library and its functions. */

typedef struct h5lib {
    uintptr_t base;      /* load address; 0 for the global fallback */
    void *handle;        /* dlopen handle; NULL: resolve through iop_resolve */
    void *fn[H5_NFUNCS];
    unsigned char tried[H5_NFUNCS];
    void *drv_var[NDRIVERS];  /* hid_t *H5FD_<NAME>_id_g */
    void *drv_init[NDRIVERS]; /* hid_t H5FD_<name>_init(void) */
    int drivers_tried;
    char version[32];
} h5lib;

#define MAX_LIBS 8
#define MAX_CALLERS 256
static h5lib libs[MAX_LIBS];
static int nlibs;
static h5lib global_lib; /* when the caller's scope cannot tell */
static struct {
    uintptr_t lo, hi;
    h5lib *lib;
} callers[MAX_CALLERS];
static int ncallers;
static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t self_base;

static int in_self(void *addr) {
    Dl_info di;
    if (!self_base) {
        if (dladdr((void *)&in_self, &di)) self_base = (uintptr_t)di.dli_fbase;
    }
    return addr && dladdr(addr, &di) && (uintptr_t)di.dli_fbase == self_base;
}

static void *h5_sym(h5lib *L, const char *name) {
    void *p = L->handle ? dlsym(L->handle, name) : iop_resolve(name);
    return in_self(p) ? NULL : p;
}

static void *h5fn(h5lib *L, int i) {
    if (IOP_LIKELY(__atomic_load_n(&L->tried[i], __ATOMIC_ACQUIRE))) return L->fn[i];
    void *p = h5_sym(L, h5_names[i]);
    L->fn[i] = p;
    __atomic_store_n(&L->tried[i], 1, __ATOMIC_RELEASE);
    return p;
}

/* The typed real function ``name`` of library ``L`` (NULL when absent). */
#define H5F_(L, name) ((t_##name *)h5fn((L), F_##name))

/* The loaded object that contains an address: its extent and file name. */
struct find_obj {
    uintptr_t addr, lo, hi;
    int found;
    char name[4096];
};

static int find_obj_cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct find_obj *f = data;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    int hit = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t s = info->dlpi_addr + ph->p_vaddr, e = s + ph->p_memsz;
        if (s < lo) lo = s;
        if (e > hi) hi = e;
        if (f->addr >= s && f->addr < e) hit = 1;
    }
    if (!hit) return 0;
    f->lo = lo;
    f->hi = hi;
    f->found = 1;
    snprintf(f->name, sizeof f->name, "%s", info->dlpi_name ? info->dlpi_name : "");
    return 1;
}

/* Called with lib_lock held: the HDF5 copy that ``obj`` (a file name, "" for
 * the main program) binds its HDF5 calls to. */
static h5lib *lib_for_object(const char *obj) {
    void *addr = NULL;
    if (obj[0]) {
        /* The object's own lookup scope: itself and its dependencies, which
         * holds a privately loaded libhdf5 and never our preloaded library.
         * The handle stays open: the object cannot be unloaded under us. */
        void *h = dlopen(obj, RTLD_LAZY | RTLD_NOLOAD);
        if (h) addr = dlsym(h, "H5open");
    }
    if (!addr || in_self(addr)) addr = dlsym(RTLD_NEXT, "H5open");
    if (!addr || in_self(addr)) addr = iop_resolve("H5open");
    Dl_info di;
    if (!addr || in_self(addr) || !dladdr(addr, &di) || !di.dli_fname) return &global_lib;
    for (int i = 0; i < nlibs; i++)
        if (libs[i].base == (uintptr_t)di.dli_fbase) return &libs[i];
    if (nlibs == MAX_LIBS) return &global_lib;
    void *h = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!h) return &global_lib;
    h5lib *L = &libs[nlibs];
    L->base = (uintptr_t)di.dli_fbase;
    L->handle = h;
    __atomic_store_n(&nlibs, nlibs + 1, __ATOMIC_RELEASE);
    return L;
}

/* The HDF5 copy serving a call that returns to ``ra``. */
static h5lib *lib_for(uintptr_t ra) {
    int n = __atomic_load_n(&ncallers, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (ra >= callers[i].lo && ra < callers[i].hi) return callers[i].lib;
    int saved = errno;
    iop_enter(); /* dlopen may read files: not the program's I/O */
    pthread_mutex_lock(&lib_lock);
    h5lib *L = NULL;
    for (int i = 0; i < ncallers && !L; i++)
        if (ra >= callers[i].lo && ra < callers[i].hi) L = callers[i].lib;
    if (!L) {
        struct find_obj f;
        memset(&f, 0, sizeof f);
        f.addr = ra;
        dl_iterate_phdr(find_obj_cb, &f);
        L = lib_for_object(f.found ? f.name : "");
        if (f.found && ncallers < MAX_CALLERS) {
            callers[ncallers].lo = f.lo;
            callers[ncallers].hi = f.hi;
            callers[ncallers].lib = L;
            __atomic_store_n(&ncallers, ncallers + 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&lib_lock);
    iop_leave();
    errno = saved;
    return L;
}

#define CALLER_LIB() lib_for((uintptr_t)__builtin_return_address(0))

/* Ids are numbered by each copy of the library on its own, so the first
 * dataset of two copies has the same hid_t: our tables key an id together
 * with its copy (ids keep their serial number in the low bits, far below
 * bit 44, and their type in bits 56 and up). */
static uintptr_t hkey(h5lib *L, hid_t id) {
    uintptr_t copy = L == &global_lib ? 0 : (uintptr_t)(L - libs + 1);
    return (uintptr_t)id ^ (copy << 44);
}

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
static void h5note(int dataset, uint64_t id, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void h5note(int dataset, uint64_t id, const char *key, const char *fmt, ...) {
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
static long fapl_overflows; /* lists forgotten: the table was full */

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

IOP_EXPORT herr_t H5Pset_fapl_mpio(hid_t fapl, uintptr_t comm, uintptr_t info) {
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

IOP_EXPORT herr_t H5Pset_mdc_config(hid_t fapl, void *config) {
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

/* ------------------------------------------------------------------ */
/* Helpers. */

/* The absolute form of a path, made the way iop_register_path makes it, so
 * that "<file>:<dataset>" starts with the file's registered name. */
static void absolute(const char *path, char *out, size_t n) {
    if (path[0] == '/' || path[0] == '<') {
        snprintf(out, n, "%s", path);
        return;
    }
    char cwd[2048];
    iop_enter();
    char *got = getcwd(cwd, sizeof cwd);
    iop_leave();
    size_t k = 0;
    if (got) {
        size_t lc = strlen(cwd);
        if (lc + 1 < n) {
            memcpy(out, cwd, lc);
            out[lc] = '/';
            k = lc + 1;
        }
    }
    size_t lp = strlen(path);
    if (k + lp >= n) lp = n - k - 1;
    memcpy(out + k, path, lp);
    out[k + lp] = 0;
}

/* Closing ids of our own; the error is not the program's business. */
static void close_space(h5lib *L, hid_t id) {
    t_H5Sclose *f = H5F_(L, H5Sclose);
    if (f && id > 0) f(id);
}
static void close_type(h5lib *L, hid_t id) {
    t_H5Tclose *f = H5F_(L, H5Tclose);
    if (f && id > 0) f(id);
}
static void close_plist(h5lib *L, hid_t id) {
    t_H5Pclose *f = H5F_(L, H5Pclose);
    if (f && id > 0) f(id);
}

static const char *library_version(h5lib *L) {
    if (!L->version[0]) {
        unsigned maj = 0, min = 0, rel = 0;
        t_H5get_libversion *f = H5F_(L, H5get_libversion);
        if (f && f(&maj, &min, &rel) >= 0) snprintf(L->version, sizeof L->version, "%u.%u.%u", maj, min, rel);
        else snprintf(L->version, sizeof L->version, "unknown");
    }
    return L->version;
}

/* The name of the driver with id ``drv`` ("" when we cannot tell). */
static const char *driver_name(h5lib *L, hid_t drv) {
    if (!L->drivers_tried) {
        for (size_t k = 0; k < NDRIVERS; k++) {
            char name[64], upper[32];
            size_t j;
            for (j = 0; drivers[k][j] && j < sizeof upper - 1; j++)
                upper[j] = (char)(drivers[k][j] - ('a' <= drivers[k][j] && drivers[k][j] <= 'z' ? 32 : 0));
            upper[j] = 0;
            snprintf(name, sizeof name, "H5FD_%s_id_g", upper);
            L->drv_var[k] = h5_sym(L, name);
            snprintf(name, sizeof name, "H5FD_%s_init", drivers[k]);
            L->drv_init[k] = L->drv_var[k] || k >= NDRIVERS_INIT ? NULL : h5_sym(L, name);
        }
        L->drivers_tried = 1;
    }
    if (drv < 0) return "";
    for (size_t k = 0; k < NDRIVERS; k++) {
        hid_t id = -1;
        if (L->drv_var[k]) id = *(hid_t *)L->drv_var[k];
        else if (L->drv_init[k]) id = ((hid_t(*)(void))L->drv_init[k])();
        if (id >= 0 && id == drv) return drivers[k];
    }
    return "";
}

static const char *bool_str(uint64_t b) { return b ? "1" : "0"; }

/* ------------------------------------------------------------------ */
/* Settings: the [hdf5] table, applied to copies of the program's property
 * lists (file access and creation at H5Fcreate/H5Fopen, dataset creation
 * at H5Dcreate, transfer at H5Dwrite/H5Dread); the program's own lists
 * are never changed.  What became of each setting is kept in a small list
 * while the call runs and recorded once the program's call succeeded. */

typedef struct {
    int n;
    struct {
        int id, outcome;
        char detail[160];
    } e[16];
} h5_outcomes;

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
static void pend_rejected(h5_outcomes *out, const char *call, const char *why) {
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

/* HDF5 prints its error stack when a call fails (H5Eset_auto): while we
 * try a setting, nothing is printed, and the program's choice is put back. */
typedef struct {
    t_H5E_auto2 *func;
    void *data;
    int saved;
} h5_quiet;

static void quiet_on(h5lib *L, h5_quiet *q) {
    t_H5Eget_auto2 *g = H5F_(L, H5Eget_auto2);
    t_H5Eset_auto2 *s = H5F_(L, H5Eset_auto2);
    q->saved = g && s && g(0, &q->func, &q->data) >= 0 && s(0, NULL, NULL) >= 0;
}

static void quiet_off(h5lib *L, h5_quiet *q) {
    t_H5Eset_auto2 *s = H5F_(L, H5Eset_auto2);
    if (q->saved && s) s(0, q->func, q->data);
}

static herr_t innermost_error(unsigned n, const H5E_error2_t *e, void *data) {
    if (n == 0 && e && e->desc) snprintf(data, 128, "%s", e->desc);
    return 0;
}

/* The most specific message on the default error stack. */
static void h5_error(h5lib *L, char *why) {
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

static int file_setting_given(void) {
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
static hid_t dcpl_list(h5lib *L, hid_t space, hid_t dcpl_in, h5_outcomes *out) {
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
static void record_dataset(h5lib *L, hid_t dset, const h5_outcomes *out) {
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

/* ------------------------------------------------------------------ */
/* Files. */

/* Called inside iop_enter(): what the file's access and creation property
 * lists say about tuning. */
static void file_properties(h5lib *L, hid_t fid, uint64_t id, iop_stats *st, hid_t fapl_in) {
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

/* H5Fcreate and H5Fopen with the [hdf5] file settings: the call is made
 * with copies of the program's lists; when it fails with them, once more
 * as the program asked (an open that failed only with the page buffer is
 * retried without it: the file is not paged). */
static hid_t file_call(h5lib *L, int create, const char *name, unsigned flags, hid_t fcpl,
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

IOP_EXPORT hid_t H5Fcreate(const char *name, unsigned flags, hid_t fcpl, hid_t fapl) {
    h5lib *L = CALLER_LIB();
    t_H5Fcreate *f = H5F_(L, H5Fcreate);
    if (!f) return -1;
    if (!iop_active()) return f(name, flags, fcpl, fapl);
    double t1 = iop_now();
    hid_t r = IOP_UNLIKELY(iop_settings_on) && file_setting_given()
                  ? file_call(L, 1, name, flags, fcpl, fapl, &t1)
                  : f(name, flags, fcpl, fapl);
    int e = errno;
    double t2 = iop_now();
    if (r >= 0 && name) file_opened(L, r, name, fapl, 1, t1, t2);
    errno = e;
    return r;
}

IOP_EXPORT hid_t H5Fopen(const char *name, unsigned flags, hid_t fapl) {
    h5lib *L = CALLER_LIB();
    t_H5Fopen *f = H5F_(L, H5Fopen);
    if (!f) return -1;
    if (!iop_active()) return f(name, flags, fapl);
    double t1 = iop_now();
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
    double t1 = iop_now();                                                           \
    herr_t r = f(id);                                                                \
    int e = errno;                                                                   \
    double t2 = iop_now();                                                           \
    if (r >= 0 && !still_valid(L, id)) iop_handle_clear(layer, hkey(L, id));         \
    iop_meta_op(st, IOP_OP_CLOSE, -1, t1, t2, r < 0 ? IOP_FLAG_ERROR : 0);           \
    errno = e;                                                                       \
    return r

IOP_EXPORT herr_t H5Fclose(hid_t fid) {
    h5lib *L = CALLER_LIB();
    t_H5Fclose *f = H5F_(L, H5Fclose);
    if (!f) return -1;
    CLOSE_BODY(L, f, IOP_LAYER_H5F, fid);
}

IOP_EXPORT herr_t H5Fflush(hid_t obj, int scope) {
    h5lib *L = CALLER_LIB();
    t_H5Fflush *f = H5F_(L, H5Fflush);
    if (!f) return -1;
    if (!iop_active()) return f(obj, scope);
    iop_behind_fence_all(); /* flushed means handed to the system, pending writes too */
    double t1 = iop_now();
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

static void dims_str(const hsize_t *d, int n, char *out, size_t size) {
    size_t k = 0;
    out[0] = 0;
    for (int i = 0; i < n && k < size; i++)
        k += (size_t)snprintf(out + k, size - k, "%s%llu", i ? "x" : "", d[i]);
}

/* Called inside iop_enter(): shape, type, layout, chunks and filters. */
static void dataset_properties(h5lib *L, hid_t dset, uint64_t id, iop_stats *st) {
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

/* Register a dataset id: "<file path>:<dataset path>".  ``mode`` 0: found
 * at its first read or write (opened some way we do not wrap), 1: opened,
 * 2: created; ``deprecated``: by H5Dopen1 or H5Dcreate1 (Darshan's
 * USE_DEPRECATED says how the last open was made). */
static iop_stats *dataset_opened(h5lib *L, hid_t dset, int mode, int deprecated, double t1,
                                 double t2) {
    char file[4096], obj[2048], abs[4096], full[6200];
    t_H5Fget_name *gf = H5F_(L, H5Fget_name);
    t_H5Iget_name *gi = H5F_(L, H5Iget_name);
    iop_enter();
    ssize_t n = gf ? gf(dset, file, sizeof file) : -1;
    ssize_t m = gi ? gi(dset, obj, sizeof obj) : -1;
    iop_leave();
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
    double t1 = iop_now();                                                \
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
    double t1 = iop_now();                                                   \
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

IOP_EXPORT hid_t H5Dcreate2(hid_t loc, const char *name, hid_t type, hid_t space, hid_t lcpl,
                            hid_t dcpl, hid_t dapl) {
    h5lib *L = CALLER_LIB();
    t_H5Dcreate2 *f = H5F_(L, H5Dcreate2);
    if (!f) return -1;
    CREATE_BODY(space, dcpl, 0, f(loc, name, type, space, lcpl, use, dapl));
}

IOP_EXPORT hid_t H5Dcreate1(hid_t loc, const char *name, hid_t type, hid_t space, hid_t dcpl) {
    h5lib *L = CALLER_LIB();
    t_H5Dcreate1 *f = H5F_(L, H5Dcreate1);
    if (!f) return -1;
    CREATE_BODY(space, dcpl, 1, f(loc, name, type, space, use));
}

IOP_EXPORT hid_t H5Dcreate_anon(hid_t loc, hid_t type, hid_t space, hid_t dcpl, hid_t dapl) {
    h5lib *L = CALLER_LIB();
    t_H5Dcreate_anon *f = H5F_(L, H5Dcreate_anon);
    if (!f) return -1;
    CREATE_BODY(space, dcpl, 0, f(loc, type, space, use, dapl));
}

IOP_EXPORT hid_t H5Dopen2(hid_t loc, const char *name, hid_t dapl) {
    h5lib *L = CALLER_LIB();
    t_H5Dopen2 *f = H5F_(L, H5Dopen2);
    if (!f) return -1;
    OPEN_BODY(f(loc, name, dapl), dataset_opened(L, r, 1, 0, t1, t2));
}

IOP_EXPORT hid_t H5Dopen1(hid_t loc, const char *name) {
    h5lib *L = CALLER_LIB();
    t_H5Dopen1 *f = H5F_(L, H5Dopen1);
    if (!f) return -1;
    OPEN_BODY(f(loc, name), dataset_opened(L, r, 1, 1, t1, t2));
}

/* h5py opens existing datasets with H5Oopen (f["name"]). */
IOP_EXPORT hid_t H5Oopen(hid_t loc, const char *name, hid_t lapl) {
    h5lib *L = CALLER_LIB();
    t_H5Oopen *f = H5F_(L, H5Oopen);
    if (!f) return -1;
    OPEN_BODY(f(loc, name, lapl), object_opened(L, r, t1, t2));
}

IOP_EXPORT hid_t H5Oopen_by_idx(hid_t loc, const char *group, int index, int order, hsize_t n,
                                hid_t lapl) {
    h5lib *L = CALLER_LIB();
    t_H5Oopen_by_idx *f = H5F_(L, H5Oopen_by_idx);
    if (!f) return -1;
    OPEN_BODY(f(loc, group, index, order, n, lapl), object_opened(L, r, t1, t2));
}

IOP_EXPORT hid_t H5Oopen_by_addr(hid_t loc, haddr_t addr) {
    h5lib *L = CALLER_LIB();
    t_H5Oopen_by_addr *f = H5F_(L, H5Oopen_by_addr);
    if (!f) return -1;
    OPEN_BODY(f(loc, addr), object_opened(L, r, t1, t2));
}

/* 1.12 and later; a program whose HDF5 lacks it never calls it. */
IOP_EXPORT hid_t H5Oopen_by_token(hid_t loc, H5O_token_t token) {
    h5lib *L = CALLER_LIB();
    t_H5Oopen_by_token *f = H5F_(L, H5Oopen_by_token);
    if (!f) return -1;
    OPEN_BODY(f(loc, token), object_opened(L, r, t1, t2));
}

IOP_EXPORT herr_t H5Dclose(hid_t dset) {
    h5lib *L = CALLER_LIB();
    t_H5Dclose *f = H5F_(L, H5Dclose);
    if (!f) return -1;
    CLOSE_BODY(L, f, IOP_LAYER_H5D, dset);
}

IOP_EXPORT herr_t H5Oclose(hid_t obj) {
    h5lib *L = CALLER_LIB();
    t_H5Oclose *f = H5F_(L, H5Oclose);
    if (!f) return -1;
    CLOSE_BODY(L, f, IOP_LAYER_H5D, obj);
}

/* h5py releases its ids with H5Idec_ref: the last reference closes. */
IOP_EXPORT int H5Idec_ref(hid_t id) {
    h5lib *L = CALLER_LIB();
    t_H5Idec_ref *f = H5F_(L, H5Idec_ref);
    if (!f) return -1;
    if (!iop_active()) return f(id);
    int layer = IOP_LAYER_H5D;
    iop_open *o = iop_handle(layer, hkey(L, id));
    if (!o) o = iop_handle(layer = IOP_LAYER_H5F, hkey(L, id));
    if (!o) return f(id);
    iop_stats *st = o->st;
    double t1 = iop_now();
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

IOP_EXPORT herr_t H5Dflush(hid_t dset) {
    h5lib *L = CALLER_LIB();
    t_H5Dflush *f = H5F_(L, H5Dflush);
    if (!f) return -1;
    iop_open *o = iop_active() ? iop_handle(IOP_LAYER_H5D, hkey(L, dset)) : NULL;
    if (!o) return f(dset);
    iop_stats *st = o->st;
    double t1 = iop_now();
    herr_t r = f(dset);
    int e = errno;
    iop_meta_op(st, IOP_OP_FLUSH, IOP_C_FLUSHES, t1, iop_now(), r < 0 ? IOP_FLAG_ERROR : 0);
    errno = e;
    return r;
}

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
static void dataset_io(h5lib *L, int op, hid_t dset, hid_t mtype, hid_t mspace, hid_t fspace,
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

/* H5Dwrite or H5Dread (``fn``) with the [hdf5] transfer mode on a copy of
 * the program's transfer list; when the call fails with it, once more as
 * the program asked. */
static herr_t transfer_call(h5lib *L, int op, void *fn, hid_t dset, hid_t mtype, hid_t mspace,
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

/* H5Dwrite and H5Dread: the same wrapper, only the buffer's constness differs. */
#define WRAP_DATASET_IO(name, op, BUFT)                                                 \
    IOP_EXPORT herr_t name(hid_t dset, hid_t mtype, hid_t mspace, hid_t fspace, hid_t dxpl, \
                           BUFT buf) {                                                  \
        h5lib *L = CALLER_LIB();                                                        \
        t_##name *f = H5F_(L, name);                                                    \
        if (!f) return -1;                                                              \
        if (!iop_active()) return f(dset, mtype, mspace, fspace, dxpl, buf);            \
        if (IOP_UNLIKELY(iop_settings_on) && iop_setting(IOP_SET_HDF5_TRANSFER))        \
            return (herr_t)transfer_call(L, op, (void *)f, dset, mtype, mspace, fspace,   \
                                         dxpl, (void *)(uintptr_t)buf);                 \
        double t1 = iop_now();                                                          \
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
    double t1 = iop_now();                                                            \
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

IOP_EXPORT herr_t H5Dwrite_multi(size_t count, hid_t *dset, hid_t *mtype, hid_t *mspace,
                                 hid_t *fspace, hid_t dxpl, const void **buf) {
    h5lib *L = CALLER_LIB();
    t_H5Dwrite_multi *f = H5F_(L, H5Dwrite_multi);
    if (!f) return -1;
    MULTI_BODY(IOP_OP_WRITE, f(count, dset, mtype, mspace, fspace, dxpl, buf));
}

IOP_EXPORT herr_t H5Dread_multi(size_t count, hid_t *dset, hid_t *mtype, hid_t *mspace,
                                hid_t *fspace, hid_t dxpl, void **buf) {
    h5lib *L = CALLER_LIB();
    t_H5Dread_multi *f = H5F_(L, H5Dread_multi);
    if (!f) return -1;
    MULTI_BODY(IOP_OP_READ, f(count, dset, mtype, mspace, fspace, dxpl, buf));
}

/* ------------------------------------------------------------------ */
/* The module, as the core sees it (modules.c). */

static void hdf5_after_fork(void) {
    fapl_lock_word = 0;
    fapl_overflows = 0;
}

static const iop_overflow_count hdf5_overflows[] = {{"fapl", &fapl_overflows}, {NULL, NULL}};
static const char *const hdf5_env[] = {"HDF5_PLUGIN_PATH", NULL};

const iop_module iop_hdf5_module = {
    IOP_MODULE_OF(HDF5),
    .after_fork = hdf5_after_fork,
    .overflows = hdf5_overflows,
    .env = hdf5_env,
};
