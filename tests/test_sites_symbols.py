"""Native call sites named from the binaries: a small C program built with
and without debug information, position-independent or not, prints the
offsets of its own call sites (return address minus the load bias that
``dl_iterate_phdr`` gives, as the runtime records them); a trace naming
those offsets must show the file, line and function, the function alone,
or module+offset with the reason.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from iopilot.model import OP_WRITE
from iopilot.sources import load
from iopilot.sources.symbols import CHANGED, NO_DEBUG, NO_SYMBOLS, NOT_FOUND, _decode, lookup
from test_sites_read import write_proc

CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")

PROG = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

static uintptr_t bias;

static int first(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size; (void)data;
    bias = info->dlpi_addr; /* the first object is the executable */
    return 1;
}

__attribute__((noinline)) void probe(const char *what)
{
    printf("%s %#lx\n", what, (unsigned long)((uintptr_t)__builtin_return_address(0) - bias));
}

static inline __attribute__((always_inline)) void inlined_rows(void)
{
    probe("inlined"); /* THE INLINED CALL */
}

__attribute__((noinline)) int write_rows(int n)
{
    probe("site"); /* THE CALL */
    printf("caller %#lx\n", (unsigned long)((uintptr_t)__builtin_return_address(0) - bias));
    return n + VARIANT;
}

int main(int argc, char **argv)
{
    Dl_info lib;
    (void)argv;
    dl_iterate_phdr(first, NULL);
    inlined_rows();
    if (dladdr((void *)&write, &lib))
        printf("lib %s %#lx\n", lib.dli_fname,
               (unsigned long)((char *)&write - (char *)lib.dli_fbase));
    return write_rows(argc) == 0; /* THE CALLER */
}
"""
CALL = next(i for i, t in enumerate(PROG.split("\n"), 1) if "THE CALL */" in t)
CALLER = next(i for i, t in enumerate(PROG.split("\n"), 1) if "THE CALLER" in t)
INLINED = next(i for i, t in enumerate(PROG.split("\n"), 1) if "THE INLINED CALL" in t)


def build(d: Path, *flags: str, variant: int = 1) -> tuple[Path, dict[str, str]]:
    """The program built in ``d`` with ``flags``, and what it printed."""
    d.mkdir(parents=True, exist_ok=True)
    src = d / "prog.c"
    src.write_text(PROG)
    exe = d / "prog"
    subprocess.run([CC, *flags, f"-DVARIANT={variant}", "-o", str(exe), str(src), "-ldl"],
                   check=True, capture_output=True)  # fmt: skip
    out = subprocess.run([str(exe)], capture_output=True, text=True).stdout
    said = {line.split()[0]: line.split(maxsplit=1)[1] for line in out.splitlines()}
    return exe, said


def build_id(path: str) -> str:
    """The file's build-id as binutils reads it ("" without readelf)."""
    if not shutil.which("readelf"):
        return ""
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    return next((line.split()[-1] for line in out.splitlines() if "Build ID" in line), "")


def traced(root: Path, exe: Path, said: dict[str, str], *, bid: str | None = None) -> object:
    """A trace of one write from the program's call site (with its caller),
    and one from inside libc as a library site."""
    lib, lib_offset = said["lib"].split()
    own = build_id(str(exe)) if bid is None else bid
    modules = [{"path": str(exe), "base": 0, "build_id": own},
               {"path": lib, "base": 0, "build_id": build_id(lib)}]  # fmt: skip
    sites = [{"id": 1, "frames": [[0, int(said["site"], 16)], [0, int(said["caller"], 16)]],
              "count": 1, "bytes": 10, "time": 0.5},
             {"id": 2, "frames": [[1, int(lib_offset, 16) + 4]], "library": True, "count": 1,
              "bytes": 0, "time": 0.1}]  # fmt: skip
    root.mkdir()
    write_proc(root, 0, [(OP_WRITE, 10, 0, 1), (OP_WRITE, 10, 0, 2)], sites=sites,
               modules=modules)  # fmt: skip
    return load(str(root)).sites


