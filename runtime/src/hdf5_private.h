/* The HDF5 layer's shared declarations: the HDF5 types and prototypes we
 * call (hdf5.h is not included, see hdf5.c), the table of real functions of
 * each loaded copy of the library, and what the layer's files share.
 *   hdf5.c           the wrappers that open, create and close files and datasets
 *   hdf5_io.c        reads and writes, and Darshan's access tuples
 *   hdf5_lib.c       which copy of HDF5 serves a call, its functions and drivers
 *   hdf5_notes.c     "hdf5_property" notes of what the lists say
 *   hdf5_settings.c  the [hdf5] settings applied to copies of the lists */
#ifndef IOP_HDF5_PRIVATE_H
#define IOP_HDF5_PRIVATE_H

#include <stdint.h>
#include <sys/types.h>

#include "core.h"

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

/* Every function we call: those of every HDF5 since 1.10, serial or
 * parallel; then those of some (deprecated, newer, parallel builds only).
 * A program linked with the runtime (IOP_LINK) must hold the first ones
 * (hdf5_lib.c refers to them strongly, which brings them out of a static
 * libhdf5.a), and may lack the others. */
#define H5_FUNCS_ALWAYS(X)                                                              \
    X(H5open) X(H5get_libversion)                                                       \
    X(H5Fcreate) X(H5Fopen) X(H5Fclose) X(H5Fflush) X(H5Fget_name)                     \
    X(H5Fget_access_plist) X(H5Fget_create_plist)                                       \
    X(H5Dcreate2) X(H5Dcreate_anon) X(H5Dopen2) X(H5Dclose) X(H5Dflush) X(H5Dread)      \
    X(H5Dwrite) X(H5Dget_space) X(H5Dget_type) X(H5Dget_create_plist)                   \
    X(H5Dget_access_plist) X(H5Oopen) X(H5Oopen_by_idx) X(H5Oclose)                     \
    X(H5Idec_ref) X(H5Iget_type) X(H5Iget_name) X(H5Iis_valid)                          \
    X(H5Sclose) X(H5Tclose) X(H5Pclose)                                                 \
    X(H5Sget_simple_extent_ndims) X(H5Sget_simple_extent_dims)                          \
    X(H5Sget_simple_extent_npoints) X(H5Sget_select_npoints) X(H5Sget_select_type)      \
    X(H5Sis_regular_hyperslab) X(H5Sget_regular_hyperslab) X(H5Tget_size)               \
    X(H5Pget_layout) X(H5Pget_chunk) X(H5Pget_nfilters) X(H5Pget_filter2)               \
    X(H5Pget_chunk_cache) X(H5Pget_driver) X(H5Pget_alignment) X(H5Pget_sieve_buf_size) \
    X(H5Pget_meta_block_size) X(H5Pget_page_buffer_size) X(H5Pget_libver_bounds)        \
    X(H5Pget_file_space_strategy) X(H5Pget_file_space_page_size) X(H5Pset_mdc_config)   \
    X(H5Pcopy) X(H5Pcreate) X(H5Pset_alignment) X(H5Pset_sieve_buf_size)                \
    X(H5Pset_meta_block_size) X(H5Pset_page_buffer_size) X(H5Pset_file_space_strategy)  \
    X(H5Pset_chunk) X(H5Pset_fill_time) X(H5Eget_auto2) X(H5Eset_auto2) X(H5Ewalk2)
#define H5_FUNCS_SOMETIMES(X)                                                           \
    X(H5Dcreate1) X(H5Dopen1) X(H5Oopen_by_addr) X(H5Dread_multi) X(H5Dwrite_multi)    \
    X(H5Oopen_by_token) X(H5Pget_all_coll_metadata_ops) X(H5Pget_coll_metadata_write)   \
    X(H5Pget_dxpl_mpio) X(H5Pget_mpio_actual_io_mode) X(H5Pget_mpio_no_collective_cause) \
    X(H5Pset_fapl_mpio) X(H5Pset_all_coll_metadata_ops) X(H5Pset_coll_metadata_write)   \
    X(H5Pset_dxpl_mpio)
