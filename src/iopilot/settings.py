"""I/O-stack settings applied at run time, without changing the program.

A settings file is TOML.  Its tables are the layers of the I/O stack::

    [mpiio]                  # hints merged into the info of every MPI_File_open
    romio_cb_write = "disable"
    cb_nodes = 2
    [mpiio.files."*.h5"]     # hints only for paths matching the glob (fnmatch); of
                             # overlapping globs the most specific, then the last
    striping_factor = 4
    [ompi]                   # Open MPI components: OMPI_MCA_<name> in the job's environment
    io = "romio321"
    [hdf5]                   # file access, dataset creation and transfer properties
    alignment = 1048576
    chunk = [1024]
    [stdio]
    buffer_size = "1m"       # setvbuf right after a successful fopen
    [lustre]
    stripe_count = 4         # new files MPI-IO creates on Lustre
    [posix]
    direct = true            # large aligned requests bypass the page cache (O_DIRECT)
    direct_min_size = "1m"   # smaller requests keep using it

``SETTINGS`` below is the one definition of every name: its table, its type,
the values it accepts, where the runtime applies it and what it does.
``tools/gen_settings.py`` writes ``runtime/include/iopilot_settings.h`` from
it, so the C parser in ``runtime/src/settings.c`` knows exactly these names;
``tests/test_settings.py`` fails when the header is stale.

Adding a tuning parameter, on this side, is its row in ``SETTINGS``: files
(``iopilot run --settings``) and spaces (``iopilot tune --space``) accept it
at once.  Then ``python tools/gen_settings.py`` rewrites the header, and the
runtime's applier for its table applies it (in runtime/src: ``mpiio.c`` for
[mpiio] and [lustre], ``hdf5_settings.c`` for [hdf5], ``stdio.c`` for
[stdio], ``direct.c`` for [posix]; an [ompi] name needs none, ``job_env``
exports it); its test goes in tests/.  An [hdf5] name with ``tune`` values is
in the space ``iopilot tune`` generates for a program that uses HDF5; other
names join a generated space once ``tune/generate.py`` has a rule for them.

The functions here are the API other tools call: ``load`` / ``validate``
check a file, ``dump`` writes one back, ``job_env`` gives the Open MPI
variables to export.  This module imports nothing from iopilot but its errors,
its records and its reader of user files (``iopilot.userfiles``: size and
depth limits): ``iopilot run`` and ``iopilot tune`` both stand on it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ._record import record
from .errors import InputError
from .userfiles import clip, load_toml, quote, short_errors, suggest

# Value kinds.  The C header names them IOP_SK_<KIND>; never reorder.
KINDS: tuple[str, ...] = ("str", "enum", "int", "size", "bool", "ints")

# What became of a setting, as the runtime records it; never reorder.
OUTCOMES: tuple[str, ...] = ("applied", "ignored", "not_applicable", "rejected")

# Bounds the C runtime holds in fixed arrays (the parser refuses more).
MAX_STRING = 255  # characters of a string value or a file pattern
MAX_PATTERNS = 16  # [mpiio.files."..."] tables
MAX_RANK = 32  # elements of an integer array (HDF5's H5S_MAX_RANK)
MAX_INT = 2**63 - 1

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_SCALE = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}

_ENABLE = ("enable", "disable", "automatic")
_ROMIO = ("cb_config_list", "ind_rd_buffer_size", "ind_wr_buffer_size")  # and romio_*


@record(frozen=True)
class Setting:
    """One name a settings file may hold."""

    table: str  # one of TABLES
    name: str  # the key; for [mpiio] the MPI hint's name
    kind: str  # one of KINDS
    where: str  # where the runtime applies it
    help: str
    choices: tuple[str, ...] = ()  # allowed values of an "enum"
    # Values the generated search space tries (``iopilot tune`` without
    # ``--space``, for the HDF5 layer); empty: tried only when a space names it.
    tune: tuple[Any, ...] = ()

    @property
    def romio_only(self) -> bool:
        """An MPI-IO hint only ROMIO reads: Open MPI's OMPIO ignores it."""
        return self.table == "mpiio" and (self.name.startswith("romio_") or self.name in _ROMIO)

    @property
    def layer(self) -> str:
        """The layer of the I/O stack the setting belongs to."""
        return {"mpiio": "MPI-IO", "ompi": "Open MPI", "hdf5": "HDF5", "stdio": "STDIO",
                "lustre": "Lustre", "posix": "POSIX"}[self.table]  # fmt: skip


