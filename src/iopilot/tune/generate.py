"""From a diagnosis to what to tune: the order in which the guided search
changes settings, and a search space when none was given.

The diagnosis of the default run names problems (small writes to a shared
file, collective I/O that costs more than its POSIX writes, misaligned
accesses, HDF5 metadata reads...); each problem points at the settings that
can change it.  A setting's weight is the seconds at stake in the findings
that point at it.
"""

from __future__ import annotations

import re
from typing import Any

from .. import settings as st
from ..errors import InputError
from ..vocabulary import RUNTIME_LAYERS
from .space import Space, from_dict

_CB = ["mpiio.romio_cb_write", "mpiio.romio_cb_read", "mpiio.cb_nodes", "mpiio.cb_buffer_size"]
_COMPONENTS = ["ompi.io", "ompi.fcoll", "ompi.io_ompio_num_aggregators"]

# Check-id fragments -> the settings that act on what the check measures.
POINTS_AT: tuple[tuple[str, list[str]], ...] = (
    ("mpiio-collective", ["ompi.io", *_CB, "ompi.fcoll"]),
    ("mpiio-time-above-posix", ["ompi.io", *_CB, "ompi.fcoll", "ompi.io_ompio_num_aggregators"]),
    ("mpiio-aggregators", ["mpiio.cb_nodes", "ompi.io_ompio_num_aggregators", "ompi.io"]),
    ("mpiio-read-modify-write", ["mpiio.romio_ds_write", "mpiio.ind_wr_buffer_size", "ompi.io"]),
    ("mpiio-blocking", ["ompi.io", "ompi.fcoll"]),
    ("posix-shared-small", ["ompi.io", *_CB, "mpiio.romio_ds_write"]),
    ("posix-shared", ["ompi.io", *_CB]),
    ("posix-small", ["stdio.buffer_size", "mpiio.romio_ds_write", "hdf5.sieve_buf_size"]),
    ("misaligned", ["hdf5.alignment", "mpiio.striping_unit", "lustre.stripe_size"]),
    ("hdf5-alignment", ["hdf5.alignment", "hdf5.alignment_threshold"]),
    ("hdf5-chunking", ["hdf5.chunk"]),
    ("hdf5-chunk-cache", ["hdf5.chunk_cache_size", "hdf5.chunk"]),
    ("hdf5-independent", ["hdf5.transfer"]),
    ("hdf5-metadata", ["hdf5.coll_metadata_ops", "hdf5.coll_metadata_write",
                       "hdf5.meta_block_size"]),
    ("hdf5-small-dataset", ["hdf5.sieve_buf_size", "hdf5.page_buffer_size"]),
    ("stdio", ["stdio.buffer_size"]),
    ("lustre", ["lustre.stripe_count", "lustre.stripe_size", "mpiio.striping_factor",
                "mpiio.striping_unit"]),
)
_TABLES_OF_LAYER = {"MPIIO": ("mpiio", "ompi"),
                    "POSIX": ("mpiio", "ompi", "stdio", "lustre", "posix"),
                    "HDF5": ("hdf5",), "STDIO": ("stdio",), "LUSTRE": ("lustre",)}  # fmt: skip


def _setting_name(param_name: str) -> str:
    """``mpiio.files."*.h5".cb_nodes`` weighs as ``mpiio.cb_nodes``."""
    parts = param_name.split(".")
    return f"{parts[0]}.{parts[-1]}"


