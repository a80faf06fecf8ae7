"""The program as built: I/O layers it carries inside itself.

An ``LD_PRELOAD`` runtime (iopilot's, Darshan's) sees a library's calls only
when the program calls them in a shared library.  HDF5, MPI or NetCDF linked
statically into the executable is invisible: its I/O appears only as the
POSIX calls beneath it, and every finding about that layer is missing.  The
source fills ``Job.static_layers`` from the executable's symbol tables
(sources/program.py); this check says so, first, and how to relink.
"""

from __future__ import annotations

from collections.abc import Iterable

from .base import DATA_OPS, META_OPS, Check, Context, Finding, Level, check
from .iotime import io_time, price

# How the user relinks so that the runtime sees the layer again.
RELINK = {
    "HDF5": "link HDF5 as a shared library: build with `h5cc -shlib` (or `h5pcc -shlib`), "
            "or link with -lhdf5 against libhdf5.so instead of libhdf5.a; or keep it static "
            "and link the runtime in: `iopilot cc -- h5cc ...` wraps the HDF5 calls",
    "MPI-IO": "link MPI as a shared library: the MPI wrapper compilers (mpicc, mpif90) link "
              "libmpi.so by default; drop -static and any libmpi.a from the link line",
    "NetCDF": "link NetCDF as a shared library (-lnetcdf against libnetcdf.so, "
              "`nc-config --libs` without --static)",
    "PnetCDF": "link PnetCDF as a shared library (-lpnetcdf against libpnetcdf.so)",
}  # fmt: skip
WRAP = ("or keep the static link and have the calls wrapped at link time "
        "(-Wl,--wrap=SYMBOL, as Darshan's static-link mode does)")
# The trace's counter layers of each library: one the trace has data for was
# seen after all (also used through a shared library), nothing to say.
_SEEN_AS = {"HDF5": ("H5F", "H5D"), "MPI-IO": ("MPIIO",), "NetCDF": (),
            "PnetCDF": ("PNETCDF_FILE", "PNETCDF_VAR")}  # fmt: skip
_REBUILD = {
    "HDF5": "h5cc -shlib -o {exe} {exe}.c        # or h5pcc -shlib; or link -lhdf5 (libhdf5.so)\n"
            "iopilot cc -- h5cc -o {exe} {exe}.c   # or keep it static, the runtime linked in",
    "MPI-IO": "mpicc -o {exe} {exe}.c            # the wrapper links libmpi.so; no -static",
    "NetCDF": "cc -o {exe} {exe}.c $(nc-config --libs)   # shared libnetcdf.so, not --static",
    "PnetCDF": "mpicc -o {exe} {exe}.c -lpnetcdf   # against libpnetcdf.so",
}


@check
class StaticLayers(Check):
    """An I/O library linked statically into the program, invisible to tracing.

    Cost: the slowest rank's whole I/O time, since any of it may be the
    hidden layer's work and no other finding can say how much; so this
    finding comes first, before findings that only see the POSIX calls."""

    id = "static-layers"
    # "BUILD" sorts before every I/O layer, so that among findings of equal
    # cost this one, which qualifies all others, is read first.
    layer = "BUILD"
    # the calls seen beneath the hidden layer: all of the I/O
    site_ops, site_layers = DATA_OPS + META_OPS, ("POSIX", "STDIO")
    finds = ("HDF5, MPI-IO, NetCDF or PnetCDF linked statically into the program (a defined "
             "function such as `H5Fopen` or `MPI_File_open` in its symbol tables; Debian's "
             "plain `h5cc` links HDF5 so): its calls are invisible, its I/O is seen only as "
             "POSIX calls; says how to relink (`h5cc -shlib`, the MPI wrapper compilers)")
    cost = "the slowest rank's whole I/O time: any of it may be the hidden layer's"

    def evaluate(self, ctx: Context) -> Iterable[Finding]:
        job = ctx.trace.job
        hidden = {layer: path for layer, path in job.static_layers.items()
                  if all(ctx.layer(c) is None for c in _SEEN_AS.get(layer, ()))}  # fmt: skip
        if not hidden:
            return
        names = " and ".join(hidden)
        files = sorted(set(hidden.values()))
        where = ", ".join(files)
        seconds = io_time(ctx).slowest_seconds
        one = len(hidden) == 1
        message = (f"{names} {'is' if one else 'are'} linked statically into {where}: "
                   f"the runtime cannot see {'its' if one else 'their'} calls, so the "
                   f"program's {names} I/O is seen only as the POSIX calls beneath it "
                   f"and findings about {names} itself are missing.")  # fmt: skip
        steps = "; ".join(f"{layer}: {RELINK.get(layer, 'link it as a shared library')}"
                          for layer in hidden)  # fmt: skip
        exe = files[0].rsplit("/", 1)[-1] or "prog"
        snippet = "\n".join(_REBUILD[layer].format(exe=exe) for layer in hidden
                            if layer in _REBUILD)  # fmt: skip
        yield price(ctx, self.finding(
            ctx, Level.WARN, message,
            evidence={"layers": ", ".join(hidden), "files": where,
                      "cost_is": "all of the slowest rank's I/O: any of it may be the "
                                 "hidden layer's"},
            recommendation=f"Relink so that the runtime sees {names}, then trace again: "
                           f"{steps}; {WRAP}.",
            snippet=snippet, snippet_lang="sh",
        ), seconds)  # fmt: skip
