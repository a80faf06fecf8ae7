"""Event sets of asynchronous POSIX I/O, from Python (``libiopilot_async.so``).

    from iopilot.overlap.engine import EventSet

    with EventSet() as es:
        es.write(fd, data, offset)        # data is copied: reuse it at once
        es.fsync(fd)
        ...                               # compute
        es.wait()                         # raises AsyncIOError on a failure

The contract is the C engine's (``runtime/include/iopilot_async.h``): one
background thread per set runs the operations in submission order; writes
copy the caller's bytes; a read fills its buffer in the background, which
is the caller's again once ``wait`` reports nothing pending; failures come
back from the next ``wait`` with the operation's number and errno.  The
engine's thread makes its system calls without the interpreter's lock, so
Python computes meanwhile (NumPy, or pure Python: the I/O does not hold
the lock).
"""

from __future__ import annotations

import ctypes
import errno as _errno
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError

WRITE, READ, FSYNC = 1, 2, 3
_OPS = {WRITE: "write", READ: "read", FSYNC: "fsync"}


class _Failure(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint64), ("op", ctypes.c_int), ("fd", ctypes.c_int),
                ("offset", ctypes.c_int64), ("bytes", ctypes.c_size_t),
                ("done", ctypes.c_size_t), ("error", ctypes.c_int)]  # fmt: skip


NOCOPY = 1  # IOPILOT_ES_NOCOPY of iopilot_async.h


class _Stats(ctypes.Structure):
    _fields_ = [("submitted", ctypes.c_uint64), ("completed", ctypes.c_uint64),
                ("failed", ctypes.c_uint64), ("bytes_written", ctypes.c_uint64),
                ("bytes_read", ctypes.c_uint64), ("copy_seconds", ctypes.c_double),
                ("busy_seconds", ctypes.c_double), ("wait_seconds", ctypes.c_double),
                ("queued_seconds", ctypes.c_double),
                ("max_queued_bytes", ctypes.c_size_t)]  # fmt: skip


class Failure:
    """One failed operation: its number, kind, descriptor, offset, size asked,
    bytes moved before the error, and errno."""

    __slots__ = ("bytes", "done", "errno", "fd", "id", "offset", "op")

    def __init__(self, f: _Failure) -> None:
        self.id, self.op, self.fd = int(f.id), _OPS.get(f.op, "?"), int(f.fd)
        self.offset, self.bytes, self.done = int(f.offset), int(f.bytes), int(f.done)
        self.errno = int(f.error)

    def __repr__(self) -> str:
        code = _errno.errorcode.get(self.errno, self.errno)
        return (f"Failure(#{self.id} {self.op} fd {self.fd} at {self.offset}: "
                f"{self.done} of {self.bytes} bytes, {code})")  # fmt: skip


class AsyncIOError(OSError):
    """Raised by ``wait`` when background operations failed; ``failures``
    lists them (the first one's errno is the exception's)."""

    def __init__(self, failures: list[Failure]) -> None:
        first = failures[0]
        super().__init__(first.errno, f"background {first.op} #{first.id} at offset "
                         f"{first.offset} failed after {first.done} of {first.bytes} bytes: "
                         f"{os.strerror(first.errno)} ({len(failures)} failure(s))")  # fmt: skip
        self.failures = failures


_lib: Any = None


def library_path() -> Path:
    """The built engine; a clear error when it was not built."""
    env = os.environ.get("IOPILOT_ASYNC_LIB")
    here = Path(__file__).resolve().parent.parent / "_lib" / "libiopilot_async.so"
    lib = Path(env) if env else here
    if not lib.exists():
        raise InputError(str(lib), "the asynchronous I/O engine is not built", "run `make` first")
    return lib


def _load() -> Any:
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(str(library_path()), use_errno=True)
        es_p, u64, sz, i64 = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_int64
        lib.iopilot_es_create.restype = es_p
        lib.iopilot_es_create.argtypes = []
        lib.iopilot_es_write.restype = u64
        lib.iopilot_es_write.argtypes = [es_p, ctypes.c_int, ctypes.c_void_p, sz, i64, ctypes.c_int]
        lib.iopilot_es_read.restype = u64
        lib.iopilot_es_read.argtypes = [es_p, ctypes.c_int, ctypes.c_void_p, sz, i64,
                                        ctypes.POINTER(sz)]  # fmt: skip
        lib.iopilot_es_fsync.restype = u64
        lib.iopilot_es_fsync.argtypes = [es_p, ctypes.c_int]
        lib.iopilot_es_wait.restype = ctypes.c_int
        lib.iopilot_es_wait.argtypes = [es_p, ctypes.c_double, ctypes.POINTER(sz),
                                        ctypes.POINTER(_Failure), ctypes.POINTER(sz)]  # fmt: skip
        lib.iopilot_es_get_stats.restype = None
        lib.iopilot_es_get_stats.argtypes = [es_p, ctypes.POINTER(_Stats)]
        lib.iopilot_es_close.restype = ctypes.c_int
        lib.iopilot_es_close.argtypes = [es_p]
        lib.iopilot_es_calibrate.restype = ctypes.c_int
        dp = ctypes.POINTER(ctypes.c_double)
        lib.iopilot_es_calibrate.argtypes = [ctypes.c_int, dp, dp, dp]
        _lib = lib
    return _lib


