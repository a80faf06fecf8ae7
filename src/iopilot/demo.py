"""``iopilot demo``: the main job on a built-in example.

For now the example is a real Darshan log that ships with PyDarshan: an
IOR run through HDF5 and MPI-IO on Lustre, with DXT traces.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

EXAMPLE = "ior_hdf5_example.darshan"


def example_dir() -> Path:
    spec = importlib.util.find_spec("darshan")
    if spec is None or spec.origin is None:
        raise SystemExit("iopilot demo: PyDarshan is not installed; run `make demo`")
    return Path(spec.origin).parent / "examples" / "example_logs"


def main(out_dir: str = "demo-output") -> int:
    from .cli import main as cli_main

    log = example_dir() / EXAMPLE
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = out / "report.json"
    rc = cli_main(["report", str(log)])
    if rc == 0:
        rc = cli_main(["report", str(log), "--json", str(report)])
    if rc == 0:
        print(f"\nThe report of {EXAMPLE} is in {report.resolve()} (JSON);")
        print("run `.venv/bin/iopilot report --help` to diagnose your own logs.")
    return rc


if __name__ == "__main__":
    sys.exit(main())
