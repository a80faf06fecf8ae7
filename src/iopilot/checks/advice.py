"""Code and configuration snippets that recommendations point to.

Kept in one place so that the same advice reads the same everywhere.
"""

MPIIO_COLLECTIVE_WRITE = """\
/* every rank calls the collective form; MPI-IO merges the pieces into
   large, aligned requests issued by a few aggregator ranks */
MPI_File_set_view(fh, disp, MPI_BYTE, filetype, "native", MPI_INFO_NULL);
MPI_File_write_at_all(fh, offset, buf, count, MPI_BYTE, &status);"""

MPIIO_COLLECTIVE_READ = """\
MPI_File_read_at_all(fh, offset, buf, count, MPI_BYTE, &status);"""

def mpiio_nonblocking(word: str) -> str:
    """Non-blocking MPI-IO for ``word`` = "read" or "write"."""
    return (
        "MPI_Request req;\n"
        f"MPI_File_i{word}_at_all(fh, offset, buf, count, MPI_BYTE, &req);\n"
        "compute();                       /* overlap work with the transfer */\n"
        "MPI_Wait(&req, MPI_STATUS_IGNORE);"
    )

MPIIO_HINTS_CB = """\
MPI_Info info;
MPI_Info_create(&info);
MPI_Info_set(info, "romio_cb_write", "enable");
MPI_Info_set(info, "romio_cb_read", "enable");
MPI_Info_set(info, "cb_buffer_size", "16777216");   /* 16 MiB per aggregator */
MPI_Info_set(info, "striping_unit", "4194304");     /* Lustre: new files, 4 MiB stripes */
MPI_File_open(comm, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh);"""

HDF5_COLLECTIVE = """\
hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
H5Dwrite(dset, memtype, memspace, filespace, dxpl, buf);"""

HDF5_COLLECTIVE_METADATA = """\
hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
H5Pset_fapl_mpio(fapl, comm, info);
H5Pset_all_coll_metadata_ops(fapl, 1);   /* metadata reads: one rank reads, all get it */
H5Pset_coll_metadata_write(fapl, 1);     /* metadata writes: one collective write */
hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);"""

HDF5_ASYNC = """\
/* HDF5 >= 1.14 with the async VOL connector */
hid_t es = H5EScreate();
H5Dwrite_async(dset, memtype, memspace, filespace, dxpl, buf, es);
compute();
size_t pending; hbool_t failed;
H5ESwait(es, H5ES_WAIT_FOREVER, &pending, &failed);"""

STDIO_BUFFER = """\
/* give the stream a large buffer, or switch the bulk data to MPI-IO/HDF5 */
static char buf[16 << 20];
setvbuf(fp, buf, _IOFBF, sizeof buf);"""

POSIX_AGGREGATE = """\
/* gather small pieces in memory and write them with one call */
struct iovec iov[n];                   /* or memcpy into one staging buffer */
pwritev(fd, iov, n, offset);"""

POSIX_AGGREGATE_READ = """\
/* read one large block with one call, then take the small pieces from memory */
char *block = malloc(block_bytes);
pread(fd, block, block_bytes, block_offset);
/* piece k: block + (piece_offset[k] - block_offset) */"""

# The same advice in Python's idiom, for Python programs.
PY_AGGREGATE = """\
# gather the small pieces in memory and write them with one call
parts = []
for piece in pieces:
    parts.append(piece)             # bytes, or arr.tobytes()
with open(path, "wb", buffering=0) as f:
    f.write(b"".join(parts))        # or numpy: np.concatenate(arrays).tofile(f)"""

PY_AGGREGATE_READ = """\
# read the file (or a large block of it) once, then slice in memory
with open(path, "rb") as f:
    data = memoryview(f.read())     # or np.fromfile(path, dtype) / np.memmap
piece = data[offset : offset + size]"""

PY_HDF5_COLLECTIVE = """\
# h5py built with parallel HDF5: open with the MPI-IO driver, transfer collectively
from mpi4py import MPI
import h5py
with h5py.File(path, "a", driver="mpio", comm=MPI.COMM_WORLD) as f:
    dset = f["data"]
    with dset.collective:           # every rank takes part in each read/write
        dset[start:stop] = local"""

PY_MPIIO_COLLECTIVE = """\
# mpi4py: every rank calls the collective form; aggregators merge the pieces
from mpi4py import MPI
fh = MPI.File.Open(MPI.COMM_WORLD, path, MPI.MODE_RDWR | MPI.MODE_CREATE)
fh.Write_at_all(offset, local_buffer)    # reads: fh.Read_at_all(offset, buf)
fh.Close()"""


