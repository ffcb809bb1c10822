"""LevelDB's table files (``table/format.cc``, ``table/block.cc``), read whole: ``.sst`` (or ``.ldb``).

* footer (last 48 bytes): metaindex handle, index handle (each varint64 offset and size), zero padding to
  40 bytes, magic ``0xdb4775248b80fb57`` (LE);
* each block is followed by a 5-byte trailer: compression type (0 none, 1 snappy) and the masked CRC-32C of
  the block's bytes and that type byte;
* a block is a run of prefix-compressed entries (varint32 shared key bytes, unshared key bytes, value
  length; the unshared key bytes; the value), then the restart array (uint32 LE offsets of entries stored
  with no shared prefix) and its count (uint32 LE);
* the index block maps a separator key to the handle of each data block; keys in data blocks are internal
  keys: the user key then 8 bytes LE of ``sequence << 8 | type`` (1 value, 0 deletion).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterator

from amqtool.errors import FormatError
from amqtool.formats.kahadb.protobuf import read_varint
from amqtool.formats.leveldb.codecs import crc32c, snappy_uncompress, unmask

FOOTER_SIZE = 48
MAGIC = 0xDB4775248B80FB57
TRAILER_SIZE = 5
NO_COMPRESSION, SNAPPY = 0, 1


@dataclass
class BlockHandle:
    offset: int
    size: int


def _handle(mv, pos: int, end: int) -> tuple[BlockHandle, int]:
    off, pos = read_varint(mv, pos, end)
    size, pos = read_varint(mv, pos, end)
    return BlockHandle(off, size), pos


def read_footer(buf) -> tuple[BlockHandle, BlockHandle]:
    n = len(buf)
    if n < FOOTER_SIZE:
        raise FormatError(f"table of {n} bytes is shorter than its 48-byte footer")
    mv = memoryview(buf)
    magic = struct.unpack_from("<Q", mv, n - 8)[0]
    if magic != MAGIC:
        raise FormatError(f"table magic 0x{magic:016x}, expected 0x{MAGIC:016x}", offset=n - 8)
    base = n - FOOTER_SIZE
    meta, pos = _handle(mv, base, n - 8)
    index, _ = _handle(mv, pos, n - 8)
    return meta, index


@dataclass
class BlockInfo:
    offset: int
    size: int
    compression: int


def read_block(buf, h: BlockHandle, *, verify: bool = True) -> tuple[bytes, int]:
    """The (uncompressed) contents of the block at ``h`` and its compression type; FormatError on a bad
    checksum, an unknown compression or a handle outside the file."""
    n = len(buf)
    if h.offset + h.size + TRAILER_SIZE > n:
        raise FormatError(f"block handle {h.offset}+{h.size} runs past the end of the table ({n} bytes)",
                          offset=h.offset)
    raw = bytes(buf[h.offset:h.offset + h.size + 1])
    ctype = raw[-1]
    if verify:
        stored = struct.unpack_from("<I", buf, h.offset + h.size + 1)[0]
        if unmask(stored) != crc32c(raw):
            raise FormatError("block checksum (masked CRC-32C) does not match", offset=h.offset)
    data = raw[:-1]
    if ctype == NO_COMPRESSION:
        return data, ctype
    if ctype == SNAPPY:
        try:
            return snappy_uncompress(data), ctype
        except FormatError as err:
            raise FormatError(f"snappy block: {err.message}", offset=h.offset) from None
    raise FormatError(f"block compression type {ctype} (0 none and 1 snappy are known)", offset=h.offset)


RESTART_OUTSIDE = "a restart point lies outside the block's entries"  # raised after every entry was yielded


def iter_block(data) -> Iterator[tuple[bytes, memoryview]]:
    """(key, value) of every entry of one block, in order; the restart array is checked against the
    entries' positions (each restart point must start an entry with no shared prefix)."""
    mv = memoryview(data)
    n = len(mv)
    if n < 4:
        raise FormatError(f"block of {n} bytes has no restart count")
    nrest = struct.unpack_from("<I", mv, n - 4)[0]
    limit = n - 4 - 4 * nrest
    if nrest == 0 or limit < 0:
        raise FormatError(f"block of {n} bytes cannot hold {nrest} restart points")
    restarts = set(struct.unpack_from(f"<{nrest}I", mv, limit))
    pos = 0
    key = b""
    while pos < limit:
        start = pos
        shared, pos = read_varint(mv, pos, limit)
        unshared, pos = read_varint(mv, pos, limit)
        vlen, pos = read_varint(mv, pos, limit)
        if shared > len(key) or pos + unshared + vlen > limit:
            raise FormatError("block entry runs past its block or shares more than its predecessor",
                              offset=start)
        if start in restarts and shared:
            raise FormatError("a restart point's entry shares a key prefix", offset=start)
        key = key[:shared] + bytes(mv[pos:pos + unshared])
        pos += unshared
        yield key, mv[pos:pos + vlen]
        pos += vlen
    if any(r >= max(limit, 1) for r in restarts):
        raise FormatError(RESTART_OUTSIDE)


