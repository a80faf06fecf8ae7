/* Call sites: where in the program's own code each traced call was made.
 *
 * A record's site is the innermost frame outside this library and the I/O
 * libraries (libc, MPI, HDF5, the Fortran and C++ runtimes, an interpreter
 * and its extension modules).  Finding it costs a few nanoseconds in the
 * common case and is exact for every call:
 *
 *   - The wrapper's caller is one return address away.  The runtime is built
 *     with frame pointers, so the record function walks its own frames (2-4
 *     loads) until the return address leaves this library.  When that address
 *     is in the program, it is the site.
 *   - A call made inside another traced call (pwrite inside H5Dwrite, write
 *     inside fwrite or an MPI-IO collective) takes the site of that outer
 *     call: the upper layers open a scope for the time of the real call
 *     (iop_scope_begin), and calls nested in it reuse its return address.
 *   - Otherwise (a write inside libstdc++'s ofstream, anything inside an
 *     interpreter) a module's ``where`` hook may name the site (the Python
 *     module gives the Python line), else the stack is unwound with the
 *     DWARF unwinder until the first frame in the program's own code.
 *
 * Sites live in one table (key -> id); each thread keeps a direct-mapped
 * cache of key -> id with its own counts, bytes and time, so the hot path
 * takes no lock and no atomic.  Symbols are never looked up here: the
 * summary lists the modules (path, load address, build id) and each site's
 * frames as (module, offset); the reader maps them to lines.
 */
#define _GNU_SOURCE
#include "core_private.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <unwind.h>

#define MAX_SITES 65536  /* ids 1 .. MAX_SITES - 1; a full table gives 0 */
#define SLOTS (MAX_SITES * 2)
#define MAX_MODULES 1024
#define SITE_FRAMES 4
#define KEY_PY (1ULL << 63)     /* a key from a module's where hook */
#define KEY_UNWOUND (1ULL << 62) /* a program frame found by unwinding */

enum { KIND_PROGRAM = 1, KIND_LIBRARY, KIND_WHERE };

typedef struct {
    uint64_t key;
    uintptr_t frames[SITE_FRAMES];
    uint8_t nframes, kind;
    const char *text; /* KIND_WHERE: what the hook said, in the pool */
    int64_t count, bytes;
    double ticks;
} site;

typedef struct {
    uintptr_t lo, hi, base;
    const char *path;
    unsigned char build_id[32];
    uint8_t build_id_len, library;
} module;

static site *sites;          /* MAX_SITES entries, mapped on first use */
static uint32_t *slots;      /* open addressing: key hash -> id */
static uint32_t nsites = 1;  /* 0 is "unknown" */
static iop_lock_t sites_lock;
static module modules[MAX_MODULES];
static int nmodules;
static long sites_overflow;
static cache *all_caches;
IOP_TLS cache *iop_site_cache;
IOP_TLS uintptr_t iop_scope_fp, iop_scope_ra;
uintptr_t iop_self_lo, iop_self_len;
int iop_sites_on;
#define my_cache iop_site_cache
#define scope_fp iop_scope_fp
#define scope_ra iop_scope_ra
#define sites_on iop_sites_on
#define in_self iop_in_self
#define wrapper_caller iop_wrapper_caller

int iop_scope_enter(void *fp) {
    if (!sites_on) return 0;
    uintptr_t frame, ra = wrapper_caller(fp, &frame);
    if (!ra) return 0;
    /* inside a live scope (deeper on the stack): it stays the outer one */
    if (scope_ra && frame < scope_fp) return 0;
    scope_fp = frame;
    scope_ra = ra;
    return 1;
}

void iop_scope_exit(int *entered) {
    if (*entered) scope_ra = 0;
}

/* ------------------------------------------------------------------ */
/* Modules: every loaded object's address range, path and build id. */

static const char *const library_names[] = {
    "libc.so", "libc-", "ld-linux", "libpthread", "libdl.", "libm.so", "librt.",
    "libstdc++", "libgfortran", "libgcc_s", "libquadmath", "libiopilot",
    "libmpi", "libopen-pal", "libopen-rte", "libpmix", "libprrte", "libucp", "libucs", "libuct",
    "libfabric", "libpsm", "libhwloc", "libevent", "libmunge",
    "libhdf5", "libnetcdf", "libpnetcdf", "libsz", "libaec", "libz.so", "libcurl",
    "libpython", "libffi", NULL};
static const char *const library_dirs[] = {"/openmpi/", "/mpich/", NULL};

/* Installed packages and the interpreter's own library (native modules and
 * Python files alike): not the program. */
int iop_installed_path(const char *path) {
    return strstr(path, "/site-packages/") || strstr(path, "/dist-packages/") ||
           strstr(path, "/lib-dynload/") || strstr(path, "/lib/python") ||
           strstr(path, "/lib64/python");
}

