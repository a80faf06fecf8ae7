"""iopilot tune end to end: real programs run under `iopilot run`, real
Optuna storage, failures, resume after SIGKILL, the JSON and the files left."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from iopilot.bench.kernels import KERNEL_DIR

IOPILOT = [sys.executable, "-m", "iopilot"]

# Writes a file; how depends on OMPI_MCA_fcoll (exported from the [ompi] table):
# a crash, an exit status, a hang, a missing output, or work that takes time.
PROGRAM = textwrap.dedent("""\
    import os, signal, sys, time
    how = os.environ.get("OMPI_MCA_fcoll", "")
    if len(sys.argv) > 1:
        with open(sys.argv[1], "a") as log:
            log.write(how + "\\n")
    if how == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if how == "exit3":
        sys.exit(3)
    if how == "hang":
        time.sleep(600)
    if how != "nothing":
        with open("out.dat", "wb", buffering=0) as f:
            for _ in range(2000 if how == "fast" else 20000):
                f.write(b"x")
""")

# Prints a kernel-style result whose bandwidth is set by OMPI_MCA_fcoll, with a
# fixed jitter per run (taken in turn from a counter file): the noise, known.
BANDWIDTH = textwrap.dedent("""\
    import json, os, sys
    counter = sys.argv[1]
    n = int(open(counter).read()) if os.path.exists(counter) else 0
    open(counter, "w").write(str(n + 1))
    base = {"": 100.0, "close": 105.0, "far": 200.0}[os.environ.get("OMPI_MCA_fcoll", "")]
    mib = base * (0.9, 1.0, 1.1)[n % 3]
    it = {"iteration": 0, "open_s": 0.0, "close_s": 0.0, "write_s": 1.0, "read_s": 0.0,
          "bytes_written": int(mib * 1048576), "bytes_read": 0, "write_ops": 1,
          "read_ops": 0, "verified": None}
    print("IOPILOT-RESULT " + json.dumps({"kernel": "fake", "iterations": [it]}))
