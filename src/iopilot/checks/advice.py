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
    return (
        f"lfs setstripe -c {count} -S {size} {path}   # new files in it inherit this layout\n"
        "# or from MPI-IO at create time:\n"
        f'MPI_Info_set(info, "striping_factor", "{count}");\n'
        f'MPI_Info_set(info, "striping_unit", "{_bytes_of(size)}");'
    )


def _bytes_of(size: str) -> int:
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    s = size.strip().lower()
    return int(float(s[:-1]) * units[s[-1]]) if s and s[-1] in units else int(s)


def human_size(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def lfs_size(n: int) -> str:
    """Bytes as an ``lfs setstripe -S`` size (e.g. 4M)."""
    for unit, f in (("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if n >= f and n % f == 0:
            return f"{n // f}{unit}"
    return str(n)
