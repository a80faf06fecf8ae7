"""h5bench configuration files as input to the vpicio and bdcats kernels.

``kernel_runs(path)`` reads an h5bench JSON setup (top level ``mpi``, ``vol``,
``file-system``, ``directory``, ``benchmarks``) and gives, per benchmark
entry, the kernel (``write`` -> vpicio, ``read`` -> bdcats), the number of
ranks and the kernel's arguments.  Everything the kernels cannot do the way
h5bench would raises ``InputError`` naming the key and its value; nothing
that changes the I/O is dropped.

What is taken over: the rank count (``mpi.ranks``, or ``-n``/``-np`` in
``mpi.configuration``, which h5bench prefers when given); the data file,
``<directory>/<file>`` as h5bench places it (the caller creates the
directory); TIMESTEPS, DIM_1 (or NUM_PARTICLES) particles per rank,
COLLECTIVE_DATA, COLLECTIVE_METADATA, EMULATED_COMPUTE_TIME_PER_TIMESTEP,
DELAYED_CLOSE_TIMESTEPS, ALIGN/ALIGN_THRESHOLD/ALIGN_LEN (write), and
READ_OPTION FULL, PARTIAL (TO_READ_NUM_PARTICLES) or STRIDED (STRIDE_SIZE,
BLOCK_SIZE, BLOCK_CNT).  Not taken over, and so not allowed to differ from
h5bench's defaults: the launcher's other options, VOL connectors, Lustre
striping, non-CONTIG patterns, 2-D/3-D data, ASYNC mode, compression,
subfiling and file per process.  ``mpi.command`` (the launcher) and
``CSV_FILE`` (h5bench's own result file) are accepted and have no effect: the
caller launches, and the kernel's result line replaces the CSV.
"""

from __future__ import annotations

import json
import re
from typing import Any

from iopilot.errors import InputError
from iopilot.userfiles import load_json, short_errors

Run = tuple[str, int, list[str]]

# Launcher options that only say how to start processes, not what they do.
_LAUNCH_ONLY = {"--oversubscribe", "--allow-run-as-root"}
_RANK_OPTIONS = {"-n", "-np", "--np", "--ntasks"}

_COMMON = {
    "MEM_PATTERN", "FILE_PATTERN", "TIMESTEPS", "DELAYED_CLOSE_TIMESTEPS", "COLLECTIVE_DATA",
    "COLLECTIVE_METADATA", "EMULATED_COMPUTE_TIME_PER_TIMESTEP", "NUM_DIMS", "DIM_1", "DIM_2",
    "DIM_3", "NUM_PARTICLES", "CSV_FILE", "MODE", "COMPRESS", "SUBFILING", "FILE_PER_PROC",
    "IO_MEM_LIMIT",
}  # fmt: skip
_WRITE = _COMMON | {"ALIGN", "ALIGN_THRESHOLD", "ALIGN_LEN"}
_READ = _COMMON | {"READ_OPTION", "TO_READ_NUM_PARTICLES", "STRIDE_SIZE", "BLOCK_SIZE", "BLOCK_CNT"}

_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_TIME_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "m": 60.0, "min": 60.0}


def kernel_runs(path: str) -> list[Run]:
    """(kernel, ranks, arguments) for each benchmark of the h5bench setup at ``path``
    (at most 1 MiB and 32 levels deep: :mod:`iopilot.userfiles`)."""
    with short_errors():
        return _runs(path, load_json(path))


def _runs(path: str, setup: Any) -> list[Run]:
    if not isinstance(setup, dict):
        raise InputError(path, "not an h5bench setup: the top level must be a JSON object")
    top = {"mpi", "vol", "file-system", "directory", "benchmarks"}
    for key in setup:
        if key not in top:
            raise InputError(path, f"unknown top-level key {key!r}")
    for key in sorted(top - set(setup)):
        raise InputError(path, f"no {key!r}: h5bench needs all of {', '.join(sorted(top))}")
    for key in ("vol", "file-system"):
        if setup[key]:
            raise InputError(
                path,
                f"{key} = {json.dumps(setup[key])}: not supported "
                "(VOL connectors and Lustre striping are not applied)",
            )
    ranks = _ranks(path, setup["mpi"])
    directory = setup["directory"]
    if not isinstance(directory, str):
        raise InputError(path, f"directory = {json.dumps(directory)}: expected a string")
    benchmarks = setup["benchmarks"]
    if not isinstance(benchmarks, list):
        raise InputError(path, "benchmarks: expected a list")
    return [_run(path, f"benchmarks[{i}]", b, ranks, directory) for i, b in enumerate(benchmarks)]