def weights(findings: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds at stake per setting name, from the findings that point at it."""
    out: dict[str, float] = {}
    for f in findings:
        if f.get("level") in ("OK", "INFO"):
            continue
        w = float(f.get("cost_seconds") or 0.0) + 1e-6  # a finding counts even when cheap
        check = str(f.get("check", ""))
        for fragment, names in POINTS_AT:
            if fragment in check:
                for rank, n in enumerate(names):  # earlier names act more directly
                    out[n] = out.get(n, 0.0) + w / (1 + 0.1 * rank)
        for table in _TABLES_OF_LAYER.get(str(f.get("layer", "")), ()):
            out[f"{table}.*"] = out.get(f"{table}.*", 0.0) + 0.01 * w
    return out


def rank(space: Space, findings: list[dict[str, Any]]) -> list[str]:
    """Parameter names, those the findings weigh most first; a condition always
    comes before the parameters it guards (they are only tried under it)."""
    w = weights(findings)
    order = {p.name: i for i, p in enumerate(space.params)}

    def own(name: str) -> float:
        s = _setting_name(name)
        return w.get(s, 0.0) + w.get(f"{s.split('.')[0]}.*", 0.0)

    # A condition is worth what the parameters it unlocks are worth.
    score = {p.name: own(p.name) for p in space.params}
    for p in reversed(space.params):
        for cond in p.when:
            score[cond] = max(score[cond], score[p.name])
    ranked = sorted(space.params, key=lambda p: (-score[p.name], order[p.name]))
    out: list[str] = []

    def emit(name: str) -> None:
        if name in out:
            return
        for cond in space.by_name[name].when:
            emit(cond)
        out.append(name)

    for p in ranked:
        emit(p.name)
    return out


def direct_io_fits(observed: dict[str, Any]) -> bool:
    """Whether direct I/O is worth a trial: at least half of the POSIX reads
    and writes are above 100 KiB, and at most a quarter at offsets off the
    file system's alignment (O_DIRECT takes only aligned requests)."""
    for s in observed.get("layer_summaries", []):
        if s.get("layer") == "POSIX":
            n = int(s.get("reads", 0)) + int(s.get("writes", 0))
            return (n > 0 and 2 * int(s.get("large_requests", 0)) >= n
                    and 4 * int(s.get("misaligned", 0)) <= n)  # fmt: skip
    return False


def chunk_shapes(findings: list[dict[str, Any]]) -> list[list[int]]:
    """Chunk shapes worth a trial: the chunking finding's suggestion (sized
    from the accesses and the dataset), half and twice it; none without it."""
    for f in findings:
        if f.get("check") == "hdf5-chunking":
            text = str((f.get("evidence") or {}).get("suggested_dims", ""))
            dims = [int(x) for x in re.findall(r"\d+", text)]
            if dims and all(dims):
                return [dims, [max(1, d // 2) for d in dims], [2 * d for d in dims]]
    return []


# HDF5's chunk cache of a dataset when the program sets none, and the most a
# generated space offers (the cache is memory of each open dataset).
DEFAULT_CHUNK_CACHE = 1024 * 1024
MAX_CHUNK_CACHE = 1024**3


def _size_text(n: int) -> str:
    """A power of two of at least 1 MiB as a settings file writes it: 8m, 1g."""
    return f"{n >> 30}g" if n % 2**30 == 0 else f"{n >> 20}m"


def chunk_cache_sizes(findings: list[dict[str, Any]]) -> list[str]:
    """Chunk cache sizes worth a trial: room for every chunk one access
    touches (the chunk-cache finding's ``chunk_bytes_per_access``, rounded
    up to a power of two) and twice that, at most 1 GiB; none when those
    chunks fit HDF5's default cache of 1 MiB."""
    for f in findings:
        if f.get("check") == "hdf5-chunk-cache":
            touched = int((f.get("evidence") or {}).get("chunk_bytes_per_access") or 0)
            if touched <= DEFAULT_CHUNK_CACHE:
                return []
            fit = 1 << (touched - 1).bit_length()
            sizes = dict.fromkeys(min(n, MAX_CHUNK_CACHE) for n in (fit, 2 * fit))
            return [_size_text(n) for n in sizes]
    return []


def generate(observed: dict[str, Any]) -> Space:
    """A search space for what the default run showed: the layers its I/O went
    through, the findings and the number of processes."""
    findings = [f for f in observed.get("findings", []) if f.get("level") not in ("OK",)]
    # The layers the trace saw calls of: a setting of another layer cannot
    # change this program's I/O (a finding may name MPI in a POSIX-only job).
    layers = set(observed.get("layers", []))
    uses_mpiio = bool(layers & {"MPI-IO", "MPIIO"})
    uses_hdf5 = bool(layers & {"HDF5", "H5D", "H5F"})  # a trace's HDF5 is H5D and H5F
    checks = " ".join(str(f.get("check", "")) for f in findings)
    nprocs = max(1, int(observed.get("nprocs") or 1))
    doc: dict[str, Any] = {}
    mpiio: dict[str, Any] = {}
    ompi: dict[str, Any] = {}
    if uses_mpiio:
        romio = {"ompi.io": "romio321"}
        ompi["io"] = {"values": ["ompio", "romio321"], "default": "ompio"}
        # two_phase is far slower here: left to the timeout, and tried after the others.
        ompi["fcoll"] = {"values": ["vulcan", "dynamic", "dynamic_gen2", "individual",
                                    "two_phase"], "when": {"ompi.io": "ompio"}}  # fmt: skip
        reads = "read" in checks
        mpiio["romio_cb_write"] = {"values": ["enable", "disable", "automatic"],
                                   "default": "automatic", "when": romio}  # fmt: skip
        mpiio["romio_ds_write"] = {"values": ["enable", "disable", "automatic"],
                                   "default": "automatic", "when": romio}  # fmt: skip
        if reads:
            mpiio["romio_cb_read"] = {"values": ["enable", "disable", "automatic"],
                                      "default": "automatic", "when": romio}  # fmt: skip
        mpiio["cb_buffer_size"] = {"low": "1m", "high": "64m", "log": True, "when": romio}
        if nprocs > 1:
            mpiio["cb_nodes"] = {"low": 1, "high": nprocs, "log": True,
                                 "when": {"mpiio.romio_cb_write": "enable"}}  # fmt: skip
            ompi["io_ompio_num_aggregators"] = {"low": 1, "high": nprocs, "log": True,
                                                "when": {"ompi.io": "ompio"}}  # fmt: skip
    if uses_hdf5:
        # The settings table says which [hdf5] names are tried, with what values.
        doc["hdf5"] = {s.name: {"values": list(s.tune)} for s in st.SETTINGS
                       if s.table == "hdf5" and s.tune}  # fmt: skip
        shapes = chunk_shapes(findings)
        if shapes:
            doc["hdf5"]["chunk"] = {"values": shapes}
        caches = chunk_cache_sizes(findings)
        if caches:
            doc["hdf5"]["chunk_cache_size"] = {"values": caches}
        if uses_mpiio:
            doc["hdf5"]["coll_metadata_ops"] = {"values": [True, False]}
            doc["hdf5"]["transfer"] = {"values": ["collective", "independent"]}
    if "STDIO" in layers:
        doc["stdio"] = {"buffer_size": {"values": ["64k", "1m", "8m"]}}
    if direct_io_fits(observed):
        doc["posix"] = {"direct": {"values": [False, True], "default": False},
                        "direct_min_size": {"values": ["128k", "1m", "4m"],
                                            "when": {"posix.direct": True}}}  # fmt: skip
    if ompi:
        doc["ompi"] = ompi
    if mpiio:
        doc["mpiio"] = mpiio
    if not doc:
        raise InputError("iopilot tune", "nothing to tune: the program's I/O goes through none "
                         "of the layers a settings file reaches (MPI-IO, HDF5, STDIO), "
                         "and its POSIX requests are not large and aligned enough for "
                         "direct I/O",
                         "give a space with --space FILE")  # fmt: skip
    return from_dict(doc, "the generated space")


# A job using every layer, with the findings that bring their own values:
# the generated space at its widest, for ``iopilot tune --list-parameters``.
_EVERY_LAYER = {
    "layers": list(RUNTIME_LAYERS), "nprocs": 8,
    "findings": [{"check": "hdf5-chunking", "level": "WARN", "layer": "H5D",
                  "evidence": {"suggested_dims": "[64, 64, 64]"}},
                 {"check": "hdf5-chunk-cache", "level": "WARN", "layer": "H5D",
                  "evidence": {"chunk_bytes_per_access": 3 * 1024 * 1024}},
                 {"check": "mpiio-collective-reads", "level": "WARN", "layer": "MPIIO"}],
    "layer_summaries": [{"layer": "POSIX", "reads": 1, "writes": 1, "large_requests": 2,
                         "misaligned": 0}],
}  # fmt: skip


def parameter_lines() -> list[str]:
    """Every setting a settings file or a space may name, with what a
    generated space tries for it and when (the layer that must appear)."""
    tried = {p.name: p for p in generate(_EVERY_LAYER).params}
    when = {"mpiio": "MPI-IO calls", "ompi": "MPI-IO calls", "hdf5": "H5D/H5F calls",
            "stdio": "STDIO calls", "posix": "large aligned POSIX requests",
            "lustre": "Lustre files"}  # fmt: skip
    lines = []
    for s in st.SETTINGS:
        name = f"{s.table}.{s.name}"
        p = tried.get(name)
        if p is None:
            gen = "only when a space names it"
        elif p.values is not None:
            shown = ", ".join(str(v) for v in p.values)
            gen = f"tried with {when.get(s.table, 'its layer')}: {shown}"
            if name in ("hdf5.coll_metadata_ops", "hdf5.transfer"):
                gen = f"tried with H5D/H5F and MPI-IO calls (parallel HDF5): {shown}"
            if name == "hdf5.chunk_cache_size":
                gen = ("tried when accesses cover chunks in part and touch more chunk bytes "
                       "than HDF5's default cache of 1 MiB: room for those chunks rounded up "
                       f"to a power of two, and twice it (e.g. {shown} for 3 MiB)")  # fmt: skip
            if name == "hdf5.chunk":
                gen = (f"tried with a chunking finding: its suggested shape, half and twice "
                       f"it (e.g. {shown})")
        else:
            gen = f"tried with {when.get(s.table, 'its layer')}: {p.low}..{p.high}"
            if name.endswith(("cb_nodes", "num_aggregators")):
                gen += " (up to the number of processes)"
        lines.append(f"{name:<36} {s.kind:<5} {s.help} [{gen}]")
    return lines
