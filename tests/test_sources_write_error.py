"""A trace the runtime could not write in full (a full file system, a quota) is
read as incomplete, for the reason the runtime gave, not as damaged."""

from __future__ import annotations

import pytest

from iopilot.errors import InputError
from iopilot.sources import load
from test_sources_trace_safety import fid, write_proc

FILES = {b"/s/a.dat": (5, 100), b"/s/b.dat": (5, 100)}


def test_a_names_file_cut_by_a_full_file_system_is_incomplete_not_damaged(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    stem = write_proc(root, 100, FILES, rank=0, rank_source="env", ended_by=None)
    names = root / f"{stem.name}.names"
    names.write_bytes(names.read_bytes()[:-5])  # the last entry cut short
    (root / f"{stem.name}.error-ENOSPC").touch()
    t = load(str(root))
    assert t.names[fid(b"/s/a.dat")] == "/s/a.dat"
    assert t.name(fid(b"/s/b.dat")) == f"<file {fid(b'/s/b.dat'):#x}>"
    assert len(t.records) == 10  # every record is kept
    assert t.warnings == [f"the trace is incomplete: the file system of {root} was full (no "
                          "space left on device): trace files of rank 0 (pid 100) are missing "
                          "or cut short"]  # fmt: skip
    assert t.processes["summary"].endswith("1 ended without a summary (it could not be written)")


def test_a_killed_process_s_names_file_may_end_in_a_cut_entry(tmp_path):
    """A process that left no summary was killed, maybe while it wrote its
    names: the whole entries are kept, as the whole records of its .rec are."""
    root = tmp_path / "t"
    root.mkdir()
    stem = write_proc(root, 100, FILES, rank=0, rank_source="env", ended_by=None)
    names = root / f"{stem.name}.names"
    names.write_bytes(names.read_bytes()[:-5])
    t = load(str(root))
    assert t.names[fid(b"/s/a.dat")] == "/s/a.dat"
    assert t.name(fid(b"/s/b.dat")) == f"<file {fid(b'/s/b.dat'):#x}>"
    assert len(t.records) == 10
    assert t.processes["summary"].endswith("1 ended without a summary (killed or crashed)")


def test_a_process_that_ended_normally_wrote_its_names_whole(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    stem = write_proc(root, 100, FILES, rank=0, rank_source="env")  # with its summary
    names = root / f"{stem.name}.names"
    names.write_bytes(names.read_bytes()[:-5])
    with pytest.raises(InputError, match="damaged names file"):
        load(str(root))  # without the runtime's word, a cut file is damage


@pytest.mark.parametrize("error, why", [
    ("EDQUOT", "the disk quota on the file system of {root} was exceeded"),
    ("EIO", "writing in {root} failed (input/output error)"),
    ("ESTALE", "{root} or files in it were moved, replaced or removed while it was written"),
])  # fmt: skip
def test_the_summary_names_the_error_that_stopped_tracing(tmp_path, error, why):
    root = tmp_path / "t"
    root.mkdir()
    write_proc(root, 100, FILES, rank=0, rank_source="env", extra={"write_error": error})
    t = load(str(root))
    assert f"the trace is incomplete: {why.format(root=root)}: trace files of rank 0 (pid 100) " \
           "are missing or cut short" in t.warnings  # fmt: skip


def test_a_write_error_that_is_no_error_name_is_damage(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    write_proc(root, 100, FILES, extra={"write_error": "disk\nfull"})
    with pytest.raises(InputError, match=r"'write_error' .* is not an error name"):
        load(str(root))
