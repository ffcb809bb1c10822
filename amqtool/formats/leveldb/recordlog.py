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


# --- one pass over a file for verify (native/leveldb_scan.c is the C twin) -----------------------------

STOP_ZERO, STOP_NOT_A_RECORD, STOP_TRUNCATED_HEADER, STOP_TRUNCATED_RECORD = 1, 2, 3, 4
EV_CRC, EV_UOW, EV_SHAPE = 1, 2, 3


def _message_shaped(data) -> bool:
    n = len(data)
    return n >= 5 and int.from_bytes(data[:4], "big", signed=True) == n - 4


def shape_ok(kind: int, data) -> bool:
    """Whether a record's data has the shape its kind says, by a quick look: DATA a size-prefixed OpenWire
    command, entries an ``EntryRecord`` with its collection and entry keys (parsed as hawtbuf does),
    ADD_COLLECTION a ``CollectionRecord`` of a known type, REMOVE_COLLECTION a bare varint, UOW_END 8 bytes,
    TRACE anything, another kind a size-prefixed command (a DATA record whose kind byte changed). A record
    failing it is looked at closer by verify (a snappy-compressed DATA record fails it and decodes)."""
    from amqtool.formats.leveldb import records as R

    try:
        if kind == DATA:
            return _message_shaped(data)
        if kind in (ADD_ENTRY, UPDATE_ENTRY, REMOVE_ENTRY):
            e = R.decode_entry(data)
            return e.collection_key is not None and e.entry_key is not None
        if kind == ADD_COLLECTION:
            return R.decode_collection(data).type in R.COLLECTION_TYPES
        if kind == REMOVE_COLLECTION:
            return 0 < len(data) <= 10 and data[-1] < 0x80
        if kind == UOW_END:
            return len(data) == 8
        if kind == TRACE:
            return True
        return _message_shaped(data)
    except FormatError:
        return False


@dataclass
class FileScan:
    """What one pass over a log file's bytes gives (:func:`scan_file`): ``records`` whole records; ``stop``
    (offset, reason STOP_*, first header byte, header length) or None when they reach the end exactly;
    ``data_offsets``/``data_lengths``/``data_ok`` the DATA records (arrays); ``events`` in file order,
    ``(offset, code, kind, length, a, b)``: EV_CRC (a stored checksum, b computed), EV_UOW (a UOW_END naming
    start a, its unit starting at log position b), EV_SHAPE (a record failing :func:`shape_ok`);
    ``complete`` :func:`complete_end`'s triple."""

    records: int
    stop: tuple | None
    data_offsets: object
    data_lengths: object
    data_ok: bytes
    events: list
    complete: tuple


def scan_file(buf, base: int) -> FileScan:
    """The reference for ``amqtool._native.leveldb_scan`` (the two give equal :class:`FileScan` values):
    every record of one file whose first byte is at log position ``base``, its CRC-32, the UOW chain
    (``unit``: where the current unit of work began) and the shape of its data."""
    from array import array

    offs, lens, oks = array("q"), array("I"), bytearray()
    events: list = []
    records = 0
    stop = None
    unit = base
    for item in iter_records(buf):
        if isinstance(item, Stop):
            reason = {"zero": STOP_ZERO, "not-a-record": STOP_NOT_A_RECORD}.get(item.reason)
            if reason is None:
                reason = STOP_TRUNCATED_HEADER if item.offset + HEADER_SIZE > len(buf) else STOP_TRUNCATED_RECORD
            length = HEADER.unpack_from(buf, item.offset)[3] if reason == STOP_TRUNCATED_RECORD else 0
            stop = (item.offset, reason, buf[item.offset], length)
            break
        records += 1
        if not item.crc_ok:
            events.append((item.offset, EV_CRC, item.kind, item.length, item.stored_checksum & 0xFFFFFFFF,
                           _crc32(item.data)))
        if item.kind == UOW_END and item.length == 8:
            start = item.uow_start()
            if start != unit:
                events.append((item.offset, EV_UOW, item.kind, 8, start, unit))
            unit = base + item.end
            continue
        if not shape_ok(item.kind, item.data):
            events.append((item.offset, EV_SHAPE, item.kind, item.length, 0, 0))
        if item.kind == DATA:
            offs.append(item.offset)
            lens.append(item.length)
            oks.append(item.crc_ok)
    return FileScan(records, stop, offs, lens, bytes(oks), events, complete_end(buf, base))
