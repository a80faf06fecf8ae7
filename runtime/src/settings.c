/* Settings applied at run time: the TOML file named by IOPILOT_SETTINGS.
 *
 * The parser reads the subset of TOML a settings file needs: [tables] with
 * dotted and quoted keys, strings (basic and literal, one line), integers,
 * booleans, one-line arrays of integers, comments.  It runs once, at
 * start-up, into fixed arrays; a file it cannot use leaves every setting
 * unset and its error in the trace.  Which names exist, their tables and
 * kinds come from iopilot_settings.h (generated from the Python side's
 * one definition).
 *
 * Outcomes (applied, ignored, not applicable, rejected) go into a fixed
 * open-addressed table, counted per distinct (setting, file, object, value,
 * outcome, detail); when it is full they are counted as dropped.
 */
#define _GNU_SOURCE
#include "settings.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"

int iop_settings_on;
iop_setting_value iop_settings_plain[IOP_NSETTINGS];

static const struct {
    int table;
    const char *name;
    int kind;
    const char *choices;
    int romio;
} defs[] = {
#define IOP_X(id, table, name, kind, choices, romio) {table, name, kind, choices, romio},
    IOP_SETTINGS(IOP_X)
#undef IOP_X
};
static const char *const table_names[] = IOP_SETTING_TABLE_NAMES;

const char *iop_setting_name(int id) { return defs[id].name; }
int iop_setting_table(int id) { return defs[id].table; }
int iop_setting_romio_only(int id) { return defs[id].romio; }

/* [mpiio.files."GLOB"] tables, kept sorted from least to most specific. */
typedef struct {
    char glob[IOP_SETTINGS_MAX_STRING + 1];
    int specificity; /* characters that are not wildcards */
    iop_setting_value v[IOP_NSETTINGS];
} pattern;
static pattern patterns[IOP_SETTINGS_MAX_PATTERNS];
static int npatterns;
static int order[IOP_SETTINGS_MAX_PATTERNS]; /* least specific first, then file order */

static char named_path[4096];
static int named;
static char error_text[320];
static int has_error;


/* ------------------------------------------------------------------ */
/* Glob matching (fnmatch without flags: '*' also crosses '/'), written
 * here so that matching never allocates. */

static int class_match(const char **pp, char c) {
    const char *p = *pp + 1; /* after '[' */
    int negate = *p == '!' || *p == '^', ok = 0;
    if (negate) p++;
    const char *start = p;
    while (*p && (*p != ']' || p == start)) {
        if (p[1] == '-' && p[2] && p[2] != ']') {
            if ((unsigned char)c >= (unsigned char)p[0] && (unsigned char)c <= (unsigned char)p[2])
                ok = 1;
            p += 3;
        } else {
            if (*p == c) ok = 1;
            p++;
        }
    }
    if (*p != ']') return -1; /* no closing bracket: '[' is literal */
    *pp = p + 1;
    return ok != negate;
}

static int glob_match(const char *g, const char *s) {
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*g == '*') {
            star = ++g;
            resume = s;
            continue;
        }
        if (*g == '?') {
            g++, s++;
            continue;
        }
        if (*g == '[') {
            const char *after = g;
            int m = class_match(&after, *s);
            if (m == 1) {
                g = after, s++;
                continue;
            }
            if (m < 0 && *s == '[') {
                g++, s++;
                continue;
            }
        } else if (*g && *g == *s) {
            g++, s++;
            continue;
        }
        if (!star) return 0;
        g = star;
        s = ++resume;
    }
    while (*g == '*') g++;
    return *g == 0;
}

static int path_matches(const char *glob, const char *path) {
    if (glob_match(glob, path)) return 1;
    if (strchr(glob, '/')) return 0;
    const char *base = strrchr(path, '/');
    return base && glob_match(glob, base + 1); /* "out.h5" matches /any/dir/out.h5 */
}

