"""What requests at misaligned file offsets cost, by the file system they reach.

On a parallel or network file system a request that starts off a block or
stripe boundary touches one more block (or lock extent, or stripe) than it
needs, so the misaligned requests' time is an upper bound of what aligning
saves.  On a local file system the page cache takes writes in any shape
(partial pages of a file being written are merged in memory) and a read
fetches at most one more block from the device: there, writes cost nothing
extra and a read costs the share of one extra block among those it touches.
The file system of a file is the longest mount point above its path in the
job's mount table; without one it is not taken to be local.
"""

from __future__ import annotations

import numpy as np

from ..model import Counters
from .base import Context
from .iotime import direction_time, share_of

# Mount types whose data goes through the local page cache to a local device.
LOCAL_FS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "zfs", "jfs", "reiserfs",
                      "tmpfs", "ramfs", "overlay", "vfat", "exfat", "ntfs3"})  # fmt: skip


def fs_type(mounts: list[tuple[str, str]], path: str) -> str:
    """The type of the longest mount point above ``path`` ("" if none)."""
    best, kind = -1, ""
    for point, fs in mounts:
        p = point.rstrip("/")
        if (path == p or path.startswith(p + "/")) and len(p) > best:
            best, kind = len(p), fs
    return kind


def local_files(ctx: Context, ids: np.ndarray) -> np.ndarray:
    """For each file id, whether its file system is a local one."""
    mounts = ctx.trace.job.mounts
    if not mounts or not len(ids):
        return np.zeros(len(ids), bool)
    # One lookup per distinct file, not per row.
    uniq, inv = np.unique(ids, return_inverse=True)
    local = np.array([fs_type(mounts, ctx.trace.name(int(i))) in LOCAL_FS for i in uniq], bool)
    return local[inv]


def misaligned_seconds(ctx: Context, c: Counters, bad: np.ndarray, ops: np.ndarray,
                       alignment: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """Per POSIX row, the seconds its ``bad`` (misaligned) requests of ``ops``
    cost (see the module's docstring); ``alignment``: the unit per row
    (POSIX_FILE_ALIGNMENT by default)."""
    rw = direction_time(c, "READ") + direction_time(c, "WRITE")
    upper = share_of(rw, bad, ops)
    local = local_files(ctx, c.file_id)
    if not local.any():
        return upper
    align = np.maximum(c["POSIX_FILE_ALIGNMENT"] if alignment is None else alignment, 1)
    reads = np.maximum(c["POSIX_READS"], 0)
    size = np.maximum(c["POSIX_BYTES_READ"], 0) / np.maximum(reads, 1)
    # A misaligned read of ``size`` bytes touches ceil(size / align) + 1 blocks.
    extra = 1.0 / (np.ceil(size / align) + 1.0)
    on_reads = share_of(direction_time(c, "READ"), bad * reads / np.maximum(ops, 1), reads)
    return np.where(local, on_reads * extra, upper)
