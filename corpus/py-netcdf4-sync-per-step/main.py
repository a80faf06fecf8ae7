"""netCDF4: one record per step on an unlimited time axis, ds.sync() every step.

Mistake: each of 400 steps appends one 64x64 record to "temp" and then calls
ds.sync(), which makes netCDF/HDF5 flush the file (H5Fflush underneath) every
step.  "temp" is compressed in chunks of 25 records, as time-series output
often is, so each sync compresses and writes the partly filled chunk again:
every chunk is compressed and written 25 times, and the headers and B-tree
nodes are rewritten 400 times.
Fix: append the records the same way and let the file be flushed once, when it
is closed.  The file holds the same variables, dimensions and values.
"""
import sys

import netCDF4
import numpy as np

STEPS, NY, NX = 400, 64, 64
CHUNK_STEPS = 25


def main(mode: str) -> None:
    field = np.zeros((NY, NX), dtype="f4")
    with netCDF4.Dataset("out.nc", "w", format="NETCDF4") as ds:
        ds.createDimension("time", None)
        ds.createDimension("y", NY)
        ds.createDimension("x", NX)
        times = ds.createVariable("time", "f8", ("time",))
        temp = ds.createVariable("temp", "f4", ("time", "y", "x"), zlib=True,
                                 complevel=1, chunksizes=(CHUNK_STEPS, NY, NX))
        for step in range(STEPS):
            field += 0.25                     # the "simulation"
            times[step] = step * 60.0
            temp[step, :, :] = field
            if mode == "mistake":
                ds.sync()

    with netCDF4.Dataset("out.nc") as ds:
        assert ds["temp"].shape == (STEPS, NY, NX)
        assert float(ds["temp"][-1, 0, 0]) == STEPS * 0.25


if __name__ == "__main__":
    main(sys.argv[1])