@pytest.mark.parametrize("flags", [("-O0", "-g"), ("-O2", "-g", "-fomit-frame-pointer"),
                                   ("-O2", "-g", "-no-pie", "-fno-pie"),
                                   ("-O1", "-gdwarf-4", "-fPIE", "-pie")])  # fmt: skip
def test_debug_information_gives_file_line_and_function(tmp_path, flags):
    exe, said = build(tmp_path / "b", *flags)
    s = traced(tmp_path / "t", exe, said)
    assert (Path(s.file[1]).name, int(s.line[1]), s.function[1]) == ("prog.c", CALL, "write_rows")
    assert s.file[1] == str(tmp_path / "b" / "prog.c") and s.note[1] == ""
    assert s.label(1) == f"prog.c:{CALL} write_rows"
    assert s.caller[1] == f"prog.c:{CALLER} main"


@pytest.mark.parametrize("flags", [("-O0", "-g"), ("-O2", "-g"), ("-O2", "-gdwarf-4"),
                                   ("-O2",)])  # fmt: skip
def test_an_inlined_function_is_named_with_its_line(tmp_path, flags):
    """Code inlined into main: its line is the inlined function's, and so
    is the function named with it; without debug information, main."""
    exe, said = build(tmp_path / "b", *flags)
    off = int(said["inlined"], 16)
    file, line, function, _ = lookup(str(exe), build_id(str(exe)), [off])[0]
    if "-O2" in flags and len(flags) == 1:
        assert (file, line, function) == ("", 0, "main")
    else:
        assert (Path(file).name, line, function) == ("prog.c", INLINED, "inlined_rows")


def test_without_debug_information_the_function_alone(tmp_path):
    exe, said = build(tmp_path / "b", "-O2", "-fomit-frame-pointer")
    s = traced(tmp_path / "t", exe, said)
    assert (s.file[1], int(s.line[1]), s.function[1]) == ("", 0, "write_rows")
    assert s.note[1] == NO_DEBUG
    assert s.label(1) == f"write_rows (prog+{int(said['site'], 16):#x})"


def test_stripped_binary_gives_module_and_offset(tmp_path):
    exe, said = build(tmp_path / "b", "-O2")
    subprocess.run(["strip", "--strip-all", str(exe)], check=True)
    s = traced(tmp_path / "t", exe, said)
    assert s.function[1] == "" and s.note[1] == NO_SYMBOLS
    assert s.label(1) == f"prog+{int(said['site'], 16):#x}"


def test_debugging_information_in_a_separate_file(tmp_path, monkeypatch):
    """A binary stripped of its debugging information (and symbols), kept
    in DEBUG_DIRS/.build-id/ab/cdef....debug as Debian's -dbgsym packages
    do, still gives file, line and function; a debug file of another
    build is not used."""
    import iopilot.sources.symbols as symbols

    exe, said = build(tmp_path / "b", "-O2", "-g")
    bid = build_id(str(exe))
    debug = tmp_path / "debug" / ".build-id" / bid[:2] / f"{bid[2:]}.debug"
    debug.parent.mkdir(parents=True)
    subprocess.run(["objcopy", "--only-keep-debug", str(exe), str(debug)], check=True)
    subprocess.run(["strip", "--strip-all", str(exe)], check=True)
    off = int(said["site"], 16)
    monkeypatch.setattr(symbols, "DEBUG_DIRS", [str(tmp_path / "nowhere"), str(tmp_path / "debug")])
    file, line, function, note = lookup(str(exe), bid, [off])[0]
    assert (Path(file).name, line, function, note) == ("prog.c", CALL, "write_rows", "")
    other, _ = build(tmp_path / "o", "-O2", "-g", variant=3)
    subprocess.run(["objcopy", "--only-keep-debug", str(other), str(debug)], check=True)
    assert lookup(str(exe), bid, [off])[0] == ("", 0, "", NO_SYMBOLS)


