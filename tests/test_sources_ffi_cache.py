"""The parsed C declarations of libdarshan-util are cached as cffi's Python
module, keyed by the declarations: written once, imported after, rebuilt
when damaged, and never needed (only slower) without a writable cache."""

from __future__ import annotations

import importlib.util
import zlib
from pathlib import Path

import cffi
import pytest

from iopilot.sources import darshan_log as dl


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


def test_written_once_then_imported(api, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = dl._ffi_for(api)
    assert isinstance(first, cffi.FFI)  # parsed
    _works(first)
    header = dl._api_header(api)
    name = f"_iopilot_darshan_ffi_{zlib.crc32(header.encode()):08x}{len(header):x}"
    assert sorted(p.name for p in (tmp_path / "iopilot").iterdir()) == [f"{name}.py"]
    again = dl._ffi_for(api)
    assert not isinstance(again, cffi.FFI)  # the cached module's pre-built FFI
    _works(again)


def test_home_cache_without_xdg(api, tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    _works(dl._ffi_for(api))
    assert len(list((tmp_path / ".cache" / "iopilot").glob("_iopilot_darshan_ffi_*.py"))) == 1


def test_a_damaged_entry_is_rebuilt(api, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    dl._ffi_for(api)
    (entry,) = (tmp_path / "iopilot").iterdir()
    entry.write_text("raise ImportError('damaged')\n")
    rebuilt = dl._ffi_for(api)
    assert isinstance(rebuilt, cffi.FFI)
    _works(rebuilt)
    assert "damaged" not in entry.read_text()
    assert not isinstance(dl._ffi_for(api), cffi.FFI)


def test_no_writable_cache_still_works(api, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file: no directory below it
    _works(dl._ffi_for(api))
    assert blocker.read_text() == ""