""")


def _tune(tmp_path, args, command, cwd=None, check=True):
    p = subprocess.run([*IOPILOT, "tune", *args, "--", *command], cwd=cwd or tmp_path,
                       capture_output=True, text=True, timeout=600)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def _space(tmp_path, text, name="space.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_failed_trials_are_recorded_with_their_reasons_and_the_study_goes_on(tmp_path):
    work = tmp_path / "cwd"
    work.mkdir()
    (work / "prog.py").write_text(PROGRAM)
    space = _space(tmp_path, """\
        [ompi.fcoll]
        values = ["crash", "exit3", "hang", "nothing", "fast"]
        """)
    out = tmp_path / "out"
    # No --timeout: a trial may take five times the default's time (at least
    # 10 s), so a machine slow enough to stretch the default stretches it too.
    _tune(tmp_path, ["--space", space, "--strategy", "grid", "--trials", "10", "--repeats", "1",
                     "--verify", "test -s out.dat", "--objective", "wall",
                     "--out", str(out), "--json", str(out / "s.json")],
          ["python3", "prog.py"], cwd=work)
    doc = json.loads((out / "s.json").read_text())
    default = next(t for t in doc["trials"] if t["phase"] == "default")
    assert doc["timeout"] == pytest.approx(max(10.0, 5 * max(default["seconds"])))
    by = {t["point"].get("ompi.fcoll", "default"): t for t in doc["trials"]}
    assert list(by) == ["default", "crash", "exit3", "hang", "nothing", "fast"]
    assert by["crash"]["status"] == "failed" and "signal 11" in by["crash"]["reason"]
    assert by["exit3"]["status"] == "failed" and "exit status 3" in by["exit3"]["reason"]
    assert by["hang"]["status"] == "failed"
    assert f"timed out after {doc['timeout']:g} s" in by["hang"]["reason"]
    assert by["nothing"]["status"] == "failed" and "verify failed" in by["nothing"]["reason"]
    assert by["fast"]["status"] == "ok" and by["fast"]["objective"] > 0
    for t in doc["trials"]:
        assert set(t) >= {"settings", "objective", "repeats", "status", "reason"}
    assert by["fast"]["settings"] == {"ompi": {"fcoll": "fast"}}
    assert doc["stopped"] == "every point of the grid was measured"
    # every trial ran in a directory of its own, since removed
    assert sorted(p.name for p in work.iterdir()) == ["prog.py"]
    assert sorted(p.name for p in out.iterdir()) == ["best.toml", "convergence.png", "s.json",
                                                     "study.db"]


def test_io_objective_finds_the_faster_setting_and_reports_json(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    space = _space(tmp_path, """\
        [ompi.fcoll]
        values = ["fast"]
        """)
    out = tmp_path / "out"
    p = _tune(tmp_path, ["--space", space, "--trials", "2", "--repeats", "2", "--out", str(out),
                         "--json", "s.json"], ["python3", "prog.py"])
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["objective"] == "io" and doc["unit"] == "s"
    assert doc["default"]["settings"] == {} and len(doc["default"]["runs"]) == 2
    assert doc["best"]["settings"] == {"ompi": {"fcoll": "fast"}}, doc
    assert doc["speedup"] > 2 and doc["verdict"] == "win"
    assert doc["best"]["objective"] < doc["default"]["objective"]
    assert "ompi.fcoll=fast" in p.stdout and "win" in p.stdout
    assert "fcoll = \"fast\"" in (out / "best.toml").read_text()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out", "prog.py", "s.json",
                                                          "space.toml"]


@pytest.mark.parametrize("value, verdict, speedup", [("close", "within noise", 1.0),
                                                     ("far", "win", 2.0)])
def test_noise_rule_end_to_end(tmp_path, value, verdict, speedup):
    """Runs of +-10 %: 5 % better overlaps the default (no win), 2x does not."""
    (tmp_path / "bw.py").write_text(BANDWIDTH)
    space = _space(tmp_path, f'[ompi.fcoll]\nvalues = ["{value}"]\n')
    _tune(tmp_path, ["--space", space, "--trials", "2", "--repeats", "3", "--objective",
                     "bandwidth", "--out", str(tmp_path / "out"), "--json", "s.json"],
          ["python3", "bw.py", str(tmp_path / "count")])
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["unit"] == "MiB/s" and doc["direction"] == "maximize"
    assert sorted(doc["default"]["runs"]) == pytest.approx([90, 100, 110], rel=1e-3)
    assert doc["trials"][1]["repeats"] == 3  # promising: measured as often as the default
    assert doc["verdict"] == verdict
    assert doc["speedup"] == pytest.approx(speedup, rel=1e-3)
    assert doc["best_candidate"]["settings"] == {"ompi": {"fcoll": value}}
    assert doc["best"]["settings"] == ({} if verdict != "win" else {"ompi": {"fcoll": value}})


def test_a_study_killed_with_sigkill_resumes_without_redoing_trials(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    log = tmp_path / "runs.log"
    space = _space(tmp_path, """\
        [ompi.fcoll]
        values = ["a", "b", "c", "d", "e", "f", "g", "h"]
        """)
    args = ["--space", space, "--strategy", "random", "--seed", "7", "--trials", "6",
            "--repeats", "1", "--objective", "wall", "--out", str(tmp_path / "out"),
            "--json", "s.json"]
    cmd = [*IOPILOT, "tune", *args, "--", "python3", "prog.py", str(log)]
    first = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= 4:
            break
        time.sleep(0.05)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    time.sleep(1.5)  # the run in flight ends on its own
    started = log.read_text().splitlines()
    assert 4 <= len(started) < 7
    _tune(tmp_path, args, ["python3", "prog.py", str(log)])
    doc = json.loads((tmp_path / "s.json").read_text())
    assert len(doc["trials"]) == 6
    points = [t["point"].get("ompi.fcoll", "") for t in doc["trials"]]
    assert len(set(points)) == 6
    ran = log.read_text().splitlines()
    # runs finished before the kill were kept; at most the one in flight ran twice
    assert len(ran) <= 6 + 1
    assert points[:3] == started[:3]


@pytest.mark.skipif(not (KERNEL_DIR / "ior").exists(), reason="kernels not built (make)")
def test_ior_bandwidth_through_mpirun(tmp_path):
    space = _space(tmp_path, '[ompi.io]\nvalues = ["romio321"]\ndefault = "ompio"\n')
    mpirun = ["mpirun", "-np", "2", "--oversubscribe"]
    if os.geteuid() == 0:
        mpirun.append("--allow-run-as-root")
    _tune(tmp_path, ["--space", space, "--trials", "2", "--repeats", "1", "--objective",
                     "bandwidth", "--out", str(tmp_path / "out"), "--json", "s.json"],
          [*mpirun, str(KERNEL_DIR / "ior"), "--api", "mpiio", "--collective",
           "--transfer", "4k", "--block", "64k", "--write"])
    doc = json.loads((tmp_path / "s.json").read_text())
    assert [t["status"] for t in doc["trials"]] == ["ok", "ok"]
    assert all(t["objective"] > 0 for t in doc["trials"])
    assert doc["trials"][1]["settings"] == {"ompi": {"io": "romio321"}}


def test_bad_input_is_one_line(tmp_path):
    space = _space(tmp_path, '[mpiio.romio_cb_write]\nvalues = ["sometimes"]\n')
    p = _tune(tmp_path, ["--space", space, "--out", str(tmp_path / "o")], ["true"], check=False)
    assert p.returncode == 2
    assert "[mpiio.romio_cb_write] values" in p.stderr and "Traceback" not in p.stderr
    p = _tune(tmp_path, ["--out", str(tmp_path / "o"), "--repeats", "1"], ["false"],
              check=False)
    assert p.returncode == 2 and "the default run failed: exit status 1" in p.stderr