def _ranks(path: str, mpi: Any) -> int:
    if not isinstance(mpi, dict):
        raise InputError(path, "mpi: expected an object with command, ranks, configuration")
    for key in mpi:
        if key not in ("command", "ranks", "configuration"):
            raise InputError(path, f"mpi.{key}: unknown key")
    config = mpi.get("configuration")
    if config:
        # As h5bench: the configuration replaces ranks.
        words, ranks = str(config).split(), None
        i = 0
        while i < len(words):
            word = words[i]
            if word in _RANK_OPTIONS and i + 1 < len(words):
                ranks = _count(path, f"mpi.configuration {word}", words[i + 1])
                i += 2
                continue
            if word not in _LAUNCH_ONLY:
                raise InputError(
                    path,
                    f"mpi.configuration: launcher option {word!r} "
                    "is not supported (only -n/-np and "
                    f"{', '.join(sorted(_LAUNCH_ONLY))})",
                )
            i += 1
        if ranks is None:
            raise InputError(path, f"mpi.configuration = {config!r} sets no process count (-n N)")
    elif "ranks" in mpi:
        ranks = _count(path, "mpi.ranks", mpi["ranks"])
    else:
        raise InputError(path, "mpi: no ranks and no configuration")
    if ranks < 1:
        raise InputError(path, f"mpi: {ranks} ranks; at least 1 is needed")
    return ranks