DISTRIBUTED_WRITE = """\
/* instead of gathering everything on rank 0: each rank writes its own block */
MPI_Offset offset = (MPI_Offset)rank * block_bytes;
MPI_File_write_at_all(fh, offset, local_buf, block_bytes, MPI_BYTE, &status);"""

MPIIO_SYNC_BARRIER_SYNC = """\
/* rank A's bytes become visible to rank B before B writes the same range */
MPI_File_sync(fh);          /* A: push its writes to the file */
MPI_Barrier(comm);
MPI_File_sync(fh);          /* B: see them, then write */
/* or have MPI-IO serialise overlapping accesses (slower): */
MPI_File_set_atomicity(fh, 1);"""

READ_ONCE_BCAST = """\
/* one rank reads the shared input, the others receive it */
if (rank == 0) MPI_File_read_at(fh, 0, buf, nbytes, MPI_BYTE, MPI_STATUS_IGNORE);
MPI_Bcast(buf, nbytes, MPI_BYTE, 0, comm);"""

ROMIO_READ_MODIFY_WRITE = """\
/* ROMIO reads a region back before writing it whenever the ranks' pieces
   leave holes in it: have the pieces tile the file without gaps, and for
   independent writes switch the read-modify-write (data sieving) off */
MPI_Info_set(info, "romio_ds_write", "disable");
MPI_File_open(comm, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh);"""

def hdf5_alignment(threshold: int, alignment: int) -> str:
    return (
        "hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);\n"
        f"/* objects of {threshold} bytes or more start on a {alignment}-byte boundary */\n"
        f"H5Pset_alignment(fapl, {threshold}, {alignment});\n"
        "hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);"
    )


def hdf5_chunk(dims: list[int]) -> str:
    d = ", ".join(str(x) for x in dims)
    return (
        "hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);\n"
        f"hsize_t chunk[{len(dims)}] = {{{d}}};\n"
        f"H5Pset_chunk(dcpl, {len(dims)}, chunk);\n"
        "H5Dcreate2(file, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);"
    )


def lfs_setstripe(count: int | str, size: str, path: str) -> str:
    # -1 (every OST) is lfs syntax; the MPI-IO hint wants the number itself.
    factor = '"N_OSTS"); /* every OST: their number from `lfs df` */' if str(count) == "-1" else (
        f'"{count}");'
    )
    return (
        f"lfs setstripe -c {count} -S {size} {path}   # new files in it inherit this layout\n"
        "# or from MPI-IO at create time:\n"
        f'MPI_Info_set(info, "striping_factor", {factor}\n'
        f'MPI_Info_set(info, "striping_unit", "{_bytes_of(size)}");'
    )


def _bytes_of(size: str) -> int:
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    s = size.strip().lower()
    return int(float(s[:-1]) * units[s[-1]]) if s and s[-1] in units else int(s)


