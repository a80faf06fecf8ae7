"""Darshan's HEATMAP module and AutoPerf's APMPI module -> the model.

Both are read from the log's bytes, not through the library.

HEATMAP (Darshan 3.3+): one record per (layer, rank) with a bin width and
two arrays of bytes per time bin.  Its record ids are hashes of
``heatmap:POSIX`` ...; logs do not always put those names in their name
table, so the ids are known here too.  Through the library each record would
cost a call and a copy, and a damaged bin count in an uncompressed log
would reach its unchecked allocation.

APMPI: the bundled libdarshan-util reads the module's first record as its
header through a ``static`` flag that is set once per process, so from the
second log a process opens on, every APMPI record is read at the wrong
offset (ranks all 0, one record short).  The region is one fixed-size header record (rank 0)
followed by one fixed-size record per rank; the sizes follow from the
library's counter name tables, and each record is checked before use.
"""

from __future__ import annotations

import zlib

import numpy as np

from ..model import Heatmap, MpiProfile
from ..model.aggregate import unique
from ..vocabulary import MODULE


class RegionError(Exception):
    """A module region whose records cannot all be decoded."""


# Darshan's record ids of the heatmap names ("heatmap:" + layer), as the
# runtime computes them; the layer part is the model's layer name.
HEATMAP_IDS: dict[int, str] = {
    16592106915301738621: "POSIX",
    3989511027826779520: "STDIO",
    3668870418325792824: "MPIIO",
    1597927878319380788: "DFS",
    4131494093108637317: "DAOS",
}
HEATMAP_PREFIX = "heatmap:"


def heatmap_layer(record_id: int, names: dict[int, str]) -> str | None:
    """The layer a heatmap record is about, or None if unknown."""
    name = names.get(record_id, "")
    if name.startswith(HEATMAP_PREFIX) and name[len(HEATMAP_PREFIX):] in MODULE:
        return name[len(HEATMAP_PREFIX):]
    return HEATMAP_IDS.get(record_id)


HEATMAP_VERSION = 1  # the one record format Darshan has written
# A heatmap record in the log: id, rank, bin width, bin count, two pointer
# slots the runtime writes as they were in its memory (meaningless here),
# then the write bins and the read bins (int64 each).
HEATMAP_HEAD_BYTES = 48
MAX_BINS = 1 << 12  # Darshan keeps at most 200 bins (one more after a clock skew)


def _heatmap_head(big_endian: bool) -> np.dtype:
    e = ">" if big_endian else "<"
    return np.dtype([("id", e + "u8"), ("rank", e + "i8"), ("width", e + "f8"),
                     ("nbins", e + "i8"), ("ptrs", e + "u8", (2,))])  # fmt: skip


def heatmap_limit(nprocs: int) -> int:
    """The most bytes a sound HEATMAP region of ``nprocs`` ranks can hold."""
    return max(nprocs, 1) * len(HEATMAP_IDS) * (HEATMAP_HEAD_BYTES + 16 * MAX_BINS)


def read_heatmaps(raw: bytes, names: dict[int, str], nprocs: int,
                  big_endian: bool) -> tuple[dict[str, Heatmap], list[str]]:  # fmt: skip
    """Heatmaps per layer from the HEATMAP region's bytes (inflated), and warnings.

    Records have a variable size (their bin count), so they are found one
    after the other; everything else is done with NumPy on the whole region,
    never one Python object per bin.
    """
    head_t = _heatmap_head(big_endian)
    starts, nbins = _heatmap_records(raw, head_t)
    if not len(starts):
        return {}, []
    u1 = np.frombuffer(raw, np.uint8)
    head = u1[starts[:, None] + np.arange(head_t.itemsize)].copy().view(head_t)[:, 0]
    bad = (head["rank"] < 0) | (head["rank"] >= max(nprocs, 1)) | ~(head["width"] > 0) | ~(
        np.isfinite(head["width"]))  # fmt: skip
    if bad.any():
        r = head[np.flatnonzero(bad)[0]]
        raise RegionError(f"a record has rank {int(r['rank'])}, {int(r['nbins'])} bins of "
                          f"{float(r['width']):g} s")  # fmt: skip
    # Every record starts at a multiple of 8 bytes: the bins, as int64 in the
    # log's byte order, are one array and each record's are a slice of it.
    flat = np.frombuffer(raw, (">" if big_endian else "<") + "i8")
    first_bin = starts // 8 + HEATMAP_HEAD_BYTES // 8
    ids = unique(head["id"])
    layer_of = {int(i): heatmap_layer(int(i), names) for i in ids}
    out: dict[str, Heatmap] = {}
    warnings: list[str] = []
    for rid, layer in layer_of.items():
        rows = np.flatnonzero(head["id"] == rid)
        if layer is None:
            warnings.append(f"HEATMAP has {len(rows)} record(s) of an unknown layer "
                            f"(id {rid:#x}): left out")  # fmt: skip
            continue
        widths = unique(head["width"][rows])
        if len(widths) > 1:
            raise RegionError(f"the {layer} records have different bin widths "
                              f"({', '.join(f'{w:g} s' for w in widths)})")  # fmt: skip
        ranks = head["rank"][rows]
        if len(unique(ranks)) < len(ranks):
            raise RegionError(f"rank(s) with more than one {layer} record")
        out[layer] = _layer_bins(layer, float(widths[0]), ranks, nbins[rows], first_bin[rows],
                                 flat)  # fmt: skip
        if (out[layer].read < 0).any() or (out[layer].write < 0).any():
            raise RegionError(f"negative byte counts in the {layer} bins")
    return {k: out[k] for k in MODULE if k in out}, warnings


