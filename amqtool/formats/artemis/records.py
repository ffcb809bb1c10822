"""Artemis file-journal header and records (types 10-19), format versions 1 and 2, and the scanner.

Layouts follow ``JournalImpl`` and ``core/journal/impl/dataformat`` (artemis-journal-format.md §1.2, §2):
every integer is big-endian; each record ends with ``checkSize``, the record's own total length. Version-2
files carry a ``compactCount`` byte after the tag; version-1 (HornetQ era) files do not.

The scanner reproduces ``JournalImpl.readJournalFile`` exactly (§1.5): bytes outside 10..19 are skipped, a
candidate whose fields run past the end or whose checkSize does not match is abandoned and scanning resumes
at the next byte, and a record whose tag is not the file's ``recordID`` (the low 31 bits of the header
fileID) belongs to an earlier use of the file and is skipped.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from amqtool.errors import FormatError

# JournalImpl record type bytes (§2.1).
EVENT = 10
ADD = 11
UPDATE = 12
ADD_TX = 13
UPDATE_TX = 14
DELETE_TX = 15
DELETE = 16
PREPARE = 17
COMMIT = 18
ROLLBACK = 19

RECORD_TYPE_NAMES = {
    EVENT: "EVENT",
    ADD: "ADD",
    UPDATE: "UPDATE",
    ADD_TX: "ADD_TX",
    UPDATE_TX: "UPDATE_TX",
    DELETE_TX: "DELETE_TX",
    DELETE: "DELETE",
    PREPARE: "PREPARE",
    COMMIT: "COMMIT",
    ROLLBACK: "ROLLBACK",
}

TRANSACTIONAL = frozenset({ADD_TX, UPDATE_TX, DELETE_TX, PREPARE, COMMIT, ROLLBACK})
WITH_BODY = frozenset({EVENT, ADD, UPDATE, ADD_TX, UPDATE_TX, DELETE_TX})
WITH_USER_TYPE = frozenset({EVENT, ADD, UPDATE, ADD_TX, UPDATE_TX})
WITHOUT_ID = frozenset({PREPARE, COMMIT, ROLLBACK})

FORMAT_VERSION = 2
COMPATIBLE_VERSIONS = frozenset({1, 2})
HEADER_SIZE = 16
FILL_CHARACTER = 0x4A  # 'J': HornetQ-era filler; current files are zero-filled (§1.3)

_HEADER = struct.Struct(">iiq")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

# The fixed part of each record (everything but body and extra data) in a version-2 file; version 1 is one
# byte shorter (no compactCount). Includes the trailing checkSize (§2.2).
_FIXED_V2 = {
    EVENT: 23, ADD: 23, UPDATE: 23,
    ADD_TX: 31, UPDATE_TX: 31,
    DELETE_TX: 30,
    DELETE: 18,
    PREPARE: 26,
    COMMIT: 22,
    ROLLBACK: 18,
}


def fixed_size(record_type: int, version: int) -> int:
    """Bytes of a record of ``record_type`` excluding body and extra data (checkSize included)."""
    return _FIXED_V2[record_type] - (0 if version >= 2 else 1)


def file_tag(file_id: int) -> int:
    """The tag stored in every record of a file: ``(int)(fileID & 0x7FFFFFFF)`` (JournalFileImpl)."""
    return file_id & 0x7FFFFFFF


@dataclass(frozen=True)
class FileHeader:
    """The 16-byte header: format version, user version, fileID (in that order, whatever the Java
    comment says)."""

    version: int
    user_version: int
    file_id: int

    @property
    def tag(self) -> int:
        return file_tag(self.file_id)

    def encode(self) -> bytes:
        return _HEADER.pack(self.version, self.user_version, self.file_id)


def decode_header(buf, path: str | None = None) -> FileHeader:
    """Decode a journal file header. Raises FormatError for a short buffer or an unknown format version."""
    if len(buf) < HEADER_SIZE:
        raise FormatError(f"file is {len(buf)} bytes, shorter than the {HEADER_SIZE}-byte journal header",
                          path=path, offset=0)
    version, user_version, file_id = _HEADER.unpack_from(buf, 0)
    if version not in COMPATIBLE_VERSIONS:
        raise FormatError(f"journal format version {version}, expected one of 1, 2", path=path, offset=0)
    return FileHeader(version, user_version, file_id)


@dataclass(frozen=True, slots=True)
class Record:
    """One journal record as it stands on disk.

    ``tx_id`` is None for non-transactional types; ``record_id`` is None for PREPARE/COMMIT/ROLLBACK;
    ``user_record_type`` is 0 where the record has none (DELETE_TX, DELETE, PREPARE, COMMIT, ROLLBACK);
    ``number_of_records`` is set for PREPARE and COMMIT only; ``extra`` for PREPARE only. ``tag`` is the
    file recordID the record was written with, and ``compact_count`` is the raw signed byte (0 in
    version-1 files).
    """

    type: int
    tag: int
    compact_count: int = 0
    tx_id: int | None = None
    record_id: int | None = None
    user_record_type: int = 0
    body: bytes = b""
    number_of_records: int | None = None
    extra: bytes | None = None

    @property
    def name(self) -> str:
        return RECORD_TYPE_NAMES[self.type]

    def size(self, version: int = FORMAT_VERSION) -> int:
        return fixed_size(self.type, version) + len(self.body) + len(self.extra or b"")

    def encode(self, version: int = FORMAT_VERSION) -> bytes:
        """The record's bytes, checkSize included. Validates what the broker could not have written."""
        t = self.type
        if t not in RECORD_TYPE_NAMES:
            raise FormatError(f"record type {t} is not a journal record type (10..19)")
        if version not in COMPATIBLE_VERSIONS:
            raise FormatError(f"journal format version {version}, expected one of 1, 2")
        parts = [struct.pack(">Bi", t, self.tag)]
        if version >= 2:
            parts.append(struct.pack(">b", self.compact_count))
        if t in TRANSACTIONAL:
            if self.tx_id is None:
                raise FormatError(f"{self.name} record needs a transaction id")
            parts.append(_I64.pack(self.tx_id))
        if t not in WITHOUT_ID:
            if self.record_id is None:
                raise FormatError(f"{self.name} record needs a record id")
            parts.append(_I64.pack(self.record_id))
        if t in WITH_BODY:
            parts.append(_I32.pack(len(self.body)))
            if t in WITH_USER_TYPE:
                parts.append(struct.pack(">B", self.user_record_type & 0xFF))
            parts.append(bytes(self.body))
        elif self.body:
            raise FormatError(f"{self.name} record has no body")
        if t in (PREPARE, COMMIT):
            if self.number_of_records is None:
                raise FormatError(f"{self.name} record needs numberOfRecords")
            parts.append(_I32.pack(self.number_of_records))
        if t == PREPARE:
            # Always written, even when empty: leaving it out (as the Java encoder would for a null
            # transaction-data object) produces a corrupt record (§2.2).
            extra = bytes(self.extra or b"")
            parts.append(_I32.pack(len(extra)))
            parts.append(extra)
        size = sum(len(p) for p in parts) + 4
        parts.append(_I32.pack(size))
        return b"".join(parts)


