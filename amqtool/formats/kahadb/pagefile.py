"""The KahaDB index: ``db.data`` (PageFile), page 0 metadata, B-tree/list nodes, ``db.redo``, ``lock``.

kahadb-format.md §5: two 2048-byte Java ``Properties`` copies, then pages of ``pageSize`` bytes at
``4096 + id * pageSize``, each with a 21-byte header (type FREE/PART/END, txId, next, checksum 0). A logical
record is a page chain. Page 0 holds ``MessageDatabase.Metadata`` (state, destinations B-tree root,
lastUpdate, first in-progress tx location, producer-audit location, version, ack-map location,
openwireVersion). Everything is big-endian. All functions take a bytes-like buffer (bytes or mmap).
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Callable, Iterator

from amqtool.errors import FormatError
from amqtool.formats.kahadb.commands import Location

HEADER_SIZE = 4096
COPY_SIZE = 2048
PAGE_HEADER_SIZE = 21
PAGE_FREE, PAGE_PART, PAGE_END = 0, 1, 2
MAX_CHAIN_PAGES = 1 << 16

_PH = struct.Struct(">Bqqi")


@dataclass
class PageFileHeader:
    """The chosen copy of the page-file header properties (PageFile.loadMetaData rules)."""

    properties: dict
    page_size: int
    clean_shutdown: bool
    last_tx_id: int | None
    meta_data_tx_id: int | None
    free_pages: int | None
    copies_agree: bool


def _parse_properties(raw: bytes) -> dict | None:
    try:
        text = raw.decode("iso-8859-1")
    except Exception:  # noqa: BLE001 - latin-1 decodes any byte
        return None
    props = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("!"):
            continue
        if "=" in line:
            k, v = line.split("=", 1)
            props[k.strip()] = v.strip()
    return props if props.get("fileType") else None


def _int_or_none(v) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def decode_header(buf) -> PageFileHeader:
    if len(buf) < HEADER_SIZE:
        raise FormatError(f"db.data is {len(buf)} bytes, shorter than its {HEADER_SIZE}-byte header")
    p1 = _parse_properties(bytes(buf[0:COPY_SIZE]))
    p2 = _parse_properties(bytes(buf[COPY_SIZE:HEADER_SIZE]))
    if p1 is None and p2 is None:
        raise FormatError("db.data header holds no readable PageFile properties (not a KahaDB index?)", offset=0)
    t1 = _int_or_none(p1.get("metaDataTxId")) if p1 else None
    t2 = _int_or_none(p2.get("metaDataTxId")) if p2 else None
    # PageFile.loadMetaData: copy 1 unless unreadable/negative or the two txIds differ.
    if p1 is None or t1 is None or t1 < 0:
        chosen = p2
    elif p2 is not None and t2 is not None and t1 != t2:
        chosen = p2
    else:
        chosen = p1
    if chosen is None:
        chosen = p1
    if chosen.get("fileType") != "org.apache.activemq.store.kahadb.disk.page.PageFile":
        raise FormatError(f"db.data fileType is {chosen.get('fileType')!r}, not a KahaDB PageFile", offset=0)
    page_size = _int_or_none(chosen.get("pageSize"))
    if page_size is None or page_size <= PAGE_HEADER_SIZE or page_size > 1 << 24:
        raise FormatError(f"db.data pageSize {chosen.get('pageSize')!r} is not usable", offset=0)
    return PageFileHeader(
        properties=chosen,
        page_size=page_size,
        clean_shutdown=chosen.get("cleanShutdown") == "true",
        last_tx_id=_int_or_none(chosen.get("lastTxId")),
        meta_data_tx_id=_int_or_none(chosen.get("metaDataTxId")),
        free_pages=_int_or_none(chosen.get("freePages")),
        copies_agree=p1 == p2,
    )


def page_count(buf, page_size: int) -> int:
    return max(0, (len(buf) - HEADER_SIZE) // page_size)


def read_chain(buf, page_size: int, page_id: int) -> bytes:
    """The logical record starting at ``page_id`` (PART pages, then an END page)."""
    out = []
    n = page_count(buf, page_size)
    seen = 0
    pid = page_id
    while True:
        if not 0 <= pid < n:
            raise FormatError(f"page chain from page {page_id} reaches page {pid}, outside the {n} pages")
        off = HEADER_SIZE + pid * page_size
        ptype, _tx, nxt, _ck = _PH.unpack_from(buf, off)
        if ptype == PAGE_END:
            if not PAGE_HEADER_SIZE <= nxt <= page_size:
                raise FormatError(f"END page {pid} has data end {nxt}, outside the page", offset=off)
            out.append(bytes(buf[off + PAGE_HEADER_SIZE:off + nxt]))
            return b"".join(out)
        if ptype == PAGE_PART:
            out.append(bytes(buf[off + PAGE_HEADER_SIZE:off + page_size]))
            pid = nxt
            seen += 1
            if seen > MAX_CHAIN_PAGES:
                raise FormatError(f"page chain from page {page_id} is longer than {MAX_CHAIN_PAGES} pages")
            continue
        if ptype == PAGE_FREE:
            raise FormatError(f"page chain from page {page_id}: page {pid} is marked free", offset=off)
        raise FormatError(f"page {pid} has unknown type {ptype}", offset=off)


class _R:
    __slots__ = ("b", "p")

    def __init__(self, b: bytes):
        self.b = b
        self.p = 0

    def need(self, n):
        if self.p + n > len(self.b):
            raise FormatError(f"index record ends early (needs {n} bytes at {self.p} of {len(self.b)})")

    def u8(self):
        self.need(1)
        v = self.b[self.p]
        self.p += 1
        return v

    def i16(self):
        self.need(2)
        v = struct.unpack_from(">h", self.b, self.p)[0]
        self.p += 2
        return v

    def i32(self):
        self.need(4)
        v = struct.unpack_from(">i", self.b, self.p)[0]
        self.p += 4
        return v

    def i64(self):
        self.need(8)
        v = struct.unpack_from(">q", self.b, self.p)[0]
        self.p += 8
        return v

    def utf(self):
        self.need(2)
        n = struct.unpack_from(">H", self.b, self.p)[0]
        self.p += 2
        self.need(n)
        s = self.b[self.p:self.p + n]
        self.p += n
        from amqtool.formats.kahadb.openwire import decode_modified_utf8

        return decode_modified_utf8(s)

    def location(self) -> Location:
        return Location(self.i32(), self.i32())

    def opt_location(self) -> Location | None:
        return self.location() if self.u8() else None

    @property
    def left(self):
        return len(self.b) - self.p


@dataclass
class Metadata:
    """Page 0 (MessageDatabase.Metadata)."""

    state: int
    destinations_page: int
    last_update: Location | None
    first_in_progress_tx: Location | None
    producer_audit: Location | None
    version: int
    ack_map: Location | None
    openwire_version: int


def decode_metadata(payload: bytes) -> Metadata:
    r = _R(payload)
    state = r.i32()
    dest = r.i64()
    last = r.opt_location()
    first_tx = r.opt_location()
    audit = r.opt_location() if r.left else None
    version = r.i32() if r.left >= 4 else 1
    ack = r.opt_location() if version >= 5 and r.left else None
    ow = r.i32() if r.left >= 4 else 6
    if r.left:
        raise FormatError(f"page 0 metadata: {r.left} bytes left after the last field")
    if state not in (1, 2):
        raise FormatError(f"page 0 metadata: state {state}, expected 1 (closed) or 2 (open)")
    return Metadata(state, dest, last, first_tx, audit, version, ack, ow)


@dataclass
class StoredDestination:
    key: str
    order_index: int
    location_index: int
    message_id_index: int
    is_topic: bool
    subscriptions: int | None = None
    subscription_acks: int | None = None
    ack_positions: int | None = None
    sub_locations: int | None = None
    low_priority_index: int | None = None
    high_priority_index: int | None = None
    statistics_page: int | None = None


def _stored_destination(key: str, r: _R, version: int) -> StoredDestination:
    sd = StoredDestination(key, r.i64(), r.i64(), r.i64(), bool(r.u8()))
    if sd.is_topic:
        sd.subscriptions, sd.subscription_acks = r.i64(), r.i64()
        sd.ack_positions, sd.sub_locations = r.i64(), r.i64()
    if version >= 2:
        sd.low_priority_index, sd.high_priority_index = r.i64(), r.i64()
    if version >= 7:
        sd.statistics_page = r.i64()
    return sd


def iter_btree(buf, page_size: int, root: int, key: Callable[[_R], object],
               value: Callable[[_R], object]) -> Iterator[tuple]:
    """All (key, value) pairs of a B-tree (BTreeNode: int16 n, keys, bool branch, children | values+next)."""
    stack = [root]
    seen = set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            raise FormatError(f"B-tree from page {root} revisits page {pid}")
        seen.add(pid)
        r = _R(read_chain(buf, page_size, pid))
        n = r.i16()
        if n < 0:
            raise FormatError(f"B-tree node page {pid} has {n} keys")
        keys = [key(r) for _ in range(n)]
        if r.u8():
            children = [r.i64() for _ in range(n + 1)]
            stack.extend(reversed(children))
        else:
            for k in keys:
                yield k, value(r)
            r.i64()  # next leaf


def iter_list(buf, page_size: int, head: int, key: Callable[[_R], object],
              value: Callable[[_R], object]) -> Iterator[tuple]:
    """All (key, value) pairs of a ListIndex (ListNode: int64 next, int16 count, pairs)."""
    pid = head
    seen = set()
    while pid != -1:
        if pid in seen:
            raise FormatError(f"list from page {head} revisits page {pid}")
        seen.add(pid)
        r = _R(read_chain(buf, page_size, pid))
        nxt = r.i64()
        n = r.i16()
        for _ in range(n):
            yield key(r), value(r)
        pid = nxt


@dataclass
class IndexView:
    """What verify and pins need from db.data: page 0 and, per destination, the referenced journal files."""

    header: PageFileHeader
    metadata: Metadata
    destinations: dict = field(default_factory=dict)  # key -> StoredDestination
    location_files: dict = field(default_factory=dict)  # key -> {file id: (count, bytes, last record offset)}
    message_counts: dict = field(default_factory=dict)  # key -> number of locationIndex entries
    sub_locations: dict = field(default_factory=dict)  # key -> {subKey: Location}


def decode_index(buf) -> IndexView:
    """Read db.data: header, page 0, the destinations B-tree, every locationIndex and subLocations."""
    header = decode_header(buf)
    ps = header.page_size
    if page_count(buf, ps) < 1:
        raise FormatError("db.data has no page 0")
    meta = decode_metadata(read_chain(buf, ps, 0))
    view = IndexView(header, meta)
    v = meta.version
    loc_size = 12 if v >= 6 else 8  # LocationSizeMarshaller from version 6 on

    def loc_key(r: _R):
        loc = r.location()
        size = r.i32() if loc_size == 12 else 0
        return loc.log_id, loc.offset, size

    for key, sd in _iter_destinations(buf, ps, meta.destinations_page, v):
        view.destinations[key] = sd
        files: dict[int, list] = {}
        count = 0
        for (fid, off, size), _seq in iter_btree(buf, ps, sd.location_index, loc_key, lambda r: r.i64()):
            agg = files.setdefault(fid, [0, 0, 0])
            agg[0] += 1
            agg[1] += size
            agg[2] = max(agg[2], off)
            count += 1
        view.location_files[key] = {f: tuple(a) for f, a in files.items()}
        view.message_counts[key] = count
        if sd.is_topic and sd.sub_locations is not None:
            view.sub_locations[key] = dict(iter_list(buf, ps, sd.sub_locations, lambda r: r.utf(),
                                                     lambda r: r.location()))
    return view


def _iter_destinations(buf, ps, root, version):
    stack = [root]
    seen = set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            raise FormatError(f"destinations B-tree revisits page {pid}")
        seen.add(pid)
        r = _R(read_chain(buf, ps, pid))
        n = r.i16()
        if n < 0:
            raise FormatError(f"destinations B-tree node page {pid} has {n} keys")
        keys = [r.utf() for _ in range(n)]
        if r.u8():
            stack.extend(reversed([r.i64() for _ in range(n + 1)]))
        else:
            for k in keys:
                yield k, _stored_destination(k, r, version)
            r.i64()


@dataclass
class RedoHeader:
    next_tx_id: int
    checksum: int
    page_count: int
    checksum_ok: bool | None  # None when the file is too short to hold the entries


def decode_redo(buf, page_size: int = 4096) -> RedoHeader:
    """db.redo: int64 nextTxId, int64 Adler-32 chained over the page images, int32 count; entries of
    (int64 page id + page image) from offset 4096."""
    if len(buf) < 20:
        raise FormatError(f"db.redo is {len(buf)} bytes, shorter than its header")
    nxt, ck, count = struct.unpack_from(">qqi", buf, 0)
    if count < 0:
        raise FormatError(f"db.redo page count {count} is negative", offset=16)
    need = HEADER_SIZE + count * (8 + page_size)
    ok = None
    if len(buf) >= need:
        a = 1
        for i in range(count):
            off = HEADER_SIZE + i * (8 + page_size) + 8
            a = zlib.adler32(memoryview(buf)[off:off + page_size], a)
        ok = a == ck
    return RedoHeader(nxt, ck, count, ok)


def decode_lock(buf) -> int | None:
    """The lock file's 8-byte big-endian ``currentTimeMillis`` written by LockFile.lock (None if absent)."""
    if len(buf) < 8:
        return None
    return struct.unpack_from(">q", buf, 0)[0]


