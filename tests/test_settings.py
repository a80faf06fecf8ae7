"""Settings files: the Python API (load, validate, dump, job_env)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iopilot import settings
from iopilot.errors import InputError

FULL = """\
[mpiio]                      # MPI-IO hints
romio_cb_write = "disable"
cb_nodes = 2
[mpiio.files."*.h5"]
striping_factor = 4
[ompi]
io = "romio321"
fcoll = "two_phase"
[hdf5]
alignment = 1048576
alignment_threshold = 0
sieve_buf_size = 262144
meta_block_size = 1048576
coll_metadata_ops = true
coll_metadata_write = true
page_buffer_size = 0
chunk = [1024]
fill_time = "never"
transfer = "collective"
[stdio]
buffer_size = "1m"
[lustre]
stripe_count = 4
stripe_size = "1m"
"""


def test_load_full_file_and_dump_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "s.toml"
    src.write_text(FULL)
    doc = settings.load(src)
    assert doc["mpiio"]["files"] == {"*.h5": {"striping_factor": 4}}
    assert doc["hdf5"]["chunk"] == [1024]
    out = tmp_path / "out.toml"
    settings.dump(doc, out)
    assert settings.load(out) == doc


def test_job_env_names_the_open_mpi_variables() -> None:
    doc = {"ompi": {"io": "romio321", "fcoll": "two_phase", "io_ompio_bytes_per_agg": "1m"}}
    assert settings.job_env(doc) == {"OMPI_MCA_io": "romio321", "OMPI_MCA_fcoll": "two_phase",
                                     "OMPI_MCA_io_ompio_bytes_per_agg": "1048576"}  # fmt: skip
    assert settings.job_env({}) == {}


@pytest.mark.parametrize(("doc", "words"), [
    ({"hdf5": {"fill_time": "sometimes"}}, ["[hdf5] fill_time", "sometimes"]),
    ({"hdf5": {"alignment": -1}}, ["[hdf5] alignment", "negative"]),
    ({"stdio": {"buffer_size": "lots"}}, ["[stdio] buffer_size", "not a size"]),
    ({"mpiio": {"cb_node": 1}}, ["[mpiio] cb_node", "unknown name"]),
    ({"mpiio": {"cb_nodes": "2"}}, ["[mpiio] cb_nodes", "integer"]),
    ({"mpiio": {"files": {"*.h5": {"cb_nodes": True}}}}, ['[mpiio.files."*.h5"] cb_nodes']),
    ({"hdf5": {"chunk": [0]}}, ["[hdf5] chunk", "positive"]),
    ({"hdf5": {"coll_metadata_ops": 1}}, ["[hdf5] coll_metadata_ops", "true or false"]),
    ({"nfs": {}}, ["[nfs]", "unknown table"]),
    ({"posix": {"direct": "yes"}}, ["[posix] direct", "true or false"]),
    ({"posix": {"direct_min_size": -1}}, ["[posix] direct_min_size", "negative"]),
    ({"ompi": {"io": ""}}, ["[ompi] io"]),
])  # fmt: skip
def test_validate_names_table_key_and_reason(doc: dict, words: list[str]) -> None:
    with pytest.raises(InputError) as e:
        settings.validate(doc, "s.toml")
    msg = str(e.value)
    assert msg.startswith("s.toml: ") and "\n" not in msg
    for w in words:
        assert w in msg


def test_load_reports_broken_toml(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[mpiio\ncb_nodes = ")
    with pytest.raises(InputError, match="not valid TOML"):
        settings.load(bad)
    with pytest.raises(InputError, match="cannot read"):
        settings.load(tmp_path / "missing.toml")


def test_sizes() -> None:
    assert settings.parse_size("4k") == 4096
    assert settings.parse_size("1M") == 1 << 20
    assert settings.parse_size("2GiB") == 2 << 30
    assert settings.parse_size(7) == 7


def test_every_setting_is_well_formed() -> None:
    for s in settings.SETTINGS:
        assert s.table in settings.TABLES and s.kind in settings.KINDS
        assert (s.kind == "enum") == bool(s.choices)
        assert s.help and s.where and s.layer


def test_c_header_is_generated_from_the_table() -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, str(root / "tools/gen_settings.py"), "--check"],
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr


def test_terminal_names_the_dataset_a_setting_was_applied_to():
    from iopilot.report.terminal import settings_block

    def outcome(obj):
        return {"setting": "hdf5.chunk", "value": "[64]", "outcome": "applied", "detail": "",
                "count": 1, "file": "/scratch/run/out.h5", "object": obj}  # fmt: skip

    st = {"file": "s.toml", "errors": [], "dropped": 0, "outcomes": [outcome("/a")]}
    (line,) = [x for x in settings_block(st, lambda t, _c: t) if "hdf5.chunk" in x]
    assert line.endswith("on out.h5 /a")
    st["outcomes"].append(outcome("/b"))
    text = "\n".join(settings_block(st, lambda t, _c: t, verbose=True))
    assert "on 2 file(s)/object(s)" in text and "- out.h5 /a" in text and "- out.h5 /b" in text
    st["outcomes"] = [dict(outcome(""), file="/x/f.dat")]
    (line,) = [x for x in settings_block(st, lambda t, _c: t) if "hdf5.chunk" in x]
    assert line.endswith("on f.dat")


@pytest.mark.parametrize(("outcomes", "said"), [
    (["applied", "applied"], None),
    (["ignored"], "did not take posix.direct"),
    (["rejected", "ignored"], "did not take posix.direct"),
    (["applied", "ignored"], "posix.direct was taken 2 time(s) and refused 3"),
    (["rejected", "applied"], "posix.direct was taken 3 time(s) and refused 2"),
])  # fmt: skip
def test_terminal_tells_a_setting_refused_from_one_taken_in_part(outcomes, said):
    from iopilot.report.terminal import settings_block

    st = {"file": "s.toml", "errors": [], "dropped": 0, "outcomes": [
        {"setting": "posix.direct", "value": "true", "outcome": o, "detail": f"why {i}",
         "count": 2 + i, "file": "/x/f.dat", "object": None} for i, o in enumerate(outcomes)]}
    warnings = [x for x in settings_block(st, lambda t, _c: t) if x.startswith("  !")]
    assert warnings == ([] if said is None else [warnings[0]])
    if said:
        assert said in warnings[0]


@pytest.mark.parametrize(("busy", "waited", "hidden"), [(2.0, 0.5, "1.500"), (0.5, 2.0, "0.000")])
def test_write_behind_block_states_the_overlap_in_seconds(busy, waited, hidden):
    from iopilot.report.terminal import behind_block

    wb = {"writes": 10, "bytes": 2**21, "busy_seconds": busy, "wait_seconds": waited,
          "synchronous": 1, "errors": 0, "relaxed": False}  # fmt: skip
    text = "\n".join(behind_block(wb, lambda t, _c: t))
    assert f"overlap achieved: {hidden} s" in text and "2.0 MiB" in text
    assert "failed" not in text
    text = "\n".join(behind_block(dict(wb, errors=3, relaxed=True), lambda t, _c: t))
    assert "3 deferred write(s) failed" in text and "relaxed" in text
