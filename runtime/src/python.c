/* Python call sites: the line of the program's own Python code that led to a
 * traced call, through h5py, numpy, pandas, mpi4py or the interpreter's own
 * io module.  Uses CPython's public C API (3.9 and later), looked up in the
 * process when it starts; a program without an interpreter never calls in.
 *
 * Only a thread that holds the interpreter lock asks, so the frames it reads
 * are its own and stay put.  The innermost frame whose file is not the
 * interpreter's library or an installed package is the site; its key is
 * the code object and the instruction (3.11 and later) or the line.  Code
 * objects once classified are kept alive (a reference each), so their
 * addresses are never reused for other code. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

typedef struct PyObj PyObj; /* opaque: only pointers are handled */

static struct {
    int (*is_initialized)(void);
    int (*gil_check)(void);
    PyObj *(*get_frame)(void);
    PyObj *(*frame_code)(PyObj *);
    PyObj *(*frame_back)(PyObj *);
    int (*frame_line)(PyObj *);
    int (*frame_lasti)(PyObj *); /* 3.11+, else NULL */
    void (*incref)(PyObj *);
    void (*decref)(PyObj *);
    PyObj *(*getattr)(PyObj *, const char *);
    const char *(*utf8)(PyObj *);
    void (*err_fetch)(PyObj **, PyObj **, PyObj **);
    void (*err_restore)(PyObj *, PyObj *, PyObj *);
    PyObj *(*this_thread)(void);
    int (*addr2line)(PyObj *, int);
    const char *(*version)(void);
} py;
static int py_found;
/* Python 3.11's frames, read directly: the interpreter lets go of its lock
 * around every blocking system call (a file object's write, numpy's tofile),
 * so the public calls that need it cannot be made there.  The offsets are
 * 3.11's (``layout`` 1 when the interpreter is 3.11); every code object and
 * string read is first checked to be one by its type. */
static int layout;
static const char *code_type, *str_type;
enum {
    OB_TYPE = 8,         /* PyObject.ob_type */
    TS_CFRAME = 56,      /* PyThreadState.cframe */
    CF_FRAME = 8,        /* _PyCFrame.current_frame */
    FR_CODE = 32,        /* _PyInterpreterFrame.f_code */
    FR_PREVIOUS = 48,    /* .previous */
    FR_INSTR = 56,       /* .prev_instr */
    CO_FILENAME = 112,   /* PyCodeObject.co_filename */
    CO_NAME = 120,       /* .co_name */
    CO_CODE = 184,       /* .co_code_adaptive */
    STR_STATE = 32,      /* PyASCIIObject.state */
    STR_DATA = 48,       /* the characters of a compact ASCII string */
};
#define AT(p, off) (*(char *const *)((const char *)(p) + (off)))

/* Code objects seen, and whether each is the program's own. */
#define CODES 8192
static struct {
    PyObj *code;
    int library;
} codes[CODES];
static iop_lock_t codes_lock;
static long codes_overflow;

static void python_init(void) {
    void *h = RTLD_DEFAULT;
#define FIND(field, name) (py.field = (__typeof__(py.field))dlsym(h, name))
    if (!FIND(is_initialized, "Py_IsInitialized") || !FIND(gil_check, "PyGILState_Check") ||
        !FIND(get_frame, "PyEval_GetFrame") || !FIND(frame_code, "PyFrame_GetCode") ||
        !FIND(frame_back, "PyFrame_GetBack") || !FIND(frame_line, "PyFrame_GetLineNumber") ||
        !FIND(incref, "Py_IncRef") || !FIND(decref, "Py_DecRef") ||
        !FIND(getattr, "PyObject_GetAttrString") || !FIND(utf8, "PyUnicode_AsUTF8") ||
        !FIND(err_fetch, "PyErr_Fetch") || !FIND(err_restore, "PyErr_Restore"))
        return;
    FIND(frame_lasti, "PyFrame_GetLasti");
    FIND(this_thread, "PyGILState_GetThisThreadState");
    FIND(addr2line, "PyCode_Addr2Line");
    FIND(version, "Py_GetVersion");
#undef FIND
    const char *v = py.version ? py.version() : "";
    code_type = dlsym(h, "PyCode_Type");
    str_type = dlsym(h, "PyUnicode_Type");
    layout = !strncmp(v, "3.11.", 5) && py.this_thread && py.addr2line && code_type && str_type;
    py_found = 1;
}

/* The file name of a code object, into ``buf`` ("" when it has none). */
static void code_file(PyObj *code, char *buf, size_t n, const char *attr) {
    buf[0] = 0;
    PyObj *t, *v, *tb;
    py.err_fetch(&t, &v, &tb); /* a pending exception is the program's */
    PyObj *s = py.getattr(code, attr);
    if (s) {
        const char *u = py.utf8(s);
        if (u) snprintf(buf, n, "%s", u);
        py.decref(s);
    }
    py.err_restore(t, v, tb); /* also drops what getattr may have raised */
}