def _count(path: str, key: str, value: Any) -> int:
    """A whole number, with h5bench's optional K/M/G/T suffix (powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGTkmgt]?)\s*", str(value))
    if isinstance(value, bool) or not m:
        raise InputError(
            path, f"{key} = {json.dumps(value)}: expected a whole number (e.g. 4096, 16 M)"
        )
    return int(m.group(1)) * _SIZE_UNITS[m.group(2).upper()]


def _seconds(path: str, key: str, value: Any) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(value))
    unit = m.group(2).lower() if m else None
    if not m or unit not in _TIME_UNITS:
        raise InputError(
            path,
            f"{key} = {json.dumps(value)}: expected a time such as '1 s', '100 ms', "
            "'500 us' or '2 min'",
        )
    return float(m.group(1)) * _TIME_UNITS[unit]


def _yes(path: str, key: str, value: Any) -> bool:
    word = str(value).upper()
    if word not in ("YES", "NO"):
        raise InputError(path, f"{key} = {json.dumps(value)}: expected YES or NO")
    return word == "YES"


def _run(path: str, where: str, entry: Any, ranks: int, directory: str) -> Run:
    if not isinstance(entry, dict):
        raise InputError(path, f"{where}: expected an object")
    kind = entry.get("benchmark")
    if kind not in ("write", "read"):
        raise InputError(
            path,
            f"{where}.benchmark = {json.dumps(kind)}: only 'write' (vpicio) "
            "and 'read' (bdcats) are supported",
        )
    for key in entry:
        if key not in ("benchmark", "file", "configuration"):
            raise InputError(path, f"{where}.{key}: unknown key")
    file = entry.get("file")
    if not isinstance(file, str) or not file:
        raise InputError(path, f"{where}.file = {json.dumps(file)}: expected a file name")
    conf = entry.get("configuration")
    if not isinstance(conf, dict):
        raise InputError(path, f"{where}.configuration: expected an object")
    writing = kind == "write"
    known = _WRITE if writing else _READ
    at = f"{where}.configuration."
    for key in conf:
        if key not in known:
            raise InputError(
                path, f"{at}{key} = {json.dumps(conf[key])}: not supported for the {kind} benchmark"
            )

    def get(key: str, default: Any = None) -> Any:
        return conf.get(key, default)

    def must(key: str, allowed: tuple[str, ...], default: str) -> str:
        value = str(get(key, default)).upper()
        if value not in allowed:
            raise InputError(
                path,
                f"{at}{key} = {json.dumps(get(key))}: only {' or '.join(allowed)} is supported",
            )
        return value

    must("MEM_PATTERN", ("CONTIG",), "CONTIG")
    must("MODE", ("SYNC",), "SYNC")
    must("NUM_DIMS", ("1",), "1")
    for key in ("DIM_2", "DIM_3"):
        must(key, ("1",), "1")
    for key in ("COMPRESS", "SUBFILING", "FILE_PER_PROC"):
        if _yes(path, at + key, get(key, "NO")):
            raise InputError(path, f"{at}{key} = {json.dumps(get(key))}: not supported")
    if _count(path, at + "IO_MEM_LIMIT", get("IO_MEM_LIMIT", 0)):
        raise InputError(
            path,
            f"{at}IO_MEM_LIMIT = {json.dumps(get('IO_MEM_LIMIT'))}: "
            "only with ASYNC mode, which is not supported",
        )
    if "TIMESTEPS" not in conf:
        raise InputError(path, f"{at}TIMESTEPS: missing")
    steps = _count(path, at + "TIMESTEPS", get("TIMESTEPS"))
    if steps < 1:
        raise InputError(path, f"{at}TIMESTEPS = {json.dumps(get('TIMESTEPS'))}: at least 1")
    per_rank = None
    if "DIM_1" in conf:
        per_rank = _count(path, at + "DIM_1", get("DIM_1"))
    if "NUM_PARTICLES" in conf:
        n = _count(path, at + "NUM_PARTICLES", get("NUM_PARTICLES"))
        if per_rank is not None and n != per_rank:
            raise InputError(
                path,
                f"{at}NUM_PARTICLES = {json.dumps(get('NUM_PARTICLES'))} "
                f"but DIM_1 = {per_rank}: they must agree",
            )
        per_rank = n
    if per_rank is not None and per_rank < 1:
        raise InputError(path, f"{at}DIM_1 = {per_rank}: at least 1 particle per rank")

    args = ["--file", f"{directory}/{file}" if directory else file, "--steps", str(steps)]
    if _yes(path, at + "COLLECTIVE_DATA", get("COLLECTIVE_DATA", "NO")):
        args.append("--collective")
    if _yes(path, at + "COLLECTIVE_METADATA", get("COLLECTIVE_METADATA", "NO")):
        args.append("--coll-metadata")
    if "EMULATED_COMPUTE_TIME_PER_TIMESTEP" in conf:
        key = "EMULATED_COMPUTE_TIME_PER_TIMESTEP"
        args += ["--compute", f"{_seconds(path, at + key, conf[key]):g}"]
    delay = _count(path, at + "DELAYED_CLOSE_TIMESTEPS", get("DELAYED_CLOSE_TIMESTEPS", 0))
    if delay:
        args += ["--delay-close", str(delay)]

    if writing:
        must("FILE_PATTERN", ("CONTIG",), "CONTIG")
        if per_rank is None:
            raise InputError(path, f"{at}DIM_1: missing (particles per rank)")
        args += ["--particles", str(per_rank)]
        if _yes(path, at + "ALIGN", get("ALIGN", "NO")):
            t = _count(path, at + "ALIGN_THRESHOLD", get("ALIGN_THRESHOLD", 0))
            n = _count(path, at + "ALIGN_LEN", get("ALIGN_LEN", 0))
            if n < 1:
                raise InputError(
                    path,
                    f"{at}ALIGN_LEN = {json.dumps(get('ALIGN_LEN'))}: "
                    "ALIGN = YES needs an alignment of at least 1 byte",
                )
            args += ["--align", f"{t}:{n}"]
        elif "ALIGN_THRESHOLD" in conf or "ALIGN_LEN" in conf:
            raise InputError(path, f"{at}ALIGN_THRESHOLD/ALIGN_LEN given without ALIGN = YES")
        return "vpicio", ranks, args

    option = must("READ_OPTION", ("FULL", "PARTIAL", "STRIDED"), "FULL")
    must("FILE_PATTERN", ("STRIDED",) if option == "STRIDED" else ("CONTIG",), "CONTIG")
    strided_keys = [k for k in ("STRIDE_SIZE", "BLOCK_SIZE", "BLOCK_CNT") if k in conf]
    if option != "STRIDED" and strided_keys:
        raise InputError(path, f"{at}{strided_keys[0]}: only with READ_OPTION = STRIDED")
    if option != "PARTIAL" and "TO_READ_NUM_PARTICLES" in conf:
        raise InputError(path, f"{at}TO_READ_NUM_PARTICLES: only with READ_OPTION = PARTIAL")
    if option == "FULL":
        args += ["--mode", "full"]
        if per_rank is not None:  # h5bench reads DIM_1 particles per rank
            args += ["--particles", str(per_rank)]
    elif option == "PARTIAL":
        if "TO_READ_NUM_PARTICLES" not in conf:
            raise InputError(path, f"{at}TO_READ_NUM_PARTICLES: missing for READ_OPTION PARTIAL")
        n = _count(path, at + "TO_READ_NUM_PARTICLES", conf["TO_READ_NUM_PARTICLES"])
        args += ["--mode", "partial", "--particles", str(n)]
    else:
        for key in ("STRIDE_SIZE", "BLOCK_SIZE", "BLOCK_CNT"):
            if key not in conf:
                raise InputError(path, f"{at}{key}: missing for READ_OPTION STRIDED")
        stride = _count(path, at + "STRIDE_SIZE", conf["STRIDE_SIZE"])
        block = _count(path, at + "BLOCK_SIZE", conf["BLOCK_SIZE"])
        if not 1 <= block <= stride:
            raise InputError(
                path,
                f"{at}BLOCK_SIZE = {block}, STRIDE_SIZE = {stride}: "
                "blocks must not overlap (1 <= BLOCK_SIZE <= STRIDE_SIZE)",
            )
        blocks = _count(path, at + "BLOCK_CNT", conf["BLOCK_CNT"])
        args += [
            "--mode",
            "strided",
            "--stride",
            str(stride),
            "--block",
            str(block),
            "--blocks",
            str(blocks),
        ]
    return "bdcats", ranks, args
