"""Where a job's ranks could run, and how to give each rank's background I/O
thread a core of its own in the launcher the job used.

Launchers bind ranks to cores by default (Open MPI's ``mpirun`` to one core
a rank for small jobs, Slurm's ``--cpu-bind=cores``), and a thread a rank
starts inherits its binding: an asynchronous I/O thread then takes its
processor time from the rank's own computation.  Shared by the report's
``background-shared-core`` check and ``iopilot advise async``.
"""

from __future__ import annotations

from collections import Counter

from .._record import record
from ..model import Trace


@record(frozen=True)
class Binding:
    """The CPUs a job's ranks could use, from the trace's process summaries."""

    launcher: str  # "openmpi", "slurm", "mpich" or "" (none seen)
    cpus_per_rank: int  # the fewest CPUs any rank's affinity mask allowed
    online: int  # the node's online CPUs
    ranks_per_node: int

    @property
    def shares_core(self) -> bool:
        """A rank's I/O thread has no CPU its computation does not use."""
        return self.cpus_per_rank == 1

    @property
    def room(self) -> bool:
        """The node has a core for every rank and one for each rank's I/O thread."""
        return self.online >= 2 * self.ranks_per_node


def binding_of(trace: Trace) -> Binding | None:
    """The job's binding; None when its trace does not say (Darshan logs,
    traces from before the process summaries recorded it)."""
    cpus = [c for c in trace.cpus or () if c.allowed]
    if not cpus:
        return None
    per_node = Counter(trace.job.hosts.values()).most_common(1)
    ranks_per_node = per_node[0][1] if per_node else len(cpus)
    names = Counter(c.launcher for c in cpus if c.launcher).most_common(1)
    return Binding(names[0][0] if names else "", min(len(c.allowed) for c in cpus),
                   max(c.online for c in cpus), max(ranks_per_node, 1))  # fmt: skip


def launcher_fix(b: Binding) -> str:
    """What to change in the launcher so that each rank has a second core
    for its I/O thread (or, without room on the node, how many ranks fit)."""
    if not b.room:
        fit = b.online // 2
        return (f"the node has {b.online} CPU(s) for {b.ranks_per_node} rank(s): for a core "
                f"each for the ranks and their I/O threads, run at most {fit} rank(s) per "
                f"node" if fit else f"the node has {b.online} CPU: no core is free for an "
                "I/O thread")  # fmt: skip
    return {
        "openmpi": "mpirun --map-by slot:PE=2 (two cores a rank: one for its I/O thread), "
                   "or mpirun --bind-to none",
        "slurm": "srun --cpus-per-task=2 (two cores a rank with --cpu-bind=cores: one for "
                 "its I/O thread)",
        "mpich": "mpiexec -bind-to core:2 (two cores a rank), or mpiexec -bind-to none",
    }.get(b.launcher, "give each process two CPUs (e.g. taskset -c 0,1), or start it "
                      "without a CPU binding")  # fmt: skip