static int library_file(const char *f) {
    return !f[0] || f[0] == '<' || strstr(f, "/lib/python") || strstr(f, "/site-packages/") ||
           strstr(f, "/dist-packages/") || strstr(f, "/lib64/python");
}

/* Whether a code object is the interpreter's or a package's, not the program's. */
static int is_library(PyObj *code) {
    size_t h = (size_t)(((uintptr_t)code >> 4) * 0x9e3779b97f4a7c15ULL >> 40) % CODES;
    for (size_t n = 0; n < 16; n++, h = (h + 1) % CODES) {
        PyObj *c = __atomic_load_n(&codes[h].code, __ATOMIC_ACQUIRE);
        if (c == code) return codes[h].library;
        if (!c) break;
    }
    char file[1024];
    code_file(code, file, sizeof file, "co_filename");
    int lib = library_file(file);
    iop_lock(&codes_lock);
    h = (size_t)(((uintptr_t)code >> 4) * 0x9e3779b97f4a7c15ULL >> 40) % CODES;
    for (size_t n = 0; n < 16; n++, h = (h + 1) % CODES) {
        if (codes[h].code == code) break;
        if (!codes[h].code) {
            py.incref(code); /* kept alive: its address names it */
            codes[h].library = lib;
            __atomic_store_n(&codes[h].code, code, __ATOMIC_RELEASE);
            break;
        }
        if (n == 15) iop_overflow(&codes_overflow);
    }
    iop_unlock(&codes_lock);
    return lib;
}

/* A compact ASCII string's characters, else NULL (never a call). */
static const char *ascii(const char *str) {
    if (!str || AT(str, OB_TYPE) != str_type) return NULL;
    unsigned state = *(const unsigned *)(str + STR_STATE);
    return (state & 0x20) && (state & 0x40) ? str + STR_DATA : NULL; /* compact, ascii */
}

static int library_code(const char *code) {
    const char *f = ascii(AT(code, CO_FILENAME));
    return !f || library_file(f);
}

/* 3.11, with or without the lock: the frames read in place. */
static int where_direct(uint64_t *key, char *text, size_t len) {
    const char *ts = (const char *)py.this_thread();
    const char *cf = ts ? AT(ts, TS_CFRAME) : NULL;
    const char *fr = cf ? AT(cf, CF_FRAME) : NULL;
    int found = 0;
    size_t used = 0;
    for (int depth = 0; fr && depth < 256; depth++, fr = AT(fr, FR_PREVIOUS)) {
        const char *code = AT(fr, FR_CODE);
        if (!code || AT(code, OB_TYPE) != code_type) return 0; /* not the layout we know */
        if (library_code(code)) continue;
        long at = AT(fr, FR_INSTR) - (code + CO_CODE);
        if (!found) {
            *key = ((uint64_t)(uintptr_t)code * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)at;
            *key &= ~(3ULL << 62);
        }
        found++;
        if (!text) break;
        const char *name = ascii(AT(code, CO_NAME));
        int n = snprintf(text + used, len - used, "%s%s\t%d\t%s", used ? "\n" : "",
                         ascii(AT(code, CO_FILENAME)), py.addr2line((PyObj *)code, (int)at),
                         name ? name : "?");
        if (n < 0 || (size_t)n >= len - used || found == 3) break;
        used += (size_t)n;
    }
    return found != 0;
}

static int python_where(uint64_t *key, char *text, size_t len) {
    if (!py_found || !py.is_initialized()) return 0;
    if (layout == 1) return where_direct(key, text, len);
    if (!py.gil_check()) return 0;
    PyObj *f = py.get_frame(); /* borrowed */
    if (!f) return 0;
    PyObj *held = NULL; /* the frame we own a reference to */
    int found = 0, depth = 0;
    size_t used = 0;
    while (f && depth < 64) {
        PyObj *code = py.frame_code(f);
        int lib = is_library(code);
        if (!lib) {
            if (!found) {
                int at = py.frame_lasti ? py.frame_lasti(f) : py.frame_line(f);
                *key = ((uint64_t)(uintptr_t)code * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)at;
                *key &= ~(3ULL << 62);
                found = 1;
            }
            if (!text) {
                py.decref(code);
                break;
            }
            char file[1024], name[256];
            code_file(code, file, sizeof file, "co_filename");
            code_file(code, name, sizeof name, "co_name");
            int n = snprintf(text + used, len - used, "%s%s\t%d\t%s", used ? "\n" : "", file,
                             py.frame_line(f), name);
            if (n < 0 || (size_t)n >= len - used) {
                py.decref(code);
                break;
            }
            used += (size_t)n;
            if (++found > 3) {
                py.decref(code);
                break;
            }
        }
        py.decref(code);
        PyObj *back = py.frame_back(f); /* new reference */
        if (held) py.decref(held);
        held = f = back;
        depth++;
    }
    if (held) py.decref(held);
    return found != 0;
}

static const iop_overflow_count python_overflows[] = {{"python_codes", &codes_overflow},
                                                      {NULL, NULL}};

const iop_module iop_python_module = {
    .name = "python",
    .init = python_init,
    .where = python_where,
    .overflows = python_overflows,
};
