/* Darshan's "common values": the four most frequent access sizes (and
 * strides) of a file with their counts.  Each file keeps the frequency of
 * up to 32 distinct values, as Darshan does; after every operation the
 * value's new frequency is merged into the ordered list of four (higher
 * count first, the larger value first on a tie), and value 0 is never
 * listed.  Included by records.c only; called with the file's lock held. */
#ifndef IOPILOT_ACCESS_H
#define IOPILOT_ACCESS_H

#include <stdint.h>

#define IOP_COMMON_MAX 32 /* distinct values followed per file */

typedef struct {
    int64_t val[IOP_COMMON_MAX];
    int64_t freq[IOP_COMMON_MAX];
    int n;    /* values in val[] */
    int zero; /* 0 was seen: it takes a place but is never listed */
    int last; /* where the previous value was found: usually the next one too */
} iop_common;

/* Count one more ``v`` (not 0); its frequency, or 0 when the places are taken. */
static int64_t common_count_slow(iop_common *t, int64_t v) {
    for (int i = 0; i < t->n; i++)
        if (t->val[i] == v) {
            t->last = i;
            return ++t->freq[i];
        }
    if (t->n + t->zero == IOP_COMMON_MAX) return 0;
    t->val[t->n] = v;
    t->freq[t->n] = 1;
    t->last = t->n++;
    return 1;
}

/* Merge (v, count) into the list of four kept in vals[0..3] / counts[0..3]. */
static void common_top4(int64_t *vals, int64_t *counts, int64_t v, int64_t count) {
    int64_t nv[4], nc[4];
    int k = 0, i = 0;
    for (; i < 4 && (counts[i] > count || (counts[i] == count && vals[i] > v)); i++, k++) {
        nv[k] = vals[i];
        nc[k] = counts[i];
    }
    if (k == 4) return; /* four values rank above it */
    nv[k] = v;
    nc[k++] = count;
    for (; k < 4 && i < 4; i++) /* the rest, without v's old entry */
        if (vals[i] != v) {
            nv[k] = vals[i];
            nc[k++] = counts[i];
        }
    for (; k < 4; k++) nv[k] = nc[k] = 0;
    for (i = 0; i < 4; i++) {
        vals[i] = nv[i];
        counts[i] = nc[i];
    }
}

/* One more ``v``: its frequency, then the list of four.  The usual case (the
 * same value as last time, already first in the list) is a few instructions. */
static inline __attribute__((always_inline)) void common_note(iop_common *t, int64_t *vals,
                                                              int64_t *counts, int64_t v) {
    if (v == 0) {
        if (!t->zero && t->n < IOP_COMMON_MAX) t->zero = 1;
        return;
    }
    int64_t f = t->n && t->val[t->last] == v ? ++t->freq[t->last] : common_count_slow(t, v);
    if (!f) return;
    if (vals[0] == v) counts[0] = f; /* already first: only its count grows */
    else common_top4(vals, counts, v, f);
}

#endif