int iop_settings_hints_for(const char *path, const iop_setting_value *out[IOP_NSETTINGS]) {
    int n = 0;
    for (int id = 0; id < IOP_NSETTINGS; id++) {
        out[id] = NULL;
        if (defs[id].table == IOP_ST_MPIIO && iop_settings_plain[id].set) {
            out[id] = &iop_settings_plain[id];
            n++;
        }
    }
    for (int j = 0; j < npatterns; j++) {
        const pattern *p = &patterns[order[j]];
        if (!path || !path_matches(p->glob, path)) continue;
        for (int id = 0; id < IOP_NSETTINGS; id++) {
            if (!p->v[id].set) continue;
            if (!out[id]) n++;
            out[id] = &p->v[id];
        }
    }
    return n;
}

/* ------------------------------------------------------------------ */
/* The parser. */

#define MAX_FILE (64 * 1024)
#define MAX_PARTS 4
#define PART 256
static char source[MAX_FILE + 1];

typedef struct {
    const char *p;
    int line;
    char head[MAX_PARTS][PART]; /* the current [table] */
    int nhead;
} parser;

enum { V_STR, V_INT, V_BOOL, V_INTS };
typedef struct {
    int type;
    int64_t i;
    int n;
    int64_t a[IOP_SETTINGS_MAX_RANK];
    char s[IOP_SETTINGS_MAX_STRING + 2];
} value;

static int fail(parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(parser *ps, const char *fmt, ...) {
    char why[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (ps->line > 0) snprintf(error_text, sizeof error_text, "line %d: %s", ps->line, why);
    else snprintf(error_text, sizeof error_text, "%s", why);
    has_error = 1;
    return -1;
}

static void skip_ws(parser *ps) {
    while (*ps->p == ' ' || *ps->p == '\t') ps->p++;
}

/* The rest of the line must be blank or a comment. */
static int end_of_line(parser *ps) {
    skip_ws(ps);
    if (*ps->p == '#')
        while (*ps->p && *ps->p != '\n') ps->p++;
    if (*ps->p == '\r') ps->p++;
    if (*ps->p && *ps->p != '\n') return fail(ps, "unexpected text after the value");
    return 0;
}

static int put_utf8(char *out, size_t *n, size_t cap, unsigned long cp) {
    char b[4];
    size_t k;
    if (cp < 0x80) b[0] = (char)cp, k = 1;
    else if (cp < 0x800) b[0] = (char)(0xc0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3f)), k = 2;
    else if (cp < 0x10000)
        b[0] = (char)(0xe0 | cp >> 12), b[1] = (char)(0x80 | ((cp >> 6) & 0x3f)),
        b[2] = (char)(0x80 | (cp & 0x3f)), k = 3;
    else if (cp < 0x110000)
        b[0] = (char)(0xf0 | cp >> 18), b[1] = (char)(0x80 | ((cp >> 12) & 0x3f)),
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), b[3] = (char)(0x80 | (cp & 0x3f)), k = 4;
    else return -1;
    if (*n + k >= cap) return -1;
    memcpy(out + *n, b, k);
    *n += k;
    return 0;
}

/* A quoted string ("basic" with escapes, or 'literal') into out. */
static int parse_string(parser *ps, char *out, size_t cap) {
    char q = *ps->p++;
    size_t n = 0;
    while (*ps->p != q) {
        char c = *ps->p;
        if (!c || c == '\n' || c == '\r') return fail(ps, "a string is not closed on its line");
        if (q == '"' && c == '\\') {
            char e = ps->p[1];
            const char *map = strchr("\"\\btnfr", e);
            if (e && map) {
                static const char repl[] = "\"\\\b\t\n\f\r";
                c = repl[map - "\"\\btnfr"];
                ps->p += 2;
            } else if (e == 'u' || e == 'U') {
                int digits = e == 'u' ? 4 : 8;
                unsigned long cp = 0;
                for (int i = 0; i < digits; i++) {
                    char h = ps->p[2 + i];
                    int v = h >= '0' && h <= '9'   ? h - '0'
                            : h >= 'a' && h <= 'f' ? h - 'a' + 10
                            : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                   : -1;
                    if (v < 0) return fail(ps, "a bad \\%c escape in a string", e);
                    cp = cp * 16 + (unsigned long)v;
                }
                ps->p += 2 + digits;
                if (put_utf8(out, &n, cap, cp) != 0) return fail(ps, "a string is too long");
                continue;
            } else {
                return fail(ps, "an unknown escape in a string");
            }
        } else {
            ps->p++;
        }
        if (n + 1 >= cap) return fail(ps, "a string is too long");
        out[n++] = c;
    }
    ps->p++;
    out[n] = 0;
    return 0;
}