# -- per-destination index contents (what the broker delivers from, kahadb-format.md §5.4) -------------------

def message_keys(r: _R) -> tuple:
    """MessageKeys (MessageDatabase.MessageKeysMarshaller): UTF messageId + Location with size (12 bytes).
    Returns ``(message_id, file_id, offset, size)``; size includes the record's 5-byte header."""
    mid = r.utf()
    return mid, r.i32(), r.i32(), r.i32()


def sequences(buf, page_size: int, sd: StoredDestination, version: int) -> tuple[dict, dict]:
    """``({message id: seq}, {(file id, offset): seq})``: the messageIdIndex and the locationIndex of a
    destination, the two other indexes that name each order-index entry's sequence id."""
    def loc_key(r: _R):
        loc = r.location()
        if version >= 6:
            r.i32()  # LocationSizeMarshaller's size
        return loc.log_id, loc.offset

    by_id = dict(iter_btree(buf, page_size, sd.message_id_index, lambda r: r.utf(), lambda r: r.i64()))
    by_location = dict(iter_btree(buf, page_size, sd.location_index, loc_key, lambda r: r.i64()))
    return by_id, by_location


def sequence_set(r: _R) -> list[tuple[int, int]]:
    """SequenceSet (SequenceSet.Marshaller): int32 count, then per range bool isRange + int64 first, int64 last,
    or one int64 value. Inclusive ``(first, last)`` ranges."""
    n = r.i32()
    if n < 0:
        raise FormatError(f"sequence set with {n} ranges")
    out = []
    for _ in range(n):
        if r.u8():
            out.append((r.i64(), r.i64()))
        else:
            v = r.i64()
            out.append((v, v))
    return out


