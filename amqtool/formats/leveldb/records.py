"""The payloads of the LevelDB store's log records and index values (``records.proto`` of
activemq-leveldb-store, written unframed by hawtbuf), and the index's key encodings (``LevelDBClient``).

hawtbuf's generated ``parseUnframed`` is lazy: the bytes are parsed by ``mergeUnframed`` on the first getter,
which reads tags until the end (or an end-group tag), keeps the last value of each known field and skips the
others by wire type; a field running past the end throws. :func:`hawtbuf_fields` mirrors that, so the
replay can fail exactly where the broker's does (``REMOVE_COLLECTION`` records carry a bare varint, which
that parser reads as a tag: see :func:`collection_key_of_remove`).

Index keys::

    'c' + int64 BE collection key                  -> CollectionRecord (1 queue, 2 topic, 3 transaction,
                                                      4 subscription)
    'e' + int64 BE collection key + entry key      -> EntryRecord (entry key: int64 BE sequence, or 'p',
                                                      a subscription's ack position in value_location)
    ':dirty' ':log-refs' ':logs' ':producer_ids' ':collection-meta'   (Java-serialized counters)
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from amqtool.errors import FormatError
from amqtool.formats.kahadb.protobuf import read_varint, to_int32, to_int64

QUEUE, TOPIC, TRANSACTION, SUBSCRIPTION = 1, 2, 3, 4
COLLECTION_TYPES = {QUEUE: "queue", TOPIC: "topic", TRANSACTION: "transaction", SUBSCRIPTION: "subscription"}
COLLECTION_PREFIX = b"c"
ENTRY_PREFIX = b"e"
ACK_POSITION = b"p"
DIRTY_KEY = b":dirty"

_Q = struct.Struct(">q")


def hawtbuf_fields(data, known: dict[int, str]) -> dict[int, object]:
    """``Bean.mergeUnframed``: {field number: value} for the fields in ``known`` (``"varint"`` or ``"bytes"``),
    the last occurrence winning; other fields skipped by wire type. Raises FormatError where hawtbuf throws
    (a field running past the end, an unknown wire type, a group without its end)."""
    mv = memoryview(data)
    end = len(mv)
    pos = 0
    out: dict[int, object] = {}
    depth = 0
    while pos < end:
        tag, pos = read_varint(mv, pos, end)
        wt = tag & 7
        if wt == 4:  # an end-group tag ends the message (or the group being skipped)
            if depth == 0:
                return out
            depth -= 1
            continue
        if tag == 0:
            raise FormatError("protobuf tag 0", offset=pos)
        field = tag >> 3
        if wt == 0:
            v, pos = read_varint(mv, pos, end)
            if depth == 0 and known.get(field) == "varint":
                out[field] = v
        elif wt == 1:
            if pos + 8 > end:
                raise FormatError("fixed64 field runs past the end of its record", offset=pos)
            pos += 8
        elif wt == 2:
            n, pos = read_varint(mv, pos, end)
            if pos + n > end:
                raise FormatError(f"field {field} of {n} bytes runs past the end of its record", offset=pos)
            if depth == 0 and known.get(field) == "bytes":
                out[field] = bytes(mv[pos:pos + n])
            pos += n
        elif wt == 3:
            depth += 1
        elif wt == 5:
            if pos + 4 > end:
                raise FormatError("fixed32 field runs past the end of its record", offset=pos)
            pos += 4
        else:
            raise FormatError(f"protobuf wire type {wt} (field {field})", offset=pos)
    if depth:
        raise FormatError("protobuf group without its end tag", offset=pos)
    return out


@dataclass
class CollectionRecord:
    key: int
    type: int
    meta: bytes | None

    @property
    def type_name(self) -> str:
        return COLLECTION_TYPES.get(self.type, f"type-{self.type}")


def decode_collection(data) -> CollectionRecord:
    f = hawtbuf_fields(data, {1: "varint", 2: "varint", 3: "bytes"})
    return CollectionRecord(to_int64(f.get(1, 0)), to_int32(f.get(2, 0)), f.get(3))


@dataclass
class EntryRecord:
    collection_key: int | None
    entry_key: bytes | None
    value_location: int | None
    value_length: int | None
    value: bytes | None
    meta: bytes | None


def decode_entry(data) -> EntryRecord:
    f = hawtbuf_fields(data, {1: "varint", 2: "bytes", 3: "varint", 4: "varint", 5: "bytes", 6: "bytes"})
    return EntryRecord(to_int64(f[1]) if 1 in f else None, f.get(2),
                       to_int64(f[3]) if 3 in f else None, to_int32(f[4]) if 4 in f else None,
                       f.get(5), f.get(6))


def decode_index_entry(data) -> tuple[int, int, bytes | None]:
    """(value_location, value_length, meta) of an index entry value: :func:`decode_entry` with a fast path
    for the shapes the store writes (fields 3, 4 and 6, in order); anything else goes the general way."""
    b = data if isinstance(data, bytes) else bytes(data)
    n = len(b)
    pos = 0
    loc = length = 0
    meta = None
    try:
        while pos < n:
            tag = b[pos]
            pos += 1
            if tag == 0x18 or tag == 0x20:
                v = 0
                shift = 0
                while True:
                    c = b[pos]
                    pos += 1
                    v |= (c & 0x7F) << shift
                    if c < 0x80:
                        break
                    shift += 7
                if tag == 0x18:
                    loc = to_int64(v)
                else:
                    length = to_int32(v)
            elif tag == 0x32:
                ln, pos = read_varint(b, pos, n)
                if pos + ln > n:
                    raise IndexError
                meta = b[pos:pos + ln]
                pos += ln
            else:
                raise IndexError
        return loc, length, meta
    except IndexError:
        e = decode_entry(b)
        return e.value_location or 0, e.value_length or 0, e.meta


def entry_rows(items) -> tuple[list, list, list, list]:
    """A collection's index entries ``[(entry key, value)]`` as four columns (sequences, value locations, value
    lengths, status): status 0 an 8-byte entry key and a value of fields 3 and 4 only (varints of at most 10
    bytes; the last of each wins), 1 not an 8-byte key (a subscription's 'p', no message), 2 any other value,
    which :func:`decode_index_entry` reads (its columns 0 here). The reference of the C
    ``leveldb_entry_rows``."""
    seqs, locs, lens, status = [], [], [], []
    for k, v in items:
        if len(k) != 8:
            seqs.append(0), locs.append(0), lens.append(0), status.append(1)
            continue
        seq = _Q.unpack(k)[0]
        loc = length = 0
        st = 0
        pos, n = 0, len(v)
        try:
            while pos < n:
                tag = v[pos]
                if tag != 0x18 and tag != 0x20:
                    raise FormatError("not a plain entry value")
                x, pos = read_varint(v, pos + 1, n)
                if x >> 64:
                    raise FormatError("varint past 64 bits")
                if tag == 0x18:
                    loc = to_int64(x)
                else:
                    length = to_int32(x)
        except FormatError:
            st, loc, length = 2, 0, 0
        seqs.append(seq), locs.append(loc), lens.append(length), status.append(st)
    return seqs, locs, lens, status


def encode_entry_value(location: int | None, length: int | None, meta: bytes | None = None) -> bytes:
    """An index value as the replay writes it (``EntryRecord`` with value_location and value_length)."""
    from amqtool.formats.kahadb.protobuf import encode_field, encode_varint

    out = b""
    if location is not None:
        out += encode_varint(3 << 3) + encode_varint(location)
    if length is not None:
        out += encode_varint(4 << 3) + encode_varint(length)
    if meta is not None:
        out += encode_field(6, meta)
    return out


@dataclass
class SubscriptionRecord:
    topic_key: int
    client_id: str | None
    subscription_name: str | None
    selector: str | None
    destination_name: str | None
    subscribed_destination_name: str | None


def _text(v) -> str | None:
    if v is None:
        return None
    try:
        return v.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FormatError(f"string field is not valid UTF-8 ({err.reason})") from None


def decode_subscription(data) -> SubscriptionRecord:
    f = hawtbuf_fields(data, {1: "varint", 2: "bytes", 3: "bytes", 4: "bytes", 5: "bytes", 6: "bytes"})
    return SubscriptionRecord(to_int64(f.get(1, 0)), _text(f.get(2)), _text(f.get(3)), _text(f.get(4)),
                              _text(f.get(5)), _text(f.get(6)))


def collection_key_of_remove(data) -> int:
    """The key the broker's replay of a REMOVE_COLLECTION record acts on. The writer stores the collection
    key as a bare varint (``encodeVLong``) but the replay parses it as a ``CollectionKey`` message
    (``decodeCollectionKeyRecord``), so the varint is read as a tag: for most keys that throws (and the
    broker's replay stops there), for keys whose low three bits are 4 (an end-group tag) it gives 0."""
    f = hawtbuf_fields(data, {1: "varint"})
    return to_int64(f.get(1, 0))


def decode_vlong(data) -> int:
    v, pos = read_varint(memoryview(data), 0, len(data))
    return to_int64(v)


def collection_index_key(key: int) -> bytes:
    return COLLECTION_PREFIX + _Q.pack(key)


def entry_index_key(collection: int, entry_key: bytes) -> bytes:
    return ENTRY_PREFIX + _Q.pack(collection) + bytes(entry_key)


# the store's own keys LevelDBClient reads with ``get`` when it starts (COLLECTION_META_KEY, DIRTY_INDEX_KEY,
# LOG_REF_INDEX_KEY, LOGS_INDEX_KEY, PRODUCER_IDS_INDEX_KEY)
COUNTER_KEYS = (b":collection-meta", DIRTY_KEY, b":log-refs", b":logs", b":producer_ids")


def is_store_key(key) -> bool:
    """Whether an index key has a shape LevelDBClient writes: ``'c'`` + collection (9 bytes), ``'e'`` +
    collection + 8-byte sequence (17) or + ``'p'`` (a subscription's ack position, 10), or one of the counters'
    ``':'`` names."""
    k = bytes(key)
    n = len(k)
    if k[:1] == COLLECTION_PREFIX:
        return n == 9
    if k[:1] == ENTRY_PREFIX:
        return n == 17 or (n == 10 and k[9:] == ACK_POSITION)
    return k in COUNTER_KEYS


def split_entry_key(key: bytes) -> tuple[int, bytes]:
    """('e' + collection + entry key) -> (collection, entry key)."""
    if len(key) < 9 or key[:1] != ENTRY_PREFIX:
        raise FormatError(f"index key {key[:20].hex()} is not an entry key")
    return _Q.unpack_from(key, 1)[0], bytes(key[9:])


def seq_of(entry_key: bytes) -> int | None:
    """The sequence of an 8-byte entry key (None for 'p' and anything else)."""
    return _Q.unpack(entry_key)[0] if len(entry_key) == 8 else None


@dataclass
class XaAck:
    """A prepared transaction's ack (an entry with ``meta``: ``LevelDBClient.write_uows`` xaAcks): the acked
    DATA record, the entry (collection, sequence) it acks, the subscription key (-1 for a queue)."""

    data_location: int
    data_length: int
    collection: int
    seq: int
    sub: int


def decode_xa_ack(meta) -> XaAck:
    if len(meta) < 36:
        raise FormatError(f"prepared ack meta of {len(meta)} bytes, shorter than its 36-byte head")
    pos, length, qid, seq, sub = struct.unpack_from(">qiqqq", meta, 0)
    return XaAck(pos, length, qid, seq, sub)


def decode_delivery_count(meta) -> int:
    """``decodeQueueEntryMeta``: version varint 1 then the redelivery count; anything else is 0."""
    if not meta:
        return 0
    try:
        ver, pos = read_varint(memoryview(meta), 0, len(meta))
        if ver != 1:
            return 0
        n, _ = read_varint(memoryview(meta), pos, len(meta))
        return to_int32(n)
    except FormatError:
        return 0


@dataclass(frozen=True)
class Xid:
    format_id: int
    global_id: bytes
    branch: bytes
    local: bool = False

    @property
    def key(self) -> str:
        return f"XID:[{self.format_id},globalId={self.global_id.hex()},branchId={self.branch.hex()}]"

    def __str__(self) -> str:
        return self.key


def decode_xid(data) -> str:
    return decode_xid_parts(data).key


def decode_xid_parts(data) -> Xid:
    """A transaction collection's meta: ``wireFormat.marshal(XATransactionId)`` (size prefix, type 112,
    loose formatId, globalTransactionId, branchQualifier) -> ``XID:[fmt,globalId=hex,branchId=hex]``, as
    ``XATransactionId.toString`` prints it."""
    from amqtool.formats.kahadb.openwire import _Reader

    r = _Reader(bytes(data))
    size = r.int()
    if size != r.end - r.pos:
        raise FormatError(f"XATransactionId size prefix {size} but {r.end - r.pos} bytes follow")
    t = r.byte()
    if t != 112:
        raise FormatError(f"OpenWire type {t} is not an XATransactionId (112)")
    fmt = r.int()
    gid = r.byte_array() or b""
    bq = r.byte_array() or b""
    return Xid(fmt, gid, bq)


@dataclass
class CollectionMeta:
    """``LevelDBClient.CollectionMeta``: the broker's entry count of a collection (its ``getMessageCount``)
    and the key of its last added entry (a topic's last sequence, from which a durable subscription's pending
    count is ``lastSeq - ackPosition``)."""

    size: int
    last_key: bytes | None

    @property
    def last_seq(self) -> int:
        return _Q.unpack(self.last_key)[0] if self.last_key is not None and len(self.last_key) == 8 else 0


def decode_collection_meta(data) -> dict[int, CollectionMeta]:
    """The index's ``:collection-meta``: ``storeMap`` wrote ``writeInt(size)`` then per collection
    ``writeLong(key)`` and ``writeObject(CollectionMeta)`` (``size`` long, ``last_key`` byte[])."""
    from amqtool.formats.kahadb.javaser import read_stream

    blocks, objs = read_stream(data)
    if len(blocks) < 4:
        raise FormatError(":collection-meta: no entry count")
    n = struct.unpack_from(">i", blocks, 0)[0]
    if n < 0 or len(blocks) != 4 + 8 * n or len(objs) != n:
        raise FormatError(f":collection-meta says {n} collections, holds {len(objs)}")
    out = {}
    for i, o in enumerate(objs):
        key = struct.unpack_from(">q", blocks, 4 + 8 * i)[0]
        values = getattr(o, "values", None)
        if values is None or "size" not in values:
            raise FormatError(":collection-meta: a value is not a CollectionMeta")
        lk = values.get("last_key")
        out[key] = CollectionMeta(values["size"], lk if isinstance(lk, bytes) else None)
    return out