def lfs_size(n: int) -> str:
    """Bytes as an ``lfs setstripe -S`` size (e.g. 4M)."""
    for unit, f in (("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if n >= f and n % f == 0:
            return f"{n // f}{unit}"
    return str(n)


def hdf5_large_selection(nelems: int) -> str:
    """One H5Dwrite of a whole block instead of many tiny ones."""
    return (
        "/* select the whole block this rank owns and write it with one call,\n"
        "   instead of calling H5Dwrite once per element or row */\n"
        f"hsize_t start[1] = {{first}}, count[1] = {{{nelems}}};   /* elements per call */\n"
        "hid_t filespace = H5Dget_space(dset);\n"
        "H5Sselect_hyperslab(filespace, H5S_SELECT_SET, start, NULL, count, NULL);\n"
        "hid_t memspace = H5Screate_simple(1, count, NULL);\n"
        "H5Dwrite(dset, memtype, memspace, filespace, dxpl, buf);   /* buf holds the block */"
    )


PNETCDF_COLLECTIVE = """\
/* stay in (or return to) collective data mode: drop ncmpi_begin_indep_data(),
   or call ncmpi_end_indep_data(ncid) before the bulk transfers */
MPI_Offset start[2] = {first_row, 0}, count[2] = {my_rows, ncols};
ncmpi_put_vara_double_all(ncid, varid, start, count, buf);   /* every rank calls it */
ncmpi_get_vara_double_all(ncid, varid, start, count, buf);   /* same for reads */"""

PNETCDF_NONBLOCKING = """\
/* post one request per variable: nothing is transferred yet */
int req[NVARS], st[NVARS];
for (int v = 0; v < NVARS; v++)
    ncmpi_iput_vara_double(ncid, varid[v], start, count, buf[v], &req[v]);
/* PnetCDF merges all pending requests into one collective MPI-IO call */
ncmpi_wait_all(ncid, NVARS, req, st);"""


def lustre_stripe_hints(count: int, stripe: int, path: str, layout: bool = True) -> str:
    """Set the layout (unless it stays as it is), and size collective buffers in whole stripes."""
    return (
        (lfs_setstripe(count, lfs_size(stripe), path) + "\n" if layout else "")
        + "/* collective buffers of whole stripes: aggregators write stripe-aligned pieces */\n"
        + f'MPI_Info_set(info, "cb_buffer_size", "{4 * stripe}");'
    )


def lustre_check_ost(slow: list[int], others: list[int], path: str) -> str:
    """Look at a suspect OST, and keep new files off it until it is fixed."""
    avoid = ",".join(str(o) for o in others[:4]) or "0,1,2,3"
    where = " ".join(str(o) for o in slow)
    return (
        f"lfs df -h {path}          # fill level per OST; compare OST(s) {where} with the rest\n"
        "lfs check osts            # connection state of each OST from this client\n"
        "# until the OST is repaired, new files can be placed on chosen OSTs only:\n"
        f"lfs setstripe -c {min(4, max(1, len(others[:4])))} -o {avoid} {path}"
    )


PY_WRITE_ONCE = """\
# instead of df.to_csv(path, mode="a") per row (an open, stats and seeks each time):
rows = []
for step in range(n):
    rows.append({"step": step, "value": value(step)})
pd.DataFrame(rows).to_csv(path, index=False)     # open once, write once
# or, when rows must reach the file as they come, keep one file object open:
with open(path, "w", buffering=1 << 20) as f:
    for step in range(n):
        f.write(f"{step},{value(step)}\\n")"""

C_WRITE_ONCE = """\
FILE *f = fopen(path, "w");                 /* once, before the loop */
setvbuf(f, NULL, _IOFBF, 1 << 20);          /* 1 MiB buffer: few, large writes */
for (int step = 0; step < n; step++)
    fprintf(f, "%d,%g\\n", step, value(step));
fclose(f);                                  /* once, after it */"""

PY_READ_ONCE = """\
data = pd.read_csv(path)          # once, outside the loop (or open(path).read())
for step in range(n):
    use(data)                     # not pd.read_csv(path) at every step"""

C_READ_ONCE = """\
/* read the file into memory once and reuse the buffer */
int fd = open(path, O_RDONLY);
struct stat st; fstat(fd, &st);
char *data = malloc(st.st_size);
pread(fd, data, st.st_size, 0);
close(fd);"""

PY_ONE_CONTAINER = """\
import h5py
with h5py.File("results.h5", "w") as f:           # one file, one open
    for name, arr in items:
        f.create_dataset(name, data=arr)          # not np.save(f"{name}.npy", arr)"""

C_ONE_CONTAINER = """\
/* one file, one open: each item at its own offset, the offsets in an index */
int fd = open("items.bin", O_CREAT | O_WRONLY, 0644);
for (int i = 0; i < n; i++)
    pwrite(fd, item[i], size[i], offset[i]);
close(fd);"""

TAR_INPUTS = """\
tar cf inputs.tar inputs/          # once: pack the small inputs into one file
# then read members from the one archive (Python: tarfile.open("inputs.tar")),
# or unpack it to node-local storage (/tmp, $TMPDIR) at the start of the job"""

MPIIO_ONE_CALL_PER_STEP = """\
/* describe everything this rank writes in a step with one file view,
   then one collective call moves it all (not one call per small piece) */
MPI_Datatype filetype;
MPI_Type_create_subarray(ndims, gsizes, lsizes, starts, MPI_ORDER_C, MPI_DOUBLE, &filetype);
MPI_Type_commit(&filetype);
MPI_File_set_view(fh, 0, MPI_DOUBLE, filetype, "native", MPI_INFO_NULL);
MPI_File_write_all(fh, local, nlocal, MPI_DOUBLE, MPI_STATUS_IGNORE);"""

C_LOG_LESS = """\
/* one large buffer, no flush per line, and only every Nth step */
static char logbuf[1 << 20];
setvbuf(logf, logbuf, _IOFBF, sizeof logbuf);
if (step % 100 == 0)
    fprintf(logf, "step %d residual %g\\n", step, res);   /* no fflush here */"""

PY_LOG_LESS = """\
import logging, logging.handlers
# keep records in memory and write them in batches (or on an error)
target = logging.FileHandler("run.log")
logging.getLogger().addHandler(
    logging.handlers.MemoryHandler(10000, flushLevel=logging.ERROR, target=target))
if step % 100 == 0:
    logging.info("step %d residual %g", step, res)"""


# --- POSIX, MPI-IO and rank advice in each language (C, mpi4py/numpy, Fortran) ---

PY_DISTRIBUTED_WRITE = """\
# mpi4py: instead of comm.gather(...) to rank 0, each rank writes its own block
from mpi4py import MPI
fh = MPI.File.Open(comm, path, MPI.MODE_CREATE | MPI.MODE_WRONLY)
fh.Write_at_all(comm.rank * local.nbytes, local)   # collective: all ranks call it
fh.Close()"""

PY_WORKER_WRITE = """\
# each worker writes its own part, rather than returning it to the main process
def work(i):
    part = compute(i)
    with open(f"out/part-{i:05d}.npy", "wb") as f:   # or its block of one file: os.pwrite
        np.save(f, part)
    return i

with multiprocessing.Pool() as pool:      # Dask: client.map(work, range(n))
    done = pool.map(work, range(n))"""

FORTRAN_DISTRIBUTED_WRITE = """\
! instead of gathering everything on rank 0: each rank writes its own block
integer(kind=MPI_OFFSET_KIND) :: offset
offset = int(rank, MPI_OFFSET_KIND) * block_bytes
call MPI_File_write_at_all(fh, offset, local, n, MPI_DOUBLE_PRECISION, &
                           MPI_STATUS_IGNORE, ierr)"""

PY_MPIIO_COLLECTIVE_WRITE = """\
# mpi4py: every rank calls the collective form; aggregators merge the pieces
from mpi4py import MPI
fh = MPI.File.Open(comm, path, MPI.MODE_CREATE | MPI.MODE_WRONLY)
fh.Write_at_all(offset, local)      # not fh.Write_at(offset, local)
fh.Close()"""

PY_MPIIO_COLLECTIVE_READ = """\
# mpi4py: every rank calls the collective form; aggregators merge the pieces
from mpi4py import MPI
fh = MPI.File.Open(comm, path, MPI.MODE_RDONLY)
fh.Read_at_all(offset, local)       # not fh.Read_at(offset, local)
fh.Close()"""

FORTRAN_MPIIO_COLLECTIVE_WRITE = """\
! every rank calls the collective form; MPI-IO merges the pieces
call MPI_File_write_at_all(fh, offset, buf, n, MPI_BYTE, MPI_STATUS_IGNORE, ierr)
! many pieces per step: one file view, then one collective call for them all
call MPI_File_set_view(fh, disp, MPI_BYTE, filetype, "native", MPI_INFO_NULL, ierr)
call MPI_File_write_all(fh, buf, nbytes, MPI_BYTE, MPI_STATUS_IGNORE, ierr)"""

FORTRAN_MPIIO_COLLECTIVE_READ = """\
! every rank calls the collective form; MPI-IO merges the pieces
call MPI_File_read_at_all(fh, offset, buf, n, MPI_BYTE, MPI_STATUS_IGNORE, ierr)"""

PY_MPIIO_NONBLOCKING_WRITE = """\
req = fh.Iwrite_at_all(offset, local)   # starts the transfer
compute()                               # work that does not touch `local`
req.Wait()"""

PY_MPIIO_NONBLOCKING_READ = """\
req = fh.Iread_at_all(offset, local)    # starts the transfer
compute()                               # work that does not need `local` yet
req.Wait()"""

FORTRAN_MPIIO_NONBLOCKING_WRITE = """\
call MPI_File_iwrite_at_all(fh, offset, buf, n, MPI_BYTE, req, ierr)
call compute()                          ! overlap work with the transfer
call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)"""

FORTRAN_MPIIO_NONBLOCKING_READ = """\
call MPI_File_iread_at_all(fh, offset, buf, n, MPI_BYTE, req, ierr)
call compute()                          ! overlap work with the transfer
call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)"""

C_CB_ENABLE = """\
/* let collective I/O aggregate: do not switch collective buffering off */
MPI_Info info;
MPI_Info_create(&info);
MPI_Info_set(info, "romio_cb_write", "enable");   /* was "disable" */
MPI_Info_set(info, "romio_cb_read", "enable");
MPI_File_open(comm, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh);
/* or in the ROMIO_HINTS file: romio_cb_write enable */"""

PY_CB_ENABLE = """\
# let collective I/O aggregate: do not switch collective buffering off
info = MPI.Info.Create()
info.Set("romio_cb_write", "enable")    # was "disable"
info.Set("romio_cb_read", "enable")
fh = MPI.File.Open(comm, path, MPI.MODE_CREATE | MPI.MODE_WRONLY, info)
# or in the ROMIO_HINTS file: romio_cb_write enable"""

FORTRAN_CB_ENABLE = """\
! let collective I/O aggregate: do not switch collective buffering off
call MPI_Info_create(info, ierr)
call MPI_Info_set(info, "romio_cb_write", "enable", ierr)   ! was "disable"
call MPI_Info_set(info, "romio_cb_read", "enable", ierr)
call MPI_File_open(comm, path, ior(MPI_MODE_CREATE, MPI_MODE_WRONLY), info, fh, ierr)"""

C_READ_ONCE_BCAST = """\
/* read the configuration once, on one rank, and broadcast it (not every step) */
char *cfg = NULL; long n = 0;
if (rank == 0) {
    FILE *f = fopen("config.txt", "rb");
    fseek(f, 0, SEEK_END); n = ftell(f); rewind(f);
    cfg = malloc(n); fread(cfg, 1, n, f); fclose(f);
}
MPI_Bcast(&n, 1, MPI_LONG, 0, comm);
if (rank != 0) cfg = malloc(n);
MPI_Bcast(cfg, (int)n, MPI_CHAR, 0, comm);
for (int step = 0; step < nsteps; step++) use(cfg);"""

PY_READ_ONCE_BCAST = """\
# read the configuration once, on one rank, and broadcast it (not every step)
cfg = None
if comm.rank == 0:
    with open("config.txt") as f:
        cfg = parse(f.read())
cfg = comm.bcast(cfg, root=0)
for step in range(nsteps):
    use(cfg)"""

FORTRAN_READ_ONCE_BCAST = """\
! read the configuration once, on one rank, and broadcast it (not every step)
if (rank == 0) then
   open(newunit=u, file="config.txt", status="old", action="read")
   read(u, *) params
   close(u)
end if
call MPI_Bcast(params, size(params), MPI_DOUBLE_PRECISION, 0, comm, ierr)
do step = 1, nsteps
   call use(params)
end do"""

FORTRAN_READ_ONCE = """\
! read the file once, before the loop, and keep it in memory
open(newunit=u, file=path, access="stream", form="unformatted", action="read")
read(u) data                       ! the whole array in one READ
close(u)
do step = 1, nsteps
   call use(data)
end do"""

FORTRAN_WRITE_ONCE = """\
! open once before the loop, not at every step (position="append" reopens cost)
open(newunit=u, file=path, action="write", status="replace")
do step = 1, nsteps
   write(u, '(i0, ",", es14.6)') step, value(step)
end do
close(u)"""

FORTRAN_ONE_CONTAINER = """\
! one file per rank (or one shared file through MPI-IO / HDF5), not one per step
write(name, '("out_", i0, ".bin")') rank
open(newunit=u, file=name, access="stream", form="unformatted", action="write")
do step = 1, nsteps
   write(u) field                  ! appended to the one open file
end do
close(u)"""

C_ONE_FILE_PER_RANK = """\
/* one file per rank, opened once (or one shared file: MPI-IO / HDF5) */
char name[64]; snprintf(name, sizeof name, "out_%d.bin", rank);
int fd = open(name, O_CREAT | O_WRONLY | O_TRUNC, 0644);
for (int step = 0; step < nsteps; step++)
    write(fd, buf, nbytes);                  /* appended, no new file */
close(fd);
/* shared file: MPI_File_write_at_all(fh, (step * nranks + rank) * nbytes, ...) */"""

FORTRAN_AGGREGATE = """\
! one WRITE of the whole array (stream access), not one per element or row
open(newunit=u, file=path, access="stream", form="unformatted", action="write")
write(u) array
close(u)"""

FORTRAN_AGGREGATE_READ = """\
! one READ of the whole array (stream access), then index it in memory
open(newunit=u, file=path, access="stream", form="unformatted", action="read")
read(u) array
close(u)"""

PY_SORTED_READS = """\
# read the whole file (or large blocks) once and index it in memory
data = np.fromfile(path, dtype=np.float64)      # or np.memmap(path, ...)
picked = data[np.sort(indices)]                 # not f.seek(i); f.read(8) per item"""

C_SORTED_READS = """\
/* sort the requests by offset and read large blocks, then pick in memory */
qsort(req, n, sizeof *req, by_offset);
pread(fd, block, block_bytes, block_offset);"""

FORTRAN_SORTED_READS = """\
! read the whole array once (stream access), then pick elements in memory
open(newunit=u, file=path, access="stream", form="unformatted", action="read")
read(u) data
close(u)
picked = data(indices)"""

PY_STDIO_BINARY = """\
# binary output of whole arrays, not formatted text line by line
arr.tofile("field.bin")                 # or np.save / h5py for self-describing files
# when text is required: one call per array
np.savetxt("field.txt", arr, fmt="%.6e")"""

C_STDIO_BINARY = """\
/* binary output of the whole array in one call, not fprintf per element */
FILE *f = fopen("field.bin", "wb");
fwrite(field, sizeof field[0], n, f);
fclose(f);"""

FORTRAN_STDIO_BINARY = """\
! unformatted stream output of the whole array, not formatted lines
open(newunit=u, file="field.bin", access="stream", form="unformatted")
write(u) field
close(u)"""


# ---------------------------------------------------------------------------
# HDF5 chunks, whole-block dataset access and flushes, per language.
# ---------------------------------------------------------------------------


def py_hdf5_chunk(dims: list[int], growing: bool) -> str:
    """h5py: create the dataset with ``dims`` (C order) as its chunks."""
    chunks = ", ".join(str(x) for x in dims) + ("," if len(dims) == 1 else "")
    if growing:
        rest = ", ".join(str(x) for x in dims[1:])
        shape = f"(0, {rest})" if rest else "(0,)"
        maxshape = f"(None, {rest})" if rest else "(None,)"
        return (
            f"dset = f.create_dataset(name, shape={shape}, maxshape={maxshape},\n"
            f"                        chunks=({chunks}), dtype=\"f8\")\n"
            "# grow it in whole chunks: dset.resize(n, axis=0) once per block of steps"
        )
    rest = ", ".join(str(x) for x in dims[1:])
    return (
        f"dset = f.create_dataset(name, shape=shape, chunks=({chunks}), dtype=\"f8\")\n"
        f"# a dataset that grows: shape=(0, {rest}), maxshape=(None, {rest}), same chunks"
        if rest else
        f"dset = f.create_dataset(name, shape=shape, chunks=({chunks}), dtype=\"f8\")"
    )


def fortran_hdf5_chunk(dims: list[int]) -> str:
    """Fortran HDF5: chunk dimensions are given fastest first (Fortran order)."""
    d = ", ".join(f"{x}_hsize_t" for x in reversed(dims))
    return (
        f"integer(hsize_t) :: chunk({len(dims)}) = [{d}]   ! Fortran order\n"
        "call h5pcreate_f(H5P_DATASET_CREATE_F, dcpl, err)\n"
        f"call h5pset_chunk_f(dcpl, {len(dims)}, chunk, err)\n"
        "call h5dcreate_f(file, name, H5T_NATIVE_DOUBLE, space, dset, err, dcpl)"
    )


PY_H5PY_WHOLE_BLOCK = """\
# keep the rows in memory and move them with one call each way
rows = np.empty((n, width))
for i in range(n):
    rows[i] = row(i)                 # not dset.resize(i + 1, axis=0); dset[i] = ...
dset.resize(start + n, axis=0)       # once per block, not once per row
dset[start:start + n] = rows         # one write
back = dset[...]                     # one read (or dset[a:b]), then index in memory"""

FORTRAN_HDF5_WHOLE_BLOCK = """\
! select the whole block and write it with one call, not one call per element or row
call h5dget_space_f(dset, filespace, err)
call h5sselect_hyperslab_f(filespace, H5S_SELECT_SET_F, start, count, err)
call h5screate_simple_f(rank, count, memspace, err)
call h5dwrite_f(dset, H5T_NATIVE_DOUBLE, block, count, err, memspace, filespace)"""

# what flushes, how it closes, per layer and language: (flush call, close call)
_FLUSH_CALLS = {
    "c": {"hdf5": ("H5Fflush(file, H5F_SCOPE_LOCAL);", "H5Fclose(file);   /* closing flushes */"),
          "mpiio": ("MPI_File_sync(fh);", "MPI_File_close(&fh);   /* closing syncs */"),
          "posix": ("fsync(fd);", "fsync(fd); close(fd);   /* once, at the end */")},
    "python": {"hdf5": ("f.flush()   # h5py File; netCDF4: ds.sync()",
                        "f.close()   # closing flushes"),
               "mpiio": ("fh.Sync()", "fh.Close()   # closing syncs"),
               "posix": ("f.flush(); os.fsync(f.fileno())",
                         "f.flush(); os.fsync(f.fileno()); f.close()   # once, at the end")},
    "fortran": {"hdf5": ("call h5fflush_f(file, H5F_SCOPE_LOCAL_F, err)",
                         "call h5fclose_f(file, err)   ! closing flushes"),
                "mpiio": ("call MPI_File_sync(fh, ierr)",
                          "call MPI_File_close(fh, ierr)   ! closing syncs"),
                "posix": ("flush(unit)", "close(unit)   ! once, at the end")},
}


def flush_once(lang: str, kind: str) -> str:
    """Flush at checkpoints only, in ``lang`` ("c", "python", "fortran") for
    ``kind`` of file ("hdf5", "mpiio", "posix")."""
    flush, close = _FLUSH_CALLS[lang][kind]
    if lang == "python":
        return (
            "# flush at checkpoints (or not at all), not after every step\n"
            "for step in range(nsteps):\n"
            "    write_step(step)\n"
            "    if (step + 1) % checkpoint_every == 0:\n"
            f"        {flush}\n"
            f"{close}"
        )
    if lang == "fortran":
        return (
            "! flush at checkpoints (or not at all), not after every step\n"
            "do step = 1, nsteps\n"
            "   call write_step(step)\n"
            f"   if (mod(step, checkpoint_every) == 0) {flush}\n"
            "end do\n"
            f"{close}"
        )
    return (
        "/* flush at checkpoints (or not at all), not after every step */\n"
        "for (int step = 0; step < nsteps; step++) {\n"
        "    write_step(step);\n"
        "    if ((step + 1) % checkpoint_every == 0)\n"
        f"        {flush}\n"
        "}\n"
        f"{close}"
    )


C_HDF5_SERIAL_METADATA = """\
/* serial HDF5: one rank reads the small metadata, the others receive it */
if (rank == 0) {
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    read_attributes(file, meta);         /* the small reads, once */
    H5Fclose(file);
}
MPI_Bcast(meta, meta_bytes, MPI_BYTE, 0, MPI_COMM_WORLD);"""

PY_H5PY_SERIAL_METADATA = """\
# serial HDF5: one rank reads the small metadata, the others receive it
from mpi4py import MPI
comm = MPI.COMM_WORLD
meta = None
if comm.rank == 0:
    with h5py.File(path, "r") as f:
        meta = dict(f.attrs)              # the small reads, once
meta = comm.bcast(meta, root=0)"""


def py_hdf5_alignment(threshold: int, alignment: int) -> str:
    """h5py (3.5 or later): objects of ``threshold`` bytes or more on ``alignment``."""
    return (f"f = h5py.File(path, \"w\", alignment_threshold={threshold},\n"
            f"              alignment_interval={alignment})")


def fortran_hdf5_alignment(threshold: int, alignment: int) -> str:
    return (
        "call h5pcreate_f(H5P_FILE_ACCESS_F, fapl, err)\n"
        f"call h5pset_alignment_f(fapl, {threshold}_hsize_t, {alignment}_hsize_t, err)\n"
        "call h5fcreate_f(path, H5F_ACC_TRUNC_F, file, err, access_prp=fapl)"
    )

C_MPIIO_COLLECTIVE_STEP = """\
/* one collective call per step instead of one independent call per piece:
   a file view places this rank's pieces, aggregators merge all ranks' */
MPI_File_set_view(fh, step_offset + rank * piece_bytes, MPI_BYTE, strided,
                  "native", MPI_INFO_NULL);
MPI_File_write_all(fh, buf, pieces * piece_bytes, MPI_BYTE, MPI_STATUS_IGNORE);
/* a contiguous block per rank: MPI_File_write_at_all(fh, offset, buf, n, ...) */"""

CPP_AGGREGATE = """\
// let the stream buffer: '\\n' ends a line, std::endl also flushes it (a write each)
std::ofstream out("values.txt");
std::vector<char> buf(1 << 20);
out.rdbuf()->pubsetbuf(buf.data(), buf.size());   // before the first output
for (double v : values) out << v << '\\n';           // not << std::endl
// binary data: one out.write(reinterpret_cast<const char *>(a.data()), bytes)"""

C_ALIGN_OFFSETS = """\
/* start the data on a block boundary: pad the header to the block size */
const off_t block = 4096;                       /* st_blksize, or the stripe size */
off_t data_start = (header_bytes + block - 1) / block * block;
pwrite(fd, header, header_bytes, 0);
for (int i = 0; i < n; i++)                     /* blocks of a multiple of 4 KiB */
    pwrite(fd, chunk[i], chunk_bytes, data_start + (off_t)i * chunk_bytes);"""

PY_ALIGN_OFFSETS = """\
# start the data on a block boundary: pad the header to the block size
block = os.statvfs(path).f_bsize                # 4096 on most file systems
with open(path, "wb") as f:
    f.write(header.ljust(-(-len(header) // block) * block, b"\\0"))
    for chunk in chunks:                        # each a multiple of the block
        f.write(chunk)"""

FORTRAN_ALIGN_OFFSETS = """\
! start the data on a block boundary: pad the header to the block size
integer, parameter :: block = 4096
integer(kind=8) :: start
start = ((header_bytes + block - 1) / block) * block + 1   ! stream positions from 1
open(newunit=u, file=path, access="stream", form="unformatted", action="write")
write(u, pos=1) header
write(u, pos=start) data                        ! whole blocks from here on
close(u)"""


# ---------------------------------------------------------------------------
# Fortran: the FORTRAN layer's checks (fortran-element-io, fortran-formatted-io),
# and Fortran forms of other checks' advice, for their ``fortran=`` argument.
# ---------------------------------------------------------------------------

FORTRAN_WHOLE_ARRAY = """\
! one statement for the whole array, not one per element
open(newunit=u, file='out.bin', access='stream', form='unformatted', &
     status='replace', action='write')
write(u) a                      ! not: do i = 1, n; write(u) a(i); end do
close(u)
! reading back: read(u) a       (one statement too)"""

FORTRAN_STREAM_UNFORMATTED = """\
! big arrays unformatted, in one statement; formatted output for people only
open(newunit=u, file='field.bin', access='stream', form='unformatted', &
     status='replace', action='write')
write(u) nx, ny                 ! a small header, then the values
write(u) field                  ! not: do i = 1, n; write(20, '(ES24.16)') field(i)
close(u)"""

FORTRAN_WRITE_AT_ALL = """\
! parallel: every rank writes its block of one file, collectively (MPI-IO)
use mpi
integer(kind=MPI_OFFSET_KIND) :: offset
call MPI_File_open(MPI_COMM_WORLD, 'out.bin', ior(MPI_MODE_CREATE, MPI_MODE_WRONLY), &
                   MPI_INFO_NULL, fh, ierr)
offset = int(rank, MPI_OFFSET_KIND) * n * 8       ! n real(8) values per rank
call MPI_File_write_at_all(fh, offset, a, n, MPI_DOUBLE_PRECISION, MPI_STATUS_IGNORE, ierr)
call MPI_File_close(fh, ierr)"""

FORTRAN_H5DWRITE = """\
! or HDF5 (parallel build): one hyperslab per rank, one collective write
use hdf5
call h5sselect_hyperslab_f(filespace, H5S_SELECT_SET_F, start, count, err)
call h5pcreate_f(H5P_DATASET_XFER_F, dxpl, err)
call h5pset_dxpl_mpio_f(dxpl, H5FD_MPIO_COLLECTIVE_F, err)
call h5dwrite_f(dset, H5T_NATIVE_DOUBLE, a, count, err, &
                mem_space_id=memspace, file_space_id=filespace, xfer_prp=dxpl)"""


def hdf5_chunk_cache(nbytes: int) -> str:
    """C HDF5: a chunk cache of ``nbytes`` for the dataset (or, on the file
    access list with H5Pset_cache, for every dataset of the file)."""
    mib = nbytes // (1024 * 1024)
    return (
        "hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);\n"
        f"/* room for every chunk one H5Dwrite/H5Dread touches: {mib} MiB; slots: a prime\n"
        "   about 100x the chunks it holds */\n"
        f"H5Pset_chunk_cache(dapl, 12421, (size_t){mib} * 1024 * 1024, 0.75);\n"
        "hid_t dset = H5Dopen2(file, name, dapl);   /* or H5Dcreate2(..., dapl) */"
    )


def py_hdf5_chunk_cache(nbytes: int) -> str:
    """h5py: a chunk cache of ``nbytes`` for every dataset of the file."""
    mib = nbytes // (1024 * 1024)
    return (
        "# room for every chunk one read or write touches\n"
        f'f = h5py.File(path, "a", rdcc_nbytes={mib} * 1024**2, rdcc_nslots=12421)'
    )
