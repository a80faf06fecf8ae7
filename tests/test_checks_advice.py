"""The code the advice hands out: sizes in lfs notation and back, and the
exact C and shell lines, since users paste them as they are."""

from __future__ import annotations

import pytest

from iopilot.checks import advice


@pytest.mark.parametrize(("text", "n"), [
    ("4k", 4096), ("4K", 4096), ("1m", 1 << 20), ("3M", 3 << 20), ("2g", 2 << 30),
    ("1.5M", 3 << 19), (" 64K ", 65536), ("12345", 12345),
])  # fmt: skip
def test_bytes_of(text, n):
    assert advice._bytes_of(text) == n


@pytest.mark.parametrize(("n", "text"), [
    (1 << 30, "1G"), (3 << 30, "3G"), (1 << 20, "1M"), (1536 << 10, "1536K"),
    (64 << 10, "64K"), (1000, "1000"), ((1 << 30) + 1024, "1048577K"),
])  # fmt: skip
def test_lfs_size(n, text):
    assert advice.lfs_size(n) == text


def test_lfs_setstripe_lines():
    assert advice.lfs_setstripe(8, "4M", "/lus/run") == (
        "lfs setstripe -c 8 -S 4M /lus/run   # new files in it inherit this layout\n"
        "# or from MPI-IO at create time:\n"
        'MPI_Info_set(info, "striping_factor", "8");\n'
        'MPI_Info_set(info, "striping_unit", "4194304");')


def test_lustre_check_ost_lines():
    s = advice.lustre_check_ost([4, 9], [0, 1, 2, 3, 5], "/lus/run")
    assert s.splitlines()[0] == ("lfs df -h /lus/run          # fill level per OST; compare "
                                 "OST(s) 4 9 with the rest")  # fmt: skip
    assert s.splitlines()[-1] == "lfs setstripe -c 4 -o 0,1,2,3 /lus/run"
    few = advice.lustre_check_ost([4], [7], "DIR").splitlines()[-1]
    assert few == "lfs setstripe -c 1 -o 7 DIR"
    assert advice.lustre_check_ost([4], [], "DIR").splitlines()[-1] == (
        "lfs setstripe -c 1 -o 0,1,2,3 DIR")


def test_c_snippets_exact():
    assert advice.mpiio_nonblocking("read") == (
        "MPI_Request req;\n"
        "MPI_File_iread_at_all(fh, offset, buf, count, MPI_BYTE, &req);\n"
        "compute();                       /* overlap work with the transfer */\n"
        "MPI_Wait(&req, MPI_STATUS_IGNORE);")
    assert advice.hdf5_alignment(524288, 4194304) == (
        "hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);\n"
        "/* objects of 524288 bytes or more start on a 4194304-byte boundary */\n"
        "H5Pset_alignment(fapl, 524288, 4194304);\n"
        "hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);")
    assert advice.hdf5_chunk([512, 256]) == (
        "hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);\n"
        "hsize_t chunk[2] = {512, 256};\n"
        "H5Pset_chunk(dcpl, 2, chunk);\n"
        "H5Dcreate2(file, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);")
    hints = advice.lustre_stripe_hints(4, 1 << 20, "/d")
    assert hints.endswith(
        "\n/* collective buffers of whole stripes: aggregators write stripe-aligned pieces */\n"
        'MPI_Info_set(info, "cb_buffer_size", "4194304");')
    assert hints.startswith("lfs setstripe -c 4 -S 1M /d ")
    assert advice.hdf5_large_selection(7).startswith(
        "/* select the whole block this rank owns and write it with one call,\n")
