"""The trace directory of one run: private, created exclusively, never shared by two
runs, and written without following links that the traced program may plant in it."""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

from ..errors import InputError

JOB = "job.json"
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def default_root() -> Path:
    """$IOPILOT_TRACE_ROOT, else $XDG_DATA_HOME/iopilot/traces, else
    ~/.local/share/iopilot/traces: never the program's working directory."""
    if root := os.environ.get("IOPILOT_TRACE_ROOT"):
        return Path(root)
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "iopilot" / "traces"


class TraceDir:
    """A directory this run owns.  Its descriptor is held for the whole run, so what
    iopilot writes lands in it even if its path is changed meanwhile."""

    def __init__(self, path: Path, created: bool) -> None:
        self.path, self.created = path, created
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        self.written: set[str] = set()  # names this run created, the only ones it removes

    @classmethod
    def new_default(cls, program: str) -> TraceDir:
        """``<root>/<program>-<YYYYmmdd-HHMMSS>-<random>``, mode 0700."""
        root = default_root()
        name = re.sub(r"[^A-Za-z0-9._+-]", "_", program).lstrip(".")[:64] or "prog"
        try:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            path = tempfile.mkdtemp(prefix=f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-",
                                    dir=root)  # fmt: skip
        except OSError as e:
            raise InputError(str(root), f"cannot create a trace directory: {e.strerror}",
                             "set IOPILOT_TRACE_ROOT or use --trace-dir") from None  # fmt: skip
        return cls(Path(path), created=True)

    @classmethod
    def given(cls, path: Path) -> TraceDir:
        """``--trace-dir``: created with mode 0700, or an existing empty real directory."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(path, 0o700)
            created = True
        except FileExistsError:
            created = False
        except OSError as e:
            raise InputError(str(path), f"cannot create: {e.strerror}") from None
        try:
            if not created:
                mode = os.lstat(path).st_mode
                if stat.S_ISLNK(mode):
                    raise InputError(str(path), "is a symbolic link; choose another --trace-dir")
                if not stat.S_ISDIR(mode):
                    raise InputError(str(path), "is not a directory; choose another --trace-dir")
            d = cls(path, created)
        except OSError as e:
            raise InputError(str(path), f"cannot open: {e.strerror}") from None
        if not created and os.listdir(d.fd):
            d.close()
            raise _holds_files(path)
        return d

    def claim(self, job: dict[str, Any]) -> None:
        """Write the first ``job.json`` exclusively: of two runs given one empty
        directory at once, the second stops here."""
        try:
            self._write_new(JOB, job)
        except FileExistsError:
            raise _holds_files(self.path) from None

    def write_job(self, job: dict[str, Any]) -> None:
        """Replace ``job.json`` by a fresh file: a link planted in its place is
        replaced, never followed."""
        tmp = f".{JOB}.{secrets.token_hex(8)}"
        try:
            self._write_new(tmp, job)
            os.replace(tmp, JOB, src_dir_fd=self.fd, dst_dir_fd=self.fd)
            self.written.add(JOB)
        finally:
            self._unlink(tmp)  # left only when the write failed

    def _write_new(self, name: str, job: dict[str, Any]) -> None:
        fd = os.open(name, _NEW_FILE, 0o600, dir_fd=self.fd)
        self.written.add(name)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(job, indent=1) + "\n")

    def holds_trace(self) -> bool:
        """Whether any traced process left a file (``p*.rec`` or ``p*.json``)."""
        return any(n.startswith("p") and n.endswith((".rec", ".json")) for n in os.listdir(self.fd))

    def discard(self) -> None:
        """Remove what this run wrote, and the directory if this run created it."""
        for name in list(self.written):
            self._unlink(name)
        if self.created:
            try:
                os.rmdir(self.path)
            except OSError:
                pass  # something else was left in it: keep it
        self.close()

    def _unlink(self, name: str) -> None:
        self.written.discard(name)
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _holds_files(path: Path) -> InputError:
    return InputError(str(path), "already holds files; choose another --trace-dir or remove them")
