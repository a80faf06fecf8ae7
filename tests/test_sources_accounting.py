"""How a trace directory's process images ended, as the reader accounts for
them (sources/iopilot_trace.py ``_accounting``), worked out by hand."""

from __future__ import annotations

from pathlib import Path

from iopilot.sources.iopilot_trace import _accounting, _Proc


def proc(pid: int, rank: int | None, ended: str | None, code: int | None = 0, *,
         exe: str = "/bin/app", mmaps: int = 0, on_disk: int = 0, fs_bytes: int = 0) -> _Proc:
    summary = None if ended is None else {"ended_by": ended, "exit_code": code, "exe": exe}
    return _Proc(stem=f"h-{pid}", root=Path("/t"), version=2, pid=pid, ppid=1, image=0,
                 host="h", t0=0.0, t_end=1.0, written_rank=-1 if rank is None else rank,
                 known=rank is not None, summary=summary, rec_size=None, rank=rank,
                 mmaps=mmaps, on_disk=on_disk, fs_bytes=fs_bytes)  # fmt: skip


def test_every_way_of_ending_counted_and_told():
    procs = [
        proc(10, 0, "exit", 0, mmaps=2),
        proc(11, 1, "exit", 3),
        proc(12, 2, "_exit", None),
        proc(13, 3, "exec"),
        proc(14, 4, "flush"),
        proc(15, 5, None, on_disk=7),
        proc(16, None, "exit", 0, exe="/usr/bin/mpirun", fs_bytes=10),
        proc(17, None, "exit", 0, exe="/usr/bin/mpirun"),
        proc(18, None, "signal", exe="/bin/sh"),
    ]
    a = _accounting(procs)
    assert a["summary"] == (
        "9 process images: 8 ended normally (exit 0: 3, exit 3: 1, exit: 1, exec: 1, "
        "after MPI_Finalize: 1, signal: 1), 1 ended without a summary (killed or crashed); "
        "3 launcher images (mpirun ×2, sh) not counted as ranks")
    assert a["images"] == 9 and a["ranks"] == 6
    assert a["ended_normally"] == 8 and a["ended_abnormally"] == 1
    assert a["ended_by"] == {"exit": 4, "_exit": 1, "exec": 1, "flush": 1, "none": 1,
                             "signal": 1}  # fmt: skip
    assert a["exit_codes"] == {"0": 3, "3": 1, "unknown": 1}
    assert a["abnormal"] == [{"stem": "h-15", "pid": 15, "host": "h", "rank": 5, "records": 7}]
    assert a["launchers"] == [
        {"stem": "h-16", "pid": 16, "exe": "/usr/bin/mpirun", "bytes": 10},
        {"stem": "h-17", "pid": 17, "exe": "/usr/bin/mpirun", "bytes": 0},
        {"stem": "h-18", "pid": 18, "exe": "/bin/sh", "bytes": 0},
    ]
    assert a["not_seen"] == (
        "not seen by the runtime: reads and writes through memory mapped with mmap "
        "(2 mmap calls on traced files), and data moved by sendfile, copy_file_range, "
        "splice or io_uring")


def test_one_image_one_launcher_one_mmap_in_the_singular():
    a = _accounting([proc(1, 0, "exit", 0, mmaps=1), proc(2, None, "exit", 0, exe="/x/srun")])
    assert a["summary"] == ("2 process images: 2 ended normally (exit 0: 2); "
                            "1 launcher image (srun) not counted as ranks")  # fmt: skip
    assert "(1 mmap call on traced files)" in a["not_seen"]
    one = _accounting([proc(1, 0, "exit", 0)])
    assert one["summary"] == "1 process image: 1 ended normally (exit 0: 1)"
    assert one["not_seen"] == ("not seen by the runtime: data moved by sendfile, "
                               "copy_file_range, splice or io_uring")  # fmt: skip
    assert one["abnormal"] == [] and one["launchers"] == [] and one["ranks"] == 1


def test_unknown_exit_codes_come_last_and_codes_sort_as_text():
    a = _accounting([proc(1, 0, "_exit", None), proc(2, 1, "exit", 12), proc(3, 2, "exit", 2)])
    assert a["summary"] == "3 process images: 3 ended normally (exit 12: 1, exit 2: 1, exit: 1)"


def test_no_summary_at_all_has_no_details():
    a = _accounting([proc(1, 0, None), proc(2, 1, None)])
    assert a["summary"] == ("2 process images: 0 ended normally, "
                            "2 ended without a summary (killed or crashed)")  # fmt: skip
    assert a["ended_by"] == {"none": 2} and a["exit_codes"] == {}


def test_more_than_five_launcher_programs_are_cut_short():
    procs = [proc(i, None, "exit", 0, exe=f"/bin/l{i}") for i in range(7)]
    procs.append(proc(9, None, "exit", 0, exe=""))  # no name known
    a = _accounting(procs)
    assert a["summary"].endswith(
        "8 launcher images (l0, l1, l2, l3, l4, ...) not counted as ranks")
    assert a["ranks"] == 0