def costs(n: int = 2000) -> tuple[float, float, float]:
    """(seconds per submission while the thread is busy, extra seconds to wake
    an idle thread, the thread's own seconds per operation beyond the system
    call), measured by the C engine itself."""
    lib = _load()
    submit, wake, thread = ctypes.c_double(0), ctypes.c_double(0), ctypes.c_double(0)
    if lib.iopilot_es_calibrate(n, ctypes.byref(submit), ctypes.byref(wake),
                                ctypes.byref(thread)) != 0:  # fmt: skip
        e = ctypes.get_errno()
        raise OSError(e, f"cannot calibrate the engine: {os.strerror(e)}")
    return float(submit.value), float(wake.value), float(thread.value)


def _fileno(f: int | Any) -> int:
    return f if isinstance(f, int) else f.fileno()


class Read:
    """A read in flight: ``data`` is valid once the set's ``wait`` reports
    nothing pending (bytes up to the end of the file)."""

    __slots__ = ("_buf", "_got", "id")

    def __init__(self, n: int) -> None:
        self._buf = (ctypes.c_char * max(n, 1))()
        self._got = ctypes.c_size_t(0)
        self.id = 0

    @property
    def data(self) -> bytes:
        return self._buf.raw[: self._got.value]


class EventSet:
    """A queue of asynchronous writes, reads and fsyncs run by one background
    thread, in submission order."""

    def __init__(self) -> None:
        self._lib = _load()
        es = self._lib.iopilot_es_create()
        if not es:
            e = ctypes.get_errno()
            raise OSError(e, f"cannot start the I/O thread: {os.strerror(e)}")
        self._es = ctypes.c_void_p(es)
        self._keep: list[Any] = []  # buffers the thread may still use

    def _check(self, op_id: int, what: str) -> int:
        if not op_id:
            e = ctypes.get_errno()
            raise OSError(e, f"cannot queue the {what}: {os.strerror(e)}")
        return int(op_id)

    def _open(self) -> ctypes.c_void_p:
        if self._es is None:
            raise ValueError("the event set is closed")
        return self._es

    def write(self, f: int | Any, data: bytes | bytearray | memoryview, offset: int, *,
              copy: bool = True) -> int:  # fmt: skip
        """Queue a write of ``data`` at ``offset`` of the file (a descriptor or
        an object with ``fileno()``).  The bytes are copied now, unless
        ``copy`` is False: then the thread writes from ``data`` itself, which
        must stay unchanged until a ``wait`` reports nothing pending (two
        buffers taking turns, one written while the other is filled, save
        the copy).  Returns the operation's number."""
        es = self._open()
        view = memoryview(data).cast("B")
        n = view.nbytes
        src: Any
        if isinstance(data, bytes):
            src = data  # immutable: its own buffer, no copy here
        elif view.readonly:
            src = view.tobytes()
        else:
            src = (ctypes.c_char * n).from_buffer(view) if n else b""
        addr = ctypes.cast(src if not isinstance(src, bytes) else ctypes.c_char_p(src),
                           ctypes.c_void_p)  # fmt: skip
        op = self._lib.iopilot_es_write(es, _fileno(f), addr, n, offset,
                                        0 if copy else NOCOPY)  # fmt: skip
        if not copy:
            self._keep.append(src)  # the thread reads it until the wait
        del src
        return self._check(op, "write")

    def read(self, f: int | Any, n: int, offset: int) -> Read:
        """Queue a read of ``n`` bytes at ``offset``; its ``data`` is there after ``wait``."""
        es = self._open()
        r = Read(n)
        r.id = self._check(self._lib.iopilot_es_read(es, _fileno(f), r._buf, n, offset,
                                                     ctypes.byref(r._got)), "read")  # fmt: skip
        self._keep.append(r)
        return r

    def fsync(self, f: int | Any) -> int:
        """Queue an fsync of the file, after every operation queued before it."""
        return self._check(self._lib.iopilot_es_fsync(self._open(), _fileno(f)), "fsync")

    def wait(self, timeout: float | None = None) -> int:
        """Wait until nothing is pending (or ``timeout`` seconds; 0 just looks).
        Returns the operations still pending; raises AsyncIOError when some
        failed since the last wait."""
        es = self._open()
        pending = ctypes.c_size_t(0)
        room = 16
        fails = (_Failure * room)()
        nf = ctypes.c_size_t(room)
        t = -1.0 if timeout is None else max(0.0, float(timeout))
        self._lib.iopilot_es_wait(es, t, ctypes.byref(pending), fails, ctypes.byref(nf))
        if pending.value == 0:
            self._keep.clear()
        if nf.value:
            raise AsyncIOError([Failure(fails[i]) for i in range(min(nf.value, room))])
        return int(pending.value)

    def stats(self) -> dict[str, float]:
        """The set's counters: operations, bytes, and seconds copying, busy,
        waiting and queued."""
        s = _Stats()
        self._lib.iopilot_es_get_stats(self._open(), ctypes.byref(s))
        return {name: getattr(s, name) for name, _ in _Stats._fields_}

    def close(self) -> None:
        """Wait for everything and stop the thread; raises AsyncIOError if an
        operation failed that no wait reported."""
        if self._es is None:
            return
        try:
            self.wait()
        finally:
            es, self._es = self._es, None
            self._lib.iopilot_es_close(es)
            self._keep.clear()

    def __enter__(self) -> EventSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_es", None) is not None:
            try:
                self.close()
            except OSError:
                pass


__all__: Sequence[str] = ("AsyncIOError", "EventSet", "Failure", "Read", "costs", "library_path")
