"""LevelDB's log format (``db/log_format.h``), used by its write-ahead ``NNNNNN.log`` files and by the
``MANIFEST-NNNNNN``: 32 KiB blocks of physical records ``crc32c masked (4, LE) | length (2, LE) | type (1) |
data``, type FULL 1, FIRST 2, MIDDLE 3, LAST 4 (a logical record split across blocks); a block's last 6 or
fewer bytes are zero padding. The checksum covers the type byte and the data.

A write-ahead log record is a write batch (``db/write_batch.cc``): sequence (8, LE), count (4, LE), then
``count`` operations: tag 1 (put) varint-length key and value, tag 0 (delete) varint-length key.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterator

from amqtool.errors import FormatError
from amqtool.formats.kahadb.protobuf import read_varint
from amqtool.formats.leveldb.codecs import crc32c, unmask

BLOCK_SIZE = 32768
HEADER_SIZE = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
TYPE_DELETION, TYPE_VALUE = 0, 1


@dataclass
class LogProblem:
    offset: int
    message: str
    data: bytes | None = None  # a FULL record dropped for its checksum: its bytes, for judging what was lost
    more: list = field(default_factory=list)  # (offset, bytes) of the whole records dropped with it
    # the record's data with the one bit its stored checksum names flipped back (see single_bit_fix), if any
    corrected: bytes | None = None


@dataclass
class LogRead:
    records: list = field(default_factory=list)  # (offset of the first fragment, bytes)
    problems: list = field(default_factory=list)  # LogProblem: bad checksums, broken fragment chains
    tail: int | None = None  # offset of a torn last record (a crash while LevelDB appended), if any


def resync(buf, start: int, end: int) -> list:
    """(offset, data) of the FULL records found between ``start`` and ``end`` by their checksums, stepping
    byte by byte past what does not frame (the records a reader no longer finds after damage)."""
    from amqtool.formats.leveldb.codecs import crc32c as _crc, unmask as _unmask

    out = []
    pos = start
    end = min(end, len(buf))
    while pos + HEADER_SIZE <= end:
        masked, length, rtype = struct.unpack_from("<IHB", buf, pos)
        stop = pos + HEADER_SIZE + length
        if rtype == FULL and length and stop <= end and _unmask(masked) == _crc(bytes(buf[pos + 6:stop])):
            out.append((pos, bytes(buf[pos + HEADER_SIZE:stop])))
            pos = stop
        else:
            pos += 1
    return out


def _crc32c_table() -> list[int]:
    out = []
    for i in range(256):
        r = i
        for _ in range(8):
            r = (r >> 1) ^ (0x82F63B78 if r & 1 else 0)
        out.append(r)
    return out


_CRC32C = _crc32c_table()


def single_bit_fix(head: bytes, data: bytes, stored: int) -> bytes | None:
    """``data`` with the one bit flipped back whose change alone explains the difference between the stored
    CRC-32C (of ``head`` + ``data``, unmasked) and the computed one, or None when no single bit of the data
    does. CRC-32C is linear: flipping bit b of the byte k bytes before the end changes the checksum by
    table[1 << b] carried through k zero bytes, and for records shorter than its period no two bits give the
    same change, so the stored checksum names the bit. LevelDB still drops the record; this only tells what
    it held."""
    syndrome = stored ^ crc32c(head + data)
    if not syndrome or not data:
        return None
    t = _CRC32C
    deltas = [t[1 << b] for b in range(8)]
    n = len(data)
    for k in range(n):  # the byte at n - 1 - k
        if syndrome in deltas:
            b = deltas.index(syndrome)
            fixed = bytearray(data)
            fixed[n - 1 - k] ^= 1 << b
            return bytes(fixed)
        deltas = [t[d & 0xFF] ^ (d >> 8) for d in deltas]
    return None


def _drop_block(mv, pos: int, problem: LogProblem) -> int:
    """After a record whose checksum or length is bad, ``log::Reader`` drops the rest of its 32 KiB block
    ("Drop the rest of the buffer since 'length' itself may have been corrupted"; iq80's LogReader alike)
    and goes on with the next block: the whole records found there are the problem's ``more``. Returns
    the next block's offset."""
    block_end = min((pos // BLOCK_SIZE + 1) * BLOCK_SIZE, len(mv))
    problem.more = resync(mv, pos + HEADER_SIZE, block_end)
    return block_end


def read_log(buf) -> LogRead:
    """Every logical record of a LevelDB log file, as ``log::Reader`` with checksums on: a record with a bad
    checksum or a length running past its block is dropped with the rest of its block, and reported (with
    the whole records found there by their checksums); a fragment out of order is dropped and reported; a
    record cut by the end of the file is a torn tail (LevelDB drops it silently)."""
    mv = memoryview(buf)
    n = len(mv)
    out = LogRead()
    pending: list = []
    pending_at = None
    pos = 0
    while pos < n:
        left = BLOCK_SIZE - pos % BLOCK_SIZE
        if left < HEADER_SIZE:
            pos += left
            continue
        if pos + HEADER_SIZE > n:
            if any(mv[pos:n]):
                out.tail = pos
            break
        masked, length, rtype = struct.unpack_from("<IHB", mv, pos)
        if masked == 0 and length == 0 and rtype == 0:
            # zero fill (preallocated or mmap-extended file): LevelDB skips the rest of the block
            pos += left
            continue
        if HEADER_SIZE + length > left or pos + HEADER_SIZE + length > n:
            if pos + HEADER_SIZE + length > n:
                out.tail = pos
                break
            out.problems.append(LogProblem(pos, f"record of {length} bytes runs past its 32 KiB block"))
            pending, pending_at = [], None
            pos = _drop_block(mv, pos, out.problems[-1])
            continue
        data = mv[pos + HEADER_SIZE:pos + HEADER_SIZE + length]
        if unmask(masked) != crc32c(bytes(mv[pos + 6:pos + 7]) + bytes(data)):
            out.problems.append(LogProblem(pos, "record checksum (masked CRC-32C) does not match",
                                           bytes(data), corrected=single_bit_fix(
                                               bytes(mv[pos + 6:pos + 7]), bytes(data), unmask(masked))))
            pending, pending_at = [], None
            pos = _drop_block(mv, pos, out.problems[-1])
            continue
        if rtype == FULL:
            if pending:
                out.problems.append(LogProblem(pending_at, "a split record is not finished"))
            out.records.append((pos, bytes(data)))
            pending, pending_at = [], None
        elif rtype == FIRST:
            pending, pending_at = [bytes(data)], pos
        elif rtype in (MIDDLE, LAST):
            if not pending:
                out.problems.append(LogProblem(pos, "a record fragment without its first part"))
            else:
                pending.append(bytes(data))
                if rtype == LAST:
                    out.records.append((pending_at, b"".join(pending)))
                    pending, pending_at = [], None
        else:
            out.problems.append(LogProblem(pos, f"unknown record type {rtype}"))
        pos += HEADER_SIZE + length
    if pending and out.tail is None:
        out.tail = pending_at
    return out


@dataclass(slots=True)
class BatchOp:
    sequence: int
    kind: int  # TYPE_VALUE or TYPE_DELETION
    key: bytes
    value: bytes | None


def iter_batch(data) -> Iterator[BatchOp]:
    """The operations of one write batch, numbered from its sequence."""
    mv = data if isinstance(data, bytes) else bytes(data)
    n = len(mv)
    if n < 12:
        raise FormatError(f"write batch of {n} bytes, shorter than its 12-byte header")
    seq, count = struct.unpack_from("<QI", mv, 0)
    pos = 12
    for i in range(count):
        if pos >= n:
            raise FormatError(f"write batch says {count} operations, holds {i}", offset=pos)
        tag = mv[pos]
        pos += 1
        if pos < n and mv[pos] < 0x80:  # one-byte lengths: the common case
            klen = mv[pos]
            pos += 1
        else:
            klen, pos = read_varint(mv, pos, n)
        if pos + klen > n:
            raise FormatError("write batch key runs past the end", offset=pos)
        key = mv[pos:pos + klen]
        pos += klen
        if tag == TYPE_VALUE:
            if pos < n and mv[pos] < 0x80:
                vlen = mv[pos]
                pos += 1
            else:
                vlen, pos = read_varint(mv, pos, n)
            if pos + vlen > n:
                raise FormatError("write batch value runs past the end", offset=pos)
            yield BatchOp(seq + i, TYPE_VALUE, key, mv[pos:pos + vlen])
            pos += vlen
        elif tag == TYPE_DELETION:
            yield BatchOp(seq + i, TYPE_DELETION, key, None)
        else:
            raise FormatError(f"write batch operation tag {tag}", offset=pos - 1)
    if pos != n:
        raise FormatError(f"write batch: {n - pos} bytes after its {count} operations", offset=pos)
