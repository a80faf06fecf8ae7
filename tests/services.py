"""Real servers for the tests: a PostgreSQL server and a single-node Slurm.

Each starts in its own short temporary directory, listens only on a unix
socket or the loopback address, and is stopped by its process id when the
``with`` block ends, whatever happened inside it; the directory goes too.
Without the Debian packages (``tools/bootstrap.sh`` installs them) the
fixtures skip and name the missing package.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

START_TIMEOUT = 20.0  # seconds; both start in about one on an idle machine


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pid_alive(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def processes_using(path: Path) -> list[int]:
    """PIDs of the processes whose working directory, command line or
    environment names ``path``: a server's children and its jobs' tasks
    (Slurm's carry SLURM_CONF) included, which their PIDs alone would miss."""
    needle = str(path).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if (os.readlink(entry / "cwd").encode().startswith(needle)
                    or needle in (entry / "cmdline").read_bytes()
                    or needle in (entry / "environ").read_bytes()):
                found.append(int(entry.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return [pid for pid in found if pid_alive(pid)]


def _stop(proc: subprocess.Popen, sig: int, grace: float = 10.0) -> None:
    """Signal ``proc`` and reap it; SIGKILL if it outlives ``grace`` seconds."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_until(ready, procs: list[subprocess.Popen], what: str, logs: list[Path]) -> None:
    """Poll ``ready()`` until true; fail early, with the logs, if a daemon died."""
    deadline = time.monotonic() + START_TIMEOUT
    while not ready():
        dead = [p for p in procs if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            why = f"exited with status {dead[0].returncode}" if dead else "did not become ready"
            tails = "\n".join(f"--- {log}\n{_tail(log)}" for log in logs)
            raise RuntimeError(f"{what} {why} within {START_TIMEOUT:.0f} s\n{tails}")
        time.sleep(0.05)


def _short_tempdir(prefix: str) -> Path:
    """A fresh directory with a short path that other accounts can enter:
    under /tmp rather than a long or private TMPDIR."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp" if os.path.isdir("/tmp") else None))


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# --------------------------------------------------------------------------- PostgreSQL


def postgres_bindir() -> Path | None:
    """The newest installed PostgreSQL server's bin directory (not on PATH in Debian)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    postgres = shutil.which("postgres")
    return Path(postgres).parent if postgres else None


@dataclass
class Postgres:
    dir: Path
    port: int
    pid: int
    database: str
    bindir: Path

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the database (psycopg 3 driver, unix socket)."""
        return self.url_for(self.database)

    def url_for(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@/{database}?host={self.dir}&port={self.port}"

    def create_database(self, name: str) -> str:
        """Create one more database on this server; returns its URL."""
        subprocess.run([str(self.bindir / "psql"), "-h", str(self.dir), "-p", str(self.port),
                        "-U", "postgres", "-q", "-v", "ON_ERROR_STOP=1",
                        "-c", f'create database "{name}"'],
                       check=True, capture_output=True, timeout=30)
        return self.url_for(name)

    def query(self, database: str, sql: str) -> str:
        """The rows of ``sql`` run on ``database``, one a line, fields by ``|``."""
        r = subprocess.run([str(self.bindir / "psql"), "-h", str(self.dir), "-p", str(self.port),
                            "-U", "postgres", "-d", database, "-tAq", "-v", "ON_ERROR_STOP=1",
                            "-c", sql], check=True, capture_output=True, text=True, timeout=30)
        return r.stdout.strip()


@contextlib.contextmanager
def postgres_server(database: str = "iopilot") -> Iterator[Postgres]:
    """A throw-away PostgreSQL server on a unix socket only (no TCP listener)."""
    bindir = postgres_bindir()
    if bindir is None or not (bindir / "initdb").exists():
        pytest.skip("PostgreSQL server is not installed (Debian package postgresql)")
    # The server refuses to run as root: run it as the postgres account then.
    as_user: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv is missing (Debian package util-linux)")
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("no postgres account (Debian package postgresql-common makes it)")
        as_user = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"]
    d = _short_tempdir("pg")  # short: socket paths hold 107 bytes at most
    proc = None
    try:
        if as_user:
            shutil.chown(d, "postgres", "postgres")
        os.chmod(d, 0o755)
        log = d / "server.log"
        subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(d / "data"), "-U", "postgres",
                        "-A", "trust", "--no-sync", "-E", "UTF8"],
                       check=True, capture_output=True, timeout=60)
        port = 5432  # only names the socket file; the directory is ours alone
        with open(log, "wb") as out:
            # setpriv execs the server, so this PID is the postmaster's.
            proc = subprocess.Popen(
                [*as_user, str(bindir / "postgres"), "-D", str(d / "data"), "-k", str(d),
                 "-p", str(port), "-c", "listen_addresses=", "-c", "fsync=off",
                 "-c", "full_page_writes=off", "-c", "synchronous_commit=off"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)

        def ready() -> bool:
            return subprocess.run([str(bindir / "pg_isready"), "-q", "-h", str(d), "-p", str(port)],
                                  timeout=10).returncode == 0

        _wait_until(ready, [proc], "postgres", [log])
        server = Postgres(dir=d, port=port, pid=proc.pid, database=database, bindir=bindir)
        server.create_database(database)
        yield server
    finally:
        if proc is not None:
            _stop(proc, signal.SIGINT)  # "fast" shutdown: ends the sessions, no checkpoint wait
        shutil.rmtree(d, ignore_errors=True)


# --------------------------------------------------------------------------- Slurm

SLURM_CONF = """\
ClusterName=iopilot
SlurmctldHost={host}({addr})
SlurmUser={user}
SlurmdUser={user}
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
AuthType=auth/none
CredType=cred/none
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/ctld.pid
SlurmdPidFile={dir}/d.pid
SlurmctldLogFile={dir}/ctld.log
SlurmdLogFile={dir}/d.log
ProctrackType=proctrack/linuxproc
TaskPlugin={task_plugin}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
KillWait=2
InactiveLimit=0
MinJobAge=300
NodeName={host} NodeAddr={addr} CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


@dataclass
class Slurm:
    dir: Path
    conf: Path
    pids: list[int] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        """What a client (srun, sbatch, squeue) needs to reach this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def client_env(self) -> dict[str, str]:
        """The current environment pointed at this cluster, outside any allocation."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        return {**env, **self.env}

    def run(self, *command: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """A client command run in the cluster's directory (where a batch job's
        slurm-N.out lands by default, removed with the rest)."""
        return subprocess.run(list(command), env=self.client_env(), cwd=self.dir,
                              capture_output=True, text=True, timeout=timeout)


def _missing_slurm() -> str | None:
    for prog, pkg in (("/usr/sbin/slurmctld", "slurmctld"), ("/usr/sbin/slurmd", "slurmd"),
                      ("srun", "slurm-client"), ("sinfo", "slurm-client")):
        if not (Path(prog).exists() if prog.startswith("/") else shutil.which(prog)):
            return f"{prog} is missing (Debian package slurm-wlm, which brings {pkg})"
    return None


@contextlib.contextmanager
def slurm_cluster(cpus: int = 2, task_plugin: str = "task/none") -> Iterator[Slurm]:
    """A single-node Slurm (slurmctld and slurmd as this user, no authentication,
    loopback only) in a fresh directory; jobs left running are cancelled at the end.
    ``task_plugin`` "task/affinity" makes ``srun --cpu-bind`` bind tasks."""
    missing = _missing_slurm()
    if missing:
        pytest.skip(missing)
    host = socket.gethostname().split(".")[0]
    # With NoInAddrAny the daemons listen on the address the host name resolves
    # to (127.0.0.1 or Debian's 127.0.1.1): only a loopback one keeps them local.
    try:
        addr = socket.gethostbyname(host)
    except OSError as e:
        pytest.skip(f"host name {host} does not resolve ({e}): Slurm needs it")
    if not addr.startswith("127."):
        pytest.skip(f"host name {host} resolves to {addr}, not a loopback address: "
                    "a test cluster without authentication would listen on the network")
    d = _short_tempdir("sl")  # short: slurmstepd puts sockets in the spool
    (d / "state").mkdir()
    (d / "spool").mkdir()
    conf = d / "slurm.conf"
    conf.write_text(SLURM_CONF.format(
        host=host, addr=addr, user=pwd.getpwuid(os.geteuid()).pw_name, dir=d, cpus=cpus,
        ctld_port=free_port(), d_port=free_port(), task_plugin=task_plugin))
    cluster = Slurm(dir=d, conf=conf)
    env = cluster.client_env()
    procs: list[subprocess.Popen] = []
    try:
        for daemon, args in (("slurmctld", ["-D", "-i"]), ("slurmd", ["-D"])):
            with open(d / f"{daemon}.out", "wb") as out:
                procs.append(subprocess.Popen(
                    [f"/usr/sbin/{daemon}", *args], env=env, stdin=subprocess.DEVNULL,
                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
        cluster.pids = [p.pid for p in procs]

        def ready() -> bool:
            try:
                r = cluster.run("sinfo", "-h", "-o", "%T", timeout=5)
            except subprocess.TimeoutExpired:
                return False
            return r.returncode == 0 and r.stdout.strip() in ("idle", "mixed", "allocated")

        _wait_until(ready, procs, "slurm",
                    [d / "ctld.log", d / "d.log", d / "slurmctld.out", d / "slurmd.out"])
        yield cluster
    finally:
        if len(procs) == 2 and procs[0].poll() is None:
            _cancel_all(cluster)
        for proc in reversed(procs):  # slurmd first, then the controller
            _stop(proc, signal.SIGTERM)
        shutil.rmtree(d, ignore_errors=True)


def _cancel_all(cluster: Slurm) -> None:
    """Cancel every job of this cluster and wait (a few seconds at most) until
    their slurmstepd processes are gone, so that nothing outlives the daemons."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        jobs = cluster.run("squeue", "-h", "-o", "%i", timeout=10).stdout.split()
        if not jobs:
            return
        cluster.run("scancel", *jobs, timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if not cluster.run("squeue", "-h", "-o", "%i", timeout=10).stdout.split():
                break
            time.sleep(0.1)
        # A job gone from the queue may still have its slurmstepd and tasks
        # exiting (longer on a busy machine): wait for them too.
        while time.monotonic() < deadline:
            if not set(processes_using(cluster.dir)) - set(cluster.pids):
                return
            time.sleep(0.1)
