"""The names the C runtime, the Python side and the HTML page share, written once.

Everything here is plain data with no import from the rest of iopilot:

* ``MODULES``      -- the I/O layers (POSIX, MPI-IO, HDF5 ...): counter prefix,
  label, Darshan names, layer code in iopilot traces, where they sit in the stack;
* ``OP_NAMES``     -- operation codes of the per-operation records;
* ``SIZE_BINS``    -- Darshan's access-size bins, their inclusive upper edges;
* ``MPIIO_OP_CLASSES`` -- independent, collective, split and non-blocking
  MPI-IO operations, each counted per direction (``INDEP_READS`` ...);
* ``COUNTERS`` / ``FCOUNTERS`` -- the runtime's counters, in the order the
  trace format writes them.

``tools/gen_vocabulary.py`` writes ``runtime/include/iopilot_vocab.h`` from
this module (the header is committed, so the runtime builds with a C compiler
alone); the HTML page receives what it needs in its embedded data.  To add a
counter or a module, edit this file, run ``python tools/gen_vocabulary.py``
and rebuild the runtime; ``tests/test_vocabulary.py`` fails until the header
is regenerated.
"""

from __future__ import annotations

from typing import NamedTuple

# ---------------------------------------------------------------------------
# Operations of the per-operation records: the code is the index.  READ and
# WRITE move data; the others are metadata.  Never reorder: traces store codes.
# ---------------------------------------------------------------------------

OP_NAMES: tuple[str, ...] = ("read", "write", "open", "close", "seek", "sync", "stat",
                             "truncate", "mmap", "flush", "unlink", "rename", "mkdir")  # fmt: skip
OP_READ, OP_WRITE = OP_NAMES.index("read"), OP_NAMES.index("write")
DIRECTIONS: tuple[str, ...] = ("READ", "WRITE")  # as counter names spell them
# Bits of a record's ``flags`` (docs/trace-format.md).  DEFERRED: the program's
# call queued the operation (write-behind) and returned; QUEUED and BACKGROUND:
# the background thread's pair of records for it (queued -> issued, issued ->
# completed), which readers keep apart from the program's records.
RECORD_FLAGS: dict[str, int] = {"COLLECTIVE": 0x1, "NONBLOCKING": 0x2, "ERROR": 0x4,
                                "DEFERRED": 0x8, "QUEUED": 0x10, "BACKGROUND": 0x20}  # fmt: skip

# ---------------------------------------------------------------------------
# Darshan's access-size histogram: each upper edge belongs to its bin
# (SIZE_*_0_100 holds 0..100 bytes, exactly 1 MiB is in 100K_1M); the last
# bin is open-ended (its edge is the largest int64).
# ---------------------------------------------------------------------------

_KIB, _MIB, _GIB = 1 << 10, 1 << 20, 1 << 30
_SIZE_HISTOGRAM = (
    # name, inclusive upper edge, label
    ("0_100", 100, "0–100 B"),
    ("100_1K", _KIB, "100 B–1 KiB"),
    ("1K_10K", 10 * _KIB, "1–10 KiB"),
    ("10K_100K", 100 * _KIB, "10–100 KiB"),
    ("100K_1M", _MIB, "100 KiB–1 MiB"),
    ("1M_4M", 4 * _MIB, "1–4 MiB"),
    ("4M_10M", 10 * _MIB, "4–10 MiB"),
    ("10M_100M", 100 * _MIB, "10–100 MiB"),
    ("100M_1G", _GIB, "100 MiB–1 GiB"),
    ("1G_PLUS", 2**63 - 1, "≥ 1 GiB"),
)
SIZE_BINS: tuple[str, ...] = tuple(b[0] for b in _SIZE_HISTOGRAM)
SIZE_BIN_UPPER: tuple[int, ...] = tuple(b[1] for b in _SIZE_HISTOGRAM)
SIZE_BIN_LABELS: tuple[str, ...] = tuple(b[2] for b in _SIZE_HISTOGRAM)

