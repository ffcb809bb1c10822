"""Journal framing of ``db-N.log`` files: batch control records, user records, the end-of-data marker.

Layout (kahadb-format.md §2): every write is a *batch*: a 28-byte control record
(``00 00 00 1C 02 "WRITE BATCH"``, int32 batchSize, int64 Adler-32 of the batchSize bytes that follow),
then batchSize bytes of user records (int32 length incl. the 5-byte header, type 1, payload), then the
5-byte end-of-data marker ``-qMa4`` that the next batch overwrites. Preallocated space after the marker
reads as zeros (sparse file) or repeats the marker every MiB (chunked zeros).

:func:`scan_file` reproduces the broker's start-up batch scan (``Journal.recoveryCheck``): it walks
batches from offset 0, checks each checksum, and reports corrupted ranges exactly as the broker records them
(``[first, last]`` inclusive, resuming at the next batch header). Everything here works on any bytes-like
object (``bytes``, ``mmap``), never opens files and never raises anything but :class:`FormatError`.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Iterator, Union

from amqtool.errors import FormatError

RECORD_HEAD_SPACE = 5
USER_RECORD_TYPE = 1
BATCH_CONTROL_RECORD_TYPE = 2
BATCH_CONTROL_RECORD_MAGIC = b"WRITE BATCH"
BATCH_CONTROL_RECORD_SIZE = 28
BATCH_CONTROL_RECORD_HEADER = b"\x00\x00\x00\x1c\x02" + BATCH_CONTROL_RECORD_MAGIC
EOF_RECORD = b"-qMa4"
ZERO_HEADER = b"\x00" * 5
# Journal.checkBatchRecord: a size above this is "corrupt (-2)".
MAX_BATCH_SIZE = 2**31 - 1 - 33

_BATCH = struct.Struct(">iq")  # batchSize, checksum (at offset 16 of the control record)
_REC = struct.Struct(">iB")  # length, type


@dataclass(frozen=True)
class Batch:
    """One batch: its control record at ``offset`` and ``size`` bytes of user records after it."""

    offset: int
    size: int
    checksum: int  # as stored; 0 = not computed by the writer

    @property
    def data_offset(self) -> int:
        return self.offset + BATCH_CONTROL_RECORD_SIZE

    @property
    def end(self) -> int:
        return self.offset + BATCH_CONTROL_RECORD_SIZE + self.size


@dataclass(frozen=True)
class CorruptRange:
    """A range the broker's scan would mark corrupted: ``first..last`` inclusive (Journal.recoveryCheck).

    ``reason`` is one of ``bad-header`` (-1), ``bad-size`` (-2), ``truncated`` (-3), ``checksum`` (-4);
    ``to_eof`` tells that no later batch header was found (the range runs to the end of the file).
    For ``checksum`` the stored and computed values are kept.
    """

    first: int
    last: int
    reason: str
    to_eof: bool
    stored: int | None = None
    computed: int | None = None


@dataclass(frozen=True)
class End:
    """The logical end of the data in a file and how it was recognised.

    ``how``: ``eof-marker`` (``-qMa4``), ``zero-batch`` (a batch of size 0), ``zeros`` (an all-zero
    header, e.g. a hole), ``end-of-file`` (the physical end, no marker: truncated or caller-buffered).
    """

    offset: int
    how: str


@dataclass(frozen=True)
class UserRecord:
    """One user record: ``offset`` of its 5-byte header, total ``length``, the command ``payload``."""

    offset: int
    length: int
    payload: memoryview


ScanEvent = Union[Batch, CorruptRange, End]


def _find_header(buf, start: int) -> int:
    """Next batch control header at or after ``start``, or -1."""
    if isinstance(buf, (bytes, bytearray)):
        return buf.find(BATCH_CONTROL_RECORD_HEADER, start)
    return buf.find(BATCH_CONTROL_RECORD_HEADER, start)  # mmap.find has the same contract


def scan_file(buf, *, checksums: bool = True) -> Iterator[ScanEvent]:
    """Walk the batches of one journal file (kahadb-format.md §3.1).

    Yields :class:`Batch` for every good batch, :class:`CorruptRange` for every bad range, and exactly one
    :class:`End` last (the logical end, where the broker would append next). With ``checksums`` each
    stored non-zero checksum is compared with ``zlib.adler32`` of the batch data.
    """
    n = len(buf)
    offset = 0
    mv = memoryview(buf)
    try:
        while True:
            if offset >= n:
                yield End(offset, "end-of-file")
                return
            head5 = bytes(mv[offset:offset + 5])
            if head5 == EOF_RECORD and offset + 5 <= n:
                yield End(offset, "eof-marker")
                return
            reason = None
            stored = computed = None
            size = 0
            if offset + BATCH_CONTROL_RECORD_SIZE > n:
                reason = "truncated" if bytes(mv[offset:n]) == BATCH_CONTROL_RECORD_HEADER[:n - offset] else "bad-header"
            elif bytes(mv[offset:offset + 16]) != BATCH_CONTROL_RECORD_HEADER:
                reason = "bad-header"
            else:
                size, stored = _BATCH.unpack_from(mv, offset + 16)
                if size < 0 or size > MAX_BATCH_SIZE:
                    reason = "bad-size"
                elif offset + BATCH_CONTROL_RECORD_SIZE + size > n:
                    reason = "truncated"
                elif checksums and stored > 0:
                    start = offset + BATCH_CONTROL_RECORD_SIZE
                    computed = zlib.adler32(mv[start:start + size])
                    if computed != stored:
                        reason = "checksum"
            if reason is None:
                if size == 0:
                    yield End(offset, "zero-batch")
                    return
                yield Batch(offset, size, stored)
                offset += BATCH_CONTROL_RECORD_SIZE + size
                continue
            if reason == "bad-header" and head5 == ZERO_HEADER:
                # The sequential reader treats a zero header as the end of the data (a hole or zero fill).
                # Only call it the end when nothing follows; a later batch makes it a corrupted range.
                nxt = _find_header(buf, offset + 1)
                if nxt < 0:
                    yield End(offset, "zeros")
                    return
                yield CorruptRange(offset, nxt - 1, reason, False)
                offset = nxt
                continue
            nxt = _find_header(buf, offset + 1)
            if nxt < 0:
                yield CorruptRange(offset, max(n - 1, offset), reason, True, stored, computed)
                # The logical end stays at the start of the bad range: new writes overwrite it.
                yield End(offset, "corrupt-tail")
                return
            yield CorruptRange(offset, nxt - 1, reason, False, stored, computed)
            offset = nxt
    finally:
        mv.release()


# Why the user records of a batch do not tile it (codes shared with native/kahadb_scan.c).
TILE_HEADER_CROSSES, TILE_BAD_TYPE, TILE_BAD_LENGTH = 1, 2, 3


def tiling_error(code: int, pos: int, batch_offset: int, batch_end: int, value: int) -> FormatError:
    """The FormatError for a record at ``pos`` that breaks the tiling of the batch at ``batch_offset``;
    ``value``: bytes left (header crosses the end), the record type, or the record length."""
    if code == TILE_HEADER_CROSSES:
        msg = f"record header crosses the end of its batch (batch at {batch_offset}, {value} bytes left)"
    elif code == TILE_BAD_TYPE:
        msg = f"record type {value} inside a batch, expected {USER_RECORD_TYPE}"
    else:
        msg = f"record length {value} does not fit its batch (batch at {batch_offset} ends at {batch_end})"
    return FormatError(msg, offset=pos)


def iter_batch_records(buf, batch: Batch) -> Iterator[UserRecord]:
    """The user records of one good batch. Raises FormatError when they do not tile the batch exactly
    (each length >= 5, type 1, sum of lengths == batchSize)."""
    pos = batch.data_offset
    end = batch.end
    mv = memoryview(buf)
    while pos < end:
        if pos + RECORD_HEAD_SPACE > end:
            raise tiling_error(TILE_HEADER_CROSSES, pos, batch.offset, end, end - pos)
        length, rtype = _REC.unpack_from(mv, pos)
        if rtype != USER_RECORD_TYPE:
            raise tiling_error(TILE_BAD_TYPE, pos, batch.offset, end, rtype)
        if length < RECORD_HEAD_SPACE or pos + length > end:
            raise tiling_error(TILE_BAD_LENGTH, pos, batch.offset, end, length)
        yield UserRecord(pos, length, mv[pos + RECORD_HEAD_SPACE:pos + length])
        pos += length


def encode_batch(payloads: list[bytes], *, checksum: bool = True) -> bytes:
    """One batch holding ``payloads`` as user records, followed by the end-of-data marker (for tests and
    benchmarks: the same bytes DataFileAppender writes)."""
    body = b"".join(struct.pack(">iB", len(p) + RECORD_HEAD_SPACE, USER_RECORD_TYPE) + p for p in payloads)
    ck = zlib.adler32(body) if checksum else 0
    return BATCH_CONTROL_RECORD_HEADER + _BATCH.pack(len(body), ck) + body + EOF_RECORD
