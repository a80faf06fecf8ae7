"""Process start-up settings of the command line (src/iopilot/_alloc.py)."""

import os
import subprocess
import sys

import pytest

from iopilot import _alloc


def test_blas_gets_one_thread_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    _alloc.single_threaded_blas()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    _alloc.single_threaded_blas()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "4"


def _run(code: str, **env: str) -> str:
    e = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | env
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                          check=True).stdout  # fmt: skip


def test_the_command_line_starts_numpy_with_one_blas_thread():
    # The setting must be made before NumPy is imported, or OpenBLAS ignores it.
    code = ("import contextlib, io, os, sys\nfrom iopilot.cli import main\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['--version'])\n"
            "print('numpy' in sys.modules, os.environ.get('OPENBLAS_NUM_THREADS'))")
    assert _run(code).split() == ["False", "1"]
    assert _run(code, OPENBLAS_NUM_THREADS="3").split() == ["False", "3"]


def test_the_allocator_setting_runs_no_subprocess():
    # Finding libc through ctypes.util runs `ldconfig -p`: a fork and exec per start.
    code = ("import sys\nfrom iopilot._alloc import keep_freed_memory\nkeep_freed_memory()\n"
            "print('subprocess' in sys.modules, 'ctypes.util' in sys.modules)")
    assert _run(code).split() == ["False", "False"]


def _report_in_process(log: str) -> list[str]:
    """What a one-log ``iopilot report`` leaves loaded, run as the program
    (``main()`` with no arguments) and in this process (IOPILOT_DEBUG)."""
    code = ("import contextlib, gc, io, os, sys\nfrom iopilot.cli import main\n"
            f"sys.argv = ['iopilot', 'report', '--json', os.devnull, {log!r}]\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "    main()\n"
            "print('numpy' in sys.modules, 'numpy.ma' in sys.modules, gc.isenabled(),\n"
            "      gc.get_freeze_count() > 1000)")
    return _run(code, IOPILOT_DEBUG="1").split()


def test_a_report_never_loads_numpy_masked_arrays():
    # np.unique without index outputs imports numpy.ma (about 7 % of a small
    # report's start-up); model.aggregate.unique stands in for it.
    from iopilot.demo import example_dir

    for log in ("ior_hdf5_example.darshan", "dxt.darshan"):
        numpy, masked, _, _ = _report_in_process(str(example_dir() / log))
        assert numpy == "True" and masked == "False", log


def test_garbage_collection_is_back_on_after_start_up():
    # Off while modules load, then on again with the loaded objects frozen.
    from iopilot.demo import example_dir

    *_, enabled, frozen = _report_in_process(str(example_dir() / "dxt.darshan"))
    assert enabled == "True" and frozen == "True"


def test_a_caller_that_imports_iopilot_keeps_its_collector():
    code = ("import contextlib, gc, io\nfrom iopilot.cli import main\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['checks'])\n"
            "print(gc.isenabled(), gc.get_freeze_count())")
    assert _run(code).split() == ["True", "0"]