@dataclass
class TableEntry:
    user_key: bytes
    sequence: int
    kind: int
    value: bytes
    suspect: bool = False  # read from a block whose checksum fails (or through a damaged index block)


@dataclass
class TableRead:
    entries: list = field(default_factory=list)  # TableEntry
    blocks: list = field(default_factory=list)  # BlockInfo of every data block
    problems: list = field(default_factory=list)  # (offset, message)
    # offset of a data block that does not parse -> (lower bound, exclusive, or None; upper bound, inclusive)
    # of the user keys it held, from the index block's separators
    unread: dict = field(default_factory=dict)
    # offset of a data block whose checksum fails (read anyway) -> the same bounds: any of its keys may have
    # changed, so a version of a key in that range may have taken another key's place or lost its own
    suspect: dict = field(default_factory=dict)


def _checked_block(buf, h: BlockHandle, out: TableRead) -> bytes:
    try:
        return read_block(buf, h)[0]
    except FormatError as err:
        if "checksum" not in err.message:
            raise
        out.problems.append((h.offset, err.message))
        return read_block(buf, h, verify=False)[0]


def split_internal_key(ikey: bytes) -> tuple[bytes, int, int]:
    if len(ikey) < 8:
        raise FormatError(f"internal key of {len(ikey)} bytes is shorter than its 8-byte tag")
    tag = struct.unpack_from("<Q", ikey, len(ikey) - 8)[0]
    return ikey[:-8], tag >> 8, tag & 0xFF


def _before(a: tuple[bytes, int], ukey: bytes, seq: int) -> bool:
    """Whether internal key ``a`` (user key, sequence) sorts before (``ukey``, ``seq``): user keys ascending,
    then sequences descending (LevelDB's InternalKeyComparator)."""
    return a[0] < ukey or (a[0] == ukey and a[1] > seq)


def read_table(buf, key_ok=None) -> TableRead:
    """Every entry of a table file. A block whose checksum fails is reported and still read, as the store reads
    its index (``ReadOptions.verifyChecksums`` off by default); a block that does not parse is reported and
    skipped; a damaged footer is raised: nothing of the table can be found. ``key_ok(user key)``: whether a key
    is one the writer could have written; in a block whose checksum fails, the unread part of a block that
    breaks is bounded only by the keys read before the first that is not (a damaged key may sort anywhere)."""
    out = TableRead()
    _meta, index_h = read_footer(buf)
    index = _checked_block(buf, index_h, out)
    bad_index = bool(out.problems)
    prev = None
    for sep, hv in iter_block(index):
        h, _ = _handle(hv, 0, len(hv))
        low, prev = prev, bytes(sep[:-8])
        read = None  # the last internal key read from this block while the keys keep their order
        ordered = True
        try:
            before = len(out.problems)
            data = _checked_block(buf, h, out)
            suspect = bad_index or len(out.problems) > before
            if suspect:
                out.suspect[h.offset] = (low, prev)
            ctype = buf[h.offset + h.size] if h.offset + h.size < len(buf) else -1
            out.blocks.append(BlockInfo(h.offset, h.size, ctype))
            for ikey, value in iter_block(data):
                ukey, seq, kind = split_internal_key(ikey)
                out.entries.append(TableEntry(ukey, seq, kind, bytes(value), suspect))
                ordered = ordered and (read is None or _before(read, ukey, seq)) and ukey <= prev and \
                    (not suspect or key_ok is None or key_ok(ukey))
                read = (ukey, seq) if ordered else read
        except FormatError as err:
            at = err.offset if err.offset is not None else h.offset
            out.problems.append((at, err.message))
            if err.message != RESTART_OUTSIDE:
                # a block's entries are sorted: what the break left unread follows the last key read in order
                # (the same user key's older versions included), not only the previous block's separator
                out.unread[at] = (low if read is None or (low is not None and read[0] < low) else read[0],
                                  prev)
            # else every entry was read: a forward scan starts at the first restart point and goes entry by
            # entry (LevelDB's Block::Iter); the others only guide its Seek
    return out