static int is_bare(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
}

/* A dotted key: bare or quoted parts separated by dots. */
static int parse_key(parser *ps, char parts[][PART], int *n) {
    *n = 0;
    for (;;) {
        skip_ws(ps);
        if (*n == MAX_PARTS) return fail(ps, "a key has too many parts");
        char *out = parts[(*n)++];
        if (*ps->p == '"' || *ps->p == '\'') {
            if (parse_string(ps, out, PART) != 0) return -1;
        } else {
            size_t k = 0;
            while (is_bare(*ps->p) && k + 1 < PART) out[k++] = *ps->p++;
            out[k] = 0;
            if (!k) return fail(ps, "a key is missing");
        }
        skip_ws(ps);
        if (*ps->p != '.') return 0;
        ps->p++;
    }
}

static int parse_int(parser *ps, int64_t *out) {
    int neg = 0;
    if (*ps->p == '+' || *ps->p == '-') neg = *ps->p++ == '-';
    if (!(*ps->p >= '0' && *ps->p <= '9')) return fail(ps, "expected a value");
    uint64_t v = 0;
    int digits = 0;
    while ((*ps->p >= '0' && *ps->p <= '9') || (*ps->p == '_' && digits)) {
        if (*ps->p != '_') {
            if (v > (uint64_t)INT64_MAX / 10) return fail(ps, "an integer is too large");
            v = v * 10 + (uint64_t)(*ps->p - '0');
            digits++;
        }
        ps->p++;
    }
    if (v > (uint64_t)INT64_MAX) return fail(ps, "an integer is too large");
    if (*ps->p == '.' || *ps->p == 'e' || *ps->p == 'E' || *ps->p == 'x' || *ps->p == 'o' ||
        *ps->p == 'b')
        return fail(ps, "only decimal integers are accepted");
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

static int parse_value(parser *ps, value *v) {
    skip_ws(ps);
    const char *p = ps->p;
    if (*p == '"' || *p == '\'') {
        v->type = V_STR;
        return parse_string(ps, v->s, sizeof v->s);
    }
    if (!strncmp(p, "true", 4) && !is_bare(p[4])) {
        v->type = V_BOOL, v->i = 1, ps->p += 4;
        return 0;
    }
    if (!strncmp(p, "false", 5) && !is_bare(p[5])) {
        v->type = V_BOOL, v->i = 0, ps->p += 5;
        return 0;
    }
    if (*p == '[') {
        v->type = V_INTS, v->n = 0, ps->p++;
        for (;;) {
            skip_ws(ps);
            if (*ps->p == ']') break;
            if (v->n == IOP_SETTINGS_MAX_RANK)
                return fail(ps, "an array has more than %d elements", IOP_SETTINGS_MAX_RANK);
            if (parse_int(ps, &v->a[v->n++]) != 0) return -1;
            skip_ws(ps);
            if (*ps->p == ',') ps->p++;
            else if (*ps->p != ']') return fail(ps, "an array of integers on one line expected");
        }
        ps->p++;
        return 0;
    }
    v->type = V_INT;
    return parse_int(ps, &v->i);
}

static const char *type_name(int t) {
    static const char *n[] = {"string", "integer", "boolean", "array"};
    return n[t];
}

/* Bytes of "4k", "1m", "2GiB" ...; -1 when it is not a size. */
static int64_t size_of(const char *s) {
    while (*s == ' ') s++;
    if (!(*s >= '0' && *s <= '9')) return -1;
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > (uint64_t)INT64_MAX / 10) return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    while (*s == ' ') s++;
    int shift = 0;
    switch (*s | 0x20) {
    case 'k': shift = 10; break;
    case 'm': shift = 20; break;
    case 'g': shift = 30; break;
    case 't': shift = 40; break;
    default: break;
    }
    if (shift) s++;
    if ((*s | 0x20) == 'i') s++;
    if ((*s | 0x20) == 'b') s++;
    while (*s == ' ') s++;
    if (*s || v > ((uint64_t)INT64_MAX >> shift)) return -1;
    return (int64_t)(v << shift);
}