_OPEN = "MPI_File_open"
_ENV = "job environment"
_FILE = "H5Fcreate/H5Fopen"
_CREATE = "MPI_File_open(MPI_MODE_CREATE) on Lustre"

SETTINGS: tuple[Setting, ...] = (
    # -- MPI-IO hints (ROMIO and OMPIO names); values go into the MPI_Info as strings.
    Setting("mpiio", "romio_cb_write", "enum", _OPEN, "collective buffering of writes", _ENABLE),
    Setting("mpiio", "romio_cb_read", "enum", _OPEN, "collective buffering of reads", _ENABLE),
    Setting("mpiio", "romio_ds_write", "enum", _OPEN, "data sieving of writes", _ENABLE),
    Setting("mpiio", "romio_ds_read", "enum", _OPEN, "data sieving of reads", _ENABLE),
    Setting(
        "mpiio",
        "romio_no_indep_rw",
        "bool",
        _OPEN,
        "only collective I/O: non-aggregators never open the file",
    ),
    Setting(
        "mpiio", "romio_lustre_co_ratio", "int", _OPEN, "Lustre: clients (aggregators) per OST"
    ),
    Setting(
        "mpiio",
        "romio_cb_fr_types",
        "enum",
        _OPEN,
        "collective buffering for file realms of derived types",
        _ENABLE,
    ),
    Setting("mpiio", "cb_nodes", "int", _OPEN, "number of collective-buffering aggregators"),
    Setting("mpiio", "cb_buffer_size", "size", _OPEN, "collective buffer per aggregator"),
    Setting("mpiio", "cb_config_list", "str", _OPEN, 'aggregator placement, e.g. "*:1"'),
    Setting("mpiio", "ind_rd_buffer_size", "size", _OPEN, "data-sieving buffer for reads"),
    Setting("mpiio", "ind_wr_buffer_size", "size", _OPEN, "data-sieving buffer for writes"),
    Setting("mpiio", "striping_factor", "int", _OPEN, "stripe count of a file MPI-IO creates"),
    Setting("mpiio", "striping_unit", "size", _OPEN, "stripe size of a file MPI-IO creates"),
    Setting("mpiio", "collective_buffering", "bool", _OPEN, "ask for collective buffering"),
    Setting("mpiio", "access_style", "str", _OPEN, "how the file is accessed, e.g. write_once"),
    Setting("mpiio", "direct_read", "bool", _OPEN, "O_DIRECT reads (some file systems)"),
    Setting("mpiio", "direct_write", "bool", _OPEN, "O_DIRECT writes (some file systems)"),
    # -- Open MPI component choices, exported as OMPI_MCA_<name> before the job starts.
    Setting("ompi", "io", "str", _ENV, "MPI-IO component: ompio or romio321"),
    Setting("ompi", "fcoll", "str", _ENV, "OMPIO collective algorithm, e.g. two_phase"),
    Setting("ompi", "fbtl", "str", _ENV, "OMPIO byte-transfer component, e.g. posix"),
    Setting("ompi", "fs", "str", _ENV, "OMPIO file-system component, e.g. ufs, lustre"),
    Setting("ompi", "sharedfp", "str", _ENV, "OMPIO shared file pointer component"),
    Setting("ompi", "io_ompio_num_aggregators", "int", _ENV, "OMPIO aggregators"),
    Setting("ompi", "io_ompio_bytes_per_agg", "size", _ENV, "OMPIO buffer per aggregator"),
    Setting("ompi", "io_ompio_cycle_buffer_size", "size", _ENV, "OMPIO data per cycle"),
    # -- HDF5 property lists, copied from the program's and changed in the copy.
    Setting("hdf5", "alignment", "size", _FILE, "H5Pset_alignment: object alignment",
            tune=("64k", "1m", "4m")),
    Setting(
        "hdf5",
        "alignment_threshold",
        "size",
        _FILE,
        "H5Pset_alignment: objects at least this large are aligned",
    ),
    Setting("hdf5", "sieve_buf_size", "size", _FILE, "H5Pset_sieve_buf_size",
            tune=("64k", "1m", "4m")),
    Setting("hdf5", "meta_block_size", "size", _FILE, "H5Pset_meta_block_size", tune=("64k", "1m")),
    Setting(
        "hdf5",
        "coll_metadata_ops",
        "bool",
        _FILE,
        "H5Pset_all_coll_metadata_ops (parallel HDF5 only)",
    ),
    Setting(
        "hdf5",
        "coll_metadata_write",
        "bool",
        _FILE,
        "H5Pset_coll_metadata_write (parallel HDF5 only)",
    ),
    Setting(
        "hdf5",
        "page_buffer_size",
        "size",
        _FILE,
        "H5Pset_page_buffer_size (needs the paged file-space strategy; 0 = off)",
    ),
    Setting("hdf5", "chunk_cache_size", "size", _FILE,
            "H5Pset_cache: bytes of the chunk cache of each dataset (HDF5's default 1 MiB, "
            "too small for chunks above it)"),
    Setting(
        "hdf5",
        "chunk",
        "ints",
        "H5Dcreate",
        "H5Pset_chunk: chunk shape, for datasets of the same rank",
    ),
    Setting(
        "hdf5", "fill_time", "enum", "H5Dcreate", "H5Pset_fill_time", ("never", "alloc", "ifset")
    ),
    Setting(
        "hdf5",
        "transfer",
        "enum",
        "H5Dwrite/H5Dread",
        "H5Pset_dxpl_mpio (files opened with the MPI-IO driver)",
        ("collective", "independent"),
    ),
    # -- STDIO
    Setting("stdio", "buffer_size", "size", "fopen", "setvbuf(_IOFBF) after a successful fopen"),
    # -- Lustre (applied only when the file system is Lustre)
    Setting("lustre", "stripe_count", "int", _CREATE, "stripes of new files"),
    Setting("lustre", "stripe_size", "size", _CREATE, "stripe size of new files"),
    # -- POSIX: direct I/O as a mechanism, chosen per request by size and alignment
    Setting("posix", "direct", "bool", "open",
            "requests of at least direct_min_size whose offset and length are multiples "
            "of 4 KiB go through a second, O_DIRECT descriptor of the file"),
    Setting("posix", "direct_min_size", "size", "open",
            "smallest request sent with O_DIRECT (default 1 MiB); smaller ones stay buffered"),
)

