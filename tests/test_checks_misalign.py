"""What misaligned file offsets cost, by the file system the file is on
(checks/misalign.py), through posix-misaligned-file and hdf5-alignment."""

from __future__ import annotations

import pytest

from iopilot.checks.misalign import fs_type
from kit import counters, findings, only, trace

KiB, MiB = 1024, 1024**2
MOUNTS = [("/", "ext4"), ("/scratch", "lustre"), ("/scratch/local", "xfs")]


def test_fs_type_is_the_longest_mount_above_the_path():
    assert fs_type(MOUNTS, "/scratch/run/out.h5") == "lustre"
    assert fs_type(MOUNTS, "/scratch/local/out.h5") == "xfs"
    assert fs_type(MOUNTS, "/scratchy/out.h5") == "ext4"  # not under /scratch
    assert fs_type(MOUNTS, "/scratch") == "lustre"
    assert fs_type([], "/a") == ""


def _posix(reads: int, writes: int, size: int, bad: int):
    return counters("POSIX", [{"file": 1, "POSIX_READS": reads, "POSIX_WRITES": writes,
                               "POSIX_BYTES_READ": reads * size, "POSIX_BYTES_WRITTEN":
                               writes * size, "POSIX_FILE_NOT_ALIGNED": bad,
                               "POSIX_FILE_ALIGNMENT": 4096, "POSIX_F_READ_TIME": 1.0,
                               "POSIX_F_WRITE_TIME": 3.0}])  # fmt: skip


@pytest.mark.parametrize(("path", "cost"), [
    # Lustre: every misaligned request's time (an upper bound): 4 s x 50 %.
    ("/scratch/run/out.bin", 2.0),
    # Local disk: writes nothing; half the reads misaligned, 1 s of reads, each
    # 4 KiB read touching 2 blocks instead of 1: 1 x 0.5 x 1/2.
    ("/home/out.bin", 0.25),
])  # fmt: skip
def test_posix_misaligned_cost_by_file_system(path, cost):
    tr = trace(_posix(100, 100, 4 * KiB, 100), mounts=MOUNTS, names={1: path})
    f = only(findings(tr, "posix-misaligned-file"))
    assert f.cost_seconds == pytest.approx(cost)


def test_local_large_misaligned_reads_cost_one_block_in_many():
    # 1 MiB reads: 256 blocks, one more when misaligned.
    tr = trace(_posix(100, 0, MiB, 100), mounts=MOUNTS, names={1: "/home/in.bin"})
    f = only(findings(tr, "posix-misaligned-file"))
    assert f.cost_seconds == pytest.approx(1 / 257, abs=1e-6)


def test_without_a_mount_table_the_upper_bound_stays():
    tr = trace(_posix(100, 100, 4 * KiB, 100), names={1: "/home/out.bin"})
    assert only(findings(tr, "posix-misaligned-file")).cost_seconds == pytest.approx(2.0)


def test_hdf5_alignment_on_a_local_disk_costs_only_its_reads():
    p = counters("POSIX", [{"file": 1, "POSIX_WRITES": 100, "POSIX_BYTES_WRITTEN": 100 * MiB,
                            "POSIX_FILE_NOT_ALIGNED": 100, "POSIX_FILE_ALIGNMENT": 4096,
                            "POSIX_ACCESS1_ACCESS": MiB, "POSIX_ACCESS1_COUNT": 100,
                            "POSIX_F_WRITE_TIME": 3.0}])  # fmt: skip
    h5 = counters("H5F", [{"file": 1, "H5F_F_META_TIME": 10.0}])  # HDF5's time holds POSIX's
    local = trace(h5, p, mounts=MOUNTS, names={1: "/home/out.h5"})
    assert only(findings(local, "hdf5-alignment")).cost_seconds == 0.0
    lustre = trace(h5, p, mounts=MOUNTS, names={1: "/scratch/out.h5"})
    assert only(findings(lustre, "hdf5-alignment")).cost_seconds == pytest.approx(3.0)
