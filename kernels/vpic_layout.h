/* The VPIC-IO particle layout, shared by the writer (vpicio) and the reader
 * (bdcats) so that every value read can be checked against what was written. */
#ifndef IOPILOT_VPIC_LAYOUT_H
#define IOPILOT_VPIC_LAYOUT_H

#include <stdint.h>

#define NVARS 8

static const char *const var_name[NVARS] = {"x", "y", "z", "id1", "id2", "px", "py", "pz"};
static const int var_is_int[NVARS] = {0, 0, 0, 1, 1, 0, 0, 0};

/* Deterministic 32 bits per (global particle index, variable, step). */
static inline uint32_t vpic_hash(long long g, int var, int step) {
    uint64_t x = (uint64_t)g * 0x9E3779B97F4A7C15ULL + (uint64_t)(var + 1) * 0xBF58476D1CE4E5B9ULL +
                 (uint64_t)(step + 1) * 0x94D049BB133111EBULL;
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ULL;
    x ^= x >> 32;
    return (uint32_t)x;
}

#endif
