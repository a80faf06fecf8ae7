/* HDF5 layer: which loaded copy of the HDF5 library serves a call, the
 * real functions of each copy, and small queries made of it (its version,
 * the name of a driver).  See hdf5.c for why a process may hold several. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hdf5_private.h"

const char *const h5_names[H5_NFUNCS] = {
#define IOP_X(name) #name,
    H5_FUNCS(IOP_X)
#undef IOP_X
};

/* Virtual file drivers we can name: 1.10 exports H5FD_<name>_init(), which
 * returns the driver's id; 1.14 and 2.0 export H5FD_<NAME>_id_g. */
#define H5_DRIVERS(X)                                                                    \
    X(mpio, MPIO) X(sec2, SEC2) X(core, CORE) X(stdio, STDIO) X(family, FAMILY) X(log, LOG) \
    X(multi, MULTI) X(direct, DIRECT) X(subfiling, SUBFILING) X(splitter, SPLITTER)        \
    X(mirror, MIRROR) X(ros3, ROS3) X(hdfs, HDFS) X(onion, ONION)
static const char *const drivers[] = {
#define IOP_X(name, NAME) #name,
    H5_DRIVERS(IOP_X)
#undef IOP_X
};
_Static_assert(sizeof drivers / sizeof drivers[0] == NDRIVERS, "one slot per driver in h5lib");
/* Calling H5FD_<name>_init() registers the driver when it was not yet: we
 * do so only for the first ones, the drivers every build has. */
#define NDRIVERS_INIT 7

#define MAX_LIBS 8
static h5lib libs[MAX_LIBS];
static h5lib global_lib; /* when the caller's scope cannot tell */

#ifdef IOP_LINK
/* Linked into the program (see IOP_WRAPPED in core.h): its HDF5 is the one
 * linked beside us, whose symbols no dlsym can find when it is a static
 * library.  Every name we look up is referenced here: the functions of
 * every HDF5 strongly, which brings them out of libhdf5.a (the layer's
 * member of the archive is linked only into programs that call HDF5); the
 * others weakly (NULL when the program's HDF5 lacks them).  A function we
 * wrap is ``__real_<name>`` (--wrap=<name> makes our reference to the name
 * itself one to the entry point ``__wrap_<name>``); any other is its name. */
#define IOP_X(name) extern char name[], __real_##name[] __attribute__((weak));
H5_FUNCS_ALWAYS(IOP_X)
#undef IOP_X
#define IOP_X(name) extern char name[] __attribute__((weak)), __real_##name[] __attribute__((weak));
H5_FUNCS_SOMETIMES(IOP_X)
#undef IOP_X
#define IOP_X(name, NAME) extern char H5FD_##NAME##_id_g[] __attribute__((weak)), \
                                      H5FD_##name##_init[] __attribute__((weak));
H5_DRIVERS(IOP_X)
#undef IOP_X
/* The names looked up by the [hdf5] settings (hdf5_settings.c). */
#define H5_SETTINGS_NAMES(X) X(H5P_CLS_FILE_CREATE_ID_g) X(H5P_CLS_FILE_ACCESS_ID_g) \
    X(H5P_CLS_DATASET_CREATE_ID_g) X(H5P_CLS_DATASET_XFER_ID_g) X(H5Pget_cache) X(H5Pset_cache)
#define IOP_X(name) extern char name[] __attribute__((weak));
H5_SETTINGS_NAMES(IOP_X)
#undef IOP_X

static const struct { const char *name; void *real, *addr; } linked[] = {
#define IOP_X(name) {#name, __real_##name, name},
    H5_FUNCS(IOP_X)
#undef IOP_X
#define IOP_X(name, NAME) {"H5FD_" #NAME "_id_g", NULL, H5FD_##NAME##_id_g}, \
                          {"H5FD_" #name "_init", NULL, H5FD_##name##_init},
    H5_DRIVERS(IOP_X)
#undef IOP_X
#define IOP_X(name) {#name, NULL, name},
    H5_SETTINGS_NAMES(IOP_X)
#undef IOP_X
};

void *h5_sym(h5lib *L, const char *name) {
    (void)L;
    for (size_t i = 0; i < sizeof linked / sizeof linked[0]; i++)
        if (!strcmp(linked[i].name, name)) return linked[i].real ? linked[i].real : linked[i].addr;
    return NULL;
}

/* One HDF5 serves every call: the program's own (libraries loaded later
 * reach their HDF5 directly, never through __wrap_). */
h5lib *lib_for(uintptr_t ra) {
    (void)ra;
    return &global_lib;
}
#else
#define MAX_CALLERS 256
static int nlibs;
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

void *h5_sym(h5lib *L, const char *name) {
    void *p = L->handle ? dlsym(L->handle, name) : iop_resolve(name);
    return in_self(p) ? NULL : p;
}

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
h5lib *lib_for(uintptr_t ra) {
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
#endif

/* Ids are numbered by each copy of the library on its own, so the first
 * dataset of two copies has the same hid_t: our tables key an id together
 * with its copy (ids keep their serial number in the low bits, far below
 * bit 44, and their type in bits 56 and up). */
uintptr_t hkey(h5lib *L, hid_t id) {
    uintptr_t copy = L == &global_lib ? 0 : (uintptr_t)(L - libs + 1);
    return (uintptr_t)id ^ (copy << 44);
}

/* ------------------------------------------------------------------ */
/* Helpers. */

/* The absolute form of a path, made the way iop_register_path makes it, so
 * that "<file>:<dataset>" starts with the file's registered name. */
void absolute(const char *path, char *out, size_t n) {
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

/* H5Fget_name and H5Iget_name of ``obj``, made inside iop_enter(): the
 * name of its file and its own path, and their lengths (*n, *m: -1 when
 * HDF5 cannot tell; as long as the whole name, even when cut short). */
void object_names(h5lib *L, hid_t obj, char *file, size_t nfile, ssize_t *n, char *path,
                  size_t npath, ssize_t *m) {
    t_H5Fget_name *gf = H5F_(L, H5Fget_name);
    t_H5Iget_name *gi = H5F_(L, H5Iget_name);
    iop_enter();
    *n = gf ? gf(obj, file, nfile) : -1;
    *m = gi ? gi(obj, path, npath) : -1;
    iop_leave();
}

/* Closing ids of our own; the error is not the program's business. */
void close_space(h5lib *L, hid_t id) {
    t_H5Sclose *f = H5F_(L, H5Sclose);
    if (f && id > 0) f(id);
}
void close_type(h5lib *L, hid_t id) {
    t_H5Tclose *f = H5F_(L, H5Tclose);
    if (f && id > 0) f(id);
}
void close_plist(h5lib *L, hid_t id) {
    t_H5Pclose *f = H5F_(L, H5Pclose);
    if (f && id > 0) f(id);
}

const char *library_version(h5lib *L) {
    if (!L->version[0]) {
        unsigned maj = 0, min = 0, rel = 0;
        t_H5get_libversion *f = H5F_(L, H5get_libversion);
        if (f && f(&maj, &min, &rel) >= 0) snprintf(L->version, sizeof L->version, "%u.%u.%u", maj, min, rel);
        else snprintf(L->version, sizeof L->version, "unknown");
    }
    return L->version;
}

/* The name of the driver with id ``drv`` ("" when we cannot tell). */
const char *driver_name(h5lib *L, hid_t drv) {
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