# ---------------------------------------------------------------------------
# MPI-IO operation classes, as Darshan counts them (MPIIO_<CLASS>_READS ...).
# ---------------------------------------------------------------------------

MPIIO_OP_CLASSES: dict[str, str] = {
    "INDEP": "independent",  # MPI_File_read_at, _write, _read_shared ...
    "COLL": "collective",  # the _all and _ordered forms
    "SPLIT": "split collective",  # _all_begin/_end pairs, counted at the end
    "NB": "non-blocking",  # the i* forms
}
MPIIO_COLLECTIVE: tuple[str, ...] = ("COLL", "SPLIT")


def mpiio_counters(direction: str, classes: tuple[str, ...] = tuple(MPIIO_OP_CLASSES)
                   ) -> tuple[str, ...]:  # fmt: skip
    """Darshan's names of the MPI-IO operation counters of ``direction``
    ("READ" or "WRITE") in ``classes`` (all by default)."""
    return tuple(f"MPIIO_{c}_{direction}S" for c in classes)


# ---------------------------------------------------------------------------
# Modules (layers).
# ---------------------------------------------------------------------------


class Module(NamedTuple):  # a named tuple: this file loads without the package
    """One I/O layer as every part of iopilot names it."""

    name: str  # layer name, also the prefix of its counters (MPIIO_BYTES_READ)
    display: str  # how reports name the layer ("MPI-IO")
    interface: str  # the interface a programmer calls ("HDF5" for H5F and H5D)
    darshan: str  # the module's name in Darshan logs
    darshan_table: str  # libdarshan-util's tables <table>_counter_names, <table>_f_...
    darshan_struct: str  # the C struct of one Darshan record
    code: int | None = None  # layer code in iopilot traces; None: not traced by the runtime
    switch: str = ""  # its name in IOPILOT_LAYERS / --layers ("HDF5" covers H5F and H5D)
    records: bool = False  # per-operation records (iopilot traces, Darshan's DXT)
    level: int = 0  # place in the stack: 1 file system, 2 MPI-IO (and the Fortran
    # runtime's statements, also just above the file system), 3 HDF5 above them;
    # 0 outside that stack (object stores)
    op_classes: tuple[str, ...] = ()  # <class><READS|WRITES> count its data operations
    histogram: bool = False  # Darshan keeps its access-size histogram (SIZE_READ_* ...)
    agg_sizes: bool = False  # size bins count aggregate request sizes (SIZE_READ_AGG_*)
    parent: bool = False  # a row is part of a file (a dataset, a variable)

    def op_counters(self, direction: str) -> tuple[str, ...]:
        """Counters of its read ("READ") or write ("WRITE") operations."""
        return tuple(f"{self.name}_{c}{direction}S" for c in self.op_classes)

    def size_counter(self, direction: str, size_bin: str) -> str:
        """Darshan's name of one size-histogram counter."""
        return f"{self.name}_SIZE_{direction}_{'AGG_' if self.agg_sizes else ''}{size_bin}"

    def darshan_name(self, raw: str) -> str:
        """Darshan's name of a runtime counter: ``SIZE_READ_0_100`` of MPI-IO is
        ``MPIIO_SIZE_READ_AGG_0_100``."""
        if self.agg_sizes and raw.startswith("SIZE_"):
            raw = raw.replace("SIZE_READ_", "SIZE_READ_AGG_").replace("SIZE_WRITE_",
                                                                      "SIZE_WRITE_AGG_")
        return f"{self.name}_{raw}"


_MPIIO_OPS = tuple(f"{c}_" for c in MPIIO_OP_CLASSES)