#define H5_FUNCS(X) H5_FUNCS_ALWAYS(X) H5_FUNCS_SOMETIMES(X)

enum h5_func {
#define IOP_X(name) F_##name,
    H5_FUNCS(IOP_X)
#undef IOP_X
    H5_NFUNCS
};

/* Virtual file drivers we can name (hdf5_lib.c). */
#define NDRIVERS 14

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

extern const char *const h5_names[H5_NFUNCS];
void *h5_sym(h5lib *L, const char *name);

static inline void *h5fn(h5lib *L, int i) {
    if (IOP_LIKELY(__atomic_load_n(&L->tried[i], __ATOMIC_ACQUIRE))) return L->fn[i];
    void *p = h5_sym(L, h5_names[i]);
    L->fn[i] = p;
    __atomic_store_n(&L->tried[i], 1, __ATOMIC_RELEASE);
    return p;
}

/* The typed real function ``name`` of library ``L`` (NULL when absent). */
#define H5F_(L, name) ((t_##name *)h5fn((L), F_##name))

/* The HDF5 copy serving a call that returns to ``ra``. */
h5lib *lib_for(uintptr_t ra);
#define CALLER_LIB() lib_for((uintptr_t)__builtin_return_address(0))
uintptr_t hkey(h5lib *L, hid_t id);

/* hdf5_lib.c: helpers. */
void absolute(const char *path, char *out, size_t n);
void object_names(h5lib *L, hid_t obj, char *file, size_t nfile, ssize_t *n, char *path,
                  size_t npath, ssize_t *m);
void close_space(h5lib *L, hid_t id);
void close_type(h5lib *L, hid_t id);
void close_plist(h5lib *L, hid_t id);
const char *library_version(h5lib *L);
const char *driver_name(h5lib *L, hid_t drv);

/* hdf5_notes.c */
void h5note(int dataset, uint64_t id, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void file_properties(h5lib *L, hid_t fid, uint64_t id, iop_stats *st, hid_t fapl_in);
void dataset_properties(h5lib *L, hid_t dset, uint64_t id, iop_stats *st);
extern long fapl_overflows; /* lists forgotten: the table was full */
void hdf5_after_fork(void);

/* hdf5_settings.c */
typedef struct {
    int n;
    struct {
        int id, outcome;
        char detail[160];
    } e[16];
} h5_outcomes;

/* HDF5 prints its error stack when a call fails (H5Eset_auto): while we
 * try a setting, nothing is printed, and the program's choice is put back. */
typedef struct {
    t_H5E_auto2 *func;
    void *data;
    int saved;
} h5_quiet;

void pend_rejected(h5_outcomes *out, const char *call, const char *why);
void quiet_on(h5lib *L, h5_quiet *q);
void quiet_off(h5lib *L, h5_quiet *q);
void h5_error(h5lib *L, char *why);
int file_setting_given(void);
hid_t dcpl_list(h5lib *L, hid_t space, hid_t dcpl_in, h5_outcomes *out);
void record_dataset(h5lib *L, hid_t dset, const h5_outcomes *out);
hid_t file_call(h5lib *L, int create, const char *name, unsigned flags, hid_t fcpl, hid_t fapl,
                double *t1);
herr_t transfer_call(h5lib *L, int op, void *fn, hid_t dset, hid_t mtype, hid_t mspace,
                     hid_t fspace, hid_t dxpl, void *buf);

/* hdf5.c */
iop_stats *dataset_opened(h5lib *L, hid_t dset, int mode, int deprecated, double t1, double t2);

/* hdf5_io.c */
void dataset_io(h5lib *L, int op, hid_t dset, hid_t mtype, hid_t mspace, hid_t fspace, hid_t dxpl,
                const void *buf, herr_t r, double t1, double t2);

#endif