static int is_library(const char *path, int main_program) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    /* an interpreter's executable runs the program, it is not the program */
    if (main_program) return !strncmp(base, "python", 6) || !strncmp(base, "pypy", 4);
    for (const char *const *n = library_names; *n; n++)
        if (!strncmp(base, *n, strlen(*n))) return 1;
    for (const char *const *d = library_dirs; *d; d++)
        if (strstr(path, *d)) return 1;
    return iop_installed_path(path);
}

static char *pool_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = pool_alloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

static void read_build_id(module *m, const struct dl_phdr_info *info) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const char *name = p + sizeof *nh;
            const unsigned char *desc = (const unsigned char *)name + ((nh->n_namesz + 3) & ~3u);
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
                nh->n_descsz <= sizeof m->build_id) {
                memcpy(m->build_id, desc, nh->n_descsz);
                m->build_id_len = (uint8_t)nh->n_descsz;
                return;
            }
            p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
}

static int add_module(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    int *first = arg;
    int main_program = *first;
    *first = 0;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < lo) lo = a;
        if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
    }
    if (lo >= hi) return 0;
    for (int i = nmodules - 1; i >= 0; i--)
        if (modules[i].lo == lo && modules[i].hi == hi) return 0;
    if (nmodules == MAX_MODULES) return 1;
    char exe[4096];
    const char *path = info->dlpi_name;
    if (main_program || !path || !path[0]) {
        ssize_t n = sys_readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
        path = exe;
        main_program = 1;
    }
    module *m = &modules[nmodules];
    memset(m, 0, sizeof *m);
    m->lo = lo;
    m->hi = hi;
    m->base = info->dlpi_addr;
    m->path = pool_strdup(path);
    if (!m->path) return 1;
    m->library = (uint8_t)is_library(path, main_program);
    read_build_id(m, info);
    __atomic_store_n(&nmodules, nmodules + 1, __ATOMIC_RELEASE);
    return 0;
}

/* With sites_lock held: look at the loaded objects again (a new library). */
static void modules_refresh(void) {
    int first = 1;
    iop_enter(); /* dl_iterate_phdr may read files: not ours to trace */
    dl_iterate_phdr(add_module, &first);
    iop_leave();
}

static const module *module_of(uintptr_t a) {
    int n = __atomic_load_n(&nmodules, __ATOMIC_ACQUIRE);
    for (int i = n - 1; i >= 0; i--) /* the newest first: a reused range is the newer */
        if (a - modules[i].lo < modules[i].hi - modules[i].lo) return &modules[i];
    return NULL;
}

/* With sites_lock held. */
static const module *module_of_refreshing(uintptr_t a) {
    const module *m = module_of(a);
    if (!m) {
        modules_refresh();
        m = module_of(a);
    }
    return m;
}

/* ------------------------------------------------------------------ */
/* The table of sites. */

static inline uint32_t slot_of(uint64_t key) {
    return (uint32_t)((key * 0x9e3779b97f4a7c15ULL) >> 40) % SLOTS;
}

static uint32_t site_find(uint64_t key) {
    for (uint32_t h = slot_of(key), n = 0; n < SLOTS; n++, h = (h + 1) % SLOTS) {
        uint32_t id = __atomic_load_n(&slots[h], __ATOMIC_ACQUIRE);
        if (!id) return 0;
        if (sites[id].key == key) return id;
    }
    return 0;
}

/* A new site (with sites_lock held); 0 when the table is full. */
static uint32_t site_add(uint64_t key, int kind, const uintptr_t *frames, int nframes,
                         const char *text) {
    uint32_t id = site_find(key);
    if (id) return id;
    if (nsites == MAX_SITES) {
        iop_overflow(&sites_overflow);
        return 0;
    }
    id = nsites++;
    site *s = &sites[id];
    s->key = key;
    s->kind = (uint8_t)kind;
    s->nframes = (uint8_t)(nframes < SITE_FRAMES ? nframes : SITE_FRAMES);
    for (int i = 0; i < s->nframes; i++) s->frames[i] = frames[i];
    s->text = text ? pool_strdup(text) : NULL;
    uint32_t h = slot_of(key);
    while (slots[h]) h = (h + 1) % SLOTS;
    __atomic_store_n(&slots[h], id, __ATOMIC_RELEASE);
    return id;
}

/* ------------------------------------------------------------------ */
/* Past the libraries: unwinding with the DWARF tables (no frame pointers
 * needed), for a call with no outer scope whose caller is a library. */

typedef struct {
    uintptr_t pc[SITE_FRAMES];
    int n, frames;
} unwound;