def test_no_bare_np_unique_in_the_package():
    # Guard for the start-up cost above: every np.unique call asks for an
    # index output or goes through model.aggregate.unique / unique_columns.
    import re
    from pathlib import Path

    import iopilot

    bare = []
    for path in Path(iopilot.__file__).parent.rglob("*.py"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\bnp\.(unique|median)\(", line) and "return_" not in line \
                    and not line.lstrip().startswith(("#", "(first row", "``np.median``")):
                bare.append(f"{path.name}:{n}")
    assert bare == []


def test_a_fleet_summary_collects_garbage_for_its_whole_run():
    # --summary can run for hours (a centre's archive, a Dask client): the
    # collector comes back on before the first log, not after the last.
    from iopilot.demo import example_dir

    log = str(example_dir() / "dxt.darshan")
    code = ("import contextlib, gc, io, os, sys\nfrom iopilot._progress import Progress\n"
            "seen = []\nstep = Progress.step\n"
            "def spy(self, *a, **k):\n    seen.append(gc.isenabled())\n"
            "    return step(self, *a, **k)\n"
            "Progress.step = spy\nfrom iopilot.cli import main\n"
            f"sys.argv = ['iopilot', 'report', '--summary', '--json', os.devnull, {log!r}]\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "    main()\n"
            "print(seen)")
    assert _run(code).split() == ["[True]"]


def _program(*args: str) -> subprocess.CompletedProcess:
    """``python -m iopilot ARGS`` as a user runs it, output through pipes."""
    return subprocess.run([sys.executable, "-m", "iopilot", *args], capture_output=True,
                          text=True)  # fmt: skip


def test_the_program_delivers_all_its_output_and_status_when_it_exits_quickly(tmp_path):
    # After a report the program skips the interpreter's shutdown: what it
    # wrote to pipes and files must still arrive whole, with the status that
    # main() returns in a caller's process.
    import contextlib
    import io

    from iopilot.cli import main
    from iopilot.demo import example_dir

    logs = [str(p) for p in sorted(example_dir().iterdir()) if p.suffix == ".darshan"]
    for chosen in (logs[:1], logs):  # one log (worked in a child), several (workers)
        argv = ["report", "-v", "--fail-on-critical", "--color", "never", "--json"]
        out = _program(*argv, str(tmp_path / "a.json"), *chosen)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
            code = main([*argv, str(tmp_path / "b.json"), *chosen])
        assert out.returncode == code == 1, chosen  # the examples have HIGH findings
        assert len(out.stdout) > 3000 and out.stdout == buf.getvalue()
        a, b = (tmp_path / "a.json").read_text(), (tmp_path / "b.json").read_text()
        assert a.rstrip().endswith("}") and len(a) == len(b)
    bad = _program("report", str(tmp_path / "missing.darshan"))
    assert bad.returncode == 2 and "missing.darshan" in bad.stderr


def test_the_quick_exit_is_taken_only_when_nothing_else_runs(monkeypatch):
    import threading
    import types

    from iopilot import cli

    class Quick(Exception):
        pass

    def fake_exit(code: int) -> None:
        raise Quick(code)

    threads, children = [1], [[]]  # what this process has besides the main thread
    monkeypatch.setattr(cli.os, "_exit", fake_exit)
    monkeypatch.setattr(threading, "active_count", lambda: threads[0])
    monkeypatch.setitem(sys.modules, "multiprocessing",
                        types.SimpleNamespace(active_children=lambda: children[0]))
    with pytest.raises(Quick) as q:
        cli._leave(3, quick=True)
    assert q.value.args == (3,)
    with pytest.raises(SystemExit) as e:
        cli._leave(4, quick=False)
    assert e.value.code == 4
    threads[0] = 2  # another thread may still have work to finish
    with pytest.raises(SystemExit) as e:
        cli._leave(5, quick=True)
    assert e.value.code == 5
    threads[0], children[0] = 1, ["a worker"]  # so may a worker process
    with pytest.raises(SystemExit) as e:
        cli._leave(6, quick=True)
    assert e.value.code == 6


def test_only_plain_reports_and_check_lists_exit_quickly(monkeypatch):
    # Dask clients and Parquet writers need the orderly shutdown.
    import contextlib
    import io

    from iopilot import cli

    monkeypatch.setattr(cli.report, "cmd_report", lambda args: 0)
    monkeypatch.setattr(_alloc, "quiet_start", lambda: None)  # keep this process's collector
    seen = {}
    for argv in (["checks"], ["report", "x.darshan"], ["report", "--parquet", "P", "x.darshan"],
                 ["report", "--summary", "--scheduler", "local", "x.darshan"]):  # fmt: skip
        monkeypatch.setattr(cli, "_quick_exit", None)
        monkeypatch.setattr(sys, "argv", ["iopilot", *argv])
        with contextlib.redirect_stdout(io.StringIO()):
            assert cli.main() == 0  # as the program
        seen[argv[1] if len(argv) > 2 else argv[0]] = cli._quick_exit
    assert seen == {"checks": True, "report": True, "--parquet": False, "--summary": False}
    monkeypatch.setattr(cli, "_quick_exit", None)
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["checks"]) == 0  # a caller's (or nested) call leaves it alone
    assert cli._quick_exit is None


def test_a_one_log_report_leaves_the_heavy_modules_to_its_child():
    # Forked before NumPy, the checks and the readers are loaded, the child
    # makes its own pages instead of copying the parent's as it touches them.
    from iopilot.demo import example_dir

    log = str(example_dir() / "dxt.darshan")
    code = ("import os, sys\nfrom iopilot.cli import main\n"
            f"sys.argv = ['iopilot', 'report', '--json', os.devnull, {log!r}]\n"
            "c = main()\n"
            "print('LOADED', c, *(m in sys.modules for m in "
            "('numpy', 'iopilot.checks', 'iopilot.sources')))")
    assert _run(code).splitlines()[-1].split() == ["LOADED", "0", "False", "False", "False"]
    two = code.replace(f"{log!r}]", f"{log!r}, {log!r}]")  # many logs: imports shared by workers
    assert _run(two).splitlines()[-1].split() == ["LOADED", "0", "True", "True", "True"]
