#!/usr/bin/env python3
"""Write the Darshan bindings iopilot reads logs with: PyDarshan's C
declarations as cffi's pre-built Python module, src/iopilot/_lib/darshan_ffi.py.

    python tools/build_darshan_ffi.py [OUT]

``make setup`` runs it once PyDarshan is installed, so that no report parses
the declarations (or writes anything) at run time.  Without the file, or
when it was made from other declarations, a report parses them in memory.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from iopilot.sources.darshan_library import BUILT_FFI, build_ffi  # noqa: E402

if __name__ == "__main__":
    out = build_ffi(Path(sys.argv[1]) if len(sys.argv) > 1 else BUILT_FFI)
    print(f"iopilot setup: wrote the Darshan bindings {out}")
