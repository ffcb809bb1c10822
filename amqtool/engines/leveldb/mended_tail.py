"""What the units of work a damaged record in the last log file drops change in what the broker delivers.

The broker truncates the last log file at the end of its last complete unit of work (``RecordLog.open``:
``verifyAndGetEndOffset`` stops at the first record whose magic or checksum fails), so one damaged record drops
its own unit and every complete unit after it. Those units are on disk, whole but for that record: when the
record can be mended with certainty, the replay of the mended tail over the broker's index tells what the
written units would have given, and the comparison of the two tells whether dropping them changes what is
delivered (a topic message that every subscription acknowledges within the dropped units, its ack positions
moved with it, is delivered to no one either way: lane lv52's n2-kill-rotate, a durable subscription whose
selector matches nothing).

A mending is certain when exactly one candidate gives a record with a good checksum that ends where the next
record (or the file's zero fill, or its end) starts: the magic byte set back to ``'*'`` (no checksum covers
it), one bit of the stored checksum or of the length, or one bit of an entry record's data (CRC-32 detects
every one-bit error, so at most one one-bit change restores it); or, before the break, an 8-byte record one
bit of whose kind byte makes it the UOW_END naming its unit's start (no checksum covers the kind). A crash
leaves none of these: what it cuts is the zero fill, which no one-bit change turns into a record with a good
checksum followed by a complete unit. A DATA record whose data fails its checksum is replayed without
its message (its content is unknown): any entry the mended units deliver from it is missing from the broker's
state anyway, which the comparison counts.
"""
from __future__ import annotations

import copy
import dataclasses
import struct
from collections.abc import Iterator
from itertools import chain

from amqtool.formats.leveldb import recordlog as L
from amqtool.formats.leveldb.codecs import crc32 as _crc32

_ENTRY_KINDS = (L.ADD_ENTRY, L.UPDATE_ENTRY, L.REMOVE_ENTRY, L.ADD_COLLECTION, L.REMOVE_COLLECTION, L.UOW_END)
_MAX_FLIPPED_DATA = 4096  # entry records are tens of bytes; one-bit candidates of larger data are not tried


def _good(buf, off: int) -> bool:
    """Whether a record with a good checksum starts at ``off`` and ends where another record, the zero fill or
    the end of the file starts."""
    if off + L.HEADER_SIZE > len(buf):
        return False
    magic, kind, cs, length = L.HEADER.unpack_from(buf, off)
    end = off + L.HEADER_SIZE + length
    if magic != L.MAGIC or kind not in L.KIND_NAMES or end > len(buf):
        return False
    if _crc32(buf[off + L.HEADER_SIZE:end]) != cs & 0xFFFFFFFF:
        return False
    return end == len(buf) or buf[end] in (L.MAGIC, 0)


