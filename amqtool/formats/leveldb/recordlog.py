"""The LevelDB store's log (``RecordLog.scala``): files ``%016x.log`` named by the position of their first
byte in one continuous address space, each a run of records::

    '*' (0x2A) | kind (int8) | checksum (int32 BE, java.util.zip.CRC32 of data) | length (uint32 BE) | data

Files are preallocated (a byte written at ``logSize - 1``) and so zero-filled past the last record: a reader
stops at the first byte that is not ``'*'``. Every write of the store (``RecordLog.appender``) ends with a
``UOW_END`` record (kind -1, 0xFF) whose 8-byte big-endian data is the position where that unit of work
began; on start the broker keeps the last file only up to the end of its last complete unit of work
(``LogReader.verifyAndGetEndOffset``, which checks each record's CRC and the chain of UOW_END starts) and
replays the index from the log up to there.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Iterator

from amqtool.errors import FormatError
from amqtool.formats.leveldb.codecs import crc32 as _crc32

MAGIC = 0x2A
HEADER = struct.Struct(">bbiI")  # magic, kind, checksum, length
HEADER_SIZE = 10

ADD_COLLECTION, REMOVE_COLLECTION, ADD_ENTRY, REMOVE_ENTRY, DATA, TRACE, UPDATE_ENTRY = 1, 2, 3, 4, 5, 6, 7
UOW_END = -1
KIND_NAMES = {ADD_COLLECTION: "ADD_COLLECTION", REMOVE_COLLECTION: "REMOVE_COLLECTION", ADD_ENTRY: "ADD_ENTRY",
              REMOVE_ENTRY: "REMOVE_ENTRY", DATA: "DATA", TRACE: "TRACE", UPDATE_ENTRY: "UPDATE_ENTRY",
              UOW_END: "UOW_END"}

LOG_NAME = re.compile(r"^([0-9a-fA-F]{1,16})\.log$")
INDEX_NAME = re.compile(r"^([0-9a-fA-F]{1,16})\.index$")


def kind_name(kind: int) -> str:
    return KIND_NAMES.get(kind, f"kind-{kind & 0xFF}")


def checksum(data) -> int:
    """``RecordLog.checksum``: CRC-32 as a signed Java int."""
    v = _crc32(data)
    return v - (1 << 32) if v & 0x80000000 else v


@dataclass
class Record:
    """One record of a log file: ``offset`` in the file, ``kind``, the stored checksum, the data's length;
    ``crc_ok`` whether the data matches it; ``data`` a view of the data (valid while the file is mapped)."""

    offset: int
    kind: int
    stored_checksum: int
    length: int
    crc_ok: bool
    data: memoryview

    @property
    def end(self) -> int:
        return self.offset + HEADER_SIZE + self.length

    def uow_start(self) -> int | None:
        """A UOW_END's start position (None when the record is not a well-formed UOW_END)."""
        if self.kind != UOW_END or self.length != 8:
            return None
        return struct.unpack(">q", self.data)[0]


@dataclass
class Stop:
    """Why a scan of one file stopped before its end: ``reason`` is ``zero`` (the zero-filled preallocated
    tail), ``not-a-record`` (a byte that is neither '*' nor the zero fill), ``truncated`` (a header or data
    running past the end of the file)."""

    offset: int
    reason: str
    detail: str = ""


def parse_header(buf, offset: int) -> tuple[int, int, int]:
    """(kind, stored checksum, length) of the record at ``offset``; FormatError if no record starts there."""
    if offset + HEADER_SIZE > len(buf):
        raise FormatError("record header runs past the end of the file", offset=offset)
    magic, kind, cs, length = HEADER.unpack_from(buf, offset)
    if magic != MAGIC:
        raise FormatError(f"no record here: byte 0x{magic & 0xFF:02x}, expected '*' (0x2a)", offset=offset)
    return kind, cs, length


def iter_records(buf, start: int = 0, *, verify: bool = True) -> Iterator[Record | Stop]:
    """Every record of one file's bytes from ``start``, then one :class:`Stop` if the records do not reach
    the end of ``buf`` exactly. With ``verify`` each record's CRC-32 is computed (``crc_ok``)."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    n = len(mv)
    pos = start
    unpack = HEADER.unpack_from
    crc = _crc32
    while pos < n:
        if pos + HEADER_SIZE > n:
            if not any(mv[pos:n]):
                yield Stop(pos, "zero")
            else:
                yield Stop(pos, "truncated", "a record header runs past the end of the file")
            return
        magic, kind, cs, length = unpack(mv, pos)
        if magic != MAGIC:
            if magic == 0 and kind == 0 and cs == 0 and length == 0:
                yield Stop(pos, "zero")
            else:
                yield Stop(pos, "not-a-record", f"byte 0x{magic & 0xFF:02x} where a record ('*') should start")
            return
        end = pos + HEADER_SIZE + length
        if end > n:
            yield Stop(pos, "truncated", f"a {length}-byte record runs {end - n} bytes past the end of the file")
            return
        data = mv[pos + HEADER_SIZE:end]
        ok = True
        if verify:
            ok = (crc(data) ^ (cs & 0xFFFFFFFF)) == 0
        yield Record(pos, kind, cs, length, ok, data)
        pos = end


def complete_end(buf, file_position: int) -> tuple[int, int, int]:
    """``LogReader.verifyAndGetEndOffset`` of a file mapped as ``buf`` whose first byte is at log position
    ``file_position``: the offset just after its last complete unit of work (records with good checksums,
    each UOW_END naming the start of its own unit). Returns (that offset, the offset where the scan stopped,
    the number of records after the complete end: the cut unit of work)."""
    uow_start = file_position
    pos = 0
    cut = 0
    for item in iter_records(buf):
        if isinstance(item, Stop) or not item.crc_ok:
            pos = item.offset
            break
        pos = item.end
        cut += 1
        start = item.uow_start() if item.kind == UOW_END else None
        if start is not None:
            if start != uow_start:
                return uow_start - file_position, item.offset, cut
            uow_start = file_position + item.end
            cut = 0
        # a kind -1 record whose data is not 8 bytes does not close a unit (RecordLog.check)
    else:
        pos = len(buf)
    return uow_start - file_position, pos, cut