TABLES: tuple[str, ...] = ("mpiio", "ompi", "hdf5", "stdio", "lustre", "posix")
BY_KEY: dict[tuple[str, str], Setting] = {(s.table, s.name): s for s in SETTINGS}


def parse_size(value: int | str) -> int:
    """Bytes of a size: an integer, or a string such as ``"4k"``, ``"1m"``, ``"2GiB"``."""
    if isinstance(value, bool):
        raise ValueError("expected a size, not a boolean")
    if isinstance(value, int):
        n = value
    else:
        m = _SIZE.match(value)
        if not m:
            raise ValueError(f'{quote(value)} is not a size (an integer or e.g. "4k", "1m")')
        n = int(m.group(1)) * _SCALE[m.group(2).lower()]
    if n < 0:
        raise ValueError(f"{quote(value)}: a size cannot be negative")
    if n > MAX_INT:
        raise ValueError(f"{quote(value)} is too large")
    return n


def _check_value(s: Setting, value: Any) -> None:
    """Raise ValueError saying why ``value`` does not fit ``s``."""
    kind = s.kind
    if kind == "size":
        if not isinstance(value, int | str) or isinstance(value, bool):
            raise ValueError(f"expected a size (integer or string like \"1m\"), got "
                             f"{type(value).__name__}")  # fmt: skip
        parse_size(value)
    elif kind == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"expected an integer, got {type(value).__name__}")
        if not 0 <= value <= MAX_INT:
            raise ValueError(f"{value} is out of range (0 or more)")
    elif kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {type(value).__name__}")
    elif kind in ("str", "enum"):
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {type(value).__name__}")
        if not value or len(value) > MAX_STRING or any(c in value for c in "\n\t\x00"):
            raise ValueError(f"{quote(value)}: 1 to {MAX_STRING} characters, no tabs or newlines")
        if kind == "enum" and value not in s.choices:
            raise ValueError(f"{quote(value)} is not one of {', '.join(s.choices)}")
    elif kind == "ints":
        if not isinstance(value, list) or not value:
            raise ValueError("expected a non-empty array of integers")
        if len(value) > MAX_RANK:
            raise ValueError(f"at most {MAX_RANK} elements")
        for x in value:
            if not isinstance(x, int) or isinstance(x, bool) or not 1 <= x <= MAX_INT:
                raise ValueError(f"{quote(x)}: elements must be positive integers")