def mend(buf, off: int) -> Iterator[tuple[bytearray, int | None]]:
    """The last file's bytes with the damaged record at ``off`` mended, and the offset of a DATA record replayed
    without its message (None if none): each mending that is certain for the record alone (the caller keeps
    the one whose chain goes on)."""
    if off + L.HEADER_SIZE > len(buf):
        return
    b = bytearray(buf)
    magic, kind, _cs, length = L.HEADER.unpack_from(b, off)
    if magic != L.MAGIC:
        b[off] = L.MAGIC
        if _good(b, off):
            yield b, None
        return
    end = off + L.HEADER_SIZE + length
    if kind == L.DATA and end <= len(b) and (end == len(b) or b[end] == 0 or _good(b, end)):
        # its checksum made good, so that the chain goes on: its message is not read (``undecoded``)
        d = bytearray(b)
        d[off + 2:off + 6] = _crc32(d[off + L.HEADER_SIZE:end]).to_bytes(4, "big")
        yield d, off
    found = []
    spots = [(off + 2 + i // 8, 1 << (i % 8)) for i in range(64)]  # the stored checksum and the length
    if kind in _ENTRY_KINDS and length <= _MAX_FLIPPED_DATA:
        spots += [(off + L.HEADER_SIZE + i // 8, 1 << (i % 8)) for i in range(8 * length)]
    for at, bit in spots:
        if at >= len(b):
            continue
        b[at] ^= bit
        if _good(b, off):
            found.append((at, bit))
        b[at] ^= bit
    if len(found) == 1:
        at, bit = found[0]
        b[at] ^= bit
        yield b, None


class _MendedReader:
    """The store's reader, with the last file's bytes replaced by the mended ones."""

    def __init__(self, reader, last, mended):
        self.reader, self.last, self.mended = reader, last, memoryview(mended)

    def __getattr__(self, name):
        return getattr(self.reader, name)

    def read(self, pos: int, n: int):
        if pos < self.last.position:
            return self.reader.read(pos, n)
        off = pos - self.last.position
        return self.mended[off:off + n] if off + n <= len(self.mended) else None

    def buffer(self, f):
        return self.mended if f is self.last else self.reader.buffer(f)


def good_unit_ends(buf, pos: int, end: int | None = None) -> int:
    """UOW_END records with good checksums between ``pos`` and ``end`` (searched byte by byte)."""
    end = len(buf) if end is None else end
    n = 0
    while True:
        pos = buf.find(b"\x2a\xff", pos, end)
        if pos < 0 or pos + L.HEADER_SIZE + 8 > end:
            return n
        _m, _k, cs, length = L.HEADER.unpack_from(buf, pos)
        if length == 8 and _crc32(buf[pos + L.HEADER_SIZE:pos + L.HEADER_SIZE + 8]) == cs & 0xFFFFFFFF:
            n += 1
        pos += 1


def delivered(st) -> dict:
    """What the loaded state ``st`` delivers: each queue's messages (sequence, log position) and the ones its
    cursor never hands out, each durable subscription's pending messages and stranded count, each prepared
    XA transaction's sends and acks."""
    from amqtool.engines.leveldb.queue_cursor import stranded, stranded_pending

    out: dict = {}
    for d in st.destinations.values():
        out[d.qualified] = (tuple((m.seq, m.location) for m in d.messages), stranded(st, d)) \
            if d.kind == "queue" else ()
        for s in d.subscriptions:
            out[(d.qualified, s.client_id, s.name, s.selector)] = (
                tuple((m.seq, m.location) for m in s.pending), stranded_pending(s))
    for t in st.transactions:
        out[("xa", t.xid)] = (tuple(m.location for m, _dest in t.sends), len(t.acks))
    return out


@dataclasses.dataclass
class Mended:
    buf: bytearray  # the last file's bytes, mended
    end: int  # the end of the mended chain's last complete unit (offset in the file)
    units: int  # the complete units it holds past the broker's end
    undecoded: int | None  # offset of a DATA record replayed without its message


def _unit_end_kind(buf, start: int, stop: int, file_position: int) -> bytearray | None:
    """The last file with the first record after ``start`` (before ``stop``) whose kind byte is one bit from a
    UOW_END's, with 8 bytes of data naming the unit's start, made that UOW_END."""
    want = struct.pack(">q", file_position + start)
    for r in L.iter_records(buf, start):
        if isinstance(r, L.Stop) or r.offset >= stop:
            return None
        if r.length == 8 and bin((r.kind ^ L.UOW_END) & 0xFF).count("1") == 1 and bytes(r.data) == want:
            b = bytearray(buf)
            b[r.offset + 1] = L.UOW_END & 0xFF
            return b
    return None


def mend_tail(st) -> Mended | None:
    """The last file mended at its chain's break, when that is certain and the mended chain holds complete
    units past the broker's end and no good UOW_END after its own (None otherwise, or when the replay stopped
    before the break)."""
    if not st.logs or st.replay.stopped or st.last_file_end is None or st.last_file_scan_end is None:
        return None
    last = st.logs[-1]
    if st.replay.limit != last.position + st.last_file_end:
        return None
    buf = st.reader.buffer(last)
    stop = st.last_file_scan_end
    kinded = _unit_end_kind(buf, st.last_file_end, stop, last.position)
    if kinded is None and bytes(buf[stop + 1:stop + 2]) != b"\xff" and not good_unit_ends(buf, stop):
        return None  # no unit end after the break, nor one at it: nothing a mending completes (the file not copied)
    for mended, undecoded in chain(mend(buf, stop), [] if kinded is None else [(kinded, None)]):
        end, _scan_end, _cut = L.complete_end(mended, last.position)
        if end <= st.last_file_end or good_unit_ends(mended, end):
            continue
        ends = [r.offset for r in L.iter_records(memoryview(mended)[:end], st.last_file_end, verify=False)
                if isinstance(r, L.Record) and r.kind == L.UOW_END]
        if good_unit_ends(mended, stop, end) != sum(1 for o in ends if o >= stop):
            continue  # a mended length that swallowed whole units: not the record as written
        return Mended(mended, end, len(ends), undecoded)
    return None


def dropped_units_change(st, m: Mended) -> bool | None:
    """Whether the units of ``m`` (:func:`mend_tail`), which the broker drops, change what it delivers (True or
    False), or None when their replay stops."""
    from amqtool.engines.leveldb.load import _load_collections, _replay

    last = st.logs[-1]
    rep = st.replay
    reader = _MendedReader(st.reader, last, m.buf)
    index, meta = dict(st.index), copy.deepcopy(st.meta)
    skip = () if m.undecoded is None else (last.position + m.undecoded,)
    rep2 = _replay(index, reader, rep.limit, last.position + m.end, meta, undecoded=skip)
    if rep2.stopped:
        return None
    full = dataclasses.replace(
        st, index=index, meta=meta, reader=reader, last_file_end=m.end, replay=dataclasses.replace(
            rep, limit=rep2.limit, end=rep2.end), destinations={}, transactions=[], dropped_subscriptions=[],
        dropped_topics=[], load_problems=[], entries={}, collection_keys=set())
    _load_collections(full)
    return delivered(full) != delivered(st)