def test_a_binary_is_read_once_while_it_stays_the_same(tmp_path, monkeypatch):
    """`iopilot tune` reads a trace of the same program after every run: a
    binary whose build-id the run recorded is read once, and again when the
    file changed (its times here, its bytes the same) or other offsets are
    asked; one without a recorded build-id is read every time.  (A separate
    debug file replaced meanwhile: the test above.)"""
    import os

    import iopilot.sources.symbols as symbols

    exe, said = build(tmp_path / "b", "-O2", "-g")
    bid = build_id(str(exe))
    off = int(said["site"], 16)
    reads: list[str] = []
    read = symbols._lookup
    monkeypatch.setattr(symbols, "_lookup", lambda f, b, o: reads.append(b) or read(f, b, o))
    first = lookup(str(exe), bid, [off])
    assert first[0][2] == "write_rows" and len(reads) == 1
    assert lookup(str(exe), bid, [off]) == first and len(reads) == 1
    os.utime(exe, ns=(1, 1))
    assert lookup(str(exe), bid, [off]) == first and len(reads) == 2
    assert lookup(str(exe), bid, [off]) == first and len(reads) == 2
    assert lookup(str(exe), bid, [off, int(said["caller"], 16)])[0] == first[0]
    assert len(reads) == 3
    assert lookup(str(exe), "", [off]) == lookup(str(exe), "", [off]) == first
    assert len(reads) == 5


def test_deleted_binary_gives_module_and_offset(tmp_path):
    exe, said = build(tmp_path / "b", "-O0", "-g")
    bid = build_id(str(exe))
    exe.unlink()
    s = traced(tmp_path / "t", exe, said, bid=bid)
    assert (s.file[1], s.function[1], s.note[1]) == ("", "", NOT_FOUND)
    assert s.label(1) == f"prog+{int(said['site'], 16):#x}"
    assert s.caller[1] == f"prog+{int(said['caller'], 16):#x}"


def test_rebuilt_binary_gives_module_and_offset(tmp_path):
    """The file at the path is another build (another build-id): its lines
    would be wrong, so none are given."""
    exe, said = build(tmp_path / "b", "-O0", "-g")
    bid = build_id(str(exe))
    build(tmp_path / "b", "-O0", "-g", variant=2)
    assert build_id(str(exe)) != bid
    s = traced(tmp_path / "t", exe, said, bid=bid)
    assert (s.file[1], s.function[1], s.note[1]) == ("", "", CHANGED)
    # the same build-id: found again
    assert lookup(str(exe), build_id(str(exe)), [int(said["site"], 16)])[0][2] == "write_rows"


def test_a_library_site_names_the_library_function(tmp_path):
    exe, said = build(tmp_path / "b", "-O0", "-g")
    s = traced(tmp_path / "t", exe, said)
    lib = Path(said["lib"].split()[0]).name
    assert s.library[2] and s.function[2] == "write"
    assert s.label(2) == f"write in {lib}"
    assert s.note[2].startswith("no frame of the program")


