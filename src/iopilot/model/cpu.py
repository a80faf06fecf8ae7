"""Where each traced process could run, and what its processors did: the CPUs
its affinity mask allowed, the node's online CPUs, the launcher and its
binding, its user and system CPU time, the CPU time of its large reads and
writes (the I/O's own cost of copying data to and from the kernel), and where
its background I/O threads (write-behind's, the event-set engine's) ran.
From the ``cpu``, ``write_behind`` and ``async_engine`` parts of the process
summaries (``docs/trace-format.md``); an asynchronous I/O thread hides I/O
behind computation only when it has a core the computation does not use."""

from __future__ import annotations

from .._record import field, record


@record(frozen=True)
class BackgroundThread:
    """A background I/O thread of a process (or the engine's threads together)."""

    kind: str  # the summary part it comes from: "write_behind" or "async_engine"
    cpus: tuple[int, ...]  # the CPUs it was given (all the engine's threads together)
    shares_core: bool  # it could run only on the core its creating thread was bound to
    cpu_s: float | None  # its own CPU time (the engine's: the threads that ended); None unknown
    creator_cpu: int | None = None  # the CPU of the thread that created it; None unknown
    threads: int = 1


@record(frozen=True)
class ProcessCpu:
    """One process image's processors (a rank, or the program of a serial run)."""

    rank: int | None
    pid: int
    allowed: tuple[int, ...]  # CPUs of its affinity mask at start; () unknown
    online: int  # the node's online CPUs
    ran_on: int | None  # the CPU its first thread started on
    user_s: float | None  # user and system CPU time of the whole process; None unknown
    system_s: float | None
    io_cpu_s: float  # CPU time of its measured data calls (64 KiB or more, sampled)
    io_cpu_bytes: int  # the bytes those calls moved
    launcher: str  # "openmpi", "slurm", "mpich" or "" (none seen)
    binding: str  # the launcher's binding variables, "VAR=value VAR=value", or ""
    threads: tuple[BackgroundThread, ...] = field(default_factory=tuple)
    io_sync_cpu_s: float = 0.0  # CPU time of its measured fsyncs and fdatasyncs (sampled)
    io_syncs: int = 0  # how many those were

    @property
    def bound(self) -> bool:
        """Confined to fewer CPUs than the node has online."""
        return 0 < len(self.allowed) < self.online

    @property
    def io_cpu_per_byte(self) -> float | None:
        """Seconds of CPU per byte of large reads and writes; None when none was measured."""
        return self.io_cpu_s / self.io_cpu_bytes if self.io_cpu_bytes > 0 else None

    @property
    def sync_cpu_seconds(self) -> float | None:
        """Seconds of CPU per fsync (starting the write-back); None when none was measured."""
        return self.io_sync_cpu_s / self.io_syncs if self.io_syncs > 0 else None

    def shares_core(self) -> bool:
        """A background I/O thread of it had no CPU but its creator's."""
        return any(t.shares_core for t in self.threads)