static int choice_index(const char *choices, const char *s) {
    size_t len = strlen(s);
    for (int i = 0; *choices; i++) {
        const char *bar = strchr(choices, '|');
        size_t n = bar ? (size_t)(bar - choices) : strlen(choices);
        if (n == len && !strncmp(choices, s, n)) return i;
        if (!bar) break;
        choices = bar + 1;
    }
    return -1;
}

/* Check ``v`` against setting ``id`` and store it in ``out``. */
static int store(parser *ps, const char *label, int id, const value *v, iop_setting_value *out) {
    const char *key = defs[id].name;
    if (out->set) return fail(ps, "[%s] %s: given twice", label, key);
    int kind = defs[id].kind;
    switch (kind) {
    case IOP_SK_STR:
    case IOP_SK_ENUM:
        if (v->type != V_STR)
            return fail(ps, "[%s] %s: expected a string, got %s", label, key, type_name(v->type));
        if (!v->s[0] || strlen(v->s) > IOP_SETTINGS_MAX_STRING || strpbrk(v->s, "\t\n"))
            return fail(ps, "[%s] %s: 1 to %d characters, no tabs or newlines", label, key,
                        IOP_SETTINGS_MAX_STRING);
        if (kind == IOP_SK_ENUM && (out->i = choice_index(defs[id].choices, v->s)) < 0)
            return fail(ps, "[%s] %s: '%s' is not one of %s", label, key, v->s,
                        defs[id].choices);
        memcpy(out->text, v->s, strlen(v->s) + 1); /* length checked above */
        break;
    case IOP_SK_INT:
        if (v->type != V_INT)
            return fail(ps, "[%s] %s: expected an integer, got %s", label, key, type_name(v->type));
        if (v->i < 0) return fail(ps, "[%s] %s: cannot be negative", label, key);
        out->i = v->i;
        snprintf(out->text, sizeof out->text, "%lld", (long long)v->i);
        break;
    case IOP_SK_SIZE:
        if (v->type == V_INT) out->i = v->i;
        else if (v->type == V_STR) {
            out->i = size_of(v->s);
            if (out->i < 0) return fail(ps, "[%s] %s: '%s' is not a size", label, key, v->s);
        } else
            return fail(ps, "[%s] %s: expected a size, got %s", label, key, type_name(v->type));
        if (out->i < 0) return fail(ps, "[%s] %s: a size cannot be negative", label, key);
        snprintf(out->text, sizeof out->text, "%lld", (long long)out->i);
        break;
    case IOP_SK_BOOL:
        if (v->type != V_BOOL)
            return fail(ps, "[%s] %s: expected true or false, got %s", label, key,
                        type_name(v->type));
        out->i = v->i;
        snprintf(out->text, sizeof out->text, "%s", v->i ? "true" : "false");
        break;
    case IOP_SK_INTS: {
        if (v->type != V_INTS || v->n == 0)
            return fail(ps, "[%s] %s: expected a non-empty array of integers", label, key);
        size_t n = 0;
        out->text[n++] = '[';
        for (int i = 0; i < v->n; i++) {
            if (v->a[i] < 1) return fail(ps, "[%s] %s: elements must be positive", label, key);
            out->a[i] = v->a[i];
            n += (size_t)snprintf(out->text + n, sizeof out->text - n, "%s%lld", i ? ", " : "",
                                  (long long)v->a[i]);
            if (n >= sizeof out->text - 2) return fail(ps, "[%s] %s: too long", label, key);
        }
        out->text[n++] = ']';
        out->text[n] = 0;
        out->n = v->n;
        break;
    }
    default: return fail(ps, "[%s] %s: unsupported", label, key);
    }
    out->set = 1;
    return 0;
}