def test_two_calls_on_one_line_are_one_row(tmp_path):
    """Two offsets inside the same line's code make one row, counts summed
    and both processes' records pointing at it; without debug information
    each offset stays its own row."""
    for flags, rows in ((("-O0", "-g"), 2), (("-O2",), 3)):
        exe, said = build(tmp_path / f"b{len(flags)}", *flags)
        off = int(said["site"], 16)
        sites = [{"id": 1, "frames": [[0, off]], "count": 2, "bytes": 20, "time": 0.5},
                 {"id": 2, "frames": [[0, off - 1]], "count": 3, "bytes": 30, "time": 0.25}]
        root = tmp_path / f"t{len(flags)}"
        root.mkdir()
        modules = [{"path": str(exe), "base": 0, "build_id": build_id(str(exe))}]
        for rank in range(2):
            write_proc(root, rank, [(OP_WRITE, 10, 0, 1), (OP_WRITE, 10, 0, 2)], sites=sites,
                       modules=modules)  # fmt: skip
        t = load(str(root))
        s = t.sites
        assert len(s) == rows
        if rows == 2:
            assert s.label(1) == f"prog.c:{CALL} write_rows" and s.offset[1] == off
            assert (s.count[1], s.bytes[1], s.time[1]) == (10, 100, 1.5)
            assert t.records.site.tolist() == [1, 1, 1, 1]
        else:
            assert s.count.tolist() == [0, 4, 6] and t.records.site.tolist() == [1, 2, 1, 2]


def test_not_an_elf_file(tmp_path):
    p = tmp_path / "script"
    p.write_text("#!/bin/sh\necho\n")
    assert lookup(str(p), "", [0x1234]) == [("", 0, "", "binary not readable")]


@pytest.mark.parametrize("flags", [("-O0", "-g"), ("-O2", "-g"), ("-O2", "-gdwarf-4")])
def test_line_table_rows_are_pyelftools_rows(tmp_path, flags):
    from elftools.elf.elffile import ELFFile

    exe, _ = build(tmp_path / "b", *flags)
    with open(exe, "rb") as f:
        dwarf = ELFFile(f).get_dwarf_info()
        for cu in dwarf.iter_CUs():
            prog = dwarf.line_program_for_CU(cu)
            want = [(e.state.address, e.state.line, e.state.file, e.state.end_sequence)
                    for e in prog.get_entries() if e.state]  # fmt: skip
            addr, line, file, end = [], [], [], []
            _decode(prog, cu["address_size"], "little", addr, line, file, end)
            ended = set(end)
            rows = zip(addr, line, file, strict=True)
            got = [(a, n, k, i in ended) for i, (a, n, k) in enumerate(rows)]
            assert got == want and len(want) > 10


CPP = """
namespace io {
int write_rows(int n) { return n * 3 + 1; }
}
int main(int argc, char **) { return io::write_rows(argc) == 0; }
"""
FORTRAN = """
module io_mod
contains
  integer function write_rows(n)
    integer, intent(in) :: n
    write_rows = n * 3 + 1
  end function
end module
program main
  use io_mod
  print *, write_rows(2)
end program
"""


def _symbol(exe: Path, name: str) -> int:
    """A defined symbol's address, as binutils' nm reads it."""
    out = subprocess.run(["nm", str(exe)], capture_output=True, text=True, check=True).stdout
    return next(int(x.split()[0], 16) for x in out.splitlines() if x.split()[-1] == name)


@pytest.mark.parametrize(("compiler", "source", "symbol", "shown"), [
    ("g++", CPP, "_ZN2io10write_rowsEi", "io::write_rows"),
    ("gfortran", FORTRAN, "__io_mod_MOD_write_rows", "io_mod::write_rows"),
])  # fmt: skip
def test_cpp_and_fortran_names_as_the_source_spells_them(tmp_path, compiler, source, symbol,
                                                         shown):  # fmt: skip
    if not shutil.which(compiler):
        pytest.skip(f"no {compiler}")
    src = tmp_path / ("prog.cpp" if compiler == "g++" else "prog.f90")
    src.write_text(source)
    for flags in (["-O0", "-g"], ["-O2"]):
        exe = tmp_path / f"prog{len(flags)}"
        # in tmp_path: gfortran writes the module's .mod file where it runs
        subprocess.run([compiler, *flags, "-o", str(exe), str(src)], check=True, cwd=tmp_path)
        file, line, function, note = lookup(str(exe), "", [_symbol(exe, symbol) + 2])[0]
        assert function == shown
        if "-g" in flags:
            assert (Path(file).name, note) == (src.name, "") and line > 0
        else:
            assert (file, note) == ("", NO_DEBUG)