def _heatmap_records(raw: bytes, head_t: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """(byte offset, bin count) of each record of the region."""
    count_at = head_t.fields["nbins"][1]
    count_t = head_t.fields["nbins"][0]
    if len(raw) >= HEATMAP_HEAD_BYTES:
        # The usual case: every record has the first one's bin count.
        n = int(np.frombuffer(raw, count_t, count=1, offset=count_at)[0])
        size = HEATMAP_HEAD_BYTES + 16 * n
        if 0 <= n <= MAX_BINS and len(raw) % size == 0:
            starts = np.arange(0, len(raw), size, dtype=np.int64)
            counts = np.frombuffer(raw, np.uint8)[starts[:, None] + count_at + np.arange(8)]
            if (counts.copy().view(count_t)[:, 0] == n).all():
                return starts, np.full(len(starts), n, np.int64)
    starts_l: list[int] = []
    counts_l: list[int] = []
    off = 0
    while off < len(raw):
        if len(raw) - off < HEATMAP_HEAD_BYTES:
            raise RegionError(f"a record is cut short at byte {off} of {len(raw)}")
        n = int(np.frombuffer(raw, count_t, count=1, offset=off + count_at)[0])
        if not 0 <= n <= MAX_BINS:
            raise RegionError(f"a record has {n} bins")
        if off + HEATMAP_HEAD_BYTES + 16 * n > len(raw):
            raise RegionError(f"a record of {n} bins is cut short at byte {off} of {len(raw)}")
        starts_l.append(off)
        counts_l.append(n)
        off += HEATMAP_HEAD_BYTES + 16 * n
    return np.array(starts_l, np.int64), np.array(counts_l, np.int64)


def _layer_bins(layer: str, width: float, ranks: np.ndarray, nbins: np.ndarray,
                starts: np.ndarray, flat: np.ndarray) -> Heatmap:  # fmt: skip
    """One layer's rows, ascending by rank: each record is its write bins, then
    its read bins, from ``starts`` (in int64 units); shorter records are padded
    with empty bins (Darshan 3.4.0-3.4.3 wrote some one bin short or long)."""
    n = int(nbins.max())
    both = np.zeros((len(ranks), 2, n), np.int64)
    if (nbins == n).all():  # the usual case: one gather
        both[:] = flat[starts[:, None] + np.arange(2 * n)].reshape(len(ranks), 2, n)
    else:
        for i, (s, k) in enumerate(zip(starts.tolist(), nbins.tolist(), strict=True)):
            both[i, :, :k] = flat[s:s + 2 * k].reshape(2, k)
    order = np.argsort(ranks, kind="stable")
    return Heatmap(layer, width, ranks[order].astype(np.int64), both[order, 1], both[order, 0])


# ----------------------------------------------------------------------------
# APMPI

APMPI_VERSION = 1  # the one record format AutoPerf has written
APMPI_MAGIC = int.from_bytes(b"APMPI", "big")  # 'A' * 2**32 + 'P' * 2**24 + ...
HOST_BYTES = 128  # AP_PROCESSOR_NAME_MAX


def apmpi_dtypes(names: dict[str, tuple[str, ...]], big_endian: bool
                 ) -> tuple[np.dtype, np.dtype]:  # fmt: skip
    """(header record, per-rank record) as NumPy types, from the counter name
    tables: ``counters`` (integers), ``times`` (total, min, max per
    operation), ``sync`` (sync time per collective), ``total`` (per rank)."""
    e = ">" if big_endian else "<"
    header = np.dtype([("id", e + "u8"), ("rank", e + "i8"), ("magic", e + "i8"),
                       ("sync_flag", e + "u4"), ("pad", e + "u4"),
                       ("comm_variance", e + "f8"), ("sync_variance", e + "f8")])  # fmt: skip
    perf = np.dtype([("id", e + "u8"), ("rank", e + "i8"),
                     ("counters", e + "u8", (len(names["counters"]),)),
                     ("times", e + "f8", (len(names["times"]),)),
                     ("sync", e + "f8", (len(names["sync"]),)),
                     ("total", e + "f8", (len(names["total"]),)),
                     ("host", f"S{HOST_BYTES}")])  # fmt: skip
    return header, perf


def inflate(data: bytes, limit: int) -> bytes:
    """The streams of a zlib-compressed region, back to back, at most ``limit``
    bytes (a damaged length must not fill the memory)."""
    out = bytearray()
    while data:
        d = zlib.decompressobj()
        out += d.decompress(data, limit + 1 - len(out))
        if len(out) > limit:
            raise RegionError(f"it inflates to more than the {limit:,} bytes it can hold")
        if not d.eof:
            raise RegionError("its compressed data ends early")
        data = d.unused_data
    return bytes(out)


def read_apmpi(raw: bytes, names: dict[str, tuple[str, ...]], big_endian: bool,
               nprocs: int) -> MpiProfile:  # fmt: skip
    """The APMPI region's bytes (inflated) -> :class:`MpiProfile`."""
    header_t, perf_t = apmpi_dtypes(names, big_endian)
    if len(raw) < header_t.itemsize:
        raise RegionError(f"{len(raw)} bytes, too short for its header record")
    head = np.frombuffer(raw, header_t, count=1)[0]
    if int(head["magic"]) != APMPI_MAGIC:
        raise RegionError(f"bad magic number {int(head['magic']):#x} in its header record")
    body = len(raw) - header_t.itemsize
    if body % perf_t.itemsize or not 0 < body // perf_t.itemsize <= max(nprocs, 1):
        raise RegionError(f"{body} bytes after the header: not 1 to {nprocs} whole per-rank "
                          f"records of {perf_t.itemsize} bytes")  # fmt: skip
    recs = np.frombuffer(raw, perf_t, offset=header_t.itemsize)
    ranks = recs["rank"].astype(np.int64)
    if ranks.min() < 0 or ranks.max() >= max(nprocs, 1) or len(unique(ranks)) < len(ranks):
        raise RegionError(f"ranks out of order or out of range (0-{nprocs - 1})")
    counters = recs["counters"].astype(np.uint64)
    times = recs["times"].astype(np.float64)
    sync = recs["sync"].astype(np.float64)
    total = recs["total"].astype(np.float64)
    floats = (times, sync, total, np.array([head["comm_variance"], head["sync_variance"]]))
    if any((~np.isfinite(f) | (f < 0)).any() for f in floats):
        raise RegionError("negative or not-a-number times")
    if (counters >= 1 << 63).any():
        raise RegionError("impossible call counts")
    counters = counters.astype(np.int64)
    ops = _op_names(names["counters"])
    icol = {n: i for i, n in enumerate(names["counters"])}
    tcol = {n: i for i, n in enumerate(names["times"])}

    def cols(table: dict[str, int], suffix: str) -> np.ndarray:
        idx = [table.get(op + suffix, -1) for op in ops]
        return np.array(idx, np.int64)

    def take(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
        out = values[:, np.maximum(idx, 0)]
        out[:, idx < 0] = 0
        return out

    sync_ops = tuple(n.removesuffix("_TOTAL_SYNC_TIME") for n in names["sync"])
    order = np.argsort(ranks, kind="stable")
    hosts = tuple(h.split(b"\0", 1)[0].decode("utf-8", "replace") for h in recs["host"][order])
    comm = total[:, names["total"].index("MPI_TOTAL_COMM_TIME")]
    return MpiProfile(
        rank=ranks[order],
        host=hosts,
        ops=ops,
        calls=take(counters, cols(icol, "_CALL_COUNT"))[order],
        seconds=take(times, cols(tcol, "_TOTAL_TIME"))[order],
        max_seconds=take(times, cols(tcol, "_MAX_TIME"))[order],
        bytes=take(counters, cols(icol, "_TOTAL_BYTES"))[order],
        sync_ops=sync_ops,
        sync_seconds=sync[order],
        comm_seconds=comm[order],
        sync_measured=bool(head["sync_flag"]),
        comm_variance=float(head["comm_variance"]),
        sync_variance=float(head["sync_variance"]),
    )


def _op_names(counter_names: tuple[str, ...]) -> tuple[str, ...]:
    """MPI operations in the order of the library's counter table: each has a
    ``<OP>_CALL_COUNT``."""
    return tuple(n.removesuffix("_CALL_COUNT") for n in counter_names
                 if n.endswith("_CALL_COUNT"))  # fmt: skip