def last_ack(version: int) -> Callable[[_R], int]:
    """LastAck (LastAckMarshaller): int64 lastAckedSequence, then one priority byte from version 3 on."""
    def read(r: _R) -> int:
        seq = r.i64()
        if version >= 3:
            r.u8()
        return seq
    return read


def iter_order_index(buf, page_size: int, sd: StoredDestination) -> Iterator[tuple]:
    """Every ``(seq, message_id, file_id, offset, size)`` of the three order-index priority B-trees."""
    for root in (sd.order_index, sd.low_priority_index, sd.high_priority_index):
        if root is None:
            continue
        for seq, keys in iter_btree(buf, page_size, root, lambda r: r.i64(), message_keys):
            yield (seq,) + keys


def subscription_cursors(buf, page_size: int, sd: StoredDestination, version: int) -> dict:
    """subKey -> (lastAckedSequence, ackPositions ranges or None) of a topic (subscriptionAcks, ackPositions)."""
    acks = dict(iter_btree(buf, page_size, sd.subscription_acks, lambda r: r.utf(), last_ack(version)))
    positions = dict(iter_list(buf, page_size, sd.ack_positions, lambda r: r.utf(), sequence_set)) \
        if sd.ack_positions is not None else {}
    return {k: (v, positions.get(k)) for k, v in acks.items()}


def subscription_infos(buf, page_size: int, sd: StoredDestination) -> dict:
    """subKey -> the stored ``SubscriptionInfo`` bytes (None when the record holds none) of a topic's
    subscriptions B-tree, whose values are KahaSubscriptionCommands (``KahaSubscriptionCommandMarshaller``:
    ``mergeFramed``, a varint length and the protobuf message)."""
    from amqtool.formats.kahadb.commands import EntryType, decode_command
    from amqtool.formats.kahadb.protobuf import read_varint

    def framed(r: _R) -> bytes:
        p0 = r.p
        n, start = read_varint(r.b, r.p, len(r.b))
        r.p = start
        r.need(n)
        r.p += n
        # decode_command reads a record's payload: the type byte, then the framed message
        return bytes([int(EntryType.SUBSCRIPTION)]) + bytes(r.b[p0:r.p])

    out = {}
    if sd.subscriptions is None:
        return out
    for key, payload in iter_btree(buf, page_size, sd.subscriptions, lambda r: r.utf(), framed):
        info = decode_command(payload).subscription_info
        out[key] = bytes(info) if info is not None else None
    return out
