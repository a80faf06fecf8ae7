"""The parsed C declarations of libdarshan-util are built at set-up as cffi's
Python module (``make setup``: tools/build_darshan_ffi.py) and used when
they match the installed declarations; without them, or with damaged or
stale ones, a report parses the declarations in memory.  Neither way
writes a file or prints a line."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import cffi
import pytest

from iopilot.sources import darshan_library as dl

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def api() -> Path:
    spec = importlib.util.find_spec("darshan")
    assert spec is not None and spec.origin is not None
    p = Path(spec.origin).parent / "backend" / "api_def_c.py"
    if not p.exists():
        pytest.skip("PyDarshan is not installed from a wheel")
    return p


def _works(ffi) -> None:
    assert ffi.sizeof("struct darshan_job") > 0


def _files(top: Path) -> list[str]:
    return sorted(str(p.relative_to(top)) for p in top.rglob("*"))


@pytest.fixture
def quiet_home(tmp_path, monkeypatch) -> Path:
    """A HOME that does not exist and no XDG directories: nothing may appear."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in ("XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path / "home"


def test_the_built_module_is_used(api, tmp_path, capfd):
    built = dl.build_ffi(tmp_path / "darshan_ffi.py")
    assert capfd.readouterr().out == ""  # cffi's "generating ..." line is not printed
    ffi = dl._ffi_for(api, built)
    assert not isinstance(ffi, cffi.FFI)  # the pre-built module's FFI, not a parse
    _works(ffi)
    assert _files(tmp_path) == ["darshan_ffi.py"]  # imported as source: no bytecode beside it


def test_without_the_built_module_the_declarations_are_parsed_in_memory(
        api, tmp_path, capfd, quiet_home):  # fmt: skip
    ffi = dl._ffi_for(api, tmp_path / "missing.py")
    assert isinstance(ffi, cffi.FFI)
    _works(ffi)
    assert capfd.readouterr() == ("", "")
    assert _files(tmp_path) == [] and not quiet_home.exists()


@pytest.mark.parametrize("damage", ["code that fails", "other declarations"])
def test_a_damaged_or_stale_built_module_is_parsed_again_and_left_alone(api, tmp_path, damage):
    built = dl.build_ffi(tmp_path / "darshan_ffi.py")
    text = built.read_text()
    bad = ("raise ImportError('damaged')\n" if damage == "code that fails" else
           text.replace("KEY = '", "KEY = 'x"))  # fmt: skip
    built.write_text(bad)
    ffi = dl._ffi_for(api, built)
    assert isinstance(ffi, cffi.FFI)
    _works(ffi)
    assert built.read_text() == bad


def test_the_set_up_tool_writes_the_module_a_report_uses(api, tmp_path):
    out = tmp_path / "lib" / "darshan_ffi.py"
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "build_darshan_ffi.py"), str(out)],
                       capture_output=True, text=True, timeout=180)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"iopilot setup: wrote the Darshan bindings {out}\n"
    assert not isinstance(dl._ffi_for(api, out), cffi.FFI)
    assert _files(tmp_path) == ["lib", "lib/darshan_ffi.py"]


def test_make_setup_builds_the_module():
    make = (ROOT / "Makefile").read_text()
    assert "$(FFI)" in make.split("\nsetup:")[1].splitlines()[0]
    (line,) = [x for x in make.splitlines() if x.startswith("FFI :=")]
    assert dl.BUILT_FFI.parts[-3:] == Path(line.split(":=")[1].strip()).parts[-3:]
