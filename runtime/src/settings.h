/* Settings applied at run time (IOPILOT_SETTINGS names a TOML file): the
 * parsed values, and the record of what became of each one.
 *
 * The file is read once, at start-up; after that nothing here allocates.
 * A file that cannot be read or parsed is recorded as an error and nothing
 * of it is applied.  The names come from iopilot_settings.h, generated from
 * src/iopilot/settings.py. */
#ifndef IOPILOT_SETTINGS_RT_H
#define IOPILOT_SETTINGS_RT_H

#include <stdint.h>

#include "../include/iopilot_settings.h"

enum {
#define IOP_X(id, table, name, kind, choices, romio) IOP_SET_##id,
    IOP_SETTINGS(IOP_X)
#undef IOP_X
    IOP_NSETTINGS
};

typedef struct {
    int set;
    int64_t i;     /* integer, size in bytes, boolean (0/1), index of an enum choice */
    int n;         /* elements of an integer array */
    int64_t a[IOP_SETTINGS_MAX_RANK];
    char text[IOP_SETTINGS_MAX_STRING + 1]; /* canonical text: MPI_Info value, trace */
} iop_setting_value;

/* Non-zero when a valid settings file was loaded: the one branch a hook
 * takes when there is none. */
extern int iop_settings_on;

/* The value of setting ``id`` from the file's plain tables; NULL when unset. */
static inline const iop_setting_value *iop_setting(int id);

/* The [mpiio] hints for ``path``: out[id] is the value of each hint
 * (patterns that match override the plain table, more specific ones last),
 * NULL for hints not given.  Returns how many are given. */
int iop_settings_hints_for(const char *path, const iop_setting_value *out[IOP_NSETTINGS]);

const char *iop_setting_name(int id); /* "cb_nodes" */
int iop_setting_table(int id);        /* IOP_ST_* */
int iop_setting_romio_only(int id);

/* Record what became of setting ``id`` at ``file_id`` (0: none) and
 * ``object`` (a dataset, a stream ...; may be NULL): counted per distinct
 * (setting, file, object, value, outcome, detail). */
void iop_setting_outcome(int id, uint64_t file_id, const char *object, const char *value,
                         int outcome, const char *detail);

extern iop_setting_value iop_settings_plain[IOP_NSETTINGS];
static inline const iop_setting_value *iop_setting(int id) {
    return iop_settings_plain[id].set ? &iop_settings_plain[id] : 0;
}

#endif
