"""Where the built C runtime (``libiopilot.so``) is: for ``iopilot run``,
which preloads it, and the benches that time it."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import InputError


def library_path() -> Path:
    """The built runtime library; a clear error when it was not built."""
    env = os.environ.get("IOPILOT_LIB")
    lib = Path(env) if env else Path(__file__).resolve().parent / "_lib" / "libiopilot.so"
    if not lib.exists():
        raise InputError(str(lib), "the iopilot runtime is not built", "run `make` first")
    return lib
