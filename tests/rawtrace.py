"""Reading a trace directory without the Python reader, straight from the
format description: the runtime tests check the files themselves."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import NamedTuple

HEADER = struct.Struct("<QIIqqd24x")
RECORD_V2 = struct.Struct("<ddqqQIBBH")  # start end offset length file thread layer op flags
RECORD = struct.Struct("<ddqqQIBBHII")  # format 3: ... flags site reserved
LAYERS = {"POSIX": 0, "STDIO": 1, "MPIIO": 2, "H5F": 3, "H5D": 4}


class Rec(NamedTuple):
    start: float
    end: float
    offset: int
    length: int
    file_id: int
    thread: int
    layer: int
    op: int
    flags: int
    site: int  # the process's call-site id; 0 in format 2


def read_records(path: Path) -> list[Rec]:
    """The records of a format 2 (48-byte) or format 3 (56-byte) file."""
    data = path.read_bytes()
    _magic, version, size, *_ = HEADER.unpack_from(data, 0)
    rec = RECORD if version >= 3 else RECORD_V2
    assert size == rec.size, (version, size)
    n = (len(data) - HEADER.size) // size
    out = []
    for i in range(n):
        v = rec.unpack_from(data, HEADER.size + i * size)
        out.append(Rec(*v[:9], site=v[9] if version >= 3 else 0))
    return out


class RawProc:
    """One process's .json: counters by (layer, path), notes, records."""

    def __init__(self, path: Path) -> None:
        j = json.loads(path.read_text())
        self.json = j
        self.rank = j["rank"]
        self.nprocs = j["nprocs"]
        names = j["counter_names"]
        self.counters: dict[tuple[str, str], dict[str, int]] = {}
        for layer, fid, ints, _floats in j["counters"]:
            key = (j["layers"][layer], j["names"].get(fid, fid))
            self.counters[key] = {names[int(i)]: v for i, v in ints.items()}
        self.ids = {p: int(i) for i, p in j["names"].items()}
        # [(file id, kind, key, value)]
        self.notes = [(int(fid), *text.split("\t", 2)) for fid, text in j["notes"]]
        # format 3: the loaded modules and the call sites records name by id
        self.modules = j.get("modules", [])
        self.sites = {s["id"]: s for s in j.get("sites", [])}
        rec = path.with_suffix(".rec")
        self.records = read_records(rec) if rec.exists() else []

    def get(self, layer: str, path: str | Path) -> dict[str, int]:
        return self.counters.get((layer, str(path)), {})

    def records_of(self, layer: str, name: str | Path, op: int) -> list[tuple]:
        """Records of one file and operation, in time order."""
        fid = self.ids[str(name)]
        rows = [r for r in self.records if r[6] == LAYERS[layer] and r[4] == fid and r[7] == op]
        return sorted(rows, key=lambda r: r[0])

    def notes_of(self, kind: str) -> dict[str, dict[str, str]]:
        """Notes of one kind as {path: {key: value}}."""
        names = {int(i): p for i, p in self.json["names"].items()}
        out: dict[str, dict[str, str]] = {}
        for fid, k, key, value in self.notes:
            if k == kind:
                out.setdefault(names.get(fid, str(fid)), {})[key] = value
        return out