def decode_record(buf, offset: int, version: int) -> Record:
    """Decode the record at ``offset`` without the tag check. Raises FormatError when the bytes there
    are not a complete, size-consistent record."""
    end = len(buf)
    if not (0 <= offset and offset + 5 <= end) or not (EVENT <= buf[offset] <= ROLLBACK):
        raise FormatError("no journal record type byte (10..19) at this offset", offset=offset)
    scanned = _candidate(buf, offset, end, version)
    if scanned is None or scanned is _MARK:
        raise FormatError("no complete, size-consistent journal record at this offset", offset=offset)
    return record_from_tuple(buf, scanned, version)


def record_from_tuple(buf, rec: tuple, version: int, tag: int | None = None) -> Record:
    """Materialise a scanner tuple into a :class:`Record` (copies the body and extra bytes)."""
    t, off, size, cc, tx_id, rid, utype, body_len, nrec, extra_len = rec
    if tag is None:
        tag = _I32.unpack_from(buf, off + 1)[0]
    body = b""
    extra = None
    if t in WITH_BODY:
        start = off + fixed_size(t, version) - 4
        body = bytes(buf[start:start + body_len])
    if t == PREPARE:
        start = off + fixed_size(t, version) - 4
        extra = bytes(buf[start:start + extra_len])
    return Record(
        type=t,
        tag=tag,
        compact_count=cc,
        tx_id=tx_id if t in TRANSACTIONAL else None,
        record_id=rid if t not in WITHOUT_ID else None,
        user_record_type=utype,
        body=body,
        number_of_records=nrec if t in (PREPARE, COMMIT) else None,
        extra=extra,
    )


class TransactionCounter:
    """The ``numberOfRecords`` of COMMIT and PREPARE records (``JournalTransaction.getCounter/incCounter``,
    §2.3): how many records of the transaction are in the file of the COMMIT/PREPARE. The counter resets
    whenever the transaction touches a file other than the last one, and *reading* it for another file resets
    it too. Files are identified by any key that differs between files (index or fileID)."""

    __slots__ = ("last_file", "counter")

    def __init__(self):
        self.last_file = None
        self.counter = 0

    def counter_for(self, file) -> int:
        if self.last_file != file:
            self.last_file = file
            self.counter = 0
        return self.counter

    def inc(self, file) -> None:
        if self.last_file != file:
            self.last_file = file
            self.counter = 0
        self.counter += 1


def body_offset(rec: tuple, version: int) -> int:
    """Where the body of a scanner tuple starts in its file."""
    t, off, size, cc, tx_id, rid, utype, body_len, nrec, extra_len = rec
    return off + fixed_size(t, version) - 4