# In the order reports list them.  Positional: name, display, interface, Darshan
# module, Darshan counter tables, Darshan struct; the rest by keyword.
MODULES: tuple[Module, ...] = (
    Module("POSIX", "POSIX", "POSIX", "POSIX", "posix", "darshan_posix_file",
           code=0, switch="POSIX", records=True, level=1, op_classes=("",), histogram=True),
    Module("MPIIO", "MPI-IO", "MPI-IO", "MPI-IO", "mpiio", "darshan_mpiio_file",
           code=2, switch="MPIIO", records=True, level=2, op_classes=_MPIIO_OPS,
           histogram=True, agg_sizes=True),
    Module("STDIO", "STDIO", "STDIO", "STDIO", "stdio", "darshan_stdio_file",
           code=1, switch="STDIO", records=True, level=1, op_classes=("",)),
    # gfortran's READ and WRITE statements, per unit's file (no Darshan module:
    # a Darshan log never has it, so no Darshan names either).
    Module("FORTRAN", "Fortran", "Fortran", "", "", "", code=5, switch="FORTRAN", level=2,
           op_classes=("",), histogram=True),
    Module("H5F", "H5F", "HDF5", "H5F", "h5f", "darshan_hdf5_file",
           code=3, switch="HDF5", records=True, level=3),
    Module("H5D", "H5D", "HDF5", "H5D", "h5d", "darshan_hdf5_dataset",
           code=4, switch="HDF5", records=True, level=3, op_classes=("",), histogram=True,
           agg_sizes=True, parent=True),
    Module("PNETCDF_FILE", "PNETCDF_FILE", "PnetCDF", "PNETCDF_FILE", "pnetcdf_file",
           "darshan_pnetcdf_file", level=3),
    Module("PNETCDF_VAR", "PNETCDF_VAR", "PnetCDF", "PNETCDF_VAR", "pnetcdf_var",
           "darshan_pnetcdf_var", level=3, op_classes=("INDEP_", "COLL_"), histogram=True,
           agg_sizes=True, parent=True),
    # DAOS object storage (Darshan 3.4+): no POSIX file system below (level 0).
    # DFS is DAOS's file interface; it reaches the store through DAOS arrays.
    Module("DFS", "DFS", "DFS", "DFS", "dfs", "darshan_dfs_file", op_classes=("",),
           histogram=True),
    Module("DAOS", "DAOS", "DAOS", "DAOS", "daos", "darshan_daos_object",
           op_classes=("ARRAY_",), histogram=True),
)  # fmt: skip
MODULE: dict[str, Module] = {m.name: m for m in MODULES}
# Layers with counters, in report order.
COUNTER_LAYERS: tuple[str, ...] = tuple(m.name for m in MODULES)
# Layer codes of the model's per-operation records (the index).
RECORD_LAYERS: tuple[str, ...] = tuple(m.name for m in MODULES if m.records)
# Layers whose calls reach the file system as they are (MPI-IO and HDF5 sit above).
FS_LAYERS: tuple[str, ...] = tuple(m.name for m in MODULES if m.level == 1)
# The runtime's layer codes (the index), as iopilot traces store them.
RUNTIME_LAYERS: tuple[str, ...] = tuple(
    m.name for m in sorted((m for m in MODULES if m.code is not None), key=lambda m: m.code or 0))
# Names IOPILOT_LAYERS and `iopilot run --layers` accept, in the runtime's order.
RUNTIME_SWITCHES: tuple[str, ...] = tuple(dict.fromkeys(MODULE[n].switch for n in RUNTIME_LAYERS))

# ---------------------------------------------------------------------------
# The runtime's counters per (layer, file, process), in the order the trace
# format writes them.  Each summary lists the names it uses and readers map
# counters by name, so a new counter may join its group; the existing ones
# keep their order.  Names are Darshan's without the layer prefix; the
# reader adds POSIX_, MPIIO_ ... and _AGG_ in the size bins of layers with
# ``agg_sizes``.
# ---------------------------------------------------------------------------

_COMMON_VALUES = tuple(f"{kind}{k}_{what}" for kind in ("ACCESS", "STRIDE")
                       for what in (kind, "COUNT") for k in range(1, 5))  # fmt: skip
