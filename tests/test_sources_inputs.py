"""What ``iopilot report`` is pointed at: directories searched without
following links, manifests with relative, absolute and non-UTF-8 entries, and
the Python test that picks the idiom of the advice."""

from __future__ import annotations

import os

import pytest

from iopilot.checks.base import Context
from iopilot.checks.rankcost import is_python
from iopilot.checks.thresholds import defaults
from iopilot.errors import InputError
from iopilot.sources.inputs import expand_inputs
from kit import trace


def test_links_to_directories_are_not_followed(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.darshan").write_bytes(b"")
    top = tmp_path / "top"
    top.mkdir()
    (top / "b.darshan.gz").write_bytes(b"")
    (top / "link").symlink_to(real, target_is_directory=True)
    (top / "loop").symlink_to(top, target_is_directory=True)
    assert expand_inputs([str(top)]) == [str(top / "b.darshan.gz")]


def test_manifest_entries_relative_absolute_and_not_utf8(tmp_path):
    sub = tmp_path / "lists"
    sub.mkdir()
    odd = "caf\udce9.darshan"  # a Latin-1 byte in a file name
    lst = sub / "logs.txt"
    lst.write_bytes(b"# comment\n\n  a.darshan  \n/abs/b.darshan\ncaf\xe9.darshan\n")
    assert expand_inputs([f"@{lst}"]) == [str(sub / "a.darshan"), "/abs/b.darshan",
                                           str(sub / odd)]  # fmt: skip


def test_manifest_errors_name_the_list(tmp_path):
    missing = tmp_path / "none.txt"
    with pytest.raises(InputError) as e:
        expand_inputs([f"@{missing}"])
    assert e.value.path == str(missing) and "cannot read the list of logs" in str(e.value)
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n\n")
    with pytest.raises(InputError) as e:
        expand_inputs([f"@{empty}"])
    assert e.value.path == str(empty) and "names no path" in str(e.value)


def _py(exe: str) -> bool:
    tr = trace()
    tr.job.executable = exe
    return is_python(Context(tr, defaults()))


@pytest.mark.parametrize(("exe", "python"), [
    ("/usr/bin/python3.11 train.py", True),
    ("python", True),
    ("/opt/pypy3/bin/pypy3 -m app", True),
    ("/usr/bin/Python", False),  # the name as spelled
    ("/bin/sh run.py", True),  # a script as first or second argument
    ("/bin/env -S x.py", True),
    ("./app -a -b x.py", False),  # the third argument is too far
    ("/usr/bin/my-python-tool", False),
    ("/home/python/bin/app", False),  # only the last path part counts
    ("", False),
])  # fmt: skip
def test_is_python(exe, python):
    assert _py(exe) is python


def test_links_are_kept_as_given_when_named(tmp_path):
    # A link named on the command line is the user's choice: passed as given.
    target = tmp_path / "x.darshan"
    target.write_bytes(b"")
    link = tmp_path / "y.darshan"
    os.symlink(target, link)
    assert expand_inputs([str(link)]) == [str(link)]


def test_a_link_to_a_log_named_on_the_command_line_is_read(tmp_path):
    from iopilot.demo import example_dir
    from iopilot.sources import load

    target = example_dir() / "example.darshan"
    link = tmp_path / "mine.darshan"
    os.symlink(target, link)
    a, b = load(str(target)), load(str(link))
    assert (b.job.nprocs, b.job.runtime) == (a.job.nprocs, a.job.runtime)
    assert b.counters["POSIX"].total("POSIX_BYTES_WRITTEN") == \
        a.counters["POSIX"].total("POSIX_BYTES_WRITTEN") > 0  # fmt: skip
