/* Python call sites: the line of the program's own Python code that led to a
 * traced call, through h5py, numpy, pandas, mpi4py or the interpreter's own
 * io module, for CPython 3.9 to 3.13.
 *
 * The interpreter lets go of its lock around every blocking system call (a
 * file object's write, numpy's tofile, most of mpi4py), so the calls of its
 * API that need the lock cannot be made where the I/O happens.  The thread's
 * own frames are read in place instead: this thread is inside a call the
 * interpreter made, so its frames stay put, and nothing here allocates,
 * counts references or runs Python code.  The offsets are those of each
 * version's structures (measured on 3.9.18, 3.10.13, 3.11.7, 3.12.1 and
 * 3.13.0); every code object and string is checked to be one by its type
 * before it is read, and another version, a free-threaded build or an
 * interpreter not yet started gives no Python site (the unwinder then
 * names the interpreter's own frame). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

typedef struct PyObj PyObj; /* opaque: only pointers are handled */

typedef struct {
    int minor;                      /* 3.minor */
    int ts_frame, cf_frame;         /* thread state -> (C frame ->) frame; -1: no C frame */
    int fr_code, fr_back, fr_instr; /* -1: frame objects, line from PyFrame_GetLineNumber */
    int co_filename, co_name, co_code;
    int str_data; /* the characters of a compact ASCII string */
} layout;

static const layout layouts[] = {
    {9, 24, -1, 32, 24, -1, 104, 112, 0, 48},  /* PyFrameObject: f_back, f_code */
    {10, 24, -1, 32, 24, -1, 104, 112, 0, 48},
    {11, 56, 8, 32, 48, 56, 112, 120, 184, 48}, /* cframe, _PyInterpreterFrame */
    {12, 56, 0, 0, 8, 56, 112, 120, 192, 40},
    {13, 72, -1, 0, 8, 56, 112, 120, 200, 40}, /* current_frame, f_executable */
};
enum { OB_TYPE = 8, STR_STATE = 32 }; /* PyObject.ob_type, PyASCIIObject.state */

static const layout *L; /* NULL: no interpreter this module knows */
static struct {
    int (*is_initialized)(void);
    const char *(*this_thread)(void);
    int (*addr2line)(const char *code, int byte_offset);
    int (*frame_line)(const char *frame);
    const char *code_type, *str_type, *none;
} py;

#define AT(p, off) (*(const char *const *)((const char *)(p) + (off)))

static void python_init(void) {
    void *h = RTLD_DEFAULT;
    const char *(*version)(void) = (const char *(*)(void))dlsym(h, "Py_GetVersion");
    if (!version) return; /* not an interpreter */
    const char *v = version();
    int minor = -1;
    if (!strncmp(v, "3.", 2) && sscanf(v + 2, "%d", &minor) != 1) return;
    if (strstr(v, "free-threading")) return; /* another object layout */
#define FIND(field, name) (py.field = (__typeof__(py.field))dlsym(h, name))
    if (!FIND(is_initialized, "Py_IsInitialized") ||
        !FIND(this_thread, "PyGILState_GetThisThreadState") ||
        !FIND(addr2line, "PyCode_Addr2Line") || !FIND(frame_line, "PyFrame_GetLineNumber") ||
        !FIND(code_type, "PyCode_Type") || !FIND(str_type, "PyUnicode_Type"))
        return;
    FIND(none, "_Py_NoneStruct");
#undef FIND
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (layouts[i].minor == minor) L = &layouts[i];
}

/* A compact ASCII string's characters, else NULL. */
static const char *ascii(const char *str) {
    if (!str || AT(str, OB_TYPE) != py.str_type) return NULL;
    unsigned state = *(const unsigned *)(str + STR_STATE);
    return (state & 0x20) && (state & 0x40) ? str + L->str_data : NULL; /* compact, ascii */
}

/* The interpreter's own code and installed packages are not the program. */
static int library_file(const char *f) {
    return !f || !f[0] || f[0] == '<' || iop_installed_path(f);
}

/* The line a frame is at, and where in its code (the key's part). */
static int frame_line(const char *fr, const char *code, long *at) {
    if (L->fr_instr < 0) { /* 3.9, 3.10: a frame object, which knows its line */
        int line = py.frame_line(fr);
        *at = line;
        return line;
    }
    *at = AT(fr, L->fr_instr) - (code + L->co_code);
    return py.addr2line(code, (int)*at);
}

static int python_where(uint64_t *key, char *text, size_t len) {
    if (!L || !py.is_initialized()) return 0;
    const char *ts = py.this_thread();
    const char *fr = ts ? AT(ts, L->ts_frame) : NULL;
    if (fr && L->cf_frame >= 0) fr = AT(fr, L->cf_frame);
    int found = 0;
    size_t used = 0;
    for (int depth = 0; fr && depth < 256; depth++, fr = AT(fr, L->fr_back)) {
        const char *code = AT(fr, L->fr_code);
        if (code && code == py.none) continue; /* 3.13: a C call's entry frame */
        if (!code || AT(code, OB_TYPE) != py.code_type) break; /* not a frame we know */
        const char *file = ascii(AT(code, L->co_filename));
        if (library_file(file)) continue;
        long at;
        int line = frame_line(fr, code, &at);
        if (!found) {
            *key = ((uint64_t)(uintptr_t)code * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)at;
            *key &= ~(3ULL << 62);
        }
        found++;
        if (!text) break;
        const char *name = ascii(AT(code, L->co_name));
        int n = snprintf(text + used, len - used, "%s%s\t%d\t%s", used ? "\n" : "", file, line,
                         name ? name : "?");
        if (n < 0 || (size_t)n >= len - used || found == 3) break;
        used += (size_t)n;
    }
    return found != 0;
}

const iop_module iop_python_module = {
    .name = "python",
    .init = python_init,
    .where = python_where,
};
