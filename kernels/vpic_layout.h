/* The VPIC-IO particle layout, shared by the writer (vpicio) and the reader
 * (bdcats) so that every value read can be checked against what was written.
 * Names, order and types are h5bench's (h5bench_patterns/h5bench_write.c):
 * x y z px py pz id_2 are 32-bit floats, id_1 is a 32-bit int. */
#ifndef IOPILOT_VPIC_LAYOUT_H
#define IOPILOT_VPIC_LAYOUT_H

#include <hdf5.h>
#include <stdint.h>

#include "common.h"

#define NVARS 8

static const char *const var_name[NVARS] = {"x", "y", "z", "px", "py", "pz", "id_1", "id_2"};
static const int var_is_int[NVARS] = {0, 0, 0, 0, 0, 0, 1, 0};

/* Deterministic 32 bits per (global particle index, variable, step). */
static inline uint32_t vpic_hash(long long g, int var, int step) {
    uint64_t x = (uint64_t)g * 0x9E3779B97F4A7C15ULL + (uint64_t)(var + 1) * 0xBF58476D1CE4E5B9ULL +
                 (uint64_t)(step + 1) * 0x94D049BB133111EBULL;
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ULL;
    x ^= x >> 32;
    return (uint32_t)x;
}

/* Floats are 24-bit integers / 256: exact in float32, so readers compare with ==. */
static inline float vpic_float(long long g, int var, int step) {
    return (float)(vpic_hash(g, var, step) >> 8) / 256.0f;
}
static inline int32_t vpic_int(long long g, int var, int step) {
    return (int32_t)vpic_hash(g, var, step);
}

/* --delay-close: close the datasets and group of each step from *closed up
 * to step ``upto``; ``handles`` holds NVARS datasets then the group per step. */
static inline void vpic_close_steps(hid_t *handles, int *closed, int upto) {
    for (; *closed <= upto; (*closed)++) {
        hid_t *h = handles + (size_t)*closed * (NVARS + 1);
        for (int v = 0; v < NVARS; v++) k_h5(H5Dclose(h[v]), "H5Dclose");
        k_h5(H5Gclose(h[NVARS]), "H5Gclose");
    }
}

#endif