COUNTERS: tuple[str, ...] = (
    "OPENS", "FILENOS", "FDOPENS", "DUPS", "READS", "WRITES", "SEEKS", "STATS", "MMAPS",
    "FSYNCS", "FDSYNCS", "RANGE_SYNCS", "FLUSHES", "RENAME_SOURCES", "RENAME_TARGETS", "BYTES_READ",
    "BYTES_WRITTEN", "MAX_BYTE_READ", "MAX_BYTE_WRITTEN", "CONSEC_READS", "CONSEC_WRITES",
    "SEQ_READS", "SEQ_WRITES", "RW_SWITCHES", "MEM_NOT_ALIGNED", "MEM_ALIGNMENT",
    "MAX_READ_TIME_SIZE", "MAX_WRITE_TIME_SIZE", "FILE_NOT_ALIGNED", "FILE_ALIGNMENT",
    *(f"SIZE_{d}_{b}" for d in DIRECTIONS for b in SIZE_BINS),
    # MPI-IO
    "INDEP_OPENS", "COLL_OPENS",
    *(f"{c}_{d}S" for c in MPIIO_OP_CLASSES for d in DIRECTIONS),
    "SYNCS", "HINTS", "VIEWS", "MODE",
    # HDF5
    "CREATES", "USE_MPIIO", "USE_MPIIO_COLLECTIVE", "DATASPACE_NDIMS", "DATASPACE_NPOINTS",
    "DATATYPE_SIZE", *(f"CHUNK_SIZE_D{k}" for k in range(1, 6)), "REGULAR_HYPERSLAB_SELECTS",
    "IRREGULAR_HYPERSLAB_SELECTS", "POINT_SELECTS", "ALIGNMENT_THRESHOLD", "ALIGNMENT",
    # Darshan's four most common access sizes and strides
    *_COMMON_VALUES,
    # HDF5: how the last open was made, and each H5D access size's shape: the
    # length (count x block) and stride of the selection, D1 = dimension 4 ...
    # D5 = dimension 0 as Darshan fills them; one tuple's ten are consecutive.
    "USE_DEPRECATED",
    *(f"ACCESS{k}_{what}_D{d}" for k in range(1, 5) for what in ("LENGTH", "STRIDE")
      for d in range(1, 6)),
    # Fortran statements (READS and WRITES count statements, BYTES_* the items'
    # kind x count): formatted (with a format or list-directed) and unformatted,
    # items transferred, array items whose size could not be read, and the
    # statement site (source file name id, line) that took the most time.
    *(f"{form}_{d}S" for form in ("FORMATTED", "UNFORMATTED") for d in DIRECTIONS),
    "ITEMS_READ", "ITEMS_WRITTEN", "ARRAYS_UNSIZED", "SITE_SOURCE", "SITE_LINE",
    "SITE_STATEMENTS", "SITE_BYTES",
)  # fmt: skip
# Floating-point counters (seconds; timestamps relative to the process's t0).
FCOUNTERS: tuple[str, ...] = (
    *(f"F_{what}_{edge}_TIMESTAMP" for edge in ("START", "END")
      for what in ("OPEN", "READ", "WRITE", "CLOSE")),
    "F_READ_TIME", "F_WRITE_TIME", "F_META_TIME", "F_MAX_READ_TIME", "F_MAX_WRITE_TIME",
    "F_SITE_TIME",  # Fortran: time in the statements of SITE_LINE
)  # fmt: skip
# Counters (suffixes of Darshan's names) whose rows combine with max, not a sum.
MAX_COUNTERS: tuple[str, ...] = (
    "MAX_BYTE_READ", "MAX_BYTE_WRITTEN", "ALIGNMENT", "MODE", "USE_MPIIO",
    "USE_MPIIO_COLLECTIVE", "DATASPACE_NDIMS", "DATASPACE_NPOINTS", "DATATYPE_SIZE",
    *(f"CHUNK_SIZE_D{k}" for k in range(1, 6)), "USE_DEPRECATED", "F_MAX_READ_TIME",
    "F_MAX_WRITE_TIME", "SITE_SOURCE", "SITE_LINE",
    "END_TIMESTAMP",
)  # fmt: skip
