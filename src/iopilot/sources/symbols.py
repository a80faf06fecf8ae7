"""Native call sites -> source file, line and function, read from the
binaries when the report is made (the runtime records only module and
offset, which costs it nothing).

An offset is the return address minus the module's load bias (``dlpi_addr``),
i.e. the link-time virtual address of the instruction after the call, for
a shared library, a position-independent executable (whose first
``PT_LOAD`` is at 0) and a fixed-address executable (bias 0, the offset is
the absolute address) alike; the call itself is at ``offset - 1``.

Per binary, once per load (:class:`Symbolizer` keeps them by path and
build-id), and once per process while the file stays the same (``_FOUND``):

* the build-id recorded at run time is compared with the file's: a file
  that is gone or was rebuilt since gives ``module+0xoffset`` and a note,
  never an error;
* the DWARF line table (the file's own, or a separate debug file named by
  its build-id, as Debian's -dbgsym packages install them) gives file and
  line: only the compilation units that hold a wanted address are decoded
  (``.debug_aranges`` says which), their rows sorted once and every
  address found by one ``searchsorted``;
* the symbol table (``.symtab``, else ``.dynsym``) gives the function: the
  defined functions sorted by address, again one ``searchsorted``; where
  the address is in code inlined into that function (``-O2 -g``), the
  debugging entries name the inlined function instead, to go with its line.

pyelftools is imported only when a trace has native sites (0.05 s).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from ..errors import InputError
from ..userfiles import open_regular
from .program import functions, sections, symbol_table

NOT_FOUND = "binary not found"
NO_MODULE = "address in no module the runtime knew"
CHANGED = "binary changed since the run"
NO_DEBUG = "no debug information: function name only"
NO_SYMBOLS = "no debug information or symbols"
UNREADABLE = "binary not readable"
# where separate debugging information is found by build-id
DEBUG_DIRS = ["/usr/lib/debug"]

Found = tuple[str, int, str, str]  # file, line, function, note


class Symbolizer:
    """Collects (module path, build-id, offset) triples, then looks each
    binary up once for all its offsets."""

    def __init__(self) -> None:
        self.wanted: dict[tuple[str, str], set[int]] = {}
        self.found: dict[tuple[str, str, int], Found] = {}

    def want(self, path: str, build_id: str, offset: int) -> None:
        self.wanted.setdefault((path, build_id), set()).add(offset)

    def resolve(self) -> None:
        """Look up every wanted offset."""
        for (path, build_id), offsets in self.wanted.items():
            offs = sorted(offsets)
            for off, found in zip(offs, lookup(path, build_id, offs), strict=True):
                self.found[(path, build_id, off)] = found
        self.wanted = {}

    def get(self, path: str, build_id: str, offset: int) -> Found:
        """(file, line, function, note) of one offset."""
        return self.found.get((path, build_id, offset), ("", 0, "", ""))

    def label(self, path: str, build_id: str, offset: int) -> str:
        """A caller as the report shows it (``main.c:88 main``)."""
        file, line, function, _ = self.get(path, build_id, offset)
        if file and line:
            return f"{os.path.basename(file)}:{line} {function}".rstrip()
        place = f"{os.path.basename(path)}+{offset:#x}" if path else f"{offset:#x}"
        return f"{function} ({place})" if function else place


# What the lookups of this process found.  `iopilot tune` reads a trace of
# the same program after every run it measures, and reading a binary's
# debugging entries again each time cost 0.4 s a run for libpython alone.
# Kept only for a binary whose build-id the run recorded, under the file's
# identity (device, inode, size, times), that build-id, the offsets and the
# identity of each separate debug file it could use: a binary or debug file
# changed since is read afresh.
_FOUND: dict[tuple[object, ...], list[Found]] = {}
_FOUND_MAX = 256


def lookup(path: str, build_id: str, offsets: Sequence[int]) -> list[Found]:
    """(file, line, function, note) of each offset in the binary at ``path``;
    a binary that is gone, rebuilt or unreadable gives notes, never an error."""
    n = len(offsets)
    if not path:
        return [("", 0, "", NO_MODULE)] * n
    try:
        fd, _ = open_regular(path, None, follow_links=True)
    except InputError:
        return [("", 0, "", NOT_FOUND)] * n
    with os.fdopen(fd, "rb") as f:
        key = _identity(f.fileno(), path, build_id, offsets)
        found = _FOUND.get(key) if key is not None else None
        if found is None:
            try:
                found = _lookup(f, build_id, offsets)
            except _damaged():
                return [("", 0, "", UNREADABLE)] * n
            if key is not None:
                if len(_FOUND) >= _FOUND_MAX:
                    del _FOUND[next(iter(_FOUND))]
                _FOUND[key] = found
    return _demangle(found)


def _identity(fd: int, path: str, build_id: str,
              offsets: Sequence[int]) -> tuple[object, ...] | None:  # fmt: skip
    """What a lookup's answer depends on (see ``_FOUND``); None without a
    recorded build-id."""
    if not build_id:
        return None

    def stat(st: os.stat_result) -> tuple[int, ...]:
        return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns

    debug: list[tuple[str, tuple[int, ...] | None]] = []
    for path_of_debug in _debug_paths(build_id.lower()):
        try:
            debug.append((path_of_debug, stat(os.stat(path_of_debug))))
        except OSError:
            debug.append((path_of_debug, None))
    return path, stat(os.fstat(fd)), build_id.lower(), tuple(offsets), tuple(debug)


def _debug_paths(build_id: str) -> list[str]:
    """Where a separate debug file of this build-id would be, in DEBUG_DIRS."""
    return [os.path.join(root, ".build-id", build_id[:2], build_id[2:] + ".debug")
            for root in DEBUG_DIRS]  # fmt: skip


def _damaged() -> tuple[type[Exception], ...]:
    """What pyelftools raises on a damaged file (found by flipping bytes of
    a binary at random): besides its own errors, RuntimeError for a form it
    does not know (NotImplementedError) or a loop (RecursionError), and
    MemoryError for a section whose size field says exabytes, which it asks
    to read at once (the allocation fails at once, nothing is held)."""
    from elftools.common.exceptions import DWARFError, ELFError, ELFParseError
    from elftools.construct import ConstructError

    return (ELFError, DWARFError, ELFParseError, ConstructError, struct.error, OSError,
            ValueError, LookupError, ArithmeticError, AttributeError, TypeError, AssertionError,
            RuntimeError, MemoryError)  # fmt: skip


def _lookup(f: object, build_id: str, offsets: Sequence[int]) -> list[Found]:
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(f)
    n = len(offsets)
    own = _build_id(elf)
    if build_id and own != build_id.lower():
        return [("", 0, "", CHANGED)] * n
    pcs = np.array(offsets, np.uint64) + np.uint64(_fixed_base(elf, offsets))
    pcs = np.maximum(pcs, 1) - np.uint64(1)  # the call, not the instruction after it
    names = _functions(elf, pcs)
    with _separate_debug(elf, own) as debug:
        if debug is not None and not all(names):  # a stripped file: the debug file's symbols
            names = [a or b for a, b in zip(names, _functions(debug, pcs), strict=True)]
        lines = [("", 0)] * n
        src = elf if _has_lines(elf) else debug
        if src is not None and _has_lines(src):
            dwarf = src.get_dwarf_info()  # type: ignore[attr-defined]
            units = _units(dwarf, pcs)
            order = "little" if elf.little_endian else "big"  # type: ignore[attr-defined]
            lines = _lines(dwarf, units, pcs, order)
            try:  # damaged debugging entries lose the inlined names, not the lines
                for k, (name, caller) in _inlined(dwarf, units, pcs).items():
                    names[k] = name
                    if caller is not None and _system_file(lines[k][0]):
                        # a library header's inlined code (std::endl): the
                        # program's line that called it
                        lines[k], names[k] = (caller[0], caller[1]), caller[2]
            except _damaged():
                pass
    out = []
    for (file, line), name in zip(lines, names, strict=True):
        if file and line:
            out.append((file, line, name, ""))
        else:
            out.append(("", 0, name, NO_DEBUG if name else NO_SYMBOLS))
    return out


@contextmanager
def _separate_debug(elf: object, build_id: str) -> Iterator[object | None]:
    """The debugging information of a file whose own was stripped into a
    separate file (Debian's -dbgsym packages, ``objcopy --only-keep-debug``):
    ``DEBUG_DIRS/.build-id/ab/cdef....debug``, named by the build-id, which
    it must carry too; None when there is none."""
    if not build_id or len(build_id) < 4 or _has_lines(elf):
        yield None
        return
    from elftools.elf.elffile import ELFFile

    for path in _debug_paths(build_id):
        try:
            fd, _ = open_regular(path, None, follow_links=True)
        except InputError:
            continue
        with os.fdopen(fd, "rb") as f:
            try:
                debug = ELFFile(f)
                ok = _build_id(debug) == build_id
            except _damaged():
                ok = False
            if ok:
                yield debug
                return
    yield None


def _has_lines(elf: object) -> bool:
    """Whether the file has DWARF line tables (pyelftools' has_dwarf_info
    is true for a mere .eh_frame)."""
    return any(elf.get_section_by_name(n) is not None  # type: ignore[attr-defined]
               for n in (".debug_line", ".zdebug_line"))  # fmt: skip


def _build_id(elf: object) -> str:
    """The file's GNU build-id in hex, "" when it has none."""
    for sec in sections(elf, ("SHT_NOTE",)):
        for note in sec.iter_notes():  # type: ignore[attr-defined]
            if note["n_type"] == "NT_GNU_BUILD_ID":
                return str(note["n_desc"]).lower()
    return ""


def _fixed_base(elf: object, offsets: Sequence[int]) -> int:
    """What to add to offsets to get link-time addresses: 0, as the runtime
    subtracts the load bias; except for a fixed-address executable whose
    offsets were taken from its first segment (all below its address)."""
    if elf["e_type"] != "ET_EXEC":  # type: ignore[index]
        return 0
    loads = [s["p_vaddr"] for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]  # type: ignore[attr-defined]
    first = min(loads, default=0)
    return first if offsets and max(offsets) < first else 0


def _functions(elf: object, pcs: np.ndarray) -> list[str]:
    """The function holding each address: ``.symtab``, then ``.dynsym``
    for what it leaves ("" when neither has one)."""
    out = [""] * len(pcs)
    for kind in ("SHT_SYMTAB", "SHT_DYNSYM"):
        for sec in sections(elf, (kind,)):
            syms, strtab = symbol_table(elf, sec)
            syms = syms[functions(syms) & (syms["value"] != 0)]
            if not len(syms):
                continue
            syms = syms[np.argsort(syms["value"], kind="stable")]
            value = syms["value"].astype(np.uint64)
            i = np.searchsorted(value, pcs, side="right") - 1
            j = np.maximum(i, 0)
            inside = (i >= 0) & (pcs < value[j] + syms["size"][j].astype(np.uint64))
            raw = strtab.tobytes()
            for k in np.flatnonzero(inside):
                if not out[k]:
                    at = int(syms["name"][j[k]])
                    end = raw.find(b"\0", at)
                    name = raw[at : end if end >= 0 else len(raw)]
                    out[k] = name.decode("utf-8", "surrogateescape")
        if all(out):
            break
    return out


def _lines(dwarf: object, units: list[object], pcs: np.ndarray,
           order: str) -> list[tuple[str, int]]:  # fmt: skip
    """(file, line) of each address from the DWARF line tables of these
    units; ("", 0) where none covers it."""
    none = [("", 0)] * len(pcs)
    if not dwarf.debug_line_sec:  # type: ignore[attr-defined]
        return none
    addr: list[int] = []
    line: list[int] = []
    file: list[int] = []
    end: list[int] = []
    names: list[str] = []
    for cu in units:
        prog = dwarf.line_program_for_CU(cu)  # type: ignore[attr-defined]
        if prog is None:
            continue
        base = len(names)
        names.extend(_file_names(cu, prog))
        n = len(addr)
        _decode(prog, cu["address_size"], order, addr, line, file, end)
        file[n:] = [base + f for f in file[n:]]
    if not addr:
        return none
    a = np.array(addr, np.uint64)
    ended = np.zeros(len(a), bool)
    ended[end] = True
    # by address; at one address the end of a sequence before the next's start
    by = np.lexsort((~ended, a))
    a, ended = a[by], ended[by]
    rows = np.array(line, np.int64)[by]
    fidx = np.array(file, np.int64)[by]
    i = np.searchsorted(a, pcs, side="right") - 1
    out = []
    for k in range(len(pcs)):
        r = int(i[k])
        ok = r >= 0 and not ended[r] and rows[r] > 0 and 0 <= fidx[r] < len(names)
        out.append((names[fidx[r]], int(rows[r])) if ok else ("", 0))
    return out


def _decode(prog: object, address_size: int, order: str, addr: list[int], line: list[int],
            file: list[int], end: list[int]) -> None:  # fmt: skip
    """Append the rows of a DWARF line program (address, line, file; ``end``
    gets the indexes of end-of-sequence rows).

    pyelftools' own decoder (``get_entries``) parses each opcode with
    ``construct`` and copies a state object per row: 4.4 s for the 295,000
    rows of a 100,000-line C file (``-O0 -g``); this loop over the bytes
    keeps only the three numbers: 0.21 s, the same rows (tests compare)."""
    h = prog.header  # type: ignore[attr-defined]
    min_len, line_base, line_range = (h["minimum_instruction_length"], h["line_base"],
                                      h["line_range"])  # fmt: skip
    opcode_base, lengths = h["opcode_base"], list(h["standard_opcode_lengths"])
    start = prog.program_start_offset  # type: ignore[attr-defined]
    prog.stream.seek(start)  # type: ignore[attr-defined]
    data = prog.stream.read(prog.program_end_offset - start)  # type: ignore[attr-defined]
    const_add = (255 - opcode_base) // line_range * min_len
    a, ln, f = 0, 1, 1
    i, n = 0, len(data)

    def leb(signed: bool = False) -> int:
        nonlocal i
        v = shift = 0
        while True:
            b = data[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v - (1 << shift) if signed and b & 0x40 else v

    while i < n:
        op = data[i]
        i += 1
        if op >= opcode_base:  # special: advance address and line, emit a row
            adj = op - opcode_base
            a += adj // line_range * min_len
            ln += line_base + adj % line_range
            addr.append(a)
            line.append(ln)
            file.append(f)
        elif op == 0:  # extended
            size = leb()
            sub, after = data[i], i + size
            if sub == 1:  # end_sequence
                end.append(len(addr))
                addr.append(a)
                line.append(ln)
                file.append(f)
                a, ln, f = 0, 1, 1
            elif sub == 2:  # set_address
                a = int.from_bytes(data[i + 1 : i + 1 + address_size], order)  # type: ignore[arg-type]
            i = after
        elif op == 1:  # copy
            addr.append(a)
            line.append(ln)
            file.append(f)
        elif op == 2:  # advance_pc
            a += leb() * min_len
        elif op == 3:  # advance_line
            ln += leb(signed=True)
        elif op == 4:  # set_file
            f = leb()
        elif op == 8:  # const_add_pc
            a += const_add
        elif op == 9:  # fixed_advance_pc
            a += int.from_bytes(data[i : i + 2], order)  # type: ignore[arg-type]
            i += 2
        else:  # column, stmt, basic block, prologue, epilogue, isa, unknown: skip operands
            for _ in range(lengths[op - 1] if op - 1 < len(lengths) else 0):
                leb()


def _units(dwarf: object, pcs: np.ndarray) -> list[object]:
    """The compilation units that hold the addresses: from .debug_aranges
    when the file has it, else every unit."""
    aranges = dwarf.get_aranges()  # type: ignore[attr-defined]
    if aranges is None:
        return list(dwarf.iter_CUs())  # type: ignore[attr-defined]
    offsets = {aranges.cu_offset_at_addr(int(pc)) for pc in pcs}
    offsets.discard(None)
    if not offsets:  # the aranges cover none: they may be partial
        return list(dwarf.iter_CUs())  # type: ignore[attr-defined]
    return [dwarf.get_CU_at(o) for o in sorted(offsets)]  # type: ignore[attr-defined]


# Headers of the compiler and the system: code inlined from them (std::endl,
# a libstdc++ stream's flush) is placed at the program's line that called it.
_SYSTEM_DIRS = ("/usr/include/", "/usr/lib/gcc/", "/usr/local/include/", "/usr/lib/llvm")


def _system_file(path: str) -> bool:
    return path.startswith(_SYSTEM_DIRS) or "/include/c++/" in path


Caller = tuple[str, int, str]  # file, line, function of the program's call


def _inlined(dwarf: object, units: list[object],
             pcs: np.ndarray) -> dict[int, tuple[str, Caller | None]]:  # fmt: skip
    """{index of an address: (the function whose code it is, the program's
    call of it)} where that function was inlined into another (``-O2 -g``):
    the line table gives the inlined function's line, the symbol table the
    function it went into.  The call is the innermost call site of the
    inlining chain outside the system's headers (None: none is).  Only the
    top-level functions of the units are read (their siblings are skipped,
    not parsed), and only those holding an address are entered."""
    out: dict[int, tuple[str, Caller | None]] = {}
    for cu in units:
        files: list[str] | None = None
        for die in _children(cu.get_top_DIE()):  # type: ignore[attr-defined]
            if die.tag != "DW_TAG_subprogram":
                continue
            inside = np.zeros(len(pcs), bool)
            for lo, hi in _ranges(dwarf, cu, die):
                inside |= (pcs >= np.uint64(lo)) & (pcs < np.uint64(hi))
            for k in np.flatnonzero(inside):
                chain = _inline_chain(dwarf, cu, die, int(pcs[k]))
                if len(chain) < 2:
                    continue
                if files is None:
                    prog = dwarf.line_program_for_CU(cu)  # type: ignore[attr-defined]
                    files = _file_names(cu, prog) if prog is not None else []
                name = next((n for n in map(_die_name, reversed(chain[1:])) if n), "")
                out[int(k)] = (name, _program_call(chain, files))
    return out


def _inline_chain(dwarf: object, cu: object, die: object, pc: int) -> list[object]:
    """The function ``die`` and the inlined functions holding ``pc`` in it,
    outermost first."""
    chain = [die]
    found = True
    while found:
        found = False
        for child in _children(die):
            if child.tag not in ("DW_TAG_inlined_subroutine", "DW_TAG_lexical_block"):
                continue
            if any(lo <= pc < hi for lo, hi in _ranges(dwarf, cu, child)):
                if child.tag == "DW_TAG_inlined_subroutine":
                    chain.append(child)
                die, found = child, True
                break
    return chain


def _program_call(chain: list[object], files: list[str]) -> Caller | None:
    """From the innermost inlined function out, the first call made from a
    file of the program (not a system header): its file, line and the
    function it was made in."""
    for i in range(len(chain) - 1, 0, -1):
        a = chain[i].attributes  # type: ignore[attr-defined]
        if "DW_AT_call_file" not in a or "DW_AT_call_line" not in a:
            return None
        index = a["DW_AT_call_file"].value
        file = files[index] if 0 <= index < len(files) else ""
        if file and not _system_file(file):
            return file, int(a["DW_AT_call_line"].value), _die_name(chain[i - 1])
    return None


def _children(die: object) -> Iterator[object]:
    """The children of a debugging entry, in order; a damaged sibling link
    that points back ends them (pyelftools would go round for ever)."""
    last = die.offset  # type: ignore[attr-defined]
    for child in die.iter_children():  # type: ignore[attr-defined]
        if child.offset <= last:
            return
        last = child.offset
        yield child


def _ranges(dwarf: object, cu: object, die: object) -> list[tuple[int, int]]:
    """The address ranges of a debugging entry (low/high pc, or a range list)."""
    a = die.attributes  # type: ignore[attr-defined]
    if "DW_AT_low_pc" in a and "DW_AT_high_pc" in a:
        lo, hi = a["DW_AT_low_pc"].value, a["DW_AT_high_pc"]
        # DWARF 4 on: high_pc is usually a length (a constant), not an address
        return [(lo, hi.value if hi.form.startswith("DW_FORM_addr") else lo + hi.value)]
    if "DW_AT_ranges" not in a:
        return []
    lists = dwarf.range_lists()  # type: ignore[attr-defined]
    if lists is None:
        return []
    top = cu.get_top_DIE().attributes.get("DW_AT_low_pc")  # type: ignore[attr-defined]
    base = top.value if top is not None else 0
    out = []
    for e in lists.get_range_list_at_offset(a["DW_AT_ranges"].value, cu=cu):
        if hasattr(e, "base_address"):
            base = e.base_address
        elif getattr(e, "is_absolute", False):
            out.append((e.begin_offset, e.end_offset))
        else:
            out.append((base + e.begin_offset, base + e.end_offset))
    return out


def _die_name(die: object) -> str:
    """A function's name from its entry, its abstract origin or its
    declaration: a linkage name when one of them has it (mangled: C++,
    Fortran modules), else the first plain name."""
    plain = ""
    for _ in range(4):
        a = die.attributes  # type: ignore[attr-defined]
        for key in ("DW_AT_linkage_name", "DW_AT_MIPS_linkage_name"):
            if key in a:
                return _text(a[key].value)
        if not plain and "DW_AT_name" in a:
            plain = _text(a["DW_AT_name"].value)
        ref = next((k for k in ("DW_AT_abstract_origin", "DW_AT_specification") if k in a), None)
        if ref is None:
            break
        die = die.get_DIE_from_attribute(ref)  # type: ignore[attr-defined]
    return plain


def _file_names(cu: object, prog: object) -> list[str]:
    """The line program's file table as paths, indexed as its rows index
    it (from 1 before DWARF 5, from 0 in DWARF 5)."""
    top = cu.get_top_DIE()  # type: ignore[attr-defined]
    comp = top.attributes.get("DW_AT_comp_dir")
    comp_dir = _text(comp.value) if comp is not None else ""
    head = prog.header  # type: ignore[attr-defined]
    v5 = head["version"] >= 5
    dirs = [_text(d) for d in head["include_directory"]]
    out = [] if v5 else [""]
    for entry in head["file_entry"]:
        d = entry["dir_index"]
        if v5:
            folder = dirs[d] if d < len(dirs) else ""
        else:
            folder = comp_dir if d == 0 else (dirs[d - 1] if d - 1 < len(dirs) else "")
        out.append(os.path.normpath(os.path.join(comp_dir, folder, _text(entry["name"]))))
    return out


def _text(v: object) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


_FORTRAN_MODULE = re.compile(r"__(\w+?)_MOD_(\w+)")


def _demangle(found: list[Found]) -> list[Found]:
    """Names as the source spells them: C++ names (``_Z...``) without their
    parameters (``io::write_rows``: the line tells overloads apart), by one
    ``c++filt -p`` call for all, left mangled without it; gfortran's module
    procedures (``__io_mod_MOD_write_rows``) as ``io_mod::write_rows``."""
    out = []
    for file, line, name, note in found:
        m = _FORTRAN_MODULE.fullmatch(name)
        out.append((file, line, f"{m[1]}::{m[2]}" if m else name, note))
    cpp = [i for i, v in enumerate(out) if v[2].startswith("_Z") and "\n" not in v[2]]
    if not cpp:
        return out
    import shutil  # lazy: a report without C++ names never starts a process
    import subprocess  # lazy: as above (subprocess brings selectors, 2 ms)

    tool = shutil.which("c++filt")
    if not cpp or tool is None:
        return out
    text = "\n".join(out[i][2] for i in cpp) + "\n"
    try:
        names = subprocess.run([tool, "-p"], input=text, capture_output=True, text=True,
                               timeout=30, check=True).stdout.split("\n")  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return out
    if len(names) >= len(cpp):
        for i, name in zip(cpp, names, strict=False):
            file, line, _, note = out[i]
            out[i] = (file, line, name, note)
    return out