def test_a_sibling_link_pointing_back_ends_the_children():
    """pyelftools follows DW_AT_sibling as written: one pointing back would
    list the same children for ever (met flipping bytes of a binary)."""
    from iopilot.sources.symbols import _children

    class Die:
        def __init__(self, offset, kids=()):
            self.offset, self.kids = offset, kids

        def iter_children(self):
            yield from self.kids

    a, b = Die(20), Die(30)
    looping = Die(10, [a, b, a, b, a, b])
    assert [d.offset for d in _children(looping)] == [20, 30]


def test_damaged_binaries_give_notes_not_errors(tmp_path):
    """Bytes of a real binary flipped at random (a fixed seed): every lookup
    answers, with the lines, a note, or "binary not readable"."""
    import random

    exe, said = build(tmp_path / "b", "-O2", "-g")
    data = exe.read_bytes()
    off = int(said["site"], 16)
    rng = random.Random(1)
    notes = set()
    for k in range(120):
        d = bytearray(data)
        for _ in range(rng.choice([1, 5, 50])):
            d[rng.randrange(len(d))] = rng.randrange(256)
        bad = tmp_path / f"bad{k}"
        bad.write_bytes(bytes(d))
        found = lookup(str(bad), "", [off])
        assert len(found) == 1 and len(found[0]) == 4
        notes.add(found[0][3])
    assert "binary not readable" in notes and "" in notes


@pytest.mark.parametrize("path, system", [
    ("/usr/include/c++/12/ostream", True),
    ("/usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h", True),
    ("/usr/local/include/netcdf.h", True),
    ("/opt/gcc-13/include/c++/13/bits/ostream.tcc", True),
    ("/home/me/sim/include/io.h", False),
    ("/usr/src/app/main.cpp", False),
    ("/usr/includes/mine.h", False),
])  # fmt: skip
def test_code_inlined_from_system_headers_goes_to_the_programs_call(path, system):
    """A line in a compiler or system header (std::endl's flush) is replaced
    by the program's call of it; the program's own headers keep theirs."""
    from iopilot.sources.symbols import _system_file

    assert _system_file(path) is system


# The same probe as PROG's (everything before its inlined function), and a
# call made inside a function a header inlines.
SYS_PROG = PROG[: PROG.index("static inline")] + r"""#include "iohelp.h"

__attribute__((noinline)) int save_rows(void)
{
    io_helper(); /* THE PROGRAM'S CALL */
    return 0;
}

int main(void)
{
    dl_iterate_phdr(first, NULL);
    return save_rows();
}
"""
SYS_HEADER = r"""
void probe(const char *what);
static inline __attribute__((always_inline)) void io_helper(void)
{
    probe("site");
}
"""


@pytest.mark.parametrize("flags", [("-O0", "-g"), ("-O2", "-g")])
def test_a_call_inlined_from_a_system_header_is_named_at_the_programs_line(tmp_path, flags):
    """The call sits in code a system header inlined into the program (its
    debug information says /usr/include/...): the site is the program's line
    that called the header's function, in the program's function."""
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "iohelp.h").write_text(SYS_HEADER)
    src = tmp_path / "prog.c"
    src.write_text(SYS_PROG)
    exe = tmp_path / "prog"
    subprocess.run([CC, *flags, f"-I{inc}", f"-fdebug-prefix-map={inc}=/usr/include",
                    "-o", str(exe), str(src)], check=True, capture_output=True)  # fmt: skip
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    off = int(out.split()[1], 16)
    line = next(i for i, t in enumerate(SYS_PROG.split("\n"), 1) if "THE PROGRAM'S CALL" in t)
    file, got_line, function, note = lookup(str(exe), build_id(str(exe)), [off])[0]
    assert (Path(file).name, got_line, function, note) == ("prog.c", line, "save_rows", "")
