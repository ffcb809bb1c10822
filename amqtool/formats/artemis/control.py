"""``journal-rename-control.ctr``: the compaction commit marker (artemis-journal-format.md §4.3).

The control file is an ordinary journal file: a header (version 2, userVersion 0, fileID 0) and one ADD
record (tag 0, cc 0, id 1, userRecordType 0) whose body lists the old data files, the new ``.cmp`` files
and the renames (``AbstractJournalUpdateTask.writeControlFile``). Artemis rolls a compaction forward at
the next start when this file holds a valid ADD record, and discards the ``.cmp`` files otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from amqtool.errors import FormatError
from amqtool.formats.artemis.primitives import Reader, Writer
from amqtool.formats.artemis.records import ADD, HEADER_SIZE, FileHeader, Record, record_from_tuple, scan_records_py

CONTROL_FILE_NAME = "journal-rename-control.ctr"


@dataclass(frozen=True)
class ControlFile:
    """What a committed compaction still has to do."""

    old_files: list[str] = field(default_factory=list)
    new_files: list[str] = field(default_factory=list)  # with their ".cmp" suffix
    renames: list[tuple[str, str]] = field(default_factory=list)

    def encode_body(self) -> bytes:
        w = Writer()
        w.i32(len(self.old_files))
        for name in self.old_files:
            w.utf(name)
        w.i32(len(self.new_files))
        for name in self.new_files:
            w.utf(name)
        w.i32(len(self.renames))
        for src, dst in self.renames:
            w.utf(src).utf(dst)
        return w.getvalue()

    def encode(self) -> bytes:
        """The whole file: header then the ADD record, with no pre-fill (as the NIO factory writes it)."""
        header = FileHeader(version=2, user_version=0, file_id=0).encode()
        record = Record(type=ADD, tag=0, compact_count=0, record_id=1, user_record_type=0, body=self.encode_body())
        return header + record.encode(2)


def decode_body(body: bytes) -> ControlFile:
    r = Reader(body)
    old = [r.utf("old file name") for _ in range(_count(r, "old files"))]
    new = [r.utf("new file name") for _ in range(_count(r, "new files"))]
    renames = [(r.utf("rename source"), r.utf("rename target")) for _ in range(_count(r, "renames"))]
    return ControlFile(old, new, renames)


def _count(r: Reader, what: str) -> int:
    n = r.i32(f"number of {what}")
    if n < 0 or n > r.remaining:
        raise FormatError(f"control file lists {n} {what}")
    return n


def decode_control_file(data: bytes) -> ControlFile | None:
    """Read a control file as ``JournalImpl.checkControlFile`` does: scan it as a version-2 journal file
    with tag 0 and no header check. Returns None when it holds no valid ADD record (the compaction had not
    committed; Artemis deletes the file and the ``.cmp`` files). Raises FormatError when the record is
    valid but its body is not a control body."""
    if len(data) < HEADER_SIZE:
        return None
    records, _ = scan_records_py(data, 0, 2)
    for rec in records:
        if rec[0] == ADD:
            return decode_body(record_from_tuple(data, rec, 2).body)
    return None