static _Unwind_Reason_Code unwind_step(struct _Unwind_Context *ctx, void *arg) {
    unwound *u = arg;
    if (++u->frames > 64) return _URC_END_OF_STACK;
    uintptr_t pc = _Unwind_GetIP(ctx);
    if (!pc) return _URC_END_OF_STACK;
    if (u->n == 0) {
        if (in_self(pc)) return _URC_NO_REASON;
        const module *m = module_of(pc);
        if (!m) {
            iop_lock(&sites_lock);
            m = module_of_refreshing(pc);
            iop_unlock(&sites_lock);
        }
        if (!m || m->library) return _URC_NO_REASON;
    }
    u->pc[u->n++] = pc;
    return u->n == SITE_FRAMES ? _URC_END_OF_STACK : _URC_NO_REASON;
}

/* ------------------------------------------------------------------ */
/* From a return address to a site id. */

static cache *spare_caches; /* of threads that ended: figures given, entries empty */

static cache *thread_cache(void) {
    if (IOP_LIKELY(my_cache != NULL)) return my_cache;
    iop_lock(&sites_lock);
    cache *c = spare_caches;
    if (c) spare_caches = c->next;
    iop_unlock(&sites_lock);
    if (!c) {
        void *p = (void *)syscall(SYS_mmap, NULL, sizeof(cache), PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
        c = p;
    }
    iop_lock(&sites_lock);
    c->next = all_caches;
    all_caches = c;
    iop_unlock(&sites_lock);
    return my_cache = c;
}

/* Adds to a double other threads may add to at once: no lock, so a thread
 * that ends and merges its 4096 entries takes none. */
static void add_double(double *p, double v) {
    double old, sum;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    do sum = old + v;
    while (!__atomic_compare_exchange(p, &old, &sum, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

static void merge(cached *e) {
    if (e->id && e->count) {
        site *s = &sites[e->id];
        __atomic_add_fetch(&s->count, e->count, __ATOMIC_RELAXED);
        __atomic_add_fetch(&s->bytes, e->bytes, __ATOMIC_RELAXED);
        add_double(&s->ticks, e->ticks);
    }
    e->count = e->bytes = 0;
    e->ticks = 0;
}


/* The cache entry of ``key``, filled on a miss by ``make``. */
static cached *lookup(cache *c, uint64_t key, int kind, const uintptr_t *frames, int nframes,
                      const char *text) {
    cached *e = cache_slot(c, key);
    if (IOP_LIKELY(e->key == key)) return e;
    merge(e); /* the entry it replaces gives its figures to the table */
    uint32_t id = site_find(key);
    if (!id) {
        iop_lock(&sites_lock);
        id = site_add(key, kind, frames, nframes, text);
        iop_unlock(&sites_lock);
    }
    e->key = key;
    e->id = id;
    e->kind = (uint8_t)kind;
    return e;
}

/* The entry of a site reached through a library: a module's where hook,
 * else the program frame the unwinder finds (else the library's address). */
static cached *through_library(cache *c, uintptr_t ra) {
    uint64_t key;
    char text[1024];
    for (int i = 0; i < iop_nmodules; i++) {
        const iop_module *m = iop_modules[i];
        if (!m || !m->where || !m->where(&key, NULL, 0)) continue;
        key |= KEY_PY;
        cached *e = cache_slot(c, key);
        if (e->key == key) return e;
        text[0] = 0;
        m->where(&key, text, sizeof text);
        key |= KEY_PY;
        return lookup(c, key, KIND_WHERE, NULL, 0, text);
    }
    unwound u = {{0}, 0, 0};
    iop_enter();
    _Unwind_Backtrace(unwind_step, &u);
    iop_leave();
    if (!u.n) return lookup(c, ra, KIND_LIBRARY, &ra, 1, NULL);
    return lookup(c, u.pc[0] | KEY_UNWOUND, KIND_PROGRAM, u.pc, u.n, NULL);
}

/* A thread ends: its figures go to the table and its cache to the next
 * thread, so that a program starting thread after thread keeps one cache
 * per live thread. */
void sites_thread_exit(void) {
    cache *c = my_cache;
    if (!c) return;
    for (int i = 0; i < IOP_SITE_CACHE; i++) {
        merge(&c->e[i]);
        c->e[i].key = 0;
        c->e[i].id = 0;
    }
    iop_lock(&sites_lock);
    for (cache **p = &all_caches; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    c->next = spare_caches;
    spare_caches = c;
    iop_unlock(&sites_lock);
    my_cache = NULL;
}

/* The slow path of iop_site_here (core_private.h): a return address this
 * thread has not met lately, or one inside a library. */
cached *iop_site_miss(cache *c, uintptr_t ra) {
    if (!c) {
        c = thread_cache();
        if (!c) return NULL;
    }
    cached *e = cache_slot(c, ra);
    if (e->key != ra) {
        const module *m;
        iop_lock(&sites_lock);
        m = module_of_refreshing(ra);
        iop_unlock(&sites_lock);
        e = lookup(c, ra, m && m->library ? KIND_LIBRARY : KIND_PROGRAM, &ra, 1, NULL);
    }
    return e->kind == KIND_LIBRARY ? through_library(c, ra) : e;
}

/* ------------------------------------------------------------------ */
/* Start, fork, summary. */

void sites_start(void) {
    const char *want = getenv("IOPILOT_SITES"); /* "0": records carry no call site */
    if (want && !strcmp(want, "0")) return;
    Dl_info info;
    if (!dladdr((void *)sites_start, &info) || !info.dli_fname) return;
    iop_lock(&sites_lock);
    modules_refresh();
    const module *self = module_of((uintptr_t)sites_start);
    /* linked into the program (a test build), not preloaded: its own
     * frames cannot be told from the program's */
    if (!self || self == &modules[0]) {
        iop_unlock(&sites_lock);
        return;
    }
    iop_self_lo = self->lo;
    iop_self_len = self->hi - self->lo;
    void *p = (void *)syscall(SYS_mmap, NULL, MAX_SITES * sizeof(site) + SLOTS * sizeof(uint32_t),
                              PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                              -1, 0);
    if (p != MAP_FAILED) {
        sites = p;
        slots = (uint32_t *)(sites + MAX_SITES);
        sites_on = 1;
    }
    iop_unlock(&sites_lock);
}

/* The child keeps the table (ids stay valid) and starts its figures at 0. */
void sites_after_fork(void) {
    sites_lock = 0;
    scope_ra = 0;
    if (!sites_on) return;
    for (uint32_t i = 1; i < nsites; i++) {
        sites[i].count = sites[i].bytes = 0;
        sites[i].ticks = 0;
    }
    all_caches = my_cache;
    spare_caches = NULL; /* the parent's, mapped here too: left alone */
    if (my_cache) {
        my_cache->next = NULL;
        for (int i = 0; i < IOP_SITE_CACHE; i++) {
            my_cache->e[i].count = my_cache->e[i].bytes = 0;
            my_cache->e[i].ticks = 0;
        }
    }
}

long sites_overflows(void) { return sites_overflow; }

/* Every module and every site with calls, for the summary (with
 * iop_core_lock held): the figures of the threads' caches added in. */
void sites_each(void (*module_fn)(const iop_module_info *, void *),
                void (*site_fn)(const iop_site_info *, void *), void *arg) {
    if (!sites_on) return;
    iop_lock(&sites_lock);
    static int64_t count[MAX_SITES], bytes[MAX_SITES];
    static double ticks[MAX_SITES];
    for (uint32_t i = 0; site_fn && i < nsites; i++) {
        count[i] = __atomic_load_n(&sites[i].count, __ATOMIC_RELAXED);
        bytes[i] = __atomic_load_n(&sites[i].bytes, __ATOMIC_RELAXED);
        __atomic_load(&sites[i].ticks, &ticks[i], __ATOMIC_RELAXED);
    }
    /* The figures still in the threads' caches: only when sites are asked for. */
    for (cache *c = site_fn ? all_caches : NULL; c; c = c->next)
        for (int i = 0; i < IOP_SITE_CACHE; i++) {
            const cached *e = &c->e[i];
            if (!e->id) continue;
            count[e->id] += __atomic_load_n(&e->count, __ATOMIC_RELAXED);
            bytes[e->id] += __atomic_load_n(&e->bytes, __ATOMIC_RELAXED);
            ticks[e->id] += e->ticks;
        }
    int n = module_fn ? __atomic_load_n(&nmodules, __ATOMIC_ACQUIRE) : 0;
    for (int i = 0; i < n; i++) {
        const module *m = &modules[i];
        iop_module_info mi = {m->path, m->base, m->build_id, m->build_id_len, m->library};
        module_fn(&mi, arg);
    }
    for (uint32_t i = 1; site_fn && i < nsites; i++) {
        const site *s = &sites[i];
        if (!count[i]) continue;
        iop_site_info si = {i, count[i], bytes[i], ticks[i], s->kind == KIND_LIBRARY,
                            s->kind == KIND_WHERE ? (s->text ? s->text : "") : NULL, 0, {0}, {0}};
        for (int k = 0; k < s->nframes; k++) {
            const module *m = module_of(s->frames[k]);
            si.module[k] = m ? (int)(m - modules) : -1;
            si.offset[k] = m ? s->frames[k] - m->base : s->frames[k];
            si.nframes = k + 1;
        }
        site_fn(&si, arg);
    }
    iop_unlock(&sites_lock);
}
