"""``iopilot run`` refuses, in one line and before the program runs, a trace
directory it cannot use: on a full file system, or below a directory another
user could write into (who could then swap the trace directory for a link)."""

from __future__ import annotations

import grp
import os
import pwd

import pytest

from test_capture_run import MARKS, PY, clean_env, iopilot
from test_runtime_behind import small_fs  # noqa: F401  (a fixture)
from test_runtime_tracedir import fill


def test_a_full_trace_root_is_one_line_and_leaves_nothing(tmp_path, small_fs):  # noqa: F811
    fill(small_fs, leave=0)
    ran, root, d = tmp_path / "ran", small_fs / "traces", small_fs / "t"
    env = clean_env(tmp_path, IOPILOT_TRACE_ROOT=str(root))
    for args, named in (([], root), (["--trace-dir", str(d)], d)):
        p = iopilot(tmp_path, "--trace-only", *args, "--", PY, "-c", MARKS, str(ran), env=env)
        assert p.returncode == 2 and not ran.exists()
        assert p.stderr.splitlines() == [
            f"iopilot: error: {named}: cannot write the trace: no space left on device"
        ]
    assert sorted(os.listdir(small_fs)) == ["filler", "traces"] and not os.listdir(root)


def _ids(user: str, group: str) -> tuple[int, int]:
    try:
        return pwd.getpwnam(user).pw_uid, grp.getgrnam(group).gr_gid
    except KeyError:
        return 65534, 65534


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_trace_root_other_users_can_write_is_refused_before_running(tmp_path):
    uid, gid = _ids("nobody", "nogroup")
    shared, ran = tmp_path / "shared", tmp_path / "ran"
    (shared / "deep").mkdir(parents=True)
    os.chown(shared, uid, gid)
    os.chmod(shared, 0o777)

    def refused(why: str) -> None:
        for args, env in ((["--trace-dir", str(shared / "t")], None),
                          (["--trace-dir", str(shared / "deep" / "t")], None),
                          ([], clean_env(tmp_path, IOPILOT_TRACE_ROOT=str(shared / "traces")))):
            p = iopilot(tmp_path, "--trace-only", *args, "--", PY, "-c", MARKS, str(ran), env=env)
            assert p.returncode == 2 and not ran.exists(), p.stderr
            (line,) = p.stderr.splitlines()
            assert line.startswith(f"iopilot: error: {shared}: ") and why in line, line
        assert os.listdir(shared) == ["deep"] and not os.listdir(shared / "deep")

    refused("mode 0777 without the sticky bit")
    os.chmod(shared, 0o755)  # only its owner can write it: still another user
    refused(f"owned by uid {uid}")
    os.chown(shared, 0, gid)
    os.chmod(shared, 0o770)  # a group of other users
    refused("mode 0770 without the sticky bit")
    os.chmod(shared, 0o1777)  # like /tmp: others cannot move what is ours
    p = iopilot(tmp_path, "--trace-only", "--trace-dir", str(shared / "t"), "--", PY, "-c",
                MARKS, str(ran))  # fmt: skip
    assert p.returncode == 0 and ran.exists(), p.stderr
