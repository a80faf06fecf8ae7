"""The trace directory of one run: private, created exclusively, never shared by two
runs, and written without following links that the traced program may plant in it.
Neither it nor any directory above it may be writable by another user: as ssh
checks the directories of its keys, since such a user could swap the trace
directory for a link while the program runs."""

from __future__ import annotations

import grp
import json
import os
import pwd
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


def check_private(path: Path, hint: str) -> None:
    """Refuse ``path`` (or the part of it that exists) when it or a directory
    above it can be written by a user other than the caller and root: owned
    by another user, or writable by others or another group without the
    sticky bit (a sticky directory such as /tmp lets no one move what is ours)."""
    uid = os.geteuid()
    real = Path(os.path.realpath(path))
    for d in (real, *real.parents):
        try:
            st = os.stat(d)
        except FileNotFoundError:
            continue  # iopilot creates it, for the caller alone
        except OSError as e:
            raise InputError(str(d), f"cannot check who can write to it: {e.strerror}") from None
        others = st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP
                                               and not _own_group(st.st_gid, uid))  # fmt: skip
        if others and not st.st_mode & stat.S_ISVTX:
            raise InputError(str(d), f"mode {stat.S_IMODE(st.st_mode):04o} without the sticky bit: "
                                     "other users could swap the trace directory for a link",
                             hint)  # fmt: skip
        if st.st_uid not in (0, uid):
            raise InputError(str(d), f"owned by uid {st.st_uid} ({_user(st.st_uid)}), who could "
                                     "swap the trace directory for a link", hint)  # fmt: skip


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "no such user"


def _own_group(gid: int, uid: int) -> bool:
    """The caller's private group (named after the caller, no other member), as
    systems with a group per user make it: its write permission is the caller's."""
    try:
        name, group = pwd.getpwuid(uid).pw_name, grp.getgrgid(gid)
    except KeyError:
        return False
    return group.gr_name == name and set(group.gr_mem) <= {name}


def _cannot_write(path: Path, e: OSError) -> InputError:
    reason = e.strerror or str(e)
    return InputError(str(path), f"cannot write the trace: {reason[:1].lower()}{reason[1:]}")


class TraceDir:
    """A directory this run owns.  Its descriptor is held for the whole run, so what
    iopilot writes lands in it even if its path is changed meanwhile.  ``named`` is
    the directory the user chose, which errors name (the root for a default one)."""

    def __init__(self, path: Path, created: bool, named: Path | None = None) -> None:
        self.path, self.created, self.named = path, created, named or path
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        self.written: set[str] = set()  # names this run created, the only ones it removes

    @classmethod
    def new_default(cls, program: str) -> TraceDir:
        """``<root>/<program>-<YYYYmmdd-HHMMSS>-<random>``, mode 0700."""
        root = default_root()
        name = re.sub(r"[^A-Za-z0-9._+-]", "_", program).lstrip(".")[:64] or "prog"
        hint = "set IOPILOT_TRACE_ROOT or use --trace-dir"
        check_private(root, hint)
        try:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            check_private(root, hint)  # what mkdir made, as the umask let it
            path = tempfile.mkdtemp(prefix=f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-",
                                    dir=root)  # fmt: skip
        except OSError as e:
            raise InputError(str(root), f"cannot create a trace directory: {e.strerror}",
                             hint) from None  # fmt: skip
        return cls(Path(path), created=True, named=root)

    @classmethod
    def given(cls, path: Path) -> TraceDir:
        """``--trace-dir``: created with mode 0700, or an existing empty real directory."""
        hint = "choose another --trace-dir"
        check_private(path.parent, hint)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            check_private(path.parent, hint)  # what mkdir made, as the umask let it
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
                check_private(path, hint)
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
        except OSError as e:  # a full file system, a quota ...
            raise _cannot_write(self.named, e) from None

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