# --- scanner ------------------------------------------------------------------------------------------

# A scanner tuple: (type, offset, size, compact_count, tx_id, record_id, user_record_type, body_len,
#                   number_of_records, extra_len)
# Conventions: tx_id = -1 when the type has none, record_id = -1 for PREPARE/COMMIT/ROLLBACK,
# number_of_records = -1 except PREPARE/COMMIT, extra_len = 0 except PREPARE, user_record_type = 0 where
# absent, compact_count = the signed byte (0 in version-1 files). amqtool._native.scan_records returns the
# very same tuples.

_CANDIDATE = re.compile(rb"[\x0a-\x13]")
_MARK = (-1,)  # candidate rejected in a way that makes readJournalFile call markAsDataFile


def _candidate(buf, pos: int, end: int, version: int):
    """Try to read a record at ``pos`` (whose type byte is in 10..19 and whose tag was checked).

    Returns the scanner tuple; ``None`` when the candidate is abandoned quietly; or ``_MARK`` when it is
    abandoned in one of the places where ``readJournalFile`` marks the file as a data file: a missing
    compactCount, txID, record id or body-size field, a record that would pass the end of the file, or a
    checkSize that does not match (§1.5). The split between the two mirrors the Java code branch by branch.
    """
    t = buf[pos]
    p = pos + 5  # type + tag (the caller checked that both are present)
    cc = 0
    if version >= 2:
        if p + 1 > end:
            return _MARK
        cc = buf[p] - 256 if buf[p] > 127 else buf[p]
        p += 1
    tx_id = -1
    if t in TRANSACTIONAL:
        if p + 8 > end:
            return _MARK
        tx_id = _I64.unpack_from(buf, p)[0]
        p += 8
    rid = -1
    if t not in WITHOUT_ID:
        if p + 8 > end:
            return _MARK
        rid = _I64.unpack_from(buf, p)[0]
        p += 8
    body_len = 0
    utype = 0
    if t in WITH_BODY:
        if p + 4 > end:
            return _MARK
        body_len = _I32.unpack_from(buf, p)[0]
        p += 4
        if t != DELETE_TX:
            if p + 1 > end:
                return None
            utype = buf[p]
            p += 1
        if body_len < 0 or p + body_len > end:
            return None
        p += body_len
    nrec = -1
    extra_len = 0
    if t == PREPARE or t == COMMIT:
        if p + 4 > end:
            return None
        nrec = _I32.unpack_from(buf, p)[0]
        p += 4
        if t == PREPARE:
            if p + 4 > end:
                return None
            extra_len = _I32.unpack_from(buf, p)[0]
            p += 4
            if extra_len < 0:
                # Java would go on and fail allocating a negative array; treat it as damage.
                return _MARK
    total = fixed_size(t, version) + body_len + extra_len
    if pos + total > end:
        return _MARK
    if _I32.unpack_from(buf, pos + total - 4)[0] != total:
        return _MARK
    return (t, pos, total, cc, tx_id, rid, utype, body_len, nrec, extra_len)


def scan_records_py(buf, file_tag: int, version: int, check_tag: bool = True, start: int = HEADER_SIZE):
    """Scan one journal file's bytes as ``JournalImpl.readJournalFile`` does.

    Returns ``(records, marked_data_file)``: the accepted records as scanner tuples in file order, and
    whether a rejected candidate made Artemis mark the file as a data file (it then counts as a data file
    even with no record). With ``check_tag=False`` records of earlier uses of the file are accepted too
    (``data print --reclaimed``).
    """
    end = len(buf)
    records = []
    marked = False
    pos = start
    search = _CANDIDATE.search
    unpack_i32 = _I32.unpack_from
    while pos < end:
        m = search(buf, pos)
        if m is None:
            break
        pos = m.start()
        if pos + 5 > end:
            marked = True  # no room for the tag: markAsDataFile
            pos += 1
            continue
        if check_tag and unpack_i32(buf, pos + 1)[0] != file_tag:
            pos += 1  # a record of an earlier use of this file
            continue
        rec = _candidate(buf, pos, end, version)
        if rec is None:
            pos += 1
        elif rec is _MARK:
            marked = True
            pos += 1
        else:
            records.append(rec)
            pos += rec[2]
    return records, marked


def checksize_ends_py(buf, smallest: int) -> list[int]:
    """Every ``end`` in ``smallest .. len(buf)`` at which a record starting at offset 0 of ``buf`` could end:
    its last four bytes, the checkSize (big-endian, as ``JournalImpl.readJournalFile`` reads it), equal to
    ``end``. The reference of the C ``checksize_ends`` (``amqtool.native.checksize_ends``)."""
    return [e for e in range(max(smallest, 4), len(buf) + 1) if int.from_bytes(buf[e - 4:e], "big") == e]