def _check_table(doc: dict, table: str, label: str, where: str) -> None:
    for key, value in doc.items():
        if table == "mpiio" and key == "files" and label == "mpiio":
            _check_patterns(value, where)
            continue
        s = BY_KEY.get((table, key))
        if s is None:
            known = [x.name for x in SETTINGS if x.table == table]
            raise InputError(where, f"[{label}] {clip(key)}: unknown name",
                             suggest(key, known, f"known: {', '.join(known)}"))
        try:
            _check_value(s, value)
        except ValueError as e:
            raise InputError(where, f"[{label}] {clip(key)}: {e}") from None


def _check_patterns(files: Any, where: str) -> None:
    if not isinstance(files, dict):
        raise InputError(where, '[mpiio] files: expected tables [mpiio.files."GLOB"]')
    if len(files) > MAX_PATTERNS:
        raise InputError(where, f"[mpiio.files]: at most {MAX_PATTERNS} patterns")
    for pattern, hints in files.items():
        label = f"mpiio.files.{clip(json.dumps(pattern))}"
        if not pattern or len(pattern) > MAX_STRING or any(c in pattern for c in "\n\t\x00"):
            raise InputError(where, f"[{label}]: a pattern has 1 to {MAX_STRING} characters")
        if not isinstance(hints, dict):
            raise InputError(where, f"[{label}]: expected a table of hints")
        if "files" in hints:
            raise InputError(where, f"[{label}] files: unknown name (patterns do not nest)")
        _check_table(hints, "mpiio", label, where)


def validate(doc: dict, where: str) -> None:
    """Raise InputError(where, reason) when ``doc`` is not a valid settings document;
    the reason names the table, the key and why."""
    if not isinstance(doc, dict):
        raise InputError(where, "a settings document is a table")
    for table, body in doc.items():
        if table not in TABLES:
            raise InputError(where, f"[{clip(table)}]: unknown table",
                             suggest(table, TABLES, f"known: {', '.join(TABLES)}"))
        if not isinstance(body, dict):
            raise InputError(where, f"{table}: expected a table [{table}]")
        _check_table(body, table, table, where)


def read_toml(path: str | Path) -> dict:
    """A TOML file as a dict, within the limits of :mod:`iopilot.userfiles`
    (1 MiB, 32 levels); InputError naming the file when it cannot be read."""
    with short_errors():
        return load_toml(path)


def load(path: str | Path) -> dict:
    """The settings document in ``path``, checked; InputError when it cannot be used."""
    with short_errors():
        doc = read_toml(path)
        validate(doc, str(path))
    return doc


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(x) for x in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as a setting")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def dump(doc: dict, path: Path) -> None:
    """Write ``doc`` as a settings file that ``load`` reads back equal."""
    validate(doc, str(path))
    lines: list[str] = []
    for table in TABLES:
        body = doc.get(table)
        if body is None:
            continue
        plain = {k: v for k, v in body.items() if not (table == "mpiio" and k == "files")}
        lines.append(f"[{table}]")
        lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in plain.items()]
        lines.append("")
        if table == "mpiio":
            for pattern, hints in body.get("files", {}).items():
                lines.append(f"[mpiio.files.{json.dumps(pattern)}]")
                lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in hints.items()]
                lines.append("")
    Path(path).write_text("\n".join(lines))


def job_env(doc: dict) -> dict[str, str]:
    """The Open MPI variables (``OMPI_MCA_<name>``) for the [ompi] table."""
    out: dict[str, str] = {}
    for key, value in doc.get("ompi", {}).items():
        s = BY_KEY[("ompi", key)]
        out[f"OMPI_MCA_{key}"] = str(parse_size(value)) if s.kind == "size" else str(value)
    return out


def hint_value(s: Setting, value: Any) -> str:
    """The string an MPI_Info holds for an [mpiio] value (sizes in bytes)."""
    if s.kind == "bool":
        return "true" if value else "false"
    if s.kind == "size":
        return str(parse_size(value))
    return str(value)
