"""LevelDB's MANIFEST (``db/version_edit.cc``): a LevelDB log (:mod:`.dblog`) of version edits, each a run of
varint tags: 1 comparator (length-prefixed), 2 log number, 3 next file number, 4 last sequence, 5 compact
pointer (level, internal key), 6 deleted file (level, number), 7 new file (level, number, size, smallest and
largest internal keys), 9 previous log number. Applying the edits in order gives the live table files and
the oldest write-ahead log still needed (``VersionSet::Recover``); ``CURRENT`` names the MANIFEST."""
from __future__ import annotations

from dataclasses import dataclass, field

from amqtool.errors import FormatError
from amqtool.formats.kahadb.protobuf import read_varint
from amqtool.formats.leveldb.dblog import HEADER_SIZE, read_log


@dataclass
class Version:
    comparator: str | None = None
    log_number: int = 0
    prev_log_number: int = 0
    next_file: int = 0
    last_sequence: int = 0
    files: dict = field(default_factory=dict)  # file number -> (level, size)
    problems: list = field(default_factory=list)  # (offset, message)
    edits: int = 0
    seen: set = field(default_factory=set)  # the tags the edits held
    bounds: dict = field(default_factory=dict)  # file number -> (smallest, largest) user key of its table
    # offset of a record cut by the file's end (LevelDB drops it silently, as a crash while writing it), and
    # its bytes up to the end (the edit it held, when only its length field changed)
    tail: int | None = None
    tail_data: bytes = b""


def _lp(mv, pos, n):
    ln, pos = read_varint(mv, pos, n)
    if pos + ln > n:
        raise FormatError("MANIFEST field runs past its edit", offset=pos)
    return bytes(mv[pos:pos + ln]), pos + ln


def apply_edit(v: Version, data) -> None:
    mv = memoryview(data)
    n = len(mv)
    pos = 0
    while pos < n:
        tag, pos = read_varint(mv, pos, n)
        v.seen.add(tag)
        if tag == 1:
            name, pos = _lp(mv, pos, n)
            v.comparator = name.decode("utf-8", "replace")
        elif tag == 2:
            v.log_number, pos = read_varint(mv, pos, n)
        elif tag == 3:
            v.next_file, pos = read_varint(mv, pos, n)
        elif tag == 4:
            v.last_sequence, pos = read_varint(mv, pos, n)
        elif tag == 5:
            _lvl, pos = read_varint(mv, pos, n)
            _key, pos = _lp(mv, pos, n)
        elif tag == 6:
            _lvl, pos = read_varint(mv, pos, n)
            num, pos = read_varint(mv, pos, n)
            v.files.pop(num, None)
        elif tag == 7:
            lvl, pos = read_varint(mv, pos, n)
            num, pos = read_varint(mv, pos, n)
            size, pos = read_varint(mv, pos, n)
            small, pos = _lp(mv, pos, n)
            large, pos = _lp(mv, pos, n)
            v.files[num] = (lvl, size)
            v.bounds[num] = (small[:-8], large[:-8])  # internal keys: the user key, then an 8-byte tag
        elif tag == 9:
            v.prev_log_number, pos = read_varint(mv, pos, n)
        else:
            raise FormatError(f"MANIFEST version edit tag {tag}", offset=pos)
    v.edits += 1


def read_manifest(buf) -> Version:
    v = Version()
    log = read_log(buf)
    for off, msg in ((p.offset, p.message) for p in log.problems):
        v.problems.append((off, msg))
    if log.tail is not None:
        v.tail, v.tail_data = log.tail, bytes(buf[log.tail + HEADER_SIZE:])
    for off, data in log.records:
        try:
            apply_edit(v, data)
        except FormatError as err:
            v.problems.append((off, f"version edit: {err.message}"))
    # VersionSet::Recover: a descriptor without these is corrupt and the database does not open (a record cut
    # by the end of the file is dropped silently, as a crash while writing it, which can leave them out)
    missing = [name for tag, name in ((3, "next-file"), (2, "log-number"), (4, "last-sequence"))
               if tag not in v.seen]
    if missing and not v.problems:
        v.problems.append((log.tail if log.tail is not None else len(buf),
                           f"no {', '.join(missing)} entry in the MANIFEST's version edits"))
    return v
