"""Process start-up settings of the command line (src/iopilot/_alloc.py)."""

import os
import subprocess
import sys

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