static int table_of(const char *name) {
    for (int t = 0; t < IOP_NTABLES; t++)
        if (!strcmp(table_names[t], name)) return t;
    return -1;
}

static int find_setting(int table, const char *name) {
    for (int id = 0; id < IOP_NSETTINGS; id++)
        if (defs[id].table == table && !strcmp(defs[id].name, name)) return id;
    return -1;
}

static pattern *pattern_for(parser *ps, const char *glob) {
    for (int k = 0; k < npatterns; k++)
        if (!strcmp(patterns[k].glob, glob)) return &patterns[k];
    if (!glob[0] || strlen(glob) > IOP_SETTINGS_MAX_STRING) {
        fail(ps, "[mpiio.files]: a pattern has 1 to %d characters", IOP_SETTINGS_MAX_STRING);
        return NULL;
    }
    if (npatterns == IOP_SETTINGS_MAX_PATTERNS) {
        fail(ps, "[mpiio.files]: at most %d patterns", IOP_SETTINGS_MAX_PATTERNS);
        return NULL;
    }
    pattern *p = &patterns[npatterns++];
    snprintf(p->glob, sizeof p->glob, "%s", glob);
    for (const char *c = glob; *c; c++) p->specificity += !strchr("*?[]", *c);
    return p;
}

/* A header [a.b."c"]: only known tables. */
static int check_table(parser *ps, char parts[][PART], int n) {
    if (table_of(parts[0]) < 0) return fail(ps, "[%s]: unknown table", parts[0]);
    if (n == 1) return 0;
    if (table_of(parts[0]) == IOP_ST_MPIIO && !strcmp(parts[1], "files")) {
        if (n == 2) return 0;
        if (n == 3) return pattern_for(ps, parts[2]) ? 0 : -1;
    }
    return fail(ps, "[%s.%s]: unknown table", parts[0], parts[1]);
}

/* key = value, the key relative to the current table. */
static int assign(parser *ps, char keys[][PART], int nkeys, const value *v) {
    char full[MAX_PARTS][PART];
    int n = 0;
    for (int i = 0; i < ps->nhead; i++) memcpy(full[n++], ps->head[i], PART);
    for (int i = 0; i < nkeys; i++) {
        if (n == MAX_PARTS) return fail(ps, "a key has too many parts");
        memcpy(full[n++], keys[i], PART);
    }
    if (n < 2) return fail(ps, "%s: a setting belongs in a [table]", full[0]);
    int table = table_of(full[0]);
    if (table < 0) return fail(ps, "[%s]: unknown table", full[0]);
    iop_setting_value *slots = iop_settings_plain;
    char label[PART + 32];
    const char *key = full[1];
    snprintf(label, sizeof label, "%s", full[0]);
    if (table == IOP_ST_MPIIO && !strcmp(full[1], "files")) {
        if (n != 4) return fail(ps, "[mpiio.files]: hints go in [mpiio.files.\"GLOB\"] tables");
        pattern *p = pattern_for(ps, full[2]);
        if (!p) return -1;
        slots = p->v;
        key = full[3];
        snprintf(label, sizeof label, "mpiio.files.\"%.*s\"", PART - 1, full[2]);
    } else if (n != 2) {
        return fail(ps, "[%s] %s: unknown name", full[0], full[1]);
    }
    int id = find_setting(table, key);
    if (id < 0) return fail(ps, "[%s] %s: unknown name", label, key);
    return store(ps, label, id, v, &slots[id]);
}

static int parse(parser *ps) {
    static value v; /* start-up only, one thread */
    char keys[MAX_PARTS][PART];
    for (ps->line = 1; *ps->p; ps->line++) {
        skip_ws(ps);
        if (*ps->p == '[') {
            ps->p++;
            if (*ps->p == '[') return fail(ps, "arrays of tables are not settings");
            if (parse_key(ps, ps->head, &ps->nhead) != 0) return -1;
            if (*ps->p != ']') return fail(ps, "a table header is not closed");
            ps->p++;
            if (check_table(ps, ps->head, ps->nhead) != 0) return -1;
        } else if (*ps->p != '#' && *ps->p != '\n' && *ps->p != '\r' && *ps->p) {
            int nkeys;
            if (parse_key(ps, keys, &nkeys) != 0) return -1;
            if (*ps->p != '=') return fail(ps, "expected '=' after a key");
            ps->p++;
            memset(&v, 0, sizeof v);
            if (parse_value(ps, &v) != 0 || assign(ps, keys, nkeys, &v) != 0) return -1;
        }
        if (end_of_line(ps) != 0) return -1;
        if (*ps->p == '\n') ps->p++;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Outcomes. */

typedef struct {
    uint64_t hash; /* 0: free slot */
    uint64_t file_id;
    long count;
    int id, outcome;
    char object[96];
    char value[64];
    char detail[160];
} iop_setting_event;
#define NEVENTS 1024
static iop_setting_event events[NEVENTS];
static iop_lock_t events_lock;
static long events_dropped;

static uint64_t fnv(uint64_t h, const char *s) {
    for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (h ^ 0xff) * 1099511628211ULL;
}

void iop_setting_outcome(int id, uint64_t file_id, const char *object, const char *value,
                         int outcome, const char *detail) {
    if (id < 0 || id >= IOP_NSETTINGS || outcome < 0 || outcome >= IOP_NOUTCOMES) return;
    uint64_t h = 1469598103934665603ULL ^ ((uint64_t)id << 8 | (uint64_t)outcome);
    h = fnv(fnv(fnv(h ^ file_id, object), value), detail);
    h = h ? h : 1;
    iop_busy_enter();
    iop_lock(&events_lock);
    int done = 0;
    for (int k = 0, i = (int)(h % NEVENTS); k < NEVENTS; k++, i = (i + 1) % NEVENTS) {
        iop_setting_event *e = &events[i];
        if (e->hash == h) {
            e->count++;
            done = 1;
            break;
        }
        if (!e->hash) {
            e->hash = h;
            e->file_id = file_id;
            e->count = 1;
            e->id = id;
            e->outcome = outcome;
            snprintf(e->object, sizeof e->object, "%s", object ? object : "");
            snprintf(e->value, sizeof e->value, "%s", value ? value : "");
            snprintf(e->detail, sizeof e->detail, "%s", detail ? detail : "");
            done = 1;
            break;
        }
    }
    if (!done) events_dropped++;
    iop_unlock(&events_lock);
    iop_busy_leave();
}

static void settings_after_fork(void) {
    events_lock = 0;
    memset(events, 0, sizeof events);
    events_dropped = 0;
}

/* "settings": the file named by IOPILOT_SETTINGS, its error if any, and
 * [setting, value, "file id", object, outcome, detail, count] per outcome. */
static void settings_summary(iop_json *b) {
    static const char *const outcomes[] = IOP_SETTING_OUTCOME_NAMES;
    if (!named) return;
    iop_json_printf(b, ",\n\"settings\": {\"file\": ");
    iop_json_str(b, named_path);
    iop_json_printf(b, ", \"error\": ");
    if (has_error) iop_json_str(b, error_text);
    else iop_json_put(b, "null", 4);
    iop_json_printf(b, ", \"dropped\": %ld, \"outcomes\": [", events_dropped);
    int first = 1;
    iop_lock(&events_lock); /* the table stays still while it is written out */
    for (int i = 0; i < NEVENTS; i++) {
        const iop_setting_event *e = &events[i];
        if (!e->hash) continue;
        char name[300];
        snprintf(name, sizeof name, "%s.%s", table_names[defs[e->id].table], defs[e->id].name);
        iop_json_put(b, first ? "\n[" : ",\n[", first ? 2 : 3);
        first = 0;
        iop_json_str(b, name);
        iop_json_put(b, ", ", 2);
        iop_json_str(b, e->value);
        iop_json_printf(b, ", \"%llu\", ", (unsigned long long)e->file_id);
        iop_json_str(b, e->object);
        iop_json_put(b, ", ", 2);
        iop_json_str(b, outcomes[e->outcome]);
        iop_json_put(b, ", ", 2);
        iop_json_str(b, e->detail);
        iop_json_printf(b, ", %ld]", e->count);
    }
    iop_unlock(&events_lock);
    iop_json_put(b, "]}", 2);
}

/* ------------------------------------------------------------------ */
/* Start-up. */

/* [ompi] is exported into the job's environment before it starts (by
 * `iopilot run --settings`); here we can only say whether it was. */
static void check_ompi(void) {
    int job = getenv("OMPI_COMM_WORLD_SIZE") != NULL;
    for (int id = 0; id < IOP_NSETTINGS; id++) {
        const iop_setting_value *v = iop_setting(id);
        if (!v || defs[id].table != IOP_ST_OMPI) continue;
        char var[300], detail[160];
        snprintf(var, sizeof var, "OMPI_MCA_%s", defs[id].name);
        const char *now = getenv(var);
        if (!job)
            iop_setting_outcome(id, 0, NULL, v->text, IOP_SO_NOT_APPLICABLE,
                                "not an Open MPI job");
        else if (now && !strcmp(now, v->text))
            iop_setting_outcome(id, 0, NULL, v->text, IOP_SO_APPLIED, "in the job's environment");
        else {
            snprintf(detail, sizeof detail, "%.*s is %s%.*s in the job's environment",
                     60, var, now ? "" : "not set", 60, now ? now : "");
            iop_setting_outcome(id, 0, NULL, v->text, IOP_SO_NOT_APPLICABLE, detail);
        }
    }
}

static void settings_load(void) {
    const char *path = getenv("IOPILOT_SETTINGS");
    if (!path || !*path) return;
    named = 1;
    snprintf(named_path, sizeof named_path, "%s", path);
    parser ps = {.p = source, .line = 0};
    /* O_NONBLOCK: a FIFO named here must not hold the program at start. */
    int fd = sys_open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);
    if (fd < 0) {
        fail(&ps, "cannot be read");
        return;
    }
    struct stat sb;
    if (syscall(SYS_fstat, fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        sys_close(fd);
        fail(&ps, "is not a regular file");
        return;
    }
    size_t n = 0;
    ssize_t got;
    while (n < MAX_FILE && (got = sys_read(fd, source + n, MAX_FILE - n)) > 0) n += (size_t)got;
    char extra;
    int too_big = n == MAX_FILE && sys_read(fd, &extra, 1) > 0;
    sys_close(fd);
    if (too_big) {
        fail(&ps, "larger than %d bytes", MAX_FILE);
        return;
    }
    source[n] = 0;
    if (strlen(source) != n) {
        fail(&ps, "holds a NUL byte");
        return;
    }
    if (parse(&ps) != 0) { /* nothing of a bad file is applied */
        memset(iop_settings_plain, 0, sizeof iop_settings_plain);
        memset(patterns, 0, sizeof patterns);
        npatterns = 0;
        return;
    }
    for (int j = 0; j < npatterns; j++) { /* insertion sort: stable, no allocation */
        int k = j;
        for (; k > 0 && patterns[order[k - 1]].specificity > patterns[j].specificity; k--)
            order[k] = order[k - 1];
        order[k] = j;
    }
    for (int id = 0; id < IOP_NSETTINGS; id++) iop_settings_on |= iop_settings_plain[id].set;
    iop_settings_on |= npatterns > 0;
    check_ompi();
}

/* A feature of no layer: it reads the file at start-up (the modules apply
 * their values in their settings hooks) and writes the outcomes out. */
const iop_module iop_settings_module = {
    .name = "settings",
    .init = settings_load,
    .after_fork = settings_after_fork,
    .summary = settings_summary,
};
